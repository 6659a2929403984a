//! Device functions: the stores a GPU thread (or a CPU thread standing in for one) makes to post
//! bnxt_re work requests, ring doorbells and poll completions (nic-formats.md §E).
//!
//! | step | bnxt |
//! |---|---|
//! | position | [`SqPos`]: unit (slot or WQE), message number, PSN — advanced together by the hal's reservation (one CAS) |
//! | WQE | header slot, extended-header slot, SGE or inline slots; ring wraps per slot in variable mode |
//! | PSN table | one entry per WQE at `wq.aux` (legacy 8 B / P5-P7 16 B / Thor2 MSN 8 B) |
//! | doorbell | no record: one 64-bit store of `index | epoch | xid | valid | type` |
//! | CQE | 32 bytes, valid while its phase bit equals the pass parity (first pass: 1) |
//!
//! The epoch is the parity of the pass of the free-running unit counter (the ring's tail wraps
//! exactly when the unit counter crosses a multiple of `entries`), so no per-queue flag has to be
//! kept — concurrent producers cannot disagree about it (the epoch bug other GDA code shipped:
//! a flag toggled by whichever thread happened to wrap).

use gda_hal::mmio;
use gda_hal::op::Payload;
use gda_hal::{
    AtomicOp, Checked, CollapsedProgress, Cost, CqHandle, OutOfWindow, PostError, Posted, ProdIdx,
    Provider, SendFlags, Sge, SqPos, WcOpcode, WorkCompletion, WorkRequest, WqHandle,
};

use crate::mode::{Mode, PsnForm, WqeMode};
use crate::wire::cqe::{self, Cqe32, CqeBody, CqeRepr};
use crate::wire::psn::{self, PsnRepr};
use crate::wire::sqe::{self, AtomicExt, BnxtSge, RdmaExt, SqeHdrRepr};
use crate::wire::{CqeType, DbType, DoorbellRepr, RqeHdr, WqeType};

pub use crate::wire::sqe::{FIXED3_MAX_INLINE, MAX_INLINE, MAX_SGE};

/// The CQ's phase on the first pass (`BNXT_QPLIB_QUEUE_START_PERIOD`; the kernel reports it).
pub const INITIAL_PHASE: bool = true;

/// Broadcom NetXtreme-E / Thor2 (`bnxt_re`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bnxt;

/// A Thor2 send queue as device code sees it: the common geometry plus what bnxt's format
/// needs, validated and decoded once by [`BnxtSq::new`] (the WQE mode and PSN-table form, the
/// table itself, the path MTU that turns lengths into PSNs, and the first PSN), so nothing is
/// checked or decoded per post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BnxtSq {
    wq: WqHandle,
    psn_table: u64,
    psn_entries: u32,
    path_mtu: u32,
    start_psn: u32,
    mode: Mode,
}

// The layout the C++ device API's `gda::bnxt::Sq` (device/include/gda/bnxt.hpp) asserts too;
// testing/rdma-ref tests/device_bnxt.rs compares the two field by field.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Mode>() == 2 && offset_of!(Mode, wqe) == 0 && offset_of!(Mode, psn) == 1);
    assert!(size_of::<BnxtSq>() == 72 && align_of::<BnxtSq>() == 8);
    assert!(offset_of!(BnxtSq, wq) == 0 && offset_of!(BnxtSq, psn_table) == 48);
    assert!(offset_of!(BnxtSq, psn_entries) == 56 && offset_of!(BnxtSq, path_mtu) == 60);
    assert!(offset_of!(BnxtSq, start_psn) == 64 && offset_of!(BnxtSq, mode) == 68);
};

/// Why a bnxt send-queue description is refused.
fn bad(what: &'static str) -> PostError {
    PostError::BadHandle { what }
}

