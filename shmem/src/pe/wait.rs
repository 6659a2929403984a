//! Ordering and waiting: quiet, fence, `wait_until` and `test` in their forms, and the bounded
//! polling loop under every wait (which also notices dead peers and broken bootstraps).

use std::time::{Duration, Instant};

use gda_hal::Provider;

use super::Pe;
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::transport::load;
use crate::types::{AtomicInt, Cmp, ShortInt};

impl<P: Provider> Pe<P> {
    /// Waits until every put, get, atomic and signal this PE issued is complete and visible
    /// at its target.
    pub fn quiet(&self) -> Result<()> {
        self.net.quiet_all()
    }

    /// Orders this PE's puts, atomics and signals to each PE: those issued after the fence
    /// are delivered after those issued before it. Not a quiet: nothing is waited for here.
    /// P2P: a release fence (later stores cannot pass earlier ones). RDMA: the next WQE to
    /// each PE carries the FENCE flag (the NIC starts it only after earlier READs and atomics
    /// on that QP completed; WRITEs on one RC QP are placed in order).
    pub fn fence(&self) {
        self.net.fence_all();
    }

    /// The PE (if any) whose process is gone; `only`: check just that one.
    pub(crate) fn gone_pe(&self, only: Option<u32>) -> Option<ShmemError> {
        self.net.live.gone(only)
    }

    /// Polls `done` until it holds, within the timeout (`GDA_SHMEM_TIMEOUT_MS`), failing early
    /// when a same-host PE's process is gone or the job is aborted, and keeping RDMA
    /// completions flowing meanwhile: how callers build waits of their own (the C library's
    /// vector waits and locks). `what` describes the wait for the timeout error.
    pub fn wait_on(
        &self,
        what: &dyn Fn() -> String,
        done: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        self.wait_for(what, &Vec::new, done)
    }

    /// Polls `done` until it holds, within the timeout, failing early when a same-host PE's
    /// process is gone. `missing` names the PEs awaited, for the timeout error.
    pub(crate) fn wait_for(
        &self,
        what: &dyn Fn() -> String,
        missing: &dyn Fn() -> Vec<u32>,
        mut done: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let start = Instant::now();
        let mut next_check = start + Duration::from_millis(10);
        let mut spins = 0u32;
        // A NIC whose work runs in the waiting thread (the software NIC's wire engine between
        // processes) serves the peers' requests from here: the wait runs its pass each round
        // and does not nap while there is work (a napping PE leaves its peers to an engine
        // thread that must first be woken, 15-36 us on this project's VM). After
        // `SERVING_IDLE` without any, it naps as other waits do: the engine thread serves
        // meanwhile (peers wake it), and a long wait does not burn a core.
        const SERVING_IDLE: Duration = Duration::from_millis(1);
        let serves = self.net.progress.is_some();
        let mut served = start;
        // Rounds since the clock was last looked at: the health and timeout checks below run
        // at least every 256 rounds, however busy serving keeps the spinning (a peer that
        // keeps sending must not keep a wait from timing out or noticing a dead PE).
        let mut unchecked = 0u32;
        loop {
            // A pass that served something starts the spinning over: the thread is busy
            // doing the NIC's work, not idle (yielding after each such pass, a system call,
            // halved the rate at which it serves).
            if serves && self.net.run_nic() {
                spins = 0;
                served = Instant::now();
            }
            if done()? {
                return Ok(());
            }
            spins += 1;
            unchecked += 1;
            if spins < 256 && unchecked < 256 {
                std::hint::spin_loop();
                continue;
            }
            unchecked = 0;
            // Spin, then yield. With RDMA routes a wait that has lasted a while also naps, for
            // an eighth of the time waited so far (at most 1 ms: the wake-up delay stays a small
            // fraction of the wait): with the software NIC the engines are extra threads, and
            // on an oversubscribed host (2 cores here) a waiter that only yields keeps them
            // from the CPU, while short fixed naps cost a timer interrupt each.
            let now = Instant::now();
            let waited = now - start;
            let serving = serves && now.duration_since(served) < SERVING_IDLE;
            if spins < 256 {
                // Still spinning: only the checks below.
            } else if self.net.rdma_routes > 0 && !serving && waited > Duration::from_micros(50) {
                std::thread::sleep((waited / 8).min(Duration::from_millis(1)));
            } else {
                std::thread::yield_now();
            }
            if now >= next_check {
                next_check = now + Duration::from_millis(10);
                self.poll_health(what)?;
                if now - start >= self.timeout {
                    return Err(ShmemError::Timeout {
                        what: what(),
                        after: self.timeout,
                        missing: missing(),
                    });
                }
            }
        }
    }

