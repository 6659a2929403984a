//! One measurement on any control-path device (`gda_hal::control::Device`): the software NIC's
//! `SimDevice`, or — `gda perf --device NAME`, feature `verbs` — a NIC opened through rdma-core
//! with its vendor's control path (a ConnectX: rings from `mlx5dv_init_obj`; a Thor2: rings laid
//! out by gda and given to `bnxt_re_dv_create_qp`). QPs are brought up through the seam and
//! gda's `SendQueue<P>` posts into the rings, so every NIC runs the same measurement.

use gda_hal::control::{
    CompletionQueue, CqAttr, Device, Endpoint, MemoryDesc, MemoryRegion, PathRequest, QpCaps,
};
use gda_hal::index::ProdIdx;
use gda_hal::op::AtomicOp;
use gda_hal::{Payload, Provider, QueueHandle, Remote, SendQueue, Sge, WorkRequest};

use super::{CqMode, PerfConfig, PerfError, PerfOp, PerfResult, measure};

fn dev_err(e: &dyn std::fmt::Display) -> PerfError {
    PerfError::Device(format!("device: {e}"))
}

/// A NIC opened through rdma-core, whatever its provider.
#[cfg(feature = "verbs")]
pub trait PerfDevice {
    /// One measurement of `cfg.op` at `size` bytes between two fresh QPs.
    fn run_size(&self, cfg: &PerfConfig, size: usize) -> Result<PerfResult, PerfError>;
}

#[cfg(feature = "verbs")]
impl<D> PerfDevice for D
where
    D: Device,
    D::Provider: gda_rdma::Host,
{
    fn run_size(&self, cfg: &PerfConfig, size: usize) -> Result<PerfResult, PerfError> {
        // One NIC in loopback: both QPs on it.
        run_on(
            self,
            self,
            cfg,
            size,
            <D::Provider as gda_rdma::Host>::LABEL,
            &|| {},
        )
    }
}

/// Opens `name` through rdma-core with the control path of its provider.
#[cfg(feature = "verbs")]
pub fn open(name: &str) -> Result<Box<dyn PerfDevice>, PerfError> {
    struct Boxed;
    impl gda_providers::host::OnDevice for Boxed {
        type Output = Box<dyn PerfDevice>;
        fn run<D>(self, d: D) -> Box<dyn PerfDevice>
        where
            D: Device + Send + Sync + 'static,
            D::Provider: gda_rdma::Host,
        {
            Box::new(d)
        }
    }
    crate::devices::open_rdma(Some(name), Boxed).map_err(|e| dev_err(&e))
}

