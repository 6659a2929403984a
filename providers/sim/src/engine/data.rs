//! Moving bytes: receive WQEs (and RNR), staging a WQE's source, scattering and gathering.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gda_hal::model::{Cpl, WqeOp};
use gda_hal::{Sge, WcStatus, mmio};

use super::complete::*;
use crate::mem::{Access, KeyCache};
use crate::state::{QpExec, QpInner};
/// RNR: retry later, or fail after `rnr_retry` attempts (7 = forever).
pub(super) fn rnr(qp: &QpInner, ex: &mut QpExec, c: Cpl, op: &WqeOp) -> Step {
    let now = Instant::now();
    if let Some(t) = ex.rnr_next {
        if now < t {
            return Step::Wait;
        }
    }
    ex.rnr_attempts = ex.rnr_attempts.saturating_add(1);
    let retries = qp.rnr_retry.load(Ordering::Relaxed);
    if retries != 7 && ex.rnr_attempts > u32::from(retries) {
        ex.rnr_next = None;
        qp.set_error();
        return Step::Complete(
            Cpl {
                status: WcStatus::RnrRetryExcErr,
                ..c
            },
            op.units,
            true,
        );
    }
    // The RNR timer (kept short: a software NIC has no wire to wait on).
    ex.rnr_next = Some(now + Duration::from_micros(20));
    Step::Wait
}

/// Gathers a SEND's payload (inline or from checked local regions, which stay registered
/// while they are read).
pub(super) fn stage_source(qp: &QpInner, op: &WqeOp) -> Result<Vec<u8>, WcStatus> {
    if let Some(d) = op.inline.as_ref().filter(|d| !d.is_empty()) {
        return Ok(d.clone());
    }
    let mut staged = Vec::with_capacity(op.length() as usize);
    for s in op.sges.iter().filter(|s| s.length > 0) {
        let _mr = qp
            .nic
            .mrs
            .check_local(qp.pd, s.lkey, s.addr, u64::from(s.length), Access::empty())
            .map_err(local_fault)?;
        let start = staged.len();
        staged.resize(start + s.length as usize, 0);
        // SAFETY: the source range was checked against a local region, kept alive by `_mr`.
        unsafe {
            mmio::dma_copy(
                staged[start..].as_mut_ptr(),
                s.addr as *const u8,
                s.length as usize,
            )
        };
    }
    Ok(staged)
}

/// Scatters a staged SEND payload into the responder's receive WQE at `pos`.
/// `Err((requester status, responder status))`.
pub(super) fn scatter_send(
    rqp: &QpInner,
    staged: &[u8],
    pos: u64,
    sges: &mut Vec<Sge>,
) -> Result<(), (WcStatus, Option<WcStatus>)> {
    if rqp.model().fetch_recv(&rqp.view, pos, sges).is_err() {
        return Err((WcStatus::RemOpErr, Some(WcStatus::LocQpOpErr)));
    }
    let len = staged.len() as u64;
    let cap: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if len > cap {
        return Err((WcStatus::RemInvReqErr, Some(WcStatus::LocLenErr)));
    }
    let mut targets = Vec::with_capacity(sges.len());
    let mut need = len;
    for s in sges.iter() {
        if need == 0 {
            break;
        }
        let n = u64::from(s.length).min(need);
        match rqp
            .nic
            .mrs
            .check_local(rqp.pd, s.lkey, s.addr, n, Access::LOCAL_WRITE)
        {
            Ok(mr) => targets.push((s.addr, n, mr)),
            Err(_) => return Err((WcStatus::RemOpErr, Some(WcStatus::LocProtErr))),
        }
        need -= n;
    }
    let mut off = 0usize;
    for (addr, n, _mr) in &targets {
        // SAFETY: each target range was checked (LOCAL_WRITE) on the responder; `_mr` keeps the
        // region registered until the copy is done.
        unsafe { mmio::dma_copy(*addr as *mut u8, staged[off..].as_ptr(), *n as usize) };
        off += *n as usize;
    }
    mmio::dma_publish();
    Ok(())
}

/// Copies a WRITE's payload (inline or gathered) to `dst` (already checked remotely).
pub(super) fn gather_to(
    lmrs: &crate::mem::MrTable,
    cache: &mut KeyCache,
    pd: u32,
    op: &WqeOp,
    dst: u64,
) -> Result<(), WcStatus> {
    if let Some(d) = op.inline.as_ref().filter(|d| !d.is_empty()) {
        // SAFETY: `dst..dst+len` was checked against a responder region (REMOTE_WRITE).
        unsafe { mmio::dma_copy(dst as *mut u8, d.as_ptr(), d.len()) };
        return Ok(());
    }
    // Check every source before moving any byte, so a bad key writes nothing. The one-entry
    // cache covers the common single-SGE case; with several SGEs each region is held while read.
    let mut held = Vec::new();
    let single = op.sges.iter().filter(|s| s.length > 0).count() == 1;
    for s in op.sges.iter().filter(|s| s.length > 0) {
        if single {
            lmrs.check_local_cached(
                cache,
                pd,
                s.lkey,
                s.addr,
                u64::from(s.length),
                Access::empty(),
            )
            .map_err(local_fault)?;
        } else {
            held.push(
                lmrs.check_local(pd, s.lkey, s.addr, u64::from(s.length), Access::empty())
                    .map_err(local_fault)?,
            );
        }
    }
    let mut at = dst;
    for s in op.sges.iter().filter(|s| s.length > 0) {
        // SAFETY: both ranges checked above; the regions are held by `held` or the cache.
        unsafe { mmio::dma_copy(at as *mut u8, s.addr as *const u8, s.length as usize) };
        at += u64::from(s.length);
    }
    drop(held);
    Ok(())
}
