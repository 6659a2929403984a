//! The provider-generic conformance suite, run on every sim device model: the `Sim` provider on
//! the native model and `gda_mlx5::Mlx5`'s device functions on the mlx5 model (the same code
//! that drives a ConnectX).

mod common;

use std::time::Duration;

use common::*;
use gda::hal::QueueHandle;
use gda::hal::{AtomicOp, Payload, SendFlags, SendQueue, WcOpcode, WcStatus, WorkRequest};
use gda::sim::{Access, CqMode, Modeled, QpInit, QpState, launch};

const SIZES: &[usize] = &[0, 1, 7, 8, 63, 64, 4095, 4096, 65536, 1 << 20];

fn write_every_size<P: Modeled>() {
    let t = Pair::<P>::simple();
    let mut raw = t.raw_a();
    for &n in SIZES {
        let src = t.mr_a(n.max(1), Access::LOCAL_WRITE);
        let dst = t.mr_b(n.max(1) + 64, Access::REMOTE_WRITE);
        let data = pattern(n, n as u8);
        src.write(0, &data).unwrap();
        let sges = [sge(&src, 0, n as u32)];
        raw.post(
            &WorkRequest::Write {
                remote: remote(&dst, 32),
                payload: Payload::Sges(&sges),
                imm: None,
            },
            SendFlags::SIGNALED,
        );
        let wc = raw.wait(1)[0];
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::RdmaWrite),
            "size {n}"
        );
        let got = contents(&dst);
        assert_eq!(&got[32..32 + n], &data[..], "size {n}");
        assert!(
            got[..32].iter().chain(&got[32 + n..]).all(|&b| b == 0),
            "bytes outside the target changed (size {n})"
        );
    }
}

fn inline_write_every_size<P: Modeled>() {
    let t = Pair::<P>::simple();
    let mut raw = t.raw_a();
    let dst = t.mr_b(4096, Access::REMOTE_WRITE);
    for n in [0usize, 1, 7, 8, 12, 13, 16, 17, 63, 64, 96, 100, 200, 256] {
        if n > raw.sq.wq().max_inline as usize {
            // Beyond the format's inline maximum (bnxt: 96 bytes) a clear refusal.
            let data = pattern(n, 3);
            let wr = WorkRequest::Write {
                remote: remote(&dst, 100),
                payload: Payload::Inline(&data),
                imm: None,
            };
            assert!(matches!(
                P::check(&raw.sq, &wr),
                Err(gda::hal::PostError::InlineTooLong { .. })
            ));
            continue;
        }
        let data = pattern(n, 3);
        raw.post(
            &WorkRequest::Write {
                remote: remote(&dst, 100),
                payload: Payload::Inline(&data),
                imm: None,
            },
            SendFlags::SIGNALED,
        );
        assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
        let mut got = vec![0u8; n];
        dst.read(100, &mut got).unwrap();
        assert_eq!(got, data, "inline {n}");
    }
}

fn read_every_size<P: Modeled>() {
    let t = Pair::<P>::simple();
    let mut raw = t.raw_a();
    for &n in SIZES {
        let src = t.mr_b(n.max(1), Access::REMOTE_READ);
        let dst = t.mr_a(n.max(1) + 16, Access::LOCAL_WRITE);
        let data = pattern(n, 77);
        src.write(0, &data).unwrap();
        let sges = [sge(&dst, 8, n as u32)];
        raw.post(
            &WorkRequest::Read {
                remote: remote(&src, 0),
                sges: &sges,
            },
            SendFlags::SIGNALED,
        );
        let wc = raw.wait(1)[0];
        assert_eq!(
            (wc.status, wc.opcode, wc.byte_len as usize),
            (WcStatus::Success, WcOpcode::RdmaRead, n),
            "size {n}"
        );
        let got = contents(&dst);
        assert_eq!(&got[8..8 + n], &data[..]);
        assert!(got[..8].iter().chain(&got[8 + n..]).all(|&b| b == 0));
    }
}

