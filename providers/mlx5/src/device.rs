//! mlx5 device functions: what a GPU thread (or a CPU thread standing in for one) runs to post
//! work, ring the doorbell and reap completions on a ConnectX queue.
//!
//! Every function is `#[inline(always)]`, allocation-free and has no panicking path: ring math is
//! power-of-two masking, slices are reached with `get`, and the only memory access is through
//! [`gda_hal::mmio`]. Functions are `unsafe` because handles carry raw addresses; the caller's
//! obligations are listed on [`Provider`].
//!
//! Sequence of a post (nic-formats.md §B.3): write the WQE at the reserved WQEBBs
//! ([`Mlx5::post`] and friends return a [`Posted`]) → [`Mlx5::ring_sq`] (release fence →
//! doorbell record word 1 = `next & 0xffff` → `sfence` → 8-byte doorbell = first 8 bytes of the
//! control segment → `sfence`). [`Mlx5::ring_sq_bf`] is rdma-core's variant with alternating
//! BlueFlame halves and the optional whole-WQE BlueFlame copy.

use gda_hal::{
    AtomicOp, Checked, CollapsedProgress, Cost, CqHandle, OutOfWindow, Payload, PostError, Posted,
    ProdIdx, Provider, Remote, SendFlags, Sge, SqPos, WcOpcode, WcStatus, WorkCompletion,
    WorkRequest, WqHandle, mmio,
};

use crate::wire::ctrl_seg::fm_ce_se;
use crate::wire::{
    Cqe64, CqeRepr, CtrlRepr, DataSeg, Opcode, RaddrSeg, WQEBB_BYTES, atomic_seg, cqe64, dbrec,
    inline_seg, wqe::MAX_DS,
};

/// The mlx5 provider marker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mlx5;

/// A ConnectX send queue as device code sees it: the common geometry plus the BlueFlame
/// register size (`mlx5dv_qp.bf.size`), the only mlx5-specific field posting needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Mlx5Sq {
    /// Ring, doorbell record (`dbrec`), BlueFlame register (`db`) and limits.
    pub wq: WqHandle,
    /// BlueFlame half-register size in bytes; 0 means doorbell-only.
    pub bf_size: u32,
}

impl gda_hal::QueueHandle for Mlx5Sq {
    #[inline(always)]
    fn wq(&self) -> &WqHandle {
        &self.wq
    }
    fn wq_mut(&mut self) -> &mut WqHandle {
        &mut self.wq
    }
}

/// 16-byte units per WQEBB.
const DS_PER_WQEBB: u32 = 4;

/// The `fm_ce_se` byte rdma-core writes for these flags (`IBV_SEND_FENCE` → 0x80, signalled →
/// 0x08, solicited → 0x02).
#[inline(always)]
#[must_use]
pub const fn ctrl_flags(flags: SendFlags) -> u8 {
    let mut f = 0;
    if flags.contains(SendFlags::FENCE) {
        f |= fm_ce_se::FENCE;
    }
    if flags.contains(SendFlags::SIGNALED) {
        f |= fm_ce_se::CQ_UPDATE;
    }
    if flags.contains(SendFlags::SOLICITED) {
        f |= fm_ce_se::SOLICITED;
    }
    f
}

/// WQEBBs for a WQE of `ds` 16-byte units.
#[inline(always)]
#[must_use]
pub const fn wqebbs_for_ds(ds: u32) -> u32 {
    ds.div_ceil(DS_PER_WQEBB)
}

/// DS units of a payload: one per non-empty gather entry, or the inline segment.
#[inline(always)]
fn payload_ds(payload: &Payload<'_>) -> u32 {
    match payload {
        Payload::Inline(d) => inline_seg::ds_for(d.len() as u32),
        Payload::Sges(s) => nonempty(s),
    }
}

#[inline(always)]
fn nonempty(sges: &[Sge]) -> u32 {
    let mut n = 0;
    for s in sges {
        if s.length != 0 {
            n += 1;
        }
    }
    n
}

