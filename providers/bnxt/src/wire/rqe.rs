//! Receive WQE header (`struct bnxt_re_brqe`, nic-formats.md §E.7): slot 0 is the header, slot 1
//! reserved, SGEs from slot 2.

use bytemuck::{Pod, Zeroable};
use gda_hal::{Le32, Le64};

use super::WqeType;
use super::sqe::{TYPE, WQE_SIZE};

/// Layer 1: the receive header slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct RqeHdr {
    /// type (0x80) | slots used.
    pub rsv_ws_fl_wt: Le32,
    /// Reserved (offset 4).
    pub reserved_4: Le32,
    /// Software WQE index tag, reported back in the CQE.
    pub wrid: Le32,
    /// Reserved (offset 12).
    pub reserved_12: Le32,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RqeHdr>() == 16 && offset_of!(RqeHdr, wrid) == 8);
};

impl RqeHdr {
    /// A receive header for `nsge` SGEs (a zero-SGE receive still counts one SGE slot) and tag
    /// `wrid`.
    #[must_use]
    pub const fn new(nsge: u32, wrid: u32) -> Self {
        let slots = 2 + if nsge == 0 { 1 } else { nsge };
        Self {
            rsv_ws_fl_wt: Le32::new(TYPE.place(WqeType::Recv.raw() as u32) | WQE_SIZE.place(slots)),
            reserved_4: Le32::ZERO,
            wrid: Le32::new(wrid),
            reserved_12: Le32::ZERO,
        }
    }

    /// Slots used (from the header).
    #[must_use]
    pub const fn slots(&self) -> u32 {
        WQE_SIZE.get(self.rsv_ws_fl_wt.get())
    }

    /// Whether the type is RECV.
    #[must_use]
    pub const fn is_recv(&self) -> bool {
        TYPE.get(self.rsv_ws_fl_wt.get()) == WqeType::Recv.raw() as u32
    }
}

/// The reserved second slot of a receive WQE.
pub const RQE_RESERVED_SLOT: [Le64; 2] = [Le64::ZERO, Le64::ZERO];
