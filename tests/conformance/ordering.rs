//! Ordering and concurrency: fence and completion order, ring wrap, many threads on one QP,
//! chaos seeds, fabrics of many NICs, and the chaos mutation checks.

use super::*;

pub(crate) fn ordering_fence_and_completion_order<R: Rig>() {
    for seed in [None, Some(1), Some(2), Some(3), Some(4)] {
        let t = Pair::<R>::new(seed, false, QpCaps::default());
        let mut raw = t.raw_a();
        let dst = t.mr_b(8, Access::REMOTE_WRITE | Access::REMOTE_READ);
        // Writes to one location land in order: the last one wins.
        for i in 0..50u64 {
            raw.post(
                &WorkRequest::Write {
                    remote: remote(&dst, 0),
                    payload: Payload::Inline(&i.to_le_bytes()),
                    imm: None,
                },
                SendFlags::SIGNALED,
            );
        }
        let w = raw.wait(50);
        let counters: Vec<u32> = w.iter().map(|c| c.wqe_counter).collect();
        let mut sorted = counters.clone();
        sorted.sort_unstable();
        assert_eq!(counters, sorted, "completions out of order (seed {seed:?})");
        assert_eq!(contents(&dst), 49u64.to_le_bytes());
        // FENCE: READ remote into a local buffer, then WRITE that buffer elsewhere with FENCE; the
        // write must carry the read data even when chaos delays the READ's landing.
        let src = t.mr_b(64, Access::REMOTE_READ);
        src.write(0, &pattern(64, 5)).unwrap();
        let stage = t.mr_a(64, Access::LOCAL_WRITE);
        let out = t.mr_b(64, Access::REMOTE_WRITE);
        let st = [sge(&stage, 0, 64)];
        raw.post(
            &WorkRequest::Read {
                remote: remote(&src, 0),
                sges: &st,
            },
            SendFlags::empty(),
        );
        raw.post(
            &WorkRequest::Write {
                remote: remote(&out, 0),
                payload: Payload::Sges(&st),
                imm: None,
            },
            SendFlags::SIGNALED | SendFlags::FENCE,
        );
        assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
        assert_eq!(
            contents(&out),
            pattern(64, 5),
            "fenced WRITE saw stale READ data (seed {seed:?})"
        );
    }
}

pub(crate) fn ring_wrap_far_past_65536<R: Rig>() {
    let mut modes = 0;
    for mode in [CqMode::Normal, CqMode::Collapsed] {
        let Some(t) = Pair::<R>::supported(
            None,
            mode == CqMode::Collapsed,
            QpCaps {
                send_wr: 64,
                ..QpCaps::default()
            },
        ) else {
            continue; // a device without collapsed CQs (bnxt's control path)
        };
        modes += 1;
        let dst = t.mr_b(8, Access::REMOTE_WRITE);
        // SAFETY: the QP and CQ outlive the queue; it is the only poster and poller.
        let sq =
            unsafe { SendQueue::<R::P>::new(t.qa.sq_handle().unwrap(), t.cq_a.handle(), 20_000) }
                .unwrap();
        let n = 70_000u64;
        for i in 0..n {
            sq.post(
                &WorkRequest::Write {
                    remote: remote(&dst, 0),
                    payload: Payload::Inline(&i.to_le_bytes()),
                    imm: None,
                },
                SendFlags::empty(),
            )
            .unwrap();
        }
        sq.quiet().unwrap();
        assert_eq!(contents(&dst), (n - 1).to_le_bytes(), "{mode:?}");
        assert!(sq.counters().complete_below() > n - 1);
    }
    assert!(modes >= 1, "no CQ mode ran");
}

