//! Compiles rdma-core's own `providers/mlx5/qp.c` (from the source tree vendored in the
//! `ibverbs-sys` crate) together with `csrc/harness.c` into a static library whose only exported
//! symbol is `ref_mlx5_post_send`. Nothing from rdma-core is copied into this repository: the
//! harness `#include`s `qp.c` from the crate source, and `csrc/gen_headers.sh` lays out the
//! headers rdma-core's own CMake build would generate. See `csrc/NOTES.md`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("failed to start {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed with {status}");
}

fn main() {
    // ibverbs-sys prints `cargo:include=<crate>/vendor/rdma-core/build/include`.
    let include =
        env::var("DEP_IBVERBS_INCLUDE").expect("ibverbs-sys did not report its include dir");
    let vendor = PathBuf::from(include)
        .parent()
        .and_then(|p| p.parent())
        .map(PathBuf::from)
        .expect("unexpected DEP_IBVERBS_INCLUDE layout");
    assert!(
        vendor.join("providers/mlx5/qp.c").exists(),
        "rdma-core source not found at {} (ibverbs-sys 0.3.2+55.0 vendors it)",
        vendor.display()
    );
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let gen_dir = out.join("gen");
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());

    println!("cargo:rerun-if-changed=csrc");
    run(Command::new("sh")
        .arg(here.join("csrc/gen_headers.sh"))
        .arg(&vendor)
        .arg(&gen_dir));

    let objects = cc::Build::new()
        .file(here.join("csrc/harness.c"))
        .file(here.join("csrc/stubs.c"))
        .include(&gen_dir)
        .flag(format!(
            "-iquote{}",
            vendor.join("providers/mlx5").display()
        ))
        .flag("-std=gnu11")
        .define("_GNU_SOURCE", None)
        .flag("-fno-strict-aliasing")
        .flag("-Wno-unused-function")
        .opt_level(2)
        .warnings(false)
        .compile_intermediates();

    // One relocatable object with every symbol but the entry point made local, so qp.c's
    // `mlx5_post_send`/`mlx5dv_*` and the aborting stubs can never interpose on a real libmlx5.
    let merged = out.join("mlx5ref.o");
    run(Command::new("ld")
        .arg("-r")
        .args(&objects)
        .arg("-o")
        .arg(&merged));
    run(Command::new("objcopy")
        .arg("--keep-global-symbol=ref_mlx5_post_send")
        .arg("--keep-global-symbol=ref_mlx5_post_loop")
        .arg("--keep-global-symbol=ref_mlx5dv_set_ctrl_seg")
        .arg("--keep-global-symbol=ref_mlx5dv_set_data_seg")
        .arg("--keep-global-symbol=ref_mlx5dv_cqe_fields")
        .arg("--keep-global-symbol=ref_mlx5_layout")
        .arg(&merged));
    let lib = out.join("libmlx5ref.a");
    let _ = std::fs::remove_file(&lib);
    run(Command::new("ar").arg("rcs").arg(&lib).arg(&merged));
    // The same for rdma-core's bnxt_re provider (verbs.c, db.c, memory.c), csrc/bnxt/.
    let bgen = out.join("bnxt-gen");
    run(Command::new("sh")
        .arg(here.join("csrc/bnxt/gen_headers.sh"))
        .arg(&vendor)
        .arg(&bgen));
    let bobjects = cc::Build::new()
        .file(here.join("csrc/bnxt/harness.c"))
        .file(here.join("csrc/bnxt/stubs.c"))
        .include(&bgen)
        .flag(format!(
            "-iquote{}",
            vendor.join("providers/bnxt_re").display()
        ))
        .flag(format!("-iquote{}", here.join("csrc/bnxt").display()))
        .flag("-std=gnu11")
        .define("_GNU_SOURCE", None)
        .flag("-fno-strict-aliasing")
        .flag("-Wno-unused-function")
        .opt_level(2)
        .warnings(false)
        .out_dir(out.join("bnxt-obj"))
        .compile_intermediates();
    let bmerged = out.join("bnxtref.o");
    run(Command::new("ld")
        .arg("-r")
        .args(&bobjects)
        .arg("-o")
        .arg(&bmerged));
    let mut oc = Command::new("objcopy");
    for sym in [
        "bref_post_send",
        "bref_post_send_n",
        "bref_post_recv",
        "bref_poll_cq",
        "bref_db",
        "bref_geometry",
    ] {
        oc.arg(format!("--keep-global-symbol={sym}"));
    }
    run(oc.arg(&bmerged));
    let blib = out.join("libbnxtref.a");
    let _ = std::fs::remove_file(&blib);
    run(Command::new("ar").arg("rcs").arg(&blib).arg(&bmerged));

    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=mlx5ref");
    println!("cargo:rustc-link-lib=static=bnxtref");
    println!("cargo:rustc-link-lib=pthread");
}
