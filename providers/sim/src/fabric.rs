//! Host control path of the software NIC: fabrics, NICs, protection domains, memory regions,
//! completion queues and RC queue pairs with the verbs state machine.
//!
//! ```text
//! Fabric ─┬─ Nic (model: native | mlx5) ─┬─ Pd ─┬─ Mr (lkey, rkey, access)
//!         │                              │      └─ Qp (SQ, RQ, doorbell page) ──► Cq
//!         └─ engine thread (one per fabric; parks when idle)
//! ```

use std::collections::HashMap;
use std::sync::Arc;

pub use crate::state::ScanHook;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Mutex, RwLock};

use rand::RngCore;

use crate::state::{FabricInner, QpInner, Stats};
use crate::types::{Endpoint, SimError};

/// Fabric configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct FabricConfig {
    /// Chaos seed (`None`: chaos off). `GDA_SIM_CHAOS=<seed>` sets it in [`Fabric::from_env`].
    pub chaos: Option<u64>,
}

impl FabricConfig {
    /// The configuration a `GDA_SIM_CHAOS` value asks for (`None` or empty: chaos off).
    pub fn from_chaos_var(value: Option<&str>) -> Result<Self, SimError> {
        let chaos = match value.map(str::trim) {
            None | Some("") => None,
            Some(s) => Some(s.parse::<u64>().map_err(|_| {
                SimError::InvalidArgument(format!("GDA_SIM_CHAOS={s:?} is not a u64 seed"))
            })?),
        };
        Ok(Self { chaos })
    }
}

/// A set of software NICs that can reach each other (in one process), with one engine thread.
#[derive(Clone)]
pub struct Fabric {
    pub(crate) inner: Arc<FabricInner>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("id", &self.inner.id)
            .field("chaos", &self.inner.chaos)
            .finish()
    }
}

impl Fabric {
    /// A fabric with the given configuration; the engine starts with the first QP.
    #[must_use]
    pub fn new(config: FabricConfig) -> Self {
        let id = rand::rngs::OsRng.next_u64();
        Self::with_parts(config, id, None)
    }