fn send_recv_and_immediates<P: Modeled>() {
    let t = Pair::<P>::simple();
    let mut raw = t.raw_a();
    let mut rq = t.recv_b();
    for &n in SIZES {
        let src = t.mr_a(n.max(1), Access::empty());
        let dst = t.mr_b(n.max(1), Access::LOCAL_WRITE);
        src.write(0, &pattern(n, 9)).unwrap();
        rq.post(sge(&dst, 0, n.max(1) as u32));
        let sges = [sge(&src, 0, n as u32)];
        let imm = (n % 2 == 0).then_some(0xdead_0000 | n as u32);
        raw.post(
            &WorkRequest::Send {
                payload: Payload::Sges(&sges),
                imm,
            },
            SendFlags::SIGNALED,
        );
        assert_eq!(raw.wait(1)[0].opcode, WcOpcode::Send);
        let rc = rq.wait(1)[0];
        assert_eq!(
            (
                rc.status,
                rc.opcode,
                rc.byte_len as usize,
                rc.imm,
                rc.is_recv
            ),
            (WcStatus::Success, WcOpcode::Recv, n, imm, true),
            "size {n}"
        );
        assert_eq!(&contents(&dst)[..n], &pattern(n, 9)[..]);
    }
    // Inline SEND and WRITE_WITH_IMM (consumes a receive, carries the immediate).
    let dst = t.mr_b(256, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    rq.post(sge(&dst, 0, 256));
    raw.post(
        &WorkRequest::Send {
            payload: Payload::Inline(b"inline send"),
            imm: None,
        },
        SendFlags::SIGNALED,
    );
    raw.wait(1);
    assert_eq!(rq.wait(1)[0].byte_len, 11);
    rq.post(sge(&dst, 0, 0));
    raw.post(
        &WorkRequest::Write {
            remote: remote(&dst, 128),
            payload: Payload::Inline(b"with imm"),
            imm: Some(0x1234_5678),
        },
        SendFlags::SIGNALED,
    );
    raw.wait(1);
    let rc = rq.wait(1)[0];
    assert_eq!(
        (rc.opcode, rc.imm, rc.byte_len),
        (WcOpcode::RecvRdmaWithImm, Some(0x1234_5678), 8)
    );
    let mut got = [0u8; 8];
    dst.read(128, &mut got).unwrap();
    assert_eq!(&got, b"with imm");
}

fn atomics_every_op_and_width<P: Modeled>() {
    let t = Pair::<P>::simple();
    let mut raw = t.raw_a();
    let target = t.mr_b(64, Access::REMOTE_ATOMIC | Access::REMOTE_READ);
    let result = t.mr_a(64, Access::LOCAL_WRITE);
    let cases: &[(AtomicOp, u32, u64)] = &[
        (
            AtomicOp::CompareSwap {
                compare: 0x1111,
                swap: 0x2222,
            },
            8,
            0x1111,
        ),
        (
            AtomicOp::CompareSwap {
                compare: 0x9999,
                swap: 0x2222,
            },
            8,
            0x1111,
        ),
        (AtomicOp::FetchAdd { add: 5 }, 8, u64::MAX - 1),
        (
            AtomicOp::MaskedCompareSwap {
                compare: 0,
                compare_mask: 0,
                swap: 0,
                swap_mask: !0x0f,
            },
            8,
            0xabcd,
        ), // AND 0x0f
        (
            AtomicOp::MaskedCompareSwap {
                compare: 0,
                compare_mask: 0,
                swap: 0xf0,
                swap_mask: 0xf0,
            },
            4,
            0x0f,
        ), // OR
        (
            AtomicOp::MaskedCompareSwap {
                compare: 0,
                compare_mask: 0,
                swap: 0x77,
                swap_mask: u64::MAX,
            },
            4,
            0x1,
        ), // SWAP
        (
            AtomicOp::MaskedCompareSwap {
                compare: 0x5,
                compare_mask: 0xf,
                swap: 0xa,
                swap_mask: 0xff,
            },
            8,
            0x25,
        ),
        (
            AtomicOp::MaskedFetchAdd {
                add: 0b1010,
                field_boundary: u64::MAX,
            },
            8,
            0b0110,
        ), // XOR
        (
            AtomicOp::MaskedFetchAdd {
                add: 0x0001_0001,
                field_boundary: 0x8000_8000,
            },
            4,
            0x0001_ffff,
        ),
        (
            AtomicOp::MaskedFetchAdd {
                add: 1,
                field_boundary: 0,
            },
            4,
            0xffff_ffff,
        ),
    ];
    for (i, &(op, w, init)) in cases.iter().enumerate() {
        let off = 8 * (i as u64 % 4);
        let mut before = [0xeeu8; 16];
        before[..8].copy_from_slice(&init.to_le_bytes()[..8]);
        // Fill with a sentinel so a 4-byte op that touches 8 bytes is caught.
        target.write(off as usize, &[0xee; 8]).unwrap();
        target
            .write(off as usize, &init.to_le_bytes()[..w as usize])
            .unwrap();
        result.write(0, &[0xcc; 16]).unwrap();
        let wr = WorkRequest::Atomic {
            remote: remote(&target, off),
            local: sge(&result, 0, w),
            op,
            bytes: w,
        };
        if !matches!(op, AtomicOp::CompareSwap { .. } | AtomicOp::FetchAdd { .. })
            && P::check(&raw.sq, &wr) == Err(gda::hal::PostError::Unsupported)
        {
            // bnxt has no masked atomics: refused up front, never posted (shmem builds them
            // from compare-and-swap loops).
            continue;
        }
        raw.post(&wr, SendFlags::SIGNALED);
        let wc = raw.wait(1)[0];
        assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, w), "case {i}");
        let mut fetched_bytes = vec![0u8; w as usize];
        result.read(0, &mut fetched_bytes).unwrap();
        let mask = if w == 8 { u64::MAX } else { 0xffff_ffff };
        assert_eq!(
            fetched::<P>(&fetched_bytes),
            init & mask,
            "case {i}: fetched old value"
        );
        let mut after = [0u8; 8];
        target.read(off as usize, &mut after).unwrap();
        let mut got = [0u8; 8];
        got[..w as usize].copy_from_slice(&after[..w as usize]);
        assert_eq!(
            u64::from_le_bytes(got),
            op.apply(init, w),
            "case {i}: new value"
        );
        if w == 4 {
            assert_eq!(
                &after[4..],
                &[0xee; 4],
                "case {i}: a 4-byte atomic touched 8 bytes"
            );
        }
        let mut rest = [0u8; 8];
        result
            .read(w as usize, &mut rest[..(16 - w as usize).min(8)])
            .unwrap();
        assert!(
            rest[..(16 - w as usize).min(8)].iter().all(|&b| b == 0xcc),
            "case {i}: result overran its width"
        );
    }
}

