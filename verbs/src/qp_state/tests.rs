//! The RC state table, each refusal and its errno, and a property test of the mask rule.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::mask::*;
use super::*;

/// A RoCE port as the software NIC shows one, but with a 1024-byte active MTU (so a larger
/// path MTU can be refused) and GIDs 0/2 RoCE v1, 1/3 RoCE v2.
fn roce() -> PortView {
    PortView {
        port_count: 1,
        active_mtu: sys::IBV_MTU_1024,
        ethernet: true,
        gids: vec![(0, false), (1, true), (2, false), (3, true)],
        gid_table_len: 256,
        pkeys: 1,
        max_rd_atomic: 16,
        max_dest_rd_atomic: 16,
        qp_port: 1,
    }
}

/// An InfiniBand port (no GRH needed; alternate paths allowed).
fn ib() -> PortView {
    PortView {
        ethernet: false,
        ..roce()
    }
}

/// Attributes every value check accepts, for any transition.
fn good() -> sys::ibv_qp_attr {
    // SAFETY: `ibv_qp_attr` is plain C data; all zeros is a valid value.
    let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.port_num = 1;
    a.pkey_index = 0;
    a.qp_access_flags = QP_ACCESS_FLAGS;
    a.path_mtu = sys::IBV_MTU_1024;
    a.dest_qp_num = 0x00ab_cdef;
    a.rq_psn = 0x00ff_ffff;
    a.sq_psn = 0x0012_3456;
    a.max_dest_rd_atomic = 16;
    a.max_rd_atomic = 16;
    a.min_rnr_timer = 31;
    a.timeout = 31;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.path_mig_state = sys::IBV_MIG_ARMED;
    for ah in [&mut a.ah_attr, &mut a.alt_ah_attr] {
        ah.is_global = 1;
        ah.port_num = 1;
        ah.grh.sgid_index = 3;
        ah.grh.hop_limit = 64;
    }
    a.alt_port_num = 1;
    a
}

/// `check_modify` from `cur` with `qp_state = next` and `cur_qp_state = cur`.
fn run(
    cur: QpState,
    next: QpState,
    m: u32,
    a: &sys::ibv_qp_attr,
    p: &PortView,
) -> Result<u32, Errno> {
    let mut a = *a;
    a.qp_state = next.raw();
    a.cur_qp_state = cur.raw();
    check_modify(cur.raw(), &a, m as c_int, p)
}

fn valid_pairs() -> Vec<(QpState, QpState, Rule)> {
    let mut v = Vec::new();
    for c in QpState::ALL {
        for n in QpState::ALL {
            if let Some(r) = rc_rule(c, n) {
                v.push((c, n, r));
            }
        }
    }
    v
}

/// Whether mlx5 carries the transition out (RESET→RESET is answered before its op table).
fn mlx5_ok(c: QpState, n: QpState) -> bool {
    mlx5_has_command(c, n) || (c == QpState::Reset && n == QpState::Reset)
}

/// The kernel's RC rows, spot-checked against the text of verbs.c (and 42e3aac65c1c).
#[test]
fn table_matches_the_kernel() {
    use QpState::*;
    let pairs = valid_pairs();
    assert_eq!(pairs.len(), 22, "valid RC (cur, next) pairs");
    assert_eq!(
        rc_rule(Reset, Init),
        Some(Rule {
            req: PKEY_INDEX | PORT | ACCESS_FLAGS,
            opt: 0
        })
    );
    assert_eq!(
        rc_rule(Init, Rtr),
        Some(Rule {
            req: AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
            opt: ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | RATE_LIMIT
        })
    );
    assert_eq!(
        rc_rule(Rtr, Rts),
        Some(Rule {
            req: SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC,
            opt: CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE | RATE_LIMIT
        })
    );
    // Every state but RESET may go to RESET and ERR; RESET→ERR is not in the kernel's table.
    for s in QpState::ALL {
        assert!(rc_rule(s, Reset).is_some());
        assert_eq!(rc_rule(s, Err).is_some(), s != Reset, "{s:?}→ERR");
    }
    // No RC transition takes QKEY or CAP; STATE is implied, never listed; no bit is both.
    for (c, n, r) in &pairs {
        assert_eq!((r.req | r.opt) & (QKEY | CAP | STATE), 0, "{c:?}→{n:?}");
        assert_eq!(
            r.req & r.opt,
            0,
            "{c:?}→{n:?}: a bit both required and optional"
        );
    }
    assert!(!mlx5_has_command(Rts, Sqd) && !mlx5_has_command(Sqd, Sqd));
}

