//! The cross-process fabric: two `Fabric::shared` instances of one job reach each other only
//! through their shared registries and segments (never through in-process tables), so two of
//! them in one test process exercise exactly the cross-process path. gda-shmem's process tests
//! run it between real processes.

use gda_hal::{
    AtomicOp, Payload, Remote, SendFlags, SendQueue, Sge, SqError, WcStatus, WorkRequest,
};
use gda_mlx5::model::Mlx5Model;
use gda_native::model::NativeModel;
use gda_os::shm::{self, Segment};
use gda_sim::{Access, CqMode, Fabric, FabricConfig, QpInit, SimError};

/// The job's object names under a key every side of the test shares.
fn names(job: &str) -> gda_os::shm::JobNames {
    gda_os::shm::JobNames::new(job, [7; 32]).unwrap()
}

fn job(tag: &str) -> String {
    format!("simhost{}{tag}", std::process::id())
}

/// Removes a test job's shared-memory names however the test ends.
struct Sweep(String);

impl Drop for Sweep {
    fn drop(&mut self) {
        let _ = shm::sweep(&self.0);
    }
}

struct Side {
    fabric: Fabric,
    seg: Segment,
    mr: gda_sim::Mr,
    qp: gda_sim::Qp,
    cq: gda_sim::Cq,
}

fn side(job: &str, rank: u32, model: impl gda_sim::DeviceModel) -> Side {
    let fabric = Fabric::shared(FabricConfig::default(), &names(job), rank).unwrap();
    let nic = fabric.add_nic(model);
    let pd = nic.alloc_pd();
    let seg = Segment::create(job, &format!("heap{rank}"), 1 << 16).unwrap();
    // SAFETY: the segment outlives the region (both live in `Side`, the region dropped first).
    let mr =
        unsafe { pd.register_shared(seg.as_ptr() as u64, 1 << 16, Access::ALL, &seg, 0) }.unwrap();
    let cq = nic.create_cq(256, CqMode::Normal).unwrap();
    let qp = pd.create_qp(QpInit::default(), &cq, &cq).unwrap();
    Side {
        fabric,
        seg,
        mr,
        qp,
        cq,
    }
}

fn sq(s: &Side) -> SendQueue<gda_native::Native> {
    // SAFETY: the QP and CQ outlive the queue in every test below.
    unsafe {
        SendQueue::new(
            s.qp.sq_handle::<gda_native::Native>().unwrap(),
            s.cq.handle(),
            5_000,
        )
    }
    .unwrap()
}

#[test]
fn write_read_atomics_across_fabrics() {
    let job = job("a");
    let _sweep = Sweep(job.clone());
    let a = side(&job, 0, NativeModel);
    let b = side(&job, 1, NativeModel);
    a.qp.bring_up(&b.qp.endpoint()).unwrap();
    b.qp.bring_up(&a.qp.endpoint()).unwrap();
    // Every process has mapped what it needs: the names can go.
    for s in [&a, &b] {
        s.fabric.unlink_registry().unwrap();
        s.seg.unlink().unwrap();
    }
    assert!(shm::list(&job).unwrap().is_empty());
    let q = sq(&a);
    let rb = Remote {
        addr: b.mr.addr() + 128,
        rkey: b.mr.rkey(),
    };
    q.post(
        &WorkRequest::Write {
            remote: rb,
            payload: Payload::Inline(b"across processes"),
            imm: None,
        },
        SendFlags::empty(),
    )
    .unwrap();
    // READ it back into A's region, then fetch-add on B.
    let la = |off: u64, len: u32| Sge {
        addr: a.mr.addr() + off,
        length: len,
        lkey: a.mr.lkey(),
    };
    q.post(
        &WorkRequest::Read {
            remote: rb,
            sges: &[la(0, 16)],
        },
        SendFlags::empty(),
    )
    .unwrap();
    q.post(
        &WorkRequest::Atomic {
            remote: Remote {
                addr: b.mr.addr() + 1024,
                rkey: b.mr.rkey(),
            },
            op: AtomicOp::FetchAdd { add: 5 },
            bytes: 8,
            local: la(64, 8),
        },
        SendFlags::FENCE,
    )
    .unwrap();
    q.quiet().unwrap();
    let mut got = [0u8; 16];
    b.mr.read(128, &mut got).unwrap();
    assert_eq!(&got, b"across processes");
    a.mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"across processes");
    let mut v = [0u8; 8];
    b.mr.read(1024, &mut v).unwrap();
    assert_eq!(u64::from_le_bytes(v), 5);
}

