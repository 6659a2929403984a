//! A software NIC: protection domains and completion queues are made here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use gda_hal::control::{QueueBuffer, QueueMemory};
use gda_hal::model::{CqView, DeviceModel, Modeled, Region};

use crate::buf::QueueMem;
use crate::cq::Cq;
use crate::fabric::Fabric;
use crate::mem::MrTable;
use crate::state::{CqInner, NicInner};
use crate::types::{CqMode, Model, SimError};

/// A software NIC.
#[derive(Clone)]
pub struct Nic {
    pub(crate) fabric: Fabric,
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

impl Fabric {
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
            shared_regions: std::sync::atomic::AtomicUsize::new(0),
            port_up: AtomicBool::new(true),
        });
        nics.push(nic.clone());
        Nic {
            fabric: self.clone(),
            inner: nic,
        }
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

    /// Takes this NIC's port down (`false`) or brings it up. While it is down the NIC sends
    /// nothing and answers nothing, as on a link that carries no packets: each request of its
    /// QPs, and each request to them from another NIC, completes with `RETRY_EXC_ERR` (the
    /// requester's QP to error); peers lose the direct placement it granted (placements in
    /// progress are waited for, at most the withdrawal deadline, and any still running then
    /// complete with an error). QPs stay in their state, as on hardware. Host-wide port state
    /// by device name is [`crate::port`]; this is the NIC's own switch.
    pub fn set_port_up(&self, up: bool) {
        // ORDERING: SeqCst with the check under a grant list's lock (`Grants::open_with`): an
        // offer either sees the port down or opened before the withdrawal below took its list.
        self.inner.port_up.store(up, Ordering::SeqCst);
        if up {
            return;
        }
        let qps: Vec<_> = self
            .fabric
            .inner
            .qps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|q| Arc::ptr_eq(&q.nic, &self.inner))
            .cloned()
            .collect();
        let until = crate::shared::withdrawal_deadline();
        for q in qps {
            q.grants.withdraw_open(until);
        }
    }

    /// Whether this NIC's port is up.
    #[must_use]
    pub fn port_up(&self) -> bool {
        self.inner.port_is_up()
    }

    /// Most CQEs a CQ may hold.
    pub const MAX_CQE: u32 = 1 << 22;

    /// This NIC's index on its fabric.
    #[must_use]
    pub fn index(&self) -> u32 {
        self.inner.id
    }

    /// Creates a completion queue of `entries` CQEs (a power of two; a collapsed CQ has one slot).
    pub fn create_cq(&self, entries: u32, mode: CqMode) -> Result<Cq, SimError> {
        self.create_cq_in(entries, mode, &QueueMemory::Provider)
    }

    /// [`Nic::create_cq`] with the ring and doorbell record in `memory`.
    pub fn create_cq_in(
        &self,
        entries: u32,
        mode: CqMode,
        memory: &QueueMemory,
    ) -> Result<Cq, SimError> {
        let entries = if mode == CqMode::Collapsed {
            1
        } else {
            entries
        };
        if !entries.is_power_of_two() || entries > Self::MAX_CQE {
            return Err(SimError::InvalidArgument(format!(
                "CQ size {entries} must be a power of two up to 2^22"
            )));
        }
        let model = self.inner.model.clone();
        let stride = model.cqe_bytes();
        let mem = |what, len, align| {
            QueueMem::new(memory, what, len, align).map_err(SimError::InvalidArgument)
        };
        let buf = mem(
            QueueBuffer::CompletionQueue,
            entries as usize * stride as usize,
            4096,
        )?;
        let dbrec = mem(QueueBuffer::DoorbellRecord, 64, 64)?;
        let cqn = self.inner.next_cqn.fetch_add(1, Ordering::Relaxed);
        // SAFETY: both buffers are owned by the CQ and outlive every copy of the view (the CQ
        // holds them next to it); both are at least 64-byte aligned (`QueueMem::new` checks).
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
                on_overrun: std::sync::OnceLock::new(),
            }),
        })
    }
}
