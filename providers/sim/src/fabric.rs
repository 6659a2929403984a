//! Host control path of the software NIC: fabrics, NICs, protection domains, memory regions,
//! completion queues and RC queue pairs with the verbs state machine.
//!
//! ```text
//! Fabric ─┬─ Nic (model: native | mlx5) ─┬─ Pd ─┬─ Mr (lkey, rkey, access)
//!         │                              │      └─ Qp (SQ, RQ, doorbell page) ──► Cq
//!         └─ engine thread (one per fabric; parks when idle)
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use gda_hal::CqHandle;
use gda_hal::model::{CqView, DeviceModel, ModelFor, Modeled, QpGeometry, QpView, Region};
use rand::RngCore;

use crate::buf::DmaBuf;
use crate::engine::{self, QpExec};
use crate::mem::{Access, Fault, MrInner, MrTable};

/// A device model, shared by a NIC and its CQs and QPs (see [`gda_hal::model`]).
pub type Model = Arc<dyn DeviceModel>;

/// QP states (`enum ibv_qp_state` order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum QpState {
    /// Fresh or reset.
    Reset = 0,
    /// Initialised.
    Init = 1,
    /// Ready to receive (connected).
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Error: every WQE completes with `WR_FLUSH_ERR`.
    Error = 6,
}

impl QpState {
    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Init,
            2 => Self::Rtr,
            3 => Self::Rts,
            6 => Self::Error,
            _ => Self::Reset,
        }
    }
}

/// Completion-queue modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqMode {
    /// A ring of CQEs with owner bits.
    Normal,
    /// Every CQE overwrites slot 0 (progress is reconstructed from its counter).
    Collapsed,
}

/// Errors of the software NIC's control path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A QP state transition the verbs state machine does not allow.
    #[error(
        "QP {qpn}: cannot move from {from:?} to {to:?} (allowed: Reset→Init→Rtr→Rts, any→Error, any→Reset)"
    )]
    InvalidTransition {
        /// QP number.
        qpn: u32,
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// An argument is out of range.
    #[error("{0}")]
    InvalidArgument(String),
    /// The endpoint names no QP on this fabric.
    #[error("endpoint {0:?} names no QP on this fabric")]
    UnknownEndpoint(Endpoint),
    /// The endpoint bytes are malformed.
    #[error("malformed endpoint: {0}")]
    BadEndpoint(&'static str),
}

impl gda_hal::Error for SimError {
    fn kind(&self) -> gda_hal::ErrorKind {
        match self {
            Self::InvalidTransition { .. } => gda_hal::ErrorKind::InvalidState,
            Self::InvalidArgument(_) | Self::BadEndpoint(_) => gda_hal::ErrorKind::InvalidArgument,
            Self::UnknownEndpoint(_) => gda_hal::ErrorKind::NoDevice,
        }
    }
}

/// What two QPs exchange to connect (like a LID/GID + QPN pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Fabric identity (endpoints from other fabrics are refused).
    pub fabric: u64,
    /// NIC index within the fabric.
    pub nic: u32,
    /// QP number.
    pub qpn: u32,
}

impl Endpoint {
    /// Serialised size.
    pub const BYTES: usize = 16;

    /// Serialises (little-endian).
    #[must_use]
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.fabric.to_le_bytes());
        b[8..12].copy_from_slice(&self.nic.to_le_bytes());
        b[12..].copy_from_slice(&self.qpn.to_le_bytes());
        b
    }

    /// Parses what [`Endpoint::to_bytes`] wrote.
    pub fn from_bytes(b: &[u8]) -> Result<Self, SimError> {
        let b: &[u8; 16] = b
            .try_into()
            .map_err(|_| SimError::BadEndpoint("expected 16 bytes"))?;
        let w =
            |r: std::ops::Range<usize>| b[r].iter().rev().fold(0u64, |a, &x| a << 8 | u64::from(x));
        Ok(Self {
            fabric: w(0..8),
            nic: w(8..12) as u32,
            qpn: w(12..16) as u32,
        })
    }
}

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

