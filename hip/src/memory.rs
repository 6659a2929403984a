//! Device memory, IPC handles, NIC registration and the doorbell mapping.

use std::ffi::{c_int, c_void};
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use gda_hal::control::{QueueAllocator, QueueBuffer};
use hip_sys::hiprt as rt;

use crate::runtime::{Hip, HipError};

/// Device memory of the current GPU: fine-grained (coherent with the host and the NIC, which
/// poll rings in it), freed on drop.
pub struct DeviceBuffer {
    hip: Arc<Hip>,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a device allocation; HIP's calls on it are thread-safe.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above; no interior state.
unsafe impl Sync for DeviceBuffer {}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:p}, {} bytes)", self.ptr, self.len)
    }
}

impl DeviceBuffer {
    /// `len` zeroed bytes of fine-grained device memory.
    pub fn new(hip: &Arc<Hip>, len: usize) -> Result<Self, HipError> {
        if len == 0 {
            return Err(HipError::Invalid("a device buffer of 0 bytes".into()));
        }
        let malloc = hip.fine_grained_malloc()?;
        let mut p = std::ptr::null_mut();
        // SAFETY: an output pointer; HIP checks the size.
        let r = unsafe { malloc(&mut p, len, rt::hipDeviceMallocFinegrained) };
        hip.check(
            "hipExtMallocWithFlags",
            r,
            format!(" ({len} bytes, fine-grained)"),
        )?;
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| HipError::Invalid("hipExtMallocWithFlags returned null".into()))?;
        let b = Self {
            hip: hip.clone(),
            ptr,
            len,
        };
        // SAFETY: the allocation just made.
        let r = unsafe { (hip.f.hipMemset)(p, 0, len) };
        hip.check("hipMemset", r, String::new())?;
        Ok(b)
    }

    /// The device address (also host-accessible for fine-grained memory on large-BAR systems).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never: a buffer has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` into the buffer at `off` (`hipMemcpy`).
    pub fn write(&self, off: usize, data: &[u8]) -> Result<(), HipError> {
        let at = self.range("write", off, data.len())?;
        // SAFETY: `at` is inside the allocation for `data.len()` bytes (`range`).
        unsafe { self.copy(at, data.as_ptr(), data.len()) }
    }

    /// Copies `out.len()` bytes at `off` out of the buffer.
    pub fn read(&self, off: usize, out: &mut [u8]) -> Result<(), HipError> {
        let at = self.range("read", off, out.len())?;
        // SAFETY: as in `write`, the other way.
        unsafe { self.copy(out.as_mut_ptr(), at, out.len()) }
    }

    /// The address of `[off, off + len)` after checking it lies in the buffer.
    fn range(&self, what: &str, off: usize, len: usize) -> Result<*mut u8, HipError> {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(HipError::Invalid(format!(
                "{what} of {len} bytes at {off} leaves the {}-byte buffer",
                self.len
            )));
        }
        Ok(self.ptr.as_ptr().wrapping_add(off))
    }

    /// `hipMemcpy` with the direction inferred (`hipMemcpyDefault`).
    ///
    /// # Safety
    /// `dst` and `src` are valid for `len` bytes.
    unsafe fn copy(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<(), HipError> {
        // SAFETY: the caller's ranges.
        let r = unsafe {
            (self.hip.f.hipMemcpy)(
                dst.cast(),
                src.cast(),
                len,
                rt::hipMemcpyKind::hipMemcpyDefault as c_int,
            )
        };
        self.hip.check("hipMemcpy", r, String::new())
    }

    /// A handle another process of this host opens with [`IpcMapping::open`] (the P2P
    /// transport's way to reach a peer's GPU memory).
    pub fn ipc_handle(&self) -> Result<IpcHandle, HipError> {
        // SAFETY: C data; zero is a valid handle value to overwrite.
        let mut h: rt::hipIpcMemHandle_t = unsafe { std::mem::zeroed() };
        // SAFETY: our allocation and an output handle.
        let r = unsafe { (self.hip.f.hipIpcGetMemHandle)(&mut h, self.ptr.as_ptr().cast()) };
        self.hip.check("hipIpcGetMemHandle", r, String::new())?;
        let mut bytes = [0u8; 64];
        for (b, c) in bytes.iter_mut().zip(h.reserved.iter()) {
            *b = *c as u8;
        }
        Ok(IpcHandle {
            bytes,
            len: self.len as u64,
        })
    }

    /// How to register this memory with a NIC: a dma-buf when ROCm can export one (5.6+),
    /// else the device address itself, which a kernel with AMD's peer-memory support
    /// (`amdgpu` + `ib_peer_mem`, or a kernel ≥ 6.2 with ODP-less dma-buf) pins through
    /// `ibv_reg_mr`. Registering the fallback without peer memory fails in `ibv_reg_mr`
    /// with `EFAULT`/`EINVAL`: load the peer-memory module or upgrade ROCm.
    pub fn nic_memory(&self) -> Result<NicMemory, HipError> {
        if let Some(export) = self.hip.f.export_dmabuf {
            let (mut fd, mut offset): (c_int, u64) = (-1, 0);
            // SAFETY: our allocation; output fd and offset.
            let r = unsafe { export(self.ptr.as_ptr().cast(), self.len, &mut fd, &mut offset) };
            if r == 0 && fd >= 0 {
                return Ok(NicMemory::DmaBuf {
                    // SAFETY: a new fd the runtime handed over.
                    fd: unsafe { OwnedFd::from_raw_fd(fd) },
                    offset,
                    len: self.len,
                    iova: self.ptr.as_ptr() as u64,
                });
            }
        }
        Ok(NicMemory::PeerMemory {
            addr: self.ptr.as_ptr(),
            len: self.len,
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: our allocation, unused after this.
        let r = unsafe { (self.hip.f.hipFree)(self.ptr.as_ptr().cast()) };
        if Hip::report_on_drop(r) {
            eprintln!("gda-hip: hipFree failed: {}", self.hip.words(r));
        }
    }
}

/// GPU memory as a NIC registers it.
#[derive(Debug)]
pub enum NicMemory {
    /// A dma-buf: `MemoryDesc::DmaBuf` (`ibv_reg_dmabuf_mr`).
    DmaBuf {
        /// The dma-buf (closed on drop; keep it until the region is deregistered).
        fd: OwnedFd,
        /// Offset of the buffer in it.
        offset: u64,
        /// Length.
        len: usize,
        /// The address device code and peers use.
        iova: u64,
    },
    /// The device address for peer-memory registration: `MemoryDesc::Host` (`ibv_reg_mr`).
    PeerMemory {
        /// Device address.
        addr: *mut u8,
        /// Length.
        len: usize,
    },
}

impl NicMemory {
    /// The description the control paths' `Device::register` takes.
    pub fn desc(&self) -> gda_hal::control::MemoryDesc<'_> {
        use std::os::fd::AsRawFd;
        match self {
            Self::DmaBuf {
                fd,
                offset,
                len,
                iova,
            } => gda_hal::control::MemoryDesc::DmaBuf {
                fd: fd.as_raw_fd(),
                offset: *offset,
                len: *len,
                iova: *iova,
            },
            Self::PeerMemory { addr, len } => gda_hal::control::MemoryDesc::Host {
                addr: *addr,
                len: *len,
            },
        }
    }
}

/// A device allocation's IPC handle: 64 opaque bytes and the length, sendable to another
/// process of the same host (as bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcHandle {
    /// `hipIpcMemHandle_t`.
    pub bytes: [u8; 64],
    /// The allocation's length.
    pub len: u64,
}

