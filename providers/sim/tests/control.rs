//! The software NIC behind the host control-path seam (`gda_hal::control`): written against
//! the `Device` trait only, so the same checks apply to any implementation.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gda_hal::control::{
    Access, ControlError, CqAttr, Device, Endpoint, Gid, GidType, InitAttr, MemoryDesc, Mtu,
    PathRequest, QpCaps, QueueAllocator, QueueBuffer, QueueMemory, RawRcQp, RtrAttr, RtsAttr,
};
use gda_hal::{Payload, QueueHandle, Remote, SendFlags, SendQueue, WorkRequest};
use gda_sim::{Fabric, FabricConfig, Modeled, SimDevice, SimError};

/// Two devices of `P`'s model connected by the typed transitions, endpoints exchanged as
/// bytes; an inline RDMA WRITE from one lands in the other's region.
fn write_between<P: Modeled>() -> usize {
    let fabric = Fabric::new(FabricConfig::default());
    let (a, b) = (SimDevice::<P>::new(&fabric), SimDevice::<P>::new(&fabric));
    let path_a = a.path(PathRequest::default()).unwrap();
    let path_b = b.path(PathRequest::default()).unwrap();
    // RoCE v2 is chosen over the same address's RoCE v1 entry.
    assert_eq!((path_a.gid.index, path_a.gid.kind), (1, GidType::RoceV2));
    assert_eq!(path_a.mtu, Mtu::B4096);

    let (pd_a, pd_b) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (cq_a, cq_b) = (
        a.create_cq(&CqAttr::new(256)).unwrap(),
        b.create_cq(&CqAttr::new(256)).unwrap(),
    );
    let caps = QpCaps::default();
    let qa = a.create_rc_qp(&pd_a, &cq_a, &cq_a, &caps).unwrap();
    let qb = b.create_rc_qp(&pd_b, &cq_b, &cq_b, &caps).unwrap();
    let ep_a = Endpoint::from_bytes(&qa.endpoint(&path_a).to_bytes()).unwrap();
    let ep_b = Endpoint::from_bytes(&qb.endpoint(&path_b).to_bytes()).unwrap();
    let qa = qa.connect(&path_a, &ep_b).map_err(|r| r.error).unwrap();
    let _qb = qb.connect(&path_b, &ep_a).map_err(|r| r.error).unwrap();

    let mut dst = vec![0u8; 64];
    // SAFETY: `dst` outlives the region and every operation on it (the queue is quiet below).
    let mr = unsafe {
        b.register(
            &pd_b,
            &MemoryDesc::Host {
                addr: dst.as_mut_ptr(),
                len: dst.len(),
            },
            Access::ALL,
        )
    }
    .unwrap();
    // SAFETY: the QP and CQ outlive the queue, its only poster and poller.
    let sq = unsafe { SendQueue::<P>::new(qa.sq_handle().unwrap(), cq_a.handle(), 5_000) }.unwrap();
    let wr = WorkRequest::Write {
        remote: Remote {
            addr: mr.addr(),
            rkey: mr.rkey(),
        },
        payload: Payload::Inline(b"over the seam"),
        imm: None,
    };
    sq.post(&wr, SendFlags::empty()).unwrap();
    sq.quiet().unwrap();
    assert_eq!(&dst[..13], b"over the seam");
    drop(mr);
    1
}

#[test]
fn every_model_connects_and_writes_through_the_seam() {
    let n = write_between::<gda_native::Native>()
        + write_between::<gda_mlx5::Mlx5>()
        + write_between::<gda_bnxt::Bnxt>();
    assert_eq!(n, 3);
}