pub(crate) fn many_threads_one_qp<R: Rig>() {
    let mut modes = 0;
    for mode in [CqMode::Normal, CqMode::Collapsed] {
        let Some(t) = Pair::<R>::supported(
            None,
            mode == CqMode::Collapsed,
            QpCaps {
                send_wr: 128,
                ..QpCaps::default()
            },
        ) else {
            continue; // a device without collapsed CQs (bnxt's control path)
        };
        modes += 1;
        let dst = t.mr_b(16 * 8, Access::REMOTE_WRITE | Access::REMOTE_ATOMIC);
        let ctr = t.mr_b(8, Access::REMOTE_ATOMIC);
        let res = t.mr_a(16 * 8, Access::LOCAL_WRITE);
        // SAFETY: as above.
        let sq =
            unsafe { SendQueue::<R::P>::new(t.qa.sq_handle().unwrap(), t.cq_a.handle(), 20_000) }
                .unwrap();
        let per = 400u64;
        launch(16, |tid| {
            for i in 0..per {
                let v = (tid.id as u64) << 32 | i;
                sq.post(
                    &WorkRequest::Write {
                        remote: remote(&dst, 8 * tid.id as u64),
                        payload: Payload::Inline(&v.to_le_bytes()),
                        imm: None,
                    },
                    SendFlags::empty(),
                )
                .unwrap();
                if i % 10 == 0 {
                    let local = sge(&res, 8 * tid.id as u64, 8);
                    sq.post(
                        &WorkRequest::Atomic {
                            remote: remote(&ctr, 0),
                            local,
                            op: AtomicOp::FetchAdd { add: 1 },
                            bytes: 8,
                        },
                        SendFlags::empty(),
                    )
                    .unwrap();
                }
            }
            sq.quiet().unwrap();
        });
        let got = contents(&dst);
        for id in 0..16u64 {
            let v = u64::from_le_bytes(
                got[8 * id as usize..8 * id as usize + 8]
                    .try_into()
                    .unwrap(),
            );
            assert_eq!(
                v,
                id << 32 | (per - 1),
                "thread {id}: its last write must win ({mode:?})"
            );
        }
        assert_eq!(
            u64::from_le_bytes(contents(&ctr).try_into().unwrap()),
            16 * per / 10,
            "{mode:?}"
        );
    }
    assert!(modes >= 1, "no CQ mode ran");
}