impl IpcHandle {
    /// 72 bytes: the handle, then the length (little-endian).
    pub fn to_bytes(&self) -> [u8; 72] {
        let mut out = [0u8; 72];
        out[..64].copy_from_slice(&self.bytes);
        out[64..].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Parses [`IpcHandle::to_bytes`]; anything else is an error.
    pub fn from_bytes(b: &[u8]) -> Result<Self, HipError> {
        let b: &[u8; 72] = b.try_into().map_err(|_| {
            HipError::Invalid(format!("an IPC handle is 72 bytes, not {}", b.len()))
        })?;
        let mut bytes = [0u8; 64];
        bytes.copy_from_slice(&b[..64]);
        let len = u64::from_le_bytes(b[64..].try_into().unwrap_or([0; 8]));
        if len == 0 {
            return Err(HipError::Invalid(
                "an IPC handle of a 0-byte allocation".into(),
            ));
        }
        Ok(Self { bytes, len })
    }
}

/// A peer process's device memory opened here.
pub struct IpcMapping {
    hip: Arc<Hip>,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping HIP's thread-safe calls manage.
unsafe impl Send for IpcMapping {}
// SAFETY: as above.
unsafe impl Sync for IpcMapping {}

impl IpcMapping {
    /// Opens `h` (`hipIpcOpenMemHandle`, peer access enabled as needed).
    pub fn open(hip: &Arc<Hip>, h: &IpcHandle) -> Result<Self, HipError> {
        let len = usize::try_from(h.len)
            .map_err(|_| HipError::Invalid(format!("IPC handle length {}", h.len)))?;
        // SAFETY: C data.
        let mut raw: rt::hipIpcMemHandle_t = unsafe { std::mem::zeroed() };
        for (c, b) in raw.reserved.iter_mut().zip(h.bytes.iter()) {
            *c = *b as _;
        }
        let mut p = std::ptr::null_mut();
        // SAFETY: an output pointer and a handle (HIP validates it).
        let r =
            unsafe { (hip.f.hipIpcOpenMemHandle)(&mut p, raw, rt::hipIpcMemLazyEnablePeerAccess) };
        hip.check(
            "hipIpcOpenMemHandle",
            r,
            " (a handle of another process of this host)".into(),
        )?;
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| HipError::Invalid("hipIpcOpenMemHandle returned null".into()))?;
        Ok(Self {
            hip: hip.clone(),
            ptr,
            len,
        })
    }

