//! The device API's C++ header (`device/include/gda`) against gda's Rust side: the ABI structs
//! have the same layout, and the mlx5 encoders write the same bytes for what rdma-core's
//! `mlx5_post_send` cannot post (masked atomics of 4 and 8 bytes, which tests/mlx5_diff.rs's
//! three-way comparison leaves out) on random queues, positions and operands.

use core::mem::{offset_of, size_of};

use gda_hal::{
    AtomicOp, CqHandle, Posted, Provider, Remote, SendFlags, Sge, SqPos, WorkRequest, WqHandle,
};
use gda_mlx5::{Mlx5, Mlx5Sq};
use gda_rdma_ref::{case, device};
use proptest::prelude::*;

/// A send queue over `ring` with its own doorbell record and register (inline up to 64 bytes,
/// one gather entry).
fn queue(ring: &mut [[u64; 8]], dbrec: &mut [u32; 2], uar: &mut [u64; 8], qpn: u32) -> Mlx5Sq {
    Mlx5Sq {
        wq: WqHandle {
            buf: ring.as_mut_ptr() as u64,
            dbrec: dbrec.as_mut_ptr() as u64,
            db: uar.as_mut_ptr() as u64,
            entries: ring.len() as u32,
            stride: 0,
            qpn,
            max_inline: 64,
            max_sge: 1,
        },
        bf_size: 0,
    }
}

#[test]
fn layouts_match_rust() {
    let rust: [u64; 27] = [
        size_of::<WqHandle>(),
        offset_of!(WqHandle, dbrec),
        offset_of!(WqHandle, db),
        offset_of!(WqHandle, entries),
        offset_of!(WqHandle, stride),
        offset_of!(WqHandle, qpn),
        offset_of!(WqHandle, max_inline),
        offset_of!(WqHandle, max_sge),
        size_of::<CqHandle>(),
        offset_of!(CqHandle, entries),
        offset_of!(CqHandle, cqe_bytes),
        offset_of!(CqHandle, cqn),
        offset_of!(CqHandle, collapsed),
        size_of::<SqPos>(),
        offset_of!(SqPos, msg),
        offset_of!(SqPos, psn),
        size_of::<Posted>(),
        offset_of!(Posted, next),
        offset_of!(Posted, doorbell),
        size_of::<Mlx5Sq>(),
        offset_of!(Mlx5Sq, bf_size),
        size_of::<Sge>(),
        offset_of!(Sge, length),
        offset_of!(Sge, lkey),
        size_of::<Remote>(),
        offset_of!(Remote, rkey),
        1,
    ]
    .map(|v| v as u64);
    assert_eq!(
        device::layout(),
        rust,
        "C++ layout (last: ABI version) vs Rust"
    );
}

/// The posting protocol's shared state, its read-only half and the queues of every provider: the
/// same bytes in C++ (`gda/sq.hpp`) and Rust (`gda_hal::SqShared`, `SqProto`, `SqDevice`), so a
/// Rust and a header producer can share one queue.
#[test]
fn protocol_layouts_match_rust() {
    use gda_hal::{SqDevice, SqProto, SqShared};
    let mut rust = SqShared::LAYOUT.to_vec();
    rust.extend([
        size_of::<SqProto>(),
        offset_of!(SqProto, state),
        offset_of!(SqProto, capacity),
        offset_of!(SqProto, signal_every),
        offset_of!(SqProto, timeout_ns),
        offset_of!(SqProto, max_units),
        offset_of!(SqProto, bits),
        offset_of!(SqProto, tracks_psn),
        offset_of!(SqProto, provider),
        size_of::<SqDevice<Mlx5Sq>>(),
        offset_of!(SqDevice<Mlx5Sq>, sq),
        size_of::<SqDevice<WqHandle>>(),
        offset_of!(SqDevice<WqHandle>, sq),
        size_of::<SqDevice<gda_bnxt::BnxtSq>>(),
        offset_of!(SqDevice<gda_bnxt::BnxtSq>, sq),
    ]);
    let rust: Vec<u64> = rust.into_iter().map(|v| v as u64).collect();
    assert_eq!(device::protocol_layout().to_vec(), rust, "C++ vs Rust");
}

fn arb_atomic() -> impl Strategy<Value = (AtomicOp, u32)> {
    let v = any::<u64>();
    prop_oneof![
        (v, v).prop_map(|(compare, swap)| (AtomicOp::CompareSwap { compare, swap }, 8)),
        v.prop_map(|add| (AtomicOp::FetchAdd { add }, 8)),
        (v, v, v, v, prop_oneof![Just(4u32), Just(8)]).prop_map(
            |(compare, compare_mask, swap, swap_mask, bytes)| (
                AtomicOp::MaskedCompareSwap {
                    compare,
                    compare_mask,
                    swap,
                    swap_mask
                },
                bytes
            )
        ),
        (v, v, prop_oneof![Just(4u32), Just(8)]).prop_map(|(add, field_boundary, bytes)| (
            AtomicOp::MaskedFetchAdd {
                add,
                field_boundary
            },
            bytes
        )),
    ]
}

