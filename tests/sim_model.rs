//! Property test: random sequences of operations on random memory, on both device models (with
//! and without chaos), compared with a plain model of memory. Out-of-bounds and access-violating
//! operations are generated on purpose: the model says the first one fails with its status and
//! everything after it is flushed; nothing outside a region that granted the access changes.

mod common;

use common::*;
use gda::hal::{AtomicOp, Payload, SendFlags, WcStatus, WorkRequest};
use gda::sim::{Access, CqMode, Modeled, QpInit};
use proptest::prelude::*;

const N: usize = 256;

#[derive(Clone, Debug)]
enum Op {
    /// WRITE `len` bytes from local `l` at `lo` to remote `r` at `ro`.
    Write {
        l: usize,
        lo: usize,
        r: usize,
        ro: usize,
        len: usize,
    },
    /// WRITE inline bytes.
    WriteInline { r: usize, ro: usize, data: Vec<u8> },
    /// READ remote into local.
    Read {
        l: usize,
        lo: usize,
        r: usize,
        ro: usize,
        len: usize,
    },
    /// Fetch-add (8 bytes) at an aligned offset; result to local `l` at `lo`.
    FetchAdd {
        r: usize,
        ro: usize,
        l: usize,
        lo: usize,
        add: u64,
    },
    /// Compare-swap.
    CompSwap {
        r: usize,
        ro: usize,
        l: usize,
        lo: usize,
        compare: u64,
        swap: u64,
    },
}

/// `op` with a READ's or an atomic's local buffer made writable and in range (the writable
/// local region, the offset pulled in): the cases whose outcome does not depend on timing when
/// the responder is in another process ([`Responder::Elsewhere`]).
fn with_writable_results(op: Op) -> Op {
    let writable = LOCAL_ACCESS
        .iter()
        .position(|a| a.contains(Access::LOCAL_WRITE))
        .unwrap();
    match op {
        Op::Read { lo, r, ro, len, .. } => Op::Read {
            l: writable,
            lo: lo.min(N - len.min(N)),
            r,
            ro,
            len,
        },
        Op::FetchAdd { r, ro, lo, add, .. } => Op::FetchAdd {
            r,
            ro,
            l: writable,
            lo: lo.min(N - 8),
            add,
        },
        Op::CompSwap {
            r,
            ro,
            lo,
            compare,
            swap,
            ..
        } => Op::CompSwap {
            r,
            ro,
            l: writable,
            lo: lo.min(N - 8),
            compare,
            swap,
        },
        other => other,
    }
}

fn arb_op() -> impl Strategy<Value = Op> {
    let off = 0usize..N + 16; // sometimes out of bounds
    let len = prop_oneof![0usize..16, 0usize..N];
    prop_oneof![
        (0usize..2, off.clone(), 0usize..3, off.clone(), len.clone())
            .prop_map(|(l, lo, r, ro, len)| Op::Write { l, lo, r, ro, len }),
        (
            0usize..3,
            off.clone(),
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(r, ro, data)| Op::WriteInline { r, ro, data }),
        (0usize..2, off.clone(), 0usize..3, off.clone(), len)
            .prop_map(|(l, lo, r, ro, len)| Op::Read { l, lo, r, ro, len }),
        (
            0usize..3,
            0usize..(N / 8 + 2),
            0usize..2,
            0usize..(N / 8 + 1),
            any::<u64>()
        )
            .prop_map(|(r, ro, l, lo, add)| Op::FetchAdd {
                r,
                ro: ro * 8,
                l,
                lo: lo * 8,
                add
            }),
        (
            0usize..3,
            0usize..(N / 8 + 2),
            0usize..2,
            0usize..(N / 8 + 1),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(r, ro, l, lo, compare, swap)| Op::CompSwap {
                r,
                ro: ro * 8,
                l,
                lo: lo * 8,
                compare,
                swap
            }),
    ]
}

// Local regions: 0 = LOCAL_WRITE, 1 = no LOCAL_WRITE. Remote: 0 = all, 1 = READ only, 2 = WRITE only.
const LOCAL_ACCESS: [Access; 2] = [Access::LOCAL_WRITE, Access::empty()];
fn remote_access(r: usize) -> Access {
    [Access::ALL, Access::REMOTE_READ, Access::REMOTE_WRITE][r]
}

fn fits(off: usize, len: usize) -> bool {
    off + len <= N
}

/// Where the responder is, for the two error orders that depend on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Responder {
    /// In this process: the engine checks both sides of a request before it executes it.
    Here,
    /// In another process, as on hardware: a WRITE's data is gathered (its local entries
    /// checked) before the request is sent, so a bad local entry wins over a bad remote one.
    /// (A READ's or an atomic's local buffer is written when the response comes, by when the
    /// requests behind it may have executed at the responder, as on hardware, before they
    /// are flushed: no single outcome to compare, so those cases are not generated for it —
    /// see [`with_writable_results`].)
    Elsewhere,
}

