//! Unit tests of the bnxt device functions.

extern crate std;
use super::*;
use proptest::prelude::*;

/// Misuse of a queue handle or a request the format cannot hold is a clear `PostError`
/// from `check` (device functions are only called after it accepts).
#[test]
fn check_refuses_bad_handles_and_requests() {
    let mut mem = [0u8; 4096];
    let wq = WqHandle {
        buf: mem.as_mut_ptr() as u64,
        entries: 16,
        max_inline: 96,
        max_sge: MAX_SGE,
        ..WqHandle::default()
    };
    let table = mem.as_mut_ptr() as u64 + 2048;
    let make = |wq: WqHandle, mode: Mode, table: u64, entries: u32, mtu: u32| {
        BnxtSq::new(wq, mode, table, entries, mtu, 0)
    };
    let good = make(wq, Mode::default(), table, 16, 1024).unwrap();
    let remote = gda_hal::Remote { addr: 0, rkey: 1 };
    let write = WorkRequest::Write {
        remote,
        payload: Payload::Inline(&[0; 17]),
        imm: None,
    };
    assert!(Bnxt::check(&good, &write).is_ok());
    let bad_handle = |r: Result<BnxtSq, PostError>| matches!(r, Err(PostError::BadHandle { .. }));
    assert!(
        bad_handle(make(wq, Mode::default(), 0, 16, 1024)),
        "no PSN table"
    );
    assert!(
        bad_handle(make(wq, Mode::default(), table, 12, 1024)),
        "MSN table not a power of two"
    );
    assert!(
        bad_handle(make(wq, Mode::default(), table, 8, 1024)),
        "MSN table smaller than the ring"
    );
    assert!(
        bad_handle(make(wq, Mode::default(), table, 16, 1000)),
        "path MTU not a power of two"
    );
    assert!(
        bad_handle(make(
            WqHandle {
                entries: 1 << 17,
                ..wq
            },
            Mode::default(),
            table,
            1 << 17,
            1024
        )),
        "ring beyond 16-bit indexes"
    );
    assert_eq!(
        make(
            WqHandle { entries: 12, ..wq },
            Mode::default(),
            table,
            16,
            1024
        ),
        Err(PostError::BadRing)
    );
    let fixed3 = make(
        wq,
        Mode {
            wqe: WqeMode::Fixed3,
            psn: PsnForm::Msn,
        },
        table,
        32,
        1024,
    )
    .unwrap();
    assert_eq!(
        Bnxt::check(&fixed3, &write),
        Err(PostError::InlineTooLong {
            len: 17,
            max: FIXED3_MAX_INLINE
        })
    );
    let masked = WorkRequest::Atomic {
        remote,
        local: Sge {
            addr: 0,
            length: 8,
            lkey: 1,
        },
        op: AtomicOp::MaskedFetchAdd {
            add: 1,
            field_boundary: 0,
        },
        bytes: 8,
    };
    assert_eq!(Bnxt::check(&good, &masked), Err(PostError::Unsupported));
    let sges = [Sge {
        addr: 0,
        length: 1,
        lkey: 1,
    }; 7];
    let many = WorkRequest::Send {
        payload: Payload::Sges(&sges),
        imm: None,
    };
    assert!(matches!(
        Bnxt::check(&good, &many),
        Err(PostError::TooManySges { n: 7, .. })
    ));
    let tiny = make(
        WqHandle { entries: 4, ..wq },
        Mode {
            wqe: WqeMode::Variable,
            psn: PsnForm::Msn,
        },
        table,
        2,
        1024,
    )
    .unwrap();
    let six = WorkRequest::Send {
        payload: Payload::Sges(&sges[..6]),
        imm: None,
    };
    assert_eq!(
        Bnxt::check(&tiny, &six),
        Err(PostError::WqeTooLarge { units: 8, max: 4 })
    );
}

proptest! {
    /// Doorbell index and epoch from the 32-bit unit counter equal a u64 model of the ring
    /// (tail = position mod depth, epoch flips every pass), across the counter's own wrap.
    #[test]
    fn doorbell_index_and_epoch_match_a_u64_model(log2 in 1u32..17, pos in 0u64..1 << 40, m in 0u8..3) {
        let entries = 1u32 << log2;
        let mode = [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3][m as usize];
        let model_idx = (pos % u64::from(entries)) as u32 * if mode == WqeMode::Fixed3 { 3 } else { 1 };
        let model_epoch = (pos / u64::from(entries)) % 2 == 1;
        prop_assert_eq!(Bnxt::db_index(mode, entries, pos as u32), model_idx);
        prop_assert_eq!(Bnxt::epoch(entries, pos as u32), model_epoch);
    }

    /// The CQE phase the poller expects from its 32-bit consumer counter equals a u64 model
    /// (first pass 1, flipping every pass), and the CQ doorbell carries the same epoch.
    #[test]
    fn cq_phase_and_doorbell_epoch_match_a_u64_model(log2 in 0u32..17, ci in 0u64..1 << 40) {
        let entries = 1u32 << log2;
        let pass = ci / u64::from(entries);
        let want_phase = pass % 2 == 0;
        prop_assert!(cqe::valid(u32::from(want_phase), ci as u32, log2, INITIAL_PHASE));
        prop_assert!(!cqe::valid(u32::from(!want_phase), ci as u32, log2, INITIAL_PHASE));
        let mut db = 0u64;
        let cq = CqHandle { db: &mut db as *mut u64 as u64, entries, cqn: 7, ..CqHandle::default() };
        // SAFETY: `db` is a local word.
        unsafe { Bnxt::update_cq_ci(&cq, ci as u32) };
        let d = DoorbellRepr::parse(db).unwrap();
        prop_assert_eq!(d.index, (ci % u64::from(entries)) as u32);
        prop_assert_eq!(d.epoch, pass % 2 == 1);
        prop_assert_eq!(d.db_type, DbType::Cq);
    }
}