pub(crate) struct FabricInner {
    pub(crate) id: u64,
    pub(crate) nics: RwLock<Vec<Arc<NicInner>>>,
    pub(crate) qps: RwLock<HashMap<(u32, u32), Arc<QpInner>>>,
    pub(crate) epoch: AtomicU64,
    pub(crate) stop: AtomicBool,
    pub(crate) chaos: Option<u64>,
    pub(crate) engine: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(crate) engine_thread: Mutex<Option<std::thread::Thread>>,
    /// The engine is parked (or about to park): a doorbell rung by host code must unpark it
    /// ([`Fabric::kick`]). Set by the engine before its last scan, cleared when it wakes.
    pub(crate) napping: std::sync::atomic::AtomicBool,
    pub(crate) stats: engine::Stats,
    /// The cross-process side, for fabrics made by [`Fabric::shared`].
    pub(crate) link: Option<Arc<crate::xproc::HostLink>>,
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
        Self::with_link(config, id, None)
    }

    /// This process's fabric of a cross-process job on one host: NICs of other processes that
    /// joined the same `job` (with other ranks) are reachable by RDMA WRITE, READ and atomics on
    /// regions registered with [`Pd::register_shared`]. Creates the shared registry
    /// `/gda-<job>-sim<rank>` (mode 0600, removed on drop or by [`Fabric::unlink_registry`]);
    /// see the `host` module for the protocol.
    pub fn shared(config: FabricConfig, job: &str, rank: u32) -> Result<Self, SimError> {
        let link = crate::xproc::HostLink::create(job, rank)
            .map_err(|e| SimError::InvalidArgument(format!("cross-process fabric: {e}")))?;
        let id = link.fabric_id();
        Ok(Self::with_link(config, id, Some(Arc::new(link))))
    }

    /// Removes the shared registry's name once every peer has connected (peers keep their
    /// mappings), so a killed process leaves nothing in `/dev/shm`. No-op for in-process fabrics.
    pub fn unlink_registry(&self) -> Result<(), SimError> {
        match &self.inner.link {
            Some(l) => l
                .unlink()
                .map_err(|e| SimError::InvalidArgument(format!("cross-process fabric: {e}"))),
            None => Ok(()),
        }
    }

    fn with_link(config: FabricConfig, id: u64, link: Option<Arc<crate::xproc::HostLink>>) -> Self {
        Self {
            inner: Arc::new(FabricInner {
                id,
                nics: RwLock::new(Vec::new()),
                qps: RwLock::new(HashMap::new()),
                epoch: AtomicU64::new(0),
                stop: AtomicBool::new(false),
                chaos: config.chaos,
                engine: Mutex::new(None),
                engine_thread: Mutex::new(None),
                napping: std::sync::atomic::AtomicBool::new(false),
                stats: engine::Stats::default(),
                link,
            }),
        }
    }

    /// A fabric configured from the environment: `GDA_SIM_CHAOS=<seed>` enables chaos mode.
    pub fn from_env() -> Result<Self, SimError> {
        let chaos = match std::env::var("GDA_SIM_CHAOS") {
            Ok(s) if !s.is_empty() => Some(s.trim().parse::<u64>().map_err(|_| {
                SimError::InvalidArgument(format!("GDA_SIM_CHAOS={s:?} is not a u64 seed"))
            })?),
            _ => None,
        };
        Ok(Self::new(FabricConfig { chaos }))
    }

    /// The chaos seed, if chaos mode is on.
    #[must_use]
    pub fn chaos_seed(&self) -> Option<u64> {
        self.inner.chaos
    }

    /// Adds a NIC executing the queues of provider `P` in its default configuration.
    pub fn add_nic_for<P: Modeled>(&self) -> Nic {
        self.add_nic(P::model())
    }

    /// Adds a NIC executing `model`'s queues.
    pub fn add_nic(&self, model: impl DeviceModel) -> Nic {
        self.add_shared_model_nic(Arc::new(model))
    }

    /// Adds a NIC executing a model that other NICs may share.
    pub fn add_shared_model_nic(&self, model: Model) -> Nic {
        let mut nics = self.inner.nics.write().unwrap_or_else(|e| e.into_inner());
        let id = nics.len() as u32;
        let nic = Arc::new(NicInner {
            id,
            model,
            mrs: MrTable::default(),
            next_qpn: AtomicU32::new(0x100),
            next_pd: AtomicU32::new(1),
            next_cqn: AtomicU32::new(1),
        });
        nics.push(nic.clone());
        Nic {
            fabric: self.clone(),
            inner: nic,
        }
    }

    /// Engine statistics (WQEs executed, idle sleeps), for tests and `gda perf`.
    #[must_use]
    pub fn stats(&self) -> engine::StatsSnapshot {
        self.inner.stats.snapshot()
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

    /// Wakes the engine now (it also polls on its own; this only cuts the wake-up latency after
    /// an idle period).
    pub fn kick(&self) {
        // ORDERING: SeqCst pairs with the engine's SeqCst store of `napping` before its final
        // scan: either that scan sees the doorbell stored before this call, or this load sees
        // the engine napping and wakes it. A running engine costs only this load.
        if !self.inner.napping.load(Ordering::SeqCst) {
            return;
        }
        if let Some(t) = self
            .inner
            .engine_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// The engine thread's name (unique per fabric, within the 15 characters Linux keeps).
    fn engine_thread_name(&self) -> String {
        format!("gda-sim-{:04x}", self.inner.id & 0xffff)
    }

    fn ensure_engine(&self) {
        let mut g = self.inner.engine.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            let weak = Arc::downgrade(&self.inner);
            let h = std::thread::Builder::new()
                .name(self.engine_thread_name())
                .spawn(move || engine::run(weak))
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
    next_qpn: AtomicU32,
    next_pd: AtomicU32,
    next_cqn: AtomicU32,
}

impl NicInner {
    /// A key nobody can predict: 32 bits straight from the operating system's CSPRNG
    /// (`getrandom`), so knowing every other key of this or any NIC tells nothing about it.
    /// (A seeded fast generator would let one observed key give away all the others.)
    fn fresh_key(&self) -> u32 {
        loop {
            let k = rand::rngs::OsRng.next_u32();
            if k != 0 && !self.mrs.key_in_use(k) {
                return k;
            }
        }
    }
}

/// A software NIC.
#[derive(Clone)]
pub struct Nic {
    fabric: Fabric,
    pub(crate) inner: Arc<NicInner>,
}

impl std::fmt::Debug for Nic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nic")
            .field("id", &self.inner.id)
            .field("model", &self.inner.model.name())
            .finish()
    }
}