impl BnxtSq {
    /// Describes a send queue: `wq` (ring of `entries` units of the mode's size, doorbell at
    /// `wq.db`, no record), its `mode`, the PSN/MSN table at `psn_table` with `psn_entries`
    /// entries (see [`Mode::psn_entries`]), the path MTU in bytes and the first send PSN.
    /// `wq.max_sge` and `wq.max_inline` are narrowed to what the mode can carry.
    pub fn new(
        wq: WqHandle,
        mode: Mode,
        psn_table: u64,
        psn_entries: u32,
        path_mtu: u32,
        start_psn: u32,
    ) -> Result<Self, PostError> {
        if wq.ring().is_none() {
            return Err(PostError::BadRing);
        }
        if wq.entries > 1 << 16 {
            return Err(bad(
                "bnxt rings hold at most 65536 units (16-bit consumer index)",
            ));
        }
        if psn_table == 0 {
            return Err(bad("no PSN table address"));
        }
        if mode.psn == PsnForm::Msn && (!psn_entries.is_power_of_two() || psn_entries > 1 << 16) {
            return Err(bad("MSN table size must be a power of two up to 65536"));
        }
        if psn_entries < mode.psn_entries(wq.entries) {
            return Err(bad("PSN table smaller than the ring needs"));
        }
        if !path_mtu.is_power_of_two() || !(256..=4096).contains(&path_mtu) {
            return Err(bad("path MTU must be 256, 512, 1024, 2048 or 4096"));
        }
        let (max_inline, max_sge) = match mode.wqe {
            WqeMode::Fixed3 => (FIXED3_MAX_INLINE, 1),
            _ => (MAX_INLINE, MAX_SGE),
        };
        Ok(Self {
            wq: WqHandle {
                max_sge: wq.max_sge.min(max_sge),
                max_inline: wq.max_inline.min(max_inline),
                ..wq
            },
            psn_table,
            psn_entries,
            path_mtu,
            start_psn: start_psn & gda_hal::handle::PSN_MASK,
            mode,
        })
    }

    /// The queue's mode.
    #[inline(always)]
    #[must_use]
    pub const fn mode(&self) -> Mode {
        self.mode
    }

    /// Address of the PSN/MSN table.
    #[inline(always)]
    #[must_use]
    pub const fn psn_table(&self) -> u64 {
        self.psn_table
    }

    /// Entries in the PSN/MSN table.
    #[inline(always)]
    #[must_use]
    pub const fn psn_entries(&self) -> u32 {
        self.psn_entries
    }

    /// Path MTU in bytes.
    #[inline(always)]
    #[must_use]
    pub const fn path_mtu(&self) -> u32 {
        self.path_mtu
    }

    /// The first send PSN.
    #[inline(always)]
    #[must_use]
    pub const fn start_psn(&self) -> u32 {
        self.start_psn
    }
}

impl gda_hal::QueueHandle for BnxtSq {
    #[inline(always)]
    fn wq(&self) -> &WqHandle {
        &self.wq
    }
    fn wq_mut(&mut self) -> &mut WqHandle {
        &mut self.wq
    }
    /// The ring (units of the mode's slots), and the PSN/MSN table (8-byte legacy and MSN
    /// entries, 16-byte ext ones); bnxt has no doorbell record.
    fn memory(&self, unit_bytes: u32, f: &mut dyn FnMut(u64, usize)) {
        let slots = self.mode.ring_slots(self.wq.entries) as usize;
        f(self.wq.buf, slots * unit_bytes as usize);
        let entry = match self.mode.psn {
            PsnForm::Ext => core::mem::size_of::<crate::wire::psn::PsnExtEntry>(),
            PsnForm::Legacy => core::mem::size_of::<crate::wire::psn::PsnEntry>(),
            PsnForm::Msn => core::mem::size_of::<crate::wire::psn::MsnEntry>(),
        };
        f(self.psn_table, self.psn_entries as usize * entry);
    }
}