/// DS units of the atomic segments for `op` at `bytes`.
#[inline(always)]
const fn atomic_ds(op: &AtomicOp, bytes: u32) -> u32 {
    match op {
        AtomicOp::MaskedCompareSwap { .. } if bytes == 8 => 2,
        _ => 1,
    }
}

/// Total DS units of a request's WQE.
#[inline(always)]
#[must_use]
pub fn ds_for(wr: &WorkRequest<'_>) -> u32 {
    match wr {
        WorkRequest::Write { payload, .. } => 2 + payload_ds(payload),
        WorkRequest::Send { payload, .. } => 1 + payload_ds(payload),
        WorkRequest::Read { sges, .. } => 2 + nonempty(sges),
        WorkRequest::Atomic { op, bytes, .. } => 3 + atomic_ds(op, *bytes),
        WorkRequest::Nop => 1,
    }
}

/// Address of 16-byte unit `k` of the WQE starting at `at`, wrapping at the ring end.
#[inline(always)]
fn unit_addr(wq: &WqHandle, at: ProdIdx, k: u32) -> u64 {
    let ds_mask = wq.entries.wrapping_mul(DS_PER_WQEBB).wrapping_sub(1);
    let idx = at.0.wrapping_mul(DS_PER_WQEBB).wrapping_add(k) & ds_mask;
    wq.buf.wrapping_add(u64::from(idx) * 16)
}

/// Stores bytes at byte offset `off` from the start of the WQE at `at`, splitting at the ring
/// end (inline payload may wrap; segments never straddle it).
///
/// # Safety
/// The ring and the reserved WQEBBs must be writable by the caller.
#[inline(always)]
unsafe fn ring_copy(wq: &WqHandle, at: ProdIdx, off: u32, src: &[u8]) {
    let ring_bytes = wq.entries.wrapping_mul(WQEBB_BYTES);
    let mask = ring_bytes.wrapping_sub(1);
    let pos = at.0.wrapping_mul(WQEBB_BYTES).wrapping_add(off) & mask;
    let first = ring_bytes.wrapping_sub(pos).min(src.len() as u32) as usize;
    let (a, b) = src.split_at(first.min(src.len()));
    // SAFETY: `pos + a.len() <= ring_bytes`, inside the ring the caller owns.
    unsafe { mmio::copy_bytes(wq.buf.wrapping_add(u64::from(pos)) as *mut u8, a) };
    if !b.is_empty() {
        // SAFETY: the remainder starts at ring offset 0; it is shorter than one WQE (≤ 1008
        // bytes), which fits in the caller's reserved WQEBBs.
        unsafe { mmio::copy_bytes(wq.buf as *mut u8, b) };
    }
}

/// Writes one 16-byte Pod segment at unit `k` of the WQE at `at`.
///
/// # Safety
/// As [`ring_copy`].
#[inline(always)]
unsafe fn put<T: bytemuck::Pod>(wq: &WqHandle, at: ProdIdx, k: u32, seg: T) {
    // SAFETY: `unit_addr` stays inside the ring; units are 16-byte aligned; the caller reserved
    // these WQEBBs.
    unsafe { mmio::write_seg(unit_addr(wq, at, k) as *mut T, seg) }
}

/// Writes the payload at unit `k` and returns the units used.
///
/// # Safety
/// As [`ring_copy`].
#[inline(always)]
unsafe fn put_payload(wq: &WqHandle, at: ProdIdx, k: u32, payload: &Payload<'_>) -> u32 {
    match payload {
        Payload::Sges(sges) => {
            let mut n = 0;
            for s in *sges {
                if s.length != 0 {
                    // SAFETY: forwarded from the caller.
                    unsafe { put(wq, at, k + n, DataSeg::emit(s)) };
                    n += 1;
                }
            }
            n
        }
        Payload::Inline(data) => {
            let len = data.len() as u32;
            let units = inline_seg::ds_for(len);
            if units == 0 {
                return 0;
            }
            let off = k * 16;
            // SAFETY: forwarded from the caller; header, payload and padding stay inside the
            // `units` DS the request reserved.
            unsafe {
                ring_copy(wq, at, off, &inline_seg::header(len).to_bytes());
                ring_copy(wq, at, off + inline_seg::HEADER_BYTES, data);
                let used = inline_seg::HEADER_BYTES + len;
                let pad = (units * 16).saturating_sub(used) as usize;
                ring_copy(wq, at, off + used, [0u8; 16].get(..pad).unwrap_or(&[]));
            }
            units
        }
    }
}

