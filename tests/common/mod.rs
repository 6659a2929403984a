//! Shared harness for the provider-generic conformance suite: a connected QP pair made through
//! the control-path seam on any device ([`Pair`] over a [`Rig`]: the software NIC, the
//! verbs-compatible library, real NICs), the software NIC's own pair for what only it shows
//! ([`SimPair`]: QP states, injected errors, CQ overruns), and raw (device-function level)
//! posting/polling.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gda::hal::control::{
    CompletionQueue, CqAttr, Device, MemoryDesc, MemoryRegion, PathRequest, QpCaps, RcQp, Rts,
};
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

/// Two connected QPs of the software NIC's own API: `a` (requester) on NIC 0, `b`
/// (responder) on NIC 1.
pub struct SimPair<P: Modeled> {
    pub fabric: Fabric,
    pub pd_a: Pd,
    pub pd_b: Pd,
    pub cq_a: Cq,
    pub rcq_b: Cq,
    pub a: Qp,
    pub b: Qp,
    /// `b`'s fabric when it is not `fabric` ([`SimPair::between_processes`]).
    _fabric_b: Option<Fabric>,
    _p: PhantomData<P>,
}

impl<P: Modeled> SimPair<P> {
    pub fn new(chaos: Option<u64>, mode: CqMode, init: QpInit) -> Self {
        Self::build(chaos, mode, init, false)
    }

    /// As [`SimPair::new`], with `a` and `b` on two process fabrics (`Fabric::process`): every
    /// request crosses the cross-process engine (`wire`), as between two processes.
    pub fn between_processes(chaos: Option<u64>, mode: CqMode, init: QpInit) -> Self {
        Self::build(chaos, mode, init, true)
    }

