//! Shared harness for the provider-generic conformance suite: a fabric with two NICs of the
//! provider's sim model, a connected QP pair, and raw (device-function level) posting/polling.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gda::hal::{
    CqHandle, Posted, ProdIdx, Provider, SendFlags, Sge, SqPos, WorkCompletion, WorkRequest,
};
use gda::hal::{WcOpcode, WcStatus};
use gda::sim::{
    Access, Cq, CqMode, DeviceModel, Fabric, FabricConfig, Model, Modeled, Mr, Pd, Qp, QpInit,
};

thread_local! {
    static MODEL: RefCell<Option<Model>> = const { RefCell::new(None) };
}

/// The sim model tests of provider `P` run on: `P::model()`, or the one [`with_model`] set
/// (bnxt runs the suite in several WQE modes).
pub fn model<P: Modeled>() -> Model {
    MODEL
        .with(|c| c.borrow().clone())
        .unwrap_or_else(|| Arc::new(P::model()))
}

/// Runs `f` with [`model`] returning `m` on this thread.
pub fn with_model(m: impl DeviceModel, f: impl FnOnce()) {
    MODEL.with(|c| *c.borrow_mut() = Some(Arc::new(m)));
    f();
    MODEL.with(|c| *c.borrow_mut() = None);
}

/// `init` with as many gather entries as `model` accepts (bnxt's fixed three-slot WQEs carry
/// one), asking the model rather than naming a vendor.
pub fn fit(model: &dyn DeviceModel, mut init: QpInit) -> QpInit {
    while init.max_sge > 1 && model.layout(&init.geometry()).is_err() {
        init.max_sge -= 1;
    }
    init
}

/// Two connected QPs: `a` (requester) on NIC 0, `b` (responder) on NIC 1.
pub struct Pair<P: Modeled> {
    pub fabric: Fabric,
    pub pd_a: Pd,
    pub pd_b: Pd,
    pub cq_a: Cq,
    pub rcq_b: Cq,
    pub a: Qp,
    pub b: Qp,
    _p: PhantomData<P>,
}

impl<P: Modeled> Pair<P> {
    pub fn new(chaos: Option<u64>, mode: CqMode, init: QpInit) -> Self {
        let m = model::<P>();
        let init = fit(&*m, init);
        let fabric = Fabric::new(FabricConfig { chaos });
        let na = fabric.add_shared_model_nic(m.clone());
        let nb = fabric.add_shared_model_nic(m);
        let (pd_a, pd_b) = (na.alloc_pd(), nb.alloc_pd());
        let cq_a = na.create_cq(1024, mode).unwrap();
        let rcq_a = na.create_cq(64, CqMode::Normal).unwrap();
        let scq_b = nb.create_cq(64, CqMode::Normal).unwrap();
        let rcq_b = nb.create_cq(1024, CqMode::Normal).unwrap();
        let a = pd_a.create_qp(init, &cq_a, &rcq_a).unwrap();
        let b = pd_b.create_qp(init, &scq_b, &rcq_b).unwrap();
        a.bring_up(&b.endpoint()).unwrap();
        b.bring_up(&a.endpoint()).unwrap();
        Self {
            fabric,
            pd_a,
            pd_b,
            cq_a,
            rcq_b,
            a,
            b,
            _p: PhantomData,
        }
    }

    pub fn simple() -> Self {
        Self::new(None, CqMode::Normal, QpInit::default())
    }

    pub fn raw_a(&self) -> Raw<P> {
        Raw::new(self.a.sq_handle::<P>().unwrap(), self.cq_a.handle())
    }

    pub fn recv_b(&self) -> RecvQ<P> {
        RecvQ::new(self.b.rq_handle::<P>().unwrap(), self.rcq_b.handle())
    }

    pub fn mr_a(&self, len: usize, access: Access) -> Mr {
        self.pd_a.alloc_mr(len, access)
    }

    pub fn mr_b(&self, len: usize, access: Access) -> Mr {
        self.pd_b.alloc_mr(len, access)
    }
}

pub fn sge(mr: &Mr, off: u64, len: u32) -> Sge {
    Sge {
        addr: mr.addr() + off,
        length: len,
        lkey: mr.lkey(),
    }
}

pub fn remote(mr: &Mr, off: u64) -> gda::hal::Remote {
    gda::hal::Remote {
        addr: mr.addr() + off,
        rkey: mr.rkey(),
    }
}

/// Raw device-function access to a send queue and its CQ (single-threaded tests).
pub struct Raw<P: Provider> {
    pub sq: P::Sq,
    pub cq: CqHandle,
    pub pos: SqPos,
    pub ci: u32,
    /// What was posted (start unit, units, opcode, bytes), for providers whose requester CQEs
    /// do not say what completed (bnxt): filled in the way rdma-core's poll does it.
    posted: VecDeque<(u32, u32, WcOpcode, u32)>,
    _p: PhantomData<P>,
}

impl<P: Provider> Raw<P> {
    pub fn new(sq: P::Sq, cq: CqHandle) -> Self {
        Self {
            sq,
            cq,
            pos: SqPos::ZERO,
            ci: 0,
            posted: VecDeque::new(),
            _p: PhantomData,
        }
    }