/// For every valid transition: the minimal set passes; each required bit removed fails; every
/// bit outside required ∪ optional fails; and all of required ∪ optional passes.
#[test]
fn every_transition_minimal_missing_forbidden() {
    let (a, p) = (good(), ib());
    let (mut minimal, mut full, mut missing, mut forbidden, mut no_command) = (0, 0, 0, 0, 0);
    for (c, n, r) in valid_pairs() {
        // The kernel layer alone.
        assert!(
            ib_modify_qp_is_ok(c, n, STATE | r.req).is_ok(),
            "{c:?}→{n:?}"
        );
        let m = STATE | r.req;
        let full_mask = m | (r.opt & !RATE_LIMIT);
        match run(c, n, m, &a, &p) {
            Ok(s) if mlx5_ok(c, n) => {
                assert_eq!(s, n.raw());
                minimal += 1;
                // The optional bits too (RATE_LIMIT is optional in the kernel, EOPNOTSUPP on mlx5).
                assert_eq!(run(c, n, full_mask, &a, &p).map_err(|e| e.why), Ok(n.raw()));
                full += 1;
            }
            Err(e) if !mlx5_ok(c, n) => {
                assert_eq!(e.code, libc::EINVAL);
                assert!(e.why.contains("firmware has no"), "{}", e.why);
                no_command += 1;
            }
            other => panic!("{c:?}→{n:?}: {other:?}"),
        }
        for (b, name) in NAMED.iter().copied().filter(|(b, _)| r.req & b != 0) {
            let e = run(c, n, m & !b, &a, &p).unwrap_err();
            assert_eq!(e.code, libc::EINVAL, "{c:?}→{n:?} without {name}");
            assert!(
                e.why.contains("requires") && e.why.contains(name),
                "{}",
                e.why
            );
            missing += 1;
        }
        for (b, name) in NAMED
            .iter()
            .copied()
            .filter(|(b, _)| (r.req | r.opt | STATE) & b == 0)
        {
            let e = run(c, n, m | b, &a, &p).unwrap_err();
            assert_eq!(e.code, libc::EINVAL, "{c:?}→{n:?} with {name}: {}", e.why);
            assert!(e.why.contains(name), "{}", e.why);
            forbidden += 1;
        }
    }
    // 22 valid pairs; mlx5 has no command for RTS→SQD and SQD→SQD.
    assert_eq!(minimal, 20);
    assert_eq!(full, 20);
    assert_eq!(no_command, 2);
    // RESET→INIT 3, INIT→RTR 6, RTR→RTS 5.
    assert_eq!(missing, 14);
    // 22 pairs × 21 named bits besides STATE, less the 51 required-or-optional ones.
    assert_eq!(forbidden, 411);
}

