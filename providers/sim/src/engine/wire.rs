//! RC operations with a responder in another process, over the message transport
//! ([`crate::wire`]): the requester side (send a request, complete the WQE when the response
//! comes) and the responder side (execute a peer's request against this process's memory and
//! queues, on this engine's thread like every other responder action).
//!
//! One request per QP is in flight at a time, so completions stay in order trivially and
//! memory stays bounded (a message is at most the port's 1 GiB `max_msg_sz`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gda_hal::model::{Cpl, OpKind, WqeOp};
use gda_hal::{WcOpcode, WcStatus, mmio};

use super::complete::*;
use super::data::*;
use super::recv::*;
use crate::mem::Access;
use crate::state::{FabricInner, QpExec, QpInner, WireWait};
use crate::types::{Endpoint, QpState};
use crate::wire::{Inbound, RNR, ReqOp, Request, Response, Wire};

/// How long a requester waits for a live peer's response before giving up (`RETRY_EXC_ERR`);
/// a dead peer is noticed at once (its connection closes).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a requester keeps retransmitting to a responder that does not answer — no QP of
/// that number, a QP not yet in RTR, no process listening — before `RETRY_EXC_ERR`: a NIC's
/// transport retries (`retry_cnt` × `timeout`, about half a second with the usual 7 × 67 ms)
/// cover a peer still bringing its QP up after the QP numbers were exchanged.
const RETRY_WINDOW: Duration = Duration::from_millis(1000);
/// Between two retransmissions.
const RETRY_GAP: Duration = Duration::from_millis(1);

/// Schedules a retransmission, or gives up once the retry window has passed.
fn retry_or_fail(qp: &QpInner, ex: &mut QpExec, op: &WqeOp, c: Cpl) -> Step {
    ex.wire_wait = None;
    let now = Instant::now();
    let first = *ex.wire_retry_since.get_or_insert(now);
    if now.duration_since(first) < RETRY_WINDOW {
        ex.hold_until = Some(now + RETRY_GAP);
        return Step::Wait;
    }
    ex.wire_retry_since = None;
    qp.set_error();
    Step::Complete(
        Cpl {
            status: WcStatus::RetryExcErr,
            ..c
        },
        op.units,
        true,
    )
}

/// Executes (or continues) the WQE at `ex.sq_pos` against QP `ep` of another process.
pub(super) fn execute_wire(
    wire: &Arc<Wire>,
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: &WqeOp,
    kind: OpKind,
    mut c: Cpl,
    ep: Endpoint,
) -> Step {
    let fail = |qp: &QpInner, ex: &mut QpExec, c: Cpl, status: WcStatus| {
        ex.wire_wait = None;
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, op.units, true)
    };
    c.opcode = match kind {
        OpKind::Write => WcOpcode::RdmaWrite,
        OpKind::Send => WcOpcode::Send,
        OpKind::Read => WcOpcode::RdmaRead,
        _ => c.opcode,
    };
    if let Some(w) = ex.wire_wait.as_ref().filter(|w| w.pos == ex.sq_pos) {
        let key = (qp.nic.id, qp.qpn);
        let resp = {
            let mut m = wire.responses.lock().unwrap_or_else(|e| e.into_inner());
            match m.get(&key) {
                Some(r) if r.seq == w.seq => m.remove(&key),
                _ => None,
            }
        };
        let Some(resp) = resp else {
            if w.conn.dead.load(std::sync::atomic::Ordering::Acquire) {
                return retry_or_fail(qp, ex, op, c);
            }
            if w.since.elapsed() > RESPONSE_TIMEOUT {
                return fail(qp, ex, c, WcStatus::RetryExcErr);
            }
            return Step::Wait;
        };
        ex.wire_wait = None;
        if resp.status == WcStatus::RetryExcErr as u32 {
            // The responder has no such QP, or not in RTR/RTS yet: no ACK, so retransmit.
            return retry_or_fail(qp, ex, op, c);
        }
        ex.wire_retry_since = None;
        return finish(qp, ex, op, c, resp);
    }
    // A new request.
    let payload = match kind {
        OpKind::Write | OpKind::Send => match stage_source(qp, op) {
            Ok(v) => v,
            Err(s) => return fail(qp, ex, c, s),
        },
        _ => Vec::new(),
    };
    let (reqop, len) = match kind {
        OpKind::Write => (ReqOp::Write, payload.len() as u64),
        OpKind::Send => (ReqOp::Send, payload.len() as u64),
        OpKind::Read => (ReqOp::Read, op.length()),
        OpKind::Atomic => (ReqOp::Atomic, 0),
        OpKind::Nop => return Step::Complete(c, op.units, false),
    };
    ex.wire_seq += 1;
    let req = Request {
        dst_nic: ep.nic,
        dst_qpn: ep.qpn,
        src_nic: qp.nic.id,
        src_qpn: qp.qpn,
        seq: ex.wire_seq,
        op: reqop,
        imm: op.imm,
        rkey: op.remote.rkey,
        raddr: op.remote.addr,
        len,
        atomic: if kind == OpKind::Atomic {
            op.atomic
        } else {
            None
        },
        payload,
    };
    let Some(conn) = wire.conn_to(ep.fabric) else {
        // Nobody listens for that fabric (yet, or any more): retransmit until the retries run out.
        return retry_or_fail(qp, ex, op, c);
    };
    if !conn.send(&req.encode()) {
        return retry_or_fail(qp, ex, op, c);
    }
    ex.wire_wait = Some(WireWait {
        seq: ex.wire_seq,
        pos: ex.sq_pos,
        since: Instant::now(),
        conn,
    });
    Step::Wait
}