/// Total payload bytes (what PSNs count).
#[inline(always)]
fn payload_len(wr: &WorkRequest<'_>) -> u64 {
    match wr {
        WorkRequest::Write { payload, .. } | WorkRequest::Send { payload, .. } => match payload {
            Payload::Inline(d) => d.len() as u64,
            Payload::Sges(s) => s.iter().map(|g| u64::from(g.length)).sum(),
        },
        WorkRequest::Read { sges, .. } => sges.iter().map(|g| u64::from(g.length)).sum(),
        WorkRequest::Atomic { .. } => 8,
        WorkRequest::Nop => 0,
    }
}

/// Slots after the two header slots that `wr` uses (SGEs, or inline bytes rounded up to 16).
#[inline(always)]
fn payload_slots(wr: &WorkRequest<'_>) -> u32 {
    match wr {
        WorkRequest::Write { payload, .. } | WorkRequest::Send { payload, .. } => match payload {
            Payload::Inline(d) => (d.len() as u32).div_ceil(16),
            Payload::Sges(s) => s.len() as u32,
        },
        WorkRequest::Read { sges, .. } => sges.len() as u32,
        WorkRequest::Atomic { .. } => 1,
        WorkRequest::Nop => 0,
    }
}

/// The `wqe_size` header field: slots used.
#[inline(always)]
fn used_slots(mode: WqeMode, wr: &WorkRequest<'_>) -> u32 {
    match mode {
        WqeMode::Fixed3 => 3,
        _ => sqe::HDR_SLOTS + payload_slots(wr),
    }
}

/// The `ibv_wc_opcode` rdma-core records in legacy PSN entries.
#[inline(always)]
fn wc_opcode(wr: &WorkRequest<'_>) -> WcOpcode {
    match wr {
        WorkRequest::Send { .. } => WcOpcode::Send,
        WorkRequest::Write { .. } | WorkRequest::Nop => WcOpcode::RdmaWrite,
        WorkRequest::Read { .. } => WcOpcode::RdmaRead,
        WorkRequest::Atomic {
            op: AtomicOp::CompareSwap { .. },
            ..
        } => WcOpcode::CompSwap,
        WorkRequest::Atomic { .. } => WcOpcode::FetchAdd,
    }
}

/// Address of slot `k` of the WQE whose first slot is `first` in a ring of `slots` slots.
/// `first < slots` and `k < slots` (`check` keeps a WQE within the ring), so one subtraction
/// wraps it: only variable-mode WQEs cross the end; static and fixed-3 WQEs never do.
#[inline(always)]
fn slot_addr(wq: &WqHandle, first: u32, k: u32, slots: u32) -> u64 {
    let s = first.wrapping_add(k);
    let s = if s >= slots { s - slots } else { s };
    wq.buf
        .wrapping_add(u64::from(s) * u64::from(sqe::SLOT_BYTES))
}

/// What `wr` (of `len` payload bytes) consumes of a queue in `mode`.
#[inline(always)]
fn cost_in(mode: WqeMode, wr: &WorkRequest<'_>, len: u64, path_mtu: u32) -> Cost {
    let units = match mode {
        WqeMode::Static | WqeMode::Fixed3 => 1,
        WqeMode::Variable => sqe::HDR_SLOTS + payload_slots(wr),
    };
    Cost {
        units,
        packets: psn::packets(len, path_mtu),
    }
}

/// Stores one 16-byte slot.
///
/// # Safety
/// `addr` must be a slot of a ring the caller owns.
#[inline(always)]
unsafe fn put<T: bytemuck::Pod>(addr: u64, v: T) {
    // SAFETY: forwarded from the caller; slots are 16-byte aligned in a page-aligned ring.
    unsafe { mmio::write_seg(addr as *mut T, v) };
}

