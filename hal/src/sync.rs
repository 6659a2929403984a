//! Atomics used by the posting protocol: `core`'s normally, loom's under `--cfg loom` so the
//! protocol can be model-checked (`RUSTFLAGS="--cfg loom" cargo test -p gda-hal --test loom`).

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU32, AtomicU64};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64};

/// One step of a bounded wait: spin a little, then yield the CPU (a 2-core machine runs the
/// software NIC beside the producers), and give up at the deadline.
#[derive(Debug)]
#[cfg_attr(loom, allow(dead_code))]
pub struct Waiter {
    spins: u32,
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    timeout_ms: u64,
    /// Set at the first yield, so a wait that never blocks never reads the clock.
    #[cfg(feature = "std")]
    deadline: Option<std::time::Instant>,
    #[cfg(not(feature = "std"))]
    budget: u64,
}

/// A bounded wait ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedOut;

#[cfg_attr(loom, allow(dead_code))]
impl Waiter {
    /// Spins before each yield.
    const SPINS_BEFORE_YIELD: u32 = 64;

    /// A wait that gives up after `timeout_ms` milliseconds (with `std`), or after about
    /// `timeout_ms * 100_000` spin steps without `std` (under `--cfg loom`: `timeout_ms`
    /// yields).
    #[must_use]
    pub fn new(timeout_ms: u64) -> Self {
        Self {
            spins: 0,
            timeout_ms,
            #[cfg(feature = "std")]
            deadline: None,
            #[cfg(not(feature = "std"))]
            budget: timeout_ms.saturating_mul(100_000),
        }
    }

    /// Waits one step; `Err` once the deadline has passed.
    pub fn step(&mut self) -> Result<(), TimedOut> {
        self.spins = self.spins.wrapping_add(1);
        #[cfg(loom)]
        {
            // Under the model checker `timeout_ms` counts yields: loom may keep choosing a
            // yielding waiter over the runnable thread it waits for (a yield point is not a
            // preemption, so the preemption bound does not end such a schedule). A budget makes
            // those unfair schedules end in `TimedOut` instead of an unbounded path.
            if u64::from(self.spins) > self.timeout_ms {
                return Err(TimedOut);
            }
            loom::thread::yield_now();
            return Ok(());
        }
        #[cfg(not(loom))]
        {
            if self.spins % Self::SPINS_BEFORE_YIELD != 0 {
                core::hint::spin_loop();
                return Ok(());
            }
            #[cfg(feature = "std")]
            {
                std::thread::yield_now();
                let now = std::time::Instant::now();
                match self.deadline {
                    None => {
                        self.deadline =
                            now.checked_add(std::time::Duration::from_millis(self.timeout_ms));
                        Ok(())
                    }
                    Some(d) if now > d => Err(TimedOut),
                    Some(_) => Ok(()),
                }
            }
            #[cfg(not(feature = "std"))]
            {
                self.budget = self
                    .budget
                    .saturating_sub(u64::from(Self::SPINS_BEFORE_YIELD));
                if self.budget == 0 {
                    Err(TimedOut)
                } else {
                    Ok(())
                }
            }
        }
    }
}
