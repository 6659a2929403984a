//! What a program that posts to a QP of a process fabric and polls for its completions calls
//! (gda-shmem between processes): `Fabric::post_hook` after each doorbell, and the fabric's pass
//! from every poll (`SendQueue::set_host_progress`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gda_hal::{Payload, Remote, SendFlags, SendQueue, WorkRequest};
use gda_native::Native;
use gda_sim::{Access, CqMode, Fabric, FabricConfig, QpInit};

/// Requests posted back to back, each followed by the QP's hook, all land in order at the
/// responder; polls run the requester's pass (counted); a hook asked for a QP that does not
/// exist is refused.
#[test]
fn posts_with_the_hook_land_in_order_and_polls_run_the_pass() {
    let p = pair(1024, 256);
    assert!(p.a.is_process());
    assert!(!Fabric::new(FabricConfig::default()).is_process());
    p.qa.bring_up_at(&p.qb.endpoint(), p.qb.start_psn())
        .unwrap();
    p.qb.bring_up_at(&p.qa.endpoint(), p.qa.start_psn())
        .unwrap();
    assert!(
        p.a.post_hook(p.na.index(), p.qa.qpn() ^ 0x7f_ffff)
            .is_none()
    );
    assert!(p.a.post_hook(p.na.index() + 7, p.qa.qpn()).is_none());
    let hook = p.a.post_hook(p.na.index(), p.qa.qpn()).unwrap();
    const N: u64 = 600;
    let remote = p.pb.alloc_mr(N as usize * 8, Access::ALL);
    let mut sq = p.queue();
    let passes = Arc::new(AtomicU64::new(0));
    let (a2, p2) = (p.a.clone(), passes.clone());
    sq.set_host_progress(Some(Arc::new(move || {
        p2.fetch_add(1, Ordering::Relaxed);
        a2.progress()
    })));
    let responder = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        // The peer, serving as a waiting PE does.
        s.spawn(|| {
            while responder.load(Ordering::Relaxed) {
                p.b.progress();
            }
        });
        // More than the queue holds: posts wait for room, polling (and so running the pass).
        for i in 0..N {
            let v = (i + 1).to_le_bytes();
            let wr = WorkRequest::Write {
                remote: Remote {
                    addr: remote.addr() + i * 8,
                    rkey: remote.rkey(),
                },
                payload: Payload::Inline(&v),
                imm: None,
            };
            sq.post(&wr, SendFlags::empty()).unwrap();
            hook();
        }
        sq.quiet().unwrap();
        responder.store(false, Ordering::Relaxed);
    });
    assert!(passes.load(Ordering::Relaxed) > 0, "polls ran no pass");
    let mut landed = 0;
    for i in 0..N {
        // SAFETY: inside the region, which lives until the end of the test.
        let v = unsafe { ((remote.addr() + i * 8) as *const u64).read_volatile() };
        assert_eq!(v, i + 1, "word {i}");
        landed += 1;
    }
    assert_eq!(landed, N);
    // The hook holds the QP: dropped before it.
    drop(hook);
    drop(sq);
}

/// A request that reaches a responder QP not yet in RTR is answered "not ready" and sent again
/// until the QP is up (as a NIC's transport retries cover a peer still bringing its QP up):
/// once the responder connects, the next transmission is executed — the responder's cached
/// view of the QP (its state and the QP it is connected to, kept between requests) is read
/// again when the QP connects.
#[test]
fn a_request_sent_before_the_responder_is_ready_lands_once_it_is() {
    let p = pair(256, 64);
    // Only the requester is up.
    p.qa.bring_up_at(&p.qb.endpoint(), p.qb.start_psn())
        .unwrap();
    let remote = p.pb.alloc_mr(64, Access::ALL);
    let hook = p.a.post_hook(p.na.index(), p.qa.qpn()).unwrap();
    let mut sq = p.queue();
    let a2 = p.a.clone();
    sq.set_host_progress(Some(Arc::new(move || a2.progress())));
    let serving = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            while serving.load(Ordering::Relaxed) {
                p.b.progress();
            }
        });
        let v = 0x5eed_u64.to_le_bytes();
        let wr = WorkRequest::Write {
            remote: Remote {
                addr: remote.addr(),
                rkey: remote.rkey(),
            },
            payload: Payload::Inline(&v),
            imm: None,
        };
        sq.post(&wr, SendFlags::SIGNALED).unwrap();
        hook();
        // Transmissions meet the responder in Reset for a while.
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(30) {
            p.a.progress();
        }
        p.qb.bring_up_at(&p.qa.endpoint(), p.qa.start_psn())
            .unwrap();
        sq.quiet().unwrap();
        serving.store(false, Ordering::Relaxed);
    });
    // SAFETY: inside the region, which lives until the end of the test.
    let got = unsafe { (remote.addr() as *const u64).read_volatile() };
    assert_eq!(got, 0x5eed);
    drop(hook);
    drop(sq);
}

