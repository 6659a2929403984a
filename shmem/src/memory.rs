//! Where a PE's symmetric segment lives: host shared memory (the default) or GPU memory.
//!
//! The segment is one block per PE — the user heap, the team areas and the RDMA staging
//! buffer — and every route reaches a peer's segment at the same offsets. Two placements:
//!
//! | placement | this PE's segment | a same-host peer maps it by | the NIC registers |
//! |---|---|---|---|
//! | `host` | a POSIX shared-memory object (`gda_os::shm`) | its name | the object (`MemoryDesc::SharedHost`) |
//! | `gpu` (feature `hip`) | fine-grained device memory (`gda_hip::DeviceBuffer`) | its IPC handle (`hipIpcOpenMemHandle`), or, for a thread PE of this very process, the allocation itself | a dma-buf when ROCm exports one, else the device address (peer memory) |
//!
//! Fine-grained device memory is coherent and host-accessible (the host maps it through the
//! PCIe BAR), so the CPU-side routines of a PE — loads, stores and CPU atomics of the P2P
//! transport, the staging copies of the RDMA transport — work on it unchanged; GPU kernels use
//! the same addresses. Every PE of a job must use the same placement (checked at init).

use gda_hal::control::MemoryDesc;
use gda_os::shm::Segment;

use crate::error::{Result, ShmemError};

/// Where the symmetric heap lives (`GDA_SHMEM_HEAP`, `gda shmem --heap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeapPlacement {
    /// Host shared memory (POSIX shm), mapped by same-host peers.
    #[default]
    Host,
    /// Fine-grained GPU memory through HIP (the `hip` feature), shared with same-host peers by
    /// IPC handles and registered with the NIC as GPU memory.
    Gpu,
}

impl HeapPlacement {
    /// The wire value exchanged at init.
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Host => 0,
            Self::Gpu => 1,
        }
    }

    pub(crate) fn from_code(c: u8) -> Result<Self> {
        match c {
            0 => Ok(Self::Host),
            1 => Ok(Self::Gpu),
            o => Err(ShmemError::Boot(format!("unknown heap placement {o}"))),
        }
    }
}

impl std::fmt::Display for HeapPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Host => "host",
            Self::Gpu => "gpu",
        })
    }
}

impl std::str::FromStr for HeapPlacement {
    type Err = ShmemError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "" | "host" => Ok(Self::Host),
            "gpu" => Ok(Self::Gpu),
            o => Err(ShmemError::Config(format!(
                "GDA_SHMEM_HEAP={o:?}: expected host or gpu"
            ))),
        }
    }
}

/// This PE's segment.
pub(crate) enum LocalSeg {
    Host(Segment),
    #[cfg(feature = "hip")]
    Gpu(gpu::GpuSeg),
}

/// A same-host peer's segment, mapped here.
pub(crate) enum PeerSeg {
    Host(Segment),
    #[cfg(feature = "hip")]
    Gpu(gpu::GpuPeer),
}

impl LocalSeg {
    /// PE `me`'s segment of `len` bytes (zeroed) in job `job`; `gpu` picks the GPU of a GPU
    /// heap (default: `local_rank`, the PE's rank on its node, modulo the GPUs this process
    /// sees).
    pub(crate) fn create(
        placement: HeapPlacement,
        names: &gda_os::shm::JobNames,
        me: u32,
        len: usize,
        gpu: Option<u32>,
        local_rank: u32,
    ) -> Result<Self> {
        match placement {
            HeapPlacement::Host => Segment::create_aligned(
                names.job(),
                &names.what(&format!("heap{me}")),
                len,
                crate::heap::MAX_ALIGN,
            )
            .map(Self::Host)
            .map_err(|e| ShmemError::io(format!("PE {me}: symmetric heap of {len} bytes"), e)),
            #[cfg(feature = "hip")]
            HeapPlacement::Gpu => {
                gpu::GpuSeg::create(names.job(), me, len, gpu, local_rank).map(Self::Gpu)
            }
            #[cfg(not(feature = "hip"))]
            HeapPlacement::Gpu => {
                let _ = (gpu, local_rank);
                Err(ShmemError::Config(
                    "GDA_SHMEM_HEAP=gpu needs a gda built with the `hip` feature \
                     (cargo build --release --features hip)"
                        .into(),
                ))
            }
        }
    }

    pub(crate) fn placement(&self) -> HeapPlacement {
        match self {
            Self::Host(_) => HeapPlacement::Host,
            #[cfg(feature = "hip")]
            Self::Gpu(_) => HeapPlacement::Gpu,
        }
    }

