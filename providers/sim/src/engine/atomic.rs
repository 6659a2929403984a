//! Executing an atomic (fetch-add, compare-and-swap) at a responder of this process.

use std::sync::Arc;

use gda_hal::model::{Cpl, WqeOp};
use gda_hal::{WcOpcode, WcStatus, mmio};

use super::complete::*;
use crate::mem::{Access, Fault, MrInner, dma_atomic_pinned, dma_copy_pinned};
use crate::state::{Chaos, Deferred, QpExec, QpInner};

/// The completion opcode of an atomic (the masked forms report as their base operation).
pub(super) fn wc_opcode(aop: &gda_hal::AtomicOp) -> WcOpcode {
    if matches!(
        aop,
        gda_hal::AtomicOp::CompareSwap { .. } | gda_hal::AtomicOp::MaskedCompareSwap { .. }
    ) {
        WcOpcode::CompSwap
    } else {
        WcOpcode::FetchAdd
    }
}

/// Executes an atomic; `target` performs the responder's checks for the `w`-byte operand and
/// returns its address in this process (and the region to hold while the result is pending).
pub(super) fn execute_atomic(
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: &WqeOp,
    mut c: Cpl,
    chaos: Option<&mut Chaos>,
    target: impl FnOnce(&mut QpExec, u64) -> Result<(u64, Option<Arc<MrInner>>), Fault>,
) -> Step {
    let fail = |qp: &QpInner, c: Cpl, status: WcStatus| {
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, op.units, true)
    };
    let Some((aop, width)) = op.atomic else {
        return fail(qp, c, WcStatus::LocQpOpErr);
    };
    c.opcode = wc_opcode(&aop);
    c.byte_len = width;
    let w = u64::from(width);
    if op.remote.addr % w != 0 {
        return fail(qp, c, WcStatus::RemInvReqErr);
    }
    let (addr, rmr) = match target(ex, w) {
        Ok(t) => t,
        Err(e) => return fail(qp, c, remote_fault(e)),
    };
    let Some(local) = op.sges.first() else {
        return fail(qp, c, WcStatus::LocQpOpErr);
    };
    let lmr = match qp
        .nic
        .mrs
        .check_local(qp.pd, local.lkey, local.addr, w, Access::LOCAL_WRITE)
    {
        Ok(m) => m,
        Err(e) => return fail(qp, c, local_fault(e)),
    };
    let rref = rmr.as_deref();
    let pinned = rref.as_slice();
    // SAFETY: `target` checked the operand against a responder region granting REMOTE_ATOMIC
    // (mapped here: this process's memory, pinned while used, or a peer's segment the peer
    // view holds), and it is aligned to `w` (region mappings are page-aligned).
    match unsafe { dma_atomic_pinned(pinned, addr, width, |v| aop.apply(v, width)) } {
        Ok(Some(old)) => land_atomic(qp, ex, op, c, chaos, old, width, lmr),
        Ok(None) => fail(qp, c, WcStatus::LocQpOpErr),
        Err(e) => fail(qp, c, remote_fault(e)),
    }
}

/// Lands an atomic's original value `old` in the requester's local buffer (checked against
/// `lmr`), now or in order behind earlier deferred data.
#[allow(clippy::too_many_arguments)]
fn land_atomic(
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: &WqeOp,
    c: Cpl,
    chaos: Option<&mut Chaos>,
    old: u64,
    width: u32,
    lmr: Arc<MrInner>,
) -> Step {
    let Some(local) = op.sges.first() else {
        qp.set_error();
        return Step::Complete(
            Cpl {
                status: WcStatus::LocQpOpErr,
                ..c
            },
            op.units,
            true,
        );
    };
    let (bytes, n) = qp.model().atomic_result(old, width);
    // In order behind earlier deferred data, as for READs.
    let defer = chaos
        .and_then(|ch| ch.defer(0.3))
        .or_else(|| ex.has_pending_data().then_some(0));
    match defer {
        Some(k) => {
            let due = ex.due_after(k);
            ex.pending.push_back(Deferred::Data {
                due,
                dst: local.addr,
                bytes: bytes[..n].to_vec(),
                mrs: vec![lmr],
            });
            ex.pending_data += 1;
        }
        None => {
            // SAFETY: the local range was checked (LOCAL_WRITE, `w` bytes), pinned while
            // written.
            let landed =
                unsafe { dma_copy_pinned(&[&lmr], local.addr as *mut u8, bytes.as_ptr(), n) };
            mmio::dma_publish();
            if let Err(e) = landed {
                qp.set_error();
                return Step::Complete(
                    Cpl {
                        status: local_fault(e),
                        ..c
                    },
                    op.units,
                    true,
                );
            }
        }
    }
    Step::Complete(c, op.units, false)
}
