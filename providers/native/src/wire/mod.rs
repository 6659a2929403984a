//! Native queue structures (little-endian, naturally aligned). See the table in the parent
//! module. Layer 1 is the `Pod` structs here; layer 2 is [`WqeRepr`], the send WQE as a value
//! that the device functions emit and the device model parses.

use bytemuck::{Pod, Zeroable};

mod wqe;
pub use wqe::{Data, INLINE_LENGTH, SGE_BYTES, SGES_PER_UNIT, Sges, WqeBody, WqeRepr};

/// A gather entry, in `ibv_sge` order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct NativeSge {
    /// Address.
    pub addr: u64,
    /// Length.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// Native send-WQE operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NativeOp {
    /// No operation.
    Nop = 0,
    /// RDMA WRITE.
    Write = 1,
    /// RDMA WRITE with immediate.
    WriteImm = 2,
    /// SEND.
    Send = 3,
    /// SEND with immediate.
    SendImm = 4,
    /// RDMA READ.
    Read = 5,
    /// Compare-and-swap.
    CompSwap = 6,
    /// Fetch-and-add.
    FetchAdd = 7,
    /// Masked compare-and-swap (masks in the extension unit).
    MaskedCompSwap = 8,
    /// Masked fetch-and-add.
    MaskedFetchAdd = 9,
}

impl NativeOp {
    /// Decodes, `None` for an unknown opcode.
    #[must_use]
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Nop,
            1 => Self::Write,
            2 => Self::WriteImm,
            3 => Self::Send,
            4 => Self::SendImm,
            5 => Self::Read,
            6 => Self::CompSwap,
            7 => Self::FetchAdd,
            8 => Self::MaskedCompSwap,
            9 => Self::MaskedFetchAdd,
            _ => return None,
        })
    }
}

/// `NativeWqe::flags` bits.
pub mod flags {
    /// Generate a CQE.
    pub const SIGNALED: u8 = 1;
    /// Wait for earlier READs/atomics.
    pub const FENCE: u8 = 2;
    /// Solicited event.
    pub const SOLICITED: u8 = 4;
    /// Payload is inline in the extension units.
    pub const INLINE: u8 = 8;
}

/// The 64-byte header unit of a native send WQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct NativeWqe {
    /// [`NativeOp`].
    pub opcode: u8,
    /// [`flags`].
    pub flags: u8,
    /// Atomic operand width (4 or 8).
    pub width: u8,
    /// Units the whole WQE occupies (1..=16).
    pub units: u8,
    /// Immediate (host-order value).
    pub imm: u32,
    /// Total payload bytes (sum of SGEs, or inline length).
    pub length: u32,
    /// Gather entries (first in `local`, the rest in extension units).
    pub nsge: u8,
    /// Reserved (offset 13).
    pub reserved_13: [u8; 3],
    /// First gather entry (atomics: the result buffer).
    pub local: NativeSge,
    /// Remote address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Producer position of this WQE (reported back in its CQE).
    pub counter: u32,
    /// Compare (CS) or addend (FA).
    pub op0: u64,
    /// Swap (CS) or field boundary (masked FA).
    pub op1: u64,
}

/// `NativeCqe::flags` bits.
pub mod cqe_flags {
    /// Receive-side completion.
    pub const RECV: u8 = 1;
    /// `imm` is valid.
    pub const HAS_IMM: u8 = 2;
}

/// The 32-byte native CQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct NativeCqe {
    /// Send: the WQE's producer position; receive: the receive WQE's position.
    pub counter: u32,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate (host-order value).
    pub imm: u32,
    /// QP number.
    pub qpn: u32,
    /// `ibv_wc_status` number.
    pub status: u8,
    /// `ibv_wc_opcode` number (low byte; receives 128/129).
    pub opcode: u8,
    /// [`cqe_flags`].
    pub flags: u8,
    /// Vendor error (the raw status for errors).
    pub vendor_err: u8,
    /// Generation: the low byte of the CQE's sequence number plus one. A collapsed CQ rewrites
    /// its one slot in place; a poller reads the generation, the owner, the body, then both
    /// again, and accepts the CQE only if neither changed (the native format's own protocol).
    pub generation: u8,
    /// Reserved (offset 21).
    pub reserved_21: [u8; 10],
    /// Ownership: 0 = never written; else `1 + pass parity` (see [`owner_for`]).
    pub owner: u8,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<NativeSge>() == 16);
    assert!(size_of::<NativeWqe>() == 64);
    assert!(offset_of!(NativeWqe, imm) == 4 && offset_of!(NativeWqe, length) == 8);
    assert!(offset_of!(NativeWqe, nsge) == 12 && offset_of!(NativeWqe, local) == 16);
    assert!(offset_of!(NativeWqe, remote_addr) == 32 && offset_of!(NativeWqe, rkey) == 40);
    assert!(offset_of!(NativeWqe, counter) == 44 && offset_of!(NativeWqe, op0) == 48);
    assert!(offset_of!(NativeWqe, op1) == 56);
    assert!(size_of::<NativeCqe>() == 32);
    assert!(offset_of!(NativeCqe, status) == 16 && offset_of!(NativeCqe, owner) == 31);
    assert!(offset_of!(NativeCqe, generation) == GENERATION_OFFSET);
};

/// Offset of [`NativeCqe::generation`].
pub const GENERATION_OFFSET: usize = 20;
/// Offset of [`NativeCqe::owner`].
pub const OWNER_OFFSET: usize = 31;

/// The owner byte a CQE carries at free-running index `ci` of a `2^log2`-entry ring: 1 on even
/// passes, 2 on odd ones (a zeroed ring is never owned by software).
#[inline(always)]
#[must_use]
pub const fn owner_for(ci: u32, log2: u32) -> u8 {
    1 + ((ci >> log2) & 1) as u8
}