    /// First byte in this address space.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match self {
            Self::Host(s) => s.as_ptr(),
            #[cfg(feature = "hip")]
            Self::Gpu(g) => g.as_ptr(),
        }
    }

    /// What a peer needs besides the job and rank to map it: nothing for a host segment (the
    /// name follows from them), the IPC handle of a GPU one.
    pub(crate) fn share(&self) -> Result<Vec<u8>> {
        match self {
            Self::Host(_) => Ok(Vec::new()),
            #[cfg(feature = "hip")]
            Self::Gpu(g) => g.share(),
        }
    }

    /// Maps PE `j`'s segment of `len` bytes, which it described by `shared`; `same_process`
    /// when `j` is a thread PE of this process.
    pub(crate) fn open_peer(
        &self,
        names: &gda_os::shm::JobNames,
        j: u32,
        len: usize,
        shared: &[u8],
        same_process: bool,
    ) -> Result<PeerSeg> {
        match self {
            Self::Host(_) => {
                let _ = (shared, same_process);
                // Mapped by name, also a thread PE's of this very process (a second mapping of
                // the same pages): an address a peer sent is never dereferenced here.
                Segment::open(names.job(), &names.what(&format!("heap{j}")), len)
                    .map(PeerSeg::Host)
                    .map_err(|e| ShmemError::io(format!("mapping PE {j}'s heap"), e))
            }
            #[cfg(feature = "hip")]
            Self::Gpu(g) => g
                .open_peer(names.job(), j, len, shared, same_process)
                .map(PeerSeg::Gpu),
        }
    }

    /// Where the RDMA queues of a PE with this heap live, and the state device code shares
    /// with the host (the posting-protocol state, the device context): GPU memory for a GPU
    /// heap, so a kernel reaches all of it as it reaches the heap; the provider's host memory
    /// otherwise.
    pub(crate) fn queue_memory(&self) -> Result<gda_hal::control::QueueMemory> {
        match self {
            Self::Host(_) => Ok(gda_hal::control::QueueMemory::Provider),
            #[cfg(feature = "hip")]
            Self::Gpu(g) => g.queue_memory(),
        }
    }

    /// The description a NIC registers (kept valid while `self` lives).
    pub(crate) fn nic_desc(&mut self) -> Result<MemoryDesc<'_>> {
        match self {
            Self::Host(s) => Ok(MemoryDesc::SharedHost {
                addr: s.as_ptr(),
                len: s.len(),
                object: s.name(),
                offset: 0,
                object_len: s.len(),
            }),
            #[cfg(feature = "hip")]
            Self::Gpu(g) => g.nic_desc(),
        }
    }

    /// Removes what lets new processes map it (a host segment's name), once every peer has.
    pub(crate) fn unlink(&self) -> Result<()> {
        match self {
            Self::Host(s) => s
                .unlink()
                .map_err(|e| ShmemError::io("removing the heap's name", e)),
            #[cfg(feature = "hip")]
            Self::Gpu(_) => Ok(()),
        }
    }
}

impl PeerSeg {
    /// First byte in this address space.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match self {
            Self::Host(s) => s.as_ptr(),
            #[cfg(feature = "hip")]
            Self::Gpu(g) => g.as_ptr(),
        }
    }
}

/// Maps host memory of this process (`(address, bytes)` ranges) for the GPU when this process
/// has one (`hip` feature): `Ok(None)` without HIP or without a GPU, where CPU threads are
/// the only device code.
///
/// # Safety
/// Every range stays mapped until the returned mapping is dropped.
#[cfg(feature = "hip")]
pub(crate) unsafe fn map_host_for_gpu(
    ranges: &[(u64, usize)],
) -> Result<Option<gda_hip::HostMapping>> {
    let Ok(hip) = gda_hip::Hip::load() else {
        return Ok(None);
    };
    if hip.gpus().map_or(true, |g| g.is_empty()) {
        return Ok(None);
    }
    // SAFETY: forwarded from the caller.
    unsafe { gda_hip::HostMapping::new(&hip, ranges) }
        .map(Some)
        .map_err(|e| ShmemError::Gpu {
            kind: gda_hal::Error::kind(&e),
            what: format!("mapping the device context's host memory for the GPU: {e}"),
        })
}

#[cfg(feature = "hip")]
mod gpu {
    //! The GPU placement: one fine-grained allocation per PE.

    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use gda_hal::control::MemoryDesc;
    use gda_hip::{DeviceBuffer, Hip, HipError, IpcHandle, IpcMapping, NicMemory};

    use crate::error::{Result, ShmemError};

    fn gpu_err(what: String, e: &HipError) -> ShmemError {
        ShmemError::Gpu {
            kind: gda_hal::Error::kind(e),
            what: format!("{what}: {e}"),
        }
    }

    /// The GPU heaps of this process's PEs by (job, rank).
    type LocalHeaps = Mutex<HashMap<(String, u32), Arc<DeviceBuffer>>>;

