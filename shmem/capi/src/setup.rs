//! Setup, exit, query and memory management.

use std::ffi::{c_char, c_int, c_void};

use gda_shmem::{Result, ShmemError, launch};

use crate::state::{self, CPe, check, fatal, pe};

/// The thread level this library provides at most: `SHMEM_THREAD_MULTIPLE` (calls then take
/// a lock; see `state::Slot`).
const THREAD_PROVIDED: c_int = 3;
/// The level granted at init (what `shmem_query_thread` reports).
static GRANTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Opens this process's PE for the provider `GDA_SHMEM_PROVIDER` names.
struct Open;

impl gda_providers::Dispatch for Open {
    type Output = Result<Box<dyn CPe>>;
    fn run<P: gda_providers::Modeled>(self) -> Self::Output {
        let mut cfg = gda_shmem::Config::from_env()?;
        // The program's global and static variables are symmetric (OpenSHMEM). SAFETY: the
        // program calls `shmem_init` before any thread of its own writes them (as the
        // specification's "call it before any other OpenSHMEM routine" implies, and the
        // documentation of this library says), and this process has one PE.
        cfg.static_data = Some(unsafe { gda_shmem::StaticRange::executable() }?);
        Ok(Box::new(launch::init_from_env_with::<P>(&cfg)?))
    }
}

fn open() -> Result<Box<dyn CPe>> {
    let name = std::env::var("GDA_SHMEM_PROVIDER").unwrap_or_default();
    let name = match name.trim() {
        "" => "native",
        n => n,
    };
    gda_providers::dispatch(name, Open).unwrap_or_else(|| {
        Err(ShmemError::Config(format!(
            "GDA_SHMEM_PROVIDER={name:?}: expected one of {}",
            gda_providers::NAMES.join(", ")
        )))
    })
}

extern "C" fn finalize_at_exit() {
    if state::forked() {
        return; // the parent's PE: the parent finalizes it
    }
    if let Some(p) = state::take() {
        drop(p);
    }
}

fn init(routine: &str) {
    if state::forked() {
        fatal(
            routine,
            "called in a process forked after shmem_init (the PE is the parent's)",
        );
    }
    if state::initialized() {
        return; // a second shmem_init is a no-op (as start_pes after shmem_init)
    }
    if state::finalized() {
        // OpenSHMEM: a program initialises at most once; its heap and routes are gone.
        fatal(
            routine,
            "called after shmem_finalize: a program may initialise OpenSHMEM only once",
        );
    }
    let p = check(routine, open());
    state::install(p);
    // SAFETY: registers a plain function; runs at exit after `main` returns.
    if unsafe { libc::atexit(finalize_at_exit) } != 0 {
        fatal(routine, "atexit refused the finalize handler");
    }
}

/// `shmem_init`: this process's PE, from the launcher's environment.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_init() {
    init("shmem_init");
}

/// `shmem_init_thread`: as `shmem_init`, granting the level requested (up to
/// `SHMEM_THREAD_MULTIPLE`).
///
/// # Safety
/// `provided` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_init_thread(requested: c_int, provided: *mut c_int) -> c_int {
    let level = requested.clamp(0, THREAD_PROVIDED);
    if !state::initialized() {
        if level == THREAD_PROVIDED {
            state::set_multiple();
        }
        GRANTED.store(level, std::sync::atomic::Ordering::Relaxed);
    }
    init("shmem_init_thread");
    if !provided.is_null() {
        // SAFETY: non-null, valid (caller).
        unsafe { *provided = GRANTED.load(std::sync::atomic::Ordering::Relaxed) };
    }
    0
}

/// `shmem_query_thread`.
///
/// # Safety
/// `provided` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_query_thread(provided: *mut c_int) {
    pe("shmem_query_thread");
    if !provided.is_null() {
        // SAFETY: non-null, valid (caller).
        unsafe { *provided = GRANTED.load(std::sync::atomic::Ordering::Relaxed) };
    }
}

/// `shmem_finalize`: collective; quiet, then every PE, then the heap goes.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_finalize() {
    if state::forked() {
        return; // a forked child's finalize (explicit or at exit) leaves the parent's PE alone
    }
    pe("shmem_finalize");
    if let Some(p) = state::take() {
        drop(p);
    }
}

/// `shmem_global_exit`: ends the job with `status`: the launcher is told (`gdarun` then ends
/// the other PEs at once and exits with `status`, 0 included), the other PEs' waits are
/// aborted, and this PE exits with `status`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_global_exit(status: c_int) -> ! {
    if state::forked() {
        fatal(
            "shmem_global_exit",
            "called in a process forked after shmem_init (the PE is the parent's)",
        );
    }
    if let Some(p) = state::take() {
        gda_shmem::launch::notify_global_exit(p.me(), status);
        p.abort(&format!("shmem_global_exit({status})"));
        // No collective finalize: the job is ending.
        std::mem::forget(p);
    }
    std::process::exit(status)
}

