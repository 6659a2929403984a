//! Lays out the C ABI beside the binaries of the build: `target/<profile>/libgdashmem.so` (a
//! link to the cdylib cargo writes to `deps/`) and `target/<profile>/gda-include/` (the
//! headers), which is where `gdacc` looks for them.

use std::path::{Path, PathBuf};

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::create_dir_all(to);
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            let _ = std::fs::copy(&p, to.join(e.file_name()));
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=include");
    println!("cargo:rerun-if-changed=../../device/include");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgdashmem.so");
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    // OUT_DIR is target/<profile>/build/<pkg>-<hash>/out.
    if let Some(profile_dir) = out.ancestors().nth(3) {
        copy_dir(&here.join("include"), &profile_dir.join("gda-include"));
        // The device API's headers (`#include <gda/shmem.hpp>`), for C++ and HIP/CUDA programs
        // that launch kernels with `shmemx_device_context()`.
        copy_dir(
            &here.join("../../device/include"),
            &profile_dir.join("gda-include"),
        );
        // For build systems: `PKG_CONFIG_PATH=target/<profile>/pkgconfig pkg-config --cflags
        // --libs gda-shmem`.
        let pc = format!(
            "prefix={dir}\nincludedir=${{prefix}}/gda-include\nlibdir=${{prefix}}\n\n\
             Name: gda-shmem\nDescription: OpenSHMEM on gda (libgdashmem)\nVersion: {ver}\n\
             Cflags: -I${{includedir}}\nLibs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lgdashmem\n",
            dir = profile_dir.display(),
            ver = std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        );
        let _ = std::fs::create_dir_all(profile_dir.join("pkgconfig"));
        let _ = std::fs::write(profile_dir.join("pkgconfig/gda-shmem.pc"), pc);
        let link = profile_dir.join("libgdashmem.so");
        let _ = std::fs::remove_file(&link);
        #[cfg(unix)]
        let _ = std::os::unix::fs::symlink("deps/libgdashmem.so", &link);
    }
}
