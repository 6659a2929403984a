//! # gda-hip-sim — the HIP runtime's memory API on host shared memory
//!
//! gda reaches GPU memory through HIP opened at run time (`gda-hip`, `GDA_HIP_LIB`). These
//! machines, and CI, have no GPU, so that code would only ever run its no-GPU error path. This
//! library stands in for `libamdhip64.so` the way the verbs-compatible library stands in for
//! `libibverbs.so.1`: `GDA_HIP_LIB=target/<profile>/hip-sim/libamdhip64.so.5` and every
//! GPU-memory path of gda runs — the symmetric heap in "device" memory, IPC handles opened by
//! the peers of the P2P transport, rings and doorbell records from a `QueueAllocator`,
//! registration with a NIC, the doorbell page mapped for the "device".
//!
//! What it is, and is not:
//!
//! - It exports the entry points gda-hip loads, with the prototypes and error codes of
//!   `hip_runtime_api.h` (ROCm 5.x/6.x): device queries, `hipExtMallocWithFlags`, `hipFree`,
//!   `hipMemcpy`, `hipMemset`, `hipIpcGetMemHandle`/`hipIpcOpenMemHandle`/
//!   `hipIpcCloseMemHandle`, `hipHostRegister`/`hipHostUnregister`/`hipHostGetDevicePointer`.
//!   It has no kernels, streams or events.
//! - "Device memory" is host memory: every allocation is its own POSIX shared-memory object
//!   (`gda_os::shm`: `/gda-hipsim-<random>`, `O_EXCL`, mode `0600`), so an IPC handle can be
//!   opened by another process of the same user — and only of the same user: opening checks
//!   the object's owner and mode, as `gda_os::shm` does for every segment. The name lives until
//!   `hipFree` (a process killed before that leaves it in `/dev/shm`).
//! - It checks what HIP checks where a careless caller would notice: a null output pointer, an
//!   unknown allocation to free or export, an unknown or malformed IPC handle, a range
//!   registered twice or unregistered without registration, a device index out of range. It
//!   does not export dma-bufs (`hsa_amd_portable_export_dmabuf` is ROCr's, not HIP's), so
//!   gda registers its memory with a NIC the peer-memory way (`ibv_reg_mr` on the address),
//!   which the verbs-compatible library accepts for host memory.
//! - It also exports those entry points under the names of NVIDIA's CUDA runtime
//!   (`cudaHostRegister`, …; module [`cuda`]), which gda-hip loads for an NVIDIA GPU, except
//!   device allocation, which CUDA has in no host-readable form.
//! - `GDA_HIPSIM_PCI` gives the GPUs' PCI bus ids, comma-separated in device order (default
//!   `0000:c1:00.0`, `0000:c2:00.0`, …).
//! - `GDA_HIPSIM_GPUS` sets how many GPUs it shows (default 1; `0` gives HIP's own "no
//!   device" answer, so the no-GPU path can be tested with it too).
//! - `GDA_HIPSIM_TRACE=1` prints every allocation, host registration and IPC open on stderr (`gda-hip-sim:
//!   hipExtMallocWithFlags <bytes> …`), so a test can see which of a program's buffers went
//!   to "device" memory.
#![deny(unsafe_op_in_unsafe_fn)]

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Mutex;

use gda_os::shm::Segment;

/// `hipError_t` values of `hip_runtime_api.h`.
mod code {
    pub const SUCCESS: i32 = 0;
    pub const INVALID_VALUE: i32 = 1;
    pub const OUT_OF_MEMORY: i32 = 2;
    pub const INVALID_DEVICE_POINTER: i32 = 17;
    pub const NO_DEVICE: i32 = 100;
    pub const INVALID_DEVICE: i32 = 101;
    pub const MAP_FAILED: i32 = 205;
    pub const INVALID_HANDLE: i32 = 400;
    pub const HOST_MEMORY_ALREADY_REGISTERED: i32 = 712;
    pub const HOST_MEMORY_NOT_REGISTERED: i32 = 713;
}

/// `HIP_IPC_HANDLE_SIZE`.
const IPC_HANDLE_BYTES: usize = 64;

