//! Executing one WQE against a responder in another process of a cross-process fabric.

use std::sync::Arc;

use gda_hal::model::{Cpl, OpKind, WqeOp};
use gda_hal::{WcOpcode, WcStatus, mmio};

use super::atomic::*;
use super::complete::*;
use super::data::*;
use crate::mem::{Access, Fault, dma_copy_pinned};
use crate::state::{Chaos, QpExec, QpInner};
/// Executes a one-sided operation against a responder in another process (see `host.rs`):
/// the same checks and completions as [`execute`], with remote addresses translated into this
/// process's mapping of the peer's memory.
pub(super) fn execute_remote_process(
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: &WqeOp,
    kind: OpKind,
    mut c: Cpl,
    rpd: u32,
    chaos: Option<&mut Chaos>,
) -> Step {
    let fail = |qp: &QpInner, c: Cpl, status: WcStatus| {
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, op.units, true)
    };
    let Some(peer) = ex.peer.as_mut() else {
        return fail(qp, c, WcStatus::RetryExcErr);
    };
    let lmrs = &qp.nic.mrs;
    let len = op.length();
    match kind {
        OpKind::Nop => Step::Complete(c, op.units, false),
        OpKind::Write if op.imm.is_none() => {
            c.opcode = WcOpcode::RdmaWrite;
            if len > 0 {
                let dst = match peer.translate(
                    rpd,
                    op.remote.rkey,
                    op.remote.addr,
                    len,
                    Access::REMOTE_WRITE,
                ) {
                    Ok(a) => a,
                    Err(e) => return fail(qp, c, remote_fault(e)),
                };
                let gathered = gather_to(lmrs, &mut ex.lcache, qp.pd, op, dst, None);
                mmio::dma_publish();
                if let Err(s) = gathered {
                    return fail(qp, c, s);
                }
            }
            Step::Complete(c, op.units, false)
        }
        // Two-sided operations need the peer's receive queue, which is not shared.
        OpKind::Write | OpKind::Send => fail(qp, c, WcStatus::RemInvReqErr),
        OpKind::Read => {
            c.opcode = WcOpcode::RdmaRead;
            c.byte_len = len as u32;
            if len > 0 {
                let mut src = match peer.translate(
                    rpd,
                    op.remote.rkey,
                    op.remote.addr,
                    len,
                    Access::REMOTE_READ,
                ) {
                    Ok(a) => a,
                    Err(e) => return fail(qp, c, remote_fault(e)),
                };
                let mut keep = Vec::with_capacity(op.sges.len());
                for s in op.sges.iter().filter(|s| s.length > 0) {
                    match lmrs.check_local(
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
                for (s, mr) in op.sges.iter().filter(|s| s.length > 0).zip(&keep) {
                    // SAFETY: both ranges were checked against regions granting the access; the
                    // local one is pinned while written, the peer's segment stays mapped while
                    // `peer` holds it.
                    let landed = unsafe {
                        dma_copy_pinned(
                            &[mr],
                            s.addr as *mut u8,
                            src as *const u8,
                            s.length as usize,
                        )
                    };
                    if let Err(e) = landed {
                        mmio::dma_publish();
                        return fail(qp, c, local_fault(e));
                    }
                    src += u64::from(s.length);
                }
                mmio::dma_publish();
            }
            Step::Complete(c, op.units, false)
        }
        OpKind::Atomic => execute_atomic(qp, ex, op, c, chaos, |ex, w| {
            let peer = ex.peer.as_mut().ok_or(Fault::BadKey)?;
            peer.translate(
                rpd,
                op.remote.rkey,
                op.remote.addr,
                w,
                Access::REMOTE_ATOMIC,
            )
            .map(|a| (a, None))
        }),
    }
}