#[test]
fn refused_transitions_hand_the_qp_back() {
    let fabric = Fabric::new(FabricConfig::default());
    let dev = SimDevice::<gda_native::Native>::new(&fabric);
    let path = dev.path(PathRequest::default()).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(&CqAttr::new(16)).unwrap();
    let qp = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let me = qp.endpoint(&path);
    let mut refused = 0;

    let mut init = InitAttr::new(&path);
    init.port = 2;
    let qp = match qp.init(&init) {
        Ok(_) => panic!("port 2 accepted"),
        Err(r) => {
            assert!(r.error.to_string().contains("port 2"), "{}", r.error);
            refused += 1;
            r.qp
        }
    };
    assert_eq!(qp.state(), "RESET");
    let qp = qp.init(&InitAttr::new(&path)).unwrap();

    // A GID that is not a software NIC's.
    let mut stranger = me;
    stranger.gid = Gid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 9]);
    let qp = match qp.rtr(&RtrAttr::new(&path, &stranger).unwrap()) {
        Ok(_) => panic!("foreign GID accepted"),
        Err(r) => {
            refused += 1;
            r.qp
        }
    };
    // A source GID the port does not have.
    let mut unpopulated = RtrAttr::new(&path, &me).unwrap();
    unpopulated.sgid_index = 9;
    let qp = qp
        .rtr(&unpopulated)
        .map(|_| ())
        .map_err(|r| r.qp)
        .unwrap_err();
    refused += 1;
    let qp = qp.rtr(&RtrAttr::new(&path, &me).unwrap()).unwrap(); // loopback

    let wide_psn = RtsAttr::new(1 << 24);
    let qp = qp.rts(&wide_psn).map(|_| ()).map_err(|r| r.qp).unwrap_err();
    refused += 1;
    let mut bad = RtsAttr::new(qp.raw().send_psn());
    bad.retry_cnt = 8;
    let qp = match qp.rts(&bad) {
        Ok(_) => panic!("retry_cnt 8 accepted"),
        Err(r) => {
            assert!(matches!(
                r.error,
                SimError::Control(ControlError::Invalid(_))
            ));
            refused += 1;
            r.qp
        }
    };
    let qp = qp.rts(&RtsAttr::new(me.psn)).unwrap();
    assert_eq!(qp.state(), "RTS");
    assert_eq!(qp.raw().qp().state(), gda_sim::QpState::Rts);
    assert_eq!(refused, 5);

    // What verbs programs pass is taken: a path MTU below the port's, and a send PSN of the
    // program's choosing (what the peer was told as its rq_psn).
    let other = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let mut small = RtrAttr::new(&path, &me).unwrap();
    small.path_mtu = Mtu::B1024;
    let other = other.init(&InitAttr::new(&path)).unwrap();
    let other = other.rtr(&small).unwrap();
    let psn = other.raw().send_psn() ^ 0x5a5a;
    let other = other.rts(&RtsAttr::new(psn)).unwrap();
    assert_eq!(other.raw().qp().state(), gda_sim::QpState::Rts);
}

#[test]
fn registration_checks_rights_and_memory_kinds() {
    let fabric = Fabric::new(FabricConfig::default());
    let dev = SimDevice::<gda_native::Native>::new(&fabric);
    let pd = dev.alloc_pd().unwrap();
    let mut buf = [0u8; 64];
    let host = MemoryDesc::Host {
        addr: buf.as_mut_ptr(),
        len: buf.len(),
    };
    // SAFETY: `buf` outlives the region, which is never used.
    let e = unsafe { dev.register(&pd, &host, Access::REMOTE_WRITE) }.unwrap_err();
    assert!(e.to_string().contains("LOCAL_WRITE"), "{e}");
    let dmabuf = MemoryDesc::DmaBuf {
        fd: -1,
        offset: 0,
        len: 64,
        iova: 0,
    };
    // SAFETY: refused before any memory is touched.
    let e = unsafe { dev.register(&pd, &dmabuf, Access::ALL) }.unwrap_err();
    assert_eq!(gda_hal::Error::kind(&e), gda_hal::ErrorKind::Unsupported);
    let other = SimDevice::<gda_native::Native>::new(&fabric);
    let foreign_pd = other.alloc_pd().unwrap();
    // SAFETY: as the first.
    assert!(unsafe { dev.register(&foreign_pd, &host, Access::ALL) }.is_err());
}

