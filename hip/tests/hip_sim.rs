//! gda-hip's GPU-memory paths run against the HIP stand-in on host memory (`gda-hip-sim`,
//! `target/<profile>/hip-sim/libamdhip64.so.5`): what `no_gpu.rs` can only check as "no GPU"
//! here runs for real — allocation, copies, IPC handles opened as a peer opens them, NIC
//! registration, queue memory, the doorbell mapping — and HIP's refusals reach the caller as
//! clear errors.

use std::path::PathBuf;
use std::sync::Arc;

use gda_hal::control::{MemoryDesc, QueueAllocator, QueueBuffer};
use gda_hip::{
    DeviceBuffer, DoorbellMapping, GpuQueueMemory, Hip, HipError, IpcMapping, NicMemory,
};

/// `target/<profile>/hip-sim/libamdhip64.so.5` (the test binary is in `target/<profile>/deps`).
fn sim_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("hip-sim/libamdhip64.so.5")
}

fn hip() -> Arc<Hip> {
    Hip::load_from(sim_lib().to_str().unwrap()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn device_memory_round_trips_and_exports_an_ipc_handle_a_peer_opens() {
    let hip = hip();
    let gpus = hip.gpus().unwrap();
    assert_eq!(gpus.len(), 1, "{gpus:?}");
    assert_eq!(gpus[0].pci, "0000:c1:00.0");
    hip.set_device(0).unwrap();
    assert!(
        !hip.has_dmabuf_export(),
        "the stand-in has no ROCr dma-buf export"
    );

    let b = DeviceBuffer::new(&hip, 1 << 20).unwrap();
    let mut zero = [1u8; 64];
    b.read(4096, &mut zero).unwrap();
    assert_eq!(zero, [0; 64], "new device memory is zeroed");
    b.write(100, b"device memory").unwrap();
    let mut back = [0u8; 13];
    b.read(100, &mut back).unwrap();
    assert_eq!(&back, b"device memory");
    let e = b.write((1 << 20) - 4, b"too long").unwrap_err();
    assert!(
        e.to_string().contains("leaves the 1048576-byte buffer"),
        "{e}"
    );

    // A peer opens the handle (here a second mapping in this process, as another process
    // would map it) and sees the same bytes both ways.
    let h = b.ipc_handle().unwrap();
    assert_eq!(h.len, 1 << 20);
    let peer = IpcMapping::open(
        &hip,
        &gda_hip::IpcHandle::from_bytes(&h.to_bytes()).unwrap(),
    )
    .unwrap();
    assert_eq!(peer.len(), 1 << 20);
    // SAFETY: both are 1 MiB mappings of one allocation.
    unsafe {
        assert_eq!(
            std::slice::from_raw_parts(peer.as_ptr().add(100), 13),
            b"device memory"
        );
        peer.as_ptr().add(200).write(9);
    }
    let mut nine = [0u8];
    b.read(200, &mut nine).unwrap();
    assert_eq!(nine, [9]);

    // A handle of nothing this library made is HIP's "invalid resource handle".
    let junk = gda_hip::IpcHandle {
        bytes: [7; 64],
        len: 4096,
    };
    match IpcMapping::open(&hip, &junk) {
        Err(HipError::Call { call, code, .. }) => {
            assert_eq!((call, code), ("hipIpcOpenMemHandle", 400));
        }
        other => panic!("{:?}", other.map(|m| m.len())),
    }

    // Without ROCr's dma-buf export, registration falls back to the device address.
    match b.nic_memory().unwrap() {
        NicMemory::PeerMemory { addr, len } => {
            assert_eq!((addr, len), (b.as_ptr(), 1 << 20));
        }
        other => panic!("{other:?}"),
    }
    let nic = b.nic_memory().unwrap();
    assert!(matches!(
        nic.desc(),
        MemoryDesc::Host { len: 1_048_576, .. }
    ));
}

#[test]
fn queue_memory_and_the_doorbell_mapping() {
    let hip = hip();
    let q = GpuQueueMemory::new(&hip).unwrap();
    let mut blocks = Vec::new();
    for (what, len) in [
        (QueueBuffer::CompletionQueue, 8192),
        (QueueBuffer::SendQueue, 65536),
        (QueueBuffer::DoorbellRecord, 64),
    ] {
        let p = q.alloc(what, len, 4096).expect("device memory for a ring");
        assert_eq!(p.as_ptr() as usize % 4096, 0, "{what:?} is page-aligned");
        // SAFETY: `len` bytes just allocated.
        unsafe { std::ptr::write_bytes(p.as_ptr(), 0xA5, len) };
        blocks.push((what, p, len));
    }
    assert!(
        q.alloc(QueueBuffer::SendQueue, 4096, 8192).is_none(),
        "8 KiB alignment is refused"
    );
    for (what, p, len) in blocks {
        // SAFETY: allocated above with these arguments.
        unsafe { q.free(what, p, len) };
    }

    // The doorbell page mapped for the device; mapping it twice is HIP's refusal.
    let mut page = vec![0u8; 3 * 4096];
    let db = (page.as_mut_ptr() as u64).next_multiple_of(4096) + 0x800;
    // SAFETY: `db` lies in `page`, which outlives the mapping.
    let m = unsafe { DoorbellMapping::new(&hip, db) }.unwrap();
    assert_eq!(
        m.device_ptr() as u64,
        db,
        "host-memory device: same address, same offset"
    );
    // SAFETY: as above.
    let e = unsafe { DoorbellMapping::new(&hip, db) }.unwrap_err();
    assert!(e.to_string().contains("hipHostRegister"), "{e}");
    drop(m);
    // SAFETY: as above; unregistered by the drop, so it maps again.
    drop(unsafe { DoorbellMapping::new(&hip, db) }.unwrap());
}

#[test]
fn queue_memory_maps_a_shared_doorbell_page_once_for_all_its_queues() {
    let hip = hip();
    let q = GpuQueueMemory::new(&hip).unwrap();
    let mut page = vec![0u8; 3 * 4096];
    let base = (page.as_mut_ptr() as u64).next_multiple_of(4096);
    // Two queues' doorbells on one page (as mlx5 UAR registers are): one registration.
    let a = q.map_doorbell(base + 0x800).unwrap();
    let b = q.map_doorbell(base + 0x900).unwrap();
    assert_eq!((a, b), (base + 0x800, base + 0x900));
    assert!(hip.device_address_of_host(base).is_ok());
    // SAFETY: mapped above, unused after this.
    unsafe { q.unmap_doorbell(base + 0x800) };
    assert!(hip.device_address_of_host(base).is_ok(), "one user left");
    // SAFETY: as above.
    unsafe { q.unmap_doorbell(base + 0x900) };
    assert!(
        hip.device_address_of_host(base).is_err(),
        "the last user unregisters the page"
    );
    // The posting-protocol state and contexts are device memory too.
    let s = q.alloc(QueueBuffer::SendState, 80, 8).unwrap();
    assert!(q.owns(s.as_ptr()));
    // SAFETY: allocated above.
    unsafe { q.free(QueueBuffer::SendState, s, 80) };
    assert!(!q.owns(s.as_ptr()));
}

#[test]
fn host_mappings_share_pages_and_unregister_with_their_last_user() {
    let hip = hip();
    let mut mem = vec![0u8; 8 * 4096];
    let base = (mem.as_mut_ptr() as u64).next_multiple_of(4096);
    // Overlapping and touching ranges of one mapping merge into one registration; a second
    // mapping overlapping the first, and reaching past it, registers only what is new.
    // SAFETY: every range lies in `mem`, which outlives both mappings.
    let m1 = unsafe {
        gda_hip::HostMapping::new(
            &hip,
            &[(base + 10, 100), (base + 50, 4096), (base + 4096, 8)],
        )
    }
    .unwrap();
    // SAFETY: as above.
    let m2 = unsafe { gda_hip::HostMapping::new(&hip, &[(base + 4096, 3 * 4096)]) }.unwrap();
    for p in [base, base + 4096, base + 3 * 4096 + 5] {
        assert_eq!(hip.device_address_of_host(p).unwrap(), p, "{p:#x}");
    }
    drop(m1);
    assert!(
        hip.device_address_of_host(base + 4096).is_ok(),
        "m2 still uses the first registration"
    );
    drop(m2);
    for p in [base, base + 4096, base + 3 * 4096] {
        assert!(
            hip.device_address_of_host(p).is_err(),
            "{p:#x} still registered"
        );
    }
    // A page registered by someone else (HIP refuses the overlap) is a clear error.
    let other = base + 6 * 4096;
    // SAFETY: a page of `mem`.
    let d = unsafe { DoorbellMapping::new(&hip, other) }.unwrap();
    // SAFETY: as above.
    let e = unsafe { gda_hip::HostMapping::new(&hip, &[(other, 64)]) }.unwrap_err();
    assert!(e.to_string().contains("hipHostRegister"), "{e}");
    drop(d);
}

/// NVIDIA's runtime (here the stand-in's `cuda*` entry points): the GPU is found and named
/// through `cudaGetDeviceProperties_v2`, host memory is mapped at the same addresses, and a
/// GPU heap or device-memory rings are refused up front with what to use instead (CUDA's
/// device memory is not host-addressable, so the software NIC could not read such rings).
#[test]
fn the_cuda_runtime_maps_host_memory_and_refuses_device_memory() {
    let cuda = Hip::load_cuda_from(sim_lib().to_str().unwrap()).unwrap();
    assert_eq!(cuda.runtime(), gda_hip::Runtime::Cuda);
    let gpus = cuda.gpus().unwrap();
    assert_eq!(gpus.len(), 1, "{gpus:?}");
    assert_eq!(gpus[0].name, "gda cuda-sim GPU (host memory)");
    assert_eq!(gpus[0].pci, "0000:c1:00.0");
    assert_eq!(cuda.version().unwrap(), 13_000);
    assert!(!cuda.has_dmabuf_export());

    let mut mem = vec![0u8; 4 * 4096];
    let base = (mem.as_mut_ptr() as u64).next_multiple_of(4096);
    // SAFETY: the range lies in `mem`, which outlives the mapping.
    let m = unsafe { gda_hip::HostMapping::new(&cuda, &[(base + 8, 4096)]) }.unwrap();
    assert_eq!(cuda.device_address_of_host(base + 8).unwrap(), base + 8);
    drop(m);
    let e = cuda.device_address_of_host(base + 8).unwrap_err();
    assert!(e.to_string().contains("cudaHostGetDevicePointer"), "{e}");

    for (what, e) in [
        ("DeviceBuffer", DeviceBuffer::new(&cuda, 4096).unwrap_err()),
        ("GpuQueueMemory", GpuQueueMemory::new(&cuda).unwrap_err()),
    ] {
        assert!(matches!(e, HipError::Unsupported(_)), "{what}: {e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("NVIDIA") && msg.contains("GDA_SHMEM_HEAP=host"),
            "{what}: {msg}"
        );
    }

    // With no GPU, the error names NVIDIA's driver and what to check.
    let e = {
        // SAFETY: read by the stand-in at each call; tests of this binary do not race on it
        // (nextest runs each test in its own process).
        unsafe { std::env::set_var("GDA_HIPSIM_GPUS", "0") };
        let e = cuda.gpus().unwrap_err();
        // SAFETY: as above.
        unsafe { std::env::remove_var("GDA_HIPSIM_GPUS") };
        e
    };
    let msg = e.to_string();
    for want in [
        "no NVIDIA GPU is visible",
        "cudaGetDeviceCount",
        "CUDA_VISIBLE_DEVICES",
    ] {
        assert!(msg.contains(want), "{msg}");
    }
}