impl Bnxt {
    /// The doorbell index of free-running unit position `unit`: the WQE index (static), the slot
    /// index (variable, fixed-3).
    #[inline(always)]
    #[must_use]
    pub const fn db_index(mode: WqeMode, entries: u32, unit: u32) -> u32 {
        let idx = unit & entries.wrapping_sub(1);
        match mode {
            WqeMode::Static | WqeMode::Variable => idx,
            WqeMode::Fixed3 => idx.wrapping_mul(3),
        }
    }

    /// The epoch bit for free-running position `unit` of a ring of `entries` (a power of two).
    #[inline(always)]
    #[must_use]
    pub const fn epoch(entries: u32, unit: u32) -> bool {
        (unit >> entries.trailing_zeros()) & 1 == 1
    }

    /// The SQ doorbell value for producer position `next`.
    #[inline(always)]
    #[must_use]
    pub fn sq_doorbell(sq: &BnxtSq, next: ProdIdx) -> DoorbellRepr {
        Self::sq_doorbell_in(sq.mode, &sq.wq, next)
    }

    #[inline(always)]
    fn sq_doorbell_in(mode: Mode, wq: &WqHandle, next: ProdIdx) -> DoorbellRepr {
        DoorbellRepr {
            db_type: DbType::Sq,
            xid: wq.qpn,
            index: Self::db_index(mode.wqe, wq.entries, next.0),
            epoch: Self::epoch(wq.entries, next.0),
            toggle: false,
        }
    }

    /// The PSN-table entry the WQE at `at` needs, and its byte offset in the table.
    #[inline(always)]
    #[must_use]
    pub fn psn_entry(sq: &BnxtSq, at: SqPos, packets: u32, opcode: WcOpcode) -> (u64, PsnRepr) {
        Self::psn_entry_in(sq, at, packets, opcode)
    }

    #[inline(always)]
    fn psn_entry_in(sq: &BnxtSq, at: SqPos, packets: u32, opcode: WcOpcode) -> (u64, PsnRepr) {
        let (mode, wq) = (sq.mode, &sq.wq);
        let start = psn::psn_add(sq.start_psn, at.psn);
        let next = psn::psn_add(start, packets);
        let idx = at.unit.0 & wq.entries.wrapping_sub(1);
        let first_slot = idx.wrapping_mul(mode.wqe.slots_per_unit());
        let db_idx = Self::db_index(mode.wqe, wq.entries, at.unit.0);
        let repr = PsnRepr {
            start,
            next,
            opcode: opcode as u32 as u8,
            flags: 0,
            // psns_ext: the slot tail before the post; MSN: `*dbtail` before the post (the WQE
            // index in static mode — rdma-core v55, see csrc/bnxt/NOTES.md quirk 3).
            start_slot: match mode.psn {
                PsnForm::Msn => db_idx as u16,
                _ => first_slot as u16,
            },
        };
        let index = match mode.psn {
            PsnForm::Msn => at.msg & sq.psn_entries.wrapping_sub(1),
            _ => db_idx,
        };
        (u64::from(index) * u64::from(mode.psn.entry_bytes()), repr)
    }