/// Writes the control segment and returns the [`Posted`] value.
///
/// # Safety
/// As [`ring_copy`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn put_ctrl(
    wq: &WqHandle,
    pos: SqPos,
    opcode: Opcode,
    opmod: u8,
    ds: u32,
    fm: u8,
    imm: u32,
) -> Posted {
    let at = pos.unit;
    let ctrl = CtrlRepr {
        opcode,
        opmod,
        wqe_index: at.idx16().0,
        qpn: wq.qpn,
        ds: ds as u8,
        signature: 0,
        dci_stream: 0,
        fm_ce_se: fm,
        imm,
    }
    .emit();
    // SAFETY: forwarded from the caller.
    unsafe { put(wq, at, 0, ctrl) };
    let b = bytemuck::bytes_of(&ctrl);
    let mut doorbell = [0u8; 8];
    doorbell.copy_from_slice(b.get(..8).unwrap_or(&[0; 8]));
    let cost = Cost {
        units: wqebbs_for_ds(ds),
        packets: 0,
    };
    Posted::new(pos, cost, doorbell)
}

/// RDMA WRITE/SEND family with any payload.
///
/// # Safety
/// As [`ring_copy`].
#[inline(always)]
unsafe fn post_rdma_like(
    wq: &WqHandle,
    pos: SqPos,
    opcode: Opcode,
    remote: Option<Remote>,
    payload: &Payload<'_>,
    imm: Option<u32>,
    fm: u8,
) -> Posted {
    let at = pos.unit;
    let mut k = 1;
    if let Some(r) = remote {
        // SAFETY: forwarded from the caller.
        unsafe { put(wq, at, k, RaddrSeg::emit(r)) };
        k += 1;
    }
    // SAFETY: forwarded from the caller.
    k += unsafe { put_payload(wq, at, k, payload) };
    // SAFETY: forwarded from the caller.
    unsafe { put_ctrl(wq, pos, opcode, 0, k, fm, imm.unwrap_or(0)) }
}

/// Any atomic.
///
/// # Safety
/// As [`ring_copy`].
#[inline(always)]
unsafe fn post_atomic_any(
    wq: &WqHandle,
    pos: SqPos,
    remote: Remote,
    local: Sge,
    op: &AtomicOp,
    bytes: u32,
    fm: u8,
) -> Posted {
    let at = pos.unit;
    let (opcode, opmod) = match op {
        AtomicOp::CompareSwap { .. } => (Opcode::AtomicCs, 0),
        AtomicOp::FetchAdd { .. } => (Opcode::AtomicFa, 0),
        AtomicOp::MaskedCompareSwap { .. } => {
            (Opcode::AtomicMaskedCs, atomic_seg::ext_opmod(bytes))
        }
        AtomicOp::MaskedFetchAdd { .. } => (Opcode::AtomicMaskedFa, atomic_seg::ext_opmod(bytes)),
    };
    // SAFETY: forwarded from the caller.
    unsafe { put(wq, at, 1, RaddrSeg::emit(remote)) };
    let mut k = 2;
    for unit in atomic_seg::encode(op, bytes).as_slice() {
        // SAFETY: forwarded from the caller.
        unsafe { put(wq, at, k, *unit) };
        k += 1;
    }
    let data = Sge {
        addr: local.addr,
        length: if op.is_masked() { bytes } else { 8 },
        lkey: local.lkey,
    };
    // SAFETY: forwarded from the caller.
    unsafe { put(wq, at, k, DataSeg::emit(&data)) };
    // SAFETY: forwarded from the caller.
    unsafe { put_ctrl(wq, pos, opcode, opmod, k + 1, fm, 0) }
}

