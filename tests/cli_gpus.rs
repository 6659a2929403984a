//! `gda gpus`: the GPU report. Without a GPU (CI) it says so, with what to check, and exits 1;
//! a gda built without the `hip` feature says how to build one that has it.

use std::process::Command;

#[test]
fn gpus_reports_the_missing_gpu_clearly() {
    let mut checked = 0;
    for json in [false, true] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gda"));
        c.arg("gpus");
        if json {
            c.arg("--json");
        }
        let o = c.output().expect("run gda gpus");
        let out = String::from_utf8_lossy(&o.stdout);
        if std::path::Path::new("/dev/kfd").exists() && cfg!(feature = "hip") {
            // A machine that may have a GPU: the report lists it or says why not.
            assert!(
                out.contains("HIP runtime") || out.contains("runtime"),
                "{out}"
            );
            checked += 1;
            continue;
        }
        assert_eq!(o.status.code(), Some(1), "{out}");
        let want = if cfg!(feature = "hip") {
            "no AMD GPU is visible"
        } else {
            "built without the `hip` feature"
        };
        assert!(out.contains(want), "{want:?} missing from {out}");
        if json {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["gpus"].as_array().map(Vec::len), Some(0), "{v}");
        }
        checked += 1;
    }
    assert_eq!(checked, 2);
}

/// The binary links neither HIP nor rdma-core (both are opened at run time), so it starts on
/// a machine without them: `readelf -d` lists no `libamdhip64`, `libhsa-runtime64`,
/// `libibverbs` or `libmlx5` among its NEEDED libraries, whatever features it was built with.
#[test]
fn the_binary_does_not_link_hip_or_rdma_core() {
    let o = Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_gda")])
        .output()
        .expect("readelf (binutils) runs");
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    let needed: Vec<&str> = out.lines().filter(|l| l.contains("(NEEDED)")).collect();
    assert!(needed.iter().any(|l| l.contains("libc.so")), "{out}");
    for lib in [
        "libamdhip64",
        "libhsa-runtime64",
        "libibverbs",
        "libmlx5",
        "libbnxt_re",
    ] {
        assert!(
            !needed.iter().any(|l| l.contains(lib)),
            "{lib} is linked: {needed:?}"
        );
    }
}
