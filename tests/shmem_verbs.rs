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

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topo/tests/fixtures")
        .join(name)
}

/// `gda shmem check [--pes N] --transport rdma --domain verbs` on the DGX fixture's node: the
/// verbs library with 8 ConnectX devices (`gda_mlx5_0..7`), `HWLOC_XMLFILE` naming
/// `sim-8gpu-8nic.xml`, no device named, and each PE reporting its bindings.
fn check_on_the_dgx_node(pes: Option<&str>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gda"));
    c.args(["shmem", "check"]);
    if let Some(n) = pes {
        c.args(["--pes", n]);
    }
    c.args(["--transport", "rdma", "--domain", "verbs"])
        .env("GDA_IBVERBS_LIB", verbs_lib())
        .env("GDA_VERBS_DEVICES", "mlx5:8")
        .env("HWLOC_XMLFILE", fixture("sim-8gpu-8nic.xml"))
        .env("GDA_SHMEM_REPORT_BINDINGS", "1")
        .env("GDA_SHMEM_TIMEOUT_MS", "120000")
        .env_remove("GDA_SHMEM_DEVICE");
    c
}

/// The bindings lines (`gda shmem: PE r bindings: …`) of a job's stderr, by PE.
fn bindings(err: &str) -> Vec<(u32, String)> {
    let mut v: Vec<(u32, String)> = err
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("gda shmem: PE ")?;
            let (pe, what) = rest.split_once(" bindings: ")?;
            Some((pe.parse().ok()?, what.to_string()))
        })
        .collect();
    v.sort();
    v
}

/// Issue 46: on a node of 8 GPUs and 8 NICs (the DGX fixture, its NICs the verbs library's
/// `gda_mlx5_0..7`), `gda shmem check --pes 8` over the verbs domain with no device named:
/// every PE reports its GPU, its own switch's NIC and the CPUs near them — PE r takes GPU r
/// and `gda_mlx5_r` (PIX), PEs 0–3 socket 0's CPUs, 4–7 socket 1's — and the check passes.
#[test]
fn each_pe_of_a_node_takes_the_nic_next_to_its_gpu() {
    let o = check_on_the_dgx_node(Some("8"))
        .output()
        .expect("run gda shmem");
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(
        out.lines().filter(|l| l.contains(": ok, ")).count(),
        8,
        "{out}"
    );
    let buses = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"];
    let want: Vec<(u32, String)> = (0..8)
        .map(|r| {
            (
                r,
                format!(
                    "local rank {r}; gpu 0000:{}:00.0; nics gda_mlx5_{r} (PIX); near cpus {} \
                     (nearest by topology)",
                    buses[r as usize],
                    if r < 4 { "0-7" } else { "8-15" }
                ),
            )
        })
        .collect();
    assert_eq!(bindings(&err), want, "{err}");
}

/// A PE takes its NIC by its *local* rank, from each launcher's variables: two PEs whose
/// local ranks are the reverse of their ranks (torchrun's `LOCAL_RANK`, Open MPI's
/// `OMPI_COMM_WORLD_LOCAL_RANK`) take the reverse NICs; `GDA_NIC_MAP` overrides the choice.
#[test]
fn the_local_rank_of_each_launcher_picks_the_nic() {
    let port = 20000 + (std::process::id() % 20000) as u16;
    let torchrun = move |r: u32| {
        vec![
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "2".to_string()),
            ("LOCAL_RANK", (1 - r).to_string()),
            ("LOCAL_WORLD_SIZE", "2".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.to_string()),
            ("TORCHELASTIC_RUN_ID", format!("lr{port}")),
        ]
    };
    let ompi = move |r: u32| {
        vec![
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", "2".to_string()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", (1 - r).to_string()),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2".to_string()),
            ("OMPI_MCA_ess_base_jobid", format!("lr{port}")),
        ]
    };
    type Env<'a> = Box<dyn Fn(u32) -> Vec<(&'static str, String)> + 'a>;
    let mut jobs = 0;
    for (launcher, env, map, want) in [
        (
            "torchrun",
            Box::new(torchrun) as Env,
            None,
            ["gda_mlx5_1", "gda_mlx5_0"],
        ),
        (
            "mpirun",
            Box::new(ompi) as Env,
            None,
            ["gda_mlx5_1", "gda_mlx5_0"],
        ),
        (
            "mpirun",
            Box::new(ompi) as Env,
            Some("0=gda_mlx5_7,1=gda_mlx5_4"),
            ["gda_mlx5_4", "gda_mlx5_7"],
        ),
    ] {
        let pes: Vec<_> = (0..2u32)
            .map(|r| {
                let mut c = check_on_the_dgx_node(None);
                c.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                for k in [
                    "GDA_SHMEM_RANK",
                    "GDA_SHMEM_SIZE",
                    "PMI_RANK",
                    "SLURM_PROCID",
                    "RANK",
                ] {
                    c.env_remove(k);
                }
                if let Some(m) = map {
                    c.env("GDA_NIC_MAP", m);
                }
                for (k, v) in env(r) {
                    c.env(k, v);
                }
                c.spawn().expect("spawn a PE")
            })
            .collect();
        for (r, pe) in pes.into_iter().enumerate() {
            let o = pe.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{launcher} PE {r}: {err}");
            let b = bindings(&err);
            assert_eq!(b.len(), 1, "{err}");
            assert!(
                b[0].1.contains(&format!("nics {} (", want[r])),
                "{launcher} {map:?} PE {r}: {}",
                b[0].1
            );
        }
        jobs += 1;
    }
    assert_eq!(jobs, 3);
}

/// With a GPU runtime, the GPUs are taken in *its* order (issue 46): HIP's stand-in shows the
/// fixture's 8 GPUs in reverse PCI order, so local rank r's GPU (the runtime's GPU r, what a
/// GPU heap would use) is the fixture's GPU 7 − r, and its NIC the one on that GPU's switch.
#[cfg(feature = "hip")]
#[test]
fn the_gpu_runtimes_order_decides_which_gpu_and_nic_a_rank_takes() {
    let exe = std::env::current_exe().unwrap();
    let hip = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("hip-sim/libamdhip64.so.5");
    let buses = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"];
    let reversed: Vec<String> = buses
        .iter()
        .rev()
        .map(|b| format!("0000:{b}:00.0"))
        .collect();
    let o = check_on_the_dgx_node(Some("2"))
        .env("GDA_HIP_LIB", &hip)
        .env("GDA_HIPSIM_GPUS", "8")
        .env("GDA_HIPSIM_PCI", reversed.join(","))
        .output()
        .expect("run gda shmem");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let b = bindings(&err);
    assert_eq!(b.len(), 2, "{err}");
    for (r, what) in &b {
        let g = 7 - *r as usize;
        let want = format!(
            "gpu 0000:{}:00.0; nics gda_mlx5_{g} (PIX); near cpus 8-15 (nearest by topology, \
             GPUs in the runtime's order)",
            buses[g]
        );
        assert!(what.ends_with(&want), "PE {r}: {what}\nwant: {want}");
    }
}
