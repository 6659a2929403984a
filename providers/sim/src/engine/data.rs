//! Moving bytes: receive WQEs (and RNR), staging a WQE's source, scattering and gathering.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gda_hal::model::{Cpl, WqeOp};
use gda_hal::{Sge, WcStatus, mmio};

use super::complete::*;
use crate::mem::{Access, KeyCache, MrInner, Pins, dma_copy_pinned};
use crate::state::{QpExec, QpInner};
/// RNR: retry later, or fail after `rnr_retry` attempts (7 = forever).
/// The RNR timer: how long a requester waits before sending again after "receiver not ready"
/// (kept short: a software NIC has no wire to wait on).
pub(super) const RNR_TIMER: Duration = Duration::from_micros(20);

pub(super) fn rnr(qp: &QpInner, ex: &mut QpExec, c: Cpl, units: u32) -> Step {
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
            units,
            true,
        );
    }
    // The RNR timer (kept short: a software NIC has no wire to wait on).
    ex.rnr_next = Some(now + RNR_TIMER);
    Step::Wait
}

/// Gathers a SEND's payload (inline or from checked local regions, which stay registered
/// while they are read).
pub(super) fn stage_source(qp: &QpInner, op: &WqeOp) -> Result<Vec<u8>, WcStatus> {
    if let Some(d) = op.inline.as_ref().filter(|d| !d.is_empty()) {
        return Ok(d.clone());
    }
    let mut gather = Gather::check(qp, op)?;
    let len = gather.len();
    let mut staged: Vec<u8> = crate::wire::pool::take(len);
    // SAFETY: the destination is `staged`'s spare capacity (at least `len` bytes), which the
    // copy writes entirely before the length covers it (no zeroing first, which for a large
    // message costs as much as the copy).
    unsafe {
        gather.copy(staged.as_mut_ptr(), len).map_err(local_fault)?;
        staged.set_len(len);
    }
    Ok(staged)
}

/// Payloads up to this size are gathered on the stack ([`stage_small`]).
pub(super) const SMALL_MAX: usize = 256;

/// Gathers a WRITE/SEND's payload of at most [`SMALL_MAX`] bytes from its checked local
/// regions (each pinned while read) into `buf`; its length. No allocation: small messages
/// (perftest's 8-byte SENDs, gda-shmem's staged puts) are most of a message rate.
pub(super) fn stage_small(
    qp: &QpInner,
    op: &WqeOp,
    buf: &mut [u8; SMALL_MAX],
) -> Result<usize, WcStatus> {
    let mut at = 0usize;
    for s in op.sges.iter().filter(|s| s.length > 0) {
        let n = s.length as usize;
        if at + n > SMALL_MAX {
            return Err(WcStatus::LocLenErr);
        }
        let mr = qp
            .nic
            .mrs
            .check_local(qp.pd, s.lkey, s.addr, n as u64, Access::empty())
            .map_err(local_fault)?;
        // SAFETY: the source lies in a region just checked, pinned while read; the
        // destination is `buf[at..at + n]` (bounds checked above).
        unsafe { dma_copy_pinned(&[&mr], buf.as_mut_ptr().add(at), s.addr as *const u8, n) }
            .map_err(local_fault)?;
        at += n;
    }
    Ok(at)
}

/// A WRITE/SEND's gather list, checked against this process's regions, read piece by piece
/// straight into the ring (no staging buffer): `copy(dst, n)` copies the next `n` bytes.
pub(super) struct Gather {
    sges: Vec<(std::sync::Arc<MrInner>, u64, usize)>,
    /// Next entry, and bytes of it already copied.
    at: (usize, usize),
}

impl Gather {
    /// The local checks of `op`'s gather list (as [`stage_source`] makes them).
    pub(super) fn check(qp: &QpInner, op: &WqeOp) -> Result<Self, WcStatus> {
        let mut sges = Vec::with_capacity(op.sges.len());
        for s in op.sges.iter().filter(|s| s.length > 0) {
            let mr = qp
                .nic
                .mrs
                .check_local(qp.pd, s.lkey, s.addr, u64::from(s.length), Access::empty())
                .map_err(local_fault)?;
            sges.push((mr, s.addr, s.length as usize));
        }
        Ok(Self { sges, at: (0, 0) })
    }