/// 3,000 random atomics of every kind and width at producer counters across the 16-bit wrap,
/// on rings of 2–256 WQEBBs: the header and the Rust device functions write the same WQE
/// bytes, doorbell record, doorbell and `Posted`. Counts what it compared per kind and width.
#[test]
fn atomics_match_the_rust_device_functions() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 3000,
        failure_persistence: None,
        ..Config::default()
    });
    let counts = std::cell::RefCell::new(std::collections::BTreeMap::<(u8, u32), u32>::new());
    let strategy = (
        arb_atomic(),
        1u32..9,
        prop_oneof![0xfff0u32..=0xffff, any::<u32>()],
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        0u32..8,
    );
    runner
        .run(
            &strategy,
            |((op, bytes), log2, cur, qpn, raddr, rkey, laddr, lkey, flags)| {
                let n = 1u32 << log2;
                let wr = WorkRequest::Atomic {
                    remote: Remote {
                        addr: raddr & !7,
                        rkey,
                    },
                    local: Sge {
                        addr: laddr,
                        length: bytes,
                        lkey,
                    },
                    op,
                    bytes,
                };
                let mut out = Vec::new();
                for dev in [false, true] {
                    let mut ring = case::ring(n);
                    let mut dbrec = [0u32; 2];
                    let mut uar = [0u64; 8];
                    let sq = queue(&mut ring, &mut dbrec, &mut uar, qpn & 0xff_ffff);
                    Mlx5::check(&sq, &wr).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let f = SendFlags::from_bits_truncate(flags);
                    // SAFETY: ring, record and register are owned here; the request was checked.
                    let posted = unsafe {
                        if dev {
                            device::post_ring(&sq, cur, &wr, f.bits(), false).0
                        } else {
                            let p = Mlx5::post(&sq, SqPos::at_unit(cur), &wr, f);
                            Mlx5::ring_sq(&sq, &p);
                            p
                        }
                    };
                    out.push((case::bytes_mut(&mut ring).to_vec(), dbrec, uar, posted));
                }
                prop_assert_eq!(
                    &out[0],
                    &out[1],
                    "header vs Rust for {:?} of {} bytes",
                    op,
                    bytes
                );
                let kind = match op {
                    AtomicOp::CompareSwap { .. } => 0,
                    AtomicOp::FetchAdd { .. } => 1,
                    AtomicOp::MaskedCompareSwap { .. } => 2,
                    AtomicOp::MaskedFetchAdd { .. } => 3,
                };
                *counts.borrow_mut().entry((kind, bytes)).or_default() += 1;
                Ok(())
            },
        )
        .unwrap();
    let counts = counts.into_inner();
    eprintln!("(kind, bytes) -> compared: {counts:?}");
    for key in [(0, 8), (1, 8), (2, 4), (2, 8), (3, 4), (3, 8)] {
        assert!(
            counts.get(&key).is_some_and(|&c| c >= 200),
            "{key:?} compared too rarely: {counts:?}"
        );
    }
}

/// The header's register-value WRITE (`post_write_value`, what the encoding benchmark and a
/// kernel posting a flag use) writes the bytes of gda's 8-byte inline WRITE: 2,000 random
/// values, remotes and positions across the 16-bit wrap, counted.
#[test]
fn a_register_value_write_matches_the_inline_write() {
    use gda_mlx5::Mlx5;
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 2000,
        failure_persistence: None,
        ..Default::default()
    });
    let compared = std::cell::Cell::new(0u32);
    runner
        .run(
            &(
                any::<u64>(),
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                1u32..8,
            ),
            |(value, raddr, rkey, cur, log2)| {
                let n = 1u32 << log2;
                let remote = Remote { addr: raddr, rkey };
                let mut out = Vec::new();
                for dev in [false, true] {
                    let mut ring = case::ring(n);
                    let mut dbrec = [0u32; 2];
                    let mut uar = [0u64; 8];
                    let sq = queue(&mut ring, &mut dbrec, &mut uar, 0x4321);
                    // SAFETY: ring, record and register are owned here.
                    let next = unsafe {
                        if dev {
                            device::write_inline8_ring(&sq, SqPos::at_unit(cur), remote, value)
                        } else {
                            let p = Mlx5::post_write_inline::<gda_hal::Signaled, 8>(
                                &sq,
                                SqPos::at_unit(cur),
                                remote,
                                &value.to_ne_bytes(),
                            );
                            Mlx5::ring_sq(&sq, &p);
                            p.next
                        }
                    };
                    out.push((case::bytes_mut(&mut ring).to_vec(), dbrec, uar, next));
                }
                prop_assert_eq!(&out[0], &out[1]);
                compared.set(compared.get() + 1);
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(compared.get(), 2000);
}

/// Every one of the 256 syndromes decodes to the status gda_mlx5 gives it (its table follows
/// nic-formats.md §F.1; `mlx5dv_helpers` checks the syndrome values against rdma-core's).
#[test]
fn error_syndromes_decode_as_the_rust_provider() {
    let mut compared = 0;
    for s in 0..=255u8 {
        let rust = gda_mlx5::wire::Syndrome::from_raw(s).wc_status().as_raw();
        assert_eq!(device::mlx5_wc_status(s), rust, "syndrome {s:#x}");
        compared += 1;
    }
    assert_eq!(compared, 256);
}
