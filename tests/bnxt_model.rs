//! What the sim's bnxt device model checks beyond the conformance suite: it runs from the
//! doorbell alone, and it rejects WQEs whose PSN-table entry does not follow the PSN sequence
//! (the bug class where concurrent producers fill entries out of order).
#![cfg(sim_bnxt)]

mod common;

use std::time::Duration;

use common::*;
use gda::bnxt::{Bnxt, Mode, PsnForm, WqeMode};
use gda::hal::{Payload, Provider, SendFlags, SqPos, WcStatus, WorkRequest};
use gda::sim::{Access, QpState};

fn write<'a>(dst: &gda::sim::Mr, data: &'a [u8]) -> WorkRequest<'a> {
    WorkRequest::Write {
        remote: remote(dst, 0),
        payload: Payload::Inline(data),
        imm: None,
    }
}

#[test]
fn doorbell_alone_drives_the_queue() {
    for form in [PsnForm::Legacy, PsnForm::Ext, PsnForm::Msn] {
        for wqe in [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3] {
            with_model(
                gda::bnxt::model::BnxtModel::from(Mode { wqe, psn: form }),
                || {
                    let t = SimPair::<Bnxt>::simple();
                    let mut raw = t.raw_a();
                    assert_eq!(
                        gda::hal::QueueHandle::wq(&raw.sq).dbrec,
                        0,
                        "bnxt has no doorbell record"
                    );
                    let dst = t.mr_b(16, Access::REMOTE_WRITE);
                    let wr = write(&dst, b"abc");
                    Bnxt::check(&raw.sq, &wr).unwrap();
                    // Written but not rung: the NIC must not see it.
                    // SAFETY: the QP's ring; position 0 is free.
                    let p = unsafe { Bnxt::post(&raw.sq, SqPos::ZERO, &wr, SendFlags::SIGNALED) };
                    assert!(raw.drain_for(Duration::from_millis(30)).is_empty());
                    assert_eq!(&contents(&dst)[..3], &[0, 0, 0]);
                    // SAFETY: the QP's doorbell.
                    unsafe { Bnxt::ring_sq(&raw.sq, &p) };
                    raw.pos = p.next;
                    assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
                    assert_eq!(&contents(&dst)[..3], b"abc");
                },
            );
        }
    }
}

#[test]
fn a_wrong_psn_entry_is_an_error() {
    for form in [PsnForm::Legacy, PsnForm::Ext, PsnForm::Msn] {
        with_model(
            gda::bnxt::model::BnxtModel::from(Mode {
                wqe: WqeMode::Variable,
                psn: form,
            }),
            || {
                let t = SimPair::<Bnxt>::simple();
                let mut raw = t.raw_a();
                let dst = t.mr_b(4096, Access::REMOTE_WRITE);
                let big = pattern(3000, 1); // 3 packets at MTU 1024
                raw.post(&write(&dst, &big[..64]), SendFlags::SIGNALED);
                assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
                // A producer that forgot to advance the PSN (the race other GDA code shipped:
                // two producers reading the same PSN) fills the next entry with a stale start.
                let stale = SqPos {
                    psn: raw.pos.psn.wrapping_sub(1) & 0xff_ffff,
                    ..raw.pos
                };
                let before = t.fabric.stats().psn_errors;
                // SAFETY: the QP's ring at the next free position.
                let p =
                    unsafe { Bnxt::post(&raw.sq, stale, &write(&dst, b"x"), SendFlags::SIGNALED) };
                // SAFETY: the QP's doorbell.
                unsafe { Bnxt::ring_sq(&raw.sq, &p) };
                let w = raw.wait(1);
                assert_eq!(w[0].status, WcStatus::LocQpOpErr, "{form:?}");
                assert_eq!(t.a.state(), QpState::Error);
                assert_eq!(t.fabric.stats().psn_errors, before + 1);
                assert_eq!(contents(&dst)[0], big[0], "the bad WQE moved no data");
            },
        );
    }
}

#[test]
fn psns_cross_the_24_bit_wrap() {
    // The sim starts every QP's PSN near 2^24; a few thousand multi-packet messages wrap it.
    let t = SimPair::<Bnxt>::simple();
    let mut raw = t.raw_a();
    let src = t.mr_a(8192, Access::LOCAL_WRITE);
    let dst = t.mr_b(8192, Access::REMOTE_WRITE);
    let s = [sge(&src, 0, 8192)];
    let start = raw.sq.start_psn();
    assert!(
        start > 0xff_0000,
        "start PSN {start:#x} is not near the wrap"
    );
    for _ in 0..40 {
        raw.post(
            &WorkRequest::Write {
                remote: remote(&dst, 0),
                payload: Payload::Sges(&s),
                imm: None,
            },
            SendFlags::SIGNALED,
        );
        assert_eq!(raw.wait(1)[0].status, WcStatus::Success);
    }
    // 40 messages of 8 packets each.
    assert_eq!(raw.pos.psn, 320);
    assert!(start + 320 > 0xff_ffff, "the run did not cross the wrap");
    assert_eq!(t.fabric.stats().psn_errors, 0);
}