/// `hipIpcMemHandle_t` (passed by value to `hipIpcOpenMemHandle`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HipIpcMemHandle {
    /// Opaque to callers; here: the magic `GDAHIPS1`, the object's 16 hex digits, its length.
    pub reserved: [c_char; IPC_HANDLE_BYTES],
}

/// First bytes of every handle this library makes (a handle of real HIP, or junk, is refused).
const HANDLE_MAGIC: &[u8; 8] = b"GDAHIPS1";
/// The `job` part of an object's name outside a gda job (`/gda-hipsim-hip.<16 hex digits>`).
const JOB: &str = "hipsim";

/// The `job` part of this process's object names: the gda job's (`GDA_SHMEM_JOB`), so the
/// launcher's sweep removes them when a PE dies (real GPU memory dies with its process; these
/// objects would not), else [`JOB`].
fn job() -> String {
    std::env::var("GDA_SHMEM_JOB")
        .ok()
        .filter(|j| gda_os::shm::segment_name(j, "hip.0").is_ok())
        .unwrap_or_else(|| JOB.to_owned())
}

/// `hipMemcpyHostToHost` … `hipMemcpyDefault`.
const MEMCPY_KINDS: c_int = 4;
/// The largest `hipExtMallocWithFlags` flag value: `hipDeviceMallocDefault` (0),
/// `hipDeviceMallocFinegrained` (1), `hipMallocSignalMemory` (2), `hipDeviceMallocUncached` (3)
/// are values, not bits.
const MALLOC_FLAG_MAX: c_uint = 3;
/// `hipHostRegisterPortable | Mapped | IoMemory | ReadOnly`.
const HOST_REGISTER_FLAGS: c_uint = 0x1 | 0x2 | 0x4 | 0x8;

/// What the process has: its allocations (by first byte), the handles it opened, the host
/// ranges it registered.
struct State {
    allocs: BTreeMap<usize, Segment>,
    opened: BTreeMap<usize, Segment>,
    registered: BTreeMap<usize, usize>,
}