    /// The peer's memory in this process's GPU address space.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for IpcMapping {
    fn drop(&mut self) {
        // SAFETY: opened in `open`, unused after this.
        let r = unsafe { (self.hip.f.hipIpcCloseMemHandle)(self.ptr.as_ptr().cast()) };
        if Hip::report_on_drop(r) {
            eprintln!(
                "gda-hip: hipIpcCloseMemHandle failed: {}",
                self.hip.words(r)
            );
        }
    }
}

/// Rings and doorbell records in device memory: `QueueMemory::Caller(Arc::new(…))` on any
/// control path puts a CQ's or QP's queues where GPU code polls them without crossing PCIe.
/// The posting-protocol state and device contexts placed through it go there too, and the
/// doorbells of its queues are mapped for the GPU ([`DoorbellMapping`], one per page however
/// many queues share it: HIP refuses to register a page twice).
pub struct GpuQueueMemory {
    hip: Arc<Hip>,
    live: Mutex<Vec<DeviceBuffer>>,
    /// Doorbell pages mapped for the GPU, by host page address, with their users.
    doorbells: Mutex<std::collections::HashMap<u64, (DoorbellMapping, usize)>>,
}

impl std::fmt::Debug for GpuQueueMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuQueueMemory").finish_non_exhaustive()
    }
}

impl GpuQueueMemory {
    /// Queue memory on the current GPU (fails at once without one).
    pub fn new(hip: &Arc<Hip>) -> Result<Self, HipError> {
        hip.gpus()?;
        hip.fine_grained_malloc()?;
        Ok(Self {
            hip: hip.clone(),
            live: Mutex::new(Vec::new()),
            doorbells: Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// Whether `p` lies in memory this allocator handed out.
    pub fn owns(&self, p: *const u8) -> bool {
        let p = p as usize;
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|b| (b.ptr.as_ptr() as usize..b.ptr.as_ptr() as usize + b.len).contains(&p))
    }
}

impl QueueAllocator for GpuQueueMemory {
    fn alloc(&self, what: QueueBuffer, len: usize, align: usize) -> Option<NonNull<u8>> {
        // HIP allocations are aligned to at least 4 KiB; larger alignments are refused.
        if align > 4096 {
            eprintln!(
                "gda-hip: {what:?} asks for {align}-byte alignment; device memory gives 4096"
            );
            return None;
        }
        match DeviceBuffer::new(&self.hip, len) {
            Ok(b) => {
                let p = b.ptr;
                self.live.lock().unwrap_or_else(|e| e.into_inner()).push(b);
                Some(p)
            }
            Err(e) => {
                eprintln!("gda-hip: {what:?} of {len} bytes: {e}");
                None
            }
        }
    }

    unsafe fn free(&self, _what: QueueBuffer, ptr: NonNull<u8>, _len: usize) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = live.iter().position(|b| b.ptr == ptr) {
            live.swap_remove(i);
        }
    }

    fn map_doorbell(&self, db: u64) -> Option<u64> {
        let page = db & !4095;
        let mut map = self.doorbells.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((m, users)) = map.get_mut(&page) {
            *users += 1;
            // The page's device address, plus this doorbell's offset in it.
            return Some(m.device as u64 + (db & 4095));
        }
        // SAFETY: the control path's doorbell of a live queue; `unmap_doorbell` (called before
        // the queue goes, by `QueueMemory::map_doorbell`'s owner) ends the mapping.
        match unsafe { DoorbellMapping::new(&self.hip, db) } {
            Ok(m) => {
                let d = m.device_ptr() as u64;
                map.insert(page, (m, 1));
                Some(d)
            }
            Err(e) => {
                eprintln!("gda-hip: doorbell at {db:#x}: {e}");
                None
            }
        }
    }

    unsafe fn unmap_doorbell(&self, db: u64) {
        let page = db & !4095;
        let mut map = self.doorbells.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, users)) = map.get_mut(&page) {
            *users -= 1;
            if *users == 0 {
                map.remove(&page);
            }
        }
    }
}

