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
}

impl WqHandle {
    /// The ring geometry, if `entries` is a power of two.
    #[must_use]
    pub const fn ring(&self) -> Option<Ring> {
        Ring::new(self.entries)
    }
}

/// A provider's queue handle: the fields every NIC has ([`WqHandle`]) plus whatever its own
/// format needs, decoded once when the queue is created (bnxt's WQE mode and PSN table, mlx5's
/// BlueFlame size). Device functions take the provider's own type, so no vendor field lives
/// here and nothing is decoded per post.
pub trait QueueHandle: Copy + core::fmt::Debug + Send + Sync + 'static {
    /// The common part.
    fn wq(&self) -> &WqHandle;
    /// The common part, to change an address for another view of the queue (the doorbell as
    /// a GPU maps it).
    fn wq_mut(&mut self) -> &mut WqHandle;
    /// Calls `f(address, bytes)` for the memory the device functions of this queue read or
    /// write, besides the doorbell register: the ring (`entries` units of `unit_bytes`, the
    /// provider's `SQ_UNIT_BYTES`), the doorbell record, and tables the provider keeps (so a
    /// GPU can be given exactly that memory).
    fn memory(&self, unit_bytes: u32, f: &mut dyn FnMut(u64, usize)) {
        let wq = self.wq();
        f(wq.buf, wq.entries as usize * unit_bytes as usize);
        if wq.dbrec != 0 {
            f(wq.dbrec, 8);
        }
    }
}

impl QueueHandle for WqHandle {
    #[inline(always)]
    fn wq(&self) -> &WqHandle {
        self
    }
    fn wq_mut(&mut self) -> &mut WqHandle {
        self
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

impl CqHandle {
    /// The ring geometry, if `entries` is a power of two.
    #[must_use]
    pub const fn ring(&self) -> Option<Ring> {
        Ring::new(self.entries)
    }
}

/// What one WQE consumes of its send queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Cost {
    /// Queue units (mlx5: WQEBBs; bnxt: 16-byte slots, or whole WQEs in the fixed-size modes).
    pub units: u32,
    /// Packets the message puts on the wire (bnxt PSN accounting; 0 for providers whose
    /// [`crate::Provider::TRACKS_PSN`] is false).
    pub packets: u32,
}

/// Where a WQE goes: three free-running counters that advance together, once per WQE.
///
/// Providers that need the message number or the PSN (bnxt fills a PSN/MSN-table entry per
/// WQE) get them from here; the posting protocol advances all three with one atomic operation
/// so concurrent producers always see a consistent triple (`sq::Counters::reserve`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct SqPos {
    /// Position of the WQE's first unit.
    pub unit: ProdIdx,
    /// WQEs posted before this one. Providers use it modulo a power of two of at most 2^16.
    pub msg: u32,
    /// Packets posted before this one, modulo 2^24, counted from the queue's first PSN.
    pub psn: u32,
}

impl SqPos {
    /// The start of a queue.
    pub const ZERO: Self = Self {
        unit: ProdIdx(0),
        msg: 0,
        psn: 0,
    };

    /// A position known only by its unit counter (enough for providers that do not track
    /// PSNs: mlx5, sim).
    #[inline(always)]
    #[must_use]
    pub const fn at_unit(unit: u32) -> Self {
        Self {
            unit: ProdIdx(unit),
            msg: 0,
            psn: 0,
        }
    }

    /// The position after a WQE of cost `cost` posted here.
    #[inline(always)]
    #[must_use]
    pub const fn advance(self, cost: Cost) -> Self {
        Self {
            unit: self.unit.add(cost.units),
            msg: self.msg.wrapping_add(1),
            psn: self.psn.wrapping_add(cost.packets) & PSN_MASK,
        }
    }
}

/// PSNs are 24-bit.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// What a post returns: where the WQE went and the value its doorbell needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Posted {
    /// Position of the WQE.
    pub start: SqPos,
    /// Position after the WQE (where the next one goes).
    pub next: SqPos,
    /// The 8 bytes to store to the doorbell register, in memory order.
    pub doorbell: [u8; 8],
}

impl Posted {
    /// A WQE of cost `cost` posted at `at`, with its doorbell bytes.
    #[inline(always)]
    #[must_use]
    pub const fn new(at: SqPos, cost: Cost, doorbell: [u8; 8]) -> Self {
        Self {
            start: at,
            next: at.advance(cost),
            doorbell,
        }
    }
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