static STATE: Mutex<State> = Mutex::new(State {
    allocs: BTreeMap::new(),
    opened: BTreeMap::new(),
    registered: BTreeMap::new(),
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    static CURRENT: std::cell::Cell<c_int> = const { std::cell::Cell::new(0) };
}

/// `GDA_HIPSIM_GPUS` (default 1); a value that is not a number shows no GPU and says why.
fn gpu_count() -> c_int {
    match std::env::var("GDA_HIPSIM_GPUS") {
        Err(_) => 1,
        Ok(v) => match v.trim().parse::<u8>() {
            Ok(n) => c_int::from(n),
            Err(_) => {
                eprintln!("gda-hip-sim: GDA_HIPSIM_GPUS={v:?} is not a number of GPUs (0-255)");
                0
            }
        },
    }
}

/// `GDA_HIPSIM_TRACE=1`: one line on stderr per call of interest.
fn trace(what: std::fmt::Arguments<'_>) {
    if std::env::var_os("GDA_HIPSIM_TRACE").is_some_and(|v| v == "1") {
        use std::io::Write;
        // One write per line: the PEs of a job share one stderr pipe.
        let line = format!("gda-hip-sim: {what}\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

fn device_ok(dev: c_int) -> i32 {
    match gpu_count() {
        0 => code::NO_DEVICE,
        n if (0..n).contains(&dev) => code::SUCCESS,
        _ => code::INVALID_DEVICE,
    }
}

/// Copies `s` into the caller's `len`-byte buffer, NUL-terminated (truncated if need be).
///
/// # Safety
/// `buf` is valid for `len` bytes (checked non-null and `len > 0` here).
unsafe fn put_str(buf: *mut c_char, len: c_int, s: &str) -> i32 {
    let Ok(len) = usize::try_from(len) else {
        return code::INVALID_VALUE;
    };
    if buf.is_null() || len == 0 {
        return code::INVALID_VALUE;
    }
    let n = s.len().min(len - 1);
    // SAFETY: `buf` holds `len > n` bytes (caller); `s` holds at least `n`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
    code::SUCCESS
}

/// `hipGetDeviceCount`: `GDA_HIPSIM_GPUS`, or `hipErrorNoDevice` for none.
///
/// # Safety
/// `count` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> c_int {
    if count.is_null() {
        return code::INVALID_VALUE;
    }
    let n = gpu_count();
    // SAFETY: non-null, valid (caller).
    unsafe { *count = n };
    if n == 0 {
        code::NO_DEVICE
    } else {
        code::SUCCESS
    }
}

/// `hipSetDevice`: the calling thread's device.
#[unsafe(no_mangle)]
pub extern "C" fn hipSetDevice(dev: c_int) -> c_int {
    let r = device_ok(dev);
    if r == code::SUCCESS {
        CURRENT.with(|c| c.set(dev));
        trace(format_args!("hipSetDevice {dev}"));
    }
    r
}

/// `hipGetErrorString`: a static string for any code.
#[unsafe(no_mangle)]
pub extern "C" fn hipGetErrorString(err: c_int) -> *const c_char {
    let s: &'static std::ffi::CStr = match err {
        code::SUCCESS => c"no error",
        code::INVALID_VALUE => c"invalid argument",
        code::OUT_OF_MEMORY => c"out of memory",
        code::INVALID_DEVICE_POINTER => c"invalid device pointer",
        code::NO_DEVICE => c"no ROCm-capable device is detected",
        code::INVALID_DEVICE => c"invalid device ordinal",
        code::MAP_FAILED => c"mapping of buffer object failed",
        code::INVALID_HANDLE => c"invalid resource handle",
        code::HOST_MEMORY_ALREADY_REGISTERED => {
            c"part or all of the requested memory range is already mapped"
        }
        code::HOST_MEMORY_NOT_REGISTERED => {
            c"pointer does not correspond to a registered memory region"
        }
        _ => c"unknown error",
    };
    s.as_ptr()
}

/// `hipDeviceGetName`.
///
/// # Safety
/// `name` is valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> c_int {
    match device_ok(dev) {
        // SAFETY: the caller's buffer.
        code::SUCCESS => unsafe { put_str(name, len, "gda hip-sim GPU (host memory)") },
        r => r,
    }
}

/// `hipDeviceGetPCIBusId`: the device's entry of `GDA_HIPSIM_PCI` (comma-separated bus ids,
/// in device order: how a test lays the GPUs over a topology fixture), else `0000:c1:00.0`,
/// `0000:c2:00.0`, … by device.
///
/// # Safety
/// `bus` is valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipDeviceGetPCIBusId(bus: *mut c_char, len: c_int, dev: c_int) -> c_int {
    match device_ok(dev) {
        code::SUCCESS => {
            let given = std::env::var("GDA_HIPSIM_PCI")
                .ok()
                .and_then(|v| v.split(',').nth(dev as usize).map(|s| s.trim().to_string()));
            let id = given.unwrap_or_else(|| format!("0000:{:02x}:00.0", 0xc1 + dev));
            // SAFETY: the caller's buffer.
            unsafe { put_str(bus, len, &id) }
        }
        r => r,
    }
}

/// `hipRuntimeGetVersion`: 5.7 in `HIP_VERSION`'s encoding.
///
/// # Safety
/// `v` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipRuntimeGetVersion(v: *mut c_int) -> c_int {
    if v.is_null() {
        return code::INVALID_VALUE;
    }
    // SAFETY: non-null, valid (caller).
    unsafe { *v = 50_700_000 };
    code::SUCCESS
}

