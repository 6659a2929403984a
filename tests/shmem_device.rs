//! The SHMEM device API (`device/include/gda/shmem.hpp`) across processes: a C++ program
//! (`device/tests/shmem_routines.cpp`) built with `gdacc` calls `shmem_init`, takes this PE's
//! context with `shmemx_device_context()` and runs every device routine at thread, warp and
//! block granularity on CPU threads (2 blocks × 8 threads, warps of 4); `gdarun` starts it on
//! 2 and 4 PEs over P2P and over RDMA on each provider the device API has. The examples
//! (`examples/device/*.hip`) built for the host run the same way.
#![cfg(feature = "capi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `source` (relative to the repository) built with `gdacc` as C++ into a fresh directory.
fn build(source: &str, name: &str) -> PathBuf {
    build_with(source, name, &[])
}

/// As [`build`], with extra compiler flags.
fn build_with(source: &str, name: &str, flags: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gda-device-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    // gdacc compiles .cpp, and .hip/.cu (kernel sources) as C++ for CPU threads.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(source);
    let o = Command::new(env!("CARGO_BIN_EXE_gdacc"))
        .args(["-Wall", "-Wextra", "-Werror", "-O2", "-g"])
        .arg(format!(
            "-I{}",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/device")
                .display()
        ))
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "gdacc {source}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

fn gdarun(n: u32, prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gdarun"));
    c.arg("-n")
        .arg(n.to_string())
        .args(["--grace", "5"])
        .arg(prog)
        .args(args)
        .env("GDA_SHMEM_TIMEOUT_MS", "30000");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The configurations every device program runs in: P2P, then RDMA on each provider.
const CONFIGS: [&[(&str, &str)]; 4] = [
    &[("GDA_SHMEM_TRANSPORT", "p2p")],
    &[
        ("GDA_SHMEM_TRANSPORT", "rdma"),
        ("GDA_SHMEM_PROVIDER", "native"),
    ],
    &[
        ("GDA_SHMEM_TRANSPORT", "rdma"),
        ("GDA_SHMEM_PROVIDER", "mlx5"),
    ],
    &[
        ("GDA_SHMEM_TRANSPORT", "rdma"),
        ("GDA_SHMEM_PROVIDER", "bnxt"),
    ],
];

/// Runs `prog` on `n` PEs in `env`; returns the checks every PE reported ("N checks ok").
fn run_checks(prog: &Path, n: u32, env: &[(&str, &str)], tag: &str) -> Vec<u32> {
    let o = gdarun(n, prog, &[], env);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{tag} -n {n} {env:?}\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let counts: Vec<u32> = out
        .lines()
        .filter(|l| l.starts_with(tag) && l.ends_with(" checks ok"))
        .filter_map(|l| l.rsplit(": ").next()?.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(counts.len(), n as usize, "{tag} -n {n} {env:?}\n{out}");
    counts
}

#[test]
fn every_device_routine_at_every_granularity_on_2_and_4_pes() {
    let prog = build("device/tests/shmem_routines.cpp", "shmem_routines");
    let mut runs = 0;
    for env in CONFIGS {
        for n in [2, 4] {
            let counts = run_checks(&prog, n, env, "device_shmem:");
            // Every PE ran every check (the count is fixed by the program: any skipped or
            // vacuous part would change it).
            assert!(
                counts.iter().all(|&c| c == counts[0] && c > 1000),
                "{env:?}: {counts:?}"
            );
            runs += 1;
        }
    }
    assert_eq!(runs, 8);
}

/// With the `hip` feature, on the HIP stand-in: every routine through a context in "GPU"
/// memory (a GPU heap: the PEs are processes, so P2P through IPC handles), and through a host
/// context mapped for the GPU (a host heap with a GPU present) over P2P and RDMA on each
/// provider; the program checks `Ctx::memory` (Device 1, Mapped 2).
#[cfg(feature = "hip")]
#[test]
fn every_device_routine_through_contexts_placed_for_a_gpu() {
    let prog = build("device/tests/shmem_routines.cpp", "shmem_routines_gpu");
    let sim = Path::new(env!("CARGO_BIN_EXE_gdarun"))
        .parent()
        .unwrap()
        .join("hip-sim/libamdhip64.so.5");
    let sim = sim.to_str().unwrap();
    let mut runs = 0;
    let gpu_heap: &[(&str, &str)] = &[
        ("GDA_SHMEM_TRANSPORT", "p2p"),
        ("GDA_SHMEM_HEAP", "gpu"),
        ("GDA_TEST_CONTEXT_MEMORY", "1"),
    ];
    for env in std::iter::once(gpu_heap).chain(CONFIGS) {
        let mut env = env.to_vec();
        env.push(("GDA_HIP_LIB", sim));
        if !env.iter().any(|(k, _)| *k == "GDA_TEST_CONTEXT_MEMORY") {
            env.push(("GDA_TEST_CONTEXT_MEMORY", "2"));
        }
        let counts = run_checks(&prog, 2, &env, "device_shmem:");
        assert!(
            counts.iter().all(|&c| c == counts[0] && c > 1000),
            "{env:?}: {counts:?}"
        );
        runs += 1;
    }
    assert_eq!(runs, 5);
}

/// Runs an example on `n` PEs in `env`; every PE must print a line starting with `tag` and
/// ending in `ok`.
fn example_runs(prog: &Path, n: u32, env: &[(&str, &str)], tag: &str) {
    let o = gdarun(n, prog, &[], env);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{tag} -n {n} {env:?}\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ok = out
        .lines()
        .filter(|l| l.starts_with(tag) && l.ends_with(" ok"))
        .count();
    assert_eq!(ok, n as usize, "{tag} -n {n} {env:?}\n{out}");
}

#[test]
fn the_gpu_examples_run_on_cpu_threads_under_gdarun() {
    let ring = build("examples/device/put_signal_ring.hip", "put_signal_ring");
    let moe = build("examples/device/moe_dispatch.hip", "moe_dispatch");
    let mut runs = 0;
    for env in CONFIGS {
        for n in [2, 4] {
            example_runs(&ring, n, env, "put_signal_ring:");
            example_runs(&moe, n, env, "moe_dispatch:");
            runs += 2;
        }
    }
    assert_eq!(runs, 16);
}

/// A quiet that returns before the work is complete (the header built with
/// `GDA_MUTANT_QUIET_EARLY`) must be caught: blocking gets and fetching atomics read their
/// results right after a quiet, so the routines fail over RDMA.
#[test]
fn a_quiet_that_returns_early_is_caught() {
    let prog = build_with(
        "device/tests/shmem_routines.cpp",
        "shmem_routines_quiet_early",
        &["-DGDA_MUTANT_QUIET_EARLY"],
    );
    let env = [
        ("GDA_SHMEM_TRANSPORT", "rdma"),
        ("GDA_SHMEM_PROVIDER", "native"),
        ("GDA_SHMEM_TIMEOUT_MS", "5000"),
    ];
    let o = gdarun(2, &prog, &[], &env);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the mutant passed:\n{err}");
    assert!(
        err.contains("checks failed"),
        "the mutant failed without a failed check:\n{err}"
    );
}

/// The routines built with ThreadSanitizer (the header's code on CPU threads: the posting
/// protocol, groups, staging slots) report no race, over P2P and RDMA.
#[test]
fn the_device_routines_pass_under_thread_sanitizer() {
    let prog = build_with(
        "device/tests/shmem_routines.cpp",
        "shmem_routines_tsan",
        &["-fsanitize=thread", "-O1"],
    );
    for env in [CONFIGS[0], CONFIGS[1]] {
        let mut env = env.to_vec();
        let supp = Path::new(env!("CARGO_MANIFEST_DIR")).join("device/tests/tsan.supp");
        let opts = format!(
            "halt_on_error=1 exitcode=66 suppressions={}",
            supp.display()
        );
        env.push(("TSAN_OPTIONS", &opts));
        let counts = run_checks(&prog, 2, &env, "device_shmem:");
        assert!(counts.iter().all(|&c| c > 1000), "{env:?}: {counts:?}");
    }
}

/// `scripts/gpu-examples.sh --lib <this build's dir> ARGS`: its stdout, once it succeeded.
fn gpu_examples(args: &[&str]) -> String {
    let lib = Path::new(env!("CARGO_BIN_EXE_gdacc")).parent().unwrap();
    let o = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-examples.sh"))
        .arg("--lib")
        .arg(lib)
        .args(args)
        .output()
        .expect("run scripts/gpu-examples.sh");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// On a machine with a GPU: the examples built for it (`nvcc` for NVIDIA, `hipcc` for AMD) run
/// their kernels against the software NIC, whose rings, doorbell records, CQs and heap the
/// kernels reach through host memory gda maps for the GPU (`Ctx::memory` Mapped: gda-hip
/// registers it with HIP or CUDA's runtime), over RDMA in every provider format and over P2P,
/// on 2 and 4 PEs; on AMD also with the heap in GPU memory (`GDA_SHMEM_HEAP=gpu`).
/// `scripts/gpu-examples.sh` does the runs (it needs no Rust, so it also runs on a GPU machine
/// given only the built library); device/README.md says where it has run. Run:
/// `cargo build --release --features capi,hip && cargo test --release --features capi,hip
/// --test shmem_device gpu_examples -- --ignored`.
#[test]
#[ignore = "needs a GPU (NVIDIA with nvcc, or AMD with hipcc)"]
fn gpu_examples_drive_the_software_nic_from_a_real_gpu() {
    let out = gpu_examples(&["--deadline", "3600"]);
    assert!(out.contains(" 0 not run"), "{out}");
}

/// The script behind the GPU run, on CPU threads (`--cpu`: the same sources built with gdacc),
/// so a mistake in it shows here rather than on a borrowed GPU.
#[test]
fn the_gpu_examples_script_runs_the_examples_on_cpu_threads() {
    let out = gpu_examples(&["--cpu", "--pes", "2"]);
    // 2 examples x (3 RDMA formats + P2P) at 2 PEs.
    assert!(
        out.contains("gpu-examples: cpu: 8 of 8 runs ok, 0 not run"),
        "{out}"
    );
    assert_eq!(out.matches("context in host memory)").count(), 8, "{out}");
}
