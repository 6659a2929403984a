//! The software NIC's shared state: what the host-side handles and the engine both reach.
//! Data only (and the few methods that keep it consistent): the engine's logic lives in
//! `engine`, the handles' in `fabric`, `nic`, `pd`, `cq` and `qp`. Nothing here imports either,
//! so the modules form no cycle.

use std::collections::VecDeque;

// QPs are looked up per request from another process: a fast hash of our own keys (a peer
// cannot insert any, so no flooding to defend against).
use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use gda_hal::Sge;
use gda_hal::model::{Cpl, CqView, DeviceModel, QpView, Seq, WqeOp};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore};

use crate::buf::QueueMem;
use crate::mem::{KeyCache, MrInner, MrTable};
use crate::types::{CqMode, Endpoint, Model, QpInit, QpState};

/// Work the engine runs before each scan ([`Fabric::add_scan_hook`](crate::Fabric::add_scan_hook));
/// returns whether it did anything.
pub type ScanHook = Arc<dyn Fn() -> bool + Send + Sync>;

pub(crate) struct FabricInner {
    pub(crate) id: u64,
    pub(crate) nics: RwLock<Vec<Arc<NicInner>>>,
    pub(crate) qps: RwLock<HashMap<(u32, u32), Arc<QpInner>>>,
    pub(crate) epoch: AtomicU64,
    pub(crate) stop: AtomicBool,
    pub(crate) chaos: Option<u64>,
    pub(crate) engine: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) engine_thread: Mutex<Option<std::thread::Thread>>,
    /// CPUs the engine thread moves itself to when it starts (`None`: it keeps the mask of the
    /// thread that created the first QP). See [`Fabric::set_engine_cpus`](crate::Fabric::set_engine_cpus).
    pub(crate) engine_cpus: Mutex<Option<Vec<usize>>>,
    /// The engine thread's kernel thread id once it runs (0 before), so its CPU mask can be
    /// read back ([`Fabric::engine_cpus`](crate::Fabric::engine_cpus)).
    pub(crate) engine_tid: std::sync::atomic::AtomicI32,
    /// The engine is parked (or about to park): a doorbell rung by host code must unpark it
    /// ([`Fabric::kick`]). Set by the engine before its last scan, cleared when it wakes.
    pub(crate) napping: std::sync::atomic::AtomicBool,
    /// A doorbell's work could not be run by the thread that rang it (another thread's pass
    /// held the turn and may have looked at that queue already): the engine thread scans at
    /// its next look even while a program thread polls.
    pub(crate) rescan: std::sync::atomic::AtomicBool,
    /// The engine thread naps because a program thread polls (a short, bounded nap: see
    /// `engine::DEFERRED_NAP_MAX`), not because the fabric is idle.
    pub(crate) deferring: std::sync::atomic::AtomicBool,
    /// A program thread's post hook ran since the engine thread last looked.
    pub(crate) hooked: std::sync::atomic::AtomicBool,
    /// A poster left its doorbell to the engine thread (`Fabric::defer_doorbell`) since the
    /// engine thread last looked: its next look runs the pass even while a program thread
    /// polls, so the work handed over runs beside the program, as it was handed over to.
    pub(crate) handed: std::sync::atomic::AtomicBool,
    /// Run by the engine before every scan ([`Fabric::add_scan_hook`](crate::Fabric::add_scan_hook)).
    pub(crate) scan_hooks: RwLock<Vec<ScanHook>>,
    pub(crate) stats: Stats,
    /// The message transport to and from other processes (fabrics made by
    /// [`Fabric::process`](crate::Fabric::process)).
    pub(crate) wire: Option<Arc<crate::wire::Wire>>,
    /// Every QP, for `progress` (rebuilt when `epoch` moves).
    pub(crate) qp_list: Mutex<(u64, Arc<Vec<Arc<QpInner>>>)>,
    /// Held by the thread running a process fabric's engine pass — the engine thread, or a
    /// program thread in `Fabric::progress`: the engine's work (CQEs above all: a CQ has one
    /// producer; a connection's requests execute in order) is done by one thread at a time,
    /// whichever it is. What it guards is that thread's scratch list of connections.
    pub(crate) turn: Mutex<crate::wire::ConnList>,
    /// What the requests from other processes checked last (locked once per pass).
    pub(crate) responder: Mutex<Responder>,
}

