//! Completion progress from a narrow hardware counter, window-checked.
//!
//! A *collapsed* CQ has one slot that the NIC overwrites with every completion; all software can
//! read is the narrow counter of the newest completed WQE (mlx5: the 16-bit `wqe_counter`, which
//! is the WQE's starting WQEBB index). To know how far the queue has progressed, software must
//! widen that counter back to its free-running 64-bit position.
//!
//! Other GDA libraries did this by adding the raw 16-bit delta to a done counter. When the slot
//! still held a stale value, or the counter had wrapped, the done counter ran past what had been
//! posted and quiet returned before the data had landed (docs/lessons.md §1). Here a widened value is
//! accepted only if it falls in the window of WQEs that have **actually been rung**:
//! `[newest_done, rung)`. Anything else is reported as [`OutOfWindow`] and leaves the state
//! unchanged.

/// Widens a `BITS`-bit completion counter into a free-running 64-bit position.
///
/// Positions are queue-unit counters (mlx5: WQEBBs) of the *start* of a WQE, as the hardware
/// reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollapsedProgress {
    /// Start position of the newest WQE known complete (meaningful when `seen`).
    newest: u64,
    seen: bool,
    /// `2^bits - 1` for a `bits`-wide hardware counter.
    mask: u64,
}

/// A counter value that cannot belong to a WQE that was rung: stale, wrapped, or garbage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfWindow {
    /// The raw hardware value.
    pub raw: u32,
    /// Where the value would have put the queue.
    pub widened: u64,
    /// The newest position already known complete (0 if none).
    pub newest_done: u64,
    /// The producer position rung so far (exclusive upper bound).
    pub rung: u64,
}

impl core::fmt::Display for OutOfWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "completion counter {:#x} widens to {} which is outside the rung window [{}, {})",
            self.raw, self.widened, self.newest_done, self.rung
        )
    }
}

impl CollapsedProgress {
    /// No completion seen yet, for a `bits`-wide hardware counter (clamped to 1..=32); the queue
    /// starts at position 0.
    #[must_use]
    pub const fn new(bits: u32) -> Self {
        Self::starting_at(bits, 0)
    }

    /// Starts tracking a queue whose first WQE starts at `first` (a queue resumed mid-stream).
    #[must_use]
    pub const fn starting_at(bits: u32, first: u64) -> Self {
        let bits = if bits == 0 {
            1
        } else if bits > 32 {
            32
        } else {
            bits
        };
        Self {
            newest: first,
            seen: false,
            mask: (1u64 << bits) - 1,
        }
    }

    /// Folds in a raw counter read from the collapsed CQE.
    ///
    /// `rung` is the producer position (exclusive) covered by doorbells rung so far: a WQE can
    /// only complete if it starts below it. Returns the widened start position of the newest
    /// complete WQE. A value outside `[newest_done, rung)` returns [`OutOfWindow`] and changes
    /// nothing, so a stale read can never move progress past what was posted.
    ///
    /// The window `rung - newest_done` must be at most `2^bits` (rings are at most half the
    /// counter range); if it is not, every value is ambiguous and rejected.
    #[inline(always)]
    pub fn observe(&mut self, raw: u32, rung: u64) -> Result<u64, OutOfWindow> {
        let base = self.newest;
        let delta = (u64::from(raw).wrapping_sub(base)) & self.mask;
        let widened = base.wrapping_add(delta);
        let window_ok = rung.wrapping_sub(base) <= self.mask + 1;
        if widened < base || widened >= rung || !window_ok {
            return Err(OutOfWindow {
                raw,
                widened,
                newest_done: base,
                rung,
            });
        }
        self.newest = widened;
        self.seen = true;
        Ok(widened)
    }

    /// Every WQE starting below this position is complete.
    #[inline(always)]
    #[must_use]
    pub const fn complete_below(&self) -> u64 {
        if self.seen {
            self.newest + 1
        } else {
            self.newest
        }
    }

    /// Whether the WQE starting at `start` is known complete.
    #[inline(always)]
    #[must_use]
    pub const fn is_complete(&self, start: u64) -> bool {
        start < self.complete_below()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Progress over a 16-bit counter (mlx5's `wqe_counter`).
    mod p16 {
        use super::CollapsedProgress;
        pub fn fresh() -> CollapsedProgress {
            CollapsedProgress::new(16)
        }
        pub fn starting_at(x: u64) -> CollapsedProgress {
            CollapsedProgress::starting_at(16, x)
        }
    }

    #[test]
    fn stale_and_wrapped_values_are_rejected() {
        let mut p = p16::fresh();
        assert!(!p.is_complete(0));
        assert_eq!(p.observe(0, 1), Ok(0));
        assert!(p.is_complete(0));
        // Same value again (stale slot): no progress, still fine.
        assert_eq!(p.observe(0, 5), Ok(0));
        // A value past what was rung is garbage.
        assert!(p.observe(7, 5).is_err());
        assert_eq!(p.complete_below(), 1, "rejected value changed nothing");
        // Move near the 16-bit wrap.
        let mut p = p16::starting_at(0xfff0);
        assert_eq!(p.observe(0xfffe, 0x1_0004), Ok(0xfffe));
        assert_eq!(
            p.observe(0x0002, 0x1_0004),
            Ok(0x1_0002),
            "wrap widened correctly"
        );
        // An older value (before newest) widens a whole lap ahead: rejected, not "progress".
        let err = p.observe(0xfffe, 0x1_0004).unwrap_err();
        assert_eq!(err.widened, 0x1_fffe);
        assert_eq!(p.complete_below(), 0x1_0003);
        // A window of 2^16 or more is ambiguous.
        assert!(p16::fresh().observe(5, 0x1_0000).is_ok());
        assert!(p16::fresh().observe(5, 0x1_0001).is_err());
    }

    proptest! {
        // Against a u64 model: a monotone sequence of completions inside the rung window is always
        // widened exactly; any other raw value is rejected without changing state.
        #[test]
        fn widening_matches_u64_model(start in 0u64..(1 << 40), steps in proptest::collection::vec((1u64..3000, 0u64..3000, any::<u16>()), 1..60)) {
            let mut p = p16::starting_at(start);
            let mut newest = start;
            let mut rung = start + 1;
            let mut first = true;
            for (post, adv, junk) in steps {
                rung += post;
                // the hardware completes the WQE at `newest + adv`, if it was rung
                let target = (newest + adv).min(rung - 1);
                if first { newest = start; }
                let target = target.max(newest);
                prop_assume!(rung - newest < (1 << 16));
                prop_assert_eq!(p.observe(target as u32 & 0xffff, rung), Ok(target));
                newest = target;
                first = false;
                // a junk value is either exactly in-window (then it is accepted and is in-window) or rejected
                let before = p;
                match p.observe(u32::from(junk), rung) {
                    Ok(w) => { prop_assert!(w >= newest && w < rung); newest = w; }
                    Err(_) => prop_assert_eq!(p, before),
                }
                prop_assert!(p.complete_below() <= rung);
            }
        }
    }
}