/// Applies `op` to the model; `Err(status)` if the NIC must refuse it.
fn model(
    op: &Op,
    local: &mut [Vec<u8>; 2],
    remote: &mut [Vec<u8>; 3],
    big_endian_results: bool,
    responder: Responder,
) -> Result<(), WcStatus> {
    match op {
        Op::Write { l, lo, r, ro, len } => {
            if *len == 0 {
                return Ok(());
            }
            if responder == Responder::Elsewhere && !fits(*lo, *len) {
                return Err(WcStatus::LocProtErr);
            }
            if !fits(*ro, *len) || !remote_access(*r).contains(Access::REMOTE_WRITE) {
                return Err(WcStatus::RemAccessErr);
            }
            if !fits(*lo, *len) {
                return Err(WcStatus::LocProtErr);
            }
            let src = local[*l][*lo..lo + len].to_vec();
            remote[*r][*ro..ro + len].copy_from_slice(&src);
        }
        Op::WriteInline { r, ro, data } => {
            if data.is_empty() {
                return Ok(());
            }
            if !fits(*ro, data.len()) || !remote_access(*r).contains(Access::REMOTE_WRITE) {
                return Err(WcStatus::RemAccessErr);
            }
            remote[*r][*ro..ro + data.len()].copy_from_slice(data);
        }
        Op::Read { l, lo, r, ro, len } => {
            if *len == 0 {
                return Ok(());
            }
            if !fits(*ro, *len) || !remote_access(*r).contains(Access::REMOTE_READ) {
                return Err(WcStatus::RemAccessErr);
            }
            if !fits(*lo, *len) || !LOCAL_ACCESS[*l].contains(Access::LOCAL_WRITE) {
                return Err(WcStatus::LocProtErr);
            }
            let src = remote[*r][*ro..ro + len].to_vec();
            local[*l][*lo..lo + len].copy_from_slice(&src);
        }
        Op::FetchAdd { r, ro, l, lo, .. } | Op::CompSwap { r, ro, l, lo, .. } => {
            if !fits(*ro, 8) || !remote_access(*r).contains(Access::REMOTE_ATOMIC) {
                return Err(WcStatus::RemAccessErr);
            }
            if !fits(*lo, 8) || !LOCAL_ACCESS[*l].contains(Access::LOCAL_WRITE) {
                return Err(WcStatus::LocProtErr);
            }
            let old = u64::from_le_bytes(remote[*r][*ro..ro + 8].try_into().unwrap());
            let aop = match op {
                Op::FetchAdd { add, .. } => AtomicOp::FetchAdd { add: *add },
                Op::CompSwap { compare, swap, .. } => AtomicOp::CompareSwap {
                    compare: *compare,
                    swap: *swap,
                },
                _ => unreachable!(),
            };
            remote[*r][*ro..ro + 8].copy_from_slice(&aop.apply(old, 8).to_le_bytes());
            let res = if big_endian_results {
                old.to_be_bytes()
            } else {
                old.to_le_bytes()
            };
            local[*l][*lo..lo + 8].copy_from_slice(&res);
        }
    }
    Ok(())
}

fn run<P: Modeled>(ops: &[Op], seed: u8, chaos: Option<u64>) -> Result<(), TestCaseError> {
    run_on(
        SimPair::<P>::new(chaos, CqMode::Normal, QpInit::default()),
        Responder::Here,
        ops,
        seed,
    )
}