fn nop_and_unsignaled_retirement<P: Modeled>() {
    let t = Pair::<P>::simple();
    let mut raw = t.raw_a();
    let dst = t.mr_b(64, Access::REMOTE_WRITE);
    for i in 0..3u8 {
        raw.post(
            &WorkRequest::Write {
                remote: remote(&dst, u64::from(i)),
                payload: Payload::Inline(&[i + 1]),
                imm: None,
            },
            SendFlags::empty(),
        );
    }
    let p = raw.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    let wcs = raw.wait(1);
    assert_eq!(wcs.len(), 1);
    assert_eq!(wcs[0].status, WcStatus::Success);
    // The completion names a unit inside the NOP (mlx5/sim: its first; bnxt: its last).
    let unit = P::completed_unit(&raw.sq, &wcs[0]);
    let bits = P::completion_bits(&raw.sq).min(31);
    let mask = (1u32 << bits) - 1;
    assert!(
        (unit.wrapping_sub(p.start.unit.0) & mask) < p.next.unit.since(p.start.unit),
        "completion counter {unit:#x} outside the NOP [{:?}, {:?})",
        p.start.unit,
        p.next.unit
    );
    assert!(
        raw.drain_for(Duration::from_millis(20)).is_empty(),
        "unsignalled WQEs produced CQEs"
    );
    assert_eq!(
        &contents(&dst)[..3],
        &[1, 2, 3],
        "retired by the later signalled CQE"
    );
}

