//! Where the SHMEM device context puts what a kernel touches, with the `hip` feature, on the
//! HIP stand-in (`gda-hip-sim`: "device memory" is host shared memory named
//! `/dev/shm/gda-hipsim-*`, and host registrations are recorded):
//!
//! - **GPU heap** (`GDA_SHMEM_HEAP=gpu`): the context, its arrays, the heap and, for every RDMA
//!   queue, the ring, doorbell record, CQ, CQ record, PSN table and posting-protocol state are
//!   in device memory (found in `/proc/self/maps` by name), and each doorbell is registered
//!   with HIP for the GPU; `Ctx::memory` says `Device`.
//! - **host heap** with a GPU present: all of that host memory is registered with HIP, at the
//!   same addresses; `Ctx::memory` says `Mapped`.
//! - without a GPU (the stand-in showing none): a plain host context (`Host`).
//!
//! In every case the header's code then posts through that context (8-byte puts and quiets
//! over RDMA on mlx5, bnxt and the native format) and the values arrive.
#![cfg(all(feature = "hip", feature = "device"))]

use std::path::{Path, PathBuf};
use std::process::Command;

use gda_hal::{Provider, QueueHandle, SqDevice};
use gda_shmem::device::{ContextMemory, DeviceCtx, DevicePeer, DeviceRoute};
use gda_shmem::{Config, HeapPlacement, Pe, TransportPolicy, launch};

fn hip_sim() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    profile.join("hip-sim/libamdhip64.so.5")
}

/// The mappings of this process whose file is a stand-in "device" allocation.
fn device_mappings() -> Vec<(u64, u64)> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains("/gda-hipsim-"))
        .map(|l| {
            let (a, b) = l
                .split_whitespace()
                .next()
                .unwrap()
                .split_once('-')
                .unwrap();
            (
                u64::from_str_radix(a, 16).unwrap(),
                u64::from_str_radix(b, 16).unwrap(),
            )
        })
        .collect()
}

/// What a kernel of `ctx` reads or writes, besides doorbells: `(what, address, bytes)`.
fn touched<P: Provider>(ctx: &DeviceCtx) -> (Vec<(String, u64, usize)>, Vec<u64>) {
    let mut v = vec![
        (
            "context".to_string(),
            std::ptr::from_ref(ctx) as u64,
            size_of::<DeviceCtx>(),
        ),
        ("heap".to_string(), ctx.local_base, ctx.seg_bytes as usize),
    ];
    let mut doorbells = Vec::new();
    // SAFETY: `peers` holds `n_pes` entries (the context's layout).
    let peers =
        unsafe { std::slice::from_raw_parts(ctx.peers as *const DevicePeer, ctx.n_pes as usize) };
    v.push(("peers".into(), ctx.peers, std::mem::size_of_val(peers)));
    for (j, p) in peers.iter().enumerate() {
        if p.route == DeviceRoute::P2p as u32 {
            v.push((format!("PE {j}'s heap"), p.base, ctx.seg_bytes as usize));
        }
        if p.route != DeviceRoute::Rdma as u32 {
            continue;
        }
        let at = ctx.queues + j as u64 * u64::from(ctx.queue_bytes);
        // SAFETY: PE j's queue handle, written by `Pe::device_context`.
        let q = unsafe { (at as *const SqDevice<P::Sq>).read() };
        v.push((
            format!("queue {j} handle"),
            at,
            size_of::<SqDevice<P::Sq>>(),
        ));
        q.sq.memory(P::SQ_UNIT_BYTES, &mut |a, n| {
            v.push((format!("queue {j} ring/record/table"), a, n));
        });
        let cq = q.proto.cq;
        v.push((
            format!("queue {j} CQ"),
            cq.buf,
            cq.entries as usize * cq.cqe_bytes as usize,
        ));
        if cq.dbrec != 0 {
            v.push((format!("queue {j} CQ record"), cq.dbrec, 8));
        }
        v.push((
            format!("queue {j} protocol state"),
            q.proto.state,
            size_of::<gda_hal::SqShared>(),
        ));
        doorbells.push(q.sq.wq().db);
        // bnxt acknowledges CQEs through the CQ's doorbell: device code stores to it.
        if cq.db != 0 {
            doorbells.push(cq.db);
        }
    }
    (v, doorbells)
}

