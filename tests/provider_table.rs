//! Every user of the vendor table (`gda-providers`, one line per vendor) sees every vendor of
//! it: a vendor added to the table and missed by one of them fails here.
//!
//! - `--provider` of the CLI (`ProviderName`) accepts exactly the table's names;
//! - `gda devices` lists the table's software-NIC models, and names each NIC rdma-core shows by
//!   the table's hardware vendor for its PCI id;
//! - the verbs-compatible library shows one device per hardware vendor of the table, each
//!   opened by `gda perf --device` with that vendor's control path;
//! - the C ABI's `GDA_SHMEM_PROVIDER` accepts each name and its error lists them all;
//! - the conformance suite has a module per name: `tests/conformance` generates them with
//!   `for_each_provider!`, whose expansion is checked here.
#![cfg(all(feature = "sim", feature = "verbs"))]

use std::path::{Path, PathBuf};
use std::process::Command;

use gda::providers::{HOST_NAMES, NAMES};

fn verbs_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("verbs-sim/libibverbs.so.1")
}

#[test]
fn the_cli_takes_exactly_the_table_names() {
    let cli: Vec<&str> = gda::provider::ProviderName::all()
        .iter()
        .map(|p| p.as_str())
        .collect();
    assert_eq!(cli, NAMES);
    macro_rules! names {
        ([$($name:ident => $p:ty),*]) => { [$(stringify!($name)),*] };
    }
    assert_eq!(gda::providers::for_each_provider!(names), NAMES);
    assert_eq!(gda::providers::for_each_host_provider!(names), HOST_NAMES);
}

#[test]
fn gda_devices_names_every_nic_by_the_table() {
    let o = Command::new(env!("CARGO_BIN_EXE_gda"))
        .args(["devices", "--json"])
        .env("GDA_IBVERBS_LIB", verbs_lib())
        .env_remove("GDA_RDMA_DEVICES")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let models: Vec<&str> = v["software_nic"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(models, NAMES);
    // The verbs-compatible library shows one NIC per hardware vendor of the table, in table
    // order, each named by the vendor its PCI id belongs to.
    let devs = v["devices"].as_array().unwrap();
    let providers: Vec<&str> = devs
        .iter()
        .map(|d| d["provider"].as_str().unwrap())
        .collect();
    assert_eq!(providers, HOST_NAMES);
    for d in devs {
        let id = u32::try_from(d["vendor_id"].as_u64().unwrap()).unwrap();
        assert_eq!(gda::providers::host_of(id), d["provider"].as_str(), "{d}");
    }
}

#[test]
fn each_hardware_vendor_opens_with_its_own_control_path() {
    let mut opened = 0;
    for (i, name) in HOST_NAMES.iter().enumerate() {
        let dev = format!("gda_{name}_0");
        let o = Command::new(env!("CARGO_BIN_EXE_gda"))
            .args(["perf", "write", "--device", &dev, "--sizes", "64"])
            .args([
                "--iters",
                "500",
                "--lat-iters",
                "20",
                "--repeat",
                "1",
                "--json",
            ])
            .env("GDA_IBVERBS_LIB", verbs_lib())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{dev}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let row: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert!(
            row["provider"].as_str().unwrap().starts_with(name),
            "{dev} ran as {}",
            row["provider"]
        );
        opened += 1;
        assert_eq!(opened, i + 1);
    }
    assert_eq!(opened, HOST_NAMES.len());
}

#[cfg(feature = "capi")]
#[test]
fn the_c_abi_takes_every_name_and_lists_them_when_refusing() {
    let lib = Path::new(env!("CARGO_BIN_EXE_gdacc"));
    let dir = std::env::temp_dir().join(format!("gda-provider-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("hello.c");
    std::fs::write(
        &src,
        "#include <shmem.h>\n#include <stdio.h>\nint main(void) { shmem_init(); \
         printf(\"pe %d of %d\\n\", shmem_my_pe(), shmem_n_pes()); shmem_finalize(); return 0; }\n",
    )
    .unwrap();
    let exe = dir.join("hello");
    let o = Command::new(lib)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = |provider: &str| {
        Command::new(env!("CARGO_BIN_EXE_gdarun"))
            .args(["-n", "2", "--grace", "5"])
            .arg(&exe)
            .env("GDA_SHMEM_TRANSPORT", "rdma")
            .env("GDA_SHMEM_PROVIDER", provider)
            .output()
            .unwrap()
    };
    for name in NAMES {
        let o = run(name);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.starts_with("pe "))
                .count(),
            2,
            "{name}"
        );
    }
    let o = run("rxe");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&NAMES.join(", ")), "{err}");
}