/// A NIC doorbell page (MMIO) mapped into the GPU's address space, so device code rings the
/// doorbell itself: `hipHostRegister(…, hipHostRegisterMapped | hipHostRegisterIoMemory)`.
pub struct DoorbellMapping {
    hip: Arc<Hip>,
    page: *mut c_void,
    device: *mut u8,
    offset: usize,
}

impl std::fmt::Debug for DoorbellMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DoorbellMapping({:p} -> {:p})",
            self.page,
            self.device_ptr()
        )
    }
}

// SAFETY: addresses; HIP's calls are thread-safe.
unsafe impl Send for DoorbellMapping {}
// SAFETY: as above.
unsafe impl Sync for DoorbellMapping {}

impl DoorbellMapping {
    /// Maps the page holding `db` (a UAR/BlueFlame register or a Thor2 doorbell page, from
    /// the control path's queue handle) for the current GPU.
    ///
    /// # Safety
    /// `db` is a doorbell mapping of this process that outlives the returned value.
    pub unsafe fn new(hip: &Arc<Hip>, db: u64) -> Result<Self, HipError> {
        if db == 0 {
            return Err(HipError::Invalid("no doorbell address".into()));
        }
        let page = (db & !4095) as *mut c_void;
        let offset = (db & 4095) as usize;
        // SAFETY: the caller's doorbell page.
        let r = unsafe {
            (hip.f.hipHostRegister)(
                page,
                4096,
                rt::hipHostRegisterMapped | rt::hipHostRegisterIoMemory,
            )
        };
        hip.check(
            "hipHostRegister",
            r,
            format!(" (doorbell page {page:p}, I/O memory)"),
        )?;
        let mut d = std::ptr::null_mut();
        // SAFETY: the page registered above.
        let r = unsafe { (hip.f.hipHostGetDevicePointer)(&mut d, page, 0) };
        if let Err(e) = hip.check("hipHostGetDevicePointer", r, String::new()) {
            // SAFETY: registered above.
            unsafe { (hip.f.hipHostUnregister)(page) };
            return Err(e);
        }
        Ok(Self {
            hip: hip.clone(),
            page,
            device: d.cast(),
            offset,
        })
    }

    /// The doorbell's address for device code.
    pub fn device_ptr(&self) -> *mut u8 {
        self.device.wrapping_add(self.offset)
    }
}

impl Drop for DoorbellMapping {
    fn drop(&mut self) {
        // SAFETY: registered in `new`.
        let r = unsafe { (self.hip.f.hipHostUnregister)(self.page) };
        if Hip::report_on_drop(r) {
            eprintln!("gda-hip: hipHostUnregister failed: {}", self.hip.words(r));
        }
    }
}

/// Host memory of this process mapped for the GPU (`hipHostRegister`), so a kernel reaches
/// rings, records, state and heaps that live in host memory — the software NIC's, or a host
/// heap's — at their host addresses.
///
/// Registrations are page-rounded and shared by everything of the process that maps the same
/// pages (HIP refuses to register a page twice): a page range is registered once, by the first
/// mapping that needs it, and unregistered when the last one that uses it goes. Ranges HIP
/// refuses as ordinary memory (a NIC's MMIO doorbell page) are registered as I/O memory.
///
/// Only a GPU that sees registered host memory at the same address (HIP on a 64-bit host with
/// unified addressing does) can use such a context: [`HostMapping::new`] checks each range's
/// device address and fails otherwise.
pub struct HostMapping {
    hip: Arc<Hip>,
    /// Starts of the process-wide registrations this mapping holds a use of.
    held: Vec<usize>,
}

impl std::fmt::Debug for HostMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostMapping({} registrations)", self.held.len())
    }
}