/// One PE's view: checks where its context points, then posts through the header.
fn probe_pe<P: Provider>(pe: &Pe<P>, want: ContextMemory) -> gda_shmem::Result<usize> {
    let ctx = pe.device_context()?;
    assert_eq!(ctx.memory, want as u32, "PE {}", pe.my_pe());
    let hip = gda_hip::Hip::load().unwrap();
    let (ranges, doorbells) = touched::<P>(ctx);
    let dev = device_mappings();
    let mut checked = 0;
    for (what, a, n) in &ranges {
        let last = a + *n as u64 - 1;
        match want {
            ContextMemory::Device => {
                assert!(
                    dev.iter().any(|&(s, e)| s <= *a && last < e),
                    "PE {}: {what} at {a:#x}+{n} is not in device memory",
                    pe.my_pe()
                );
            }
            ContextMemory::Mapped => {
                for p in [*a, last] {
                    assert_eq!(
                        hip.device_address_of_host(p).ok(),
                        Some(p),
                        "PE {}: {what} at {p:#x} is not mapped for the GPU",
                        pe.my_pe()
                    );
                }
            }
            ContextMemory::Host => {
                assert!(hip.device_address_of_host(*a).is_err(), "{what} registered");
            }
        }
        checked += 1;
    }
    for db in &doorbells {
        let mapped = hip.device_address_of_host(*db);
        if want == ContextMemory::Host {
            assert!(
                mapped.is_err(),
                "a host context's doorbell {db:#x} was registered"
            );
        } else {
            assert!(mapped.is_ok(), "doorbell {db:#x} is not mapped for the GPU");
        }
        checked += 1;
    }
    // The header posts through this very context: 8-byte puts to the right neighbour.
    let right = (pe.my_pe() + 1) % pe.n_pes();
    let dst = pe.calloc::<u64>(1024)?;
    pe.barrier_all()?;
    let c = std::ptr::from_ref(ctx).cast::<u8>();
    // SAFETY: this PE's context, used by this thread only; `dst` holds 1024 u64s.
    unsafe { gda_device::shmem::put8_rate(c, pe.local_ptr(dst)?, right, 2000) }
        .unwrap_or_else(|s| panic!("device put: status {s}"));
    pe.barrier_all()?;
    let mut got = vec![0u64; 1024];
    // SAFETY: this PE's own symmetric allocation of 1024 u64s, written by the left neighbour
    // before the barrier.
    got.copy_from_slice(unsafe { std::slice::from_raw_parts(pe.local_ptr(dst)?, 1024) });
    // put8_rate stores i at dst[i % 1024] for i < 2000: the last value of each slot.
    for (i, g) in got.iter().enumerate() {
        let want = if i + 1024 < 2000 { i + 1024 } else { i } as u64;
        assert_eq!(*g, want, "PE {}: slot {i}", pe.my_pe());
    }
    pe.barrier_all()?;
    Ok(checked)
}

fn run<P: gda_sim::Modeled>(heap: HeapPlacement, want: ContextMemory) -> usize {
    let cfg = Config {
        heap_size: 2 << 20,
        transport: TransportPolicy::Rdma,
        heap,
        ..Config::default()
    };
    let r = launch::threads::<P, _, _>(2, &cfg, |pe| probe_pe(pe, want))
        .unwrap_or_else(|e| panic!("{} {heap}: {e}", P::NAME));
    r.iter().sum()
}

/// Run by the tests below in a child process (the HIP stand-in is chosen by environment);
/// without `GDA_TEST_DEVICE_PROBE` it does nothing.
#[test]
#[ignore = "a helper the tests below run in a child process"]
fn device_memory_probe() {
    let Some(mode) = std::env::var_os("GDA_TEST_DEVICE_PROBE") else {
        return;
    };
    let (heap, want) = match mode.to_str().unwrap() {
        "gpu" => (HeapPlacement::Gpu, ContextMemory::Device),
        "host" => (HeapPlacement::Host, ContextMemory::Mapped),
        "nogpu" => (HeapPlacement::Host, ContextMemory::Host),
        m => panic!("mode {m}"),
    };
    for (name, n) in [
        ("mlx5", run::<gda_mlx5::Mlx5>(heap, want)),
        ("bnxt", run::<gda_bnxt::Bnxt>(heap, want)),
        ("native", run::<gda_native::Native>(heap, want)),
    ] {
        println!("probe: {name} {n} ranges checked");
    }
}

fn probe(mode: &str, gpus: &str) -> Vec<(String, usize)> {
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "device_memory_probe", "--ignored", "--nocapture"])
        .env("GDA_HIP_LIB", hip_sim())
        .env("GDA_HIPSIM_GPUS", gpus)
        .env("GDA_TEST_DEVICE_PROBE", mode)
        .env("GDA_SHMEM_TIMEOUT_MS", "30000")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{mode}: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.lines()
        .filter_map(|l| l.strip_prefix("probe: "))
        .map(|l| {
            let mut w = l.split(' ');
            (
                w.next().unwrap().to_string(),
                w.next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Each of the 2 PEs checks its context, its heap, its peer's handle and, per RDMA queue, the
/// ring, records, table, state and doorbell: at least 9 ranges per PE for every provider.
fn assert_counts(mode: &str, got: &[(String, usize)]) {
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["mlx5", "bnxt", "native"], "{mode}");
    for (name, n) in got {
        assert!(*n >= 2 * 9, "{mode} {name}: only {n} ranges checked");
    }
}

#[test]
fn a_gpu_heap_puts_the_context_and_queues_in_device_memory() {
    assert_counts("gpu", &probe("gpu", "1"));
}

#[test]
fn a_host_heap_is_mapped_for_the_gpu_at_the_same_addresses() {
    assert_counts("host", &probe("host", "1"));
}

#[test]
fn without_a_gpu_the_context_stays_in_host_memory() {
    assert_counts("nogpu", &probe("nogpu", "0"));
}