/// The responder QP the requests from other processes went to last, with what a request to
/// it checks: the QP it is connected to (read under its lock once, and again whenever the
/// fabric's epoch moves) and its last region (`KeyCache`, valid while its table's generation
/// holds). A destroyed QP's handle drops it (the handle waits for every reference to go).
#[derive(Default)]
pub(crate) struct Responder {
    pub(crate) qp: Option<ResponderQp>,
    pub(crate) keys: KeyCache,
}

pub(crate) struct ResponderQp {
    pub(crate) qp: Arc<QpInner>,
    /// `FabricInner::epoch` when `remote` was read.
    pub(crate) epoch: u64,
    pub(crate) remote: Option<Endpoint>,
}

/// The right to run the engine's pass (see `FabricInner::turn`). A fabric of one process has
/// no lock to take: only its engine thread runs the pass, and its hot path stays lock-free.
pub(crate) struct Turn<'a>(Option<std::sync::MutexGuard<'a, crate::wire::ConnList>>);

impl Turn<'_> {
    /// The pass's list of the connections of a process fabric (`None` for others).
    pub(crate) fn conns(&mut self) -> Option<&mut crate::wire::ConnList> {
        self.0.as_deref_mut()
    }
}

impl FabricInner {
    /// The engine's turn, unless another thread has it.
    pub(crate) fn try_turn(&self) -> Option<Turn<'_>> {
        if self.wire.is_none() {
            return Some(Turn(None));
        }
        match self.turn.try_lock() {
            Ok(g) => Some(Turn(Some(g))),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(Turn(Some(e.into_inner()))),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The engine's turn, waiting for a program thread's pass to end.
    pub(crate) fn turn(&self) -> Turn<'_> {
        Turn(
            self.wire
                .is_some()
                .then(|| self.turn.lock().unwrap_or_else(|e| e.into_inner())),
        )
    }

    /// Every QP of the fabric (a snapshot, shared until a QP comes or goes).
    pub(crate) fn qp_list(&self) -> Arc<Vec<Arc<QpInner>>> {
        let e = self.epoch.load(Ordering::Acquire);
        let mut l = self.qp_list.lock().unwrap_or_else(|e| e.into_inner());
        if l.0 != e || l.1.is_empty() {
            let map = self.qps.read().unwrap_or_else(|e| e.into_inner());
            *l = (e, Arc::new(map.values().cloned().collect()));
        }
        l.1.clone()
    }

    /// Runs the scan hooks; whether any did something.
    pub(crate) fn run_scan_hooks(&self) -> bool {
        let hooks = self.scan_hooks.read().unwrap_or_else(|e| e.into_inner());
        let mut work = false;
        for h in hooks.iter() {
            work |= h();
        }
        work
    }

    /// Wakes the engine now (see [`Fabric::kick`](crate::Fabric::kick)).
    pub(crate) fn kick(&self) {
        // ORDERING: SeqCst pairs with the engine's SeqCst store of `napping` before its final
        // scan: either that scan sees the doorbell stored before this call, or this load sees
        // the engine napping and wakes it. A running engine costs only this load.
        if !self.napping.load(Ordering::SeqCst) {
            return;
        }
        if let Some(w) = &self.wire {
            // A process fabric's engine naps on its eventfd (so its peers can wake it).
            w.wake_self();
            return;
        }
        if let Some(t) = self
            .engine_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// The QP of this process an endpoint names, if it is on this fabric.
    pub(crate) fn lookup(&self, ep: &Endpoint) -> Option<Arc<QpInner>> {
        if ep.fabric != self.id {
            return None;
        }
        self.qps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(ep.nic, ep.qpn))
            .cloned()
    }
}

