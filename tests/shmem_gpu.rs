//! gda-shmem's symmetric heap in GPU memory (`GDA_SHMEM_HEAP=gpu`, `gda shmem --heap gpu`),
//! run on the HIP stand-in (`target/<profile>/hip-sim/libamdhip64.so.5`, host shared memory
//! behind HIP's API) since these machines have no GPU:
//!
//! - processes on one host reach each other's GPU heaps through IPC handles (P2P);
//! - over the verbs domain the heap is registered with the NIC as GPU memory and the QPs' rings
//!   and doorbell records are allocated from GPU memory too;
//! - thread PEs of one process share their GPU heaps without IPC (HIP opens no handle of the
//!   process that made it), over P2P and over the in-process software NIC;
//! - over RDMA on the software NIC between processes, each PE's engine serves its peers'
//!   requests on its own GPU heap;
//! - every way it cannot work is a clear error: no GPU, no HIP, a bad placement, PEs that
//!   disagree, a GPU index out of range.
#![cfg(feature = "hip")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn hip_sim() -> PathBuf {
    profile_dir().join("hip-sim/libamdhip64.so.5")
}

fn gda(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gda"));
    c.args(args)
        .env("GDA_HIP_LIB", hip_sim())
        .env("GDA_SHMEM_TIMEOUT_MS", "60000");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run gda")
}

/// The `ok` lines of `gda shmem check` that report a GPU heap.
fn ok_lines(o: &Output) -> Vec<String> {
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}\n{err}");
    out.lines()
        .filter(|l| l.contains(": ok, ") && l.ends_with(", gpu heap"))
        .map(str::to_owned)
        .collect()
}

fn count(o: &Output, what: &str) -> usize {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("gda-hip-sim: ") && l.contains(what))
        .count()
}

#[test]
fn gpu_heaps_of_processes_are_reached_through_ipc_handles() {
    let o = gda(
        &["shmem", "check", "--pes", "3", "--heap", "gpu"],
        &[("GDA_HIPSIM_TRACE", "1")],
    );
    let ok = ok_lines(&o);
    assert_eq!(ok.len(), 3, "{ok:?}");
    assert!(
        ok.iter().filter(|l| l.contains("over P2p")).count() >= 2,
        "{ok:?}"
    );
    // Each PE allocates its heap on the GPU and opens the other two PEs' handles.
    assert_eq!(count(&o, "hipExtMallocWithFlags"), 3);
    assert_eq!(count(&o, "hipIpcOpenMemHandle"), 6);
}

/// `gda shmem check` on 3 PEs with GPU heaps over RDMA, with `extra` arguments and `env`.
fn check_3_gpu_heaps_over_rdma(extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec![
        "shmem",
        "check",
        "--pes",
        "3",
        "--heap",
        "gpu",
        "--transport",
        "rdma",
    ];
    args.extend_from_slice(extra);
    gda(&args, env)
}

/// Over RDMA on the software NIC between processes: each PE's engine executes its peers'
/// requests on its own GPU heap (registered by address), as it does on host memory.
#[test]
fn gpu_heaps_of_processes_are_reached_over_the_software_nic() {
    let o = check_3_gpu_heaps_over_rdma(&[], &[("GDA_HIPSIM_TRACE", "1")]);
    let ok = ok_lines(&o);
    assert_eq!(ok.len(), 3, "{ok:?}");
    assert!(
        ok.iter().filter(|l| l.contains("over Rdma")).count() >= 2,
        "{ok:?}"
    );
    // The heaps, and the queues the NIC's rings live in (GPU memory too).
    assert!(count(&o, "hipExtMallocWithFlags") >= 3);
}