/// `hipExtMallocWithFlags`: a new shared-memory object of `size` zeroed bytes; `size == 0`
/// gives a null pointer, as HIP does.
///
/// # Safety
/// `ptr` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipExtMallocWithFlags(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> c_int {
    if ptr.is_null() || flags > MALLOC_FLAG_MAX {
        return code::INVALID_VALUE;
    }
    let r = device_ok(CURRENT.with(std::cell::Cell::get));
    if r != code::SUCCESS {
        return r;
    }
    if size == 0 {
        // SAFETY: non-null, valid (caller).
        unsafe { *ptr = std::ptr::null_mut() };
        return code::SUCCESS;
    }
    let what = format!("hip.{:016x}", rand::random::<u64>());
    let Ok(seg) = Segment::create(&job(), &what, size) else {
        return code::OUT_OF_MEMORY;
    };
    let p = seg.as_ptr();
    trace(format_args!(
        "hipExtMallocWithFlags {size} bytes, flags {flags:#x} -> {p:p}"
    ));
    state().allocs.insert(p as usize, seg);
    // SAFETY: non-null, valid (caller).
    unsafe { *ptr = p.cast() };
    code::SUCCESS
}

/// `hipFree`: unmaps and removes an allocation's object (null is a no-op).
#[unsafe(no_mangle)]
pub extern "C" fn hipFree(ptr: *mut c_void) -> c_int {
    if ptr.is_null() {
        return code::SUCCESS;
    }
    match state().allocs.remove(&(ptr as usize)) {
        Some(seg) => {
            let _ = seg.unlink();
            code::SUCCESS
        }
        None => code::INVALID_DEVICE_POINTER,
    }
}

/// `hipMemcpy` (every kind is a host copy; overlap allowed).
///
/// # Safety
/// `dst` and `src` are valid for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    n: usize,
    kind: c_int,
) -> c_int {
    if !(0..=MEMCPY_KINDS).contains(&kind) || (n > 0 && (dst.is_null() || src.is_null())) {
        return code::INVALID_VALUE;
    }
    // SAFETY: both valid for `n` bytes (caller); `copy` allows overlap.
    unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), n) };
    code::SUCCESS
}

/// `hipMemset`.
///
/// # Safety
/// `dst` is valid for `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemset(dst: *mut c_void, value: c_int, n: usize) -> c_int {
    if n > 0 && dst.is_null() {
        return code::INVALID_VALUE;
    }
    // SAFETY: valid for `n` bytes (caller).
    unsafe { std::ptr::write_bytes(dst.cast::<u8>(), value as u8, n) };
    code::SUCCESS
}

/// The allocation holding `p`: its first byte and object.
fn containing(map: &BTreeMap<usize, Segment>, p: usize) -> Option<(usize, &Segment)> {
    let (&base, seg) = map.range(..=p).next_back()?;
    (p - base < seg.len()).then_some((base, seg))
}

/// `hipIpcGetMemHandle`: the handle of the allocation holding `ptr`.
///
/// # Safety
/// `handle` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipIpcGetMemHandle(
    handle: *mut HipIpcMemHandle,
    ptr: *mut c_void,
) -> c_int {
    if handle.is_null() || ptr.is_null() {
        return code::INVALID_VALUE;
    }
    let st = state();
    let Some((_, seg)) = containing(&st.allocs, ptr as usize) else {
        return code::INVALID_DEVICE_POINTER;
    };
    // `/gda-<job>-hip.<16 hex digits>`: the digits name it within the job.
    let Some(what) = seg.name().rsplit('.').next().filter(|w| w.len() == 16) else {
        return code::INVALID_VALUE;
    };
    let mut h = [0u8; IPC_HANDLE_BYTES];
    h[..8].copy_from_slice(HANDLE_MAGIC);
    h[8..8 + what.len().min(16)].copy_from_slice(&what.as_bytes()[..what.len().min(16)]);
    h[24..32].copy_from_slice(&(seg.len() as u64).to_le_bytes());
    let mut out = HipIpcMemHandle {
        reserved: [0; IPC_HANDLE_BYTES],
    };
    for (o, b) in out.reserved.iter_mut().zip(h) {
        *o = b as c_char;
    }
    // SAFETY: non-null, valid (caller).
    unsafe { *handle = out };
    code::SUCCESS
}

/// The object name and length a handle of this library carries; `None` for anything else.
fn parse_handle(h: &HipIpcMemHandle) -> Option<(String, usize)> {
    let b: Vec<u8> = h.reserved.iter().map(|&c| c as u8).collect();
    if &b[..8] != HANDLE_MAGIC {
        return None;
    }
    let what = std::str::from_utf8(&b[8..24]).ok()?;
    if !what.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let len = usize::try_from(u64::from_le_bytes(b[24..32].try_into().ok()?)).ok()?;
    (len > 0).then(|| (what.to_owned(), len))
}

