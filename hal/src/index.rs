//! Wrapping ring indices.
//!
//! NIC counters wrap at widths that are not the machine word: mlx5's WQE index and doorbell
//! record are 16-bit, its CQ consumer index 24-bit, bnxt's slot index 24-bit plus an epoch. Each
//! gets a newtype whose arithmetic wraps explicitly; rings are powers of two so the slot of a
//! counter is a mask, never a `%`.

/// A power-of-two ring geometry (`entries` slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    log2: u32,
}

impl Ring {
    /// A ring of `entries` slots, if `entries` is a non-zero power of two.
    #[must_use]
    pub const fn new(entries: u32) -> Option<Self> {
        if entries.is_power_of_two() {
            Some(Self {
                log2: entries.trailing_zeros(),
            })
        } else {
            None
        }
    }

    /// A ring of `1 << log2` slots. `log2` is clamped to 31.
    #[must_use]
    pub const fn from_log2(log2: u32) -> Self {
        Self {
            log2: if log2 > 31 { 31 } else { log2 },
        }
    }

    /// Number of slots.
    #[inline(always)]
    #[must_use]
    pub const fn entries(self) -> u32 {
        1 << self.log2
    }

    /// log2 of the number of slots.
    #[inline(always)]
    #[must_use]
    pub const fn log2(self) -> u32 {
        self.log2
    }

    /// `entries - 1`.
    #[inline(always)]
    #[must_use]
    pub const fn mask(self) -> u32 {
        self.entries() - 1
    }

    /// The slot a free-running counter points at.
    #[inline(always)]
    #[must_use]
    pub const fn slot(self, counter: u32) -> u32 {
        counter & self.mask()
    }

    /// The pass (lap) number of a free-running counter, modulo 2 — the expected owner/phase bit.
    #[inline(always)]
    #[must_use]
    pub const fn pass_parity(self, counter: u32) -> u32 {
        (counter >> self.log2) & 1
    }
}

/// A free-running 32-bit producer counter in queue units (mlx5: WQEBBs), as rdma-core's
/// `sq.cur_post`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct ProdIdx(pub u32);

impl ProdIdx {
    /// The counter advanced by `units`, wrapping at 2^32.
    #[inline(always)]
    #[must_use]
    pub const fn add(self, units: u32) -> Self {
        Self(self.0.wrapping_add(units))
    }

    /// The 16-bit WQE index of this position (mlx5 `wqe_index`, the doorbell-record value).
    #[inline(always)]
    #[must_use]
    pub const fn idx16(self) -> WrapIdx16 {
        WrapIdx16(self.0 as u16)
    }

    /// Units from `earlier` to `self`, modulo 2^32.
    #[inline(always)]
    #[must_use]
    pub const fn since(self, earlier: Self) -> u32 {
        self.0.wrapping_sub(earlier.0)
    }
}

/// A 16-bit wrapping index (mlx5 `wqe_index`, `wqe_counter`, doorbell-record counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct WrapIdx16(pub u16);

impl WrapIdx16 {
    /// Advanced by `n`, wrapping at 2^16.
    #[inline(always)]
    #[must_use]
    pub const fn add(self, n: u16) -> Self {
        Self(self.0.wrapping_add(n))
    }

    /// Forward distance from `earlier` to `self`, modulo 2^16.
    #[inline(always)]
    #[must_use]
    pub const fn since(self, earlier: Self) -> u16 {
        self.0.wrapping_sub(earlier.0)
    }
}

/// A 24-bit wrapping index (mlx5 CQ consumer index in the doorbell record, PSNs, bnxt slots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct WrapIdx24(u32);

impl WrapIdx24 {
    /// Mask of the 24 bits.
    pub const MASK: u32 = 0x00ff_ffff;

    /// The index `value mod 2^24`.
    #[inline(always)]
    #[must_use]
    pub const fn new_truncate(value: u32) -> Self {
        Self(value & Self::MASK)
    }

    /// The index, if `value < 2^24`.
    #[inline(always)]
    #[must_use]
    pub const fn try_new(value: u32) -> Option<Self> {
        if value <= Self::MASK {
            Some(Self(value))
        } else {
            None
        }
    }

    /// The raw 24-bit value.
    #[inline(always)]
    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Advanced by `n`, wrapping at 2^24.
    #[inline(always)]
    #[must_use]
    pub const fn add(self, n: u32) -> Self {
        Self(self.0.wrapping_add(n) & Self::MASK)
    }

    /// Forward distance from `earlier` to `self`, modulo 2^24.
    #[inline(always)]
    #[must_use]
    pub const fn since(self, earlier: Self) -> u32 {
        self.0.wrapping_sub(earlier.0) & Self::MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ring_geometry() {
        assert!(Ring::new(0).is_none() && Ring::new(3).is_none());
        let r = Ring::new(8).unwrap();
        assert_eq!(
            (r.mask(), r.slot(13), r.pass_parity(7), r.pass_parity(8)),
            (7, 5, 0, 1)
        );
    }

    proptest! {
        // Index math against a plain u64 model across wraps.
        #[test]
        fn counters_match_u64_model(start in 0u64..(1u64 << 34), steps in proptest::collection::vec(0u32..5000, 1..50)) {
            let mut model = start;
            let mut p = ProdIdx(start as u32);
            let mut i16 = WrapIdx16(start as u16);
            let mut i24 = WrapIdx24::new_truncate(start as u32);
            let ring = Ring::new(1024).unwrap();
            for s in steps {
                let before = (p, i16, i24);
                model += u64::from(s);
                p = p.add(s);
                i16 = i16.add(s as u16);
                i24 = i24.add(s);
                prop_assert_eq!(u64::from(p.0), model & 0xffff_ffff);
                prop_assert_eq!(u64::from(i16.0), model & 0xffff);
                prop_assert_eq!(p.idx16(), i16);
                prop_assert_eq!(u64::from(i24.get()), model & 0xff_ffff);
                prop_assert_eq!(u64::from(ring.slot(p.0)), model & 1023);
                prop_assert_eq!(u64::from(ring.pass_parity(p.0)), (model >> 10) & 1);
                prop_assert_eq!(p.since(before.0), s);
                prop_assert_eq!(i16.since(before.1), s as u16);
                prop_assert_eq!(i24.since(before.2), s & 0xff_ffff);
            }
        }
    }
}
