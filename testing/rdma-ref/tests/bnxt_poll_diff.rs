//! gda-bnxt's completion path against rdma-core v55's own `bnxt_re_poll_cq` (static mode):
//! synthetic CQE rings — requester CQEs that retire one or several WQEs (coalesced, with
//! `con_indx` carrying extra multiples of the queue size), RC receive CQEs with and without
//! immediates, every requester status as the last CQE, stale CQEs of the previous pass after
//! the valid ones, CQ positions on every pass — must give the same work completions, the same
//! new consumer position and phase, and the same CQ doorbell word.
//!
//! gda's `Bnxt::poll_cq` reports one completion per CQE (a device function does not keep a
//! software queue); the test expands those into per-WQE completions the way a verbs layer does
//! — retire WQEs up to [`Provider::completed_unit`], a completion per signalled one; an error
//! completes the oldest WQE and flushes the rest — and compares with rdma-core's WCs.
//!
//! What comes from gda and what from this test's own posting record, exactly:
//! - from gda: which CQEs are valid (phase), the status and vendor error of each, the retired
//!   position (`con_indx` → `completed_unit`), receive opcode/length/immediate/`wr_id`, the
//!   new consumer position, phase and CQ doorbell word;
//! - from the test (as rdma-core's own wrid table supplies them): the requester `opcode`, the
//!   requester `byte_len` of READs and atomics, and the `WR_FLUSH_ERR` completions of WQEs
//!   outstanding after an error. `Bnxt::poll_cq`'s documentation says the same.

use std::collections::VecDeque;

use gda_bnxt::wire::{CqeBody, CqeRepr, CqeType, cqe::rc_flags};
use gda_bnxt::{Bnxt, Mode, PsnForm, WqeMode};
use gda_hal::{CqHandle, Provider, WcStatus, WqHandle};
use gda_rdma_ref::bnxt::{self, BrefCqCfg, BrefSwqe, BrefWc};
use proptest::prelude::*;

const MAX_SWR: u32 = 64;
const QP_ID: u32 = 0x21;

#[derive(Clone, Debug)]
struct Scenario {
    log2: u32,
    lap: u32,
    head: u32,
    cons: u32,
    /// (ibv_wr opcode, signalled, bytes)
    wqes: Vec<(u32, bool, u32)>,
    /// For each WQE: whether a CQE ends after it (forced at the last one).
    cut: Vec<bool>,
    /// Extra multiples of MAX_SWR added to each con_indx.
    wrap: Vec<u16>,
    /// Receives: (length, imm flag, rdma flag, imm value) and where they go among the CQEs.
    recvs: Vec<(u32, bool, bool, u32, usize)>,
    /// Requester error status for a last CQE, if any.
    error: Option<u8>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        3u32..8,
        0u32..4,
        any::<u32>(),
        0u32..MAX_SWR,
        proptest::collection::vec(
            (
                proptest::sample::select(vec![0u32, 1, 2, 3, 4, 5, 6]),
                any::<bool>(),
                0u32..1 << 20,
            ),
            1..20,
        ),
        proptest::collection::vec(any::<bool>(), 20),
        proptest::collection::vec(0u16..1000, 20),
        proptest::collection::vec(
            (
                0u32..1 << 16,
                any::<bool>(),
                any::<bool>(),
                any::<u32>(),
                0usize..20,
            ),
            0..5,
        ),
        proptest::option::weighted(0.3, 1u8..=0x0c),
    )
        .prop_map(
            |(log2, lap, head, cons, wqes, cut, wrap, recvs, error)| Scenario {
                log2,
                lap,
                head: head % (1 << log2),
                cons,
                wqes,
                cut,
                wrap,
                recvs: if error.is_some() { Vec::new() } else { recvs },
                error,
            },
        )
}

fn wc_opcode(wr: u32) -> u32 {
    match wr {
        0 | 1 => 1,
        2 | 3 => 0,
        4 => 2,
        5 => 3,
        _ => 4,
    }
}

fn cqe(c: &CqeRepr) -> [u8; 32] {
    bytemuck::cast(c.emit())
}