/// Completes a WQE from its response.
fn finish(qp: &Arc<QpInner>, ex: &mut QpExec, op: &WqeOp, mut c: Cpl, resp: Response) -> Step {
    let fail = |qp: &QpInner, c: Cpl, status: WcStatus| {
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, op.units, true)
    };
    if resp.status == RNR {
        return rnr(qp, ex, c, op);
    }
    ex.rnr_attempts = 0;
    if resp.status != WcStatus::Success as u32 {
        let s = WcStatus::ALL
            .into_iter()
            .find(|s| *s as u32 == resp.status)
            .unwrap_or(WcStatus::RemOpErr);
        return fail(qp, c, s);
    }
    match op.kind {
        Some(OpKind::Read) => {
            c.byte_len = resp.payload.len() as u32;
            let mut off = 0usize;
            let mut keep = Vec::new();
            for s in op.sges.iter().filter(|s| s.length > 0) {
                match qp.nic.mrs.check_local(
                    qp.pd,
                    s.lkey,
                    s.addr,
                    u64::from(s.length),
                    Access::LOCAL_WRITE,
                ) {
                    Ok(m) => keep.push(m),
                    Err(e) => return fail(qp, c, local_fault(e)),
                }
            }
            for s in op.sges.iter().filter(|s| s.length > 0) {
                let n = (s.length as usize).min(resp.payload.len().saturating_sub(off));
                // SAFETY: the range was checked against a local region granting LOCAL_WRITE,
                // held by `keep`; `n` bytes are inside the response.
                unsafe { mmio::dma_copy(s.addr as *mut u8, resp.payload[off..].as_ptr(), n) };
                off += n;
            }
            mmio::dma_publish();
        }
        Some(OpKind::Atomic) => {
            let Some((aop, width)) = op.atomic else {
                return fail(qp, c, WcStatus::LocQpOpErr);
            };
            c.opcode = super::atomic::wc_opcode(&aop);
            c.byte_len = width;
            let Some(local) = op.sges.first() else {
                return fail(qp, c, WcStatus::LocQpOpErr);
            };
            let _m = match qp.nic.mrs.check_local(
                qp.pd,
                local.lkey,
                local.addr,
                u64::from(width),
                Access::LOCAL_WRITE,
            ) {
                Ok(m) => m,
                Err(e) => return fail(qp, c, local_fault(e)),
            };
            let mut old = [0u8; 8];
            let n = resp.payload.len().min(8);
            old[..n].copy_from_slice(&resp.payload[..n]);
            let (bytes, n) = qp.model().atomic_result(u64::from_le_bytes(old), width);
            // SAFETY: checked above (LOCAL_WRITE, `width` bytes), held by `_m`.
            unsafe { mmio::dma_copy(local.addr as *mut u8, bytes.as_ptr(), n) };
            mmio::dma_publish();
        }
        _ => {}
    }
    Step::Complete(c, op.units, false)
}

/// Executes the requests peers sent this process; returns whether there were any.
pub(super) fn serve_inbox(f: &FabricInner) -> bool {
    let Some(wire) = &f.wire else { return false };
    let batch: Vec<Inbound> = {
        let mut q = wire.inbox.lock().unwrap_or_else(|e| e.into_inner());
        if q.is_empty() {
            return false;
        }
        q.drain(..).collect()
    };
    for Inbound { conn, req } in batch {
        let (status, payload) = respond(f, &req);
        let resp = Response {
            dst_nic: req.src_nic,
            dst_qpn: req.src_qpn,
            seq: req.seq,
            status,
            payload,
        };
        conn.send(&resp.encode());
    }
    true
}