impl Nic {
    /// The device model this NIC executes.
    #[must_use]
    pub fn model(&self) -> &dyn DeviceModel {
        &*self.inner.model
    }

    /// The fabric.
    #[must_use]
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Pd {
        Pd {
            nic: self.clone(),
            id: self.inner.next_pd.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Creates a completion queue of `entries` CQEs (a power of two; a collapsed CQ has one slot).
    pub fn create_cq(&self, entries: u32, mode: CqMode) -> Result<Cq, SimError> {
        let entries = if mode == CqMode::Collapsed {
            1
        } else {
            entries
        };
        if !entries.is_power_of_two() || entries > 1 << 22 {
            return Err(SimError::InvalidArgument(format!(
                "CQ size {entries} must be a power of two up to 2^22"
            )));
        }
        let model = self.inner.model.clone();
        let stride = model.cqe_bytes();
        let buf = DmaBuf::new(entries as usize * stride as usize, 4096);
        let dbrec = DmaBuf::new(64, 64);
        let cqn = self.inner.next_cqn.fetch_add(1, Ordering::Relaxed);
        // SAFETY: both buffers are owned by the CQ and outlive every copy of the view (the CQ
        // holds them next to it); DmaBufs are at least 64-byte aligned.
        let view = unsafe {
            CqView {
                cqn,
                entries,
                collapsed: mode == CqMode::Collapsed,
                buf: Region::new(buf.addr(), buf.len()),
                dbrec: Region::new(dbrec.addr(), dbrec.len()),
            }
        };
        model.init_cq(&view);
        Ok(Cq {
            inner: Arc::new(CqInner {
                fabric: self.fabric.inner.id,
                cqn,
                model,
                view,
                mode,
                entries,
                _mem: [buf, dbrec],
                prod: AtomicU64::new(0),
                overrun: AtomicBool::new(false),
            }),
        })
    }
}

/// A protection domain.
#[derive(Clone, Debug)]
pub struct Pd {
    nic: Nic,
    id: u32,
}

/// Sizes of a new QP.
#[derive(Clone, Copy, Debug)]
pub struct QpInit {
    /// Send-queue units (64-byte units; a power of two).
    pub sq_units: u32,
    /// Receive-queue WQEs (a power of two).
    pub rq_wqes: u32,
    /// Largest inline payload.
    pub max_inline: u32,
    /// Most gather entries per WQE (send and receive).
    pub max_sge: u32,
    /// RNR retries before `RNR_RETRY_EXC_ERR`; 7 means retry forever (as in verbs).
    pub rnr_retry: u8,
    /// Path MTU in bytes (256..=4096, a power of two): what PSNs count on the bnxt model.
    pub path_mtu: u32,
}

impl QpInit {
    /// The sizes a device model checks and lays out.
    #[must_use]
    pub fn geometry(&self) -> QpGeometry {
        QpGeometry {
            sq_units: self.sq_units,
            rq_wqes: self.rq_wqes,
            max_sge: self.max_sge,
            max_inline: self.max_inline,
            path_mtu: self.path_mtu,
        }
    }
}

impl Default for QpInit {
    fn default() -> Self {
        Self {
            sq_units: 256,
            rq_wqes: 256,
            max_inline: 256,
            max_sge: 4,
            rnr_retry: 7,
            path_mtu: 1024,
        }
    }
}

impl Pd {
    /// The protection domain's number.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The NIC.
    #[must_use]
    pub fn nic(&self) -> &Nic {
        &self.nic
    }

    /// The check this NIC's responder makes before a remote access of `need` to
    /// `[addr, addr + len)` with `rkey` arrives on a QP of this PD: the key must name a live
    /// region of this PD that holds the whole range and grants the access. (The engine runs the
    /// same check for every RDMA WRITE, READ and atomic; a refusal there is a
    /// `REM_ACCESS_ERR` completion and nothing is touched.)
    pub fn remote_access(&self, rkey: u32, addr: u64, len: u64, need: Access) -> Result<(), Fault> {
        self.nic
            .inner
            .mrs
            .check_remote(self.id, rkey, addr, len, need)
            .map(|_| ())
    }

    /// Allocates `len` zeroed, page-aligned bytes and registers them.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Mr {
        let buf = DmaBuf::new(len, 4096);
        let (addr, l) = (buf.addr(), len as u64);
        self.insert(addr, l, access, Some(buf))
    }

    /// Registers caller memory.
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay valid (and not be freed) until the returned [`Mr`] and
    /// every operation using its keys are finished; the NIC reads and writes it at any time.
    pub unsafe fn register(&self, addr: u64, len: usize, access: Access) -> Mr {
        self.insert(addr, len as u64, access, None)
    }

    /// Registers caller memory that lies in the shared-memory segment `seg` (at `seg_offset`)
    /// and publishes it to the processes of this fabric's job, which can then reach it by RDMA.
    /// Fails on an in-process fabric or when the range is not inside the segment.
    ///
    /// # Safety
    /// As [`Pd::register`]; besides, `addr` must be `seg.as_ptr() + seg_offset`.
    pub unsafe fn register_shared(
        &self,
        addr: u64,
        len: usize,
        access: Access,
        seg: &gda_os::shm::Segment,
        seg_offset: usize,
    ) -> Result<Mr, SimError> {
        let link = self.nic.fabric.inner.link.clone().ok_or_else(|| {
            SimError::InvalidArgument(
                "register_shared needs a fabric made by Fabric::shared".into(),
            )
        })?;
        if seg_offset.checked_add(len).is_none_or(|e| e > seg.len())
            || addr != seg.as_ptr() as u64 + seg_offset as u64
        {
            return Err(SimError::InvalidArgument(format!(
                "region {addr:#x}+{len} is not at offset {seg_offset} of {}",
                seg.name()
            )));
        }
        let what = seg
            .name()
            .rsplit_once('-')
            .map_or(seg.name(), |(_, w)| w)
            .to_owned();
        let mut mr = self.insert(addr, len as u64, access, None);
        let slot = link
            .publish_mr(
                mr.rkey(),
                self.id,
                access,
                addr,
                len as u64,
                &what,
                seg_offset as u64,
                seg.len() as u64,
            )
            .map_err(SimError::InvalidArgument)?;
        mr.shared = Some(slot);
        Ok(mr)
    }

    fn insert(&self, addr: u64, len: u64, access: Access, owned: Option<DmaBuf>) -> Mr {
        let nic = &self.nic.inner;
        let mut owned = owned;
        loop {
            let mr = Arc::new(MrInner {
                pd: self.id,
                addr,
                len,
                access,
                lkey: nic.fresh_key(),
                rkey: nic.fresh_key(),
                _owned: owned.take(),
            });
            if nic.mrs.insert(mr.clone()) {
                return Mr {
                    nic: self.nic.clone(),
                    inner: mr,
                    shared: None,
                };
            }
            // A key raced with another registration: take the memory back and try again.
            owned = Arc::try_unwrap(mr).ok().and_then(|m| m._owned);
        }
    }

    /// Creates an RC QP in state Reset.
    pub fn create_qp(&self, init: QpInit, send_cq: &Cq, recv_cq: &Cq) -> Result<Qp, SimError> {
        for (what, v) in [("sq_units", init.sq_units), ("rq_wqes", init.rq_wqes)] {
            if !v.is_power_of_two() || v > 1 << 16 {
                return Err(SimError::InvalidArgument(format!(
                    "{what} = {v} must be a power of two up to 65536"
                )));
            }
        }
        if init.max_sge == 0 || init.max_sge > 30 {
            return Err(SimError::InvalidArgument(format!(
                "max_sge = {} must be 1..=30",
                init.max_sge
            )));
        }
        let model = self.nic.inner.model.clone();
        for cq in [send_cq, recv_cq] {
            if cq.inner.model.name() != model.name() {
                return Err(SimError::InvalidArgument(format!(
                    "CQ {} belongs to a {} NIC, the QP to a {} NIC",
                    cq.inner.cqn,
                    cq.inner.model.name(),
                    model.name()
                )));
            }
        }
        let fid = self.nic.fabric.inner.id;
        if send_cq.inner.fabric != fid || recv_cq.inner.fabric != fid {
            return Err(SimError::InvalidArgument(
                "CQs must belong to the QP's fabric".into(),
            ));
        }
        let geometry = init.geometry();
        let layout = model.layout(&geometry).map_err(SimError::InvalidArgument)?;
        let rq_stride = layout.rq_stride;
        let qpn = self.nic.inner.next_qpn.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
        // The first send PSN: near the 24-bit wrap, so every run crosses it.
        let start_psn = 0x00ff_ff00 | (qpn & 0xff);
        let sq = DmaBuf::new(layout.sq_bytes, 4096);
        let rq = DmaBuf::new(init.rq_wqes as usize * rq_stride as usize, 4096);
        let dbrec = DmaBuf::new(64, 64);
        let db = DmaBuf::new(1024, 4096);
        // SAFETY: the buffers are owned by the QP and outlive every copy of the view (the QP
        // holds them next to it); DmaBufs are at least 64-byte aligned.
        let view = unsafe {
            QpView {
                qpn,
                start_psn,
                geometry,
                rq_stride,
                sq: Region::new(sq.addr(), sq.len()),
                rq: Region::new(rq.addr(), rq.len()),
                dbrec: Region::new(dbrec.addr(), dbrec.len()),
                db: Region::new(db.addr(), db.len()),
            }
        };
        let inner = Arc::new(QpInner {
            nic: self.nic.inner.clone(),
            qpn,
            pd: self.id,
            init,
            view,
            _mem: [sq, rq, dbrec, db],
            send_cq: send_cq.inner.clone(),
            recv_cq: recv_cq.inner.clone(),
            state: AtomicU8::new(QpState::Reset as u8),
            remote: Mutex::new(None),
            rq_consumed: AtomicU64::new(0),
            exec: Mutex::new(QpExec::default()),
        });
        let fabric = self.nic.fabric.clone();
        fabric
            .inner
            .qps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert((self.nic.inner.id, qpn), inner.clone());
        fabric.inner.epoch.fetch_add(1, Ordering::Release);
        let qp = Qp { fabric, inner };
        qp.publish();
        qp.fabric.ensure_engine();
        qp.fabric.kick();
        Ok(qp)
    }
}

impl Qp {
    /// Tells the other processes of a cross-process fabric this QP's state.
    fn publish(&self) {
        if let Some(l) = &self.fabric.inner.link {
            let q = &self.inner;
            l.publish_qp(q.nic.id, q.qpn, q.pd, Some(q.state()));
        }
    }
}

/// A registered memory region. Dropping it deregisters the keys.
pub struct Mr {
    nic: Nic,
    inner: Arc<MrInner>,
    /// Registry slot, for regions published to other processes.
    shared: Option<usize>,
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("addr", &format_args!("{:#x}", self.inner.addr))
            .field("len", &self.inner.len)
            .finish()
    }
}

