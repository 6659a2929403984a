//! Atomic segments (nic-formats.md §A.8).
//!
//! Standard 8-byte atomics use [`AtomicSeg`]. Masked ("extended") atomics select their operand
//! width with the control segment's opmod (`0x08 | (log2(bytes) - 2)`) and use:
//!
//! | op | width | segments after raddr | layout |
//! |---|---|---|---|
//! | masked CS | 4 B | 1 DS | swap, compare, swap_mask, compare_mask (BE32 each) |
//! | masked CS | 8 B | 2 DS | swap, compare (BE64); swap_mask, compare_mask (BE64) |
//! | masked FA | 4 B | 1 DS | add, field_boundary (BE32), 8 reserved bytes |
//! | masked FA | 8 B | 1 DS | add, field_boundary (BE64) |
//!
//! rdma-core v55 does not post masked atomics; these layouts follow the field-practice structs
//! of NVSHMEM/DOCA GPUNetIO and the `mlx5_wqe_masked_atomic_seg` member order in `wqe.h`.

use bytemuck::{Pod, Zeroable};
use gda_hal::{AtomicOp, Be32, Be64};

/// opmod of a masked atomic with 4-byte operands.
pub const OPMOD_EXT_4B: u8 = 0x08;
/// opmod of a masked atomic with 8-byte operands.
pub const OPMOD_EXT_8B: u8 = 0x09;

/// The opmod for masked atomics of `bytes` (4 or 8) operands.
#[inline(always)]
#[must_use]
pub const fn ext_opmod(bytes: u32) -> u8 {
    if bytes == 4 {
        OPMOD_EXT_4B
    } else {
        OPMOD_EXT_8B
    }
}

/// Operand bytes of a masked-atomic opmod, if valid.
#[must_use]
pub const fn ext_bytes(opmod: u8) -> Option<u32> {
    match opmod {
        OPMOD_EXT_4B => Some(4),
        OPMOD_EXT_8B => Some(8),
        _ => None,
    }
}

/// Standard atomic segment: CS = {swap, compare}; FA = {add, 0}.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct AtomicSeg {
    /// Swap value (CS) or addend (FA).
    pub swap_add: Be64,
    /// Compare value (CS); 0 for FA (rdma-core leaves it stale; gda writes 0).
    pub compare: Be64,
}

/// Masked compare-and-swap, 4-byte operands (one 16-byte unit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct MaskedCs32Seg {
    /// New value.
    pub swap: Be32,
    /// Expected value.
    pub compare: Be32,
    /// Bits written.
    pub swap_mask: Be32,
    /// Bits compared.
    pub compare_mask: Be32,
}

/// Masked compare-and-swap, 8-byte operands (two 16-byte units).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct MaskedCs64Seg {
    /// New value.
    pub swap: Be64,
    /// Expected value.
    pub compare: Be64,
    /// Bits written.
    pub swap_mask: Be64,
    /// Bits compared.
    pub compare_mask: Be64,
}

/// Masked fetch-and-add, 4-byte operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct MaskedFa32Seg {
    /// Addend.
    pub add: Be32,
    /// Field boundaries.
    pub field_boundary: Be32,
    /// Reserved (offset 8).
    pub reserved_8: Be64,
}

/// Masked fetch-and-add, 8-byte operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct MaskedFa64Seg {
    /// Addend.
    pub add: Be64,
    /// Field boundaries.
    pub field_boundary: Be64,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<AtomicSeg>() == 16);
    assert!(offset_of!(AtomicSeg, swap_add) == 0 && offset_of!(AtomicSeg, compare) == 8);
    assert!(size_of::<MaskedCs32Seg>() == 16);
    assert!(offset_of!(MaskedCs32Seg, swap) == 0 && offset_of!(MaskedCs32Seg, compare) == 4);
    assert!(
        offset_of!(MaskedCs32Seg, swap_mask) == 8 && offset_of!(MaskedCs32Seg, compare_mask) == 12
    );
    assert!(size_of::<MaskedCs64Seg>() == 32);
    assert!(offset_of!(MaskedCs64Seg, swap) == 0 && offset_of!(MaskedCs64Seg, compare) == 8);
    assert!(
        offset_of!(MaskedCs64Seg, swap_mask) == 16 && offset_of!(MaskedCs64Seg, compare_mask) == 24
    );
    assert!(size_of::<MaskedFa32Seg>() == 16);
    assert!(offset_of!(MaskedFa32Seg, add) == 0 && offset_of!(MaskedFa32Seg, field_boundary) == 4);
    assert!(offset_of!(MaskedFa32Seg, reserved_8) == 8);
    assert!(size_of::<MaskedFa64Seg>() == 16);
    assert!(offset_of!(MaskedFa64Seg, add) == 0 && offset_of!(MaskedFa64Seg, field_boundary) == 8);
};

