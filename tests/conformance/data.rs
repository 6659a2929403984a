//! Data movement on every provider: WRITE, inline WRITE, READ, SEND/RECV with immediates,
//! every atomic, NOP and unsignalled retirement.

use super::*;

pub(crate) const SIZES: &[usize] = &[0, 1, 7, 8, 63, 64, 4095, 4096, 65536, 1 << 20];

pub(crate) fn write_every_size<R: Rig>() {
    let t = Pair::<R>::simple();
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

pub(crate) fn inline_write_every_size<R: Rig>() {
    let t = Pair::<R>::simple();
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
                <R::P as Provider>::check(&raw.sq, &wr),
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

pub(crate) fn read_every_size<R: Rig>() {
    let t = Pair::<R>::simple();
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

pub(crate) fn send_recv_and_immediates<R: Rig>() {
    let t = Pair::<R>::simple();
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

pub(crate) fn atomics_every_op_and_width<R: Rig>() {
    let t = Pair::<R>::simple();
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
            && <R::P as Provider>::check(&raw.sq, &wr) == Err(gda::hal::PostError::Unsupported)
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
            fetched::<R::P>(&fetched_bytes),
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

pub(crate) fn nop_and_unsignaled_retirement<R: Rig>() {
    let t = Pair::<R>::simple();
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
    let unit = <R::P as Provider>::completed_unit(&raw.sq, &wcs[0]);
    let bits = <R::P as Provider>::completion_bits(&raw.sq).min(31);
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