impl Mlx5 {
    /// rdma-core's doorbell: record, then either the 8-byte doorbell or (when `blueflame`) the
    /// whole WQE copied in 64-byte chunks, at `sq.wq.db + bf_offset`. Returns the next BlueFlame
    /// offset (`bf_offset ^ sq.bf_size`), which rdma-core toggles after every ring.
    ///
    /// rdma-core uses BlueFlame only for a single WQE of more than one DS that fits in
    /// `bf_size` and used inline data; callers choose.
    ///
    /// # Safety
    /// As [`Provider::ring_sq`]; with `blueflame`, `sq.wq.db + bf_offset` must be valid for the
    /// WQE's size rounded up to 64 bytes, and the WQE must not wrap past `posted.next`.
    #[inline(always)]
    pub unsafe fn ring_sq_bf(sq: &Mlx5Sq, posted: &Posted, bf_offset: u32, blueflame: bool) -> u32 {
        let wq = &sq.wq;
        mmio::wqe_to_dbrec_fence();
        // SAFETY: `wq.dbrec` is a valid doorbell record (caller); word 1 is the send counter.
        unsafe {
            mmio::store_be32_release(
                (wq.dbrec as *mut u32).wrapping_add(dbrec::SND_DBR),
                u32::from_ne_bytes(dbrec::sq_word(posted.next.unit.0).to_bytes()),
            );
        }
        mmio::wc_flush();
        let reg = wq.db.wrapping_add(u64::from(bf_offset));
        if blueflame {
            let n = posted.next.unit.since(posted.start.unit);
            let mut i = 0;
            while i < n {
                let src = unit_addr(wq, posted.start.unit.add(i), 0);
                // SAFETY: `src` is a whole WQEBB inside the ring (WQEBBs never straddle the end);
                // the destination range was vouched for by the caller.
                unsafe {
                    mmio::copy_blueflame_chunk(
                        reg.wrapping_add(u64::from(i) * 64) as *mut u64,
                        src as *const u8,
                    );
                }
                i += 1;
            }
        } else {
            // SAFETY: `reg` is the caller's doorbell register.
            unsafe { mmio::store_doorbell64(reg as *mut u64, posted.doorbell) };
        }
        mmio::wc_flush();
        bf_offset ^ sq.bf_size
    }
}

impl Provider for Mlx5 {
    type Sq = Mlx5Sq;
    type Rq = WqHandle;
    const NAME: &'static str = "mlx5";
    const SQ_UNIT_BYTES: u32 = WQEBB_BYTES;
    /// 63 DS minus control, raddr and the 4-byte inline header.
    const MAX_INLINE_BYTES: u32 = MAX_DS * 16 - 32 - inline_seg::HEADER_BYTES;
    const MAX_WQE_UNITS: u32 = MAX_DS.div_ceil(DS_PER_WQEBB);
    const HAS_DOORBELL_RECORD: bool = true;
    const WQE_COUNTER_BITS: u32 = 16;
    const CQ_INDEX_BITS: u32 = 24;
    const DEVICE_TAG: u32 = 2;
    // Mellanox, and NVIDIA's id on newer ConnectX/BlueField.
    const PCI_VENDOR_IDS: &'static [u32] = &[0x02c9, 0x15b3];
    const ATOMIC_RESULT_BIG_ENDIAN: bool = true;

    #[inline(always)]
    fn cost(_sq: &Mlx5Sq, wr: &WorkRequest<'_>) -> Cost {
        Cost {
            units: wqebbs_for_ds(ds_for(wr)),
            packets: 0,
        }
    }

    fn check(sq: &Mlx5Sq, wr: &WorkRequest<'_>) -> Result<Cost, PostError> {
        let wq = &sq.wq;
        gda_hal::provider::check_common(wq, wr, wq.max_inline.min(Self::MAX_INLINE_BYTES))?;
        let ds = ds_for(wr);
        let units = wqebbs_for_ds(ds);
        if ds > MAX_DS || units > wq.entries {
            return Err(PostError::WqeTooLarge {
                units,
                max: wq.entries.min(Self::MAX_WQE_UNITS),
            });
        }
        Ok(Cost { units, packets: 0 })
    }

