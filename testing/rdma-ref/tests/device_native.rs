//! The device API's native-format header (`device/include/gda/native.hpp`) against gda_native's
//! Rust device functions: every request kind, inline and gather payloads across unit
//! boundaries, masked atomics of 4 and 8 bytes, NOPs, random flags and positions across the
//! ring's wrap, on rings pre-filled with junk (the format leaves bytes past an inline tail or
//! the last gather entry alone: both must leave the same ones). Counts per kind.

use gda_hal::{AtomicOp, Payload, Provider, Remote, SendFlags, Sge, SqPos, WorkRequest, WqHandle};
use gda_native::Native;
use gda_rdma_ref::device;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Req {
    kind: u8,
    inline: Option<Vec<u8>>,
    sges: Vec<Sge>,
    remote: Remote,
    imm: Option<u32>,
    op: AtomicOp,
    bytes: u32,
}

fn arb_req() -> impl Strategy<Value = Req> {
    let sge = (
        any::<u64>(),
        prop_oneof![Just(0u32), 1u32..5000],
        any::<u32>(),
    )
        .prop_map(|(addr, length, lkey)| Sge { addr, length, lkey });
    let v = any::<u64>();
    let op = prop_oneof![
        (v, v).prop_map(|(compare, swap)| AtomicOp::CompareSwap { compare, swap }),
        v.prop_map(|add| AtomicOp::FetchAdd { add }),
        (v, v, v, v).prop_map(|(compare, compare_mask, swap, swap_mask)| {
            AtomicOp::MaskedCompareSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            }
        }),
        (v, v).prop_map(|(add, field_boundary)| AtomicOp::MaskedFetchAdd {
            add,
            field_boundary
        }),
    ];
    (
        0u8..5,
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..400)),
        proptest::collection::vec(sge, 0..14),
        (any::<u64>(), any::<u32>()),
        proptest::option::of(any::<u32>()),
        op,
        prop_oneof![Just(4u32), Just(8)],
    )
        .prop_map(|(kind, inline, sges, (addr, rkey), imm, op, bytes)| Req {
            kind,
            inline,
            sges,
            remote: Remote {
                addr: addr & !7,
                rkey,
            },
            imm,
            bytes: if matches!(
                op,
                AtomicOp::MaskedCompareSwap { .. } | AtomicOp::MaskedFetchAdd { .. }
            ) {
                bytes
            } else {
                8
            },
            op,
        })
}

impl Req {
    fn wr(&self) -> WorkRequest<'_> {
        let payload = match &self.inline {
            Some(b) => Payload::Inline(b),
            None => Payload::Sges(&self.sges),
        };
        match self.kind {
            0 => WorkRequest::Write {
                remote: self.remote,
                payload,
                imm: self.imm,
            },
            1 => WorkRequest::Send {
                payload,
                imm: self.imm,
            },
            2 => WorkRequest::Read {
                remote: self.remote,
                sges: &self.sges,
            },
            3 => WorkRequest::Atomic {
                remote: self.remote,
                local: self.sges.first().copied().unwrap_or(Sge {
                    addr: 0x1000,
                    length: self.bytes,
                    lkey: 7,
                }),
                op: self.op,
                bytes: self.bytes,
            },
            _ => WorkRequest::Nop,
        }
    }
}

#[test]
fn native_posts_match_the_rust_device_functions() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 4000,
        failure_persistence: None,
        ..Config::default()
    });
    let counts = std::cell::RefCell::new(std::collections::BTreeMap::<(u8, bool), u32>::new());
    let refused = std::cell::Cell::new(0u32);
    runner
        .run(
            &(arb_req(), 4u32..8, any::<u32>(), 0u32..8),
            |(req, log2, cur, flags)| {
                let n = 1u32 << log2;
                let wr = req.wr();
                let mut out = Vec::new();
                for dev in [false, true] {
                    let mut ring = vec![[0xa5a5_a5a5_a5a5_a5a5u64; 8]; n as usize];
                    let mut db = [0u64; 1];
                    let wq = WqHandle {
                        buf: ring.as_mut_ptr() as u64,
                        dbrec: 0,
                        db: db.as_mut_ptr() as u64,
                        entries: n,
                        stride: 64,
                        qpn: 9,
                        max_inline: 960,
                        max_sge: 61,
                    };
                    if Native::check(&wq, &wr).is_err() {
                        refused.set(refused.get() + 1);
                        return Ok(());
                    }
                    let f = SendFlags::from_bits_truncate(flags);
                    // SAFETY: ring and doorbell word are owned here; the request was checked.
                    let posted = unsafe {
                        if dev {
                            device::native_post_ring(&wq, cur, &wr, f.bits())
                        } else {
                            let p = Native::post(&wq, SqPos::at_unit(cur), &wr, f);
                            Native::ring_sq(&wq, &p);
                            p
                        }
                    };
                    out.push((ring, db, posted));
                }
                let first_diff = out[0]
                    .0
                    .iter()
                    .flatten()
                    .zip(out[1].0.iter().flatten())
                    .position(|(a, b)| a != b);
                prop_assert!(
                    first_diff.is_none(),
                    "ring word {:?} differs for {:?}",
                    first_diff,
                    req
                );
                prop_assert_eq!(
                    (out[0].1, out[0].2),
                    (out[1].1, out[1].2),
                    "doorbell/Posted for {:?}",
                    req
                );
                *counts
                    .borrow_mut()
                    .entry((req.kind, req.inline.is_some()))
                    .or_default() += 1;
                Ok(())
            },
        )
        .unwrap();
    let counts = counts.into_inner();
    eprintln!(
        "(kind, inline) -> compared: {counts:?}; refused by check: {}",
        refused.get()
    );
    for key in [
        (0, false),
        (0, true),
        (1, false),
        (1, true),
        (2, false),
        (3, false),
        (4, false),
    ] {
        let c = counts.get(&key).copied().unwrap_or(0);
        assert!(c >= 150, "{key:?} compared {c} times: {counts:?}");
    }
}
