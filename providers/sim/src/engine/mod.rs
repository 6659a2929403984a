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

mod atomic;
mod complete;
mod data;
mod execute;
mod recv;
mod wire;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use gda_hal::WcStatus;
use gda_hal::model::Cpl;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use self::complete::*;
use self::execute::*;
use crate::state::{Chaos, FabricInner, QpExec, QpInner};
use crate::types::QpState;
pub(crate) fn run(weak: Weak<FabricInner>) {
    let mut chaos = None;
    let mut qps: Vec<Arc<QpInner>> = Vec::new();
    let mut order: Vec<usize> = Vec::new();
    let mut epoch = u64::MAX;
    let mut idle_since: Option<Instant> = None;
    let mut last_work = Instant::now();
    let mut sleep = Duration::from_micros(20);
    let mut idle_scans = 0u32;
    // The next nap while a program thread polls (0: it did not poll at the last look).
    let mut deferred = Duration::ZERO;
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
        let chaos_ref_is_none = chaos_ref.is_none();
        let mut work = false;
        let nap_after = spin_before_nap(&f);
        // A program thread may be running the engine's pass now or have just run it
        // (`progress`): then this thread has nothing to do (and naps once that has lasted).
        let since_poll = f.wire.as_ref().map(|w| w.since_polled());
        // A doorbell whose work its poster could not run is served here first.
        let rescan = f.rescan.swap(false, Ordering::SeqCst);
        // Work a poster handed over is run here, beside the program (a stream's large copies
        // on the other core), whether or not a program thread polls. Read before swapped: the
        // poster's line is written only when a deferral follows a look.
        let handed = f.handed.load(Ordering::Relaxed) && f.handed.swap(false, Ordering::Relaxed);
        let polled = !rescan && !handed && since_poll.is_some_and(|d| d < PROGRAM_POLLS);
        // Program threads that post run their own queues' work (post hooks) but not the rest
        // (peers' requests, responses, what they leave): see below.
        let hooked = f.wire.is_some() && f.hooked.swap(false, Ordering::Relaxed);
        if polled && chaos_ref_is_none {
            // Leave the work to the polling thread, and sleep a short while — without
            // telling peers (a wake-up for every frame they write would cost them a system
            // call each, for work the polling thread does anyway). A local doorbell whose own
            // pass found the turn taken still wakes this thread (`Fabric::kick`). While the
            // program keeps polling, the naps grow (up to `DEFERRED_NAP_MAX`), so a polling
            // thread is not interrupted every few microseconds by this one.
            nap_short(&weak, f, next_short_nap(&mut deferred), false);
            idle_since = None;
            continue;
        }
        if deferred > Duration::ZERO && !hooked {
            // The program stopped polling: requests may come that only this thread will serve,
            // so its naps start short again.
            deferred = Duration::ZERO;
            sleep = Duration::from_micros(20);
        }
        // Whether this look ran the pass (a program thread's hook or pass may hold the turn).
        let mut ran = false;
        if !polled {
            // For a posting program the turn is waited for: its hooks hold it a step at a time,
            // and the short nap below is bounded only by a pass that ran.
            let turn = if hooked { Some(f.turn()) } else { f.try_turn() };
            if let Some(mut turn) = turn {
                ran = true;
                // The wire's clock for this pass (only process fabrics read it).
                let _clock = f.wire.is_some().then(crate::wire::PassClock::start);
                // Requests from QPs of other processes execute here, where the memory is.
                work = f.run_scan_hooks();
                work |= wire::serve(&f, &mut turn);
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
            } else if rescan {
                // A program thread's pass holds the turn, and may have begun before the
                // doorbell: ask again (the next look, or that pass's successor, serves it).
                f.rescan.store(true, Ordering::SeqCst);
            }
        }
        if hooked && ran && chaos_ref_is_none {
            // A program thread posts (and will poll when it needs completions or room): this
            // pass served the rest; the next comes after a short nap. Responses to its
            // requests (acknowledgements above all, one per few requests) do not wake this
            // thread — they would cost the peer a system call and this process a context
            // switch, over and over while the program posts; the program takes them when it
            // polls, and what it does not poll for waits at most `DEFERRED_NAP_MAX`. Peers'
            // requests still wake it: a program that posts and then spins on its memory for a
            // peer's write (not in a SHMEM wait, which serves) gets it after one wake-up.
            nap_short(&weak, f, next_short_nap(&mut deferred), true);
            idle_since = None;
            continue;
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
            > nap_after
        {
            let Some(f) = weak.upgrade() else { return };
            // Announce the nap, then look once more: a host that rang a doorbell before seeing
            // `napping` is served by this scan, one that rings after it wakes us
            // (`Fabric::kick` from the posting path). No doorbell waits for the nap to end.
            // ORDERING: SeqCst pairs with the SeqCst load in `Fabric::kick`; the fence orders
            // the store before the last look's loads.
            f.napping.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            // Peers that write to us from now on wake us too.
            let set_napping = |on| {
                if let Some(w) = &f.wire {
                    w.set_napping(on);
                }
            };
            set_napping(true);
            let late = {
                let mut turn = f.turn();
                let mut late = f.run_scan_hooks();
                late |= wire::serve(&f, &mut turn);
                for q in &qps {
                    late |= step(&f, q, None);
                }
                late
            };
            if late {
                f.napping.store(false, Ordering::Relaxed);
                set_napping(false);
                idle_since = None;
                sleep = Duration::from_micros(20);
                continue;
            }
            f.stats.sleeps.fetch_add(1, Ordering::Relaxed);
            let wake = f.wire.clone();
            drop(f);
            match wake {
                // A process fabric naps on its eventfd, which its peers write too.
                Some(w) => nap_on(w.wake_fd(), sleep),
                None => std::thread::park_timeout(sleep),
            }
            if let Some(f) = weak.upgrade() {
                f.napping.store(false, Ordering::Relaxed);
                if let Some(w) = &f.wire {
                    w.set_napping(false);
                }
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

/// Naps up to `nap` on the fabric's eventfd, as a short nap: posters may leave doorbells to it
/// (`defer_doorbell`). Peers are not told (their frames wait for the nap to end or for a
/// program thread's poll), except, with `requests_wake`, on the connections peers made: their
/// requests wake it. No nap when a poster asked for a scan meanwhile.
fn nap_short(weak: &Weak<FabricInner>, f: Arc<FabricInner>, nap: Duration, requests_wake: bool) {
    let wake = f.wire.clone();
    // A short nap: said before `napping`, so a poster that sees `napping` sees this too.
    f.deferring.store(true, Ordering::SeqCst);
    // ORDERING: SeqCst pairs with the SeqCst load in `Fabric::kick`; the fence orders the
    // store before the loads that follow (those of the next look at the queues too).
    f.napping.store(true, Ordering::SeqCst);
    std::sync::atomic::fence(Ordering::SeqCst);
    // A poster that asked for a scan before it could see `napping` (it then wakes nobody):
    // scan now instead (SeqCst pairs with its store of `rescan`).
    if f.rescan.load(Ordering::SeqCst) {
        f.napping.store(false, Ordering::Relaxed);
        f.deferring.store(false, Ordering::Relaxed);
        return;
    }
    drop(f);
    if let Some(w) = &wake {
        // A request written just before this is served when the nap ends (a race the
        // long nap's last look closes; here the nap bounds it).
        if requests_wake {
            w.set_napping_for_requests();
        }
        nap_on(w.wake_fd(), nap);
        if requests_wake {
            w.set_napping(false);
        }
    }
    if let Some(f) = weak.upgrade() {
        f.napping.store(false, Ordering::Relaxed);
        // A poster that still sees the short nap announced leaves its doorbell to the look
        // that follows this one (`defer_doorbell`).
        f.deferring.store(false, Ordering::SeqCst);
    }
}

/// How recently a program thread must have run a process fabric's pass (`progress`) for the
/// engine thread to leave the work to it: the window in which peers leave it asleep too.
const PROGRAM_POLLS: Duration = crate::wire::POLLED_RECENTLY;

/// The first of the engine thread's short naps while a program posts or polls; they double up
/// to [`DEFERRED_NAP_MAX`].
const SHORT_NAP_MIN: Duration = Duration::from_micros(20);

/// The next short nap while a program posts or polls (`deferred`: the last one, zero after a
/// look that found the program gone): from [`SHORT_NAP_MIN`], doubling up to
/// [`DEFERRED_NAP_MAX`].
fn next_short_nap(deferred: &mut Duration) -> Duration {
    let nap = (*deferred).max(SHORT_NAP_MIN);
    *deferred = (*deferred * 2).clamp(SHORT_NAP_MIN, DEFERRED_NAP_MAX);
    nap
}

/// The longest nap of an engine thread that leaves the work to a polling program thread. Work
/// a poster handed over waits at most this long for it; a peer's request that arrives as the
/// program stops polling waits at most this long after the program's window
/// ([`PROGRAM_POLLS`]) ends (peers leave the engine asleep while the program polls).
pub(crate) const DEFERRED_NAP_MAX: Duration = Duration::from_micros(320);

/// How long an idle engine keeps scanning before it naps. A process fabric's engine naps
/// almost at once: its peers wake it through its eventfd when they write to it, and the
/// program's own threads run its work themselves when they post or poll (`progress`), so a
/// spinning engine would only take the core they need (a 2-core host running two processes of
/// one spinning thread each has none to spare).
fn spin_before_nap(f: &FabricInner) -> Duration {
    if f.wire.is_some() {
        Duration::from_micros(20)
    } else {
        Duration::from_micros(200)
    }
}

/// One pass of the engine in the calling thread (a program's thread that posts or polls, so
/// its work needs no other thread to be scheduled): the connections to other processes, then
/// every QP; whether anything happened. Only process fabrics are run this way; others, and
/// chaos fabrics (whose decisions come from one seeded stream), leave everything to the engine
/// thread.
pub(crate) fn progress(f: &FabricInner) -> bool {
    pass_here(f).unwrap_or(false)
}

/// [`progress`], telling apart a pass that ran (`Some`: whether it did anything) from none
/// (`None`: not a process fabric, a chaos fabric, or another thread's pass under way).
fn pass_here(f: &FabricInner) -> Option<bool> {
    let w = f.wire.as_ref().filter(|_| f.chaos.is_none())?;
    let _clock = crate::wire::PassClock::start();
    // One pass at a time, whichever thread runs it: a CQ has one producer.
    // A pass under way in another thread has marked the connections already.
    let turn = f.try_turn()?;
    // This pass looks at every queue: what asked for a scan before it is served by it.
    f.rescan.store(false, Ordering::SeqCst);
    // Peers that write meanwhile leave the engine thread asleep: this pass, or the next of
    // this polling thread, takes what they write. The mark ends with the pass however it
    // ends (an engine thread that believed a pass still ran would leave the work forever).
    struct InPass<'a> {
        wire: &'a crate::wire::Wire,
        turn: crate::state::Turn<'a>,
    }
    impl Drop for InPass<'_> {
        fn drop(&mut self) {
            if let Some(l) = self.turn.conns() {
                self.wire.set_polled(false, l);
            }
        }
    }
    let mut pass = InPass { wire: w, turn };
    if let Some(l) = pass.turn.conns() {
        w.conns(l);
        w.set_polled(true, l);
    }
    let mut work = wire::serve(f, &mut pass.turn);
    for q in f.qp_list().iter() {
        work |= step(f, q, None);
    }
    Some(work)
}

/// After a doorbell: the engine's pass in the calling thread, which sees the doorbell (so the
/// engine thread is not woken, even when the pass found nothing to do: a receive WQE waits
/// for its message); the engine thread is woken, and asked to scan even while program threads
/// poll, only when no pass could run here — another thread's pass may already have looked at
/// this queue.
pub(crate) fn after_doorbell(f: &FabricInner) {
    if pass_here(f).is_none() {
        // ORDERING: SeqCst, as in `after_post_on`: a thread that leaves the work to polling
        // threads reads it first.
        f.rescan.store(true, Ordering::SeqCst);
        f.kick();
    }
}

/// After a doorbell rung by a thread that then polls for the completions itself (running the
/// pass while it waits): an awake engine thread takes the work (it runs in parallel, as a NIC
/// does); a napping one is left asleep and the pass runs here instead of a wake-up, which
/// costs more than the pass (15-36 us across CPUs on this project's VM).
pub(crate) fn after_post(f: &FabricInner) {
    // ORDERING: SeqCst pairs with the engine's SeqCst store of `napping`, as in `kick`.
    if f.napping.load(Ordering::SeqCst) {
        after_doorbell(f);
    } else {
        // Awake, but it may be about to leave the work to polling threads: it scans first.
        f.rescan.store(true, Ordering::SeqCst);
    }
}

/// After a doorbell on `qp` rung by a thread that then polls for the completions itself: that
/// QP's send queue is served here, at once — only it, what the doorbell added, not every
/// connection and QP (a thread that posts in a loop pays for its own requests, not for a whole
/// pass each time), and whether the engine thread naps or not (it may be about to leave the
/// work to polling threads). When another thread's pass holds the turn (it may have looked at
/// this queue already), the engine thread is asked to scan again and woken.
pub(crate) fn after_post_on(f: &FabricInner, qp: &Arc<QpInner>) {
    if f.wire.is_none() || f.chaos.is_some() {
        f.kick();
        return;
    }
    // No clock is read here (a posting loop pays for its requests only): a request sent
    // outside a pass starts its stall timer at the first pass that finds it unanswered.
    // The engine thread learns that a program posts (it then naps short, untold by peers).
    f.hooked.store(true, Ordering::Relaxed);
    match f.try_turn() {
        Some(_turn) => {
            // What a step leaves (more WQEs than its budget) it hands to the engine thread.
            step(f, qp, None);
        }
        None => {
            // ORDERING: SeqCst, as the doorbell before it: the engine reads the flag after
            // it announces a nap or before it leaves the work to a polling thread.
            f.rescan.store(true, Ordering::SeqCst);
            f.kick();
        }
    }
}

/// [`after_post_on`] for a post of large messages: this QP's step here, and the whole pass
/// after it only when the step left requests of the QP on the wire (no grant of direct
/// placement covered them): that pass writes what waits for room in the rings and takes the
/// acknowledgements that free it, which a large request needs sooner than the program's next
/// poll. Placed directly, a large WRITE or READ is complete after the step.
pub(crate) fn after_large_post_on(f: &FabricInner, qp: &Arc<QpInner>, streaming: bool) {
    if f.wire.is_none() || f.chaos.is_some() {
        after_doorbell(f);
        return;
    }
    // Placed directly, a stream's large operations are copies the engine thread can make on
    // another core while the program posts (`Qp::after_large_post`); on the wire they are
    // served here, where their frames are written at once.
    if streaming && qp.placing.load(Ordering::Relaxed) && defer_doorbell(f) {
        return;
    }
    f.hooked.store(true, Ordering::Relaxed);
    let wired = match f.try_turn() {
        Some(_turn) => {
            step(f, qp, None);
            qp.exec
                .try_lock()
                .map_or(true, |ex| !ex.wire_out.is_empty())
        }
        None => true,
    };
    if wired {
        after_doorbell(f);
    }
}

/// A poster's doorbell left to the engine (`Fabric::defer_doorbell`): accepted when the
/// engine thread will look at every queue within `DEFERRED_NAP_MAX` on its own — awake, or in
/// a short nap (`nap_short`: after it, the engine runs a pass unless a program thread polls,
/// and that thread's passes serve every queue) — refused (the poster runs the work itself)
/// when it naps for long, and for fabrics whose posters always run it.
pub(crate) fn defer_doorbell(f: &FabricInner) -> bool {
    if f.wire.is_none() || f.chaos.is_some() {
        return false;
    }
    // ORDERING: the full fence orders the doorbell before the loads, pairing with the engine's
    // SeqCst store of `napping` before its last look: either that look sees the doorbell, or
    // we see the engine napping (and, for a long nap, not deferring).
    std::sync::atomic::fence(Ordering::SeqCst);
    let taken = !f.napping.load(Ordering::SeqCst) || f.deferring.load(Ordering::SeqCst);
    if taken {
        // A statistic: a plain increment (no locked instruction on the posting path).
        let n = &f.stats.deferred_doorbells;
        n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        // A hint for the engine's next look (a lost one leaves the work to the next pass,
        // the program's or the engine's): stored only when not already set.
        if !f.handed.load(Ordering::Relaxed) {
            f.handed.store(true, Ordering::Relaxed);
        }
    }
    taken
}

/// Sleeps until `fd` (an eventfd) is written or `timeout` passes, then resets it.
fn nap_on(fd: &std::os::fd::OwnedFd, timeout: Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let ts = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    let _ = rustix::event::poll(&mut fds, Some(&ts));
    let mut b = [0u8; 8];
    let _ = rustix::io::read(fd, &mut b);
}

/// Idle scans between two offers of the CPU (`yield_now`) before the engine naps (8 made RDMA
/// put + quiet between two processes swing to 5 µs on 2 cores; 64 keeps it at 0.4–0.5 µs and
/// the barrier under 30 µs).
const IDLE_SCANS_PER_YIELD: u32 = 64;

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
    // The request frames the step batched go out now, whatever it returned.
    if let Some(w) = &f.wire {
        wire::flush_batch(w, qp, ex);
    }
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
    // Requests answered by another process complete first, in order.
    if !ex.wire_out.is_empty() {
        if let Some(w) = &f.wire {
            work |= wire::reap(w, qp, ex, |ex, c, units, always, signaled, packets| {
                retire(f, qp, ex, c, units, always, signaled, packets, None);
            });
        }
    }
    // Doorbells only move the target forward, and the record read with the newest one covers
    // everything rung before it: look for new ones once the known backlog is done.
    if ex.sq_pos + ex.ahead >= ex.sq_target {
        if let Some(t) = qp.model().sq_doorbell(&qp.view, ex.sq_pos + ex.ahead) {
            if t - ex.sq_pos > u64::from(qp.init.sq_units) {
                // A doorbell claiming more WQEs than the ring holds is a producer bug (or a
                // stale value): refuse it rather than execute old ring contents.
                if qp.state() != QpState::Error && ex.ahead == 0 {
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
    if ex.sq_pos + ex.ahead >= ex.sq_target {
        return work;
    }
    if let Some(h) = ex.hold_until {
        if Instant::now() < h {
            return work;
        }
        ex.hold_until = None;
    }
    let mut budget = match global {
        Some(c) => c.rng.gen_range(1..=8),
        None => 64,
    };
    while ex.sq_pos + ex.ahead < ex.sq_target && budget > 0 {
        budget -= 1;
        let pos = ex.sq_pos + ex.ahead;
        // Out of `ex` while it executes (`execute` needs `ex` whole): a pointer moves.
        let mut op = ex.op.take().unwrap_or_default();
        let fetched = qp.model().fetch(&qp.view, pos, &mut op, &mut ex.scratch);
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
            Ok(()) if let Err(what) = qp.model().check_sequence(&qp.view, pos, &ex.seq, &op) => {
                // bnxt: the hardware would retransmit from a wrong PSN: a driver bug, reported.
                f.stats.psn_errors.fetch_add(1, Ordering::Relaxed);
                if std::env::var_os("GDA_SIM_TRACE").is_some() {
                    eprintln!("gda-sim: QP {:#x} WQE at {pos}: {what}", qp.qpn);
                }
                qp.set_error();
                Step::Complete(
                    err_cpl(qp, op.counter, op.hw_opcode, WcStatus::LocQpOpErr),
                    op.units,
                    true,
                )
            }
            // A fence waits for every request in flight to another process.
            Ok(()) if op.fence && ex.ahead > 0 => Step::Wait,
            Ok(()) if op.fence && ex.pending_data > 0 => {
                // A fence waits for earlier READ/atomic results: land them now, in order.
                drain_pending(ex, Instant::now(), true);
                ex.op = Some(op);
                continue;
            }
            Ok(()) => {
                if let Some(c) = chaos.as_deref_mut() {
                    if let Some(d) = c.delay(0.05, 30) {
                        ex.hold_until = Some(now.unwrap_or_else(Instant::now) + d);
                        ex.op = Some(op);
                        return true;
                    }
                }
                execute(f, qp, ex, &op, chaos.as_deref_mut())
            }
        };
        let (op_units, signaled, packets) = (op.units, op.signaled, op.packets);
        ex.op = Some(op);
        match outcome {
            Step::Wait => break,
            // Completions stay in order: this one waits for the requests in flight before it
            // (the WQE is fetched again once they have completed).
            Step::Complete(..) if ex.ahead > 0 => break,
            Step::Sent => {
                ex.ahead += u64::from(op_units);
                ex.seq.advance(packets);
                work = true;
            }
            Step::Complete(c, units, always) => {
                retire(
                    f,
                    qp,
                    ex,
                    c,
                    units,
                    always,
                    signaled,
                    Some(packets),
                    chaos.as_deref_mut(),
                );
                work = true;
            }
        }
    }
    if budget == 0 && ex.sq_pos + ex.ahead < ex.sq_target && f.wire.is_some() {
        // More rung than one turn serves: whichever thread comes next serves the rest — the
        // engine thread too, even while program threads poll (they may not come back soon).
        // ORDERING: SeqCst, as a poster's store of `rescan`.
        f.rescan.store(true, Ordering::SeqCst);
        f.kick();
    }
    work
}

/// The bookkeeping of a WQE that completed: the position, the sequence (`packets`, unless it
/// moved when the request was sent), the CQE if one is due.
#[allow(clippy::too_many_arguments)]
fn retire(
    f: &FabricInner,
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    c: Cpl,
    units: u32,
    always: bool,
    signaled: bool,
    packets: Option<u32>,
    mut chaos: Option<&mut Chaos>,
) {
    f.stats.wqes.fetch_add(1, Ordering::Relaxed);
    ex.executed += 1;
    let start = ex.sq_pos;
    ex.sq_pos += u64::from(units);
    ex.rnr_attempts = 0;
    ex.rnr_next = None;
    if let Some(p) = packets {
        ex.seq.advance(p);
    }
    if always || signaled || !c.status.is_ok() {
        let cq = qp.send_cq.clone();
        if ex.unreported > 0 && !c.status.is_ok() && qp.model().coalesces_completions() {
            // bnxt charges an error CQE to the oldest outstanding WQE: retire the ones that
            // completed silently before it first.
            let ok = Cpl {
                status: WcStatus::Success,
                counter: qp.model().counter_for(&qp.view, start, 0),
                ..c
            };
            complete(ex, cq.clone(), ok, chaos.as_deref_mut());
        }
        ex.unreported = 0;
        complete(ex, cq, c, chaos);
    } else {
        ex.unreported += 1;
    }
    if !ex.pending.is_empty() {
        drain_pending(ex, Instant::now(), false);
    }
}