#[test]
fn a_host_heap_touches_no_gpu_memory() {
    let o = gda(
        &["shmem", "check", "--pes", "2"],
        &[("GDA_HIPSIM_TRACE", "1")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(", host heap"));
    assert_eq!(count(&o, "hipExtMallocWithFlags"), 0);
}

#[cfg(feature = "verbs")]
fn over_verbs(device: &str, provider: &str) {
    let lib = profile_dir().join("verbs-sim/libibverbs.so.1");
    let o = check_3_gpu_heaps_over_rdma(
        &["--domain", "verbs"],
        &[
            ("GDA_HIPSIM_TRACE", "1"),
            ("GDA_IBVERBS_LIB", lib.to_str().unwrap()),
            ("GDA_SHMEM_DEVICE", device),
        ],
    );
    let ok = ok_lines(&o);
    assert_eq!(ok.len(), 3, "{ok:?}");
    let want = format!("(provider {provider} through rdma-core)");
    assert!(ok.iter().all(|l| l.contains(&want)), "{ok:?}");
    assert!(
        ok.iter().filter(|l| l.contains("over Rdma")).count() >= 2,
        "{ok:?}"
    );
    // Three heaps, and for each PE's two QPs at least a CQ ring and a send ring from GPU
    // memory (doorbell records too, as the provider asks).
    let allocs = count(&o, "hipExtMallocWithFlags");
    assert!(allocs >= 3 + 3 * 2 * 2, "{allocs} GPU allocations");
}

#[cfg(feature = "verbs")]
#[test]
fn gpu_heap_and_rings_over_the_verbs_domain_on_mlx5() {
    over_verbs("gda_mlx5_0", "mlx5");
}

#[cfg(feature = "verbs")]
#[test]
fn gpu_heap_and_rings_over_the_verbs_domain_on_bnxt() {
    over_verbs("gda_bnxt_0", "bnxt");
}

/// Thread PEs: P2P between GPU heaps of one process, and RDMA over the in-process software
/// NIC (which reaches memory where it is). Run in a child process: `GDA_HIP_LIB` is
/// process-wide.
#[test]
fn gpu_heaps_of_thread_pes() {
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "thread_probe", "--ignored", "--nocapture"])
        .env("GDA_HIP_LIB", hip_sim())
        .env("GDA_TEST_GPU_PROBE", "threads")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("probe: ")).collect();
    assert_eq!(
        lines,
        [
            "probe: P2p 3 PEs, 8 checks each, gpu heap",
            "probe: Rdma 3 PEs, 8 checks each, gpu heap",
            "probe: mismatch: configuration: PE 1 has its symmetric heap in host memory, PE 0 in \
             gpu memory: GDA_SHMEM_HEAP must agree",
        ]
    );
}

