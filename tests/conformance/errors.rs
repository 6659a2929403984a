//! Errors and misuse: hardware status and flush, QP state and RNR, malformed WQEs, CQ overrun,
//! contained misuse, receives flushed in Error, deregistered keys.

use super::*;

/// Posts a failing request followed by good ones and checks status, flush and no side effects.
pub(crate) fn expect_error<P: Modeled>(
    t: &SimPair<P>,
    raw: &mut common::Raw<P>,
    bad: WorkRequest<'_>,
    status: WcStatus,
    untouched: &gda::sim::Mr,
) {
    let before = contents(untouched);
    raw.post(&bad, SendFlags::SIGNALED);
    let after_dst = t.mr_b(8, Access::REMOTE_WRITE);
    raw.post(
        &WorkRequest::Write {
            remote: remote(&after_dst, 0),
            payload: Payload::Inline(&[1; 8]),
            imm: None,
        },
        SendFlags::empty(),
    );
    raw.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    let wcs = raw.wait(3);
    assert_eq!(wcs[0].status, status, "first completion");
    assert_eq!(
        wcs[1].status,
        WcStatus::WrFlushErr,
        "unsignalled later WQE flushed with a CQE"
    );
    assert_eq!(wcs[2].status, WcStatus::WrFlushErr);
    assert_eq!(t.a.state(), QpState::Error);
    assert_eq!(contents(&after_dst), vec![0; 8], "a flushed WRITE wrote");
    assert_eq!(
        contents(untouched),
        before,
        "a failed request changed memory"
    );
}

