//! Keys are unguessable: forging an rkey fails, and a forged access writes nothing.
//!
//! Keys come from the operating system's CSPRNG (`getrandom`), not from a seeded generator.
//! A guess succeeds with probability (regions of the PD) / 2^32 per try; with one region and
//! 10^6 guesses the expected number of hits is 0.00023.

use std::sync::atomic::{AtomicU64, Ordering};

use gda_hal::{Payload, Remote, SendFlags, SendQueue, SqError, WcStatus, WorkRequest};
use gda_native::Native;
use gda_sim::{Access, CqMode, Fabric, FabricConfig, Fault, QpInit};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const KEYS_PER_CASE: usize = 1000;
const CASES: u32 = 1000;

#[test]
fn a_million_forged_rkeys_are_all_refused() {
    let fabric = Fabric::new(FabricConfig::default());
    let nic = fabric.add_nic_for::<Native>();
    let pd = nic.alloc_pd();
    let mr = pd.alloc_mr(4096, Access::ALL);
    let (tried, accepted) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &proptest::collection::vec(any::<u32>(), KEYS_PER_CASE),
            |keys| {
                for k in keys {
                    tried.fetch_add(1, Ordering::Relaxed);
                    match pd.remote_access(k, mr.addr(), 8, Access::REMOTE_WRITE) {
                        Err(Fault::BadKey) => {}
                        // A true guess (p = 2^-32 per try) is not a forgery bug.
                        Ok(()) if k == mr.rkey() => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                        }
                        other => prop_assert!(false, "key {k:#x}: {other:?}"),
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(
        tried.load(Ordering::Relaxed),
        u64::from(CASES) * KEYS_PER_CASE as u64
    );
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        0,
        "a random key opened the region"
    );
    // The real key does work (the check is not refusing everything).
    pd.remote_access(mr.rkey(), mr.addr(), 8, Access::REMOTE_WRITE)
        .unwrap();
}

#[test]
fn keys_do_not_follow_from_each_other() {
    // With a seeded generator, keys drawn one after another are a fixed function of the
    // first; from the OS they share nothing. 256 regions: all keys distinct, and neither the
    // differences nor the xors of consecutive keys repeat (they would for an LCG or a counter).
    let fabric = Fabric::new(FabricConfig::default());
    let pd = fabric.add_nic_for::<Native>().alloc_pd();
    let mrs: Vec<_> = (0..256).map(|_| pd.alloc_mr(64, Access::ALL)).collect();
    let keys: Vec<u32> = mrs.iter().flat_map(|m| [m.lkey(), m.rkey()]).collect();
    let mut uniq = keys.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(uniq.len(), keys.len());
    let mut diffs: Vec<u32> = keys.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    diffs.sort_unstable();
    diffs.dedup();
    assert!(
        diffs.len() > keys.len() - 8,
        "key steps repeat: {}",
        diffs.len()
    );
}

#[test]
fn forged_writes_through_the_engine_write_nothing() {
    let fabric = Fabric::new(FabricConfig::default());
    let nic = fabric.add_nic_for::<Native>();
    let pd = nic.alloc_pd();
    let target = pd.alloc_mr(4096, Access::ALL);
    let mut runner = TestRunner::new(Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    });
    let compared = AtomicU64::new(0);
    runner
        .run(&any::<u32>(), |key| {
            prop_assume!(key != target.rkey());
            // A fresh loopback QP per try: a refused access moves the QP to the error state.
            let cq = nic.create_cq(256, CqMode::Normal).unwrap();
            let qp = pd.create_qp(QpInit::default(), &cq, &cq).unwrap();
            qp.bring_up(&qp.endpoint()).unwrap();
            // SAFETY: the QP and CQ outlive the queue, its only poster and poller.
            let sq = unsafe {
                SendQueue::<Native>::new(qp.sq_handle::<Native>().unwrap(), cq.handle(), 5_000)
            }
            .unwrap();
            sq.post(
                &WorkRequest::Write {
                    remote: Remote {
                        addr: target.addr(),
                        rkey: key,
                    },
                    payload: Payload::Inline(&[0xee; 16]),
                    imm: None,
                },
                SendFlags::empty(),
            )
            .unwrap();
            match sq.quiet() {
                Err(SqError::Completion { status, .. }) => {
                    prop_assert_eq!(status, WcStatus::RemAccessErr);
                }
                other => prop_assert!(false, "forged key {key:#x} gave {other:?}"),
            }
            let mut v = vec![0u8; 4096];
            target.read(0, &mut v).unwrap();
            prop_assert!(v.iter().all(|&b| b == 0), "a forged write landed");
            compared.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    assert!(compared.load(Ordering::Relaxed) >= 190);
}

#[test]
fn region_accessors_refuse_out_of_range_offsets() {
    // `offset + len` used to be computed unchecked: in release builds a huge offset wrapped
    // around and passed.
    let fabric = Fabric::new(FabricConfig::default());
    let mr = fabric
        .add_nic_for::<Native>()
        .alloc_pd()
        .alloc_mr(64, Access::ALL);
    mr.write(0, &[1; 64]).unwrap();
    let mut out = [0u8; 8];
    for off in [usize::MAX, usize::MAX - 7, usize::MAX - 3, 60, 65] {
        let e = mr.write(off, &[9; 8]).unwrap_err().to_string();
        assert!(e.contains("leaves the 64-byte region"), "{e}");
        assert!(mr.read(off, &mut out).is_err());
    }
    let mut all = [0u8; 64];
    mr.read(0, &mut all).unwrap();
    assert_eq!(all, [1; 64], "a refused write changed nothing");
}