fn run_on<P: Modeled>(
    t: SimPair<P>,
    responder: Responder,
    ops: &[Op],
    seed: u8,
) -> Result<(), TestCaseError> {
    let locals: Vec<_> = LOCAL_ACCESS.iter().map(|&a| t.mr_a(N, a)).collect();
    let remotes: Vec<_> = (0..3).map(|r| t.mr_b(N, remote_access(r))).collect();
    let guard_a = t.mr_a(N, Access::empty());
    let guard_b = t.mr_b(N, Access::empty());
    let mut ml: [Vec<u8>; 2] = [pattern(N, seed), pattern(N, seed ^ 1)];
    let mut mr: [Vec<u8>; 3] = [
        pattern(N, seed ^ 2),
        pattern(N, seed ^ 3),
        pattern(N, seed ^ 4),
    ];
    for (m, d) in locals.iter().zip(&ml) {
        m.write(0, d).unwrap();
    }
    for (m, d) in remotes.iter().zip(&mr) {
        m.write(0, d).unwrap();
    }
    guard_a.write(0, &[0x5a; N]).unwrap();
    guard_b.write(0, &[0xa5; N]).unwrap();
    let mut raw = t.raw_a();
    let mut expect: Vec<WcStatus> = Vec::new();
    let mut failed = false;
    // Local bytes that READ/atomic results are still to land in: RC lets a later WRITE read its
    // local source before an earlier READ/atomic response is written (chaos does exactly that),
    // so a WRITE whose source overlaps one is posted with FENCE, as a correct program would.
    let mut landing: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
    for op in ops {
        let status = if failed {
            WcStatus::WrFlushErr
        } else {
            match model(op, &mut ml, &mut mr, P::ATOMIC_RESULT_BIG_ENDIAN, responder) {
                Ok(()) => WcStatus::Success,
                Err(s) => {
                    failed = true;
                    s
                }
            }
        };
        expect.push(status);
        // Raw addresses: out-of-range offsets point past the region (the NIC must refuse them).
        let (ls, rs) = (
            |i: usize, o: usize, n: usize| sge(&locals[i], o as u64, n as u32),
            |i: usize, o: usize| remote(&remotes[i], o as u64),
        );
        let one;
        let wr = match op {
            Op::Write { l, lo, r, ro, len } => {
                one = [ls(*l, *lo, *len)];
                WorkRequest::Write {
                    remote: rs(*r, *ro),
                    payload: Payload::Sges(&one),
                    imm: None,
                }
            }
            Op::WriteInline { r, ro, data } => WorkRequest::Write {
                remote: rs(*r, *ro),
                payload: Payload::Inline(data),
                imm: None,
            },
            Op::Read { l, lo, r, ro, len } => {
                one = [ls(*l, *lo, *len)];
                WorkRequest::Read {
                    remote: rs(*r, *ro),
                    sges: &one,
                }
            }
            Op::FetchAdd { r, ro, l, lo, add } => WorkRequest::Atomic {
                remote: rs(*r, *ro),
                local: ls(*l, *lo, 8),
                op: AtomicOp::FetchAdd { add: *add },
                bytes: 8,
            },
            Op::CompSwap {
                r,
                ro,
                l,
                lo,
                compare,
                swap,
            } => WorkRequest::Atomic {
                remote: rs(*r, *ro),
                local: ls(*l, *lo, 8),
                op: AtomicOp::CompareSwap {
                    compare: *compare,
                    swap: *swap,
                },
                bytes: 8,
            },
        };
        let mut flags = SendFlags::SIGNALED;
        match op {
            Op::Write { l, lo, len, .. } => {
                let src = *lo..lo + len;
                if landing
                    .iter()
                    .any(|(i, r)| i == l && r.start < src.end && src.start < r.end)
                {
                    flags |= SendFlags::FENCE;
                    landing.clear();
                }
            }
            Op::Read { l, lo, len, .. } => landing.push((*l, *lo..lo + len)),
            Op::FetchAdd { l, lo, .. } | Op::CompSwap { l, lo, .. } => {
                landing.push((*l, *lo..lo + 8));
            }
            Op::WriteInline { .. } => {}
        }
        raw.post(&wr, flags);
    }
    let got: Vec<WcStatus> = raw.wait(ops.len()).iter().map(|c| c.status).collect();
    prop_assert_eq!(&got, &expect, "statuses for {:?}", ops);
    for (i, m) in locals.iter().enumerate() {
        prop_assert_eq!(contents(m), ml[i].clone(), "local region {}", i);
    }
    for (i, m) in remotes.iter().enumerate() {
        prop_assert_eq!(contents(m), mr[i].clone(), "remote region {}", i);
    }
    prop_assert_eq!(
        contents(&guard_a),
        vec![0x5a; N],
        "memory outside the regions changed"
    );
    prop_assert_eq!(
        contents(&guard_b),
        vec![0xa5; N],
        "memory outside the regions changed"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn native_matches_memory_model(ops in proptest::collection::vec(arb_op(), 1..24), seed: u8, chaos in proptest::option::of(1u64..1000)) {
        run::<gda::native::Native>(&ops, seed, chaos)?;
    }

    #[test]
    fn mlx5_matches_memory_model(ops in proptest::collection::vec(arb_op(), 1..24), seed: u8, chaos in proptest::option::of(1u64..1000)) {
        run::<gda::mlx5::Mlx5>(&ops, seed, chaos)?;
    }

    #[test]
    fn bnxt_matches_memory_model(ops in proptest::collection::vec(arb_op(), 1..24), seed: u8, chaos in proptest::option::of(1u64..1000)) {
        run::<gda::bnxt::Bnxt>(&ops, seed, chaos)?;
    }
}

/// The same model with the responder in "another process" (a second process fabric): the
/// cross-process engine — its WRITE runs, its runs of atomics' values, an error in the middle
/// of a run — against memory, for provider `P`'s queue format; `CASES` cases, counted.
fn between_processes_matches_memory_model<P: Modeled>() {
    const CASES: u32 = 32;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: CASES,
        ..ProptestConfig::default()
    });
    let compared = std::sync::atomic::AtomicU32::new(0);
    let cases = (
        proptest::collection::vec(arb_op().prop_map(with_writable_results), 1..24),
        any::<u8>(),
        proptest::option::of(1u64..1000),
    );
    runner
        .run(&cases, |(ops, seed, chaos)| {
            let t = SimPair::<P>::between_processes(chaos, CqMode::Normal, QpInit::default());
            run_on(t, Responder::Elsewhere, &ops, seed)?;
            compared.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    assert!(compared.into_inner() >= CASES);
}

#[test]
fn native_between_processes_matches_memory_model() {
    between_processes_matches_memory_model::<gda::native::Native>();
}

#[test]
fn mlx5_between_processes_matches_memory_model() {
    between_processes_matches_memory_model::<gda::mlx5::Mlx5>();
}

#[test]
fn bnxt_between_processes_matches_memory_model() {
    between_processes_matches_memory_model::<gda::bnxt::Bnxt>();
}