/// The chaos case `gda chaos` sweeps over any number of seeds (the same function): with four
/// threads on one QP, data is there after every quiet and every atomic counts, on seeds 1..=12
/// (even seeds with a collapsed CQ).
pub(crate) fn chaos_seeds_keep_guarantees<P: Modeled>() {
    for seed in 1..=12u64 {
        gda::chaos::guarantees_on::<P>(model::<P>(), seed).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Four NICs in a ring, each QP writing to the next NIC's region, plus a loopback QP.
pub(crate) fn fabric_of_many_nics_and_loopback<P: Modeled>() {
    let fabric = gda::sim::Fabric::new(Default::default());
    let nics: Vec<_> = (0..4)
        .map(|_| fabric.add_shared_model_nic(model::<P>()))
        .collect();
    let pds: Vec<_> = nics.iter().map(|n| n.alloc_pd()).collect();
    let cqs: Vec<_> = nics
        .iter()
        .map(|n| n.create_cq(64, CqMode::Normal).unwrap())
        .collect();
    let qps: Vec<_> = pds
        .iter()
        .zip(&cqs)
        .map(|(pd, cq)| pd.create_qp(QpInit::default(), cq, cq).unwrap())
        .collect();
    let mrs: Vec<_> = pds.iter().map(|pd| pd.alloc_mr(64, Access::ALL)).collect();
    for i in 0..4 {
        let ep = gda::sim::Endpoint::from_bytes(&qps[(i + 1) % 4].endpoint().to_bytes()).unwrap();
        qps[i].bring_up(&ep).unwrap();
    }
    for i in 0..4 {
        let mut raw = common::Raw::<P>::new(qps[i].sq_handle::<P>().unwrap(), cqs[i].handle());
        let msg = [i as u8 + 1; 16];
        raw.post(
            &WorkRequest::Write {
                remote: remote(&mrs[(i + 1) % 4], 0),
                payload: Payload::Inline(&msg),
                imm: None,
            },
            SendFlags::SIGNALED,
        );
        assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
    }
    for (i, mr) in mrs.iter().enumerate() {
        assert_eq!(
            &contents(mr)[..16],
            &[((i + 3) % 4) as u8 + 1; 16],
            "NIC {i} got its neighbour's write"
        );
    }
    // Loopback: a QP connected to itself.
    let cq = nics[0].create_cq(64, CqMode::Normal).unwrap();
    let lo = pds[0].create_qp(QpInit::default(), &cq, &cq).unwrap();
    lo.bring_up(&lo.endpoint()).unwrap();
    let mut raw = common::Raw::<P>::new(lo.sq_handle::<P>().unwrap(), cq.handle());
    raw.post(
        &WorkRequest::Write {
            remote: remote(&mrs[0], 32),
            payload: Payload::Inline(b"loopback"),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
    assert_eq!(&contents(&mrs[0])[32..40], b"loopback");
    // Endpoints from elsewhere are refused with a clear error.
    let other = gda::sim::Fabric::new(Default::default());
    let on = other.add_shared_model_nic(model::<P>());
    let ocq = on.create_cq(4, CqMode::Normal).unwrap();
    let oq = on
        .alloc_pd()
        .create_qp(QpInit::default(), &ocq, &ocq)
        .unwrap();
    assert!(
        oq.bring_up(&qps[0].endpoint())
            .unwrap_err()
            .to_string()
            .contains("names no QP")
    );
    assert!(gda::sim::Endpoint::from_bytes(&[1, 2, 3]).is_err());
}

/// A kernel with a real bug — a WRITE that forwards data an earlier READ fetched, without FENCE —
/// passes without chaos, is caught by some seeds, and each such seed catches it again.
pub(crate) fn chaos_seed_reproduces_a_missing_fence<P: Modeled>() {
    let run = |seed: Option<u64>| -> bool {
        let t = SimPair::<P>::new(seed, CqMode::Normal, QpInit::default());
        let src = t.mr_b(64, Access::REMOTE_READ);
        src.write(0, &pattern(64, 5)).unwrap();
        let stage = t.mr_a(64, Access::LOCAL_WRITE);
        let out = t.mr_b(64, Access::REMOTE_WRITE);
        let st = [sge(&stage, 0, 64)];
        let read = WorkRequest::Read {
            remote: remote(&src, 0),
            sges: &st,
        };
        let write = WorkRequest::Write {
            remote: remote(&out, 0),
            payload: Payload::Sges(&st),
            imm: None,
        };
        let sq = t.a.sq_handle::<P>().unwrap();
        // Both WQEs behind one doorbell, as a kernel batching its posts would do.
        // SAFETY: the QP's ring, record and doorbell; positions 0.. are free.
        unsafe {
            let p = P::post(&sq, gda::hal::SqPos::ZERO, &read, SendFlags::empty());
            let p = P::post(&sq, p.next, &write, SendFlags::SIGNALED);
            P::ring_sq(&sq, &p);
        }
        let mut raw = t.raw_a();
        assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
        contents(&out) != pattern(64, 5)
    };
    assert!(!run(None), "without chaos the race never shows");
    let found: Vec<u64> = (1..=40).filter(|&s| run(Some(s))).collect();
    assert!(!found.is_empty(), "no chaos seed exposed the missing FENCE");
    for &s in &found {
        let again = (0..3).filter(|_| run(Some(s))).count();
        assert!(
            again >= 2,
            "seed {s} found the bug but reproduced it only {again} of 3 times"
        );
    }
}

/// Mutation check of the README's claim that a quiet returning early fails the suite under
/// chaos. The mutant quiet returns as soon as the request is rung, without waiting for its
/// completion (what a quiet whose progress check is wrong does: it believes everything rung has
/// completed), and the data is then checked as the suite's quiet-then-check cases do. The
/// correct quiet (wait for the signalled completion) passes every seed; the mutant must be
/// caught by the chaos seeds.
pub(crate) fn early_quiet_is_caught_by_chaos<P: Modeled>() {
    const SEEDS: u64 = 24;
    let run = |seed: u64, early: bool| -> bool {
        let t = SimPair::<P>::new(Some(seed), CqMode::Normal, QpInit::default());
        let src = t.mr_b(128, Access::REMOTE_READ);
        src.write(0, &pattern(128, 3)).unwrap();
        let back = t.mr_a(128, Access::LOCAL_WRITE);
        let mut raw = t.raw_a();
        let s = [sge(&back, 0, 128)];
        raw.post(
            &WorkRequest::Read {
                remote: remote(&src, 0),
                sges: &s,
            },
            SendFlags::SIGNALED,
        );
        if early {
            let seen = contents(&back) == pattern(128, 3);
            raw.wait(1);
            seen
        } else {
            assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
            contents(&back) == pattern(128, 3)
        }
    };
    for seed in 1..=SEEDS {
        assert!(
            run(seed, false),
            "seed {seed}: the correct wait missed data"
        );
    }
    let caught: Vec<u64> = (1..=SEEDS).filter(|&s| !run(s, true)).collect();
    assert!(
        !caught.is_empty(),
        "no chaos seed of 1..={SEEDS} caught a quiet that returns before the completion"
    );
}
