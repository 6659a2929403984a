//! Compiles the device API's headers for the host (`shim/gda_device_shim.cpp`, C++17,
//! warnings as errors) into a static library behind a C ABI, which `src/lib.rs` binds.

fn main() {
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-changed=include");
    cc::Build::new()
        .cpp(true)
        .file("shim/gda_device_shim.cpp")
        .file("shim/bnxt_shim.cpp")
        .file("shim/shmem_shim.cpp")
        .include("include")
        .flag("-std=c++17")
        .flag("-Wall")
        .flag("-Wextra")
        .flag("-Werror")
        .opt_level(2)
        .compile("gdadevice");
}