/// The responder's side of one request: (status or RNR, response payload).
fn respond(f: &FabricInner, req: &Request) -> (u32, Vec<u8>) {
    let st = |s: WcStatus| (s as u32, Vec::new());
    let rqp = f
        .qps
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(req.dst_nic, req.dst_qpn))
        .cloned();
    // No responder (or one not ready): the requester's retries run out, as in one process.
    let Some(rqp) = rqp.filter(|q| matches!(q.state(), QpState::Rtr | QpState::Rts)) else {
        return st(WcStatus::RetryExcErr);
    };
    let rmrs = &rqp.nic.mrs;
    match req.op {
        ReqOp::Write => {
            if req.len > 0 {
                if let Err(e) =
                    rmrs.check_remote(rqp.pd, req.rkey, req.raddr, req.len, Access::REMOTE_WRITE)
                {
                    return st(remote_fault(e));
                }
                // SAFETY: `[raddr, raddr + len)` was checked against a region of this process
                // granting REMOTE_WRITE; the payload has `len` bytes (checked when decoded).
                unsafe {
                    mmio::dma_copy(
                        req.raddr as *mut u8,
                        req.payload.as_ptr(),
                        req.payload.len(),
                    )
                };
                mmio::dma_publish();
            }
            if let Some(imm) = req.imm {
                match take_recv(&rqp) {
                    Recv::Got(pos) => {
                        let rc = Cpl {
                            opcode: WcOpcode::RecvRdmaWithImm,
                            is_recv: true,
                            byte_len: req.len as u32,
                            imm: Some(imm),
                            ..base_cpl(&rqp, pos as u32, 0)
                        };
                        rqp.recv_cq.write_cqe(&rc);
                    }
                    Recv::Empty => return (RNR, Vec::new()),
                }
            }
            st(WcStatus::Success)
        }
        ReqOp::Send => {
            let pos = match take_recv(&rqp) {
                Recv::Got(pos) => pos,
                Recv::Empty => return (RNR, Vec::new()),
            };
            let mut sges = Vec::new();
            let rc = base_cpl(&rqp, pos as u32, 0);
            match scatter_send(&rqp, &req.payload, pos, &mut sges) {
                Ok(()) => {
                    rqp.recv_cq.write_cqe(&Cpl {
                        opcode: WcOpcode::Recv,
                        is_recv: true,
                        byte_len: req.len as u32,
                        imm: req.imm,
                        ..rc
                    });
                    st(WcStatus::Success)
                }
                Err((local, remote)) => {
                    if let Some(rs) = remote {
                        rqp.set_error();
                        rqp.recv_cq.write_cqe(&Cpl {
                            opcode: WcOpcode::Recv,
                            is_recv: true,
                            status: rs,
                            ..rc
                        });
                    }
                    st(local)
                }
            }
        }
        ReqOp::Read => {
            let mut out = vec![0u8; req.len as usize];
            if req.len > 0 {
                let _mr = match rmrs.check_remote(
                    rqp.pd,
                    req.rkey,
                    req.raddr,
                    req.len,
                    Access::REMOTE_READ,
                ) {
                    Ok(m) => m,
                    Err(e) => return st(remote_fault(e)),
                };
                // SAFETY: checked against a region of this process granting REMOTE_READ.
                unsafe { mmio::dma_copy(out.as_mut_ptr(), req.raddr as *const u8, out.len()) };
            }
            (WcStatus::Success as u32, out)
        }
        ReqOp::Atomic => {
            let Some((aop, width)) = req.atomic else {
                return st(WcStatus::RemInvReqErr);
            };
            let w = u64::from(width);
            if req.raddr % w != 0 {
                return st(WcStatus::RemInvReqErr);
            }
            let _mr = match rmrs.check_remote(rqp.pd, req.rkey, req.raddr, w, Access::REMOTE_ATOMIC)
            {
                Ok(m) => m,
                Err(e) => return st(remote_fault(e)),
            };
            // SAFETY: the aligned operand was checked against a region granting REMOTE_ATOMIC.
            match unsafe { mmio::dma_atomic_rmw(req.raddr, width, |v| aop.apply(v, width)) } {
                Some(old) => (WcStatus::Success as u32, old.to_le_bytes().to_vec()),
                None => st(WcStatus::RemOpErr),
            }
        }
    }
}