    /// One health step of a wait of `what` that polls by itself (every wait of this PE does
    /// it every 10 ms): fails when a same-host PE's process is gone or the bootstrap broke
    /// down, and keeps this PE's completions flowing so peers' waits on it make progress.
    ///
    /// # Errors
    /// [`ShmemError::PeGone`] naming the PE, or [`ShmemError::Boot`] with the reason.
    pub fn poll_health(&self, what: &dyn Fn() -> String) -> Result<()> {
        if let Some(ShmemError::PeGone { pe, pid, .. }) = self.gone_pe(None) {
            return Err(ShmemError::PeGone {
                pe,
                pid,
                what: what(),
            });
        }
        if let Some(why) = self.boot.borrow().broken() {
            return Err(ShmemError::Boot(format!(
                "{why} (while waiting for {})",
                what()
            )));
        }
        self.net.progress_all();
        Ok(())
    }

    /// Waits until this PE's `ivar[idx] <cmp> value` (`shmem_wait_until`).
    pub fn wait_until<T: AtomicInt + PartialOrd>(
        &self,
        ivar: Sym<T>,
        idx: usize,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        let off = self.amo_off(ivar, idx)?;
        // SAFETY: an aligned operand in this PE's heap, accessed atomically by all.
        let load = || T::from_bits(unsafe { load(self.net.local(off), T::WIDTH) });
        self.wait_for(
            &|| format!("{ivar:?}[{idx}] {cmp:?} {value:?}"),
            &Vec::new,
            || Ok(cmp.holds(load(), value)),
        )
    }

    /// Whether this PE's `ivar[idx] <cmp> value` holds now (`shmem_test`).
    pub fn test<T: AtomicInt + PartialOrd>(
        &self,
        ivar: Sym<T>,
        idx: usize,
        cmp: Cmp,
        value: T,
    ) -> Result<bool> {
        let off = self.amo_off(ivar, idx)?;
        // SAFETY: an aligned operand in this PE's heap, accessed atomically by all.
        let v = T::from_bits(unsafe { load(self.net.local(off), T::WIDTH) });
        Ok(cmp.holds(v, value))
    }

    /// Whether this PE's 16-bit `ivar[idx] <cmp> value` holds now (`shmem_short_test`, the
    /// deprecated `short` and `unsigned short` forms).
    pub fn test_short<T: ShortInt>(
        &self,
        ivar: Sym<T>,
        idx: usize,
        cmp: Cmp,
        value: T,
    ) -> Result<bool> {
        let off = self.at(ivar, idx, 1)?;
        if off % 2 != 0 {
            return Err(ShmemError::Range(format!(
                "synchronisation variable {ivar:?}[{idx}] is not aligned"
            )));
        }
        // SAFETY: an aligned 16-bit operand in this PE's memory (checked above), which peers
        // store to with puts; read as an atomic, as the other widths are.
        let v = unsafe { std::sync::atomic::AtomicU16::from_ptr(self.net.local(off).cast()) }
            .load(std::sync::atomic::Ordering::Acquire);
        Ok(cmp.holds(T::from_u16(v), value))
    }

    /// Waits until this PE's 16-bit `ivar[idx] <cmp> value` (`shmem_short_wait_until`, the
    /// deprecated `short` and `unsigned short` forms).
    pub fn wait_until_short<T: ShortInt>(
        &self,
        ivar: Sym<T>,
        idx: usize,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        self.wait_for(
            &|| format!("{ivar:?}[{idx}] {cmp:?} {value:?}"),
            &Vec::new,
            || self.test_short(ivar, idx, cmp, value),
        )
    }