/// `hipIpcOpenMemHandle`: maps another process's allocation (the object must be this user's,
/// mode 0600, of the handle's length).
///
/// # Safety
/// `ptr` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipIpcOpenMemHandle(
    ptr: *mut *mut c_void,
    handle: HipIpcMemHandle,
    flags: c_uint,
) -> c_int {
    // hipIpcMemLazyEnablePeerAccess is the only flag.
    if ptr.is_null() || flags & !1 != 0 {
        return code::INVALID_VALUE;
    }
    let Some((what, len)) = parse_handle(&handle) else {
        return code::INVALID_HANDLE;
    };
    let seg = match Segment::open(&job(), &format!("hip.{what}"), len) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return code::INVALID_HANDLE,
        Err(e) => {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr().lock(),
                format!("gda-hip-sim: hipIpcOpenMemHandle: {e}\n").as_bytes(),
            );
            return code::MAP_FAILED;
        }
    };
    let p = seg.as_ptr();
    trace(format_args!("hipIpcOpenMemHandle {len} bytes -> {p:p}"));
    state().opened.insert(p as usize, seg);
    // SAFETY: non-null, valid (caller).
    unsafe { *ptr = p.cast() };
    code::SUCCESS
}

/// `hipIpcCloseMemHandle`: unmaps what `hipIpcOpenMemHandle` mapped.
#[unsafe(no_mangle)]
pub extern "C" fn hipIpcCloseMemHandle(ptr: *mut c_void) -> c_int {
    match state().opened.remove(&(ptr as usize)) {
        Some(_) => code::SUCCESS,
        None => code::INVALID_VALUE,
    }
}

/// `hipHostRegister`: records the range (any overlap with a registered one is refused).
#[unsafe(no_mangle)]
pub extern "C" fn hipHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) -> c_int {
    let p = ptr as usize;
    if ptr.is_null()
        || size == 0
        || flags & !HOST_REGISTER_FLAGS != 0
        || p.checked_add(size).is_none()
    {
        return code::INVALID_VALUE;
    }
    let mut st = state();
    let overlaps = st
        .registered
        .range(..p + size)
        .next_back()
        .is_some_and(|(&b, &l)| b + l > p);
    if overlaps {
        trace(format_args!(
            "hipHostRegister {ptr:p} {size} refused: overlaps a registration"
        ));
        return code::HOST_MEMORY_ALREADY_REGISTERED;
    }
    st.registered.insert(p, size);
    trace(format_args!(
        "hipHostRegister {ptr:p} {size} flags {flags:#x}"
    ));
    code::SUCCESS
}

/// `hipHostUnregister`.
#[unsafe(no_mangle)]
pub extern "C" fn hipHostUnregister(ptr: *mut c_void) -> c_int {
    match state().registered.remove(&(ptr as usize)) {
        Some(_) => code::SUCCESS,
        None => code::HOST_MEMORY_NOT_REGISTERED,
    }
}