    /// One dispatch on the operation; the DS count is the segments written (the control
    /// segment takes it from there), so nothing `check` derived is computed again.
    #[inline(always)]
    unsafe fn post_checked(req: &Checked<'_, Self>, at: SqPos, flags: SendFlags) -> Posted {
        let wq = &req.queue().wq;
        let fm = ctrl_flags(flags);
        // SAFETY: forwarded from the caller.
        unsafe {
            match *req.request() {
                WorkRequest::Write {
                    remote,
                    payload,
                    imm,
                } => {
                    let op = if imm.is_some() {
                        Opcode::RdmaWriteImm
                    } else {
                        Opcode::RdmaWrite
                    };
                    post_rdma_like(wq, at, op, Some(remote), &payload, imm, fm)
                }
                WorkRequest::Send { payload, imm } => {
                    let op = if imm.is_some() {
                        Opcode::SendImm
                    } else {
                        Opcode::Send
                    };
                    post_rdma_like(wq, at, op, None, &payload, imm, fm)
                }
                WorkRequest::Read { remote, sges } => post_rdma_like(
                    wq,
                    at,
                    Opcode::RdmaRead,
                    Some(remote),
                    &Payload::Sges(sges),
                    None,
                    fm,
                ),
                WorkRequest::Atomic {
                    remote,
                    local,
                    op,
                    bytes,
                } => post_atomic_any(wq, at, remote, local, &op, bytes, fm),
                WorkRequest::Nop => put_ctrl(wq, at, Opcode::Nop, 0, 1, fm, 0),
            }
        }
    }

    /// NVSHMEM-style minimal doorbell: always at `sq.wq.db` (no BlueFlame-half toggling); see
    /// [`Mlx5::ring_sq_bf`] for rdma-core's convention.
    #[inline(always)]
    unsafe fn ring_sq(sq: &Mlx5Sq, posted: &Posted) {
        // SAFETY: forwarded from the caller.
        unsafe { Self::ring_sq_bf(sq, posted, 0, false) };
    }

    #[inline(always)]
    unsafe fn post_recv<const N: usize>(rq: &WqHandle, at: ProdIdx, sges: &[Sge; N]) {
        let slot = at.0 & rq.entries.wrapping_sub(1);
        let base = rq.buf.wrapping_add(u64::from(slot) * u64::from(rq.stride));
        let cap = rq.stride / 16;
        let mut k = 0u32;
        for s in sges {
            if s.length != 0 && k < cap {
                // SAFETY: the caller owns slot `at`; `k < stride / 16` keeps the store inside it.
                unsafe {
                    mmio::write_seg(
                        base.wrapping_add(u64::from(k) * 16) as *mut DataSeg,
                        DataSeg::emit(s),
                    )
                };
                k += 1;
            }
        }
        if k < rq.max_sge && k < cap {
            // SAFETY: as above.
            unsafe {
                mmio::write_seg(
                    base.wrapping_add(u64::from(k) * 16) as *mut DataSeg,
                    DataSeg::TERMINATOR,
                )
            };
        }
    }

    #[inline(always)]
    unsafe fn ring_rq(rq: &WqHandle, next: ProdIdx) {
        mmio::wqe_to_dbrec_fence();
        // SAFETY: `rq.dbrec` is a valid doorbell record (caller); word 0 is the receive counter.
        unsafe {
            mmio::store_be32_release(
                (rq.dbrec as *mut u32).wrapping_add(dbrec::RCV_DBR),
                u32::from_ne_bytes(dbrec::rq_word(next.0).to_bytes()),
            );
        }
    }

