//! RC queue pairs: creation, the verbs state machine, handles for device code.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

use rand::RngCore;

use gda_hal::control::{
    Access, ControlError, InitAttr, QpField, QueueBuffer, QueueMemory, RtrAttr, RtsAttr,
};
use gda_hal::model::{ModelFor, Modeled, QpView, Region};

use crate::buf::{DmaBuf, QueueMem};
use crate::cq::Cq;
use crate::device::{MTU, PORT, endpoint_of};
use crate::fabric::Fabric;
use crate::pd::Pd;
use crate::state::QpExec;
use crate::state::{PSN_UNKNOWN, QpInner};
use crate::types::{Endpoint, QpInit, QpState, SimError};

impl Pd {
    /// Creates an RC QP in state Reset.
    pub fn create_qp(&self, init: QpInit, send_cq: &Cq, recv_cq: &Cq) -> Result<Qp, SimError> {
        self.create_qp_in(init, send_cq, recv_cq, &QueueMemory::Provider)
    }

    /// [`Pd::create_qp`] with the rings and doorbell record in `memory`.
    pub fn create_qp_in(
        &self,
        init: QpInit,
        send_cq: &Cq,
        recv_cq: &Cq,
        memory: &QueueMemory,
    ) -> Result<Qp, SimError> {
        for (what, v) in [("sq_units", init.sq_units), ("rq_wqes", init.rq_wqes)] {
            if !v.is_power_of_two() || v > QpInit::MAX_WQES {
                return Err(SimError::InvalidArgument(format!(
                    "{what} = {v} must be a power of two up to 65536"
                )));
            }
        }
        if init.max_sge == 0 || init.max_sge > QpInit::MAX_SGE {
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
        // The first send PSN. Requests to other processes carry it, and a responder takes only
        // the PSN it expects: there it is unpredictable, as a NIC draws it. Within one process
        // (tests, `gda chaos`) it is near the 24-bit wrap, so every run crosses it.
        let start_psn = if self.nic.fabric.inner.wire.is_some() {
            rand::rngs::OsRng.next_u32() & crate::wire::PSN_MASK
        } else {
            0x00ff_ff00 | (qpn & 0xff)
        };
        let mem = |what, len, align| {
            QueueMem::new(memory, what, len, align).map_err(SimError::InvalidArgument)
        };
        let sq = mem(QueueBuffer::SendQueue, layout.sq_bytes, 4096)?;
        let rq = mem(
            QueueBuffer::RecvQueue,
            init.rq_wqes as usize * rq_stride as usize,
            4096,
        )?;
        let dbrec = mem(QueueBuffer::DoorbellRecord, 64, 64)?;
        // The doorbell page stands in for the device's register page: never caller memory.
        let db = QueueMem::Own(DmaBuf::new(1024, 4096));
        // SAFETY: the buffers are owned by the QP and outlive every copy of the view (the QP
        // holds them next to it); all are at least 64-byte aligned (`QueueMem::new` checks).
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
            rnr_retry: AtomicU8::new(init.rnr_retry),
            sq_psn: AtomicU32::new(start_psn),
            rq_psn: AtomicU64::new(PSN_UNKNOWN),
            exec: Mutex::new(QpExec::default()),
            grants: Default::default(),
            placing: std::sync::atomic::AtomicBool::new(false),
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
        qp.fabric.ensure_engine();
        qp.fabric.kick();
        Ok(qp)
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
    /// What a posting thread calls after ringing this QP's send doorbell when it will poll for
    /// the completions itself (a verbs program): this QP's send queue is served here, at once —
    /// only it, not every connection and QP — and the responses are taken by the thread's
    /// polls; on a fabric whose posters never run the engine, a kick. See [`Fabric::post_hook`].
    pub fn after_post(&self) {
        crate::engine::after_post_on(&self.fabric.inner, &self.inner);
    }

    /// [`Qp::after_post`] for a post of large messages: the whole engine pass runs too when
    /// this QP's step left requests on the wire (a large request is served sooner so); not
    /// when they were placed directly into regions the peer granted. With `streaming` (earlier
    /// requests of the QP are still outstanding, so the program will poll), while the QP's
    /// operations are being placed and the engine thread will look at the queues within
    /// [`Fabric::DEFERRED_SERVICE`](crate::Fabric::DEFERRED_SERVICE) anyway, the work is left
    /// to it: it copies on another core while the program goes on posting.
    pub fn after_large_post(&self, streaming: bool) {
        crate::engine::after_large_post_on(&self.fabric.inner, &self.inner, streaming);
    }

    /// QP number.
    #[must_use]
    pub fn qpn(&self) -> u32 {
        self.inner.qpn
    }

    /// The first PSN this QP sends (fixed at creation: random on a process fabric, near the
    /// 24-bit wrap on others). What a peer passes as its `rq_psn` unless RTS sets another
    /// ([`Qp::modify_rts`]).
    #[must_use]
    pub fn start_psn(&self) -> u32 {
        self.inner.view.start_psn
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

    // ---- The QP lifecycle: gda-hal's transitions (`RawRcQp` of `SimQp` calls these; the
    // verbs-compatible library translates `ibv_modify_qp` into them) ------------------------

    /// RESET → INIT on the NIC's port (1) and its one partition key.
    pub fn modify_init(&self, attr: &InitAttr) -> Result<(), SimError> {
        if attr.port != PORT {
            return Err(ControlError::Invalid(format!(
                "RESET→INIT: port {} (the software NIC has port {PORT})",
                attr.port
            ))
            .into());
        }
        if attr.pkey_index != 0 {
            return Err(ControlError::Invalid(format!(
                "RESET→INIT: pkey_index {} (the port has 1 partition key)",
                attr.pkey_index
            ))
            .into());
        }
        self.transition(QpState::Reset, QpState::Init)
    }

    /// INIT → RTR: connected to the software-NIC QP `attr.remote` names (a QP of this fabric,
    /// itself for loopback, or one of another process), expecting its first request at
    /// `attr.remote.psn`.
    ///
    /// Any path MTU up to the port's (4096) is taken: the software fabric carries each
    /// message whole, and the models count PSNs at the MTU the QP was made with, on both ends
    /// alike, so a smaller path MTU changes nothing a program can see.
    pub fn modify_rtr(&self, attr: &RtrAttr) -> Result<(), SimError> {
        attr.validate()?;
        let me = self.endpoint();
        // GIDs 0 and 1, and 2 and 3 on a process fabric (its IPv4-mapped pair).
        let populated = if crate::device::ipv4_gid_of(me.fabric, me.nic).is_some() {
            4
        } else {
            2
        };
        if attr.sgid_index >= populated {
            return Err(ControlError::Invalid(format!(
                "INIT→RTR: sgid_index {} is not populated (GIDs 0..{populated})",
                attr.sgid_index
            ))
            .into());
        }
        if attr.path_mtu > MTU {
            return Err(ControlError::Invalid(format!(
                "INIT→RTR: path MTU {} above the port's {}",
                attr.path_mtu.bytes(),
                MTU.bytes()
            ))
            .into());
        }
        let remote = endpoint_of(&attr.remote.gid, attr.remote.qpn).ok_or_else(|| {
            ControlError::Invalid(format!(
                "INIT→RTR: GID {} is not a software NIC's",
                attr.remote.gid
            ))
        })?;
        self.connect_at(&remote, u64::from(attr.remote.psn))
    }

    /// RTR → RTS: requests start at `attr.sq_psn` (the peer's `rq_psn`); `rnr_retry` RNR NAKs
    /// are retried before `RNR_RETRY_EXC_ERR` (7: forever).
    pub fn modify_rts(&self, attr: &RtsAttr) -> Result<(), SimError> {
        attr.validate()?;
        if self.state() != QpState::Rtr {
            return Err(SimError::InvalidTransition {
                qpn: self.inner.qpn,
                from: self.state(),
                to: QpState::Rts,
            });
        }
        self.inner
            .rnr_retry
            .store(attr.rnr_retry, Ordering::Relaxed);
        // ORDERING: Release before the state moves to RTS (the engine executes only in RTS,
        // which it reads with Acquire).
        self.inner.sq_psn.store(attr.sq_psn, Ordering::Release);
        self.transition(QpState::Rtr, QpState::Rts)?;
        self.fabric.kick();
        Ok(())
    }

    /// Any state → ERROR: outstanding and later WQEs complete with `WR_FLUSH_ERR`.
    pub fn modify_error(&self) {
        self.set_error();
    }

    /// RESET → INIT → RTR → RTS to `remote` with default attributes (and the RNR retries of
    /// its [`QpInit`]), through the transitions above. The peer's first PSN is asked of it when it is a QP of this fabric; a QP of
    /// another process is expected at the PSN of its first request.
    pub fn bring_up(&self, remote: &Endpoint) -> Result<(), SimError> {
        let psn = self
            .fabric
            .lookup(remote)
            .map_or(PSN_UNKNOWN, |q| u64::from(q.sq_psn.load(Ordering::Acquire)));
        self.bring_up_expecting(remote, psn)
    }

    /// [`Qp::bring_up`] to a QP of another process that starts its requests at `rq_psn`
    /// (what `ibv_modify_qp`'s `rq_psn` says): a request at any other PSN is refused.
    pub fn bring_up_at(&self, remote: &Endpoint, rq_psn: u32) -> Result<(), SimError> {
        QpField::RqPsn.check(rq_psn)?;
        self.bring_up_expecting(remote, u64::from(rq_psn))
    }

    /// RESET → INIT → RTR → RTS with default attributes, expecting the peer's requests from
    /// `rq_psn` ([`PSN_UNKNOWN`]: from its first).
    fn bring_up_expecting(&self, remote: &Endpoint, rq_psn: u64) -> Result<(), SimError> {
        self.modify_init(&InitAttr {
            port: PORT,
            pkey_index: 0,
            access: Access::ALL,
        })?;
        self.connect_at(remote, rq_psn)?;
        // RTS from the start PSN, with the RNR retries the QP was made with (`QpInit`).
        self.modify_rts(&RtsAttr {
            rnr_retry: self.inner.rnr_retry.load(Ordering::Relaxed).min(7),
            ..RtsAttr::new(self.start_psn())
        })
    }

    fn connect_at(&self, remote: &Endpoint, rq_psn: u64) -> Result<(), SimError> {
        // A QP of another process fabric is not looked up now (as a NIC does not ask the
        // remote at RTR): requests to it fail with RETRY_EXC_ERR if nobody answers.
        let other_process = self.fabric.inner.wire.is_some()
            && remote.fabric != self.fabric.inner.id
            && crate::wire::is_process_fabric(remote.fabric);
        if !other_process && self.fabric.lookup(remote).is_none() {
            return Err(SimError::UnknownEndpoint(*remote));
        }
        if self.state() != QpState::Init {
            return Err(SimError::InvalidTransition {
                qpn: self.inner.qpn,
                from: self.state(),
                to: QpState::Rtr,
            });
        }
        *self.inner.remote.lock().unwrap_or_else(|e| e.into_inner()) = Some(*remote);
        // ORDERING: Release, before the state moves to RTR (the engine reads it after seeing
        // RTR with Acquire).
        self.inner.rq_psn.store(rq_psn, Ordering::Release);
        // Before RTR too: a responder that sees the QP in RTR sees the epoch moved, and reads
        // the new `remote` rather than one it kept (`engine::wire::Responder`).
        self.fabric.inner.epoch.fetch_add(1, Ordering::Release);
        self.transition(QpState::Init, QpState::Rtr)?;
        // A new responder: the engine re-resolves it.
        self.fabric.inner.epoch.fetch_add(1, Ordering::Release);
        if other_process && let Some(w) = &self.fabric.inner.wire {
            // The connection to the peer process is made now, as a NIC's is at RTR, rather
            // than by the first request, which would otherwise wait for the handshake and for
            // the peer to take the new connection (`wire_rate`'s first line: 0.2-0.4 ms
            // against 50-60 us). Best effort: a peer not reachable yet is connected to by the
            // first request, as before.
            let _ = w.conn_to(remote.fabric);
        }
        Ok(())
    }

    /// Moves to Error: outstanding and future WQEs complete with `WR_FLUSH_ERR`.
    pub(crate) fn set_error(&self) {
        self.inner.set_error();
        self.fabric.kick();
    }

    fn transition(&self, from: QpState, to: QpState) -> Result<(), SimError> {
        self.inner
            .state
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|cur| SimError::InvalidTransition {
                qpn: self.inner.qpn,
                from: QpState::from_u8(cur),
                to,
            })
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // Destroyed: no placement through its grants goes on after this returns (as
        // `QpInner::set_error`).
        self.inner
            .grants
            .close_all(crate::shared::withdrawal_deadline());
        self.fabric
            .inner
            .qps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(self.inner.nic.id, self.inner.qpn));
        self.fabric.inner.epoch.fetch_add(1, Ordering::Release);
        // The snapshot program threads' engine passes share (`FabricInner::qp_list`) holds
        // the QP too, until the next pass rebuilds it; a program that destroys its QPs runs
        // none, so drop it here (or every destroy would wait out the bound below and leak).
        *self
            .fabric
            .inner
            .qp_list
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = (u64::MAX, Arc::new(Vec::new()));
        // So does the responder's cache of the QP requests from other processes went to: let
        // go here when no pass holds it, else by the next pass (the epoch moved above), which
        // the wait below kicks — never waiting here for a pass that serves a busy peer.
        if let Ok(mut r) = self.fabric.inner.responder.try_lock() {
            if r.qp
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(&c.qp, &self.inner))
            {
                *r = crate::state::Responder::default();
            }
        }
        if let Some(w) = &self.fabric.inner.wire {
            // A request still outstanding: its response, if it comes, is skipped.
            w.forget((self.inner.nic.id, self.inner.qpn));
        }
        // Verbs' contract: once a destroy returns, the QP's rings are back with their allocator
        // (a program may free a parent domain's allocator right after). The engine thread's
        // snapshot is the only other lasting owner (peers hold weak references; a pass that a
        // program thread runs holds it for that pass); it lets go at its next scan, which the
        // epoch above forces. Bounded: a stuck engine leaks the rings instead.
        let on_engine = crate::shared::on_engine_thread();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !on_engine
            && Arc::strong_count(&self.inner) > 1
            && std::time::Instant::now() < deadline
        {
            self.fabric.inner.kick();
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}
