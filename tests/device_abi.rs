//! The SHMEM device context as the C++ compiler lays it out (`gda::shmem::Ctx` and `Peer` of
//! `device/include/gda/shmem.hpp`) and as Rust does (`gda_shmem::device::DeviceCtx`,
//! `DevicePeer`): the same size, the same offset for every field, the same ABI version.
#![cfg(feature = "device")]

use gda_shmem::device::{ABI_VERSION, DeviceCtx};

#[test]
fn the_device_context_has_one_layout() {
    let cpp = gda_device::shmem::layout();
    let mut rust: Vec<u64> = DeviceCtx::LAYOUT.iter().map(|&v| v as u64).collect();
    rust.push(u64::from(ABI_VERSION));
    assert_eq!(
        cpp.to_vec(),
        rust,
        "C++ (size, offsets, Peer size, ABI) vs Rust"
    );
}