    #[inline(always)]
    unsafe fn poll_cq(cq: &CqHandle, ci: u32) -> Option<WorkCompletion> {
        let ring = cq.ring()?;
        let addr = cqe_addr(cq, ring.slot(ci));
        // SAFETY: `addr` is inside the CQ buffer the caller vouched for.
        let op_own = unsafe {
            mmio::load_u8_acquire(addr.wrapping_add(cqe64::field::OP_OWN as u64) as *const u8)
        };
        if !Cqe64::sw_owned(op_own, ci, ring.log2()) {
            return None;
        }
        mmio::dma_read_barrier();
        // SAFETY: as above; CQEs are 64-byte aligned.
        let cqe = unsafe { mmio::read_seg(addr as *const Cqe64) };
        Some(decode(&cqe))
    }

    #[inline(always)]
    unsafe fn update_cq_ci(cq: &CqHandle, ci: u32) {
        // SAFETY: `cq.dbrec` is a valid CQ doorbell record (caller); word 0 is the consumer index.
        unsafe {
            mmio::store_be32_release(
                (cq.dbrec as *mut u32).wrapping_add(dbrec::CQ_SET_CI),
                u32::from_ne_bytes(dbrec::cq_ci_word(ci).to_bytes()),
            );
        }
    }

    /// A collapsed CQ has one slot, which the NIC overwrites with every completion. The tail
    /// word of a CQE (`sop_drop_qpn`, `wqe_counter`, `signature`, `op_own`: bytes 56..64) says
    /// which completion is there, and the device writes it as one aligned 8-byte unit. So: load
    /// the tail word once, read the CQE, load the tail word again, and accept the CQE only if the
    /// tail did not change (a different `wqe_counter` means the slot was overwritten meanwhile).
    #[inline(always)]
    unsafe fn poll_collapsed(
        _sq: &Mlx5Sq,
        cq: &CqHandle,
        progress: &mut CollapsedProgress,
        rung: u64,
    ) -> Result<Option<WorkCompletion>, OutOfWindow> {
        let addr = cqe_addr(cq, 0);
        let tail = addr.wrapping_add(cqe64::TAIL_OFFSET as u64) as *const u64;
        // SAFETY: slot 0 is inside the CQ buffer the caller vouched for; the tail word is 8-byte
        // aligned (CQEs are 64-byte aligned).
        let t1 = unsafe { mmio::load_u64_acquire(tail) };
        let op_own = t1.to_ne_bytes()[7];
        if op_own >> cqe64::op_own::OPCODE_SHIFT == crate::wire::CqeOpcode::Invalid.raw() {
            return Ok(None);
        }
        mmio::dma_read_barrier();
        // SAFETY: as above.
        let cqe = unsafe { mmio::read_seg(addr as *const Cqe64) };
        mmio::dma_read_barrier();
        // SAFETY: as above.
        if unsafe { mmio::load_u64_acquire(tail) } != t1 {
            return Ok(None);
        }
        let before = progress.complete_below();
        progress.observe(u32::from(cqe.wqe_counter.get()), rung)?;
        Ok((progress.complete_below() != before).then(|| decode(&cqe)))
    }
}

/// Address of the 64-byte CQE of `slot` (the second half of a 128-byte CQE).
#[inline(always)]
fn cqe_addr(cq: &CqHandle, slot: u32) -> u64 {
    let stride = u64::from(cq.cqe_bytes.max(64));
    cq.buf
        .wrapping_add(u64::from(slot) * stride)
        .wrapping_add(stride - 64)
}

/// The work completion for a CQE; a CQE gda cannot decode (compressed) becomes a general error.
#[inline(always)]
fn decode(cqe: &Cqe64) -> WorkCompletion {
    match CqeRepr::parse(cqe) {
        Ok(r) => r.completion(),
        Err(_) => WorkCompletion {
            status: WcStatus::GeneralErr,
            opcode: WcOpcode::Other,
            wqe_counter: u32::from(cqe.wqe_counter.get()),
            byte_len: 0,
            imm: None,
            qpn: cqe.sop_drop_qpn.get() & 0x00ff_ffff,
            vendor_err: 0,
            is_recv: false,
        },
    }
}
