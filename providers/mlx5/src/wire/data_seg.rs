//! Data (pointer) segment (`struct mlx5_wqe_data_seg`, nic-formats.md §A.6). Note the order:
//! byte count, lkey, address — not `ibv_sge`'s address, length, lkey.

use bytemuck::{Pod, Zeroable};
use gda_hal::{Be32, Be64, Sge};

use super::ParseError;

/// `byte_count` bit 31: the segment is inline data, not a pointer.
pub const INLINE_FLAG: u32 = 0x8000_0000;
/// lkey of the terminator a receive WQE carries after its last used entry
/// (`MLX5_INVALID_LKEY`).
pub const INVALID_LKEY: u32 = 0x100;

/// Layer 1: 16 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct DataSeg {
    /// Byte count (bit 31 must be 0).
    pub byte_count: Be32,
    /// Local key.
    pub lkey: Be32,
    /// Local address.
    pub addr: Be64,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<DataSeg>() == 16);
    assert!(offset_of!(DataSeg, byte_count) == 0);
    assert!(offset_of!(DataSeg, lkey) == 4);
    assert!(offset_of!(DataSeg, addr) == 8);
};

impl DataSeg {
    /// Encodes a gather entry.
    #[inline(always)]
    #[must_use]
    pub const fn emit(sge: &Sge) -> Self {
        Self {
            byte_count: Be32::new(sge.length),
            lkey: Be32::new(sge.lkey),
            addr: Be64::new(sge.addr),
        }
    }

    /// The receive-queue terminator (byte count 0, invalid lkey, address 0).
    pub const TERMINATOR: Self = Self {
        byte_count: Be32::ZERO,
        lkey: Be32::new(INVALID_LKEY),
        addr: Be64::ZERO,
    };

    /// Decodes, rejecting an inline-flagged byte count.
    pub fn parse(&self) -> Result<Sge, ParseError> {
        let n = self.byte_count.get();
        if n & INLINE_FLAG != 0 {
            return Err(ParseError::Range {
                field: "data.byte_count",
                value: u64::from(n),
            });
        }
        Ok(Sge {
            addr: self.addr.get(),
            length: n,
            lkey: self.lkey.get(),
        })
    }

    /// Whether this is the receive-queue terminator.
    #[must_use]
    pub fn is_terminator(&self) -> bool {
        self.byte_count.get() == 0 && self.lkey.get() == INVALID_LKEY
    }
}
