//! The NIC a PE reaches RDMA peers through: any [`gda_hal::control::Device`] whose provider is
//! the PE's.
//!
//! The data path never goes through here: once a QP is connected, every put, get and atomic
//! is built by the provider's device functions (`SendQueue<P>`). This module only brings the
//! QPs up — register the segment once, one RC QP per RDMA peer, endpoints exchanged through
//! the bootstrap — with the same code for the software NIC and for hardware.

use std::sync::Arc;

use gda_hal::control::{
    Access, CqAttr, Device, Endpoint, LocalPath, MemoryDesc, MemoryRegion, PathRequest, QpCaps,
    QueueMemory, RcQp, Reset, Rts,
};
use gda_hal::{CqHandle, Provider};

use crate::error::{Result, ShmemError};

/// A wake-up for a NIC whose engine naps when idle (the software NIC's): called after posting
/// and before waiting on RDMA progress. Hardware needs none.
pub type Nudge = Arc<dyn Fn() + Send + Sync>;

/// Runs a NIC's host work in the calling thread and says whether it did anything
/// ([`RdmaNic::progress`]): the hook the PE's send queues run on every poll, too.
pub type Progress = gda_hal::HostProgress;

/// Given a QP's number, what to call after each doorbell of that QP ([`RdmaNic::post_nudge`]).
pub type PostNudge = Arc<dyn Fn(u32) -> Option<Nudge> + Send + Sync>;

/// Asks a NIC to serve the doorbells rung so far on its own ([`RdmaNic::defer`]), given how
/// many the queue has left to it in a row already: `true` when it will, within a bounded
/// time; `false` when the poster must run the work now (the NIC bounds the run: it says
/// `false` once the count reaches its limit).
pub type Defer = Arc<dyn Fn(u32) -> bool + Send + Sync>;

/// What a PE is given for its RDMA routes.
pub struct RdmaNic<D> {
    /// The device.
    pub device: D,
    /// Which port and GID to use (default: [`gda_hal::control::select_path`]'s choice).
    pub path: PathRequest,
    /// The engine wake-up of a software NIC (`None` on hardware).
    pub nudge: Option<Nudge>,
    /// Runs a software NIC's work in the calling thread while it waits for completions
    /// (`gda_sim::Fabric::progress` on a process fabric; `None` on hardware).
    pub progress: Option<Progress>,
    /// A wake-up per QP, called after each of its doorbells instead of [`RdmaNic::nudge`]
    /// (`gda_sim::Fabric::post_hook` on a process fabric: the poster runs that QP's work
    /// itself while the engine thread naps); `None` on hardware.
    pub post_nudge: Option<PostNudge>,
    /// Lets non-blocking puts leave their doorbells to the NIC for a while and run a batch of
    /// them at once (`gda_sim::Fabric::defer_doorbell` on a process fabric: the engine serves
    /// them within `gda_sim::Fabric::DEFERRED_SERVICE` if the PE does not first, and at most
    /// `gda_sim::Fabric::DEFERRED_IN_ROW_MAX` in a row are left to it); `None`:
    /// every doorbell gets its [`RdmaNic::post_nudge`].
    pub defer: Option<Defer>,
    /// Where the QPs' and CQs' rings and doorbell records live, with the queues' protocol
    /// state and the device context (default: the heap's choice — GPU memory for a GPU heap,
    /// the provider's host memory otherwise; `QueueMemory::Caller` sets it).
    pub queues: QueueMemory,
}

impl<D> RdmaNic<D> {
    /// `device` with the default path and no wake-up.
    pub fn new(device: D) -> Self {
        Self {
            device,
            path: PathRequest::default(),
            nudge: None,
            progress: None,
            post_nudge: None,
            defer: None,
            queues: QueueMemory::Provider,
        }
    }
}

impl<D> std::fmt::Debug for RdmaNic<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaNic")
            .field("path", &self.path)
            .field("nudge", &self.nudge.is_some())
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

/// Queue sizes of every SHMEM QP: 1024 send units (one staged put or atomic is one or two),
/// CQEs for all of them, a few receives (SHMEM uses none).
const SEND_WR: u32 = 1024;
const CQ_ENTRIES: u32 = 4096;
const RECV_WR: u32 = 16;

fn setup_err(e: &dyn gda_hal::Error) -> ShmemError {
    ShmemError::rdma_setup(None, e)
}

