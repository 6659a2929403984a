//! The bnxt device model: bnxt_re queues executed from the doorbell alone.
//!
//! What the model relies on, as the hardware does:
//! * **Doorbell only** — no record in host memory. The SQ doorbell carries the producer index
//!   (WQE index in static mode, slot index otherwise) and the epoch; index + epoch name a
//!   position modulo twice the ring, which the engine widens from its own consumer position.
//! * **PSN table** — for every WQE the engine reads the entry software filled (legacy, P5/P7
//!   extended or Thor2 MSN form, at the index that form uses) and checks its start PSN, next PSN
//!   and start slot against its own running PSN and message count. A wrong entry would make
//!   real hardware retransmit the wrong packets; here it is an error completion
//!   (`LOC_QP_OP_ERR`) and the QP goes to error — so concurrency bugs that put entries out of
//!   order are caught in CI.
//! * **Completions** — 32-byte CQEs with a phase bit (first pass 1); requester CQEs carry the
//!   consumer index *after* the retired WQEs, so one CQE retires every earlier unsignalled
//!   WQE. Before an error CQE, WQEs that completed without a CQE are retired by a success CQE
//!   first, as rdma-core's poll (which charges the error to the oldest outstanding WQE) expects.

use gda_bnxt::wire::cqe::rc_flags;
use gda_bnxt::wire::psn::{self as bpsn, MsnEntry, PsnEntry, PsnExtEntry, PsnRepr};
use gda_bnxt::wire::sqe::{self, BnxtSge};
use gda_bnxt::wire::{
    CqeBody, CqeRepr, CqeType, DbType, DoorbellRepr, ParseError, ReqStatus, RespStatus, RqeHdr,
    SendWqe, WqePayload, WqeType,
};
use gda_bnxt::{Bnxt, Mode, PsnForm, WqeMode};
use gda_hal::{Sge, WcOpcode, WcStatus, mmio};

use crate::fabric::{CqInner, QpInner, RQ_DB_OFFSET};
use crate::model::{Cpl, Malformed, OpKind, WqeOp};

/// The running sequence the engine expects: messages and PSNs of WQEs consumed so far.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seq {
    pub msg: u32,
    /// Packets since the QP's start PSN.
    pub psn: u32,
}

impl Seq {
    pub(crate) fn advance(&mut self, packets: u32) {
        self.msg = self.msg.wrapping_add(1);
        self.psn = self.psn.wrapping_add(packets) & bpsn::PSN_MASK;
    }
}

/// Copies `out.len() / 16` slots starting at `first` (< the ring's slot count), unwrapping at
/// the ring's end with at most two reads.
fn read_slots(qp: &QpInner, mode: Mode, first: u32, out: &mut [u8]) {
    let ring = mode.ring_slots(qp.init.sq_units) as usize * 16;
    let at = first as usize * 16;
    let head = out.len().min(ring.saturating_sub(at));
    let (a, b) = out.split_at_mut(head);
    qp.sq.read_into(at, a);
    qp.sq.read_into(0, b);
}

/// The requester CQE's consumer index after position `after`: the doorbell index there (the
/// hardware reports its consumer index in the doorbell's units, modulo the ring).
pub(crate) fn con_index(qp: &QpInner, mode: Mode, after: u64) -> u32 {
    Bnxt::db_index(mode.wqe, qp.init.sq_units, after as u32)
}