#[test]
fn remote_checks_and_two_sided_refusal() {
    let job = job("b");
    let _sweep = Sweep(job.clone());
    let a = side(&job, 0, Mlx5Model);
    let b = side(&job, 1, NativeModel);
    a.qp.bring_up(&b.qp.endpoint()).unwrap();
    b.qp.bring_up(&a.qp.endpoint()).unwrap();
    // A forged rkey, and a range crossing the region's end: REM_ACCESS_ERR, nothing written.
    for (i, (flip, off)) in [(1u32, 0u64), (0, (1 << 16) - 4)].into_iter().enumerate() {
        let job = format!("{job}k{i}");
        let _sweep = Sweep(job.clone());
        let c = side(&job, 0, Mlx5Model);
        let d = side(&job, 1, NativeModel);
        c.qp.bring_up(&d.qp.endpoint()).unwrap();
        d.qp.bring_up(&c.qp.endpoint()).unwrap();
        let q = unsafe_sq::<gda_mlx5::Mlx5>(&c);
        q.post(
            &WorkRequest::Write {
                remote: Remote {
                    addr: d.mr.addr() + off,
                    rkey: d.mr.rkey() ^ flip,
                },
                payload: Payload::Inline(&[7u8; 8]),
                imm: None,
            },
            SendFlags::empty(),
        )
        .unwrap();
        match q.quiet() {
            Err(SqError::Completion { status, .. }) => {
                assert_eq!(status, WcStatus::RemAccessErr);
            }
            other => panic!("expected REM_ACCESS_ERR, got {other:?}"),
        }
        let mut v = vec![0u8; 1 << 16];
        d.mr.read(0, &mut v).unwrap();
        assert!(v.iter().all(|&x| x == 0), "a refused access writes nothing");
    }
    // SEND needs the peer's receive queue: refused across processes.
    let q = unsafe_sq::<gda_mlx5::Mlx5>(&a);
    q.post(
        &WorkRequest::Send {
            payload: Payload::Inline(b"hi"),
            imm: None,
        },
        SendFlags::empty(),
    )
    .unwrap();
    match q.quiet() {
        Err(SqError::Completion { status, .. }) => assert_eq!(status, WcStatus::RemInvReqErr),
        other => panic!("expected REM_INV_REQ_ERR, got {other:?}"),
    }
}

fn unsafe_sq<P: gda_sim::Modeled>(s: &Side) -> SendQueue<P> {
    // SAFETY: the QP and CQ outlive the queue.
    unsafe { SendQueue::new(s.qp.sq_handle::<P>().unwrap(), s.cq.handle(), 5_000) }.unwrap()
}

#[test]
fn a_vanished_responder_stops_answering() {
    let job = job("c");
    let _sweep = Sweep(job.clone());
    let a = side(&job, 0, NativeModel);
    let b = side(&job, 1, NativeModel);
    a.qp.bring_up(&b.qp.endpoint()).unwrap();
    b.qp.bring_up(&a.qp.endpoint()).unwrap();
    let ep = b.qp.endpoint();
    drop(b);
    let q = sq(&a);
    q.post(
        &WorkRequest::Write {
            remote: Remote {
                addr: 0x1000,
                rkey: 1,
            },
            payload: Payload::Inline(b"x"),
            imm: None,
        },
        SendFlags::empty(),
    )
    .unwrap();
    match q.quiet() {
        Err(SqError::Completion { status, .. }) => assert_eq!(status, WcStatus::RetryExcErr),
        other => panic!("expected RETRY_EXC_ERR, got {other:?}"),
    }
    // Connecting to a rank whose registry is gone is a clear error.
    let _sweep_z = Sweep(format!("{job}z"));
    let c = side(&format!("{job}z"), 0, NativeModel);
    let e = c.qp.bring_up(&ep).unwrap_err();
    drop(c);
    assert!(matches!(e, SimError::UnknownEndpoint(_)), "{e}");
    shm::sweep(&job).unwrap();
    shm::sweep(&format!("{job}z")).unwrap();
}

#[test]
fn register_shared_needs_a_shared_fabric_and_a_matching_segment() {
    let job = job("d");
    let _sweep = Sweep(job.clone());
    let f = Fabric::new(FabricConfig::default());
    let pd = f.add_nic_for::<gda_native::Native>().alloc_pd();
    let seg = Segment::create(&job, "m", 4096).unwrap();
    // SAFETY: refused before any registration happens.
    let e = unsafe { pd.register_shared(seg.as_ptr() as u64, 4096, Access::ALL, &seg, 0) };
    assert!(e.is_err());
    let g = Fabric::shared(FabricConfig::default(), &names(&job), 3).unwrap();
    {
        let pd = g.add_nic_for::<gda_native::Native>().alloc_pd();
        // SAFETY: refused (range past the segment).
        let e = unsafe { pd.register_shared(seg.as_ptr() as u64, 8192, Access::ALL, &seg, 0) };
        assert!(e.is_err());
        assert!(
            Fabric::shared(FabricConfig::default(), &names(&job), 3).is_err(),
            "rank taken"
        );
    }
    drop(g);
    seg.unlink().unwrap();
    assert!(
        shm::list(&job).unwrap().is_empty(),
        "dropping a fabric removes its registry"
    );
}