/// `hipHostGetDevicePointer`: a registered host address is its own device address here.
///
/// # Safety
/// `dev` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipHostGetDevicePointer(
    dev: *mut *mut c_void,
    host: *mut c_void,
    flags: c_uint,
) -> c_int {
    if dev.is_null() || flags != 0 {
        return code::INVALID_VALUE;
    }
    let p = host as usize;
    let inside = state()
        .registered
        .range(..=p)
        .next_back()
        .is_some_and(|(&b, &l)| p - b < l);
    if !inside {
        return code::INVALID_VALUE;
    }
    // SAFETY: non-null, valid (caller).
    unsafe { *dev = host };
    code::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_junk_is_refused() {
        let mut p = std::ptr::null_mut();
        // SAFETY: an output pointer.
        assert_eq!(unsafe { hipExtMallocWithFlags(&mut p, 8192, 1) }, 0);
        let mut h = HipIpcMemHandle { reserved: [0; 64] };
        let inside = p.cast::<u8>().wrapping_add(100).cast();
        // SAFETY: an output handle and our allocation (an interior pointer names it too).
        let r = unsafe { hipIpcGetMemHandle(&mut h, inside) };
        assert_eq!(r, 0);
        let (what, len) = parse_handle(&h).expect("our handle parses");
        assert_eq!((what.len(), len), (16, 8192));
        let mut q = std::ptr::null_mut();
        // SAFETY: an output pointer; our own handle (a second mapping of the same object).
        assert_eq!(unsafe { hipIpcOpenMemHandle(&mut q, h, 1) }, 0);
        // SAFETY: both mappings are 8192 bytes of one object.
        unsafe {
            p.cast::<u8>().write(42);
            assert_eq!(q.cast::<u8>().read(), 42, "the mapping shares the memory");
        }
        let mut junk = h;
        junk.reserved[0] = b'X' as c_char;
        // SAFETY: an output pointer.
        let r = unsafe { hipIpcOpenMemHandle(&mut q, junk, 0) };
        assert_eq!(r, code::INVALID_HANDLE);
        assert_eq!(hipIpcCloseMemHandle(q), 0);
        assert_eq!(hipIpcCloseMemHandle(q), code::INVALID_VALUE);
        assert_eq!(hipFree(p), 0);
        assert_eq!(hipFree(p), code::INVALID_DEVICE_POINTER, "double free");
        // SAFETY: an output pointer; the object is gone.
        let r = unsafe { hipIpcOpenMemHandle(&mut q, h, 0) };
        assert_eq!(r, code::INVALID_HANDLE);
    }

    #[test]
    fn host_registration_refuses_overlap_and_unknown_ranges() {
        let mut page = vec![0u8; 8192];
        let p = page.as_mut_ptr().cast::<c_void>();
        assert_eq!(hipHostRegister(p, 4096, 2 | 4), 0);
        assert_eq!(
            hipHostRegister(p.cast::<u8>().wrapping_add(100).cast(), 10, 0),
            code::HOST_MEMORY_ALREADY_REGISTERED
        );
        let mut d = std::ptr::null_mut();
        // SAFETY: an output pointer.
        assert_eq!(unsafe { hipHostGetDevicePointer(&mut d, p, 0) }, 0);
        assert_eq!(d, p);
        assert_eq!(hipHostUnregister(p), 0);
        assert_eq!(hipHostUnregister(p), code::HOST_MEMORY_NOT_REGISTERED);
        // SAFETY: an output pointer.
        let r = unsafe { hipHostGetDevicePointer(&mut d, p, 0) };
        assert_eq!(r, code::INVALID_VALUE);
    }
}

/// The entry points of NVIDIA's CUDA runtime (`libcudart`) that gda-hip loads when it drives an
/// NVIDIA GPU: the same prototypes and error numbers as HIP's (`cuda_runtime_api.h`), so each
/// is HIP's call under CUDA's name. CUDA has no fine-grained device memory, and neither do
/// these: gda maps host memory for an NVIDIA GPU, which is what `Hip::load_cuda_from` on this
/// library tests.
pub mod cuda {
    use super::*;

