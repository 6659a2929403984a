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

use std::format;
use std::vec::Vec;

use gda_hal::model::{
    BadRecv, Cpl, CqView, DeviceModel, Malformed, ModelError, ModelFor, Modeled, OpKind,
    QpGeometry, QpLayout, QpView, Seq, WqeOp,
};
use gda_hal::{CqHandle, Sge, WcOpcode, WcStatus, WqHandle};

use crate::device::{FIXED3_MAX_INLINE, MAX_INLINE, MAX_SGE};
use crate::wire::cqe::rc_flags;
use crate::wire::psn::{self as bpsn, MsnEntry, PsnEntry, PsnExtEntry, PsnRepr};
use crate::wire::sqe::{self, BnxtSge};
use crate::wire::{
    CqeBody, CqeRepr, CqeType, DbType, DoorbellRepr, ParseError, ReqStatus, RespStatus, RqeHdr,
    SendWqe, WqePayload, WqeType,
};
use crate::{Bnxt, BnxtSq, Mode, PsnForm, WqeMode};

/// Offset of the RQ doorbell word in the QP's doorbell page (hardware takes every store; a
/// polled word shared by SQ and RQ would lose one store to the other).
const RQ_DB_OFFSET: u64 = 64;

/// A first send PSN near the 24-bit wrap, so every run crosses it.
#[must_use]
pub const fn start_psn_for(qpn: u32) -> u32 {
    0x00ff_ff00 | (qpn & 0xff)
}

/// Copies `out.len() / 16` slots starting at `first` (< the ring's slot count), unwrapping at
/// the ring's end with at most two reads.
fn read_slots(qp: &QpView, mode: Mode, first: u32, out: &mut [u8]) {
    let ring = mode.ring_slots(qp.geometry.sq_units) as usize * 16;
    let at = first as usize * 16;
    let head = out.len().min(ring.saturating_sub(at));
    let (a, b) = out.split_at_mut(head);
    qp.sq.read(at, a);
    qp.sq.read(0, b);
}

/// The requester CQE's consumer index after position `after`: the doorbell index there (the
/// hardware reports its consumer index in the doorbell's units, modulo the ring).
fn con_index(qp: &QpView, mode: Mode, after: u64) -> u32 {
    Bnxt::db_index(mode.wqe, qp.geometry.sq_units, after as u32)
}