/// `shmem_my_pe`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_my_pe() -> c_int {
    pe("shmem_my_pe").me() as c_int
}

/// `shmem_n_pes`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_n_pes() -> c_int {
    pe("shmem_n_pes").n() as c_int
}

/// `start_pes` (1.2): `shmem_init`; the argument is ignored, as the specification says.
#[unsafe(no_mangle)]
pub extern "C" fn start_pes(_npes: c_int) {
    init("start_pes");
}

/// `_my_pe` (1.2).
#[unsafe(no_mangle)]
pub extern "C" fn _my_pe() -> c_int {
    pe("_my_pe").me() as c_int
}

/// `_num_pes` (1.2).
#[unsafe(no_mangle)]
pub extern "C" fn _num_pes() -> c_int {
    pe("_num_pes").n() as c_int
}

/// `shmem_pe_accessible`: every PE of the job is reachable.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_pe_accessible(target: c_int) -> c_int {
    let n = pe("shmem_pe_accessible").n();
    c_int::from(u32::try_from(target).is_ok_and(|t| t < n))
}

/// `shmem_addr_accessible`: `addr` is in the symmetric heap and `target` is a PE.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_addr_accessible(addr: *const c_void, target: c_int) -> c_int {
    let p = pe("shmem_addr_accessible");
    c_int::from(u32::try_from(target).is_ok_and(|t| t < p.n()) && p.in_heap(addr.cast()))
}

/// `shmem_ptr`: `target`'s copy of `dest` mapped here, or null when `target` is reached by
/// RDMA (or `dest` is not symmetric).
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ptr(dest: *const c_void, target: c_int) -> *mut c_void {
    let p = pe("shmem_ptr");
    let Ok(t) = u32::try_from(target) else {
        return std::ptr::null_mut();
    };
    match p.ptr(dest.cast(), t) {
        Ok(Some(a)) => a.cast(),
        _ => std::ptr::null_mut(),
    }
}

/// `shmemx_device_context`: this PE's SHMEM device context (`gda::shmem::Ctx` of
/// `<gda/shmem.hpp>`), for kernels and CPU threads that call the device API. Valid until
/// `shmem_finalize`; null (with the reason on stderr) if it cannot be built.
#[unsafe(no_mangle)]
pub extern "C" fn shmemx_device_context() -> *const c_void {
    let p = pe("shmemx_device_context");
    match p.device_context() {
        Ok(c) => c.cast(),
        Err(e) => {
            gda_shmem::diag!("shmemx_device_context: {e}");
            std::ptr::null()
        }
    }
}

/// `shmem_info_get_version`.
///
/// # Safety
/// `major` and `minor` are null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_info_get_version(major: *mut c_int, minor: *mut c_int) {
    // SAFETY: null-checked outputs (caller).
    unsafe {
        if let Some(m) = major.as_mut() {
            *m = 1;
        }
        if let Some(m) = minor.as_mut() {
            *m = 5;
        }
    }
}

/// `shmem_info_get_name`: `SHMEM_VENDOR_STRING` into a buffer of `SHMEM_MAX_NAME_LEN` bytes.
///
/// # Safety
/// `name` is null or valid for `SHMEM_MAX_NAME_LEN` (256) bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_info_get_name(name: *mut c_char) {
    if name.is_null() {
        return;
    }
    let s = b"gda\0";
    // SAFETY: the caller's buffer holds at least 256 bytes.
    unsafe { std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), name, s.len()) };
}

/// Allocation with OpenSHMEM's failure rule: an exhausted heap or an impossible request gives
/// null; anything else is fatal.
fn alloc(routine: &str, align: usize, bytes: usize) -> *mut c_void {
    let p = pe(routine);
    if bytes == 0 {
        return std::ptr::null_mut();
    }
    match p.malloc(align, bytes) {
        Ok(a) => a.cast(),
        Err(ShmemError::OutOfMemory {
            requested,
            align,
            free,
            heap,
        }) => {
            if align > gda_shmem::heap::MAX_ALIGN {
                gda_shmem::diag!(
                    "gda shmem: {routine}: alignment {align} is above the symmetric heap's \
                     {} (1 GiB): returning NULL",
                    gda_shmem::heap::MAX_ALIGN
                );
            } else {
                gda_shmem::diag!(
                    "gda shmem: {routine}: {requested} bytes aligned to {align} requested, \
                     {free} free in the largest block of the {heap}-byte heap (raise \
                     GDA_SHMEM_HEAP_SIZE): returning NULL"
                );
            }
            std::ptr::null_mut()
        }
        Err(e) => fatal(routine, &e.to_string()),
    }
}