    /// Writes the WQE for `wr` (any mode) and its PSN-table entry; `cost` is the request's
    /// checked cost (units and PSNs), used as is.
    ///
    /// # Safety
    /// As [`Provider::post_checked`], with `cost == Bnxt::cost(sq, wr)`.
    #[inline(always)]
    unsafe fn write_wqe(
        sq: &BnxtSq,
        at: SqPos,
        wr: &WorkRequest<'_>,
        cost: Cost,
        flags: SendFlags,
    ) -> Posted {
        let (mode, wq) = (sq.mode, &sq.wq);
        let len = payload_len(wr);
        let spu = mode.wqe.slots_per_unit();
        let slots = mode.ring_slots(wq.entries);
        let idx = at.unit.0 & wq.entries.wrapping_sub(1);
        let first = idx.wrapping_mul(spu);
        let slot = |k: u32| slot_addr(wq, first, k, slots);

        let mut fl = 0u8;
        if flags.contains(SendFlags::SIGNALED) {
            fl |= sqe::flags::SIGNALED;
        }
        if flags.contains(SendFlags::FENCE) {
            fl |= sqe::flags::UC_FENCE;
        }
        if flags.contains(SendFlags::SOLICITED) {
            fl |= sqe::flags::SE;
        }
        let (wqe_type, key_immd, lhdr, ext): (WqeType, u32, u64, [u8; 16]) = match *wr {
            WorkRequest::Write {
                remote,
                imm,
                payload,
            } => {
                if matches!(payload, Payload::Inline(_)) {
                    fl |= sqe::flags::INLINE;
                }
                let t = if imm.is_some() {
                    WqeType::RdmaWriteImm
                } else {
                    WqeType::RdmaWrite
                };
                let x = RdmaExt::emit(remote);
                (t, imm.unwrap_or(0), len, bytemuck::cast(x))
            }
            WorkRequest::Send { imm, payload } => {
                if matches!(payload, Payload::Inline(_)) {
                    fl |= sqe::flags::INLINE;
                }
                let t = if imm.is_some() {
                    WqeType::SendImm
                } else {
                    WqeType::Send
                };
                (t, imm.unwrap_or(0), len, [0; 16])
            }
            WorkRequest::Read { remote, .. } => (
                WqeType::RdmaRead,
                0,
                len,
                bytemuck::cast(RdmaExt::emit(remote)),
            ),
            WorkRequest::Atomic { remote, op, .. } => {
                let (t, a, b) = match op {
                    AtomicOp::CompareSwap { compare, swap } => (WqeType::AtomicCs, swap, compare),
                    AtomicOp::FetchAdd { add } => (WqeType::AtomicFa, add, 0),
                    // `check` refuses masked atomics (bnxt has none).
                    _ => (WqeType::Invalid, 0, 0),
                };
                let x = AtomicExt {
                    swap_add: gda_hal::Le64::new(a),
                    compare: gda_hal::Le64::new(b),
                };
                (t, remote.rkey, remote.addr, bytemuck::cast(x))
            }
            // No NOP type: a zero-length RDMA WRITE (remote address and key unused).
            WorkRequest::Nop => (WqeType::RdmaWrite, 0, 0, [0; 16]),
        };
        let hdr = SqeHdrRepr {
            wqe_type,
            flags: fl,
            wqe_size: used_slots(mode.wqe, wr) as u8,
            // An immediate is stored as its value, little-endian: memory holds the wire bytes
            // reversed (nic-formats.md §E.2).
            key_immd,
            lhdr,
        }
        .emit();

        // Payload slots first, header last (the doorbell orders everything anyway).
        let mut k = sqe::HDR_SLOTS;
        match wr {
            WorkRequest::Write {
                payload: Payload::Sges(s),
                ..
            }
            | WorkRequest::Send {
                payload: Payload::Sges(s),
                ..
            }
            | WorkRequest::Read { sges: s, .. } => {
                for g in s.iter() {
                    // SAFETY: slot `k` of the reserved WQE (`check` bounds the SGE count).
                    unsafe { put(slot(k), BnxtSge::emit(g)) };
                    k += 1;
                }
            }
            WorkRequest::Write {
                payload: Payload::Inline(d),
                ..
            }
            | WorkRequest::Send {
                payload: Payload::Inline(d),
                ..
            } => {
                for chunk in d.chunks(16) {
                    let mut b = [0u8; 16];
                    b[..chunk.len()].copy_from_slice(chunk);
                    // SAFETY: as above; padding after the payload is zeroed.
                    unsafe { put(slot(k), b) };
                    k += 1;
                }
            }
            WorkRequest::Atomic { local, .. } => {
                // SAFETY: as above.
                unsafe { put(slot(k), BnxtSge::emit(local)) };
                k += 1;
            }
            WorkRequest::Nop => {}
        }
        if mode.wqe == WqeMode::Fixed3 && k == sqe::HDR_SLOTS {
            // The fixed form always has its third slot: an empty (zero-length) SGE.
            // SAFETY: slot 2 of the reserved 3-slot WQE.
            unsafe { put(slot(k), [0u8; 16]) };
        }
        // SAFETY: slots 1 and 0 of the reserved WQE.
        unsafe {
            put(slot(1), ext);
            put(slot(0), hdr);
        }

        let (off, entry) = Self::psn_entry_in(sq, at, cost.packets, wc_opcode(wr));
        let dst = sq.psn_table.wrapping_add(off);
        // SAFETY: `psn_table` is the queue's PSN table (caller), `off` indexes inside it.
        unsafe {
            match mode.psn {
                PsnForm::Legacy => put(dst, entry.emit_legacy()),
                PsnForm::Ext => put(dst, entry.emit_ext()),
                PsnForm::Msn => put(dst, entry.emit_msn()),
            }
        }
        let doorbell = Self::sq_doorbell_in(mode, wq, at.unit.add(cost.units));
        Posted::new(at, cost, doorbell.to_bytes())
    }