    /// `cudaGetDeviceCount`.
    ///
    /// # Safety
    /// As [`hipGetDeviceCount`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaGetDeviceCount(count: *mut c_int) -> c_int {
        // SAFETY: forwarded.
        unsafe { hipGetDeviceCount(count) }
    }

    /// `cudaSetDevice`.
    #[unsafe(no_mangle)]
    pub extern "C" fn cudaSetDevice(dev: c_int) -> c_int {
        hipSetDevice(dev)
    }

    /// `cudaGetErrorString`.
    #[unsafe(no_mangle)]
    pub extern "C" fn cudaGetErrorString(err: c_int) -> *const c_char {
        hipGetErrorString(err)
    }

    /// `cudaGetDeviceProperties_v2`: writes the name (the structure's first field, 256 bytes)
    /// and zeroes the rest of the structure's first KiB.
    ///
    /// # Safety
    /// `prop` is valid for 1024 bytes.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaGetDeviceProperties_v2(prop: *mut c_void, dev: c_int) -> c_int {
        if prop.is_null() {
            return code::INVALID_VALUE;
        }
        // SAFETY: the caller's structure.
        unsafe { std::ptr::write_bytes(prop.cast::<u8>(), 0, 1024) };
        match device_ok(dev) {
            // SAFETY: the name field, 256 bytes.
            code::SUCCESS => unsafe { put_str(prop.cast(), 256, "gda cuda-sim GPU (host memory)") },
            r => r,
        }
    }

    /// `cudaDeviceGetPCIBusId`.
    ///
    /// # Safety
    /// As [`hipDeviceGetPCIBusId`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaDeviceGetPCIBusId(
        bus: *mut c_char,
        len: c_int,
        dev: c_int,
    ) -> c_int {
        // SAFETY: forwarded.
        unsafe { hipDeviceGetPCIBusId(bus, len, dev) }
    }

    /// `cudaRuntimeGetVersion`: 13.0 in CUDA's encoding.
    ///
    /// # Safety
    /// `v` is null or valid for a write.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaRuntimeGetVersion(v: *mut c_int) -> c_int {
        if v.is_null() {
            return code::INVALID_VALUE;
        }
        // SAFETY: non-null, valid (caller).
        unsafe { *v = 13_000 };
        code::SUCCESS
    }

    /// `cudaFree`.
    #[unsafe(no_mangle)]
    pub extern "C" fn cudaFree(ptr: *mut c_void) -> c_int {
        hipFree(ptr)
    }

    /// `cudaMemcpy`.
    ///
    /// # Safety
    /// As [`hipMemcpy`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaMemcpy(
        dst: *mut c_void,
        src: *const c_void,
        n: usize,
        kind: c_int,
    ) -> c_int {
        // SAFETY: forwarded.
        unsafe { hipMemcpy(dst, src, n, kind) }
    }

    /// `cudaMemset`.
    ///
    /// # Safety
    /// As [`hipMemset`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaMemset(dst: *mut c_void, value: c_int, n: usize) -> c_int {
        // SAFETY: forwarded.
        unsafe { hipMemset(dst, value, n) }
    }

    /// `cudaIpcCloseMemHandle`.
    #[unsafe(no_mangle)]
    pub extern "C" fn cudaIpcCloseMemHandle(ptr: *mut c_void) -> c_int {
        hipIpcCloseMemHandle(ptr)
    }

    /// `cudaHostRegister`.
    #[unsafe(no_mangle)]
    pub extern "C" fn cudaHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) -> c_int {
        hipHostRegister(ptr, size, flags)
    }

    /// `cudaHostUnregister`.
    #[unsafe(no_mangle)]
    pub extern "C" fn cudaHostUnregister(ptr: *mut c_void) -> c_int {
        hipHostUnregister(ptr)
    }

    /// `cudaHostGetDevicePointer`.
    ///
    /// # Safety
    /// As [`hipHostGetDevicePointer`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaHostGetDevicePointer(
        dev: *mut *mut c_void,
        host: *mut c_void,
        flags: c_uint,
    ) -> c_int {
        // SAFETY: forwarded.
        unsafe { hipHostGetDevicePointer(dev, host, flags) }
    }

    /// `cudaIpcGetMemHandle`.
    ///
    /// # Safety
    /// As [`hipIpcGetMemHandle`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaIpcGetMemHandle(
        handle: *mut HipIpcMemHandle,
        ptr: *mut c_void,
    ) -> c_int {
        // SAFETY: forwarded.
        unsafe { hipIpcGetMemHandle(handle, ptr) }
    }

    /// `cudaIpcOpenMemHandle`.
    ///
    /// # Safety
    /// As [`hipIpcOpenMemHandle`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn cudaIpcOpenMemHandle(
        ptr: *mut *mut c_void,
        handle: HipIpcMemHandle,
        flags: c_uint,
    ) -> c_int {
        // SAFETY: forwarded.
        unsafe { hipIpcOpenMemHandle(ptr, handle, flags) }
    }
}