/// Alignment of `shmem_malloc`/`shmem_calloc` (enough for every C type, `long double` too).
const MALLOC_ALIGN: usize = 16;

/// `shmem_malloc`: collective; null for 0 bytes or an exhausted heap.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_malloc(size: usize) -> *mut c_void {
    alloc("shmem_malloc", MALLOC_ALIGN, size)
}

/// `shmalloc` (1.2).
#[unsafe(no_mangle)]
pub extern "C" fn shmalloc(size: usize) -> *mut c_void {
    alloc("shmalloc", MALLOC_ALIGN, size)
}

/// `shmem_calloc`: collective, zeroed.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_calloc(count: usize, size: usize) -> *mut c_void {
    let Some(bytes) = count.checked_mul(size) else {
        fatal(
            "shmem_calloc",
            &format!("{count} elements of {size} bytes overflow"),
        );
    };
    let p = alloc("shmem_calloc", MALLOC_ALIGN, bytes);
    if !p.is_null() {
        // SAFETY: a fresh allocation of `bytes`; nobody else touches it before the barrier.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        check("shmem_calloc", pe("shmem_calloc").barrier_all());
    }
    p
}

/// `shmem_align`: collective; null when `alignment` is not a power of two.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_align(alignment: usize, size: usize) -> *mut c_void {
    if !alignment.is_power_of_two() {
        pe("shmem_align");
        gda_shmem::diag!(
            "gda shmem: shmem_align: {alignment} is not a power of two: returning NULL"
        );
        return std::ptr::null_mut();
    }
    alloc("shmem_align", alignment.max(MALLOC_ALIGN), size)
}

/// `shmem_free`: collective; null is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_free(ptr: *mut c_void) {
    free("shmem_free", ptr);
}

/// `shfree` (1.2).
#[unsafe(no_mangle)]
pub extern "C" fn shfree(ptr: *mut c_void) {
    free("shfree", ptr);
}

fn free(routine: &str, ptr: *mut c_void) {
    let p = pe(routine);
    if !ptr.is_null() {
        check(routine, p.free(ptr.cast()));
    }
}

/// `shmem_realloc`: collective; the contents up to the smaller size move with it.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    let routine = "shmem_realloc";
    if ptr.is_null() {
        return alloc(routine, MALLOC_ALIGN, size);
    }
    if size == 0 {
        free(routine, ptr);
        return std::ptr::null_mut();
    }
    let old = check(routine, pe(routine).allocation_bytes(ptr.cast()));
    let new = alloc(routine, MALLOC_ALIGN, size);
    if new.is_null() {
        return new; // the old block stays, as realloc's rule is
    }
    // SAFETY: both are live allocations of at least the copied length.
    unsafe { std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), new.cast::<u8>(), old.min(size)) };
    free(routine, ptr);
    new
}

/// `shmem_malloc_with_hints`: collective; `shmem_malloc` with usage hints
/// (`SHMEM_MALLOC_ATOMICS_REMOTE`, `SHMEM_MALLOC_SIGNAL_REMOTE`). Every allocation here serves
/// remote atomics and signals equally well, so no hint changes where it is placed. Bits the
/// specification does not define are ignored rather than refused: they are other libraries'
/// extensions (Sandia OpenSHMEM's `SHMEMX_MALLOC_*`, for one), and a hint, by the
/// specification's word, never changes what a correct program computes.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_malloc_with_hints(size: usize, hints: std::ffi::c_long) -> *mut c_void {
    let _ = hints;
    alloc("shmem_malloc_with_hints", MALLOC_ALIGN, size)
}

/// `shrealloc` (1.2): `shmem_realloc`.
#[unsafe(no_mangle)]
pub extern "C" fn shrealloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    shmem_realloc(ptr, size)
}

/// `shmemalign` (1.2): `shmem_align`.
#[unsafe(no_mangle)]
pub extern "C" fn shmemalign(alignment: usize, size: usize) -> *mut c_void {
    shmem_align(alignment, size)
}

/// `shmem_pcontrol`: the profiling interface's level (0 off, 1 on, 2 detailed, others the
/// profiler's). No profiling library is interposed by gda, so every level is accepted and has
/// no effect here; a tool that interposes the routine sees the calls.
///
/// The header declares it variadic, as the specification does (`shmem_pcontrol(const int
/// level, ...)`); it is defined with the one named parameter, which the C calling conventions
/// gda runs on (x86-64 System V, AArch64 AAPCS64) pass in the same register either way, and
/// nothing else is read.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_pcontrol(level: c_int) {
    let _ = level;
}