/// A QP connects to its peer's process when it moves to RTR, as a NIC does, not when its
/// first request is sent (which then waited for the handshake, 2-3 ms in `wire_rate`'s
/// "first WRITE after bring-up"): one connection each way once both are up, and the first
/// request travels on it.
#[test]
fn the_connection_to_the_peer_process_is_made_at_rtr() {
    let p = pair(64, 64);
    assert_eq!((p.a.stats().connections, p.b.stats().connections), (0, 0));
    p.qa.bring_up_at(&p.qb.endpoint(), p.qb.start_psn())
        .unwrap();
    assert_eq!((p.a.stats().connections, p.b.stats().connections), (1, 0));
    p.qb.bring_up_at(&p.qa.endpoint(), p.qa.start_psn())
        .unwrap();
    assert_eq!((p.a.stats().connections, p.b.stats().connections), (1, 1));
    let remote = p.pb.alloc_mr(64, Access::ALL);
    let mut sq = p.queue();
    let (a2, b2) = (p.a.clone(), p.b.clone());
    sq.set_host_progress(Some(Arc::new(move || a2.progress() | b2.progress())));
    let v = 0x0ace_u64.to_le_bytes();
    let wr = WorkRequest::Write {
        remote: Remote {
            addr: remote.addr(),
            rkey: remote.rkey(),
        },
        payload: Payload::Inline(&v),
        imm: None,
    };
    sq.post(&wr, SendFlags::SIGNALED).unwrap();
    sq.quiet().unwrap();
    // SAFETY: inside the region, which lives until the end of the test.
    let got = unsafe { (remote.addr() as *const u64).read_volatile() };
    assert_eq!(got, 0x0ace);
    assert_eq!(
        p.a.stats().connections,
        1,
        "the request made a connection of its own"
    );
    drop(sq);
}

/// A native QP on each of two process fabrics, in Reset, each with a CQ of `cq_entries` for
/// both queues and `sq_units` send units.
struct Pair {
    a: Fabric,
    b: Fabric,
    na: gda_sim::Nic,
    pb: gda_sim::Pd,
    cqa: gda_sim::Cq,
    qa: gda_sim::Qp,
    qb: gda_sim::Qp,
    /// `a`'s PD and `b`'s CQ, which the QPs use.
    _keep: (gda_sim::Pd, gda_sim::Cq),
}

impl Pair {
    /// `qa`'s send queue on `cqa` (5 s timeout).
    fn queue(&self) -> SendQueue<Native> {
        // SAFETY: the QP and CQ outlive the queue: every test drops it before the pair.
        unsafe {
            SendQueue::<Native>::new(
                self.qa.sq_handle::<Native>().unwrap(),
                self.cqa.handle(),
                5000,
            )
        }
        .unwrap()
    }
}

fn pair(cq_entries: u32, sq_units: u32) -> Pair {
    let a = Fabric::process(FabricConfig::default()).unwrap();
    let b = Fabric::process(FabricConfig::default()).unwrap();
    let (na, nb) = (a.add_nic_for::<Native>(), b.add_nic_for::<Native>());
    let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
    let cqa = na.create_cq(cq_entries, CqMode::Normal).unwrap();
    let cqb = nb.create_cq(cq_entries, CqMode::Normal).unwrap();
    let init = QpInit {
        sq_units,
        ..QpInit::default()
    };
    let qa = pa.create_qp(init, &cqa, &cqa).unwrap();
    let qb = pb.create_qp(init, &cqb, &cqb).unwrap();
    Pair {
        a,
        b,
        na,
        pb,
        cqa,
        qa,
        qb,
        _keep: (pa, cqb),
    }
}