impl Mr {
    /// First byte.
    #[must_use]
    pub fn addr(&self) -> u64 {
        self.inner.addr
    }
    /// Length.
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.len as usize
    }
    /// Whether the region is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }
    /// Local key.
    #[must_use]
    pub fn lkey(&self) -> u32 {
        self.inner.lkey
    }
    /// Remote key.
    #[must_use]
    pub fn rkey(&self) -> u32 {
        self.inner.rkey
    }

    /// The region address of `len` bytes at `offset`, if they lie inside the region
    /// (overflow-checked: a huge `offset` cannot wrap back inside).
    fn span(&self, offset: usize, len: usize, what: &str) -> Result<u64, SimError> {
        offset
            .checked_add(len)
            .filter(|&end| end <= self.len())
            .map(|_| self.addr() + offset as u64)
            .ok_or_else(|| {
                SimError::InvalidArgument(format!(
                    "{what} of {len} bytes at offset {offset} leaves the {}-byte region",
                    self.len()
                ))
            })
    }

    /// Reads `out.len()` bytes at `offset` (the NIC may be writing concurrently; read after the
    /// completion that announces the data). A range outside the region is an error and reads
    /// nothing.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), SimError> {
        let at = self.span(offset, out.len(), "read")?;
        // SAFETY: the range is inside the region, which is valid memory while `self` lives.
        unsafe { gda_hal::mmio::dma_copy(out.as_mut_ptr(), at as *const u8, out.len()) };
        Ok(())
    }

    /// Writes `data` at `offset`. A range outside the region is an error and writes nothing.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), SimError> {
        let at = self.span(offset, data.len(), "write")?;
        // SAFETY: as above.
        unsafe { gda_hal::mmio::dma_copy(at as *mut u8, data.as_ptr(), data.len()) };
        Ok(())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        self.nic.inner.mrs.remove(self.inner.lkey, self.inner.rkey);
        if let (Some(slot), Some(l)) = (self.shared, &self.nic.fabric.inner.link) {
            l.retract_mr(slot);
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
    _mem: [DmaBuf; 2],
    /// CQEs written so far (engine only).
    pub(crate) prod: AtomicU64,
    pub(crate) overrun: AtomicBool,
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
            self.overrun.store(true, Ordering::Release);
            return false;
        }
        self.model.write_cqe(&self.view, c, prod);
        self.prod.store(prod + 1, Ordering::Release);
        true
    }
}