/// Decodes the send WQE at unit `pos` from its own copy of the ring bytes (with gda-bnxt's
/// checked decoder: a malformed WQE is an error completion, never trusted).
fn fetch(
    qp: &QpView,
    mode: Mode,
    pos: u64,
    op: &mut WqeOp,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    let entries = qp.geometry.sq_units;
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
    if op.sges.len() > qp.geometry.max_sge as usize {
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
    op.packets = bpsn::packets(w.length(), qp.geometry.path_mtu);
    Ok(())
}

/// Checks the PSN-table entry of the WQE at `pos` against the engine's sequence. Returns what
/// is wrong, or `Ok`.
fn check_psn(qp: &QpView, mode: Mode, pos: u64, seq: &Seq, op: &WqeOp) -> Result<(), &'static str> {
    let entries = qp.geometry.sq_units;
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
            qp.sq.read(table + i as usize * 8, &mut b);
            PsnRepr::parse_msn(&bytemuck::pod_read_unaligned::<MsnEntry>(&b))
        }
        PsnForm::Legacy => {
            let mut b = [0u8; 8];
            qp.sq.read(table + db_idx as usize * 8, &mut b);
            PsnRepr::parse_legacy(&bytemuck::pod_read_unaligned::<PsnEntry>(&b))
        }
        PsnForm::Ext => {
            let mut b = [0u8; 16];
            qp.sq.read(table + db_idx as usize * 16, &mut b);
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
fn sq_doorbell(qp: &QpView, mode: Mode, pos: u64) -> Option<u64> {
    // Written only with 64-bit stores.
    let raw = qp.db.load_u64(0)?;
    let db = DoorbellRepr::parse(raw).ok()?;
    // A doorbell for another queue or of another type cannot be attributed: hardware drops it.
    if db.db_type != DbType::Sq || db.xid != qp.qpn & 0xf_ffff {
        return None;
    }
    let entries = u64::from(qp.geometry.sq_units);
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
fn rq_producer(qp: &QpView, pos: u64) -> u64 {
    let Some(Ok(db)) = qp
        .db
        .load_u64(RQ_DB_OFFSET as usize)
        .map(DoorbellRepr::parse)
    else {
        return pos;
    };
    let entries = u64::from(qp.geometry.rq_wqes);
    if db.db_type != DbType::Rq || db.xid != qp.qpn & 0xf_ffff || u64::from(db.index) >= entries {
        return pos;
    }
    let v = u64::from(db.index) + if db.epoch { entries } else { 0 };
    widen(pos, v, entries)
}

/// Reads the receive WQE at `pos`.
fn fetch_recv(qp: &QpView, pos: u64, out: &mut Vec<Sge>) -> Result<(), BadRecv> {
    let slot = (pos & (u64::from(qp.geometry.rq_wqes) - 1)) as usize;
    let stride = qp.rq_stride as usize;
    let mut b = [0u8; 16 * 8];
    let wqe = b.get_mut(..stride).ok_or(BadRecv)?;
    qp.rq.read(slot * stride, wqe);
    let h: RqeHdr = bytemuck::pod_read_unaligned(&wqe[..16]);
    let ws = h.slots() as usize;
    if !h.is_recv() || ws < 3 || ws * 16 > stride || ws - 2 > qp.geometry.max_sge as usize {
        return Err(BadRecv);
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
fn outstanding(cq: &CqView, prod: u64) -> u32 {
    let raw = cq.dbrec.load_u64(0).unwrap_or(0);
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
fn write_cqe(cq: &CqView, c: &Cpl, prod: u64, collapsed: bool) {
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
    // Body first, then the 8-byte word holding the phase bit with release, so a reader that
    // sees the phase sees the body.
    cq.buf
        .publish_cqe(slot as usize * 32, bytemuck::bytes_of(&e));
}

/// The Thor2 model in one WQE mode and PSN-table form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BnxtModel {
    /// The queues' mode, as the kernel reports it at QP creation.
    pub mode: Mode,
}

impl From<Mode> for BnxtModel {
    fn from(mode: Mode) -> Self {
        Self { mode }
    }
}

impl DeviceModel for BnxtModel {
    fn name(&self) -> &'static str {
        "bnxt"
    }

    fn cqe_bytes(&self) -> u32 {
        32
    }

    fn layout(&self, g: &QpGeometry) -> Result<QpLayout, ModelError> {
        let m = self.mode;
        let max_sge = if m.wqe == WqeMode::Fixed3 { 1 } else { MAX_SGE };
        if g.max_sge > max_sge {
            return Err(format!(
                "max_sge = {} exceeds {max_sge} for bnxt {} mode",
                g.max_sge,
                m.wqe.name()
            ));
        }
        if !g.path_mtu.is_power_of_two() || !(256..=4096).contains(&g.path_mtu) {
            return Err(format!(
                "path_mtu = {} must be 256, 512, 1024, 2048 or 4096",
                g.path_mtu
            ));
        }
        // Receive WQEs: header slot, reserved slot, SGEs (static mode: always 8 slots). The
        // send ring is followed by its PSN/MSN table, as rdma-core lays it out.
        Ok(QpLayout {
            sq_bytes: m.ring_slots(g.sq_units) as usize * 16
                + m.psn_entries(g.sq_units) as usize * m.psn.entry_bytes() as usize,
            rq_stride: if m.wqe == WqeMode::Static {
                128
            } else {
                16 * (2 + g.max_sge)
            },
        })
    }

    /// No consumer record: the CQ doorbell word carries the consumer index.
    fn cq_handle(&self, cq: &CqView) -> CqHandle {
        CqHandle {
            buf: cq.buf.addr(),
            dbrec: 0,
            db: cq.dbrec.addr(),
            entries: cq.entries,
            cqe_bytes: 32,
            cqn: cq.cqn,
            collapsed: u32::from(cq.collapsed),
        }
    }

    fn sq_doorbell(&self, qp: &QpView, pos: u64) -> Option<u64> {
        sq_doorbell(qp, self.mode, pos)
    }

    fn fetch(
        &self,
        qp: &QpView,
        pos: u64,
        op: &mut WqeOp,
        scratch: &mut Vec<u8>,
    ) -> Result<(), Malformed> {
        op.reset();
        fetch(qp, self.mode, pos, op, scratch)
    }

    fn check_sequence(
        &self,
        qp: &QpView,
        pos: u64,
        seq: &Seq,
        op: &WqeOp,
    ) -> Result<(), ModelError> {
        check_psn(qp, self.mode, pos, seq, op).map_err(ModelError::from)
    }

    fn counter_for(&self, qp: &QpView, start: u64, units: u32) -> u32 {
        con_index(qp, self.mode, start + u64::from(units))
    }

    fn coalesces_completions(&self) -> bool {
        true
    }

    fn rq_producer(&self, qp: &QpView, pos: u64) -> u64 {
        rq_producer(qp, pos)
    }

    fn fetch_recv(&self, qp: &QpView, pos: u64, out: &mut Vec<Sge>) -> Result<(), BadRecv> {
        out.clear();
        fetch_recv(qp, pos, out)
    }

    fn cq_outstanding(&self, cq: &CqView, prod: u64) -> u32 {
        outstanding(cq, prod)
    }

    fn write_cqe(&self, cq: &CqView, c: &Cpl, prod: u64) {
        write_cqe(cq, c, prod, cq.collapsed);
    }

    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}

impl ModelFor<Bnxt> for BnxtModel {
    fn sq_handle(&self, qp: &QpView) -> Result<BnxtSq, ModelError> {
        let m = self.mode;
        let fixed3 = m.wqe == WqeMode::Fixed3;
        let wq = WqHandle {
            buf: qp.sq.addr(),
            dbrec: 0,
            db: qp.db.addr(),
            entries: qp.geometry.sq_units,
            stride: 0,
            qpn: qp.qpn,
            max_inline: qp.geometry.max_inline.min(if fixed3 {
                FIXED3_MAX_INLINE
            } else {
                MAX_INLINE
            }),
            max_sge: qp.geometry.max_sge,
        };
        let table = qp.sq.addr() + u64::from(m.ring_slots(qp.geometry.sq_units)) * 16;
        BnxtSq::new(
            wq,
            m,
            table,
            m.psn_entries(qp.geometry.sq_units),
            qp.geometry.path_mtu,
            qp.start_psn,
        )
        .map_err(|e| format!("bnxt send queue: {e}"))
    }

    /// The RQ doorbell has its own word of the QP's doorbell page.
    fn rq_handle(&self, qp: &QpView) -> WqHandle {
        qp.rq_wq(0, qp.db.addr() + RQ_DB_OFFSET)
    }
}

impl Modeled for Bnxt {
    type Model = BnxtModel;
    /// Thor2's defaults: static WQEs and the MSN table.
    fn model() -> BnxtModel {
        BnxtModel::default()
    }

    /// Broadcom's PCI vendor id and the BCM57608 (Thor2) part number.
    const DEVICE_IDS: (u32, u32) = (<Bnxt as gda_hal::Provider>::PCI_VENDOR_IDS[0], 0x1760);
}
