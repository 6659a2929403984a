//! gda-shmem over the verbs domain: `gda shmem check --pes 3 --domain verbs` — three processes,
//! each opening a ConnectX through rdma-core loaded at run time (here the verbs-compatible
//! library), RDMA routes on the rings `mlx5dv_init_obj` hands out, every SHMEM routine checked.
#![cfg(feature = "verbs")]

use std::path::Path;
use std::process::Command;

fn verbs_lib() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("verbs-sim/libibverbs.so.1")
}

#[test]
fn shmem_check_runs_over_the_verbs_domain_across_processes() {
    check_over("gda_mlx5_0", "mlx5");
}

/// The same on the Thor2 control path (verbs + `bnxt_re_dv_*`, rings laid out by gda).
#[test]
fn shmem_check_runs_over_the_verbs_domain_on_bnxt() {
    check_over("gda_bnxt_0", "bnxt");
}

fn check_over(device: &str, provider: &str) {
    let o = Command::new(env!("CARGO_BIN_EXE_gda"))
        .args([
            "shmem",
            "check",
            "--pes",
            "3",
            "--transport",
            "rdma",
            "--domain",
            "verbs",
        ])
        .env("GDA_IBVERBS_LIB", verbs_lib())
        .env("GDA_SHMEM_DEVICE", device)
        .env("GDA_SHMEM_TIMEOUT_MS", "60000")
        .output()
        .expect("run gda shmem");
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}\n{err}");
    let want = format!("(provider {provider} through rdma-core)");
    let ok: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(": ok, ") && l.contains(&want))
        .collect();
    assert_eq!(ok.len(), 3, "{out}");
    assert!(
        ok.iter().filter(|l| l.contains("over Rdma")).count() >= 2,
        "{out}"
    );
}

#[test]
fn verbs_domain_errors_are_clear() {
    let mut cases = 0;
    for (env, want) in [
        (
            ("GDA_IBVERBS_LIB", "/nonexistent/libibverbs.so.1"),
            "apt-get install libibverbs1",
        ),
        (
            ("GDA_SHMEM_DEVICE", "gda_nope_0"),
            "no RDMA device \"gda_nope_0\"",
        ),
        (("GDA_IB_GID_INDEX", "9"), "GID index 9 is not populated"),
        (
            ("GDA_IB_GID_INDEX", "x"),
            "GDA_IB_GID_INDEX=\"x\" is not a GID index",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_gda"))
            .args([
                "shmem",
                "check",
                "--pes",
                "2",
                "--transport",
                "rdma",
                "--domain",
                "verbs",
            ])
            .env("GDA_IBVERBS_LIB", verbs_lib())
            .env(env.0, env.1)
            .output()
            .expect("run gda shmem");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains(want), "{err}");
        cases += 1;
    }
    let o = Command::new(env!("CARGO_BIN_EXE_gda"))
        .args(["shmem", "check", "--pes", "2", "--domain", "nic9"])
        .output()
        .expect("run gda shmem");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("GDA_SHMEM_DOMAIN=\"nic9\""));
    assert_eq!(cases, 4);
}
