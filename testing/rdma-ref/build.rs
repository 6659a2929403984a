//! Compiles rdma-core's own `providers/mlx5/qp.c` (from the source tree vendored in the
//! `ibverbs-sys` crate) together with `csrc/harness.c` into a static library whose only exported
//! symbol is `ref_mlx5_post_send`. Nothing from rdma-core is copied into this repository: the
//! harness `#include`s `qp.c` from the crate source, and `csrc/gen_headers.sh` lays out the
//! headers rdma-core's own CMake build would generate. See `csrc/NOTES.md`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("failed to start {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed with {status}");
}

struct Paths<'a> {
    vendor: &'a Path,
    out: &'a Path,
    here: &'a Path,
}

impl Paths<'_> {
    /// Builds `lib<name>.a` from `<dir>/harness.c` + `<dir>/stubs.c` against the provider source
    /// in `<vendor>/<provider>`, with headers laid out by `<dir>/gen_headers.sh`. The result is
    /// one relocatable object with every symbol but `keep` made local, so the provider's own
    /// functions and the aborting stubs can never interpose on a real rdma-core library.
    fn harness(&self, name: &str, dir: &str, provider: &str, keep: &[&str]) {
        let src = self.here.join(dir);
        let gen_dir = self.out.join(format!("{name}-gen"));
        run(Command::new("sh")
            .arg(src.join("gen_headers.sh"))
            .arg(self.vendor)
            .arg(&gen_dir));
        let objects = cc::Build::new()
            .file(src.join("harness.c"))
            .file(src.join("stubs.c"))
            .include(&gen_dir)
            .flag(format!("-iquote{}", self.vendor.join(provider).display()))
            .flag(format!("-iquote{}", src.display()))
            .flag("-std=gnu11")
            .define("_GNU_SOURCE", None)
            .flag("-fno-strict-aliasing")
            .flag("-Wno-unused-function")
            .opt_level(2)
            .warnings(false)
            .out_dir(self.out.join(format!("{name}-obj")))
            .compile_intermediates();
        let merged = self.out.join(format!("{name}.o"));
        run(Command::new("ld")
            .arg("-r")
            .args(&objects)
            .arg("-o")
            .arg(&merged));
        let mut oc = Command::new("objcopy");
        for sym in keep {
            oc.arg(format!("--keep-global-symbol={sym}"));
        }
        run(oc.arg(&merged));
        let lib = self.out.join(format!("lib{name}.a"));
        let _ = std::fs::remove_file(&lib);
        run(Command::new("ar").arg("rcs").arg(&lib).arg(&merged));
    }
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
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());

    println!("cargo:rerun-if-changed=csrc");
    let paths = Paths {
        vendor: &vendor,
        out: &out,
        here: &here,
    };
    // rdma-core's mlx5 provider (qp.c), csrc/.
    paths.harness(
        "mlx5ref",
        "csrc",
        "providers/mlx5",
        &[
            "ref_mlx5_post_send",
            "ref_mlx5_post_loop",
            "ref_mlx5dv_set_ctrl_seg",
            "ref_mlx5dv_set_data_seg",
            "ref_mlx5dv_cqe_fields",
            "ref_mlx5_layout",
        ],
    );
    // rdma-core's bnxt_re provider (verbs.c, db.c, memory.c), csrc/bnxt/.
    paths.harness(
        "bnxtref",
        "csrc/bnxt",
        "providers/bnxt_re",
        &[
            "bref_post_send",
            "bref_post_send_n",
            "bref_post_recv",
            "bref_poll_cq",
            "bref_db",
            "bref_geometry",
        ],
    );

    // csrc/bnxt/test_main.c: the C-side checks of the bnxt harness (reference vectors, poll
    // behaviour, quirks), linked against the harness; tests/bnxt_c_checks.rs runs it.
    let exe = out.join("bnxt_test_main");
    let mut cc = cc::Build::new().opt_level(2).get_compiler().to_command();
    run(cc
        .arg("-std=gnu11")
        .arg("-Wall")
        .arg("-I")
        .arg(here.join("csrc/bnxt"))
        .arg(here.join("csrc/bnxt/test_main.c"))
        .arg(format!("-L{}", out.display()))
        .arg("-lbnxtref")
        .arg("-lpthread")
        .arg("-o")
        .arg(&exe));
    println!("cargo:rustc-env=GDA_BNXT_TEST_MAIN={}", exe.display());

    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=mlx5ref");
    println!("cargo:rustc-link-lib=static=bnxtref");
    println!("cargo:rustc-link-lib=pthread");
}