    /// This process's fabric, reachable from the other processes of the same user on this host
    /// with no job name or rank (what the verbs-compatible library uses). Its id is a random
    /// token (never a PID: in PID namespaces every container's first process is PID 1), checked
    /// unique on the host by binding its socket. A QP connects to a QP of any process fabric
    /// by its [`Endpoint`]; the responder executes every RC operation on its own memory and
    /// queues (see the `wire` module).
    pub fn process(config: FabricConfig) -> Result<Self, SimError> {
        let mut last = None;
        for _ in 0..16 {
            let id = crate::wire::process_fabric_id(rand::rngs::OsRng.next_u32());
            match crate::wire::Wire::listen(id) {
                Ok((wire, listener)) => {
                    let f = Self::with_parts(config, id, Some(wire.clone()));
                    let inner = Arc::downgrade(&f.inner);
                    wire.start(
                        listener,
                        Box::new(move || {
                            if let Some(f) = inner.upgrade() {
                                f.kick();
                            }
                        }),
                    );
                    return Ok(f);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
                Err(e) => {
                    return Err(SimError::InvalidArgument(format!(
                        "process fabric: cannot listen for peers: {e}"
                    )));
                }
            }
        }
        Err(SimError::InvalidArgument(format!(
            "process fabric: no free fabric id after 16 tries ({last:?})"
        )))
    }

    fn with_parts(config: FabricConfig, id: u64, wire: Option<Arc<crate::wire::Wire>>) -> Self {
        Self {
            inner: Arc::new(FabricInner {
                id,
                nics: RwLock::new(Vec::new()),
                qps: RwLock::new(HashMap::default()),
                epoch: AtomicU64::new(0),
                stop: AtomicBool::new(false),
                chaos: config.chaos,
                engine: Mutex::new(None),
                engine_thread: Mutex::new(None),
                engine_cpus: Mutex::new(None),
                engine_tid: std::sync::atomic::AtomicI32::new(0),
                qp_list: Mutex::new((u64::MAX, Arc::new(Vec::new()))),
                turn: Mutex::new(crate::wire::ConnList::default()),
                responder: Mutex::new(crate::state::Responder::default()),
                napping: std::sync::atomic::AtomicBool::new(false),
                rescan: std::sync::atomic::AtomicBool::new(false),
                deferring: std::sync::atomic::AtomicBool::new(false),
                hooked: std::sync::atomic::AtomicBool::new(false),
                handed: std::sync::atomic::AtomicBool::new(false),
                scan_hooks: std::sync::RwLock::new(Vec::new()),
                stats: Stats::default(),
                wire,
            }),
        }
    }

    /// A fabric configured from the environment: `GDA_SIM_CHAOS=<seed>` enables chaos mode.
    pub fn from_env() -> Result<Self, SimError> {
        let var = std::env::var("GDA_SIM_CHAOS").ok();
        Ok(Self::new(FabricConfig::from_chaos_var(var.as_deref())?))
    }

    /// On a process fabric ([`Fabric::process`]): how long a request to another process may go
    /// with no byte moving on its connection, either way, before it completes with
    /// `RETRY_EXC_ERR` (its QP to Error), and how long a peer may read nothing before its
    /// connection is closed. Default 1 s, about what a NIC's transport retries last
    /// (`retry_cnt` × `timeout`). No-op on other fabrics.
    pub fn set_wire_timeout(&self, timeout: std::time::Duration) {
        if let Some(w) = &self.inner.wire {
            w.set_timeout(timeout);
        }
    }

    /// This fabric's id (what its QPs' addresses and GIDs carry).
    #[must_use]
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Whether this is a process fabric ([`Fabric::process`]): its peers' requests execute
    /// in this process, and [`Fabric::progress`] runs the engine's pass in the caller.
    #[must_use]
    pub fn is_process(&self) -> bool {
        self.inner.wire.is_some()
    }

    /// The chaos seed, if chaos mode is on.
    #[must_use]
    pub fn chaos_seed(&self) -> Option<u64> {
        self.inner.chaos
    }

    /// Engine statistics (WQEs executed, idle sleeps), for tests and `gda perf`.
    #[must_use]
    pub fn stats(&self) -> crate::StatsSnapshot {
        crate::StatsSnapshot {
            connections: self.inner.wire.as_ref().map_or(0, |w| w.connections_made()),
            placed: self.inner.wire.as_ref().map_or(0, |w| w.placed()),
            ..self.inner.stats.snapshot()
        }
    }

    /// CPU time the engine thread has used so far (Linux: `/proc/self/task/<tid>/schedstat`),
    /// or `None` if the engine has not started or the platform does not say.
    #[must_use]
    pub fn engine_cpu_time(&self) -> Option<std::time::Duration> {
        let tasks = std::fs::read_dir("/proc/self/task").ok()?;
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim() == self.engine_thread_name() {
                let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
                let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
                return Some(std::time::Duration::from_nanos(ns));
            }
        }
        None
    }

    /// Adds work the engine does before each scan of the queues, on its own thread: what a
    /// device does between the host's stores and its queue engines. `hook` returns whether
    /// it did anything (the engine then stays awake). gda-verbs routes the doorbells written to
    /// a bnxt doorbell page to the queues they name this way, with no thread of its own.
    pub fn add_scan_hook(&self, hook: ScanHook) {
        self.inner
            .scan_hooks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(hook);
        self.ensure_engine();
        self.inner.kick();
    }

    /// Runs one pass of the engine in the calling thread — the requests this process's QPs have
    /// posted, the requests and responses other processes sent, the completions due — and
    /// returns whether anything happened. Host code that posts or polls calls it so its own
    /// work needs no other thread to get a core (the verbs library does, on every post and
    /// every empty poll); the engine thread still does everything on its own. Does nothing
    /// (`false`) on a fabric of one process ([`Fabric::new`]: its engine thread spares the
    /// lock this needs on its hot path) or a chaos fabric (its engine alone decides the order).
    pub fn progress(&self) -> bool {
        crate::engine::progress(&self.inner)
    }