/// Decodes the send WQE at unit `pos` from its own copy of the ring bytes (with gda-bnxt's
/// checked decoder: a malformed WQE is an error completion, never trusted).
pub(crate) fn fetch(
    qp: &QpInner,
    mode: Mode,
    pos: u64,
    op: &mut WqeOp,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    let entries = qp.init.sq_units;
    let spu = mode.wqe.slots_per_unit();
    let first = (pos & (u64::from(entries) - 1)) as u32 * spu;
    let mut head = [0u8; 16];
    read_slots(qp, mode, first, &mut head);
    let ws = SendWqe::size_in_slots(&head).unwrap_or(0);
    let units = match mode.wqe {
        WqeMode::Static | WqeMode::Fixed3 => 1,
        WqeMode::Variable => ws.clamp(1, entries),
    };
    let bad = |status: WcStatus| Malformed {
        status,
        units,
        counter: con_index(qp, mode, pos + u64::from(units)),
    };
    if ws > mode.ring_slots(entries) {
        // A WQE larger than the ring: nothing to decode.
        return Err(bad(WcStatus::LocQpOpErr));
    }
    // The whole WQE, read once from the ring (the decoder checks `ws` against the mode).
    scratch.clear();
    scratch.extend_from_slice(&head);
    scratch.resize(ws.clamp(1, 8) as usize * 16, 0);
    if ws > 1 {
        read_slots(
            qp,
            mode,
            (first + 1) % mode.ring_slots(entries),
            &mut scratch[16..],
        );
    }
    let w = SendWqe::parse(scratch, mode.wqe).map_err(|e| {
        bad(match e {
            ParseError::Layout { .. } => WcStatus::LocLenErr,
            _ => WcStatus::LocQpOpErr,
        })
    })?;
    op.units = units;
    op.counter = con_index(qp, mode, pos + u64::from(units));
    op.hw_opcode = w.hdr.wqe_type.raw();
    op.signaled = w.hdr.flags & sqe::flags::SIGNALED != 0;
    op.fence = w.hdr.flags & (sqe::flags::UC_FENCE | sqe::flags::RD_FENCE) != 0;
    op.solicited = w.hdr.flags & sqe::flags::SE != 0;
    op.imm = w.imm;
    if let Some(r) = w.remote {
        op.remote = r;
    }
    match w.payload {
        WqePayload::Inline(d) => op.inline.get_or_insert_with(Vec::new).extend_from_slice(d),
        // A zero-length SGE (the fixed form's empty third slot) moves nothing.
        WqePayload::Sges(s) => op.sges.extend(s.iter().filter(|g| g.length != 0)),
    }
    if op.sges.len() > qp.init.max_sge as usize {
        return Err(bad(WcStatus::LocQpOpErr));
    }
    op.kind = Some(match w.hdr.wqe_type {
        WqeType::RdmaWrite | WqeType::RdmaWriteImm => OpKind::Write,
        WqeType::Send | WqeType::SendImm => OpKind::Send,
        WqeType::RdmaRead => OpKind::Read,
        _ => {
            op.atomic = w.atomic.map(|a| (a, 8));
            OpKind::Atomic
        }
    });
    // A zero-length RDMA WRITE is the provider's NOP: nothing to move, nothing to check.
    if op.kind == Some(OpKind::Write) && op.length() == 0 && op.sges.is_empty() {
        op.kind = Some(OpKind::Nop);
    }
    op.packets = bpsn::packets(w.length(), qp.init.path_mtu);
    Ok(())
}

/// Checks the PSN-table entry of the WQE at `pos` against the engine's sequence. Returns what
/// is wrong, or `Ok`.
pub(crate) fn check_psn(
    qp: &QpInner,
    mode: Mode,
    pos: u64,
    seq: &Seq,
    op: &WqeOp,
) -> Result<(), &'static str> {
    let entries = qp.init.sq_units;
    let idx = (pos & (u64::from(entries) - 1)) as u32;
    let first_slot = idx * mode.wqe.slots_per_unit();
    let db_idx = if mode.wqe == WqeMode::Fixed3 {
        first_slot
    } else {
        idx
    };
    let table = mode.ring_slots(entries) as usize * 16;
    let start = bpsn::psn_add(qp.start_psn, seq.psn);
    let next = bpsn::psn_add(start, op.packets);
    let got = match mode.psn {
        PsnForm::Msn => {
            let i = seq.msg & (mode.psn_entries(entries) - 1);
            let mut b = [0u8; 8];
            qp.sq.read_into(table + i as usize * 8, &mut b);
            PsnRepr::parse_msn(&bytemuck::pod_read_unaligned::<MsnEntry>(&b))
        }
        PsnForm::Legacy => {
            let mut b = [0u8; 8];
            qp.sq.read_into(table + db_idx as usize * 8, &mut b);
            PsnRepr::parse_legacy(&bytemuck::pod_read_unaligned::<PsnEntry>(&b))
        }
        PsnForm::Ext => {
            let mut b = [0u8; 16];
            qp.sq.read_into(table + db_idx as usize * 16, &mut b);
            PsnRepr::parse_ext(&bytemuck::pod_read_unaligned::<PsnExtEntry>(&b))
        }
    };
    if got.start != start {
        return Err("PSN-table entry: wrong start PSN");
    }
    if got.next != next {
        return Err("PSN-table entry: wrong next PSN");
    }
    let want_slot = match mode.psn {
        PsnForm::Msn => db_idx,
        PsnForm::Ext => first_slot,
        PsnForm::Legacy => 0,
    };
    if mode.psn != PsnForm::Legacy && u32::from(got.start_slot) != want_slot & 0xffff {
        return Err("PSN-table entry: wrong start slot");
    }
    Ok(())
}

fn widen(pos: u64, v: u64, entries: u64) -> u64 {
    let span = 2 * entries;
    pos + (v.wrapping_sub(pos) & (span - 1))
}

/// The producer position the newest SQ doorbell names (widened from `pos`), or `None` if no
/// doorbell for this queue has been seen.
pub(crate) fn sq_doorbell(qp: &QpInner, mode: Mode, pos: u64) -> Option<u64> {
    // SAFETY: the QP's doorbell page, 8-byte aligned, written only with 64-bit stores.
    let raw = unsafe { mmio::load_u64_acquire(qp.db.addr() as *const u64) };
    let db = DoorbellRepr::parse(raw).ok()?;
    // A doorbell for another queue or of another type cannot be attributed: hardware drops it.
    if db.db_type != DbType::Sq || db.xid != qp.qpn & 0xf_ffff {
        return None;
    }
    let entries = u64::from(qp.init.sq_units);
    let idx = match mode.wqe {
        WqeMode::Fixed3 => {
            if db.index % 3 != 0 {
                return None;
            }
            db.index / 3
        }
        _ => db.index,
    };
    if u64::from(idx) >= entries {
        return None;
    }
    let v = u64::from(idx) + if db.epoch { entries } else { 0 };
    let t = widen(pos, v, entries);
    (t != pos).then_some(t)
}