/// Posts a failing request followed by good ones and checks status, flush and no side effects.
fn expect_error<P: Modeled>(
    t: &Pair<P>,
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

fn errors_have_hardware_status_and_flush<P: Modeled>() {
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
        let t = Pair::<P>::simple();
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

impl<P: Modeled> Pair<P> {
    /// A region of NIC A in a protection domain the requester QP does not belong to.
    fn a_nic_other_pd_mr(&self) -> gda::sim::Mr {
        self.pd_a.nic().alloc_pd().alloc_mr(64, Access::ALL)
    }
}

fn qp_not_ready_and_rnr<P: Modeled>() {
    // QP in INIT: a rung doorbell is a local QP operation error.
    let fabric = gda::sim::Fabric::new(Default::default());
    let nic = fabric.add_shared_model_nic(model::<P>());
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(64, CqMode::Normal).unwrap();
    let qp = pd.create_qp(QpInit::default(), &cq, &cq).unwrap();
    qp.init().unwrap();
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
    let e = qp.modify(QpState::Rts).unwrap_err().to_string();
    assert!(e.contains("Error") && e.contains("Rts"), "{e}");

    // RNR: a SEND with no receive posted and rnr_retry = 0.
    let t = Pair::<P>::new(
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
    let t = Pair::<P>::simple();
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

fn malformed_wqes_give_error_cqes<P: Modeled>() {
    for garbage in [[0xffu8; 64], [0u8; 64], {
        let mut g = [0u8; 64];
        g[0] = 0xee;
        g[3] = 0xee;
        g[7] = 0x3f;
        g
    }] {
        let t = Pair::<P>::simple();
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

fn ordering_fence_and_completion_order<P: Modeled>() {
    for seed in [None, Some(1), Some(2), Some(3), Some(4)] {
        let t = Pair::<P>::new(seed, CqMode::Normal, QpInit::default());
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

fn ring_wrap_far_past_65536<P: Modeled>() {
    for mode in [CqMode::Normal, CqMode::Collapsed] {
        let t = Pair::<P>::new(
            None,
            mode,
            QpInit {
                sq_units: 64,
                ..QpInit::default()
            },
        );
        let dst = t.mr_b(8, Access::REMOTE_WRITE);
        // SAFETY: the QP and CQ outlive the queue; it is the only poster and poller.
        let sq =
            unsafe { SendQueue::<P>::new(t.a.sq_handle::<P>().unwrap(), t.cq_a.handle(), 20_000) }
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
}

fn many_threads_one_qp<P: Modeled>() {
    for mode in [CqMode::Normal, CqMode::Collapsed] {
        let t = Pair::<P>::new(
            None,
            mode,
            QpInit {
                sq_units: 128,
                ..QpInit::default()
            },
        );
        let dst = t.mr_b(16 * 8, Access::REMOTE_WRITE | Access::REMOTE_ATOMIC);
        let ctr = t.mr_b(8, Access::REMOTE_ATOMIC);
        let res = t.mr_a(16 * 8, Access::LOCAL_WRITE);
        // SAFETY: as above.
        let sq =
            unsafe { SendQueue::<P>::new(t.a.sq_handle::<P>().unwrap(), t.cq_a.handle(), 20_000) }
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
}

/// The chaos case `gda chaos` sweeps over any number of seeds (the same function): with four
/// threads on one QP, data is there after every quiet and every atomic counts, on seeds 1..=12
/// (even seeds with a collapsed CQ).
fn chaos_seeds_keep_guarantees<P: Modeled>() {
    for seed in 1..=12u64 {
        gda::chaos::guarantees_on::<P>(model::<P>(), seed).unwrap_or_else(|e| panic!("{e}"));
    }
}

fn cq_overrun_is_reported<P: Modeled>() {
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
fn misuse_is_contained<P: Modeled>() {
    // Consumer index "ahead" of the producer: reported as overrun, engine keeps running.
    let t = Pair::<P>::simple();
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
    let t2 = Pair::<P>::simple();
    let mut raw2 = t2.raw_a();
    raw2.post(&WorkRequest::Nop, SendFlags::SIGNALED);
    assert_eq!(
        raw2.wait(1)[0].status,
        WcStatus::Success,
        "the engine survived"
    );

    // A doorbell for more WQEs than the ring holds: refused with an error CQE.
    let t = Pair::<P>::new(
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
    let t = Pair::<P>::simple();
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
fn receives_flush_in_error<P: Modeled>() {
    let t = Pair::<P>::simple();
    let mut rq = t.recv_b();
    let buf = t.mr_b(64, Access::LOCAL_WRITE);
    rq.post(sge(&buf, 0, 32));
    rq.post(sge(&buf, 32, 32));
    t.b.set_error();
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
fn deregistered_key_fails_after_use<P: Modeled>() {
    let t = Pair::<P>::simple();
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

/// Four NICs in a ring, each QP writing to the next NIC's region, plus a loopback QP.
fn fabric_of_many_nics_and_loopback<P: Modeled>() {
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
        qps[i].init().unwrap();
        qps[i].connect(&ep).unwrap();
    }
    for q in &qps {
        q.ready().unwrap();
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
    oq.init().unwrap();
    assert!(
        oq.connect(&qps[0].endpoint())
            .unwrap_err()
            .to_string()
            .contains("names no QP")
    );
    assert!(gda::sim::Endpoint::from_bytes(&[1, 2, 3]).is_err());
}

/// A kernel with a real bug — a WRITE that forwards data an earlier READ fetched, without FENCE —
/// passes without chaos, is caught by some seeds, and each such seed catches it again.
fn chaos_seed_reproduces_a_missing_fence<P: Modeled>() {
    let run = |seed: Option<u64>| -> bool {
        let t = Pair::<P>::new(seed, CqMode::Normal, QpInit::default());
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
fn early_quiet_is_caught_by_chaos<P: Modeled>() {
    const SEEDS: u64 = 24;
    let run = |seed: u64, early: bool| -> bool {
        let t = Pair::<P>::new(Some(seed), CqMode::Normal, QpInit::default());
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

/// One module of tests per registered provider (`gda::sim::for_each_provider!`: every vendor in
/// the software NIC's registry, in its default configuration — bnxt: static WQEs, MSN table),
/// each running every test of `$tests` on it.
macro_rules! per_provider {
    ([$($prov:ident => $p:ty),* $(,)?] $tests:tt) => {
        $( mod $prov { per_provider!(@tests $p; $tests); } )*
    };
    (@tests $p:ty; ($($name:ident),*)) => {
        $( #[test] fn $name() { super::$name::<$p>(); } )*
    };
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        gda::sim::for_each_provider!(per_provider ($($name),*));
        /// Variable WQEs (wrapping slot by slot) with P5/P7 16-byte PSN entries.
        mod bnxt_variable {
            $( #[test] fn $name() {
                crate::common::with_model(
                    gda::bnxt::model::BnxtModel::from(gda::bnxt::Mode {
                        wqe: gda::bnxt::WqeMode::Variable,
                        psn: gda::bnxt::PsnForm::Ext,
                    }),
                    super::$name::<gda::bnxt::Bnxt>,
                );
            } )*
        }
    };
}

/// The fixed three-slot form holds one SGE or 16 inline bytes: the tests whose requests fit.
macro_rules! conformance_fixed3 {
    ($($name:ident),* $(,)?) => {
        mod bnxt_fixed3 {
            $( #[test] fn $name() {
                crate::common::with_model(
                    gda::bnxt::model::BnxtModel::from(gda::bnxt::Mode {
                        wqe: gda::bnxt::WqeMode::Fixed3,
                        psn: gda::bnxt::PsnForm::Legacy,
                    }),
                    super::$name::<gda::bnxt::Bnxt>,
                );
            } )*
        }
    };
}

conformance_fixed3!(
    write_every_size,
    read_every_size,
    atomics_every_op_and_width,
    nop_and_unsignaled_retirement,
    ordering_fence_and_completion_order,
    ring_wrap_far_past_65536,
    many_threads_one_qp,
    chaos_seeds_keep_guarantees,
    receives_flush_in_error,
);

conformance!(
    write_every_size,
    inline_write_every_size,
    read_every_size,
    send_recv_and_immediates,
    atomics_every_op_and_width,
    nop_and_unsignaled_retirement,
    errors_have_hardware_status_and_flush,
    qp_not_ready_and_rnr,
    malformed_wqes_give_error_cqes,
    ordering_fence_and_completion_order,
    ring_wrap_far_past_65536,
    many_threads_one_qp,
    chaos_seeds_keep_guarantees,
    cq_overrun_is_reported,
    chaos_seed_reproduces_a_missing_fence,
    early_quiet_is_caught_by_chaos,
    fabric_of_many_nics_and_loopback,
    deregistered_key_fails_after_use,
    receives_flush_in_error,
    misuse_is_contained,
);