/// Run by `gpu_heaps_of_thread_pes` in a child process; without `GDA_TEST_GPU_PROBE` it does
/// nothing.
#[test]
#[ignore = "a helper gpu_heaps_of_thread_pes runs in a child process"]
fn thread_probe() {
    use gda_shmem::{Config, HeapPlacement, Pe, TransportPolicy, launch, selftest};
    if std::env::var_os("GDA_TEST_GPU_PROBE").is_none() {
        return;
    }
    for transport in [TransportPolicy::P2p, TransportPolicy::Rdma] {
        let cfg = Config {
            heap_size: 4 << 20,
            transport,
            heap: HeapPlacement::Gpu,
            ..Config::default()
        };
        let r = launch::threads::<gda_native::Native, _, _>(3, &cfg, |pe| {
            let rep = selftest::run(pe, 4)?;
            Ok((
                rep.checks.len(),
                pe.transport_to((pe.my_pe() + 1) % 3)?,
                pe.heap_placement(),
            ))
        })
        .unwrap_or_else(|e| panic!("{transport:?}: {e}"));
        assert!(r.windows(2).all(|w| w[0] == w[1]), "{r:?}");
        println!(
            "probe: {:?} 3 PEs, {} checks each, {} heap",
            r[0].1, r[0].0, r[0].2
        );
    }
    // PE 0 with a GPU heap, PE 1 with a host heap: init refuses, naming both.
    let hub = gda_shmem::boot::threads::Hub::new(2, std::time::Duration::from_secs(20));
    let errs: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2u32)
            .map(|r| {
                let boot = hub.member(r);
                s.spawn(move || {
                    let cfg = Config {
                        heap_size: 1 << 20,
                        heap: if r == 0 {
                            HeapPlacement::Gpu
                        } else {
                            HeapPlacement::Host
                        },
                        ..Config::default()
                    };
                    match Pe::<gda_native::Native>::init_p2p(Box::new(boot), &cfg) {
                        Ok(_) => "initialised".to_string(),
                        Err(e) => e.to_string(),
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!("probe: mismatch: {}", errs[0]);
    assert!(errs[1].contains("GDA_SHMEM_HEAP must agree"), "{errs:?}");
}

#[test]
fn gpu_heap_errors_are_clear() {
    let mut cases = 0;
    let no_gpu = ["no AMD GPU is visible", "/dev/kfd", "HIP_VISIBLE_DEVICES"];
    let mut expect = |args: &[&str], env: &[(&str, &str)], want: &[&str]| {
        let o = gda(args, env);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} {env:?} succeeded: {err}");
        for w in want {
            assert!(
                err.contains(w),
                "{args:?} {env:?}: {w:?} missing from\n{err}"
            );
        }
        cases += 1;
    };
    let check = ["shmem", "check", "--pes", "2", "--heap", "gpu"];
    // The stand-in showing no GPU: HIP's own answer, reported with what to check.
    expect(&check, &[("GDA_HIPSIM_GPUS", "0")], &no_gpu);
    // No HIP runtime at all.
    expect(
        &check,
        &[("GDA_HIP_LIB", "/nonexistent/libamdhip64.so")],
        &["GPU memory", "/nonexistent/libamdhip64.so", "GDA_HIP_LIB"],
    );
    // A GPU index this process does not have.
    expect(
        &check,
        &[("GDA_SHMEM_GPU", "5")],
        &["GDA_SHMEM_GPU=5, but this process sees 1 GPU(s)"],
    );
    // A placement that does not exist.
    expect(
        &["shmem", "check", "--pes", "2", "--heap", "vram"],
        &[],
        &["GDA_SHMEM_HEAP=\"vram\": expected host or gpu"],
    );
    // Debian's real HIP runtime on a machine without a GPU.
    if !Path::new("/dev/kfd").exists() {
        expect(&check, &[("GDA_HIP_LIB", "libamdhip64.so.5")], &no_gpu);
    }
    assert!(cases >= 4, "{cases} cases");
}

/// On a machine with an AMD GPU and an RDMA NIC: the heap in real GPU memory, registered with
/// the NIC named by `GDA_HW_DEVICE` (dma-buf or peer memory), rings in GPU memory, P2P between
/// the PEs through real IPC handles — `GDA_HW_DEVICE=mlx5_0 GDA_HW_GPU=1 cargo test --release
/// --features verbs,hip --test shmem_gpu hardware_gpu_heap -- --ignored`.
#[cfg(feature = "verbs")]
#[test]
#[ignore = "needs an AMD GPU and an RDMA NIC: set GDA_HW_DEVICE and GDA_HW_GPU=1"]
fn hardware_gpu_heap() {
    let (Some(dev), Some(_)) = (
        std::env::var_os("GDA_HW_DEVICE"),
        std::env::var_os("GDA_HW_GPU"),
    ) else {
        return;
    };
    for transport in ["rdma", "p2p"] {
        let o = Command::new(env!("CARGO_BIN_EXE_gda"))
            .args([
                "shmem", "check", "--pes", "2", "--heap", "gpu", "--domain", "verbs",
            ])
            .args(["--transport", transport])
            .env("GDA_SHMEM_DEVICE", &dev)
            .output()
            .expect("run gda");
        assert_eq!(ok_lines(&o).len(), 2, "{transport}");
    }
}

/// Issue 25: a PE failure left the HIP stand-in's heaps in `/dev/shm` (2 × 69 MiB per job):
/// they are named after the job now, so the launcher's sweep removes them.
#[test]
fn a_failed_gpu_heap_job_leaves_no_shared_memory() {
    let job = format!("tgpufail{}", std::process::id());
    let hipsim_before = gda::os::shm::list("hipsim").unwrap().len();
    let o = Command::new(env!("CARGO_BIN_EXE_gdarun"))
        .args(["-n", "2", "--grace", "2", "--job", &job])
        .arg(env!("CARGO_BIN_EXE_gda"))
        .args(["shmem", "check", "--crash-pe", "1"])
        .env("GDA_HIP_LIB", hip_sim())
        .env("GDA_SHMEM_HEAP", "gpu")
        .env("GDA_HIPSIM_TRACE", "1")
        .env("GDA_SHMEM_TIMEOUT_MS", "10000")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        count(&o, "hipExtMallocWithFlags") >= 1,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let left = gda::os::shm::list(&job).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(gda::os::shm::list("hipsim").unwrap().len() <= hipsim_before);
}

/// A PE's GPU follows its *local* rank (issue 46): 4 PEs over 2 simulated hosts (PEs 0, 2 on
/// one, 1, 3 on the other) with 4 GPUs each take GPUs 0 and 1 on each host — not 0–3 by global
/// rank, which would leave a host's GPUs 2 and 3 to PEs of the other host.
#[test]
fn a_pes_gpu_follows_its_local_rank() {
    let o = gda(
        &[
            "shmem", "check", "--pes", "4", "--heap", "gpu", "--hosts", "2",
        ],
        &[("GDA_HIPSIM_GPUS", "4"), ("GDA_HIPSIM_TRACE", "1")],
    );
    assert_eq!(ok_lines(&o).len(), 4);
    let set: Vec<usize> = (0..4)
        .map(|g| count(&o, &format!("hipSetDevice {g}")))
        .collect();
    assert_eq!(set, [2, 2, 0, 0], "{}", String::from_utf8_lossy(&o.stderr));
}