/// What `Pe::init` needs of a NIC, with the device type erased (a PE is generic over its
/// provider only).
pub(crate) trait Conn<P: Provider>: Send {
    /// Registers the whole segment `mem`; returns `(lkey, rkey)`.
    ///
    /// # Safety
    /// `mem` stays valid (mapped, allocated) until `self` is dropped.
    unsafe fn register(&mut self, mem: &MemoryDesc<'_>) -> Result<(u32, u32)>;
    /// A new RC QP; its index and endpoint bytes.
    fn create_qp(&mut self) -> Result<(usize, Vec<u8>)>;
    /// Connects QP `qp` to the peer whose endpoint bytes are `remote`.
    fn connect(&mut self, qp: usize, remote: &[u8]) -> Result<()>;
    /// QP `qp`'s send queue and CQ handles (valid while `self` lives).
    fn queues(&self, qp: usize) -> Result<(P::Sq, CqHandle)>;
    /// Where the QPs' and CQs' rings and doorbell records live.
    fn queue_memory(&self) -> &QueueMemory;
    /// Places the queues created from now on in `memory`.
    fn set_queue_memory(&mut self, memory: QueueMemory);
}

enum Qp<D: Device> {
    Reset(RcQp<D::Qp, Reset>),
    Ready(RcQp<D::Qp, Rts>),
    /// A refused transition left it here; dropped with the rest.
    Failed,
}

/// A device with its protection domain, region and QPs (dropped in reverse: QPs, CQs,
/// region, PD, device).
pub(crate) struct DeviceConn<D: Device> {
    qps: Vec<(Qp<D>, D::Cq)>,
    mrs: Vec<D::Mr>,
    pd: D::Pd,
    path: LocalPath,
    queues: QueueMemory,
    device: D,
}

impl<D: Device> DeviceConn<D> {
    pub(crate) fn open(nic: RdmaNic<D>) -> Result<Self> {
        let path = nic.device.path(nic.path).map_err(|e| setup_err(&e))?;
        let pd = nic.device.alloc_pd().map_err(|e| setup_err(&e))?;
        Ok(Self {
            qps: Vec::new(),
            mrs: Vec::new(),
            pd,
            path,
            queues: nic.queues,
            device: nic.device,
        })
    }

    fn qp(&self, qp: usize) -> Result<&(Qp<D>, D::Cq)> {
        self.qps
            .get(qp)
            .ok_or_else(|| ShmemError::Invalid(format!("no QP {qp}")))
    }
}

impl<D: Device + 'static> Conn<D::Provider> for DeviceConn<D> {
    unsafe fn register(&mut self, mem: &MemoryDesc<'_>) -> Result<(u32, u32)> {
        // SAFETY: the memory outlives this connection and so the region (caller).
        let mr = unsafe { self.device.register(&self.pd, mem, Access::ALL) }
            .map_err(|e| setup_err(&e))?;
        let keys = (mr.lkey(), mr.rkey());
        self.mrs.push(mr);
        Ok(keys)
    }

    fn create_qp(&mut self) -> Result<(usize, Vec<u8>)> {
        let cq = self
            .device
            .create_cq(&CqAttr {
                memory: self.queues.clone(),
                ..CqAttr::new(CQ_ENTRIES)
            })
            .map_err(|e| setup_err(&e))?;
        let caps = QpCaps {
            send_wr: SEND_WR,
            recv_wr: RECV_WR,
            memory: self.queues.clone(),
            ..QpCaps::default()
        };
        let qp = self
            .device
            .create_rc_qp(&self.pd, &cq, &cq, &caps)
            .map_err(|e| setup_err(&e))?;
        let ep = qp.endpoint(&self.path).to_bytes().to_vec();
        self.qps.push((Qp::Reset(qp), cq));
        Ok((self.qps.len() - 1, ep))
    }

    fn connect(&mut self, qp: usize, remote: &[u8]) -> Result<()> {
        let remote = Endpoint::from_bytes(remote).map_err(|e| setup_err(&e))?;
        let path = self.path;
        let slot = self
            .qps
            .get_mut(qp)
            .ok_or_else(|| ShmemError::Invalid(format!("no QP {qp}")))?;
        match std::mem::replace(&mut slot.0, Qp::Failed) {
            Qp::Reset(q) => match q.connect(&path, &remote) {
                Ok(q) => {
                    slot.0 = Qp::Ready(q);
                    Ok(())
                }
                Err(r) => Err(setup_err(&r.error)),
            },
            other => {
                slot.0 = other;
                Err(ShmemError::Invalid(format!(
                    "QP {qp} was already connected"
                )))
            }
        }
    }

    fn queues(&self, qp: usize) -> Result<(<D::Provider as Provider>::Sq, CqHandle)> {
        use gda_hal::control::CompletionQueue;
        let (q, cq) = self.qp(qp)?;
        let sq = match q {
            Qp::Ready(q) => q.sq_handle(),
            _ => return Err(ShmemError::Invalid(format!("QP {qp} is not connected"))),
        }
        .map_err(|e| setup_err(&e))?;
        Ok((sq, cq.handle()))
    }

    fn queue_memory(&self) -> &QueueMemory {
        &self.queues
    }

    fn set_queue_memory(&mut self, memory: QueueMemory) {
        self.queues = memory;
    }
}