/// Hands out zeroed heap blocks and remembers which are live.
#[derive(Debug, Default)]
struct Counting {
    live: Mutex<Vec<(usize, usize, QueueBuffer)>>,
    allocs: AtomicUsize,
    frees: AtomicUsize,
    misalign: bool,
}

impl QueueAllocator for Counting {
    fn alloc(&self, what: QueueBuffer, len: usize, align: usize) -> Option<NonNull<u8>> {
        let layout = Layout::from_size_align(len + 64, align.max(128)).ok()?;
        // SAFETY: non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let p = NonNull::new(p)?;
        let p = if self.misalign {
            // SAFETY: inside the allocation (64 spare bytes).
            unsafe { p.add(8) }
        } else {
            p
        };
        self.allocs.fetch_add(1, Ordering::Relaxed);
        self.live
            .lock()
            .unwrap()
            .push((p.as_ptr() as usize, len, what));
        Some(p)
    }

    unsafe fn free(&self, what: QueueBuffer, ptr: NonNull<u8>, len: usize) {
        let mut live = self.live.lock().unwrap();
        let i = live
            .iter()
            .position(|&(p, l, w)| p == ptr.as_ptr() as usize && l == len && w == what)
            .expect("freeing what was allocated");
        live.swap_remove(i);
        self.frees.fetch_add(1, Ordering::Relaxed);
        let base = if self.misalign {
            // SAFETY: undoes the offset of `alloc`.
            unsafe { ptr.sub(8) }
        } else {
            ptr
        };
        let layout = Layout::from_size_align(len + 64, 128).unwrap();
        // SAFETY: allocated in `alloc` with this layout.
        unsafe { std::alloc::dealloc(base.as_ptr(), layout) };
    }
}

/// A CQ of 256 entries and an RC QP on it, both with their rings in `memory`.
fn queues_in<D: Device>(
    dev: &D,
    pd: &D::Pd,
    memory: &QueueMemory,
) -> (
    D::Cq,
    gda_hal::control::RcQp<D::Qp, gda_hal::control::Reset>,
)
where
    D::Error: std::fmt::Debug,
{
    let cq = dev
        .create_cq(&CqAttr {
            memory: memory.clone(),
            ..CqAttr::new(256)
        })
        .unwrap();
    let qp = dev
        .create_rc_qp(
            pd,
            &cq,
            &cq,
            &QpCaps {
                memory: memory.clone(),
                ..QpCaps::default()
            },
        )
        .unwrap();
    (cq, qp)
}

#[test]
fn rings_live_in_caller_memory_and_go_back_to_it() {
    let alloc = Arc::new(Counting::default());
    let memory = QueueMemory::Caller(alloc.clone());
    {
        let fabric = Fabric::new(FabricConfig::default());
        let dev = SimDevice::<gda_mlx5::Mlx5>::new(&fabric);
        let pd = dev.alloc_pd().unwrap();
        let (cq, qp) = queues_in(&dev, &pd, &memory);
        let live = alloc.live.lock().unwrap().clone();
        let kinds: Vec<_> = live.iter().map(|l| l.2).collect();
        assert_eq!(
            kinds,
            [
                QueueBuffer::CompletionQueue,
                QueueBuffer::DoorbellRecord,
                QueueBuffer::SendQueue,
                QueueBuffer::RecvQueue,
                QueueBuffer::DoorbellRecord
            ]
        );
        // The handles device code gets point into those blocks.
        let inside = |addr: u64| {
            live.iter()
                .any(|&(p, l, _)| (p as u64..(p + l) as u64).contains(&addr))
        };
        let sq = qp.sq_handle().unwrap();
        assert!(inside(sq.wq().buf) && inside(sq.wq().dbrec));
        let h = cq.handle();
        assert!(inside(h.buf) && inside(h.dbrec));
        // Loopback traffic runs on them.
        let path = dev.path(PathRequest::default()).unwrap();
        let ep = qp.endpoint(&path);
        let qp = qp.connect(&path, &ep).map_err(|r| r.error).unwrap();
        let mut dst = [0u8; 8];
        // SAFETY: `dst` outlives the region and the quiet write below.
        let mr = unsafe {
            dev.register(
                &pd,
                &MemoryDesc::Host {
                    addr: dst.as_mut_ptr(),
                    len: 8,
                },
                Access::ALL,
            )
        }
        .unwrap();
        // SAFETY: the QP and CQ outlive the queue.
        let sq = unsafe {
            SendQueue::<gda_mlx5::Mlx5>::new(qp.sq_handle().unwrap(), cq.handle(), 5_000)
        }
        .unwrap();
        let wr = WorkRequest::Write {
            remote: Remote {
                addr: mr.addr(),
                rkey: mr.rkey(),
            },
            payload: Payload::Inline(&[7; 8]),
            imm: None,
        };
        sq.post(&wr, SendFlags::empty()).unwrap();
        sq.quiet().unwrap();
        assert_eq!(dst, [7; 8]);
    }
    assert_eq!(alloc.allocs.load(Ordering::Relaxed), 5);
    // The engine thread may hold the last reference for one more scan: the rings go back when
    // it lets go (bounded wait).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alloc.frees.load(Ordering::Relaxed) < 5 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        alloc.frees.load(Ordering::Relaxed),
        5,
        "every ring went back"
    );
    assert!(alloc.live.lock().unwrap().is_empty());
}