/// Builds the ring: (bytes, number of valid CQEs).
fn build(s: &Scenario) -> (Vec<u8>, usize) {
    let depth = 1u32 << s.log2;
    let ci0 = s.lap * depth + s.head;
    let phase_of = |ci: u32| ((ci >> s.log2) & 1) == 0; // first pass: phase 1
    // Every slot holds a stale CQE of the pass before the one it is read on.
    let mut ring = vec![0u8; depth as usize * 32];
    for k in 0..depth {
        let ci = ci0 + k;
        let stale = CqeRepr {
            cqe_type: CqeType::Req,
            phase: !phase_of(ci),
            toggle: 0,
            status: 0,
            flags: 0,
            rwrid: 0,
            src_qpn_hi: 0,
            body: CqeBody::Req {
                qp_handle: u64::from(QP_ID),
                con_indx: 7,
            },
        };
        let slot = (ci % depth) as usize;
        ring[slot * 32..slot * 32 + 32].copy_from_slice(&cqe(&stale));
    }
    let mut list: Vec<CqeRepr> = Vec::new();
    let n = s.wqes.len();
    // Success batches; with an error, the last WQE's CQE is the error and the WQEs after the
    // last success batch... all of the batch before it must have been retired first.
    let ok_end = if s.error.is_some() {
        // Retire a prefix successfully, then the next WQE fails; the rest are flushed.
        (0..n)
            .rev()
            .find(|&i| s.cut[i] && i + 1 < n)
            .map_or(0, |i| i + 1)
    } else {
        n
    };
    let mut retired = 0usize;
    for i in 0..ok_end {
        if s.cut[i] || i + 1 == ok_end {
            let con = (s.cons + i as u32 + 1) % MAX_SWR + u32::from(s.wrap[i]) * MAX_SWR;
            list.push(CqeRepr {
                cqe_type: CqeType::Req,
                phase: true,
                toggle: 0,
                status: 0,
                flags: 0,
                rwrid: 0,
                src_qpn_hi: 0,
                body: CqeBody::Req {
                    qp_handle: u64::from(QP_ID),
                    con_indx: con & 0xffff,
                },
            });
            retired = i + 1;
        }
    }
    if let Some(st) = s.error {
        list.push(CqeRepr {
            cqe_type: CqeType::Req,
            phase: true,
            toggle: 0,
            status: st,
            flags: 0,
            rwrid: 0,
            src_qpn_hi: 0,
            body: CqeBody::Req {
                qp_handle: u64::from(QP_ID),
                con_indx: (s.cons + retired as u32 + 1) % MAX_SWR,
            },
        });
    }
    for &(length, imm, rdma, value, at) in &s.recvs {
        let mut flags = 0;
        if imm {
            flags |= rc_flags::IMM;
            if rdma {
                flags |= rc_flags::RDMA;
            }
        }
        let r = CqeRepr {
            cqe_type: CqeType::RecvRc,
            phase: true,
            toggle: 0,
            status: 0,
            flags,
            rwrid: 0,
            src_qpn_hi: 0,
            body: CqeBody::RecvRc {
                length,
                imm: value,
                qp_handle: u64::from(QP_ID),
                mr_handle: 0,
            },
        };
        list.insert(at.min(list.len()), r);
    }
    for (k, c) in list.iter().enumerate() {
        let ci = ci0 + k as u32;
        let mut c = *c;
        c.phase = phase_of(ci);
        let slot = (ci % depth) as usize;
        ring[slot * 32..slot * 32 + 32].copy_from_slice(&cqe(&c));
    }
    (ring, list.len())
}