/// The process's registrations: start → (bytes, users).
fn host_registrations() -> &'static Mutex<std::collections::BTreeMap<usize, (usize, usize)>> {
    static REG: std::sync::OnceLock<Mutex<std::collections::BTreeMap<usize, (usize, usize)>>> =
        std::sync::OnceLock::new();
    REG.get_or_init(Default::default)
}

impl HostMapping {
    /// Maps every `(address, bytes)` of `ranges` (host memory of this process, valid while the
    /// returned value lives) for the current GPU.
    ///
    /// # Errors
    /// HIP's error for a registration it refuses in both forms, or [`HipError::Invalid`] if
    /// the GPU sees a range at another address.
    ///
    /// # Safety
    /// Every range stays mapped in this process until the returned value is dropped.
    pub unsafe fn new(hip: &Arc<Hip>, ranges: &[(u64, usize)]) -> Result<Self, HipError> {
        const PAGE: usize = 4096;
        let mut me = Self {
            hip: hip.clone(),
            held: Vec::new(),
        };
        let mut reg = host_registrations()
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut pages: Vec<(usize, usize)> = ranges
            .iter()
            .filter(|&&(a, n)| a != 0 && n != 0)
            .map(|&(a, n)| {
                let a = a as usize;
                (a & !(PAGE - 1), (a + n).next_multiple_of(PAGE))
            })
            .collect();
        pages.sort_unstable();
        // Merge overlapping and touching ranges.
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (s, e) in pages {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        for (s, e) in merged {
            let mut at = s;
            while at < e {
                // A registration covering `at`?
                let covering = reg
                    .range(..=at)
                    .next_back()
                    .filter(|(b, (l, _))| **b + *l > at)
                    .map(|(b, (l, _))| (*b, *l));
                if let Some((b, l)) = covering {
                    if !me.held.contains(&b) {
                        if let Some(entry) = reg.get_mut(&b) {
                            entry.1 += 1;
                        }
                        me.held.push(b);
                    }
                    at = b + l;
                    continue;
                }
                // Register up to the next registration or the end.
                let next = reg.range(at..).next().map_or(e, |(b, _)| (*b).min(e));
                let len = next - at;
                me.register(at, len)?;
                reg.insert(at, (len, 1));
                me.held.push(at);
                at = next;
            }
        }
        drop(reg);
        for &(a, n) in ranges {
            if a == 0 || n == 0 {
                continue;
            }
            let mut d = std::ptr::null_mut();
            // SAFETY: `a` lies in a registration made or held above.
            let r = unsafe { (hip.f.hipHostGetDevicePointer)(&mut d, a as *mut c_void, 0) };
            hip.check("hipHostGetDevicePointer", r, format!(" ({a:#x})"))?;
            if d as u64 != a {
                return Err(HipError::Invalid(format!(
                    "the GPU sees host memory {a:#x} at {d:p}: a host-memory context needs the \
                     same addresses on both sides (use a GPU heap, GDA_SHMEM_HEAP=gpu)"
                )));
            }
        }
        Ok(me)
    }

    fn register(&self, at: usize, len: usize) -> Result<(), HipError> {
        // SAFETY: pages of the caller's ranges (this function's caller's contract).
        let r = unsafe {
            (self.hip.f.hipHostRegister)(at as *mut c_void, len, rt::hipHostRegisterMapped)
        };
        if r == 0 {
            return Ok(());
        }
        // MMIO (a doorbell page) is refused as ordinary memory.
        // SAFETY: as above.
        let r2 = unsafe {
            (self.hip.f.hipHostRegister)(
                at as *mut c_void,
                len,
                rt::hipHostRegisterMapped | rt::hipHostRegisterIoMemory,
            )
        };
        self.hip.check(
            "hipHostRegister",
            if r2 == 0 { 0 } else { r },
            format!(" ({len} bytes of host memory at {at:#x})"),
        )
    }
}

impl Drop for HostMapping {
    fn drop(&mut self) {
        let mut reg = host_registrations()
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for b in self.held.drain(..) {
            let last = match reg.get_mut(&b) {
                Some(entry) => {
                    entry.1 -= 1;
                    entry.1 == 0
                }
                None => false,
            };
            if last {
                reg.remove(&b);
                // SAFETY: registered by a `HostMapping` and used by none any more.
                let r = unsafe { (self.hip.f.hipHostUnregister)(b as *mut c_void) };
                if Hip::report_on_drop(r) {
                    eprintln!("gda-hip: hipHostUnregister failed: {}", self.hip.words(r));
                }
            }
        }
    }
}