    /// Bytes of the whole list.
    pub(super) fn len(&self) -> usize {
        self.sges.iter().map(|&(_, _, n)| n).sum()
    }

    /// Copies the next `n` bytes of the list to `dst`, each region pinned while read;
    /// `Err` when one was deregistered meanwhile, or the list holds fewer bytes.
    ///
    /// # Safety
    /// `dst` is valid for writing `n` bytes.
    pub(super) unsafe fn copy(&mut self, dst: *mut u8, n: usize) -> Result<(), crate::mem::Fault> {
        let mut done = 0;
        while done < n {
            let Some((mr, addr, len)) = self.sges.get(self.at.0) else {
                return Err(crate::mem::Fault::BadKey);
            };
            let k = (len - self.at.1).min(n - done);
            // SAFETY: the source range lies in a region checked in `check`, pinned while
            // copied; `dst` has `n` bytes (this function's contract), `done + k ≤ n`.
            unsafe {
                dma_copy_pinned(&[mr], dst.add(done), (*addr as *const u8).add(self.at.1), k)
            }?;
            done += k;
            self.at.1 += k;
            if self.at.1 == *len {
                self.at = (self.at.0 + 1, 0);
            }
        }
        Ok(())
    }
}

/// Scatters a SEND payload — in pieces `(address, length)`, in order: a staged buffer, or the
/// two sides of a ring's wrap — into the responder's receive WQE at `pos`.
/// `Err((requester status, responder status))`.
///
/// # Safety
/// Each piece is readable for its length until this returns (a ring's bytes may be written by
/// the peer meanwhile: they are only ever copied, never referenced as a slice).
pub(super) unsafe fn scatter_send(
    rqp: &QpInner,
    staged: &[(*const u8, usize)],
    pos: u64,
    sges: &mut Vec<Sge>,
) -> Result<(), (WcStatus, Option<WcStatus>)> {
    if rqp.model().fetch_recv(&rqp.view, pos, sges).is_err() {
        return Err((WcStatus::RemOpErr, Some(WcStatus::LocQpOpErr)));
    }
    let len: u64 = staged.iter().map(|&(_, n)| n as u64).sum();
    let cap: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if len > cap {
        return Err((WcStatus::RemInvReqErr, Some(WcStatus::LocLenErr)));
    }
    // Every target is checked before anything is written; the first few on the stack (a
    // receive WQE mostly has one scatter entry).
    type Target = (u64, u64, std::sync::Arc<MrInner>);
    let mut first: [Option<Target>; 4] = Default::default();
    let mut rest = Vec::new();
    let mut need = len;
    for (i, s) in sges.iter().enumerate() {
        if need == 0 {
            break;
        }
        let n = u64::from(s.length).min(need);
        match rqp
            .nic
            .mrs
            .check_local(rqp.pd, s.lkey, s.addr, n, Access::LOCAL_WRITE)
        {
            Ok(mr) if i < first.len() => first[i] = Some((s.addr, n, mr)),
            Ok(mr) => rest.push((s.addr, n, mr)),
            Err(_) => return Err((WcStatus::RemOpErr, Some(WcStatus::LocProtErr))),
        }
        need -= n;
    }
    let targets = first
        .iter()
        .flatten()
        .chain(rest.iter())
        .map(|(addr, n, mr)| (*addr as *mut u8, *n as usize, &**mr));
    // SAFETY: each target range was checked (LOCAL_WRITE) on the responder; the pieces are
    // the caller's.
    unsafe { copy_pieces(staged, targets) }
        // Deregistered meanwhile: as a stale key in the receive WQE.
        .map_err(|_| (WcStatus::RemOpErr, Some(WcStatus::LocProtErr)))
}

