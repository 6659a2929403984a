//! Lays out `target/<profile>/hip-sim/` with the names HIP is opened by (`libamdhip64.so.5`,
//! `libamdhip64.so`), each a link to this crate's cdylib, so `GDA_HIP_LIB` can name a HIP
//! runtime file as it would on a ROCm machine.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libamdhip64.so.5");
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    // OUT_DIR is target/<profile>/build/<pkg>-<hash>/out.
    if let Some(profile_dir) = out.ancestors().nth(3) {
        let dir = profile_dir.join("hip-sim");
        let _ = std::fs::create_dir_all(&dir);
        for name in ["libamdhip64.so.5", "libamdhip64.so"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            #[cfg(unix)]
            let _ = std::os::unix::fs::symlink("../deps/libgda_hip_sim.so", &link);
        }
    }
}