impl Drop for FabricInner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.engine_thread.get_mut().ok().and_then(|t| t.take()) {
            t.unpark();
        }
        if let Some(h) = self.engine.get_mut().ok().and_then(|h| h.take()) {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

pub(crate) struct NicInner {
    pub(crate) id: u32,
    pub(crate) model: Model,
    pub(crate) mrs: MrTable,
    pub(crate) next_qpn: AtomicU32,
    pub(crate) next_pd: AtomicU32,
    pub(crate) next_cqn: AtomicU32,
    /// Regions ever registered whose memory peers may be granted ((`wire::direct`)): while
    /// none, the responder does not look for grants to offer.
    pub(crate) shared_regions: std::sync::atomic::AtomicUsize,
    /// Whether its port is up ([`crate::port`]): while down, it neither sends nor answers.
    pub(crate) port_up: AtomicBool,
}

impl NicInner {
    /// Whether its port is up.
    pub(crate) fn port_is_up(&self) -> bool {
        self.port_up.load(Ordering::Acquire)
    }

    /// A key nobody can predict: 32 bits straight from the operating system's CSPRNG
    /// (`getrandom`), so knowing every other key of this or any NIC tells nothing about it.
    /// (A seeded fast generator would let one observed key give away all the others.)
    pub(crate) fn fresh_key(&self) -> u32 {
        loop {
            let k = rand::rngs::OsRng.next_u32();
            if k != 0 && !self.mrs.key_in_use(k) {
                return k;
            }
        }
    }
}

pub(crate) struct CqInner {
    /// The fabric whose engine writes this CQ (one writer per CQ).
    pub(crate) fabric: u64,
    pub(crate) cqn: u32,
    pub(crate) model: Model,
    /// The model's view of `buf` and `dbrec`.
    pub(crate) view: CqView,
    pub(crate) mode: CqMode,
    pub(crate) entries: u32,
    /// The CQE ring and consumer record, owned here for `view` (never read directly).
    pub(crate) _mem: [QueueMem; 2],
    /// CQEs written so far (engine only).
    pub(crate) prod: AtomicU64,
    pub(crate) overrun: AtomicBool,
    /// Called once, on the engine thread, when the CQ first overruns (hardware's CQ error
    /// event; the verbs library's `IBV_EVENT_CQ_ERR`). Must not block.
    pub(crate) on_overrun: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl CqInner {
    /// Writes a completion through the model; `false` if the CQ overran (the CQE is dropped
    /// and the CQ flagged, as hardware raises a CQ error). Engine only: one writer per CQ.
    pub(crate) fn write_cqe(&self, c: &gda_hal::model::Cpl) -> bool {
        let prod = self.prod.load(Ordering::Relaxed);
        // CQEs the consumer has not released yet, from its (untrusted) consumer index: an index
        // "ahead" of the producer is as wrong as a full ring, and both are an overrun.
        if self.mode != CqMode::Collapsed
            && self.model.cq_outstanding(&self.view, prod) >= self.entries
        {
            if !self.overrun.swap(true, Ordering::AcqRel)
                && let Some(raise) = self.on_overrun.get()
            {
                raise();
            }
            return false;
        }
        self.model.write_cqe(&self.view, c, prod);
        self.prod.store(prod + 1, Ordering::Release);
        true
    }
}

pub(crate) struct QpInner {
    pub(crate) nic: Arc<NicInner>,
    pub(crate) qpn: u32,
    pub(crate) pd: u32,
    pub(crate) init: QpInit,
    /// The model's view of the QP's memory.
    pub(crate) view: QpView,
    /// Send buffer, receive ring, doorbell-record page and doorbell page (the UAR stand-in),
    /// owned here for `view`; what each holds is the model's business.
    pub(crate) _mem: [QueueMem; 4],
    pub(crate) send_cq: Arc<CqInner>,
    pub(crate) recv_cq: Arc<CqInner>,
    pub(crate) state: AtomicU8,
    pub(crate) remote: Mutex<Option<Endpoint>>,
    /// Receive WQEs consumed (engine only).
    pub(crate) rq_consumed: AtomicU64,
    /// RNR retries before `RNR_RETRY_EXC_ERR` (7: forever); set at creation and by RTS.
    pub(crate) rnr_retry: AtomicU8,
    /// The first PSN of requests to another process (`sq_psn`): the start PSN, or what RTS
    /// set.
    pub(crate) sq_psn: AtomicU32,
    /// The PSN this QP expects of the next request from another process (24 bits; set at RTR
    /// from the peer's `sq_psn`, advanced by the engine), or [`PSN_UNKNOWN`]: the first
    /// request's PSN is taken.
    pub(crate) rq_psn: AtomicU64,
    pub(crate) exec: Mutex<QpExec>,
    /// Direct placement granted to peers through this QP ((`wire::direct`)), closed
    /// when it moves to error or is destroyed.
    pub(crate) grants: crate::shared::Grants,
    /// Whether this QP's last operation towards another process was placed directly (not
    /// sent on the wire): its large posts may be left to the engine thread.
    pub(crate) placing: std::sync::atomic::AtomicBool,
}

/// [`QpInner::rq_psn`] before anyone said which PSN the peer starts at.
pub(crate) const PSN_UNKNOWN: u64 = u64::MAX;

impl QpInner {
    pub(crate) fn model(&self) -> &dyn DeviceModel {
        &*self.nic.model
    }
    pub(crate) fn state(&self) -> QpState {
        QpState::from_u8(self.state.load(Ordering::Acquire))
    }
    /// Moves to Error. A QP in error takes no more requests, direct ones included: its grants
    /// close (for good: one offered meanwhile is never opened), and the placements through
    /// them still in progress end before this returns — at most [`PLACEMENT_WAIT`] for all of
    /// them, and not at all on an engine thread; the ones not waited for are abandoned, so
    /// their requesters report an error, not success.
    ///
    /// [`PLACEMENT_WAIT`]: crate::shared::PLACEMENT_WAIT
    pub(crate) fn set_error(&self) {
        self.state.store(QpState::Error as u8, Ordering::Release);
        self.grants.close_all(crate::shared::withdrawal_deadline());
    }
}

/// Counters the engine keeps.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) wqes: AtomicU64,
    pub(crate) sleeps: AtomicU64,
    pub(crate) psn_errors: AtomicU64,
    pub(crate) deferred_doorbells: AtomicU64,
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
    /// Doorbells whose posters left their work to the engine (`Fabric::defer_doorbell`; a
    /// statistic: concurrent posters may miss a count).
    pub deferred_doorbells: u64,
    /// Process fabrics: connections made to other processes' fabrics (at RTR, or by a request
    /// when none was live), reconnections included.
    pub connections: u64,
    /// Process fabrics: WRITEs and READs placed directly into regions peers granted
    /// (`wire::direct`), not sent on the wire.
    pub placed: u64,
}

impl Stats {
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            wqes: self.wqes.load(Ordering::Relaxed),
            sleeps: self.sleeps.load(Ordering::Relaxed),
            psn_errors: self.psn_errors.load(Ordering::Relaxed),
            deferred_doorbells: self.deferred_doorbells.load(Ordering::Relaxed),
            connections: 0,
            placed: 0,
        }
    }
}