/// One measurement of `cfg.op` at `size` bytes from a fresh QP of `a` to one of `b` (the same
/// device twice for a NIC in loopback; `label` names the provider in the result); `wake` is
/// called once the receives are posted, before the timed part (the software NIC's engine
/// wake-up; nothing on hardware).
pub(crate) fn run_on<D: Device>(
    a: &D,
    b: &D,
    cfg: &PerfConfig,
    size: usize,
    label: &'static str,
    wake: &dyn Fn(),
) -> Result<PerfResult, PerfError> {
    let size = if cfg.op == PerfOp::Atomic { 8 } else { size };
    let path_a = a.path(PathRequest::default()).map_err(|e| dev_err(&e))?;
    let path_b = b.path(PathRequest::default()).map_err(|e| dev_err(&e))?;
    let pd_a = a.alloc_pd().map_err(|e| dev_err(&e))?;
    let pd_b = b.alloc_pd().map_err(|e| dev_err(&e))?;
    let caps = QpCaps {
        send_wr: cfg.qd,
        recv_wr: 1024,
        max_sge: 1,
        max_inline: 0,
        ..QpCaps::default()
    };
    // The send CQ holds the whole send window; the receive CQ every posted receive.
    let cq_a = a
        .create_cq(&CqAttr {
            collapsed: cfg.cq == CqMode::Collapsed,
            // Twice the send ring (its whole window, with room to spare), at least 64.
            ..CqAttr::new((cfg.qd.next_power_of_two().max(4) * 2).max(64))
        })
        .map_err(|e| dev_err(&e))?;
    let cq_b = b.create_cq(&CqAttr::new(4096)).map_err(|e| dev_err(&e))?;
    let qa = a
        .create_rc_qp(&pd_a, &cq_a, &cq_a, &caps)
        .map_err(|e| dev_err(&e))?;
    let qb = b
        .create_rc_qp(&pd_b, &cq_b, &cq_b, &caps)
        .map_err(|e| dev_err(&e))?;
    let (ea, eb) = (qa.endpoint(&path_a), qb.endpoint(&path_b));
    let ea = Endpoint::from_bytes(&ea.to_bytes()).map_err(|e| dev_err(&e))?;
    let eb = Endpoint::from_bytes(&eb.to_bytes()).map_err(|e| dev_err(&e))?;
    let qa = qa.connect(&path_a, &eb).map_err(|r| dev_err(&r.error))?;
    let qb = qb.connect(&path_b, &ea).map_err(|r| dev_err(&r.error))?;
    let n = size.max(8);
    let (mut local, mut remote, mut rbuf) = (Buf::new(n), Buf::new(n), Buf::new(n));
    let access = gda_hal::control::Access::ALL;
    let host = |buf: &mut Buf| MemoryDesc::Host {
        addr: buf.as_mut_ptr(),
        len: n,
    };
    // SAFETY: the buffers outlive their regions and every operation on them (quiet at the end
    // of `measure`, before they are dropped).
    let (lmr, rmr, bmr) = unsafe {
        (
            a.register(&pd_a, &host(&mut local), access),
            b.register(&pd_b, &host(&mut remote), access),
            b.register(&pd_b, &host(&mut rbuf), access),
        )
    };
    let (lmr, rmr, bmr) = (
        lmr.map_err(|e| dev_err(&e))?,
        rmr.map_err(|e| dev_err(&e))?,
        bmr.map_err(|e| dev_err(&e))?,
    );
    let l = Sge {
        addr: lmr.addr(),
        length: size as u32,
        lkey: lmr.lkey(),
    };
    let r = Remote {
        addr: rmr.addr(),
        rkey: rmr.rkey(),
    };
    let sges = [l];
    let wr = match cfg.op {
        PerfOp::Write => WorkRequest::Write {
            remote: r,
            payload: Payload::Sges(&sges),
            imm: None,
        },
        PerfOp::Read => WorkRequest::Read {
            remote: r,
            sges: &sges,
        },
        PerfOp::Atomic => WorkRequest::Atomic {
            remote: r,
            local: l,
            op: AtomicOp::FetchAdd { add: 1 },
            bytes: 8,
        },
        PerfOp::Send => WorkRequest::Send {
            payload: Payload::Sges(&sges),
            imm: None,
        },
    };
    // Receives for SEND, kept topped up from the responder's CQ.
    let rq = qb.rq_handle().map_err(|e| dev_err(&e))?;
    let rcq = cq_b.handle();
    let rsge = [Sge {
        addr: bmr.addr(),
        length: size.max(1) as u32,
        lkey: bmr.lkey(),
    }];
    let (mut rpos, mut rci) = (0u32, 0u32);
    let mut top_up = || {
        if cfg.op != PerfOp::Send {
            return;
        }
        // SAFETY: the responder's RQ and CQ are live and only this closure uses them.
        unsafe {
            while D::Provider::poll_cq(&rcq, rci).is_some() {
                rci = rci.wrapping_add(1);
            }
            D::Provider::update_cq_ci(&rcq, rci);
            let mut posted = false;
            while rpos.wrapping_sub(rci) < rq.wq().entries {
                D::Provider::post_recv(&rq, ProdIdx(rpos), &rsge);
                rpos = rpos.wrapping_add(1);
                posted = true;
            }
            if posted {
                D::Provider::ring_rq(&rq, ProdIdx(rpos));
            }
        }
    };
    top_up();
    wake();
    // SAFETY: the QP and CQ outlive the queue, its only poster and poller.
    let sq = unsafe {
        SendQueue::<D::Provider>::new(
            qa.sq_handle().map_err(|e| dev_err(&e))?,
            cq_a.handle(),
            30_000,
        )
    }?;
    let out = measure(cfg, size, &wr, &sq, label, &mut top_up);
    drop((qa, qb));
    out
}

/// A page-aligned buffer with its pages already faulted in: what the NIC reads and writes in a
/// measurement (a `Vec` would sit 16 bytes past a page for large sizes, and its first touches
/// would be timed as page faults).
pub(crate) struct Buf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl Buf {
    pub(crate) fn new(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .unwrap_or_else(|_| std::alloc::Layout::new::<u64>());
        // SAFETY: a non-zero layout.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // Fault every page in now (zeroed pages may still be mapped lazily).
        for off in (0..layout.size()).step_by(4096) {
            // SAFETY: inside the allocation.
            unsafe { ptr.as_ptr().add(off).write_volatile(0) };
        }
        Self { ptr, layout }
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}
