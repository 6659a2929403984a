//! `gda topo`: the node and each local rank's GPU, NICs and CPUs, from hwloc XML fixtures; the
//! JSON lines scripts read; overrides and their errors; hwloc missing.

use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topo/tests/fixtures")
        .join(name)
}

fn topo(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gda"));
    c.arg("topo").args(args);
    for k in [
        "GDA_RDMA_DEVICES",
        "GDA_NIC_MAP",
        "GDA_RAILS",
        "HWLOC_XMLFILE",
    ] {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run gda topo");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn json_lines_give_every_rank_its_gpu_nic_and_cpus() {
    let f = fixture("8gpu-8nic-switch.xml");
    let (ok, out, err) = topo(
        &["--topology", f.to_str().unwrap(), "--json", "--ranks", "8"],
        &[],
    );
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(lines.len(), 8);
    let buses = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"];
    for (r, l) in lines.iter().enumerate() {
        assert_eq!(l["rank"], r);
        assert_eq!(l["gpu"], format!("0000:{}:00.0", buses[r]));
        assert_eq!(l["nics"], serde_json::json!([format!("mlx5_{r}")]));
        assert_eq!(l["paths"], serde_json::json!(["PIX"]));
        assert_eq!(l["cpus"], if r < 4 { "0-7" } else { "8-15" });
    }
    // Through HWLOC_XMLFILE (hwloc's own variable), with two rails from GDA_RAILS.
    let (ok, out, err) = topo(
        &["--json", "--ranks", "2"],
        &[("HWLOC_XMLFILE", f.to_str().unwrap()), ("GDA_RAILS", "2")],
    );
    assert!(ok, "{err}");
    // Each rank's own switch NIC, then a free one on its socket: no NIC is shared while one
    // is free.
    let nics: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["nics"].clone())
        .collect();
    assert_eq!(
        nics,
        [
            serde_json::json!(["mlx5_0", "mlx5_2"]),
            serde_json::json!(["mlx5_1", "mlx5_3"])
        ],
        "{out}"
    );
}

#[test]
fn the_text_shows_the_matrix_the_devices_and_the_ranks() {
    let f = fixture("2socket-cross.xml");
    let (ok, out, err) = topo(&["--topology", f.to_str().unwrap()], &[]);
    assert!(ok, "{err}");
    let mut found = 0;
    for want in [
        "2 package(s), 2 NUMA node(s), 8 GPU(s), 4 RDMA NIC(s)",
        "PIX  = through at most one PCIe switch",
        "bnxt_re0   0000:0d:00.0  14e4:1760  NUMA 0",
        "GPU4  0000:9f:00.0  1002:74a1  rsmi4",
        "Local ranks (8, 1 rail each):",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
        found += 1;
    }
    assert_eq!(found, 5);
    // The matrix: GPU0's row is PIX then NODE ×3; GPU4's all SYS.
    let row = |g: &str| {
        out.lines()
            .find(|l| l.starts_with(g))
            .unwrap_or_else(|| panic!("no {g} row:\n{out}"))
            .split_whitespace()
            .skip(1)
            .take(4)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("GPU0 "), "PIX NODE NODE NODE");
    assert_eq!(row("GPU4 "), "SYS SYS SYS SYS");
}

#[test]
fn bad_overrides_and_files_are_clear_errors() {
    let f = fixture("8gpu-4nic-pairs.xml");
    let t = f.to_str().unwrap();
    let mut checked = 0;
    for (env, want) in [
        (
            ("GDA_RDMA_DEVICES", "mlx5_7"),
            "GDA_RDMA_DEVICES: no RDMA device mlx5_7 on this node (it has: mlx5_0, mlx5_1, mlx5_2, mlx5_3)",
        ),
        (
            ("GDA_RDMA_DEVICES", "mlx5_0:0"),
            "port \"0\" is not 1..=255",
        ),
        (
            ("GDA_NIC_MAP", "9=mlx5_0"),
            "rank 9 is not a local rank (0..8)",
        ),
        (("GDA_RAILS", "0"), "GDA_RAILS: \"0\" is not a count 1..=64"),
    ] {
        let (ok, _, err) = topo(&["--topology", t], &[env]);
        assert!(!ok, "{env:?} accepted");
        assert!(err.contains(want), "{env:?}: {err}");
        checked += 1;
    }
    let (ok, _, err) = topo(&["--topology", "/nonexistent/node.xml"], &[]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/node.xml"), "{err}");
    let junk = std::env::temp_dir().join(format!("gda-topo-junk-{}.xml", std::process::id()));
    std::fs::write(&junk, "<lstopo/>").unwrap();
    let (ok, _, err) = topo(&["--topology", junk.to_str().unwrap()], &[]);
    std::fs::remove_file(&junk).unwrap();
    assert!(!ok);
    assert!(err.contains("gda topo:"), "{err}");
    let (ok, _, err) = topo(&["--ranks", "0", "--topology", t], &[]);
    assert!(!ok && err.contains("--ranks"), "{err}");
    assert_eq!(checked, 4);
}

/// Without hwloc: a named XML file is still read (and the note says so); this machine is
/// placed round-robin over rdma-core's devices, with the package to install.
#[test]
fn without_hwloc_a_file_still_reads_and_the_machine_falls_back_to_round_robin() {
    let f = fixture("nics-no-gpu.xml");
    let none = [("GDA_HWLOC_LIB", "/nonexistent/libhwloc.so.15")];
    let (ok, out, err) = topo(&["--topology", f.to_str().unwrap()], &none);
    assert!(ok, "{err}");
    assert!(
        out.contains("read without hwloc (hwloc is not installed"),
        "{out}"
    );
    assert!(out.contains("mlx5_1"), "{out}");
    let (ok, out, err) = topo(&[], &none);
    assert!(ok, "{err}");
    assert!(
        out.contains("apt-get install libhwloc15") && out.contains("falls back to round-robin"),
        "{out}"
    );
}
