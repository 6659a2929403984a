//! The SHMEM device context as the C++ compiler lays it out (`gda::shmem::Ctx` and `Peer` of
//! `device/include/gda/shmem.hpp`) and as Rust does (`gda_shmem::device::DeviceCtx`,
//! `DevicePeer`): the same size, the same offset for every field, the same ABI version.
#![cfg(feature = "device")]

use gda_shmem::device::{ABI_VERSION, DeviceCtx};

#[test]
fn the_device_context_has_one_layout() {
    let cpp = gda_device::shmem::layout();
    let mut rust: Vec<u64> = DeviceCtx::LAYOUT.iter().map(|&v| v as u64).collect();
    rust.push(u64::from(ABI_VERSION));
    assert_eq!(
        cpp.to_vec(),
        rust,
        "C++ (size, offsets, Peer size, ABI) vs Rust"
    );
}

/// The header's routines refuse what `check` refuses, and say what was wrong (issue 44, item
/// 7): on each provider, each PE corrupts one field of a copy of its own context at a time and
/// puts through it — each is refused with the status naming that field, and nothing is posted.
/// Before, another ABI version or size posted and returned Ok, a wrong queue stride crashed the
/// put, and a wrong provider tag said `BadQueue`.
#[test]
fn the_device_routines_refuse_what_check_refuses() {
    use gda_device::shmem::{Status, check, put8_rate};
    use gda_shmem::{Config, Pe, TransportPolicy, launch};

    fn probe<P: gda_hal::Provider>(pe: &Pe<P>) -> gda_shmem::Result<usize> {
        let good = *pe.device_context()?;
        let right = (pe.my_pe() + 1) % pe.n_pes();
        let dst = pe.calloc::<u64>(1024)?;
        pe.barrier_all()?;
        let dst_ptr = pe.local_ptr(dst)?;
        // SAFETY: a whole context of this PE.
        let genuine = unsafe { check(std::ptr::from_ref(&good).cast()) };
        assert_eq!(genuine, Ok(()), "the genuine context");
        let other_tag = if good.provider == 2 { 1 } else { 2 };
        let other_stride = if other_tag == 2 { 144 } else { 136 };
        let mut cases: Vec<(&str, DeviceCtx, Status)> = vec![
            (
                "abi",
                DeviceCtx {
                    abi: good.abi + 1,
                    ..good
                },
                Status::BAD_CONTEXT,
            ),
            (
                "size",
                DeviceCtx {
                    size: good.size - 8,
                    ..good
                },
                Status::BAD_CONTEXT_SIZE,
            ),
            (
                "reserved",
                DeviceCtx {
                    reserved: 1,
                    ..good
                },
                Status::BAD_CONTEXT_SIZE,
            ),
            (
                "provider",
                DeviceCtx {
                    provider: 7,
                    ..good
                },
                Status::BAD_PROVIDER,
            ),
            (
                "queue stride",
                DeviceCtx {
                    queue_bytes: 8,
                    ..good
                },
                Status::BAD_QUEUE_STRIDE,
            ),
            (
                "no queues",
                DeviceCtx { queues: 0, ..good },
                Status::BAD_QUEUE_STRIDE,
            ),
            (
                "staging slot size",
                DeviceCtx {
                    staging_slot_bytes: 0,
                    ..good
                },
                Status::BAD_WORK_AREA,
            ),
            (
                "staging slots",
                DeviceCtx {
                    staging_slots: 1 << 20,
                    ..good
                },
                Status::BAD_WORK_AREA,
            ),
            (
                "segment",
                DeviceCtx {
                    seg_bytes: good.work,
                    ..good
                },
                Status::BAD_WORK_AREA,
            ),
            (
                "my_pe",
                DeviceCtx {
                    my_pe: good.n_pes,
                    ..good
                },
                Status::BAD_PEERS,
            ),
            ("n_pes", DeviceCtx { n_pes: 0, ..good }, Status::BAD_PEERS),
            ("peers", DeviceCtx { peers: 0, ..good }, Status::BAD_PEERS),
            (
                "timeout",
                DeviceCtx {
                    timeout_ns: 0,
                    ..good
                },
                Status::BAD_TIMEOUT,
            ),
            (
                "huge timeout",
                DeviceCtx {
                    timeout_ns: u64::MAX,
                    ..good
                },
                Status::BAD_TIMEOUT,
            ),
        ];
        if right == 0 {
            // A valid tag with its own stride, over queues of another provider: the queue
            // says which it is.
            cases.push((
                "queue of another provider",
                DeviceCtx {
                    provider: other_tag,
                    queue_bytes: other_stride,
                    ..good
                },
                Status::BAD_QUEUE,
            ));
        }
        let mut refused = 0;
        for (what, bad, want) in &cases {
            let c = std::ptr::from_ref(bad).cast::<u8>();
            // A queue's own tag is checked where the queue is used (`check` is O(1)).
            let checked = if *want == Status::BAD_QUEUE {
                Ok(())
            } else {
                Err(*want)
            };
            // SAFETY: a whole context (copied, one field changed).
            assert_eq!(unsafe { check(c) }, checked, "check: {what}");
            // SAFETY: as above; `dst` holds 1024 u64s. The routine must refuse before it
            // dereferences anything the corrupted field describes.
            let got = unsafe { put8_rate(c, dst_ptr, right, 4) };
            assert_eq!(got.err(), Some(*want), "put: {what}");
            assert!(
                !want.to_string().starts_with("an unknown status"),
                "{what}: {want}"
            );
            refused += 1;
        }
        pe.barrier_all()?;
        // SAFETY: this PE's own allocation; nobody wrote it.
        let got = unsafe { std::slice::from_raw_parts(dst_ptr, 1024) };
        assert!(
            got.iter().all(|v| *v == 0),
            "a refused put posted something"
        );
        pe.barrier_all()?;
        Ok(refused)
    }

    fn run<P: gda_sim::Modeled>() -> usize {
        let cfg = Config {
            heap_size: 2 << 20,
            transport: TransportPolicy::Rdma,
            ..Config::default()
        };
        launch::threads::<P, _, _>(2, &cfg, |pe| probe(pe))
            .unwrap_or_else(|e| panic!("{}: {e}", P::NAME))
            .iter()
            .sum()
    }
    // 14 cases on each PE, and the other provider's queue on the PE whose right neighbour is 0.
    for (name, n) in [
        ("native", run::<gda_native::Native>()),
        ("mlx5", run::<gda_mlx5::Mlx5>()),
        ("bnxt", run::<gda_bnxt::Bnxt>()),
    ] {
        assert_eq!(n, 2 * 14 + 1, "{name}: cases refused");
    }
}