    /// What host code calls after ringing a doorbell: one pass of the engine here when this
    /// fabric allows it ([`Fabric::progress`]), else — or when another thread's pass is under
    /// way — a [`Fabric::kick`] of the engine thread.
    pub fn after_doorbell(&self) {
        crate::engine::after_doorbell(&self.inner);
    }

    /// What host code calls after ringing a receive doorbell: on a process fabric, a pass here
    /// only when a peer's SEND waits for a receive (held for the RNR timer), else nothing — the
    /// receive is read when a SEND comes; elsewhere as [`Fabric::after_doorbell`].
    pub fn after_recv_doorbell(&self) {
        match &self.inner.wire {
            Some(w) if self.inner.chaos.is_none() && !w.holds_sends() => {}
            _ => crate::engine::after_doorbell(&self.inner),
        }
    }

    /// What host code calls after ringing a doorbell when it will wait for the completions
    /// with [`Fabric::progress`] (gda-shmem's RDMA routes on a process fabric): an awake engine
    /// thread takes the work; a napping one is left asleep and the pass runs in the caller
    /// ([`Fabric::after_doorbell`]) instead of a wake-up. Nothing on other fabrics.
    pub fn after_post(&self) {
        crate::engine::after_post(&self.inner);
    }

    /// What host code may call after ringing a doorbell instead of running its work now (a
    /// poster that batches small requests), with how many doorbells it has left in a row so
    /// far: `true` when the engine thread will look at every queue rung so far on its own
    /// within a bounded time — it is awake, or in the short nap it takes while program threads
    /// poll or post, after which it runs a pass (at most [`Fabric::DEFERRED_SERVICE`] and one
    /// pass); `false` when it naps for long (the fabric was idle), when `in_row` has reached
    /// [`Fabric::DEFERRED_IN_ROW_MAX`], or when this fabric is not a process fabric: the caller
    /// runs the work now (its post hook, [`Fabric::post_hook`]) — everything rung so far. A
    /// program thread's next pass or post hook serves the work sooner.
    pub fn defer_doorbell(&self, in_row: u32) -> bool {
        in_row < Self::DEFERRED_IN_ROW_MAX && crate::engine::defer_doorbell(&self.inner)
    }

    /// The most doorbells a poster leaves to the engine in a row ([`Fabric::defer_doorbell`]):
    /// the next one runs them all in the poster's thread, in one step (one look at the
    /// connection, one batch of frames) — a run of a queue's work between processes has a
    /// fixed cost (the engine's turn, the queue's lock, the connection's lock). Measured with
    /// 8-byte `ib_send_bw -D 3` on the 2-core VM, interleaved: 15 gave 1.55–3.12 M msg/s, 31 and
    /// 63 no better (1.74–2.77 and 1.86–2.47); gda-shmem's `put_nbi` uses the same bound.
    pub const DEFERRED_IN_ROW_MAX: u32 = 15;

    /// The longest a doorbell that [`Fabric::defer_doorbell`] accepted waits for the engine
    /// thread when no program thread posts or polls meanwhile.
    pub const DEFERRED_SERVICE: std::time::Duration = crate::engine::DEFERRED_NAP_MAX;

