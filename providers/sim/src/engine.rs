//! The engine: one thread per fabric that notices doorbells, fetches WQEs, executes them with RC
//! semantics and writes CQEs.
//!
//! Guarantees (as hardware gives them): per QP, WQEs execute in order and complete in order;
//! remote data is written before the completion that reports it; a FENCE waits for earlier READ
//! and atomic results to land; an error moves the QP to Error and every later WQE (send and
//! receive) completes with `WR_FLUSH_ERR`; nothing outside a registered region that grants the
//! access is read or written.
//!
//! Chaos mode (a seed) perturbs only what hardware leaves unspecified: the order QPs are
//! served, how many WQEs each gets per turn, delays before execution, and delays between a READ
//! or atomic's data landing (or any completion) and the CQE — so code that relies on timing
//! (an early-returning quiet, a missing fence, a lost doorbell) fails. Per-WQE decisions come
//! from a stream per QP derived from the seed, so a seed that finds a bug finds it again.
//!
//! Idle costs nothing: after a short spin the thread sleeps with exponential backoff (up to
//! 2 ms, then 20 ms once idle for 50 ms). Before it sleeps it says so (`napping`) and scans the
//! doorbells once more; host posting paths call `Fabric::kick` after ringing, which wakes a
//! napping engine at once and costs one atomic load when the engine is awake — so a doorbell
//! never waits for a nap to end, and an idle engine still does not spin.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use gda_hal::{Sge, WcOpcode, WcStatus, mmio};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::fabric::{CqInner, Endpoint, FabricInner, QpInner, QpState};
use crate::mem::{Access, Fault, KeyCache, MrInner};
use gda_hal::model::{Cpl, OpKind, Seq, WqeOp};

/// Counters the engine keeps.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    wqes: AtomicU64,
    sleeps: AtomicU64,
    pub(crate) psn_errors: AtomicU64,
}

/// A copy of the engine counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// WQEs executed or flushed.
    pub wqes: u64,
    /// Times the engine went to sleep for lack of work.
    pub sleeps: u64,
    /// bnxt model: WQEs whose PSN-table entry did not match the engine's PSN sequence.
    pub psn_errors: u64,
}

impl Stats {
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            wqes: self.wqes.load(Ordering::Relaxed),
            sleeps: self.sleeps.load(Ordering::Relaxed),
            psn_errors: self.psn_errors.load(Ordering::Relaxed),
        }
    }
}

/// When a deferred item lands: after this QP has executed `wqes` WQEs in all, or at `time`,
/// whichever comes first. Counting WQEs makes chaos decisions replay the same way for a seed;
/// the time bound keeps an idle QP from holding data back.
#[derive(Clone, Copy, Debug)]
struct Due {
    wqes: u64,
    time: Instant,
}

/// Longest a deferred item waits for later WQEs before landing anyway.
const DEFER_TIME_BOUND: Duration = Duration::from_micros(200);

/// Something chaos mode delays, applied in order.
enum Deferred {
    /// READ/atomic result data landing in local memory.
    Data {
        due: Due,
        dst: u64,
        bytes: Vec<u8>,
        _mr: Vec<Arc<MrInner>>,
    },
    /// A completion.
    Cqe { due: Due, cq: Arc<CqInner>, c: Cpl },
}

impl Deferred {
    fn due(&self) -> Due {
        match self {
            Self::Data { due, .. } | Self::Cqe { due, .. } => *due,
        }
    }
}

/// Per-QP engine state.
#[derive(Default)]
pub(crate) struct QpExec {
    sq_pos: u64,
    sq_target: u64,
    rnr_attempts: u32,
    rnr_next: Option<Instant>,
    hold_until: Option<Instant>,
    /// WQEs executed or flushed on this QP (the clock deferred items are due by).
    executed: u64,
    pending: VecDeque<Deferred>,
    pending_data: usize,
    /// The responder (same process). Weak: the two QPs of a connected pair each sit in the
    /// other's `exec`, and strong references made every pair that both sent leak with its CQs,
    /// rings and regions (found by `gda chaos`, whose RSS grew 0.4 MB per seed).
    remote: Option<Weak<QpInner>>,
    /// The responder when it lives in another process (cross-process fabric).
    peer: Option<crate::xproc::PeerQp>,
    remote_epoch: u64,
    op: WqeOp,
    scratch: Vec<u8>,
    recv_sges: Vec<Sge>,
    lcache: KeyCache,
    rcache: KeyCache,
    /// Messages and PSNs consumed so far (what a model that checks per-WQE records, such as
    /// bnxt's PSN table, compares them with).
    seq: Seq,
    /// WQEs completed since the last CQE on the send CQ (models that coalesce completions
    /// retire them before an error).
    unreported: u32,
    /// This QP's own chaos stream: every per-WQE decision (hold, delayed data, delayed CQE)
    /// comes from it, so a seed gives the same decisions for the same WQE sequence whatever
    /// the timing of other QPs or of doorbells.
    chaos: Option<Chaos>,
}