    /// A thread PE reaches another's GPU heap here, since HIP opens no IPC handle of the
    /// process that made it.
    fn local_heaps() -> &'static LocalHeaps {
        static HEAPS: std::sync::OnceLock<LocalHeaps> = std::sync::OnceLock::new();
        HEAPS.get_or_init(Default::default)
    }

    pub(crate) struct GpuSeg {
        hip: Arc<Hip>,
        buf: Arc<DeviceBuffer>,
        key: (String, u32),
        /// The registration form, made when the NIC first asks (a dma-buf fd stays open
        /// until the segment goes, after the region).
        nic: Option<NicMemory>,
    }

    impl GpuSeg {
        pub(crate) fn create(
            job: &str,
            me: u32,
            len: usize,
            gpu: Option<u32>,
            local_rank: u32,
        ) -> Result<Self> {
            let hip = Hip::load().map_err(|e| gpu_err(format!("PE {me}: GPU heap"), &e))?;
            let gpus = hip
                .gpus()
                .map_err(|e| gpu_err(format!("PE {me}: GPU heap"), &e))?;
            let index = match gpu {
                Some(g) if (g as usize) < gpus.len() => g,
                Some(g) => {
                    return Err(ShmemError::Config(format!(
                        "GDA_SHMEM_GPU={g}, but this process sees {} GPU(s)",
                        gpus.len()
                    )));
                }
                None => local_rank % gpus.len() as u32,
            };
            hip.set_device(index)
                .map_err(|e| gpu_err(format!("PE {me}: GPU {index}"), &e))?;
            let buf = DeviceBuffer::new(&hip, len).map_err(|e| {
                gpu_err(
                    format!("PE {me}: GPU heap of {len} bytes on GPU {index}"),
                    &e,
                )
            })?;
            let buf = Arc::new(buf);
            let key = (job.to_owned(), me);
            local_heaps()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone(), buf.clone());
            Ok(Self {
                hip,
                buf,
                key,
                nic: None,
            })
        }

        pub(crate) fn as_ptr(&self) -> *mut u8 {
            self.buf.as_ptr()
        }

        pub(crate) fn queue_memory(&self) -> Result<gda_hal::control::QueueMemory> {
            let q = gda_hip::GpuQueueMemory::new(&self.hip)
                .map_err(|e| gpu_err("queue memory on the heap's GPU".into(), &e))?;
            Ok(gda_hal::control::QueueMemory::Caller(Arc::new(q)))
        }

        pub(crate) fn share(&self) -> Result<Vec<u8>> {
            let h = self
                .buf
                .ipc_handle()
                .map_err(|e| gpu_err("the GPU heap's IPC handle".into(), &e))?;
            Ok(h.to_bytes().to_vec())
        }

        pub(crate) fn open_peer(
            &self,
            job: &str,
            j: u32,
            len: usize,
            shared: &[u8],
            same_process: bool,
        ) -> Result<GpuPeer> {
            if same_process {
                let heaps = local_heaps().lock().unwrap_or_else(|e| e.into_inner());
                let buf = heaps.get(&(job.to_owned(), j)).cloned().ok_or_else(|| {
                    ShmemError::Boot(format!(
                        "PE {j} says it runs in this process, but this process has no GPU heap \
                         of PE {j} in job {job}"
                    ))
                })?;
                if buf.len() < len {
                    return Err(ShmemError::Boot(format!(
                        "PE {j}'s GPU heap has {} bytes, expected {len}",
                        buf.len()
                    )));
                }
                return Ok(GpuPeer::SameProcess(buf));
            }
            let h = IpcHandle::from_bytes(shared)
                .map_err(|e| gpu_err(format!("PE {j}'s GPU heap handle"), &e))?;
            if h.len < len as u64 {
                return Err(ShmemError::Boot(format!(
                    "PE {j}'s GPU heap has {} bytes, expected {len}",
                    h.len
                )));
            }
            IpcMapping::open(&self.hip, &h)
                .map(GpuPeer::Ipc)
                .map_err(|e| gpu_err(format!("mapping PE {j}'s GPU heap"), &e))
        }

        pub(crate) fn nic_desc(&mut self) -> Result<MemoryDesc<'_>> {
            if self.nic.is_none() {
                let m = self
                    .buf
                    .nic_memory()
                    .map_err(|e| gpu_err("the GPU heap for the NIC".into(), &e))?;
                self.nic = Some(m);
            }
            match &self.nic {
                Some(m) => Ok(m.desc()),
                None => Err(ShmemError::Invalid("no NIC form of the GPU heap".into())),
            }
        }
    }

    impl Drop for GpuSeg {
        fn drop(&mut self) {
            local_heaps()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.key);
        }
    }

    /// A same-host peer's GPU heap.
    pub(crate) enum GpuPeer {
        /// Opened from its IPC handle.
        Ipc(IpcMapping),
        /// A thread PE of this process: its allocation, kept alive by this reference.
        SameProcess(Arc<DeviceBuffer>),
    }

    impl GpuPeer {
        pub(crate) fn as_ptr(&self) -> *mut u8 {
            match self {
                Self::Ipc(m) => m.as_ptr(),
                Self::SameProcess(b) => b.as_ptr(),
            }
        }
    }
}