    /// [`Fabric::after_post`] for the QP `qpn` of NIC `nic`, as a hook to call after each
    /// doorbell of that QP: when the engine thread naps, the pass in the caller serves only
    /// that QP's send queue. `None` when there is no such QP.
    ///
    /// The hook holds the QP and the fabric (a posting thread then touches no reference count
    /// that the engine thread also moves): drop it before destroying the QP, whose destroy
    /// otherwise waits for it, boundedly, and then leaks the QP's rings.
    #[must_use]
    pub fn post_hook(&self, nic: u32, qpn: u32) -> Option<impl Fn() + Send + Sync + 'static> {
        let qp = self
            .inner
            .qps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(nic, qpn))
            .cloned()?;
        let fabric = self.inner.clone();
        Some(move || crate::engine::after_post_on(&fabric, &qp))
    }

    /// Wakes the engine now (it also polls on its own; this only cuts the wake-up latency after
    /// an idle period).
    pub fn kick(&self) {
        self.inner.kick();
    }

    /// The engine thread's name (unique per fabric, within the 15 characters Linux keeps).
    fn engine_thread_name(&self) -> String {
        format!("gda-sim-{:04x}", self.inner.id & 0xffff)
    }

    /// Lets the engine thread run on `cpus` (and only there) instead of where the thread that
    /// creates the first QP runs. The engine stands in for a NIC, which never competes with the
    /// process for its core: a launcher that pins a process to one core (`gdarun`) gives the
    /// engine the launcher's CPUs, or every completion waits for the process to be preempted.
    ///
    /// Must be called before the first QP (the engine starts with it); later it is an
    /// error, as is an empty set or a CPU number the kernel cannot name. A set the kernel
    /// refuses when the engine starts (no CPU of it is allowed) leaves the engine where it was
    /// born; [`Fabric::engine_cpus`] reports where it really runs.
    pub fn set_engine_cpus(&self, cpus: &[usize]) -> Result<(), SimError> {
        if cpus.is_empty() {
            return Err(SimError::InvalidArgument("engine CPU set is empty".into()));
        }
        if let Some(&c) = cpus.iter().find(|&&c| c >= gda_os::cpu::MAX) {
            return Err(SimError::InvalidArgument(format!(
                "engine CPU {c} is beyond the {} CPUs the kernel interface names",
                gda_os::cpu::MAX
            )));
        }
        let started = self
            .inner
            .engine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if started {
            return Err(SimError::InvalidArgument(
                "the engine already runs: set its CPUs before creating the first QP".into(),
            ));
        }
        *self
            .inner
            .engine_cpus
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(cpus.to_vec());
        Ok(())
    }

    /// The CPUs the engine thread may run on, read back from the kernel (`None` before the
    /// engine has started, i.e. before the first QP, or if the kernel does not say).
    #[must_use]
    pub fn engine_cpus(&self) -> Option<Vec<usize>> {
        let spawned = self
            .inner
            .engine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        // A spawned engine may not have run yet (a loaded machine): it says where it runs as
        // its first act, after placing itself. Waited for, boundedly.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let tid = loop {
            // ORDERING: Acquire pairs with the engine's Release store of its tid.
            let tid = self
                .inner
                .engine_tid
                .load(std::sync::atomic::Ordering::Acquire);
            if tid != 0 || !spawned || std::time::Instant::now() > deadline {
                break tid;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        gda_os::cpu::allowed(Some(gda_os::cpu::Pid::from_raw(tid)?)).ok()
    }

    pub(crate) fn ensure_engine(&self) {
        let mut g = self.inner.engine.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            let weak = Arc::downgrade(&self.inner);
            let cpus = self
                .inner
                .engine_cpus
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let h = std::thread::Builder::new()
                .name(self.engine_thread_name())
                .spawn(move || {
                    if let Some(cpus) = cpus {
                        // Best effort: a set with no allowed CPU leaves the engine where it
                        // was born (reported by `Fabric::engine_cpus`).
                        let _ = gda_os::cpu::restrict(&gda_os::cpu::set_of(&cpus));
                    }
                    if let Some(f) = weak.upgrade() {
                        // ORDERING: Release pairs with the Acquire load in `engine_cpus`.
                        f.engine_tid.store(
                            rustix::thread::gettid().as_raw_nonzero().get(),
                            std::sync::atomic::Ordering::Release,
                        );
                        // A process fabric's engine naps at once and is woken by its peers:
                        // when every core is busy it must run soon after the wake-up, not
                        // after the running thread's slice. Best effort. (Other engines spin
                        // between scans, where a short slice only gets them preempted more:
                        // gda-shmem's RDMA barrier between processes went from 25 to 100 µs.)
                        if f.wire.is_some() {
                            let _ = gda_os::cpu::request_short_slice(
                                std::time::Duration::from_micros(100),
                            );
                            // Its naps while a program thread polls last microseconds
                            // (`engine::PROGRAM_POLLS`); the default 50 µs timer slack would
                            // stretch each one many times over.
                            let _ = rustix::thread::set_current_timer_slack(
                                std::num::NonZeroU64::new(1_000),
                            );
                        }
                    }
                    crate::engine::run(weak)
                })
                .expect("spawn the software NIC engine thread");
            *self
                .inner
                .engine_thread
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(h.thread().clone());
            *g = Some(h);
        }
    }

    pub(crate) fn lookup(&self, ep: &Endpoint) -> Option<Arc<QpInner>> {
        if ep.fabric != self.inner.id {
            return None;
        }
        self.inner
            .qps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(ep.nic, ep.qpn))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Access;

    #[test]
    fn chaos_variable_parsing() {
        assert_eq!(FabricConfig::from_chaos_var(None).unwrap().chaos, None);
        assert_eq!(FabricConfig::from_chaos_var(Some("")).unwrap().chaos, None);
        assert_eq!(
            FabricConfig::from_chaos_var(Some(" 42 ")).unwrap().chaos,
            Some(42)
        );
        let e = FabricConfig::from_chaos_var(Some("banana"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("GDA_SIM_CHAOS") && e.contains("banana"), "{e}");
    }

    /// A hello's secret is kept only until the peer answers (it verifies before it welcomes):
    /// a process connecting to many fabrics over its life keeps none of theirs.
    #[test]
    fn hello_secrets_are_dropped_once_answered() {
        let a = Fabric::process(FabricConfig::default()).unwrap();
        let b = Fabric::process(FabricConfig::default()).unwrap();
        let qa = {
            let pd = a.add_nic(gda_native::model::NativeModel).alloc_pd();
            let cq = pd.nic().create_cq(16, crate::CqMode::Normal).unwrap();
            (
                pd.create_qp(crate::QpInit::default(), &cq, &cq).unwrap(),
                cq,
            )
        };
        let qb = {
            let pd = b.add_nic(gda_native::model::NativeModel).alloc_pd();
            let cq = pd.nic().create_cq(16, crate::CqMode::Normal).unwrap();
            (
                pd.create_qp(crate::QpInit::default(), &cq, &cq).unwrap(),
                cq,
            )
        };
        // A connects to B at RTR: one secret kept until B's welcome comes.
        qa.0.bring_up_at(&qb.0.endpoint(), qb.0.start_psn())
            .unwrap();
        let w = a.inner.wire.as_ref().unwrap();
        let t = std::time::Instant::now();
        while w.secrets_kept() > 0 && t.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(a.stats().connections, 1);
        assert_eq!(w.secrets_kept(), 0, "the secret outlived the welcome");
        assert_eq!(w.sends_held(), 0);
    }

    #[test]
    fn endpoint_round_trip_and_keys_are_unique() {
        let ep = Endpoint {
            fabric: 0x0123_4567_89ab_cdef,
            nic: 3,
            qpn: 0x00ab_cdef,
        };
        assert_eq!(Endpoint::from_bytes(&ep.to_bytes()).unwrap(), ep);
        let f = Fabric::new(FabricConfig::default());
        let pd = f.add_nic(gda_native::model::NativeModel).alloc_pd();
        let mrs: Vec<_> = (0..500).map(|_| pd.alloc_mr(8, Access::ALL)).collect();
        let mut keys: Vec<u32> = mrs.iter().flat_map(|m| [m.lkey(), m.rkey()]).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 1000, "keys must be unique");
        // Not sequential: a forged key from a neighbour's is unlikely to hit.
        let seq = mrs
            .windows(2)
            .filter(|w| w[1].lkey() == w[0].lkey().wrapping_add(1))
            .count();
        assert!(seq < 5, "{seq} sequential keys");
    }
}
