//! The RDMA control path the SHMEM layer needs: register the heap, make and connect RC QPs.
//!
//! This is the seam between gda-shmem and a NIC's host side. The data path never goes through
//! it: once [`Domain::queues`] has handed out a QP's send-queue and CQ handles, every put, get
//! and atomic is built by the provider's device functions (`SendQueue<P>`). The software NIC
//! implements it ([`SimDomain`]); hardware verbs (ConnectX, Thor2) plug in here.

use gda_hal::{CqHandle, Provider};
use gda_os::shm::Segment;

use crate::error::{Result, ShmemError};

/// A NIC's control path, as the SHMEM layer uses it.
pub trait Domain: Send {
    /// The provider whose queues this domain's QPs are.
    type P: Provider;
    /// Registers `[offset, offset + len)` of `seg` (the heap, once); returns `(lkey, rkey)`.
    fn register(&mut self, seg: &Segment, offset: usize, len: usize) -> Result<(u32, u32)>;
    /// Creates an RC QP; returns its index and the bytes a peer needs to connect to it.
    fn create_qp(&mut self) -> Result<(usize, Vec<u8>)>;
    /// Connects QP `qp` to a peer's endpoint bytes and makes it ready to send.
    fn connect(&mut self, qp: usize, remote: &[u8]) -> Result<()>;
    /// The send queue and its CQ (valid while the domain lives).
    fn queues(&self, qp: usize) -> Result<(<Self::P as Provider>::Sq, CqHandle)>;
    /// Called once every PE has connected (e.g. to remove shared names).
    fn connected(&mut self) -> Result<()> {
        Ok(())
    }
    /// Called before this PE waits on RDMA progress. Hardware needs nothing; the software
    /// NIC's engine naps when idle and this wakes it (a PE about to wait would otherwise pay
    /// the nap).
    fn kick(&self) {}
}

#[cfg(feature = "sim")]
pub use sim::SimDomain;

#[cfg(feature = "sim")]
mod sim {
    use super::*;
    use gda_sim::{Access, Cq, CqMode, Endpoint, Fabric, Modeled, Mr, Pd, Qp, QpInit};
    use std::marker::PhantomData;

    /// The software NIC as an RDMA domain: one NIC per PE, on a fabric shared by thread PEs
    /// or on this process's side of a cross-process fabric.
    pub struct SimDomain<P> {
        fabric: Fabric,
        pd: Pd,
        shared: bool,
        mrs: Vec<Mr>,
        qps: Vec<(Qp, Cq)>,
        _p: PhantomData<fn() -> P>,
    }

    fn sim_err(e: gda_sim::SimError) -> ShmemError {
        ShmemError::rdma_setup(None, &e)
    }

    impl<P: Modeled> SimDomain<P> {
        /// A NIC of `P`'s device model on `fabric` (`shared`: a cross-process fabric, whose
        /// regions are published to the other processes).
        pub fn new(fabric: &Fabric, shared: bool) -> Self {
            let nic = fabric.add_nic_for::<P>();
            Self {
                fabric: fabric.clone(),
                pd: nic.alloc_pd(),
                shared,
                mrs: Vec::new(),
                qps: Vec::new(),
                _p: PhantomData,
            }
        }

        /// The fabric.
        pub fn fabric(&self) -> &Fabric {
            &self.fabric
        }
    }

    impl<P: Modeled> Domain for SimDomain<P> {
        type P = P;

        fn register(&mut self, seg: &Segment, offset: usize, len: usize) -> Result<(u32, u32)> {
            if offset.checked_add(len).is_none_or(|e| e > seg.len()) {
                return Err(ShmemError::Invalid(
                    "registration outside the segment".into(),
                ));
            }
            let addr = seg.as_ptr() as u64 + offset as u64;
            let mr = if self.shared {
                // SAFETY: the range is inside `seg`, which the PE keeps mapped until after the
                // domain (and so the region) is dropped.
                unsafe { self.pd.register_shared(addr, len, Access::ALL, seg, offset) }
                    .map_err(sim_err)?
            } else {
                // SAFETY: as above.
                unsafe { self.pd.register(addr, len, Access::ALL) }
            };
            let keys = (mr.lkey(), mr.rkey());
            self.mrs.push(mr);
            Ok(keys)
        }

        fn create_qp(&mut self) -> Result<(usize, Vec<u8>)> {
            let nic = self.pd.nic();
            let cq = nic.create_cq(4096, CqMode::Normal).map_err(sim_err)?;
            let init = QpInit {
                sq_units: 1024,
                rq_wqes: 16,
                ..QpInit::default()
            };
            let qp = self.pd.create_qp(init, &cq, &cq).map_err(sim_err)?;
            let ep = qp.endpoint().to_bytes().to_vec();
            self.qps.push((qp, cq));
            Ok((self.qps.len() - 1, ep))
        }

        fn connect(&mut self, qp: usize, remote: &[u8]) -> Result<()> {
            let ep = Endpoint::from_bytes(remote).map_err(sim_err)?;
            let (q, _) = self
                .qps
                .get(qp)
                .ok_or_else(|| ShmemError::Invalid(format!("no QP {qp}")))?;
            q.bring_up(&ep).map_err(sim_err)
        }

        fn queues(&self, qp: usize) -> Result<(P::Sq, CqHandle)> {
            let (q, c) = self
                .qps
                .get(qp)
                .ok_or_else(|| ShmemError::Invalid(format!("no QP {qp}")))?;
            Ok((q.sq_handle::<P>().map_err(sim_err)?, c.handle()))
        }

        fn connected(&mut self) -> Result<()> {
            self.fabric.unlink_registry().map_err(sim_err)
        }

        fn kick(&self) {
            self.fabric.kick();
        }
    }
}