    /// Reads CQE `slot`: its status word (acquire) first, then the whole CQE.
    fn read_cqe(cq: &CqHandle, slot: u32) -> (u32, Cqe32) {
        let addr = cq
            .buf
            .wrapping_add(u64::from(slot) * u64::from(cq.cqe_bytes.max(32)));
        let word = addr.wrapping_add(24) as *const u32;
        // SAFETY: `addr` is a CQE of the buffer the caller of the device function vouched for.
        let w = unsafe { mmio::load_u32_acquire(word) };
        mmio::dma_read_barrier();
        // SAFETY: as above; CQEs are 32-byte aligned.
        let c = unsafe { mmio::read_seg(addr as *const Cqe32) };
        (u32::from_le(w), c)
    }

    /// The completion a CQE reports: QP number from the `qp_handle` (the control path sets it to
    /// the QP number), requester counters in doorbell units.
    #[must_use]
    pub fn decode(c: &Cqe32) -> WorkCompletion {
        let r = CqeRepr::parse(c);
        let qpn = match r.body {
            CqeBody::Req { qp_handle, .. } | CqeBody::RecvRc { qp_handle, .. } => {
                qp_handle as u32 & 0x00ff_ffff
            }
            CqeBody::Raw(b) => u32::from_le_bytes([b[0], b[1], b[2], 0]),
        };
        r.completion(qpn)
    }
}

impl Provider for Bnxt {
    type Sq = BnxtSq;
    type Rq = WqHandle;

    const NAME: &'static str = "bnxt";
    const SQ_UNIT_BYTES: u32 = sqe::SLOT_BYTES;
    const MAX_INLINE_BYTES: u32 = MAX_INLINE;
    const MAX_WQE_UNITS: u32 = sqe::HDR_SLOTS + MAX_SGE;
    const HAS_DOORBELL_RECORD: bool = false;
    /// The requester CQE's consumer index has 16 valid bits.
    const WQE_COUNTER_BITS: u32 = 16;
    const CQ_INDEX_BITS: u32 = 24;
    const ATOMIC_RESULT_BIG_ENDIAN: bool = false;
    const TRACKS_PSN: bool = true;
    const DEVICE_TAG: u32 = 3;
    // Broadcom (NetXtreme-E / Thor2).
    const PCI_VENDOR_IDS: &'static [u32] = &[0x14e4];

    #[inline(always)]
    fn cost(sq: &BnxtSq, wr: &WorkRequest<'_>) -> Cost {
        cost_in(sq.mode.wqe, wr, payload_len(wr), sq.path_mtu)
    }