/// On a process fabric, program threads run engine passes (`Fabric::progress`) over a shared
/// snapshot of the QPs; a destroyed QP's rings still go back to their allocator before the
/// destroy returns (the snapshot let go of it), as verbs promises. (Before, the snapshot kept
/// the QP until the next pass: every destroy waited out its 2 s bound and leaked the rings.)
#[test]
fn a_destroyed_qps_rings_go_back_at_once_after_program_passes() {
    let alloc = Arc::new(Counting::default());
    let memory = QueueMemory::Caller(alloc.clone());
    let fabric = Fabric::process(FabricConfig::default()).unwrap();
    let dev = SimDevice::<gda_mlx5::Mlx5>::new(&fabric);
    let pd = dev.alloc_pd().unwrap();
    let (cq, qp) = queues_in(&dev, &pd, &memory);
    assert_eq!(alloc.allocs.load(Ordering::Relaxed), 5);
    // A program thread's pass, as the verbs library runs on every post and empty poll.
    fabric.progress();
    let t = std::time::Instant::now();
    drop(qp);
    // The QP's send queue, receive queue and doorbell record, at once; the CQ's are live.
    assert_eq!(
        alloc.frees.load(Ordering::Relaxed),
        3,
        "the destroy returned after {:?} with the rings still out",
        t.elapsed()
    );
    drop(cq);
    assert_eq!(alloc.frees.load(Ordering::Relaxed), 5);
}

#[test]
fn a_refusing_or_misaligning_allocator_is_a_clear_error() {
    #[derive(Debug)]
    struct Refuses;
    impl QueueAllocator for Refuses {
        fn alloc(&self, _: QueueBuffer, _: usize, _: usize) -> Option<NonNull<u8>> {
            None
        }
        unsafe fn free(&self, _: QueueBuffer, _: NonNull<u8>, _: usize) {
            unreachable!("nothing was allocated")
        }
    }
    let fabric = Fabric::new(FabricConfig::default());
    let dev = SimDevice::<gda_native::Native>::new(&fabric);
    let e = dev
        .create_cq(&CqAttr {
            memory: QueueMemory::Caller(Arc::new(Refuses)),
            ..CqAttr::new(16)
        })
        .unwrap_err();
    assert!(e.to_string().contains("CompletionQueue"), "{e}");

    let skew = Arc::new(Counting {
        misalign: true,
        ..Counting::default()
    });
    let e = dev
        .create_cq(&CqAttr {
            memory: QueueMemory::Caller(skew.clone()),
            ..CqAttr::new(16)
        })
        .unwrap_err();
    assert!(e.to_string().contains("aligned"), "{e}");
    assert_eq!(
        skew.frees.load(Ordering::Relaxed),
        skew.allocs.load(Ordering::Relaxed),
        "a refused block is handed back"
    );
}