struct Chaos {
    rng: SmallRng,
}

impl Chaos {
    fn delay(&mut self, p: f64, max_us: u64) -> Option<Duration> {
        (self.rng.gen_bool(p)).then(|| Duration::from_micros(self.rng.gen_range(1..=max_us)))
    }

    /// With probability `p`, how many more WQEs an item waits for (1..=3).
    fn defer(&mut self, p: f64) -> Option<u64> {
        self.rng.gen_bool(p).then(|| self.rng.gen_range(1..=3))
    }
}

impl QpExec {
    /// Whether deferred READ or atomic data is still waiting to land.
    fn has_pending_data(&self) -> bool {
        self.pending_data > 0
    }

    fn due_after(&self, wqes: u64) -> Due {
        Due {
            wqes: self.executed + wqes,
            time: Instant::now() + DEFER_TIME_BOUND,
        }
    }
}

pub(crate) fn run(weak: Weak<FabricInner>) {
    let mut chaos = None;
    let mut qps: Vec<Arc<QpInner>> = Vec::new();
    let mut order: Vec<usize> = Vec::new();
    let mut epoch = u64::MAX;
    let mut idle_since: Option<Instant> = None;
    let mut last_work = Instant::now();
    let mut sleep = Duration::from_micros(20);
    let mut idle_scans = 0u32;
    loop {
        let Some(f) = weak.upgrade() else { return };
        if f.stop.load(Ordering::Acquire) {
            return;
        }
        if chaos.is_none() {
            chaos = Some(f.chaos.map(|s| Chaos {
                rng: SmallRng::seed_from_u64(s),
            }));
        }
        let e = f.epoch.load(Ordering::Acquire);
        if e != epoch {
            epoch = e;
            let map = f.qps.read().unwrap_or_else(|e| e.into_inner());
            qps = map.values().cloned().collect();
            qps.sort_by_key(|q| (q.nic.id, q.qpn));
            order = (0..qps.len()).collect();
        }
        let chaos_ref = chaos.as_mut().and_then(|c| c.as_mut());
        let mut work = false;
        if let Some(c) = chaos_ref {
            use rand::seq::SliceRandom;
            order.shuffle(&mut c.rng);
            for &i in &order {
                work |= step(&f, &qps[i], Some(c));
            }
        } else {
            for q in &qps {
                work |= step(&f, q, None);
            }
        }
        drop(f);
        if work {
            idle_since = None;
            sleep = Duration::from_micros(20);
        } else if idle_since
            .get_or_insert_with(|| {
                last_work = Instant::now();
                last_work
            })
            .elapsed()
            > Duration::from_micros(200)
        {
            let Some(f) = weak.upgrade() else { return };
            // Announce the nap, then look once more: a host that rang a doorbell before seeing
            // `napping` is served by this scan, one that rings after it wakes us
            // (`Fabric::kick` from the posting path). No doorbell waits for the nap to end.
            // ORDERING: SeqCst pairs with the SeqCst load in `Fabric::kick`.
            f.napping.store(true, Ordering::SeqCst);
            let mut late = false;
            for q in &qps {
                late |= step(&f, q, None);
            }
            if late {
                f.napping.store(false, Ordering::Relaxed);
                idle_since = None;
                sleep = Duration::from_micros(20);
                continue;
            }
            f.stats.sleeps.fetch_add(1, Ordering::Relaxed);
            drop(f);
            std::thread::park_timeout(sleep);
            if let Some(f) = weak.upgrade() {
                f.napping.store(false, Ordering::Relaxed);
            }
            // Short naps while work may resume soon; long ones once the fabric has been idle a
            // while (`Fabric::kick` and QP state changes wake it at once).
            let cap = if last_work.elapsed() > Duration::from_millis(50) {
                Duration::from_millis(20)
            } else {
                Duration::from_millis(2)
            };
            sleep = (sleep * 2).min(cap);
        } else {
            // Idle but maybe not for long: scan again at once, but offer the CPU between scans
            // (on a host with fewer cores than PEs + engines, a spinning engine starves the PEs
            // it serves; yielding costs nothing when nobody else wants the core).
            idle_scans = idle_scans.wrapping_add(1);
            if idle_scans % IDLE_SCANS_PER_YIELD == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Idle scans between two offers of the CPU (`yield_now`) before the engine naps (8 made RDMA
/// put + quiet between two processes swing to 5 µs on 2 cores; 64 keeps it at 0.4–0.5 µs and
/// the barrier under 30 µs).
const IDLE_SCANS_PER_YIELD: u32 = 64;

fn lookup(f: &FabricInner, ep: &Endpoint) -> Option<Arc<QpInner>> {
    if ep.fabric != f.id {
        return None;
    }
    f.qps
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(ep.nic, ep.qpn))
        .cloned()
}

/// Serves one QP for one turn; returns whether anything happened.
fn step(f: &FabricInner, qp: &Arc<QpInner>, global: Option<&mut Chaos>) -> bool {
    let Ok(mut guard) = qp.exec.try_lock() else {
        return false;
    };
    let ex = &mut *guard;
    if let (Some(seed), None) = (f.chaos, ex.chaos.as_ref()) {
        let stream = seed
            ^ (u64::from(qp.nic.id) << 32 | u64::from(qp.qpn)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ex.chaos = Some(Chaos {
            rng: SmallRng::seed_from_u64(stream),
        });
    }
    let mut own = ex.chaos.take();
    let work = step_qp(f, qp, ex, global, own.as_mut());
    ex.chaos = own;
    work
}

fn step_qp(
    f: &FabricInner,
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    global: Option<&mut Chaos>,
    mut chaos: Option<&mut Chaos>,
) -> bool {
    // The clock is read only when something time-based is in play (chaos, RNR back-off).
    let timed = chaos.is_some() || !ex.pending.is_empty() || ex.hold_until.is_some();
    let now = timed.then(Instant::now);
    let mut work = match now {
        Some(n) if !ex.pending.is_empty() => drain_pending(ex, n, false),
        _ => false,
    };
    // Doorbells only move the target forward, and the record read with the newest one covers
    // everything rung before it: look for new ones once the known backlog is done.
    if ex.sq_pos >= ex.sq_target {
        if let Some(t) = qp.model().sq_doorbell(&qp.view, ex.sq_pos) {
            if t - ex.sq_pos > u64::from(qp.init.sq_units) {
                // A doorbell claiming more WQEs than the ring holds is a producer bug (or a
                // stale value): refuse it rather than execute old ring contents.
                if qp.state() != QpState::Error {
                    qp.set_error();
                    let c = err_cpl(
                        qp,
                        qp.model().counter_for(&qp.view, ex.sq_pos, 1),
                        0,
                        WcStatus::LocQpOpErr,
                    );
                    let cq = qp.send_cq.clone();
                    complete(ex, cq, c, None);
                }
                return true;
            }
            ex.sq_target = t;
        }
    }
    let state = qp.state();
    if state == QpState::Error {
        work |= flush_rq(qp, ex);
    }
    if ex.sq_pos >= ex.sq_target {
        return work;
    }
    if let Some(h) = ex.hold_until {
        if now.is_some_and(|n| n < h) {
            return work;
        }
        ex.hold_until = None;
    }
    let mut budget = match global {
        Some(c) => c.rng.gen_range(1..=8),
        None => 64,
    };
    while ex.sq_pos < ex.sq_target && budget > 0 {
        budget -= 1;
        let mut op = std::mem::take(&mut ex.op);
        let mut scratch = std::mem::take(&mut ex.scratch);
        let fetched = qp.model().fetch(&qp.view, ex.sq_pos, &mut op, &mut scratch);
        ex.scratch = scratch;
        let state = qp.state();
        let outcome = match fetched {
            Err(bad) => {
                if state == QpState::Error {
                    Step::Complete(flush_cpl(qp, bad.counter, 0), bad.units, true)
                } else {
                    qp.set_error();
                    Step::Complete(err_cpl(qp, bad.counter, 0, bad.status), bad.units, true)
                }
            }
            Ok(()) if state == QpState::Error => {
                Step::Complete(flush_cpl(qp, op.counter, op.hw_opcode), op.units, true)
            }
            Ok(()) if state != QpState::Rts => {
                qp.set_error();
                Step::Complete(
                    err_cpl(qp, op.counter, op.hw_opcode, WcStatus::LocQpOpErr),
                    op.units,
                    true,
                )
            }
            Ok(())
                if let Err(what) = qp.model().check_sequence(&qp.view, ex.sq_pos, &ex.seq, &op) =>
            {
                // bnxt: the hardware would retransmit from a wrong PSN: a driver bug, reported.
                f.stats.psn_errors.fetch_add(1, Ordering::Relaxed);
                if std::env::var_os("GDA_SIM_TRACE").is_some() {
                    eprintln!("gda-sim: QP {:#x} WQE at {}: {what}", qp.qpn, ex.sq_pos);
                }
                qp.set_error();
                Step::Complete(
                    err_cpl(qp, op.counter, op.hw_opcode, WcStatus::LocQpOpErr),
                    op.units,
                    true,
                )
            }
            Ok(()) if op.fence && ex.pending_data > 0 => {
                // A fence waits for earlier READ/atomic results: land them now, in order.
                drain_pending(ex, Instant::now(), true);
                ex.op = op;
                continue;
            }
            Ok(()) => {
                if let Some(c) = chaos.as_deref_mut() {
                    if let Some(d) = c.delay(0.05, 30) {
                        ex.hold_until = Some(now.unwrap_or_else(Instant::now) + d);
                        ex.op = op;
                        return true;
                    }
                }
                execute(f, qp, ex, &op, chaos.as_deref_mut())
            }
        };
        ex.op = op;
        match outcome {
            Step::Wait => break,
            Step::Complete(c, units, always) => {
                f.stats.wqes.fetch_add(1, Ordering::Relaxed);
                ex.executed += 1;
                let start = ex.sq_pos;
                ex.sq_pos += u64::from(units);
                ex.rnr_attempts = 0;
                ex.rnr_next = None;
                ex.seq.advance(ex.op.packets);
                if always || ex.op.signaled || !c.status.is_ok() {
                    let cq = qp.send_cq.clone();
                    if ex.unreported > 0 && !c.status.is_ok() && qp.model().coalesces_completions()
                    {
                        // bnxt charges an error CQE to the oldest outstanding WQE: retire the
                        // ones that completed silently before it first.
                        let ok = Cpl {
                            status: WcStatus::Success,
                            counter: qp.model().counter_for(&qp.view, start, 0),
                            ..c
                        };
                        complete(ex, cq.clone(), ok, chaos.as_deref_mut());
                    }
                    ex.unreported = 0;
                    complete(ex, cq, c, chaos.as_deref_mut());
                } else {
                    ex.unreported += 1;
                }
                if !ex.pending.is_empty() {
                    drain_pending(ex, Instant::now(), false);
                }
                work = true;
            }
        }
    }
    work
}

enum Step {
    /// Try again later (RNR back-off, fence, chaos hold).
    Wait,
    /// Done: completion, units consumed, whether a CQE is due even if unsignalled.
    Complete(Cpl, u32, bool),
}

fn base_cpl(qp: &QpInner, counter: u32, hw_opcode: u8) -> Cpl {
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

fn err_cpl(qp: &QpInner, counter: u32, hw_opcode: u8, status: WcStatus) -> Cpl {
    Cpl {
        status,
        ..base_cpl(qp, counter, hw_opcode)
    }
}

fn flush_cpl(qp: &QpInner, counter: u32, hw_opcode: u8) -> Cpl {
    err_cpl(qp, counter, hw_opcode, WcStatus::WrFlushErr)
}

/// Writes (or, in chaos mode / behind pending items, defers) a completion, keeping order.
fn complete(ex: &mut QpExec, cq: Arc<CqInner>, c: Cpl, chaos: Option<&mut Chaos>) {
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
fn drain_pending(ex: &mut QpExec, now: Instant, all: bool) -> bool {
    let mut did = false;
    while let Some(front) = ex.pending.front() {
        let due = front.due();
        if !all && ex.executed < due.wqes && now < due.time {
            break;
        }
        did = true;
        match ex.pending.pop_front() {
            Some(Deferred::Data { dst, bytes, .. }) => {
                // SAFETY: `dst` was checked against a region kept alive by the item.
                unsafe { mmio::dma_copy(dst as *mut u8, bytes.as_ptr(), bytes.len()) };
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

fn flush_rq(qp: &QpInner, ex: &mut QpExec) -> bool {
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

fn local_fault(_: Fault) -> WcStatus {
    WcStatus::LocProtErr
}

fn remote_fault(_: Fault) -> WcStatus {
    WcStatus::RemAccessErr
}

/// Executes one WQE against the connected responder.
fn execute(
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
    // Re-resolve the responder whenever QPs come or go, so a destroyed peer stops answering.
    let epoch = f.epoch.load(Ordering::Acquire);
    if (ex.remote.is_none() && ex.peer.is_none()) || ex.remote_epoch != epoch {
        let ep = *qp.remote.lock().unwrap_or_else(|e| e.into_inner());
        ex.remote = ep.and_then(|ep| lookup(f, &ep)).map(|q| Arc::downgrade(&q));
        ex.peer = match (&ex.remote, ep, &f.link) {
            (None, Some(ep), Some(link)) => match link.peer_of(&ep) {
                Some(Ok(p)) => Some(crate::xproc::PeerQp::new(p, &ep)),
                _ => None,
            },
            _ => None,
        };
        ex.remote_epoch = epoch;
    }
    if ex.remote.is_none() {
        return match ex.peer.as_mut().and_then(|p| p.ready()) {
            Some(rpd) => execute_remote_process(qp, ex, op, kind, c, rpd, chaos),
            // No responder: the requester's retries run out.
            None => fail(qp, c, WcStatus::RetryExcErr, op.units),
        };
    }
    let Some(rqp) = ex.remote.as_ref().and_then(Weak::upgrade) else {
        return fail(qp, c, WcStatus::RetryExcErr, op.units);
    };
    if !matches!(rqp.state(), QpState::Rtr | QpState::Rts) {
        // No responder: the requester's retries run out.
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
                if let Err(e) = rmrs.check_remote_cached(
                    &mut ex.rcache,
                    rqp.pd,
                    op.remote.rkey,
                    op.remote.addr,
                    len,
                    Access::REMOTE_WRITE,
                ) {
                    return fail(qp, c, remote_fault(e), op.units);
                }
                if let Err(s) = gather_to(lmrs, &mut ex.lcache, qp.pd, op, op.remote.addr) {
                    return fail(qp, c, s, op.units);
                }
                mmio::dma_publish();
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
                    Recv::Empty => return rnr(qp, ex, c, op),
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
                Recv::Empty => return rnr(qp, ex, c, op),
            };
            let mut sges = std::mem::take(&mut ex.recv_sges);
            let res = scatter_send(&rqp, &staged, pos, &mut sges);
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
                // The source region stays registered (and its memory alive) while it is read.
                let _src_mr = match rmrs.check_remote(
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
                for s in op.sges.iter().filter(|s| s.length > 0) {
                    if let Some(k) = defer {
                        let mut bytes = vec![0u8; s.length as usize];
                        // SAFETY: the source range was checked against a responder region.
                        unsafe {
                            mmio::dma_copy(bytes.as_mut_ptr(), src as *const u8, bytes.len())
                        };
                        let due = ex.due_after(k);
                        ex.pending.push_back(Deferred::Data {
                            due,
                            dst: s.addr,
                            bytes,
                            _mr: keep.clone(),
                        });
                        ex.pending_data += 1;
                    } else {
                        // SAFETY: both ranges were checked against regions granting the access.
                        unsafe {
                            mmio::dma_copy(s.addr as *mut u8, src as *const u8, s.length as usize)
                        };
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

/// Executes a one-sided operation against a responder in another process (see `host.rs`):
/// the same checks and completions as [`execute`], with remote addresses translated into this
/// process's mapping of the peer's memory.
fn execute_remote_process(
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
                if let Err(s) = gather_to(lmrs, &mut ex.lcache, qp.pd, op, dst) {
                    return fail(qp, c, s);
                }
                mmio::dma_publish();
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
                for s in op.sges.iter().filter(|s| s.length > 0) {
                    if let Err(e) = lmrs.check_local(
                        qp.pd,
                        s.lkey,
                        s.addr,
                        u64::from(s.length),
                        Access::LOCAL_WRITE,
                    ) {
                        return fail(qp, c, local_fault(e));
                    }
                }
                for s in op.sges.iter().filter(|s| s.length > 0) {
                    // SAFETY: both ranges were checked against regions granting the access; the
                    // peer's segment stays mapped while `peer` holds it.
                    unsafe {
                        mmio::dma_copy(s.addr as *mut u8, src as *const u8, s.length as usize)
                    };
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

/// Executes an atomic; `target` performs the responder's checks for the `w`-byte operand and
/// returns its address in this process (and the region to hold while the result is pending).
fn execute_atomic(
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
    c.opcode = if matches!(
        aop,
        gda_hal::AtomicOp::CompareSwap { .. } | gda_hal::AtomicOp::MaskedCompareSwap { .. }
    ) {
        WcOpcode::CompSwap
    } else {
        WcOpcode::FetchAdd
    };
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
    // SAFETY: `target` checked the operand against a responder region granting REMOTE_ATOMIC
    // (mapped here: this process's memory, or a peer's segment the peer view holds), and it is
    // aligned to `w` (region mappings are page-aligned).
    let Some(old) = (unsafe { mmio::dma_atomic_rmw(addr, width, |v| aop.apply(v, width)) }) else {
        return fail(qp, c, WcStatus::LocQpOpErr);
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
                _mr: std::iter::once(lmr).chain(rmr).collect(),
            });
            ex.pending_data += 1;
        }
        None => {
            // SAFETY: the local range was checked (LOCAL_WRITE, `w` bytes).
            unsafe { mmio::dma_copy(local.addr as *mut u8, bytes.as_ptr(), n) };
            mmio::dma_publish();
        }
    }
    Step::Complete(c, op.units, false)
}

/// RNR: retry later, or fail after `rnr_retry` attempts (7 = forever).
fn rnr(qp: &QpInner, ex: &mut QpExec, c: Cpl, op: &WqeOp) -> Step {
    let now = Instant::now();
    if let Some(t) = ex.rnr_next {
        if now < t {
            return Step::Wait;
        }
    }
    ex.rnr_attempts = ex.rnr_attempts.saturating_add(1);
    if qp.init.rnr_retry != 7 && ex.rnr_attempts > u32::from(qp.init.rnr_retry) {
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

enum Recv {
    Got(u64),
    Empty,
}

/// Consumes the responder's next receive WQE, if one is posted. (The receive position is an
/// atomic on the QP, not in its exec state, because a loopback QP is its own responder.)
fn take_recv(rqp: &QpInner) -> Recv {
    let pos = rqp.rq_consumed.load(Ordering::Acquire);
    let prod = rqp.model().rq_producer(&rqp.view, pos);
    // More posted than the ring holds is a stale or garbage producer value: nothing usable.
    if prod > pos && prod - pos <= u64::from(rqp.init.rq_wqes) {
        rqp.rq_consumed.store(pos + 1, Ordering::Release);
        Recv::Got(pos)
    } else {
        Recv::Empty
    }
}

/// Gathers a SEND's payload (inline or from checked local regions, which stay registered
/// while they are read).
fn stage_source(qp: &QpInner, op: &WqeOp) -> Result<Vec<u8>, WcStatus> {
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
fn scatter_send(
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
fn gather_to(
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

/// Completes everything deferred (used when a QP is torn down in tests).
#[allow(dead_code)]
pub(crate) fn drain_all(qp: &QpInner) {
    if let Ok(mut ex) = qp.exec.lock() {
        drain_pending(&mut ex, Instant::now(), true);
    }
}