    fn build(chaos: Option<u64>, mode: CqMode, init: QpInit, processes: bool) -> Self {
        let m = model::<P>();
        let init = fit(&*m, init);
        let config = || FabricConfig { chaos };
        let (fabric, fabric_b) = if processes {
            let a = Fabric::process(config()).expect("a process fabric");
            let b = Fabric::process(config()).expect("a process fabric");
            (a, Some(b))
        } else {
            (Fabric::new(config()), None)
        };
        let na = fabric.add_shared_model_nic(m.clone());
        let nb = fabric_b.as_ref().unwrap_or(&fabric).add_shared_model_nic(m);
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
            _fabric_b: fabric_b,
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

pub fn sge(mr: &impl Mem, off: u64, len: u32) -> Sge {
    Sge {
        addr: mr.addr() + off,
        length: len,
        lkey: mr.lkey(),
    }
}

pub fn remote(mr: &impl Mem, off: u64) -> gda::hal::Remote {
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
pub fn contents(mr: &impl Mem) -> Vec<u8> {
    let mut v = vec![0u8; Mem::len(mr)];
    Mem::read(mr, 0, &mut v);
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

/// Memory a test reads and writes and a NIC reaches: a software-NIC region ([`Mr`]) or a host
/// buffer registered through the control path ([`Region`]).
pub trait Mem {
    fn addr(&self) -> u64;
    fn lkey(&self) -> u32;
    fn rkey(&self) -> u32;
    fn len(&self) -> usize;
    fn read(&self, off: usize, out: &mut [u8]);
}

impl Mem for Mr {
    fn addr(&self) -> u64 {
        Mr::addr(self)
    }
    fn lkey(&self) -> u32 {
        Mr::lkey(self)
    }
    fn rkey(&self) -> u32 {
        Mr::rkey(self)
    }
    fn len(&self) -> usize {
        Mr::len(self)
    }
    fn read(&self, off: usize, out: &mut [u8]) {
        Mr::read(self, off, out).unwrap();
    }
}

/// How a test gets two devices to connect a QP pair on: software NICs, the verbs-compatible
/// library's devices, or a real NIC (the same device twice, in loopback).
pub trait Rig: 'static {
    /// The provider whose device functions post to the QPs.
    type P: Provider<Rq = gda::hal::WqHandle>;
    /// The control-path device.
    type D: Device<Provider = Self::P>;
    /// The requester's and the responder's device; `chaos` seeds a software NIC's chaos mode
    /// (other devices ignore it).
    fn devices(chaos: Option<u64>) -> (Arc<Self::D>, Arc<Self::D>);
}

/// Two software NICs of `P`'s model (or the one [`with_model`] set), on one fabric.
pub struct SimRig<P>(PhantomData<P>);

impl<P: Modeled> Rig for SimRig<P>
where
    P: Provider<Rq = gda::hal::WqHandle>,
{
    type P = P;
    type D = gda::sim::SimDevice<P>;
    fn devices(chaos: Option<u64>) -> (Arc<Self::D>, Arc<Self::D>) {
        let m = model::<P>();
        let f = Fabric::new(FabricConfig { chaos });
        let dev =
            |m: Model| Arc::new(gda::sim::SimDevice::<P>::on(f.add_shared_model_nic(m)).unwrap());
        (dev(m.clone()), dev(m))
    }
}

/// The verbs-compatible library's device of provider `H` (`gda_<name>_0`), opened through
/// rdma-core's ABI with `H`'s own control path, in loopback.
#[cfg(feature = "verbs")]
pub struct VerbsRig<H>(PhantomData<H>);

#[cfg(feature = "verbs")]
impl<H: gda_rdma::Host<Rq = gda::hal::WqHandle>> Rig for VerbsRig<H> {
    type P = H;
    type D = H::Device;
    fn devices(_chaos: Option<u64>) -> (Arc<Self::D>, Arc<Self::D>) {
        let exe = std::env::current_exe().unwrap();
        let lib = exe
            .parent()
            .and_then(std::path::Path::parent)
            .unwrap()
            .join("verbs-sim/libibverbs.so.1");
        let verbs = Arc::new(gda_rdma::Verbs::load_from(&lib).unwrap());
        let name = format!("gda_{}_0", H::NAME);
        let ctx = gda_rdma::Context::open(verbs, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let d = Arc::new(H::on(ctx).unwrap_or_else(|e| panic!("{name}: {e}")));
        (d.clone(), d)
    }
}

/// The real NIC `GDA_HW_DEVICE` names, of provider `H`, through the system's rdma-core, in
/// loopback (the hardware twin of the suite; its tests are ignored).
#[cfg(feature = "verbs")]
pub struct HwRig<H>(PhantomData<H>);

#[cfg(feature = "verbs")]
impl<H: gda_rdma::Host<Rq = gda::hal::WqHandle>> Rig for HwRig<H> {
    type P = H;
    type D = H::Device;
    fn devices(_chaos: Option<u64>) -> (Arc<Self::D>, Arc<Self::D>) {
        let name = std::env::var("GDA_HW_DEVICE").expect("GDA_HW_DEVICE names the NIC to use");
        let verbs = Arc::new(gda_rdma::Verbs::load().unwrap_or_else(|e| panic!("{e}")));
        let ctx = gda_rdma::Context::open(verbs, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let d = Arc::new(H::on(ctx).unwrap_or_else(|e| panic!("{name}: {e}")));
        (d.clone(), d)
    }
}

type Connected<R> = RcQp<<<R as Rig>::D as Device>::Qp, Rts>;

/// Two connected QPs made through the control path: `qa` (requester) on device `a`, `qb`
/// (responder) on device `b`. Fields drop in order: QPs, CQs, PDs, devices.
pub struct Pair<R: Rig> {
    pub qa: Connected<R>,
    pub qb: Connected<R>,
    pub cq_a: <R::D as Device>::Cq,
    pub rcq_a: <R::D as Device>::Cq,
    pub scq_b: <R::D as Device>::Cq,
    pub rcq_b: <R::D as Device>::Cq,
    pub pd_a: <R::D as Device>::Pd,
    pub pd_b: <R::D as Device>::Pd,
    pub a: Arc<R::D>,
    pub b: Arc<R::D>,
}

impl<R: Rig> Pair<R> {
    /// `chaos` for a software NIC, a collapsed requester CQ if `collapsed`; `caps` narrowed to
    /// the gather entries the device accepts (bnxt's fixed three-slot WQEs carry one): the
    /// device is asked, no vendor is named.
    pub fn new(chaos: Option<u64>, collapsed: bool, caps: QpCaps) -> Self {
        Self::supported(chaos, collapsed, caps).expect("the device has collapsed CQs")
    }

    /// As [`Pair::new`], or `None` when `collapsed` is asked of a device that has no collapsed
    /// CQs (bnxt's control path refuses them, as the hardware has none).
    pub fn supported(chaos: Option<u64>, collapsed: bool, caps: QpCaps) -> Option<Self> {
        let (a, b) = R::devices(chaos);
        let (path_a, path_b) = (
            a.path(PathRequest::default()).unwrap(),
            b.path(PathRequest::default()).unwrap(),
        );
        let (pd_a, pd_b) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
        let cq_a = match a.create_cq(&CqAttr {
            collapsed,
            ..CqAttr::new(1024)
        }) {
            Ok(cq) => cq,
            Err(e)
                if collapsed && gda::hal::Error::kind(&e) == gda::hal::ErrorKind::Unsupported =>
            {
                return None;
            }
            Err(e) => panic!("create CQ: {e}"),
        };
        let rcq_a = a.create_cq(&CqAttr::new(64)).unwrap();
        let scq_b = b.create_cq(&CqAttr::new(64)).unwrap();
        let rcq_b = b.create_cq(&CqAttr::new(1024)).unwrap();
        let mut caps = caps;
        let qa = loop {
            match a.create_rc_qp(&pd_a, &cq_a, &rcq_a, &caps) {
                Ok(q) => break q,
                Err(_) if caps.max_sge > 1 => caps.max_sge -= 1,
                Err(e) => panic!("create QP: {e}"),
            }
        };
        let qb = b.create_rc_qp(&pd_b, &scq_b, &rcq_b, &caps).unwrap();
        let (ea, eb) = (qa.endpoint(&path_a), qb.endpoint(&path_b));
        let qa = qa.connect(&path_a, &eb).map_err(|r| r.error).unwrap();
        let qb = qb.connect(&path_b, &ea).map_err(|r| r.error).unwrap();
        Some(Self {
            qa,
            qb,
            cq_a,
            rcq_a,
            scq_b,
            rcq_b,
            pd_a,
            pd_b,
            a,
            b,
        })
    }

    pub fn simple() -> Self {
        Self::new(None, false, QpCaps::default())
    }

    pub fn raw_a(&self) -> Raw<R::P> {
        Raw::new(self.qa.sq_handle().unwrap(), self.cq_a.handle())
    }

    pub fn recv_b(&self) -> RecvQ<R::P> {
        RecvQ::new(self.qb.rq_handle().unwrap(), self.rcq_b.handle())
    }

    pub fn mr_a(&self, len: usize, access: Access) -> Region<R::D> {
        Region::new(&*self.a, &self.pd_a, len, access)
    }

    pub fn mr_b(&self, len: usize, access: Access) -> Region<R::D> {
        Region::new(&*self.b, &self.pd_b, len, access)
    }
}

/// A zeroed, page-aligned host buffer registered through the control path; the region goes
/// before the memory.
pub struct Region<D: Device> {
    mr: Option<D::Mr>,
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl<D: Device> Region<D> {
    /// `len` bytes with `access` (plus `LOCAL_WRITE` where remote writes or atomics need it,
    /// as verbs requires).
    pub fn new(dev: &D, pd: &D::Pd, len: usize, access: Access) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096).unwrap();
        // SAFETY: a non-zero layout.
        let ptr = std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).unwrap();
        let access = if access.intersects(Access::NEEDS_LOCAL_WRITE) {
            access | Access::LOCAL_WRITE
        } else {
            access
        };
        let desc = MemoryDesc::Host {
            addr: ptr.as_ptr(),
            len: layout.size(),
        };
        // SAFETY: the memory lives until `drop`, which deregisters first.
        let mr = unsafe { dev.register(pd, &desc, access) }.unwrap();
        Self {
            mr: Some(mr),
            ptr,
            layout,
        }
    }

    fn mr(&self) -> &D::Mr {
        self.mr.as_ref().unwrap()
    }

    /// Copies `data` in at `off`.
    pub fn write(&self, off: usize, data: &[u8]) -> Result<(), String> {
        if off + data.len() > self.layout.size() {
            return Err(format!("{off}+{} past {}", data.len(), self.layout.size()));
        }
        // SAFETY: inside the buffer; the NIC is not writing these bytes now (the test's order).
        unsafe { gda::hal::sym::sym_copy(self.ptr.as_ptr().add(off), data.as_ptr(), data.len()) };
        Ok(())
    }

    /// Copies `out.len()` bytes out from `off`.
    pub fn read(&self, off: usize, out: &mut [u8]) -> Result<(), String> {
        if off + out.len() > self.layout.size() {
            return Err(format!("{off}+{} past {}", out.len(), self.layout.size()));
        }
        // SAFETY: inside the buffer.
        unsafe { gda::hal::sym::sym_copy(out.as_mut_ptr(), self.ptr.as_ptr().add(off), out.len()) };
        Ok(())
    }
}

// SAFETY: the buffer is plain memory only `write`/`read` (copies through `hal::sym`) and the
// NIC touch; the region (`D::Mr`) is `Send + Sync` as every control-path object is.
unsafe impl<D: Device> Send for Region<D> {}
// SAFETY: as above.
unsafe impl<D: Device> Sync for Region<D> {}

impl<D: Device> Mem for Region<D> {
    fn addr(&self) -> u64 {
        self.mr().addr()
    }
    fn lkey(&self) -> u32 {
        self.mr().lkey()
    }
    fn rkey(&self) -> u32 {
        self.mr().rkey()
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
    fn read(&self, off: usize, out: &mut [u8]) {
        Region::read(self, off, out).unwrap();
    }
}

impl<D: Device> Drop for Region<D> {
    fn drop(&mut self) {
        drop(self.mr.take());
        // SAFETY: allocated in `new` with this layout; the region is gone.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}
