//! `gda devices`: discovery through rdma-core loaded at run time, pointed at the
//! verbs-compatible library; a missing library and a bad one are reported, not fatal.
#![cfg(feature = "verbs")]

use std::path::{Path, PathBuf};
use std::process::Command;

fn verbs_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("verbs-sim/libibverbs.so.1");
    assert!(
        lib.exists(),
        "{} missing: cargo build -p gda-verbs",
        lib.display()
    );
    lib
}

fn devices(lib: &Path, extra: &[(&str, &str)], json: bool) -> (bool, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gda"));
    c.arg("devices")
        .env("GDA_IBVERBS_LIB", lib)
        .env_remove("GDA_RDMA_DEVICES");
    if json {
        c.arg("--json");
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    let o = c.output().expect("run gda devices");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn lists_devices_with_ports_gids_and_limits() {
    let (ok, out, err) = devices(&verbs_lib(), &[], true);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let devs = v["devices"].as_array().unwrap();
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[0]["name"], "gda_mlx5_0");
    assert_eq!(devs[0]["provider"], "mlx5");
    assert_eq!(devs[1]["provider"], "bnxt");
    let port = &devs[0]["ports"][0];
    assert_eq!(port["state"], "Active");
    assert_eq!(port["link_layer"], "Ethernet");
    assert_eq!(port["active_mtu"], 4096);
    let gids = port["gids"].as_array().unwrap();
    assert_eq!(gids.len(), 4);
    assert_eq!(gids[3]["type"], "RoCE v2");
    assert!(gids[3]["gid"].as_str().unwrap().starts_with("::ffff:"));
    assert!(devs[0]["max_qp_wr"].as_u64().unwrap() >= 1024);
    // Text form, like ibv_devinfo.
    let (ok, text, _) = devices(&verbs_lib(), &[], false);
    assert!(ok);
    assert!(
        text.contains("gda_mlx5_0\n  provider mlx5  vendor 0x02c9"),
        "{text}"
    );
    assert!(text.contains("GID[  3] RoCE v2  ::ffff:"), "{text}");
}

#[test]
fn gda_rdma_devices_keeps_the_named_ones() {
    // The names `gda devices --json` lists with GDA_RDMA_DEVICES set to `list`.
    let kept = |list: &str| -> Vec<String> {
        let (ok, out, _) = devices(&verbs_lib(), &[("GDA_RDMA_DEVICES", list)], true);
        assert!(ok, "{list}: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kept("gda_bnxt_0"), ["gda_bnxt_0"]);
    // The exclude form (as gda topo reads the variable): all but those named.
    assert_eq!(kept("^gda_mlx5_0"), ["gda_bnxt_0"]);
    // A malformed list is a clear error, not an empty list.
    let (ok, out, _) = devices(&verbs_lib(), &[("GDA_RDMA_DEVICES", "gda_mlx5_0:0")], true);
    assert!(!ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["discover_error"],
        "GDA_RDMA_DEVICES: \"gda_mlx5_0:0\": port \"0\" is not 1..=255"
    );
}

#[test]
fn missing_or_wrong_library_is_reported_and_the_software_nic_remains() {
    let mut cases = 0;
    for (lib, want) in [
        (
            "/nonexistent/libibverbs.so.1",
            "apt-get install libibverbs1",
        ),
        ("libm.so.6", "has no ibv_get_device_list"),
    ] {
        let (ok, out, err) = devices(Path::new(lib), &[], true);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(v["library_error"].as_str().unwrap().contains(want), "{out}");
        assert_eq!(v["devices"].as_array().unwrap().len(), 0);
        assert_eq!(v["software_nic"]["models"][1], "mlx5");
        cases += 1;
    }
    assert_eq!(cases, 2);
}

/// `gda perf --device`: the same measurements through rdma-core's ConnectX and Thor2 control
/// paths (on the verbs-compatible library here), for every operation; an unknown device is a
/// clear error.
#[test]
fn perf_runs_through_the_control_path_on_a_device() {
    let mut ran = 0;
    for (dev, label, op) in ["write", "read", "atomic", "send"].iter().flat_map(|op| {
        [
            ("gda_mlx5_0", "mlx5 (rdma-core)", *op),
            ("gda_bnxt_0", "bnxt (rdma-core + bnxt_re_dv)", *op),
        ]
    }) {
        let o = Command::new(env!("CARGO_BIN_EXE_gda"))
            .args([
                "perf",
                op,
                "--device",
                dev,
                "--sizes",
                "64",
                "--iters",
                "2000",
                "--lat-iters",
                "50",
                "--repeat",
                "1",
                "--json",
            ])
            .env("GDA_IBVERBS_LIB", verbs_lib())
            .output()
            .expect("run gda perf");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{dev} {op}: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert_eq!(v["provider"], label, "{v}");
        assert!(v["msg_rate_mps"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["lat_us_p50"].as_f64().unwrap() > 0.0, "{v}");
        ran += 1;
    }
    assert_eq!(ran, 8);
    let o = Command::new(env!("CARGO_BIN_EXE_gda"))
        .args(["perf", "write", "--device", "gda_nope_0", "--sizes", "8"])
        .env("GDA_IBVERBS_LIB", verbs_lib())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no RDMA device \"gda_nope_0\""));
}
