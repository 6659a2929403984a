//! GPU memory on a machine without a GPU (CI): the HIP runtime loads (Debian's libamdhip64),
//! and every way to get GPU memory says clearly that there is no GPU and what to check — no
//! crash, no hang. On a machine with a GPU these become the `#[ignore]`d hardware checks.

use std::sync::Arc;

use gda_hip::{DeviceBuffer, GpuQueueMemory, Hip, HipError, IpcHandle};

fn has_gpu_node() -> bool {
    std::path::Path::new("/dev/kfd").exists()
}

fn hip() -> Arc<Hip> {
    Hip::load().unwrap_or_else(|e| panic!("the HIP runtime should load here: {e}"))
}

#[test]
fn without_a_gpu_every_request_is_a_clear_no_gpu_error() {
    if has_gpu_node() {
        eprintln!("/dev/kfd exists: this machine may have a GPU; see the hardware tests");
        return;
    }
    let hip = hip();
    assert!(hip.version().unwrap() > 0);
    let mut refused = 0;
    let errors: [(&str, HipError); 3] = [
        ("gpus", hip.gpus().unwrap_err()),
        (
            "DeviceBuffer::new",
            DeviceBuffer::new(&hip, 4096).unwrap_err(),
        ),
        (
            "GpuQueueMemory::new",
            GpuQueueMemory::new(&hip).unwrap_err(),
        ),
    ];
    for (what, e) in errors {
        assert!(matches!(e, HipError::NoGpu { .. }), "{what}: {e:?}");
        let msg = e.to_string();
        for want in ["no AMD GPU is visible", "/dev/kfd", "HIP_VISIBLE_DEVICES"] {
            assert!(msg.contains(want), "{what}: {want:?} missing from {msg}");
        }
        assert_eq!(gda_hal::Error::kind(&e), gda_hal::ErrorKind::NoDevice);
        refused += 1;
    }
    assert_eq!(refused, 3);
}

#[test]
fn zero_sized_buffers_and_bad_ipc_handles_are_refused_before_hip() {
    let hip = hip();
    assert!(matches!(
        DeviceBuffer::new(&hip, 0).unwrap_err(),
        HipError::Invalid(_)
    ));
    let e = IpcHandle::from_bytes(&[0u8; 10]).unwrap_err();
    assert!(e.to_string().contains("72 bytes, not 10"), "{e}");
    let e = IpcHandle::from_bytes(&[0u8; 72]).unwrap_err();
    assert!(e.to_string().contains("0-byte allocation"), "{e}");
    let h = IpcHandle {
        bytes: [7; 64],
        len: 1 << 20,
    };
    assert_eq!(IpcHandle::from_bytes(&h.to_bytes()).unwrap(), h);
}

/// A missing runtime library is a clear error naming it and what to install (in a child
/// process: `GDA_HIP_LIB` is process-wide).
#[test]
fn a_missing_hip_runtime_is_a_clear_error() {
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "load_probe", "--ignored", "--nocapture"])
        .env("GDA_HIP_LIB", "/nonexistent/libamdhip64.so")
        .env("GDA_TEST_HIP_PROBE", "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with("probe: "))
        .unwrap_or_else(|| panic!("{out}"));
    for want in [
        "/nonexistent/libamdhip64.so",
        "apt-get install libamdhip64-5",
        "GDA_HIP_LIB",
    ] {
        assert!(line.contains(want), "{want:?} missing from {line}");
    }
    // And a library that is not HIP: the missing entry point is named.
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "load_probe", "--ignored", "--nocapture"])
        .env("GDA_HIP_LIB", "libc.so.6")
        .env("GDA_TEST_HIP_PROBE", "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("libc.so.6 has no hipGetDeviceCount"), "{out}");
}

/// Run by `a_missing_hip_runtime_is_a_clear_error` in a child process; without
/// `GDA_TEST_HIP_PROBE` it does nothing.
#[test]
#[ignore = "a helper the missing-runtime test runs in a child process"]
fn load_probe() {
    if std::env::var_os("GDA_TEST_HIP_PROBE").is_none() {
        return;
    }
    match Hip::load() {
        Ok(_) => println!("probe: loaded"),
        Err(e) => println!("probe: {e}"),
    }
}

/// On a machine with an AMD GPU: `GDA_HW_GPU=1 cargo test -p gda-hip --test no_gpu -- --ignored
/// gpu_memory`. Device memory round-trips, exports an IPC handle, describes itself for NIC
/// registration, and queue memory comes from it.
#[test]
#[ignore = "needs an AMD GPU: set GDA_HW_GPU=1"]
fn gpu_memory_roundtrip_ipc_and_registration() {
    if std::env::var_os("GDA_HW_GPU").is_none() {
        return;
    }
    let hip = hip();
    let gpus = hip.gpus().unwrap_or_else(|e| panic!("{e}"));
    assert!(!gpus.is_empty());
    let b = DeviceBuffer::new(&hip, 1 << 20).unwrap();
    b.write(100, b"device memory").unwrap();
    let mut back = [0u8; 13];
    b.read(100, &mut back).unwrap();
    assert_eq!(&back, b"device memory");
    let h = b.ipc_handle().unwrap();
    assert_eq!(IpcHandle::from_bytes(&h.to_bytes()).unwrap(), h);
    let nic = b.nic_memory().unwrap();
    assert_eq!(nic.desc().len(), 1 << 20);
    let q = GpuQueueMemory::new(&hip).unwrap();
    let p = gda_hal::control::QueueAllocator::alloc(
        &q,
        gda_hal::control::QueueBuffer::CompletionQueue,
        8192,
        4096,
    )
    .unwrap();
    // SAFETY: allocated just above with these arguments.
    unsafe {
        gda_hal::control::QueueAllocator::free(
            &q,
            gda_hal::control::QueueBuffer::CompletionQueue,
            p,
            8192,
        )
    };
}