/// The atomic segment(s) of one atomic WQE, as 16-byte units (1 or 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicUnits {
    units: [[u8; 16]; 2],
    n: usize,
}

impl AtomicUnits {
    /// The units to write after the raddr segment.
    #[inline(always)]
    #[must_use]
    pub fn as_slice(&self) -> &[[u8; 16]] {
        self.units.get(..self.n).unwrap_or(&[])
    }
}

/// Encodes `op` at `bytes` width (4 or 8; standard CS/FA are always 8) into its segments.
/// Operands are truncated to the width.
#[inline(always)]
#[must_use]
pub fn encode(op: &AtomicOp, bytes: u32) -> AtomicUnits {
    let one = |b: &[u8]| {
        let mut u = [0u8; 16];
        u.copy_from_slice(b);
        u
    };
    match (*op, bytes) {
        (AtomicOp::CompareSwap { compare, swap }, _) => {
            let s = AtomicSeg {
                swap_add: Be64::new(swap),
                compare: Be64::new(compare),
            };
            AtomicUnits {
                units: [one(bytemuck::bytes_of(&s)), [0; 16]],
                n: 1,
            }
        }
        (AtomicOp::FetchAdd { add }, _) => {
            let s = AtomicSeg {
                swap_add: Be64::new(add),
                compare: Be64::ZERO,
            };
            AtomicUnits {
                units: [one(bytemuck::bytes_of(&s)), [0; 16]],
                n: 1,
            }
        }
        (
            AtomicOp::MaskedCompareSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            },
            4,
        ) => {
            let s = MaskedCs32Seg {
                swap: Be32::new(swap as u32),
                compare: Be32::new(compare as u32),
                swap_mask: Be32::new(swap_mask as u32),
                compare_mask: Be32::new(compare_mask as u32),
            };
            AtomicUnits {
                units: [one(bytemuck::bytes_of(&s)), [0; 16]],
                n: 1,
            }
        }
        (
            AtomicOp::MaskedCompareSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            },
            _,
        ) => {
            let s = MaskedCs64Seg {
                swap: Be64::new(swap),
                compare: Be64::new(compare),
                swap_mask: Be64::new(swap_mask),
                compare_mask: Be64::new(compare_mask),
            };
            let b = bytemuck::bytes_of(&s);
            AtomicUnits {
                units: [one(&b[..16]), one(&b[16..])],
                n: 2,
            }
        }
        (
            AtomicOp::MaskedFetchAdd {
                add,
                field_boundary,
            },
            4,
        ) => {
            let s = MaskedFa32Seg {
                add: Be32::new(add as u32),
                field_boundary: Be32::new(field_boundary as u32),
                reserved_8: Be64::ZERO,
            };
            AtomicUnits {
                units: [one(bytemuck::bytes_of(&s)), [0; 16]],
                n: 1,
            }
        }
        (
            AtomicOp::MaskedFetchAdd {
                add,
                field_boundary,
            },
            _,
        ) => {
            let s = MaskedFa64Seg {
                add: Be64::new(add),
                field_boundary: Be64::new(field_boundary),
            };
            AtomicUnits {
                units: [one(bytemuck::bytes_of(&s)), [0; 16]],
                n: 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_cs_segment() {
        // nic-formats.md §A.11: swap 0x2222 then compare 0x1111.
        let s = AtomicSeg {
            swap_add: Be64::new(0x2222),
            compare: Be64::new(0x1111),
        };
        assert_eq!(
            bytemuck::bytes_of(&s),
            &[0, 0, 0, 0, 0, 0, 0x22, 0x22, 0, 0, 0, 0, 0, 0, 0x11, 0x11]
        );
        assert_eq!(
            (ext_opmod(4), ext_opmod(8), ext_bytes(0x09), ext_bytes(0)),
            (0x08, 0x09, Some(8), None)
        );
    }
}
