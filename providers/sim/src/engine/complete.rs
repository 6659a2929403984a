//! Completions: CQEs from the model, chaos-deferred items landing in order, flushes.

use std::sync::Arc;
use std::time::Instant;

use gda_hal::model::Cpl;
use gda_hal::{WcOpcode, WcStatus, mmio};

use super::recv::*;
use crate::mem::{Fault, MrInner, Pins, dma_copy_pinned};
use crate::state::{Chaos, CqInner, Deferred, QpExec, QpInner};
pub(super) enum Step {
    /// Try again later (RNR back-off, fence, chaos hold).
    Wait,
    /// Done: completion, units consumed, whether a CQE is due even if unsignalled.
    Complete(Cpl, u32, bool),
    /// Sent to a responder in another process: in flight, completed when its response comes
    /// (the next WQE may follow at once).
    Sent,
}

pub(super) fn base_cpl(qp: &QpInner, counter: u32, hw_opcode: u8) -> Cpl {
    Cpl {
        status: WcStatus::Success,
        opcode: WcOpcode::Other,
        counter,
        byte_len: 0,
        imm: None,
        qpn: qp.qpn,
        is_recv: false,
        hw_opcode,
    }
}

pub(super) fn err_cpl(qp: &QpInner, counter: u32, hw_opcode: u8, status: WcStatus) -> Cpl {
    Cpl {
        status,
        ..base_cpl(qp, counter, hw_opcode)
    }
}

pub(super) fn flush_cpl(qp: &QpInner, counter: u32, hw_opcode: u8) -> Cpl {
    err_cpl(qp, counter, hw_opcode, WcStatus::WrFlushErr)
}

/// Writes (or, in chaos mode / behind pending items, defers) a completion, keeping order.
pub(super) fn complete(ex: &mut QpExec, cq: Arc<CqInner>, c: Cpl, chaos: Option<&mut Chaos>) {
    let defer = chaos.and_then(|ch| ch.defer(0.2));
    if defer.is_none() && ex.pending.is_empty() {
        cq.write_cqe(&c);
        return;
    }
    // Behind earlier deferred items it lands when they do (order is kept by the queue).
    let due = ex.due_after(defer.unwrap_or(0));
    ex.pending.push_back(Deferred::Cqe { due, cq, c });
}

/// Applies deferred items whose time has come, in order. `all` applies everything.
pub(super) fn drain_pending(ex: &mut QpExec, now: Instant, all: bool) -> bool {
    let mut did = false;
    while let Some(front) = ex.pending.front() {
        let due = front.due();
        if !all && ex.executed < due.wqes && now < due.time {
            break;
        }
        did = true;
        match ex.pending.pop_front() {
            Some(Deferred::Data {
                dst, bytes, mrs, ..
            }) => {
                let regions: Vec<&MrInner> = mrs.iter().map(|m| &**m).collect();
                // SAFETY: `dst` was checked against the item's regions, pinned while written. A
                // region deregistered since gets nothing (its memory may be gone; the program
                // deregistered a buffer with a transfer into it outstanding).
                let _ = unsafe {
                    dma_copy_pinned(&regions, dst as *mut u8, bytes.as_ptr(), bytes.len())
                };
                mmio::dma_publish();
                ex.pending_data -= 1;
            }
            Some(Deferred::Cqe { cq, c, .. }) => {
                cq.write_cqe(&c);
            }
            None => {}
        }
    }
    did
}

pub(super) fn flush_rq(qp: &QpInner, ex: &mut QpExec) -> bool {
    let mut did = false;
    while let Recv::Got(pos) = take_recv(qp) {
        let c = Cpl {
            is_recv: true,
            opcode: WcOpcode::Recv,
            ..flush_cpl(qp, pos as u32, 0)
        };
        let cq = qp.recv_cq.clone();
        complete(ex, cq, c, None);
        did = true;
    }
    did
}

pub(super) fn local_fault(_: Fault) -> WcStatus {
    WcStatus::LocProtErr
}

/// The status of a copy between a remote region `src` and local ones that stopped because one
/// was deregistered: a remote access error when it was `src`, a local protection error if not.
pub(super) fn pinned_fault(src: &MrInner) -> WcStatus {
    if Pins::take(&[src]).is_none() {
        WcStatus::RemAccessErr
    } else {
        WcStatus::LocProtErr
    }
}

pub(super) fn remote_fault(_: Fault) -> WcStatus {
    WcStatus::RemAccessErr
}

/// Completes everything deferred (used when a QP is torn down in tests).
#[allow(dead_code)]
pub(crate) fn drain_all(qp: &QpInner) {
    if let Ok(mut ex) = qp.exec.lock() {
        drain_pending(&mut ex, Instant::now(), true);
    }
}