/// When a deferred item lands: after this QP has executed `wqes` WQEs in all, or at `time`,
/// whichever comes first. Counting WQEs makes chaos decisions replay the same way for a seed;
/// the time bound keeps an idle QP from holding data back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Due {
    pub(crate) wqes: u64,
    pub(crate) time: Instant,
}

/// Longest a deferred item waits for later WQEs before landing anyway.
pub(crate) const DEFER_TIME_BOUND: Duration = Duration::from_micros(200);

/// Something chaos mode delays, applied in order.
pub(crate) enum Deferred {
    /// READ/atomic result data landing in local memory.
    Data {
        due: Due,
        dst: u64,
        bytes: Vec<u8>,
        /// The regions `dst` was checked against, pinned while the data lands.
        mrs: Vec<Arc<MrInner>>,
    },
    /// A completion.
    Cqe { due: Due, cq: Arc<CqInner>, c: Cpl },
}

impl Deferred {
    pub(crate) fn due(&self) -> Due {
        match self {
            Self::Data { due, .. } | Self::Cqe { due, .. } => *due,
        }
    }
}

/// Per-QP engine state.
#[derive(Default)]
pub(crate) struct QpExec {
    pub(crate) sq_pos: u64,
    pub(crate) sq_target: u64,
    pub(crate) rnr_attempts: u32,
    pub(crate) rnr_next: Option<Instant>,
    pub(crate) hold_until: Option<Instant>,
    /// WQEs executed or flushed on this QP (the clock deferred items are due by).
    pub(crate) executed: u64,
    pub(crate) pending: VecDeque<Deferred>,
    pub(crate) pending_data: usize,
    /// The responder (same process). Weak: the two QPs of a connected pair each sit in the
    /// other's `exec`, and strong references made every pair that both sent leak with its CQs,
    /// rings and regions (found by `gda chaos`, whose RSS grew 0.4 MB per seed).
    pub(crate) remote: Option<Weak<QpInner>>,
    /// The fabric's QP epoch `remote` and `wire_ep` were resolved at.
    pub(crate) remote_epoch: u64,
    /// The connected QP when it belongs to another process fabric (as of `remote_epoch`).
    pub(crate) wire_ep: Option<Endpoint>,
    /// The WQE being executed, reused between WQEs (boxed: it moves out of this struct and
    /// back for every WQE, a pointer rather than its 150-odd bytes; `None` only while out).
    pub(crate) op: Option<Box<WqeOp>>,
    pub(crate) scratch: Vec<u8>,
    pub(crate) recv_sges: Vec<Sge>,
    pub(crate) lcache: KeyCache,
    pub(crate) rcache: KeyCache,
    /// Messages and PSNs consumed so far (what a model that checks per-WQE records, such as
    /// bnxt's PSN table, compares them with).
    pub(crate) seq: Seq,
    /// WQEs completed since the last CQE on the send CQ (models that coalesce completions
    /// retire them before an error).
    pub(crate) unreported: u32,
    /// This QP's own chaos stream: every per-WQE decision (hold, delayed data, delayed CQE)
    /// comes from it, so a seed gives the same decisions for the same WQE sequence whatever
    /// the timing of other QPs or of doorbells.
    pub(crate) chaos: Option<Chaos>,
    /// Requests in flight to a responder in another process, oldest first.
    pub(crate) wire_out: VecDeque<WireWait>,
    /// Send-queue units fetched past `sq_pos` and in flight (`wire_out`'s): the next WQE to
    /// fetch is at `sq_pos + ahead`.
    pub(crate) ahead: u64,
    /// Sequence numbers of this QP's requests to other processes.
    pub(crate) wire_seq: u64,
    /// When the oldest WQE's first unanswered transmission to another process was sent.
    pub(crate) wire_retry_since: Option<Instant>,
    /// The PSN of this QP's next request to another process (from `QpInner::sq_psn` at the
    /// first).
    pub(crate) wire_psn: Option<u32>,
    /// The connection this QP's requests go out on, while it lives (one lookup per
    /// connection, not one per request).
    pub(crate) wire_conn: Option<Arc<crate::wire::Conn>>,
    /// This QP's outstanding requests as the transport tracks them (`Wire::slots`).
    pub(crate) wire_slots: Option<crate::wire::QpSlots>,
    /// Responses taken from the slot table for the oldest requests in flight, in order.
    pub(crate) wire_ready: VecDeque<crate::wire::Response>,
    /// Request frames this step has batched for their connection (`engine::wire::flush_batch`).
    pub(crate) wire_tx: WireBatch,
    /// Boxes of completed requests' WQEs, for the next requests (`WireWait::op`: each moves
    /// there as a pointer, which is why the boxes are kept).
    #[allow(clippy::vec_box)]
    pub(crate) spare_ops: Vec<Box<WqeOp>>,
}