    pub fn post(&mut self, wr: &WorkRequest<'_>, flags: SendFlags) -> Posted {
        P::check(&self.sq, wr).expect("request fits");
        // SAFETY: the handles are live for the test; this is the only producer; the ring has room
        // (raw tests post fewer WQEs than the ring holds between polls).
        let p = unsafe { P::post(&self.sq, self.pos, wr, flags) };
        // SAFETY: as above.
        unsafe { P::ring_sq(&self.sq, &p) };
        self.pos = p.next;
        let (op, bytes) = match wr {
            WorkRequest::Write { .. } | WorkRequest::Nop => (WcOpcode::RdmaWrite, 0),
            WorkRequest::Send { .. } => (WcOpcode::Send, 0),
            WorkRequest::Read { sges, .. } => {
                (WcOpcode::RdmaRead, sges.iter().map(|s| s.length).sum())
            }
            WorkRequest::Atomic {
                op:
                    gda::hal::AtomicOp::CompareSwap { .. }
                    | gda::hal::AtomicOp::MaskedCompareSwap { .. },
                bytes,
                ..
            } => (WcOpcode::CompSwap, *bytes),
            WorkRequest::Atomic { bytes, .. } => (WcOpcode::FetchAdd, *bytes),
        };
        self.posted
            .push_back((p.start.unit.0, p.next.unit.since(p.start.unit), op, bytes));
        p
    }

    /// Completes `wc` from the posting record when the CQE did not carry the opcode.
    fn fill(&mut self, mut wc: WorkCompletion) -> WorkCompletion {
        if wc.is_recv || wc.opcode != WcOpcode::Other || wc.status == WcStatus::WrFlushErr {
            return wc;
        }
        let unit = P::completed_unit(&self.sq, &wc);
        let mask = (1u64 << P::completion_bits(&self.sq).min(32)) - 1;
        while let Some((s, n, op, bytes)) = self.posted.pop_front() {
            if u64::from(unit.wrapping_sub(s)) & mask < u64::from(n) {
                wc.opcode = op;
                if wc.status == WcStatus::Success
                    && matches!(
                        op,
                        WcOpcode::RdmaRead | WcOpcode::CompSwap | WcOpcode::FetchAdd
                    )
                {
                    wc.byte_len = bytes;
                }
                break;
            }
        }
        wc
    }

    /// Waits for `n` completions (panics after 10 s).
    pub fn wait(&mut self, n: usize) -> Vec<WorkCompletion> {
        let w = poll_n::<P>(&self.cq, &mut self.ci, n);
        w.into_iter().map(|wc| self.fill(wc)).collect()
    }

    /// Completions that arrive within `d`.
    pub fn drain_for(&mut self, d: Duration) -> Vec<WorkCompletion> {
        let end = Instant::now() + d;
        let mut out = Vec::new();
        while Instant::now() < end {
            // SAFETY: the CQ is live and only this test polls it.
            if let Some(wc) = unsafe { P::poll_cq(&self.cq, self.ci) } {
                self.ci = self.ci.wrapping_add(1);
                // SAFETY: as above.
                unsafe { P::update_cq_ci(&self.cq, self.ci) };
                let wc = self.fill(wc);
                out.push(wc);
            } else {
                std::thread::yield_now();
            }
        }
        out
    }
}

pub fn poll_n<P: Provider>(cq: &CqHandle, ci: &mut u32, n: usize) -> Vec<WorkCompletion> {
    let end = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.len() < n {
        // SAFETY: the CQ is live and only this test polls it.
        if let Some(wc) = unsafe { P::poll_cq(cq, *ci) } {
            *ci = ci.wrapping_add(1);
            // SAFETY: as above.
            unsafe { P::update_cq_ci(cq, *ci) };
            out.push(wc);
        } else {
            assert!(
                Instant::now() < end,
                "timed out waiting for completion {} of {n}: got {out:?}",
                out.len() + 1
            );
            std::thread::yield_now();
        }
    }
    out
}

/// A receive queue and its CQ.
pub struct RecvQ<P: Provider> {
    pub rq: P::Rq,
    pub cq: CqHandle,
    pub pos: u32,
    pub ci: u32,
    _p: PhantomData<P>,
}

impl<P: Provider> RecvQ<P> {
    pub fn new(rq: P::Rq, cq: CqHandle) -> Self {
        Self {
            rq,
            cq,
            pos: 0,
            ci: 0,
            _p: PhantomData,
        }
    }

    pub fn post(&mut self, s: Sge) {
        // SAFETY: the RQ is live; slot `pos` is free (tests post fewer than the ring holds).
        unsafe {
            P::post_recv(&self.rq, ProdIdx(self.pos), &[s]);
            self.pos = self.pos.wrapping_add(1);
            P::ring_rq(&self.rq, ProdIdx(self.pos));
        }
    }

    pub fn wait(&mut self, n: usize) -> Vec<WorkCompletion> {
        poll_n::<P>(&self.cq, &mut self.ci, n)
    }
}

/// Deterministic pattern bytes.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Reads a whole region.
pub fn contents(mr: &Mr) -> Vec<u8> {
    let mut v = vec![0u8; mr.len()];
    mr.read(0, &mut v).unwrap();
    v
}

/// Decodes an atomic's fetched value as provider `P` returns it.
pub fn fetched<P: Provider>(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    match (P::ATOMIC_RESULT_BIG_ENDIAN, bytes.len()) {
        (true, 4) => u64::from(u32::from_be_bytes(b[..4].try_into().unwrap())),
        (true, _) => u64::from_be_bytes(b),
        (false, 4) => u64::from(u32::from_le_bytes(b[..4].try_into().unwrap())),
        (false, _) => u64::from_le_bytes(b),
    }
}