/// The widened receive producer position from the RQ doorbell.
pub(crate) fn rq_producer(qp: &QpInner, pos: u64) -> u64 {
    // SAFETY: the RQ word of the QP's doorbell page.
    let raw = unsafe { mmio::load_u64_acquire((qp.db.addr() + RQ_DB_OFFSET) as *const u64) };
    let Ok(db) = DoorbellRepr::parse(raw) else {
        return pos;
    };
    let entries = u64::from(qp.init.rq_wqes);
    if db.db_type != DbType::Rq || db.xid != qp.qpn & 0xf_ffff || u64::from(db.index) >= entries {
        return pos;
    }
    let v = u64::from(db.index) + if db.epoch { entries } else { 0 };
    widen(pos, v, entries)
}

/// Reads the receive WQE at `pos`.
pub(crate) fn fetch_recv(qp: &QpInner, pos: u64, out: &mut Vec<Sge>) -> Result<(), ()> {
    let slot = (pos & (u64::from(qp.init.rq_wqes) - 1)) as usize;
    let stride = qp.rq_stride as usize;
    let mut b = [0u8; 16 * 8];
    let wqe = b.get_mut(..stride).ok_or(())?;
    qp.rq.read_into(slot * stride, wqe);
    let h: RqeHdr = bytemuck::pod_read_unaligned(&wqe[..16]);
    let ws = h.slots() as usize;
    if !h.is_recv() || ws < 3 || ws * 16 > stride || ws - 2 > qp.init.max_sge as usize {
        return Err(());
    }
    for chunk in wqe[32..ws * 16].chunks_exact(16) {
        let s = bytemuck::pod_read_unaligned::<BnxtSge>(chunk).parse();
        if s.length != 0 {
            out.push(s);
        }
    }
    Ok(())
}

/// CQEs the consumer has not released, from the CQ doorbell (index + epoch, modulo twice the
/// ring). A CQ never rung has released nothing.
pub(crate) fn outstanding(cq: &CqInner, prod: u64) -> u32 {
    // SAFETY: the CQ's doorbell word, 8-byte aligned.
    let raw = unsafe { mmio::load_u64_acquire(cq.dbrec.addr() as *const u64) };
    let entries = u64::from(cq.entries);
    let ci = match DoorbellRepr::parse(raw) {
        Ok(db) if db.db_type == DbType::Cq && u64::from(db.index) < entries => {
            u64::from(db.index) + if db.epoch { entries } else { 0 }
        }
        _ => 0,
    };
    ((prod.wrapping_sub(ci)) & (2 * entries - 1)) as u32
}

/// Writes one bnxt CQE at `slot` (phase for pass `prod / entries`; collapsed: always 1).
pub(crate) fn write_cqe(cq: &CqInner, c: &Cpl, prod: u64, collapsed: bool) {
    let log2 = cq.entries.trailing_zeros();
    let slot = if collapsed {
        0
    } else {
        prod & (u64::from(cq.entries) - 1)
    };
    let phase = collapsed || (prod >> log2) & 1 == 0;
    let (cqe_type, status, flags, body) = if c.is_recv {
        let mut flags = 0;
        if c.imm.is_some() {
            flags |= rc_flags::IMM;
        }
        if c.opcode == WcOpcode::RecvRdmaWithImm {
            flags |= rc_flags::RDMA | rc_flags::IMM;
        }
        (
            CqeType::RecvRc,
            RespStatus::from_wc(c.status).raw(),
            flags,
            CqeBody::RecvRc {
                length: c.byte_len,
                imm: c.imm.unwrap_or(0),
                qp_handle: u64::from(c.qpn),
                mr_handle: 0,
            },
        )
    } else {
        (
            CqeType::Req,
            ReqStatus::from_wc(c.status).raw(),
            0,
            CqeBody::Req {
                qp_handle: u64::from(c.qpn),
                con_indx: c.counter & 0xffff,
            },
        )
    };
    let e = CqeRepr {
        cqe_type,
        phase,
        toggle: 0,
        status,
        flags,
        rwrid: 0,
        src_qpn_hi: 0,
        body,
    }
    .emit();
    let bytes = bytemuck::bytes_of(&e);
    let addr = cq.buf.addr() + slot * 32;
    let mut tail = [0u8; 8];
    tail.copy_from_slice(&bytes[24..32]);
    // SAFETY: the slot is inside the CQ buffer. Body first, then the 8-byte word holding the
    // phase bit with release, so a reader that sees the phase sees the body.
    unsafe {
        mmio::dma_copy(addr as *mut u8, bytes.as_ptr(), 24);
        mmio::store_u64_release((addr + 24) as *mut u64, u64::from_ne_bytes(tail));
    }
}