    /// The queue itself was validated by [`BnxtSq::new`]; only the request is checked here.
    fn check(sq: &BnxtSq, wr: &WorkRequest<'_>) -> Result<Cost, PostError> {
        gda_hal::provider::check_common(&sq.wq, wr, sq.wq.max_inline)?;
        if let WorkRequest::Atomic { op, .. } = wr
            && !matches!(op, AtomicOp::CompareSwap { .. } | AtomicOp::FetchAdd { .. })
        {
            // Thor2 has no masked atomics; shmem builds them from CAS loops.
            return Err(PostError::Unsupported);
        }
        let cost = Self::cost(sq, wr);
        if cost.units > sq.wq.entries {
            return Err(PostError::WqeTooLarge {
                units: cost.units,
                max: sq.wq.entries,
            });
        }
        Ok(cost)
    }

    /// bnxt reports the consumer index after the retired WQEs, modulo the ring: widen it with
    /// `log2(entries)` bits.
    #[inline(always)]
    fn completion_bits(sq: &BnxtSq) -> u32 {
        sq.wq
            .entries
            .trailing_zeros()
            .clamp(1, Self::WQE_COUNTER_BITS)
    }

    /// `con_indx` is in doorbell units (slots in the fixed-3 form) and points *after* the
    /// retired WQEs; the unit before it lies inside the newest one.
    #[inline(always)]
    fn completed_unit(sq: &BnxtSq, wc: &WorkCompletion) -> u32 {
        let units = match sq.mode.wqe {
            WqeMode::Fixed3 => wc.wqe_counter / 3,
            _ => wc.wqe_counter,
        };
        units.wrapping_sub(1)
    }

    /// Writes the WQE with the cost `check` derived (its PSN count needs the payload length
    /// and the path MTU; neither is computed again).
    #[inline(always)]
    unsafe fn post_checked(req: &Checked<'_, Self>, at: SqPos, flags: SendFlags) -> Posted {
        // SAFETY: forwarded from the caller; the cost is the checked one.
        unsafe { Self::write_wqe(req.queue(), at, req.request(), req.cost(), flags) }
    }

    /// Release fence (`mmio_wc_start`), then one 64-bit store of the doorbell.
    #[inline(always)]
    unsafe fn ring_sq(sq: &BnxtSq, posted: &Posted) {
        mmio::wqe_to_dbrec_fence();
        // SAFETY: `sq.wq.db` is the queue's doorbell (caller); one 64-bit store, as the device
        // needs (two 32-bit halves from different producers would mix indexes).
        unsafe {
            mmio::store_u64_release(sq.wq.db as *mut u64, u64::from_le_bytes(posted.doorbell));
        }
        mmio::wc_flush();
    }

    #[inline(always)]
    unsafe fn post_recv<const N: usize>(rq: &WqHandle, at: ProdIdx, sges: &[Sge; N]) {
        let slot = at.0 & rq.entries.wrapping_sub(1);
        let base = rq.buf.wrapping_add(u64::from(slot) * u64::from(rq.stride));
        let cap = rq.stride / 16;
        let n = (N as u32).min(cap.saturating_sub(2));
        // SAFETY: the caller owns receive slot `at`; every store is inside its `stride` bytes.
        unsafe {
            put(base.wrapping_add(16), [0u8; 16]);
            for (k, s) in (2u64..).zip(sges.iter().take(n as usize)) {
                put(base.wrapping_add(k * 16), BnxtSge::emit(s));
            }
            if n == 0 && cap > 2 {
                // A zero-SGE receive still carries one (empty) SGE.
                put(base.wrapping_add(32), [0u8; 16]);
            }
            put(base, RqeHdr::new(n, slot));
        }
    }

