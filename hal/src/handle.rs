//! `#[repr(C)]` handles that hand a queue's device addresses and geometry to device code.
//!
//! The host control path fills these once; kernels receive them by value (they are plain data,
//! copyable into GPU constant memory) and pass them to the provider's device functions.
//! Addresses are integers, not pointers, because they may name device or MMIO memory that the
//! host cannot dereference.

use crate::index::{ProdIdx, Ring};
use crate::status::{WcOpcode, WcStatus};

/// A work queue (send or receive) as device code sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct WqHandle {
    /// Address of the ring's first unit.
    pub buf: u64,
    /// Address of the queue's doorbell record (mlx5: the 8-byte record; 0 if none).
    pub dbrec: u64,
    /// Address of the doorbell register (mlx5: `bf.reg`; 0 for a receive queue).
    pub db: u64,
    /// Ring size in units (mlx5 SQ: WQEBBs; RQ: WQEs). A power of two.
    pub entries: u32,
    /// Size of one receive WQE in bytes (receive queues), or 0.
    pub stride: u32,
    /// QP (or SQ) number.
    pub qpn: u32,
    /// Largest inline payload the QP accepts.
    pub max_inline: u32,
    /// Most gather entries per WQE.
    pub max_sge: u32,
    /// BlueFlame half-register size in bytes; 0 means doorbell-only.
    pub bf_size: u32,
}

impl WqHandle {
    /// The ring geometry, if `entries` is a power of two.
    #[must_use]
    pub const fn ring(&self) -> Option<Ring> {
        Ring::new(self.entries)
    }
}

/// A completion queue as device code sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct CqHandle {
    /// Address of the first CQE.
    pub buf: u64,
    /// Address of the CQ doorbell record (consumer index), or 0.
    pub dbrec: u64,
    /// Address of the CQ doorbell register (arming), or 0.
    pub db: u64,
    /// Number of CQEs; a power of two. A collapsed CQ has 1.
    pub entries: u32,
    /// Bytes per CQE as allocated (mlx5: 64 or 128).
    pub cqe_bytes: u32,
    /// CQ number.
    pub cqn: u32,
    /// Non-zero if every CQE is written to slot 0 (collapsed mode).
    pub collapsed: u32,
}

/// What a post returns: where the WQE went and the value its doorbell needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Posted {
    /// Producer position of the WQE's first unit.
    pub start: ProdIdx,
    /// Producer position after the WQE (the next free unit).
    pub next: ProdIdx,
    /// The 8 bytes to store to the doorbell register, in memory order.
    pub doorbell: [u8; 8],
}

/// A decoded work completion — the fields of `struct ibv_wc` a GDA kernel needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// The hardware's counter of the completed WQE (mlx5: 16-bit `wqe_counter`).
    pub wqe_counter: u32,
    /// Bytes transferred (receives, READs, atomics).
    pub byte_len: u32,
    /// Immediate data, if the completion carries one (host-order value).
    pub imm: Option<u32>,
    /// QP number.
    pub qpn: u32,
    /// Vendor syndrome (raw hardware status), 0 on success.
    pub vendor_err: u8,
    /// True for a receive-side completion.
    pub is_recv: bool,
}