/// A completion queue.
#[derive(Clone)]
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("cqn", &self.inner.cqn)
            .field("mode", &self.inner.mode)
            .finish()
    }
}

impl Cq {
    /// The device handle kernels poll with.
    #[must_use]
    pub fn handle(&self) -> CqHandle {
        self.inner.model.cq_handle(&self.inner.view)
    }

    /// Whether the NIC found the CQ full and dropped a completion (hardware raises a CQ error).
    #[must_use]
    pub fn overrun(&self) -> bool {
        self.inner.overrun.load(Ordering::Acquire)
    }

    /// CQEs the NIC has written.
    #[must_use]
    pub fn produced(&self) -> u64 {
        self.inner.prod.load(Ordering::Acquire)
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
    _mem: [DmaBuf; 4],
    pub(crate) send_cq: Arc<CqInner>,
    pub(crate) recv_cq: Arc<CqInner>,
    pub(crate) state: AtomicU8,
    pub(crate) remote: Mutex<Option<Endpoint>>,
    /// Receive WQEs consumed (engine only).
    pub(crate) rq_consumed: AtomicU64,
    pub(crate) exec: Mutex<QpExec>,
}

impl QpInner {
    pub(crate) fn model(&self) -> &dyn DeviceModel {
        &*self.nic.model
    }
    pub(crate) fn state(&self) -> QpState {
        QpState::from_u8(self.state.load(Ordering::Acquire))
    }
    pub(crate) fn set_error(&self) {
        self.state.store(QpState::Error as u8, Ordering::Release);
    }
}

/// An RC queue pair.
pub struct Qp {
    fabric: Fabric,
    pub(crate) inner: Arc<QpInner>,
}

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &self.inner.qpn)
            .field("state", &self.inner.state())
            .finish()
    }
}