/// Copies a payload given in pieces `(address, length)`, in order, into `targets`
/// `(address, length, region)`, in order, each pinned while written, until either runs out,
/// then publishes what was written: a staged buffer or a ring's span (two pieces across its
/// wrap) into a WRITE's destination, a receive's scatter list or a READ's. `Err` once a region
/// is deregistered (what came before it was written).
///
/// # Safety
/// Each piece is readable for its length until this returns (a ring's bytes, which the peer
/// may write meanwhile, are only copied, never referenced); each target range lies in its
/// region, checked for the access.
pub(super) unsafe fn copy_pieces<'m>(
    pieces: &[(*const u8, usize)],
    targets: impl IntoIterator<Item = (*mut u8, usize, &'m MrInner)>,
) -> Result<(), crate::mem::Fault> {
    let mut pieces = pieces.iter().copied().filter(|&(_, n)| n > 0);
    let (mut src, mut left) = pieces.next().unwrap_or((std::ptr::null(), 0));
    let mut copied = Ok(());
    'targets: for (mut at, mut room, mr) in targets {
        while room > 0 {
            if left == 0 {
                match pieces.next() {
                    Some(p) => (src, left) = p,
                    None => break 'targets,
                }
            }
            let k = room.min(left);
            // SAFETY: `k` bytes lie in the target range and in the piece (the contract).
            copied = unsafe { dma_copy_pinned(&[mr], at, src, k) };
            if copied.is_err() {
                break 'targets;
            }
            (at, src) = (at.wrapping_add(k), src.wrapping_add(k));
            (room, left) = (room - k, left - k);
        }
    }
    mmio::dma_publish();
    copied
}

/// Copies a WRITE's payload (inline or gathered) to `dst` (already checked remotely against
/// `dst_mr`, a region of this process; `None` when `dst` is a peer's mapped segment).
pub(super) fn gather_to(
    lmrs: &crate::mem::MrTable,
    cache: &mut KeyCache,
    pd: u32,
    op: &WqeOp,
    dst: u64,
    dst_mr: Option<&MrInner>,
) -> Result<(), WcStatus> {
    let dst_pin = dst_mr.as_slice();
    if let Some(d) = op.inline.as_ref().filter(|d| !d.is_empty()) {
        // SAFETY: `dst..dst+len` was checked against a responder region (REMOTE_WRITE), pinned
        // while written.
        return unsafe { dma_copy_pinned(dst_pin, dst as *mut u8, d.as_ptr(), d.len()) }
            .map_err(remote_fault);
    }
    let sges = || op.sges.iter().filter(|s| s.length > 0);
    // The common single-SGE case: through the one-entry cache, nothing allocated.
    if sges().count() == 1 {
        let Some(s) = sges().next() else {
            return Ok(());
        };
        let src = lmrs
            .check_local_cached(
                cache,
                pd,
                s.lkey,
                s.addr,
                u64::from(s.length),
                Access::empty(),
            )
            .map_err(local_fault)?;
        return copy_from(dst_mr, src, dst, s);
    }
    // Check every source before moving any byte, so a bad key writes nothing.
    let mut held = Vec::with_capacity(op.sges.len());
    for s in sges() {
        held.push(
            lmrs.check_local(pd, s.lkey, s.addr, u64::from(s.length), Access::empty())
                .map_err(local_fault)?,
        );
    }
    let mut at = dst;
    for (s, src) in sges().zip(&held) {
        copy_from(dst_mr, src, at, s)?;
        at += u64::from(s.length);
    }
    Ok(())
}

/// Copies SGE `s` (checked against `src`) to `at` (checked against `dst_mr`, or a peer's
/// mapping), both regions pinned while copied.
fn copy_from(dst_mr: Option<&MrInner>, src: &MrInner, at: u64, s: &Sge) -> Result<(), WcStatus> {
    let (two, one);
    let pins: &[&MrInner] = match dst_mr {
        Some(d) => {
            two = [d, src];
            &two
        }
        None => {
            one = [src];
            &one
        }
    };
    // SAFETY: both ranges were checked; both regions are pinned while copied.
    let copied =
        unsafe { dma_copy_pinned(pins, at as *mut u8, s.addr as *const u8, s.length as usize) };
    copied.map_err(|_| {
        // Which side went away decides who reports it.
        if dst_mr.is_some_and(|d| Pins::take(&[d]).is_none()) {
            WcStatus::RemAccessErr
        } else {
            WcStatus::LocProtErr
        }
    })
}