fn check(s: &Scenario) -> Result<(), TestCaseError> {
    let depth = 1u32 << s.log2;
    let (ring, valid) = build(s);
    prop_assume!(valid < depth as usize);
    let ci0 = s.lap * depth + s.head;

    // rdma-core.
    let swqe: Vec<BrefSwqe> = s
        .wqes
        .iter()
        .enumerate()
        .map(|(i, &(op, sig, bytes))| BrefSwqe {
            wr_id: 1000 + i as u64,
            wr_opcode: op,
            signaled: u32::from(sig || i + 1 == s.wqes.len()),
            bytes,
            slots: 8,
        })
        .collect();
    let rq_ids: Vec<u64> = (0..s.recvs.len() as u64).map(|i| 5000 + i).collect();
    let cfg = BrefCqCfg {
        cq_id: 0x10,
        cq_depth: depth,
        cq_head: s.head,
        cq_phase: u32::from((s.lap & 1) == 0),
        cq_head_epoch: s.lap & 1,
        deferred_db: 0,
        hw_cqes: 0,
        nwc: 64,
        qp_id: QP_ID,
        qp_type: 2,
        max_swr: MAX_SWR,
        sq_slots: MAX_SWR * 8,
        sq_head: s.cons * 8,
        sq_cons_idx: s.cons,
        n_swqe: 0,
        swqe: std::ptr::null(),
        rq_nwr: 8,
        rq_slots: 64,
        rq_max_slots: 8,
        rq_head: 0,
        rq_cons_idx: 0,
        n_rwqe: 0,
        rq_wr_id: std::ptr::null(),
    };
    let mut ref_ring = ring.clone();
    let (want, out) = bnxt::poll_cq(&cfg, &swqe, &rq_ids, &mut ref_ring);
    prop_assert!(out.n_wc >= 0, "harness refused: {}", out.n_wc);

    // gda: device-level poll, expanded per WQE.
    let mut mine = ring.clone();
    let mut db = 0u64;
    let cq = CqHandle {
        buf: mine.as_mut_ptr() as u64,
        db: &mut db as *mut u64 as u64,
        entries: depth,
        cqe_bytes: 32,
        cqn: 0x10,
        ..CqHandle::default()
    };
    let mode = Mode {
        wqe: WqeMode::Static,
        psn: PsnForm::Msn,
    };
    // Only the ring geometry and mode matter here (nothing is posted); the table is real.
    let mut table = vec![0u64; mode.psn_entries(MAX_SWR) as usize];
    let wq = gda_bnxt::BnxtSq::new(
        WqHandle {
            entries: MAX_SWR,
            ..WqHandle::default()
        },
        mode,
        table.as_mut_ptr() as u64,
        mode.psn_entries(MAX_SWR),
        1024,
        0,
    )
    .unwrap();
    let mut sq: VecDeque<(usize, BrefSwqe)> = swqe.iter().copied().enumerate().collect();
    let mut rq: VecDeque<u64> = rq_ids.iter().copied().collect();
    let mut cons = s.cons;
    let mut got = Vec::new();
    let mut ci = ci0;
    // SAFETY: the ring and doorbell word are owned here.
    while let Some(wc) = unsafe { Bnxt::poll_cq(&cq, ci) } {
        ci += 1;
        prop_assert_eq!(wc.qpn, QP_ID);
        if wc.is_recv {
            let wr_id = rq.pop_front().unwrap_or(0);
            got.push(BrefWc {
                wr_id,
                status: wc.status.as_raw(),
                opcode: wc.opcode as u32,
                vendor_err: u32::from(wc.vendor_err),
                byte_len: wc.byte_len,
                imm_data: wc.imm.map_or(0, u32::to_be),
                wc_flags: if wc.imm.is_some() { 2 } else { 0 },
                qp_num: wc.qpn,
                src_qp: 0,
                sl: 0,
            });
            continue;
        }
        if wc.status != WcStatus::Success {
            let Some((_, w)) = sq.pop_front() else { break };
            got.push(BrefWc {
                wr_id: w.wr_id,
                status: wc.status.as_raw(),
                opcode: wc_opcode(w.wr_opcode),
                vendor_err: u32::from(wc.vendor_err),
                qp_num: wc.qpn,
                ..BrefWc::default()
            });
            // The QP is in error: everything still outstanding is flushed.
            while let Some((_, w)) = sq.pop_front() {
                got.push(BrefWc {
                    wr_id: w.wr_id,
                    status: WcStatus::WrFlushErr.as_raw(),
                    opcode: 128, // rdma-core v55 quirk (NOTES.md 12): flushed WQEs say RECV
                    vendor_err: 0,
                    qp_num: QP_ID,
                    ..BrefWc::default()
                });
            }
            break;
        }
        let target = Bnxt::completed_unit(&wq, &wc).wrapping_add(1) % MAX_SWR;
        while cons != target {
            let Some((_, w)) = sq.pop_front() else { break };
            cons = (cons + 1) % MAX_SWR;
            if w.signaled != 0 {
                let op = wc_opcode(w.wr_opcode);
                got.push(BrefWc {
                    wr_id: w.wr_id,
                    status: 0,
                    opcode: op,
                    byte_len: if matches!(op, 2..=4) { w.bytes } else { 0 },
                    qp_num: wc.qpn,
                    ..BrefWc::default()
                });
            }
        }
    }
    let consumed = ci - ci0;
    if consumed > 0 {
        // SAFETY: as above.
        unsafe { Bnxt::update_cq_ci(&cq, ci) };
    }
    prop_assert_eq!(consumed as usize, valid, "CQEs consumed");
    prop_assert_eq!(&got, &want, "work completions");
    prop_assert_eq!(out.cq_head_after, ci % depth, "consumer index");
    prop_assert_eq!(
        out.cq_phase_after,
        u32::from(((ci >> s.log2) & 1) == 0),
        "phase"
    );
    prop_assert_eq!(out.cq_head_epoch_after, (ci >> s.log2) & 1, "head epoch");
    prop_assert_eq!(db, out.doorbell, "CQ doorbell word");
    Ok(())
}

/// 3,000 random rings (`PROPTEST_CASES` to change), every one compared; at least a fifth of
/// them end in an error CQE with flushes and a fifth carry receive CQEs, so each kind of ring is
/// really compared in every run.
#[test]
fn poll_matches_bnxt_re_poll_cq() {
    let cases: u32 = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let counts = std::cell::Cell::new([0u32; 3]);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    let r = runner.run(&scenario(), |s| {
        check(&s)?;
        let mut c = counts.get();
        c[0] += 1;
        c[1] += u32::from(s.error.is_some());
        c[2] += u32::from(!s.recvs.is_empty());
        counts.set(c);
        Ok(())
    });
    if let Err(e) = r {
        panic!("{e}");
    }
    let [all, errors, recvs] = counts.get();
    assert_eq!(all, cases, "rings compared");
    assert!(
        errors * 5 >= cases,
        "only {errors} of {cases} rings ended in an error"
    );
    assert!(
        recvs * 5 >= cases,
        "only {recvs} of {cases} rings had receive CQEs"
    );
}

#[test]
fn every_requester_status_maps_like_rdma_core() {
    // One error CQE per status byte (0..=255) on a one-WQE queue.
    for st in 1..=255u8 {
        let s = Scenario {
            log2: 3,
            lap: 0,
            head: 0,
            cons: 5,
            wqes: vec![(0, true, 64)],
            cut: vec![true; 20],
            wrap: vec![0; 20],
            recvs: Vec::new(),
            error: Some(st),
        };
        check(&s).unwrap_or_else(|e| panic!("status {st:#x}: {e}"));
    }
}