impl Qp {
    /// QP number.
    #[must_use]
    pub fn qpn(&self) -> u32 {
        self.inner.qpn
    }

    /// Current state.
    #[must_use]
    pub fn state(&self) -> QpState {
        self.inner.state()
    }

    /// What a peer needs to connect to this QP.
    #[must_use]
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            fabric: self.fabric.inner.id,
            nic: self.inner.nic.id,
            qpn: self.inner.qpn,
        }
    }

    /// The model of this QP's NIC, as provider `P`'s, or an error naming both.
    fn model_for<P: Modeled>(&self) -> Result<&P::Model, SimError> {
        let m = self.inner.model();
        m.as_any().downcast_ref::<P::Model>().ok_or_else(|| {
            SimError::InvalidArgument(format!(
                "QP {:#x} is on a {} NIC, not one driven by the {} provider",
                self.inner.qpn,
                m.name(),
                P::NAME
            ))
        })
    }

    /// The send queue's handle for provider `P`'s device functions.
    pub fn sq_handle<P: Modeled>(&self) -> Result<P::Sq, SimError> {
        <P::Model as ModelFor<P>>::sq_handle(self.model_for::<P>()?, &self.inner.view)
            .map_err(SimError::InvalidArgument)
    }

    /// The receive queue's handle for provider `P`'s device functions.
    pub fn rq_handle<P: Modeled>(&self) -> Result<P::Rq, SimError> {
        Ok(<P::Model as ModelFor<P>>::rq_handle(
            self.model_for::<P>()?,
            &self.inner.view,
        ))
    }

    /// Moves Reset → Init.
    pub fn init(&self) -> Result<(), SimError> {
        self.transition(QpState::Reset, QpState::Init)
    }

    /// Moves Init → Rtr, connected to `remote` (a QP on this fabric; may be itself: loopback).
    pub fn connect(&self, remote: &Endpoint) -> Result<(), SimError> {
        if self.fabric.lookup(remote).is_none() {
            let peer = self
                .fabric
                .inner
                .link
                .as_ref()
                .and_then(|l| l.peer_of(remote));
            match peer {
                Some(Ok(p)) if p.has_qp(remote) => {}
                Some(Err(e)) => {
                    return Err(SimError::InvalidArgument(format!(
                        "endpoint {remote:?}: peer process unreachable: {e}"
                    )));
                }
                _ => return Err(SimError::UnknownEndpoint(*remote)),
            }
        }
        *self.inner.remote.lock().unwrap_or_else(|e| e.into_inner()) = Some(*remote);
        self.transition(QpState::Init, QpState::Rtr)?;
        // A new responder: the engine re-resolves it.
        self.fabric.inner.epoch.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Moves Rtr → Rts.
    pub fn ready(&self) -> Result<(), SimError> {
        self.transition(QpState::Rtr, QpState::Rts)?;
        self.fabric.kick();
        Ok(())
    }

    /// Init, connect and ready in one call.
    pub fn bring_up(&self, remote: &Endpoint) -> Result<(), SimError> {
        self.init()?;
        self.connect(remote)?;
        self.ready()
    }

    /// Moves to Error: outstanding and future WQEs complete with `WR_FLUSH_ERR`.
    pub fn set_error(&self) {
        self.inner.set_error();
        self.publish();
        self.fabric.kick();
    }

    fn transition(&self, from: QpState, to: QpState) -> Result<(), SimError> {
        self.inner
            .state
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| self.publish())
            .map_err(|cur| SimError::InvalidTransition {
                qpn: self.inner.qpn,
                from: QpState::from_u8(cur),
                to,
            })
    }

    /// Requests a state the verbs machine does not reach by the helpers above (for tests of
    /// refused transitions): anything other than the next state fails with a readable error.
    pub fn modify(&self, to: QpState) -> Result<(), SimError> {
        let from = self.state();
        match (from, to) {
            (_, QpState::Error) => {
                self.set_error();
                Ok(())
            }
            (QpState::Reset, QpState::Init) => self.init(),
            (QpState::Rtr, QpState::Rts) => self.ready(),
            _ => Err(SimError::InvalidTransition {
                qpn: self.inner.qpn,
                from,
                to,
            }),
        }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        self.fabric
            .inner
            .qps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(self.inner.nic.id, self.inner.qpn));
        self.fabric.inner.epoch.fetch_add(1, Ordering::Release);
        if let Some(l) = &self.fabric.inner.link {
            l.publish_qp(self.inner.nic.id, self.inner.qpn, self.inner.pd, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