    #[inline(always)]
    unsafe fn ring_rq(rq: &WqHandle, next: ProdIdx) {
        let db = DoorbellRepr {
            db_type: DbType::Rq,
            xid: rq.qpn,
            index: next.0 & rq.entries.wrapping_sub(1),
            epoch: Self::epoch(rq.entries, next.0),
            toggle: false,
        };
        mmio::wqe_to_dbrec_fence();
        // SAFETY: `rq.db` is the queue's doorbell (caller).
        unsafe { mmio::store_u64_release(rq.db as *mut u64, db.value()) };
        mmio::wc_flush();
    }

    /// One work completion per valid CQE. What gda produces from a bnxt CQE, field by field:
    ///
    /// | field | requester CQE | RC receive CQE |
    /// |---|---|---|
    /// | `status`, `vendor_err` | from the status byte (requester table) | from the status byte (responder table) |
    /// | `wqe_counter` | `con_indx` (mod 2^16): the position after the retired WQEs ([`Provider::completed_unit`]) | `rwrid` |
    /// | `opcode` | **not produced**: [`WcOpcode::Other`] (the CQE does not carry it) | `Recv` / `RecvRdmaWithImm` |
    /// | `byte_len` | **not produced**: 0 (not carried) | the received length |
    /// | `imm` | `None` | the immediate, when flagged |
    /// | `qpn`, `is_recv` | yes | yes |
    ///
    /// A requester CQE may retire several WQEs (coalesced), and after an error CQE the device
    /// writes no flush CQEs: per-WQE completions, their opcodes and READ/atomic lengths, and
    /// the flushed completions of outstanding WQEs are the job of whoever recorded what was
    /// posted (rdma-core keeps a software wrid table for this; gda's `SendQueue` needs only
    /// positions). The rdma-core differential test (`bnxt_poll_diff`) builds exactly those
    /// three things in test code, from its own posting record, and compares the rest.
    #[inline(always)]
    unsafe fn poll_cq(cq: &CqHandle, ci: u32) -> Option<WorkCompletion> {
        let ring = cq.ring()?;
        let (w, c) = Self::read_cqe(cq, ring.slot(ci));
        if !cqe::valid(w, ci, ring.log2(), INITIAL_PHASE) {
            return None;
        }
        Some(Self::decode(&c))
    }

    /// The CQ doorbell: type CQ, index = new head, epoch = head's pass parity.
    #[inline(always)]
    unsafe fn update_cq_ci(cq: &CqHandle, ci: u32) {
        if cq.db == 0 {
            return;
        }
        let db = DoorbellRepr {
            db_type: DbType::Cq,
            xid: cq.cqn,
            index: ci & cq.entries.wrapping_sub(1),
            epoch: Self::epoch(cq.entries.max(1), ci),
            toggle: false,
        };
        // SAFETY: `cq.db` is the CQ's doorbell (caller).
        unsafe { mmio::store_u64_release(cq.db as *mut u64, db.value()) };
    }

    /// A collapsed CQ: the device rewrites slot 0 with phase 1 every time. The CQE is read
    /// between two reads of its status word and of its counter; a change means it was being
    /// rewritten, and the poll reports nothing (try again).
    #[inline(always)]
    unsafe fn poll_collapsed(
        sq: &BnxtSq,
        cq: &CqHandle,
        progress: &mut CollapsedProgress,
        rung: u64,
    ) -> Result<Option<WorkCompletion>, OutOfWindow> {
        let (w1, c) = Self::read_cqe(cq, 0);
        if cqe::PHASE.get(w1) != u32::from(INITIAL_PHASE) {
            return Ok(None);
        }
        mmio::dma_read_barrier();
        let (w2, c2) = Self::read_cqe(cq, 0);
        if w1 != w2 || c.body != c2.body {
            return Ok(None);
        }
        let wc = Self::decode(&c);
        if CqeRepr::parse(&c).cqe_type != CqeType::Req {
            return Ok(None);
        }
        let before = progress.complete_below();
        progress.observe(Self::completed_unit(sq, &wc), rung)?;
        Ok((progress.complete_below() != before).then_some(wc))
    }
}

#[cfg(test)]
mod tests;