    /// The considered elements `i` of `ivars` (those `status` does not exclude) with
    /// `ivars[i] <cmp> value(i)`; with `first`, only the first one.
    fn satisfied_by<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: impl Fn(usize) -> T,
        first: bool,
    ) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for i in 0..ivars.len() {
            if status.is_some_and(|s| s.get(i).copied().unwrap_or(false)) {
                continue;
            }
            if self.test(ivars, i, cmp, value(i))? {
                out.push(i);
                if first {
                    break;
                }
            }
        }
        Ok(out)
    }

    fn considered(n: usize, status: Option<&[bool]>) -> usize {
        (0..n)
            .filter(|&i| !status.is_some_and(|s| s.get(i).copied().unwrap_or(false)))
            .count()
    }

    /// `values` checked against `ivars`: one comparison value per element.
    fn vector<T: AtomicInt>(ivars: Sym<T>, values: &[T]) -> Result<&[T]> {
        if values.len() != ivars.len() {
            return Err(ShmemError::Invalid(format!(
                "{} comparison values for {} variables",
                values.len(),
                ivars.len()
            )));
        }
        Ok(values)
    }

    // The three kinds of multi-variable test and wait, over a comparison value per element
    // (`value(i)`): the scalar and `_vector` forms below are these with one value for all, or
    // with each its own.

    fn all_by<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: impl Fn(usize) -> T,
    ) -> Result<bool> {
        Ok(self.satisfied_by(ivars, status, cmp, value, false)?.len()
            == Self::considered(ivars.len(), status))
    }

    /// The first considered element satisfying the test, scanning from the one after the index
    /// the last `_any` call on this array returned (so a series of calls comes round to every
    /// element that keeps satisfying it: OpenSHMEM 1.5's `shmem_test_any` "must eventually
    /// return i"; before, element 0 won every call).
    fn any_by<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: impl Fn(usize) -> T,
    ) -> Result<Option<usize>> {
        self.fair_any(ivars, status, |i| self.test(ivars, i, cmp, value(i)))
    }

    /// The `_any` scan of `ivars` through `holds(i)` (any element type): considered elements
    /// from the one after the index the last call on this array returned, round to it.
    pub(crate) fn fair_any<T>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        mut holds: impl FnMut(usize) -> Result<bool>,
    ) -> Result<Option<usize>> {
        /// Arrays whose next start is remembered (each one entry); past it, all are forgotten.
        const ARRAYS_KEPT: usize = 256;
        let n = ivars.len;
        if n == 0 {
            return Ok(None);
        }
        let key = (ivars.heap, ivars.off, n);
        let start = self.any_next.borrow().get(&key).copied().unwrap_or(0) % n;
        for k in 0..n {
            let i = (start + k) % n;
            if status.is_some_and(|s| s.get(i).copied().unwrap_or(false)) {
                continue;
            }
            if holds(i)? {
                let mut next = self.any_next.borrow_mut();
                if next.len() >= ARRAYS_KEPT && !next.contains_key(&key) {
                    next.clear();
                }
                next.insert(key, (i + 1) % n);
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    fn wait_all_by<T: AtomicInt + PartialOrd>(
        &self,
        what: &dyn Fn() -> String,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: impl Fn(usize) -> T + Copy,
    ) -> Result<()> {
        self.wait_for(what, &Vec::new, || self.all_by(ivars, status, cmp, value))
    }

    /// `None` at once when every element is excluded.
    fn wait_any_by<T: AtomicInt + PartialOrd>(
        &self,
        what: &dyn Fn() -> String,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: impl Fn(usize) -> T + Copy,
    ) -> Result<Option<usize>> {
        if Self::considered(ivars.len(), status) == 0 {
            return Ok(None);
        }
        let mut found = None;
        self.wait_for(what, &Vec::new, || {
            found = self.any_by(ivars, status, cmp, value)?;
            Ok(found.is_some())
        })?;
        Ok(found)
    }

    /// Empty at once when every element is excluded.
    fn wait_some_by<T: AtomicInt + PartialOrd>(
        &self,
        what: &dyn Fn() -> String,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: impl Fn(usize) -> T + Copy,
    ) -> Result<Vec<usize>> {
        if Self::considered(ivars.len(), status) == 0 {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        self.wait_for(what, &Vec::new, || {
            found = self.satisfied_by(ivars, status, cmp, value, false)?;
            Ok(!found.is_empty())
        })?;
        Ok(found)
    }

    /// Whether every element of `ivars` not excluded by `status` (true = skip) satisfies the
    /// comparison (`shmem_test_all`).
    pub fn test_all<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<bool> {
        self.all_by(ivars, status, cmp, |_| value)
    }

    /// The first element satisfying the comparison, if any (`shmem_test_any`).
    pub fn test_any<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        self.any_by(ivars, status, cmp, |_| value)
    }

    /// Every element satisfying the comparison (`shmem_test_some`).
    pub fn test_some<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        self.satisfied_by(ivars, status, cmp, |_| value, false)
    }

    /// Waits until every considered element satisfies the comparison (`shmem_wait_until_all`).
    pub fn wait_until_all<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        let what = || format!("all of {ivars:?} {cmp:?} {value:?}");
        self.wait_all_by(&what, ivars, status, cmp, |_| value)
    }

    /// Waits until some considered element satisfies it; returns its index
    /// (`shmem_wait_until_any`; `None` if every element is excluded).
    pub fn wait_until_any<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        let what = || format!("any of {ivars:?} {cmp:?} {value:?}");
        self.wait_any_by(&what, ivars, status, cmp, |_| value)
    }

    /// Waits until at least one considered element satisfies it; returns all that do
    /// (`shmem_wait_until_some`).
    pub fn wait_until_some<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        let what = || format!("some of {ivars:?} {cmp:?} {value:?}");
        self.wait_some_by(&what, ivars, status, cmp, |_| value)
    }

    /// Whether every considered element `i` satisfies `ivars[i] <cmp> values[i]`
    /// (`shmem_test_all_vector`).
    ///
    /// # Errors
    /// [`ShmemError::Invalid`] if `values` has another length than `ivars`.
    pub fn test_all_vector<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<bool> {
        let v = Self::vector(ivars, values)?;
        self.all_by(ivars, status, cmp, |i| v[i])
    }

    /// The first considered element satisfying its comparison, if any
    /// (`shmem_test_any_vector`).
    ///
    /// # Errors
    /// As [`Pe::test_all_vector`].
    pub fn test_any_vector<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Option<usize>> {
        let v = Self::vector(ivars, values)?;
        self.any_by(ivars, status, cmp, |i| v[i])
    }

    /// Every considered element satisfying its comparison (`shmem_test_some_vector`).
    ///
    /// # Errors
    /// As [`Pe::test_all_vector`].
    pub fn test_some_vector<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Vec<usize>> {
        let v = Self::vector(ivars, values)?;
        self.satisfied_by(ivars, status, cmp, |i| v[i], false)
    }

    /// Waits until every considered element satisfies its comparison
    /// (`shmem_wait_until_all_vector`).
    ///
    /// # Errors
    /// As [`Pe::test_all_vector`], and the wait's timeout.
    pub fn wait_until_all_vector<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<()> {
        let v = Self::vector(ivars, values)?;
        let what = || format!("all of {ivars:?} {cmp:?} their values");
        self.wait_all_by(&what, ivars, status, cmp, |i| v[i])
    }

    /// Waits until some considered element satisfies its comparison; returns its index
    /// (`shmem_wait_until_any_vector`; `None` if every element is excluded).
    ///
    /// # Errors
    /// As [`Pe::wait_until_all_vector`].
    pub fn wait_until_any_vector<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Option<usize>> {
        let v = Self::vector(ivars, values)?;
        let what = || format!("any of {ivars:?} {cmp:?} their values");
        self.wait_any_by(&what, ivars, status, cmp, |i| v[i])
    }

    /// Waits until at least one considered element satisfies its comparison; returns all that
    /// do (`shmem_wait_until_some_vector`).
    ///
    /// # Errors
    /// As [`Pe::wait_until_all_vector`].
    pub fn wait_until_some_vector<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Vec<usize>> {
        let v = Self::vector(ivars, values)?;
        let what = || format!("some of {ivars:?} {cmp:?} their values");
        self.wait_some_by(&what, ivars, status, cmp, |i| v[i])
    }
}