/// Pairs outside the table, with the attributes of the step they skip to, are refused.
#[test]
fn skipped_and_backward_states() {
    let (a, p) = (good(), roce());
    let mut refused = 0;
    for c in QpState::ALL {
        for n in QpState::ALL {
            if rc_rule(c, n).is_some() {
                continue;
            }
            // The mask the target state is normally reached with (or STATE alone).
            let reach = QpState::ALL
                .iter()
                .find_map(|&from| rc_rule(from, n).filter(|_| from != n))
                .map_or(0, |r| r.req);
            for m in [STATE, STATE | reach] {
                let mut p = p.clone();
                p.qp_port = u8::from(c != QpState::Reset);
                let e = run(c, n, m, &a, &p).unwrap_err();
                assert_eq!(e.code, libc::EINVAL, "{c:?}→{n:?}: {}", e.why);
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 2 * (49 - 22));
    let e = run(QpState::Reset, QpState::Rtr, STATE, &a, &roce()).unwrap_err();
    assert_eq!(
        e.why,
        "RESET→RTR is not a valid RC QP transition (from RESET: RESET, INIT)"
    );
    let e = run(QpState::Init, QpState::Rts, STATE, &a, &roce()).unwrap_err();
    assert!(e.why.starts_with("INIT→RTS is not a valid"), "{}", e.why);
    let e = run(QpState::Reset, QpState::Err, STATE, &a, &roce()).unwrap_err();
    assert!(e.why.starts_with("RESET→ERR is not a valid"), "{}", e.why);
}

/// The refusals a user sees most, word for word.
#[test]
fn messages_name_transition_and_bits() {
    let m = STATE | AV | PATH_MTU | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    let e = run(QpState::Init, QpState::Rtr, m, &good(), &roce()).unwrap_err();
    assert_eq!(
        e.why,
        "INIT→RTR requires IBV_QP_RQ_PSN|IBV_QP_DEST_QPN (given: IBV_QP_STATE|IBV_QP_AV|IBV_QP_PATH_MTU|IBV_QP_MIN_RNR_TIMER|IBV_QP_MAX_DEST_RD_ATOMIC)"
    );
    let m = STATE | PKEY_INDEX | PORT | ACCESS_FLAGS | SQ_PSN;
    let e = run(QpState::Reset, QpState::Init, m, &good(), &roce()).unwrap_err();
    assert_eq!(
        e.why,
        "RESET→INIT does not take IBV_QP_SQ_PSN (required: IBV_QP_STATE|IBV_QP_ACCESS_FLAGS|IBV_QP_PKEY_INDEX|IBV_QP_PORT; optional: 0; given: IBV_QP_STATE|IBV_QP_ACCESS_FLAGS|IBV_QP_PKEY_INDEX|IBV_QP_PORT|IBV_QP_SQ_PSN)"
    );
    assert_eq!(mask::names(0), "0");
    assert_eq!(mask::names(1 << 30 | STATE), "IBV_QP_STATE|bit 30");
}

/// Each attribute-value check, from a base case that passes, with its errno and reason.
#[test]
fn values_are_checked() {
    use QpState::*;
    let init = STATE | PKEY_INDEX | PORT | ACCESS_FLAGS;
    let rtr = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    let rts = STATE | SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC;
    type Edit = fn(&mut sys::ibv_qp_attr, &mut PortView);
    #[rustfmt::skip]
    let cases: [(QpState, QpState, u32, Edit, c_int, &str); 29] = [
        (Reset, Init, init, |a, _| a.port_num = 0, libc::EINVAL, "port_num 0"),
        (Reset, Init, init, |a, _| a.port_num = 2, libc::EINVAL, "port_num 2"),
        (Reset, Init, init, |a, _| a.pkey_index = 1, libc::EINVAL, "pkey_index 1"),
        (Reset, Init, init, |a, _| a.qp_access_flags |= 0x10, libc::EINVAL, "qp_access_flags"),
        (Reset, Init, init, |a, _| a.qp_state = 7, libc::EINVAL, "qp_state 7"),
        (Init, Init, STATE | PORT, |a, _| a.port_num = 3, libc::EINVAL, "port_num 3"),
        (Init, Rtr, rtr, |a, _| a.ah_attr.is_global = 0, libc::EINVAL, "is_global is 0 on a RoCE port"),
        (Init, Rtr, rtr, |a, _| a.ah_attr.grh.sgid_index = 4, libc::ENODATA, "sgid_index 4 names an empty"),
        (Init, Rtr, rtr, |a, _| a.ah_attr.grh.sgid_index = 200, libc::ENODATA, "sgid_index 200 names an empty"),
        (Init, Rtr, rtr, |a, p| { a.ah_attr.grh.sgid_index = 9; p.gid_table_len = 8; }, libc::EINVAL, "outside the GID table"),
        (Init, Rtr, rtr, |a, _| a.ah_attr.port_num = 0, libc::EINVAL, "ah_attr.port_num 0"),
        (Init, Rtr, rtr, |a, _| a.ah_attr.port_num = 2, libc::EINVAL, "ah_attr.port_num 2"),
        (Init, Rtr, rtr, |_, p| { p.port_count = 2; p.qp_port = 2; }, libc::EINVAL, "is not the QP's port 2"),
        (Init, Rtr, rtr, |a, _| a.path_mtu = 0, libc::EINVAL, "path_mtu 0 is not an MTU"),
        (Init, Rtr, rtr, |a, _| a.path_mtu = 6, libc::EINVAL, "path_mtu 6 is not an MTU"),
        (Init, Rtr, rtr, |a, _| a.path_mtu = sys::IBV_MTU_2048, libc::EINVAL, "exceeds the port's active MTU"),
        (Init, Rtr, rtr, |a, _| a.dest_qp_num = 1 << 24, libc::EINVAL, "dest_qp_num 0x1000000"),
        (Init, Rtr, rtr, |a, _| a.rq_psn = 1 << 24, libc::EINVAL, "rq_psn 0x1000000"),
        (Init, Rtr, rtr, |a, _| a.min_rnr_timer = 32, libc::EINVAL, "min_rnr_timer 0x20"),
        (Init, Rtr, rtr, |a, _| a.max_dest_rd_atomic = 17, libc::EINVAL, "max_dest_rd_atomic 17"),
        (Rtr, Rts, rts, |a, _| a.sq_psn = 1 << 24, libc::EINVAL, "sq_psn 0x1000000"),
        (Rtr, Rts, rts, |a, _| a.retry_cnt = 8, libc::EINVAL, "retry_cnt 0x8"),
        (Rtr, Rts, rts, |a, _| a.rnr_retry = 8, libc::EINVAL, "rnr_retry 0x8"),
        (Rtr, Rts, rts, |a, _| a.timeout = 32, libc::EINVAL, "timeout 0x20"),
        (Rtr, Rts, rts, |a, _| a.max_rd_atomic = 17, libc::EINVAL, "max_rd_atomic 17"),
        (Rtr, Rts, rts | PATH_MIG_STATE, |a, _| a.path_mig_state = 3, libc::EINVAL, "path_mig_state 0x3"),
        (Rtr, Rts, rts | CUR_STATE, |a, _| a.cur_qp_state = 9, libc::EINVAL, "cur_qp_state 9"),
        (Rts, Rts, STATE | CUR_STATE, |a, _| a.cur_qp_state = SQD, libc::EINVAL, "says SQD but the QP is in RTS"),
        (Rtr, Rts, rts | ALT_PATH, |a, _| a.alt_port_num = 2, libc::EINVAL, "alt_port_num 2"),
    ];
    let mut checked = 0;
    for (cur, next, m, edit, code, what) in cases {
        let (mut a, mut p) = (good(), if m & ALT_PATH != 0 { ib() } else { roce() });
        a.qp_state = next.raw();
        a.cur_qp_state = cur.raw();
        let base = check_modify(cur.raw(), &a, m as c_int, &p);
        assert_eq!(
            base.map_err(|e| e.why),
            Ok(next.raw()),
            "{what}: the base case passes"
        );
        edit(&mut a, &mut p);
        let e = check_modify(cur.raw(), &a, m as c_int, &p).unwrap_err();
        assert_eq!(e.code, code, "{what}: {}", e.why);
        assert!(e.why.contains(what), "{what}: {}", e.why);
        checked += 1;
    }
    assert_eq!(checked, 29);
}

/// Masks refused for themselves (the attribute values are all good).
#[test]
fn masks_refused_with_their_errno() {
    use QpState::*;
    let rtr = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    #[rustfmt::skip]
    let cases: [(QpState, QpState, u32, c_int, &str); 9] = [
        (Init, Rtr, rtr | ALT_PATH, libc::EINVAL, "alternate paths (APM)"),
        (Init, Rtr, rtr | RATE_LIMIT, libc::EOPNOTSUPP, "rate-limits only raw packet QPs"),
        (Rts, Rts, STATE | RATE_LIMIT, libc::EOPNOTSUPP, "rate-limits only raw packet QPs"),
        (Init, Init, STATE | CUR_STATE, libc::EINVAL, "only from RTR, RTS, SQD or SQE"),
        (Rts, Rts, STATE | (1 << 21), libc::EOPNOTSUPP, "bit 21 are not modify_qp"),
        (Rts, Rts, STATE | (1 << 26), libc::EOPNOTSUPP, "bit 26 are not modify_qp"),
        (Err, Err, u32::MAX, libc::EOPNOTSUPP, "are not modify_qp"),
        (Rts, Rts, STATE | RATE_LIMIT | (1 << 22), libc::EINVAL, "does not take bit 22"),
        (Rts, Sqd, STATE | EN_SQD_ASYNC_NOTIFY, libc::EINVAL, "no RTS→SQD command"),
    ];
    for (cur, next, m, code, what) in cases {
        let e = run(cur, next, m, &good(), &roce()).unwrap_err();
        assert_eq!(e.code, code, "{what}: {}", e.why);
        assert!(e.why.contains(what), "{what}: {}", e.why);
    }
}

/// What the kernel accepts and gda does too: RoCE v1 source GIDs, IB without a GRH, the
/// alternate path on IB, values ignored when their bit is absent, RESET→RESET with nothing.
#[test]
fn accepted_edge_cases() {
    use QpState::*;
    let rtr = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    let mut a = good();
    a.ah_attr.grh.sgid_index = 0; // RoCE v1
    assert_eq!(run(Init, Rtr, rtr, &a, &roce()).map_err(|e| e.why), Ok(RTR));
    let mut a = good();
    a.ah_attr.is_global = 0;
    assert_eq!(
        run(Init, Rtr, rtr | ALT_PATH, &a, &ib()).map_err(|e| e.why),
        Ok(RTR)
    );
    let mut a = good();
    a.retry_cnt = 200; // no IBV_QP_RETRY_CNT: not looked at
    a.sq_psn = u32::MAX;
    assert_eq!(run(Init, Rtr, rtr, &a, &roce()).map_err(|e| e.why), Ok(RTR));
    let mut a = good();
    a.port_num = 9; // RESET→RESET with nothing else: answered before any value check
    assert_eq!(
        run(Reset, Reset, STATE, &a, &roce()).map_err(|e| e.why),
        Ok(RESET)
    );
    // No IBV_QP_STATE: the QP stays where it is (INIT→INIT, RTS→RTS).
    let mut p = roce();
    p.qp_port = 1;
    let mut a = good();
    a.qp_state = 99; // ignored without the bit
    assert_eq!(
        check_modify(INIT, &a, ACCESS_FLAGS as c_int, &p).map_err(|e| e.why),
        Ok(INIT)
    );
    assert_eq!(
        check_modify(RTS, &a, MIN_RNR_TIMER as c_int, &p).map_err(|e| e.why),
        Ok(RTS)
    );
    assert_eq!(check_modify(ERR, &a, 0, &p).map_err(|e| e.why), Ok(ERR));
    // SQD→SQD is the kernel's, but mlx5 has no command for it.
    assert!(ib_modify_qp_is_ok(Sqd, Sqd, STATE | PORT | AV).is_ok());
    assert_eq!(
        run(Sqd, Sqd, STATE | PORT | AV, &good(), &ib())
            .unwrap_err()
            .code,
        libc::EINVAL
    );
    // An unknown current state is the caller's bug, not the user's, but still no panic.
    assert_eq!(
        check_modify(7, &good(), 0, &p).unwrap_err().code,
        libc::EINVAL
    );
}

/// The model the property tests compare against: set algebra on the kernel's table, then
/// the mlx5 layer.
fn model(cur: QpState, next: QpState, m: u32, p: &PortView) -> Result<u32, c_int> {
    let carried = if m & RATE_LIMIT != 0 {
        (1 << 26) - 1
    } else {
        (1 << 21) - 1
    };
    if m & !carried != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if m & ALT_PATH != 0 && p.ethernet {
        return Err(libc::EINVAL);
    }
    let cur_ok = m & CUR_STATE == 0
        || matches!(
            cur,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        );
    let Some(r) = rc_rule(cur, next).filter(|_| cur_ok) else {
        return Err(libc::EINVAL);
    };
    if r.req & !m != 0 || m & !(r.req | r.opt | STATE) != 0 {
        return Err(libc::EINVAL);
    }
    if cur == QpState::Reset && next == QpState::Reset {
        return Ok(RESET);
    }
    if m & RATE_LIMIT != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if !mlx5_has_command(cur, next) {
        return Err(libc::EINVAL);
    }
    Ok(next.raw())
}

fn state() -> impl Strategy<Value = QpState> {
    proptest::sample::select(QpState::ALL.to_vec())
}

/// Random masks, and masks built near a transition's rule (required ∪ some optional bits,
/// then maybe one bit flipped): accepted iff required ⊆ mask ⊆ required ∪ optional (∪ STATE)
/// and the mlx5 layer carries the transition; the errno is the model's.
#[test]
fn masks_accepted_iff_within_the_rule() {
    static CASES: AtomicUsize = AtomicUsize::new(0);
    static ACCEPTED: AtomicUsize = AtomicUsize::new(0);
    let near = (
        state(),
        state(),
        any::<u32>(),
        proptest::option::of(0u32..27),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(c, n, opt_pick, flip, with_state, ethernet)| {
            let r = rc_rule(c, n).unwrap_or(Rule { req: 0, opt: 0 });
            let mut m = r.req | (r.opt & opt_pick) | if with_state { STATE } else { 0 };
            if let Some(b) = flip {
                m ^= 1 << b;
            }
            (c, n, m, ethernet)
        });
    let random = (state(), state(), any::<u32>(), any::<bool>())
        .prop_map(|(c, n, m, ethernet)| (c, n, m & ((1 << 27) - 1), ethernet));
    let mut runner = TestRunner::new(Config {
        cases: 4000,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &prop_oneof![3 => near, 1 => random],
            |(c, n, m, ethernet)| {
                let p = if ethernet { roce() } else { ib() };
                let effective_next = if m & STATE != 0 { n } else { c };
                let got = run(c, n, m, &good(), &p).map_err(|e| e.code);
                let want = model(c, effective_next, m, &p);
                CASES.fetch_add(1, Ordering::Relaxed);
                if got.is_ok() {
                    ACCEPTED.fetch_add(1, Ordering::Relaxed);
                }
                prop_assert_eq!(
                    got,
                    want,
                    "{:?}→{:?} mask {}",
                    c,
                    effective_next,
                    mask::names(m)
                );
                Ok(())
            },
        )
        .unwrap();
    let (cases, accepted) = (
        CASES.load(Ordering::Relaxed),
        ACCEPTED.load(Ordering::Relaxed),
    );
    assert_eq!(cases, 4000);
    // Not vacuous: a good share of both verdicts.
    assert!(
        accepted > 200 && cases - accepted > 200,
        "{accepted} of {cases} accepted"
    );
}

/// Exhaustive for in-rule masks: every subset of each valid transition's optional bits, with
/// and without IBV_QP_STATE, on RoCE and IB, is decided as the model decides.
#[test]
fn every_subset_of_optional_bits() {
    let mut cases = 0;
    for (c, n, r) in valid_pairs() {
        let bits: Vec<u32> = (0..32)
            .map(|i| 1u32 << i)
            .filter(|b| r.opt & b != 0)
            .collect();
        for subset in 0u32..(1 << bits.len()) {
            let opt: u32 = bits
                .iter()
                .enumerate()
                .filter(|(i, _)| subset & (1 << i) != 0)
                .map(|(_, b)| b)
                .sum();
            for with_state in [STATE, 0] {
                if with_state == 0 && c != n {
                    continue;
                }
                for p in [roce(), ib()] {
                    let m = r.req | opt | with_state;
                    let got = run(c, n, m, &good(), &p).map_err(|e| e.code);
                    assert_eq!(got, model(c, n, m, &p), "{c:?}→{n:?} {}", mask::names(m));
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 16_934);
}
