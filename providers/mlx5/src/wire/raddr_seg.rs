//! Remote-address segment (`struct mlx5_wqe_raddr_seg`, nic-formats.md §A.5).

use bytemuck::{Pod, Zeroable};
use gda_hal::{Be32, Be64, Remote};

/// Layer 1: 16 bytes — remote VA, rkey, 4 reserved bytes (written 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct RaddrSeg {
    /// Remote virtual address.
    pub raddr: Be64,
    /// Remote key.
    pub rkey: Be32,
    /// Reserved (offset 12).
    pub reserved_12: Be32,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RaddrSeg>() == 16);
    assert!(offset_of!(RaddrSeg, raddr) == 0);
    assert!(offset_of!(RaddrSeg, rkey) == 8);
    assert!(offset_of!(RaddrSeg, reserved_12) == 12);
};

impl RaddrSeg {
    /// Encodes a remote buffer.
    #[inline(always)]
    #[must_use]
    pub const fn emit(remote: Remote) -> Self {
        Self {
            raddr: Be64::new(remote.addr),
            rkey: Be32::new(remote.rkey),
            reserved_12: Be32::ZERO,
        }
    }

    /// Decodes (reserved bytes are ignored, as hardware does).
    #[inline(always)]
    #[must_use]
    pub const fn parse(&self) -> Remote {
        Remote {
            addr: self.raddr.get(),
            rkey: self.rkey.get(),
        }
    }
}