/// Request frames of one QP, batched for one connection within a step of its engine.
#[derive(Default)]
pub(crate) struct WireBatch {
    pub(crate) conn: Option<Arc<crate::wire::Conn>>,
    /// The frames, whole, in order.
    pub(crate) bytes: Vec<u8>,
    /// Their requests' sequence numbers and response payload bounds.
    pub(crate) slots: Vec<(u64, u64, Option<crate::wire::Landing>)>,
    /// The small WRITE, or WRITE run, at the end of `bytes`, which the QP's next WRITE may join.
    pub(crate) run: Option<OpenRun>,
}

/// The last frame of a batch while more WRITEs may join it ([`WireBatch::run`]).
pub(crate) struct OpenRun {
    /// Where its frame starts in the batch.
    pub(crate) at: usize,
    /// Its first WRITE (its sequence number and PSN are the run's).
    pub(crate) head: crate::wire::Request,
    /// The sequence number and PSN of a WRITE that joins it.
    pub(crate) next: (u64, u32),
    /// Still a WRITE frame of its own (no other has joined it).
    pub(crate) single: bool,
}

impl WireBatch {
    /// Forgets the batch (its requests are to be sent again).
    pub(crate) fn clear(&mut self) {
        self.conn = None;
        self.bytes.clear();
        self.slots.clear();
        self.run = None;
    }
}

