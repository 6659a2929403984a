//! Executing one WQE against a responder of this process: RDMA WRITE, READ, SEND and atomics
//! with RC semantics and every key and range checked.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use gda_hal::model::{Cpl, OpKind, WqeOp};
use gda_hal::{WcOpcode, WcStatus, mmio};

use super::atomic::*;
use super::complete::*;
use super::data::*;
use super::recv::*;
use crate::mem::{Access, dma_copy_pinned};
use crate::state::{Chaos, Deferred, FabricInner, QpExec, QpInner};
use crate::types::QpState;
/// Executes one WQE against the connected responder.
pub(super) fn execute(
    f: &FabricInner,
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: &WqeOp,
    chaos: Option<&mut Chaos>,
) -> Step {
    let mut c = base_cpl(qp, op.counter, op.hw_opcode);
    let fail = |qp: &QpInner, c: Cpl, status: WcStatus, units: u32| {
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, units, true)
    };
    let kind = op.kind.unwrap_or(OpKind::Nop);
    if kind == OpKind::Nop {
        return Step::Complete(c, op.units, false);
    }
    // A NIC whose port is down sends nothing: the requester's retries run out.
    if !qp.nic.port_is_up() {
        return fail(qp, c, WcStatus::RetryExcErr, op.units);
    }
    // Re-resolve the responder whenever QPs come or go, so a destroyed peer stops answering.
    let epoch = f.epoch.load(Ordering::Acquire);
    if (ex.remote.is_none() && ex.wire_ep.is_none()) || ex.remote_epoch != epoch {
        let ep = *qp.remote.lock().unwrap_or_else(|e| e.into_inner());
        ex.remote = ep.and_then(|ep| f.lookup(&ep)).map(|q| Arc::downgrade(&q));
        // A QP of another process fabric, kept until the QPs change (connecting one moves
        // the epoch): one lookup per connection, not two locks per WQE.
        ex.wire_ep = match (&ex.remote, ep, &f.wire) {
            (None, Some(ep), Some(_)) if crate::wire::is_process_fabric(ep.fabric) => Some(ep),
            _ => None,
        };
        ex.remote_epoch = epoch;
    }
    if let (Some(ep), Some(w), None) = (ex.wire_ep, &f.wire, &ex.remote) {
        return super::wire::execute_wire(w, qp, ex, op, kind, c, ep);
    }
    // No responder: the requester's retries run out.
    let Some(rqp) = ex.remote.as_ref().and_then(Weak::upgrade) else {
        return fail(qp, c, WcStatus::RetryExcErr, op.units);
    };
    if !matches!(rqp.state(), QpState::Rtr | QpState::Rts) || !rqp.nic.port_is_up() {
        // No responder (or its port is down): the requester's retries run out.
        return fail(qp, c, WcStatus::RetryExcErr, op.units);
    }
    let lmrs = &qp.nic.mrs;
    let rmrs = &rqp.nic.mrs;
    let len = op.length();
    match kind {
        OpKind::Nop => Step::Complete(c, op.units, false),
        OpKind::Write => {
            c.opcode = WcOpcode::RdmaWrite;
            if len > 0 {
                let dst_mr = match rmrs.check_remote_cached(
                    &mut ex.rcache,
                    rqp.pd,
                    op.remote.rkey,
                    op.remote.addr,
                    len,
                    Access::REMOTE_WRITE,
                ) {
                    Ok(m) => m,
                    Err(e) => return fail(qp, c, remote_fault(e), op.units),
                };
                let gathered = gather_to(
                    lmrs,
                    &mut ex.lcache,
                    qp.pd,
                    op,
                    op.remote.addr,
                    Some(dst_mr),
                );
                mmio::dma_publish();
                if let Err(s) = gathered {
                    return fail(qp, c, s, op.units);
                }
            }
            if let Some(imm) = op.imm {
                match take_recv(&rqp) {
                    Recv::Got(pos) => {
                        let rc = Cpl {
                            opcode: WcOpcode::RecvRdmaWithImm,
                            is_recv: true,
                            byte_len: len as u32,
                            imm: Some(imm),
                            ..base_cpl(&rqp, pos as u32, 0)
                        };
                        rqp.recv_cq.write_cqe(&rc);
                    }
                    Recv::Empty => return rnr(qp, ex, c, op.units),
                }
            }
            Step::Complete(c, op.units, false)
        }
        OpKind::Send => {
            c.opcode = WcOpcode::Send;
            // The requester's own checks come first: a bad local key must not use up (or
            // complete) a receive at the responder.
            let staged = match stage_source(qp, op) {
                Ok(v) => v,
                Err(st) => return fail(qp, c, st, op.units),
            };
            let pos = match take_recv(&rqp) {
                Recv::Got(pos) => pos,
                Recv::Empty => return rnr(qp, ex, c, op.units),
            };
            let mut sges = std::mem::take(&mut ex.recv_sges);
            // SAFETY: `staged` is this thread's buffer.
            let res =
                unsafe { scatter_send(&rqp, &[(staged.as_ptr(), staged.len())], pos, &mut sges) };
            ex.recv_sges = sges;
            let rc = base_cpl(&rqp, pos as u32, 0);
            match res {
                Ok(()) => {
                    let rc = Cpl {
                        opcode: WcOpcode::Recv,
                        is_recv: true,
                        byte_len: len as u32,
                        imm: op.imm,
                        ..rc
                    };
                    rqp.recv_cq.write_cqe(&rc);
                    Step::Complete(c, op.units, false)
                }
                Err((local_status, remote_status)) => {
                    if let Some(rs) = remote_status {
                        rqp.set_error();
                        let rc = Cpl {
                            opcode: WcOpcode::Recv,
                            is_recv: true,
                            status: rs,
                            ..rc
                        };
                        rqp.recv_cq.write_cqe(&rc);
                    }
                    fail(qp, c, local_status, op.units)
                }
            }
        }
        OpKind::Read => {
            c.opcode = WcOpcode::RdmaRead;
            c.byte_len = len as u32;
            if len > 0 {
                // The source region is pinned (its memory stays registered) while it is read.
                let src_mr = match rmrs.check_remote(
                    rqp.pd,
                    op.remote.rkey,
                    op.remote.addr,
                    len,
                    Access::REMOTE_READ,
                ) {
                    Ok(mr) => mr,
                    Err(e) => return fail(qp, c, remote_fault(e), op.units),
                };
                let mut keep = Vec::new();
                for s in op.sges.iter().filter(|s| s.length > 0) {
                    match lmrs.check_local(
                        qp.pd,
                        s.lkey,
                        s.addr,
                        u64::from(s.length),
                        Access::LOCAL_WRITE,
                    ) {
                        Ok(mr) => keep.push(mr),
                        Err(e) => return fail(qp, c, local_fault(e), op.units),
                    }
                }
                // Responses land in order: behind earlier deferred data (an atomic's result, an
                // earlier READ), this READ's data is queued too, even when chaos did not delay it.
                let defer = chaos
                    .and_then(|ch| ch.defer(0.3))
                    .or_else(|| ex.has_pending_data().then_some(0));
                let mut src = op.remote.addr;
                for (s, dst_mr) in op.sges.iter().filter(|s| s.length > 0).zip(&keep) {
                    let copied = if let Some(k) = defer {
                        let mut bytes = vec![0u8; s.length as usize];
                        // SAFETY: the source range was checked against a responder region,
                        // pinned while read.
                        let r = unsafe {
                            dma_copy_pinned(
                                &[&src_mr],
                                bytes.as_mut_ptr(),
                                src as *const u8,
                                bytes.len(),
                            )
                        };
                        let due = ex.due_after(k);
                        ex.pending.push_back(Deferred::Data {
                            due,
                            dst: s.addr,
                            bytes,
                            mrs: vec![dst_mr.clone()],
                        });
                        ex.pending_data += 1;
                        r.map_err(remote_fault)
                    } else {
                        // SAFETY: both ranges were checked against regions granting the access,
                        // both pinned while copied.
                        unsafe {
                            dma_copy_pinned(
                                &[&src_mr, dst_mr],
                                s.addr as *mut u8,
                                src as *const u8,
                                s.length as usize,
                            )
                        }
                        .map_err(|_| pinned_fault(&src_mr))
                    };
                    if let Err(st) = copied {
                        mmio::dma_publish();
                        return fail(qp, c, st, op.units);
                    }
                    src += u64::from(s.length);
                }
                mmio::dma_publish();
            }
            Step::Complete(c, op.units, false)
        }
        OpKind::Atomic => execute_atomic(qp, ex, op, c, chaos, |_, w| {
            rmrs.check_remote(
                rqp.pd,
                op.remote.rkey,
                op.remote.addr,
                w,
                Access::REMOTE_ATOMIC,
            )
            .map(|m| (op.remote.addr, Some(m)))
        }),
    }
}