pub(crate) fn errors_have_hardware_status_and_flush<P: Modeled>() {
    type Case = (&'static str, WcStatus);
    let cases: &[Case] = &[
        ("bad lkey", WcStatus::LocProtErr),
        ("bad rkey", WcStatus::RemAccessErr),
        ("remote out of bounds", WcStatus::RemAccessErr),
        ("no REMOTE_WRITE", WcStatus::RemAccessErr),
        ("READ into region without LOCAL_WRITE", WcStatus::LocProtErr),
        ("atomic without REMOTE_ATOMIC", WcStatus::RemAccessErr),
        ("stale rkey", WcStatus::RemAccessErr),
        ("key of another protection domain", WcStatus::LocProtErr),
    ];
    for &(name, status) in cases {
        let t = SimPair::<P>::simple();
        let mut raw = t.raw_a();
        let src = t.mr_a(64, Access::LOCAL_WRITE);
        let dst = t.mr_b(64, Access::REMOTE_WRITE | Access::REMOTE_READ);
        let ro = t.mr_b(64, Access::REMOTE_READ);
        let noloc = t.mr_a(64, Access::empty());
        let other_pd = t.fabric.clone();
        let _ = other_pd;
        let foreign = t.a_nic_other_pd_mr();
        let stale_rkey = {
            let m = t.mr_b(64, Access::REMOTE_WRITE);
            m.rkey()
        };
        let s = [sge(&src, 0, 8)];
        let bad_l = [gda::hal::Sge {
            lkey: src.lkey() ^ 0x5a5a_5a5a,
            ..sge(&src, 0, 8)
        }];
        let noloc_s = [sge(&noloc, 0, 8)];
        let foreign_s = [sge(&foreign, 0, 8)];
        let wr = match name {
            "bad lkey" => WorkRequest::Write {
                remote: remote(&dst, 0),
                payload: Payload::Sges(&bad_l),
                imm: None,
            },
            "bad rkey" => WorkRequest::Write {
                remote: gda::hal::Remote {
                    rkey: dst.rkey() ^ 1,
                    ..remote(&dst, 0)
                },
                payload: Payload::Sges(&s),
                imm: None,
            },
            "remote out of bounds" => WorkRequest::Write {
                remote: remote(&dst, 60),
                payload: Payload::Sges(&s),
                imm: None,
            },
            "no REMOTE_WRITE" => WorkRequest::Write {
                remote: remote(&ro, 0),
                payload: Payload::Sges(&s),
                imm: None,
            },
            "READ into region without LOCAL_WRITE" => WorkRequest::Read {
                remote: remote(&dst, 0),
                sges: &noloc_s,
            },
            "atomic without REMOTE_ATOMIC" => WorkRequest::Atomic {
                remote: remote(&dst, 0),
                local: s[0],
                op: AtomicOp::FetchAdd { add: 1 },
                bytes: 8,
            },
            "stale rkey" => WorkRequest::Write {
                remote: gda::hal::Remote {
                    addr: dst.addr(),
                    rkey: stale_rkey,
                },
                payload: Payload::Sges(&s),
                imm: None,
            },
            _ => WorkRequest::Write {
                remote: remote(&dst, 0),
                payload: Payload::Sges(&foreign_s),
                imm: None,
            },
        };
        let _ = name;
        expect_error(&t, &mut raw, wr, status, &dst);
    }
}

impl<P: Modeled> SimPair<P> {
    /// A region of NIC A in a protection domain the requester QP does not belong to.
    fn a_nic_other_pd_mr(&self) -> gda::sim::Mr {
        self.pd_a.nic().alloc_pd().alloc_mr(64, Access::ALL)
    }
}

pub(crate) fn qp_not_ready_and_rnr<P: Modeled>() {
    // QP in INIT: a rung doorbell is a local QP operation error.
    let fabric = gda::sim::Fabric::new(Default::default());
    let nic = fabric.add_shared_model_nic(model::<P>());
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(64, CqMode::Normal).unwrap();
    let qp = pd.create_qp(QpInit::default(), &cq, &cq).unwrap();
    qp.modify_init(&gda::hal::control::InitAttr {
        port: 1,
        pkey_index: 0,
        access: Access::ALL,
    })
    .unwrap();
    let mut raw = common::Raw::<P>::new(qp.sq_handle::<P>().unwrap(), cq.handle());
    raw.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    raw.post(&WorkRequest::Nop, SendFlags::empty());
    let w = raw.wait(2);
    assert_eq!(
        (w[0].status, w[1].status),
        (WcStatus::LocQpOpErr, WcStatus::WrFlushErr)
    );
    assert_eq!(qp.state(), QpState::Error);
    // Refused transitions say what was asked.
    let e = qp
        .modify_rts(&gda::hal::control::RtsAttr::new(qp.start_psn()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("Error") && e.contains("Rts"), "{e}");

    // RNR: a SEND with no receive posted and rnr_retry = 0.
    let t = SimPair::<P>::new(
        None,
        CqMode::Normal,
        QpInit {
            rnr_retry: 0,
            ..QpInit::default()
        },
    );
    let mut raw = t.raw_a();
    raw.post(
        &WorkRequest::Send {
            payload: Payload::Inline(b"x"),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    raw.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    let w = raw.wait(2);
    assert_eq!(
        (w[0].status, w[1].status),
        (WcStatus::RnrRetryExcErr, WcStatus::WrFlushErr)
    );

    // rnr_retry = 7 retries forever: a receive posted later completes the SEND.
    let t = SimPair::<P>::simple();
    let mut raw = t.raw_a();
    let mut rq = t.recv_b();
    raw.post(
        &WorkRequest::Send {
            payload: Payload::Inline(b"late"),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    assert!(raw.drain_for(Duration::from_millis(30)).is_empty());
    let dst = t.mr_b(16, Access::LOCAL_WRITE);
    rq.post(sge(&dst, 0, 16));
    assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
    assert_eq!(rq.wait(1)[0].byte_len, 4);

    // A receive buffer too small: responder LOC_LEN_ERR, requester REM_INV_REQ_ERR.
    let small = t.mr_b(2, Access::LOCAL_WRITE);
    rq.post(sge(&small, 0, 2));
    raw.post(
        &WorkRequest::Send {
            payload: Payload::Inline(b"too long"),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    assert_eq!(raw.wait(1)[0].status, WcStatus::RemInvReqErr);
    assert_eq!(rq.wait(1)[0].status, WcStatus::LocLenErr);
    assert_eq!(contents(&small), vec![0, 0]);
}

pub(crate) fn malformed_wqes_give_error_cqes<P: Modeled>() {
    for garbage in [[0xffu8; 64], [0u8; 64], {
        let mut g = [0u8; 64];
        g[0] = 0xee;
        g[3] = 0xee;
        g[7] = 0x3f;
        g
    }] {
        let t = SimPair::<P>::simple();
        let sq = t.a.sq_handle::<P>().unwrap();
        // Post a NOP (so the doorbell is the provider's own), overwrite it with garbage, then
        // ring the doorbell for it.
        // SAFETY: the ring belongs to this test's QP; unit 0 is free.
        let posted = unsafe {
            P::post(
                &sq,
                gda::hal::SqPos::ZERO,
                &gda::hal::WorkRequest::Nop,
                gda::hal::SendFlags::SIGNALED,
            )
        };
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(garbage.as_ptr(), sq.wq().buf as *mut u8, 64) };
        // SAFETY: the QP's doorbell record and register.
        unsafe { P::ring_sq(&sq, &posted) };
        let mut raw = t.raw_a();
        raw.pos = posted.next;
        let w = raw.wait(1);
        assert!(
            matches!(w[0].status, WcStatus::LocQpOpErr | WcStatus::LocLenErr),
            "garbage {:?}: {:?}",
            &garbage[..8],
            w[0]
        );
        assert_eq!(t.a.state(), QpState::Error);
    }
}

pub(crate) fn cq_overrun_is_reported<P: Modeled>() {
    let fabric = gda::sim::Fabric::new(Default::default());
    let nic = fabric.add_shared_model_nic(model::<P>());
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(4, CqMode::Normal).unwrap();
    let qp = pd.create_qp(QpInit::default(), &cq, &cq).unwrap();
    qp.bring_up(&qp.endpoint()).unwrap();
    let mut raw = common::Raw::<P>::new(qp.sq_handle::<P>().unwrap(), cq.handle());
    for _ in 0..8 {
        raw.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    }
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !cq.overrun() {
        assert!(std::time::Instant::now() < end, "overrun never reported");
        std::thread::yield_now();
    }
    assert_eq!(cq.produced(), 4);
}

/// Misuse found by review, each with a clear result and a live engine afterwards: a consumer
/// index ahead of the producer, a doorbell claiming more than the ring, a SEND with a bad local
/// key (must not use up the responder's receive), CQs from another fabric, a CQ too small for
/// the send queue.
pub(crate) fn misuse_is_contained<P: Modeled>() {
    // Consumer index "ahead" of the producer: reported as overrun, engine keeps running.
    let t = SimPair::<P>::simple();
    let h = t.cq_a.handle();
    // SAFETY: the CQ's own consumer record.
    unsafe { P::update_cq_ci(&h, 100) };
    let mut raw = t.raw_a();
    raw.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !t.cq_a.overrun() {
        assert!(
            std::time::Instant::now() < end,
            "bad consumer index not reported"
        );
        std::thread::yield_now();
    }
    let t2 = SimPair::<P>::simple();
    let mut raw2 = t2.raw_a();
    raw2.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    assert_eq!(
        raw2.wait(1)[0].status,
        WcStatus::Success,
        "the engine survived"
    );

    // A doorbell for more WQEs than the ring holds: refused with an error CQE.
    let t = SimPair::<P>::new(
        None,
        CqMode::Normal,
        QpInit {
            sq_units: 16,
            ..QpInit::default()
        },
    );
    let sq = t.a.sq_handle::<P>().unwrap();
    // A doorbell naming position 40 on a 16-unit ring: the provider's own doorbell for a NOP
    // posted (out of turn) just before 40. bnxt's doorbell (index + epoch) cannot name more than twice
    // the ring: it names 40 mod 32, and the zeroed WQEs there are refused the same way.
    let nop = P::cost(&sq, &gda::hal::WorkRequest::Nop).units;
    // SAFETY: the ring belongs to this test's QP; the slots before 40 are free.
    let p = unsafe {
        P::post(
            &sq,
            gda::hal::SqPos::at_unit(40 - nop),
            &gda::hal::WorkRequest::Nop,
            gda::hal::SendFlags::SIGNALED,
        )
    };
    assert_eq!(p.next.unit.0, 40);
    // SAFETY: the QP's own doorbell record and register.
    unsafe { P::ring_sq(&sq, &p) };
    let mut raw = t.raw_a();
    assert_eq!(raw.wait(1)[0].status, WcStatus::LocQpOpErr);
    assert_eq!(t.a.state(), QpState::Error);

    // SEND with a bad lkey: requester error, responder keeps its receive for the next SEND.
    let t = SimPair::<P>::simple();
    let mut raw = t.raw_a();
    let mut rq = t.recv_b();
    let buf = t.mr_b(16, Access::LOCAL_WRITE);
    rq.post(sge(&buf, 0, 16));
    let src = t.mr_a(8, Access::empty());
    let bad = [gda::hal::Sge {
        lkey: src.lkey() ^ 0xffff,
        ..sge(&src, 0, 8)
    }];
    raw.post(
        &WorkRequest::Send {
            payload: Payload::Sges(&bad),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    assert_eq!(raw.wait(1)[0].status, WcStatus::LocProtErr);
    assert_eq!(t.b.state(), QpState::Rts);
    // A fresh requester QP (the old one is in Error) sends to the same responder.
    let cq = t.pd_a.nic().create_cq(64, CqMode::Normal).unwrap();
    let a2 = t.pd_a.create_qp(QpInit::default(), &cq, &cq).unwrap();
    a2.bring_up(&t.b.endpoint()).unwrap();
    let mut raw = common::Raw::<P>::new(a2.sq_handle::<P>().unwrap(), cq.handle());
    raw.post(
        &WorkRequest::Send {
            payload: Payload::Inline(b"second"),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
    let rc = rq.wait(1)[0];
    assert_eq!(
        (rc.status, rc.byte_len),
        (WcStatus::Success, 6),
        "the receive was still there"
    );

    // CQs of another fabric, and a CQ smaller than the send queue.
    let other = gda::sim::Fabric::new(Default::default());
    let ocq = other
        .add_shared_model_nic(model::<P>())
        .create_cq(64, CqMode::Normal)
        .unwrap();
    let e = t
        .pd_a
        .create_qp(QpInit::default(), &ocq, &ocq)
        .unwrap_err()
        .to_string();
    assert!(e.contains("fabric"), "{e}");
    let small = t.pd_a.nic().create_cq(16, CqMode::Normal).unwrap();
    let q = t.pd_a.create_qp(QpInit::default(), &small, &small).unwrap();
    let h = q.sq_handle::<P>().unwrap();
    // SAFETY: handles of live objects.
    assert!(unsafe { SendQueue::<P>::new(h, small.handle(), 1000) }.is_err());
}

/// A QP in Error completes its posted receives with `WR_FLUSH_ERR`, and later ones too.
pub(crate) fn receives_flush_in_error<P: Modeled>() {
    let t = SimPair::<P>::simple();
    let mut rq = t.recv_b();
    let buf = t.mr_b(64, Access::LOCAL_WRITE);
    rq.post(sge(&buf, 0, 32));
    rq.post(sge(&buf, 32, 32));
    t.b.modify_error();
    let w = rq.wait(2);
    assert!(
        w.iter()
            .all(|c| c.status == WcStatus::WrFlushErr && c.is_recv),
        "{w:?}"
    );
    rq.post(sge(&buf, 0, 8));
    assert_eq!(rq.wait(1)[0].status, WcStatus::WrFlushErr);
    // The requester now finds no ready responder: its SEND fails and it flushes too.
    let mut raw = t.raw_a();
    raw.post(
        &WorkRequest::Send {
            payload: Payload::Inline(b"x"),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    raw.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    let w = raw.wait(2);
    assert_eq!(
        (w[0].status, w[1].status),
        (WcStatus::RetryExcErr, WcStatus::WrFlushErr)
    );
}

/// A key that worked, then was deregistered, fails at once (the engine's key cache must not
/// keep it alive), and nothing is written.
pub(crate) fn deregistered_key_fails_after_use<P: Modeled>() {
    let t = SimPair::<P>::simple();
    let mut raw = t.raw_a();
    let src = t.mr_a(8, Access::empty());
    src.write(0, &[7; 8]).unwrap();
    let dst = t.mr_b(8, Access::REMOTE_WRITE);
    let s = [sge(&src, 0, 8)];
    let r = remote(&dst, 0);
    raw.post(
        &WorkRequest::Write {
            remote: r,
            payload: Payload::Sges(&s),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
    let keep_memory = t.mr_b(8, Access::empty()); // unrelated region stays registered
    drop(dst);
    raw.post(
        &WorkRequest::Write {
            remote: r,
            payload: Payload::Sges(&s),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    assert_eq!(raw.wait(1)[0].status, WcStatus::RemAccessErr);
    drop(keep_memory);
}