/// A request sent to another process, waiting for its response.
pub(crate) struct WireWait {
    /// Its sequence number.
    pub(crate) seq: u64,
    /// The send-queue position of the WQE it executes.
    pub(crate) pos: u64,
    /// When it was queued ([`crate::wire::now_ns`]).
    pub(crate) since_ns: u64,
    /// The id of the connection it went out on ([`crate::wire::Conn::id`]): the QP's
    /// `wire_conn` while that is the one, else dead (a QP changes connection only once the
    /// previous one died). An id, not a reference: no atomic count per request.
    pub(crate) conn: u64,
    /// The WQE's size in send-queue units, whether it asked for a completion, and its
    /// packets (what completing any request needs, kept here: no pointer to follow).
    pub(crate) units: u32,
    pub(crate) signaled: bool,
    pub(crate) packets: u32,
    /// A READ's or an atomic's WQE (its local scatter entries, the atomic's width: where the
    /// response's data lands); none for a WRITE or SEND, whose response carries none.
    pub(crate) op: Option<Box<WqeOp>>,
    /// Its completion, but for the status and what the response adds.
    pub(crate) cpl: Cpl,
    /// The QP's sequence before it (restored when it is sent again).
    pub(crate) seq_before: Seq,
    /// Its PSN.
    pub(crate) psn: u32,
}

pub(crate) struct Chaos {
    pub(crate) rng: SmallRng,
}

impl Chaos {
    pub(crate) fn delay(&mut self, p: f64, max_us: u64) -> Option<Duration> {
        (self.rng.gen_bool(p)).then(|| Duration::from_micros(self.rng.gen_range(1..=max_us)))
    }

    /// With probability `p`, how many more WQEs an item waits for (1..=3).
    pub(crate) fn defer(&mut self, p: f64) -> Option<u64> {
        self.rng.gen_bool(p).then(|| self.rng.gen_range(1..=3))
    }
}

impl QpExec {
    /// Whether deferred READ or atomic data is still waiting to land.
    pub(crate) fn has_pending_data(&self) -> bool {
        self.pending_data > 0
    }

    pub(crate) fn due_after(&self, wqes: u64) -> Due {
        Due {
            wqes: self.executed + wqes,
            time: Instant::now() + DEFER_TIME_BOUND,
        }
    }
}
