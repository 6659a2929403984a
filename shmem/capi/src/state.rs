//! This process's PE, the routines' access to it, and fatal errors.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gda_shmem::{Cmp, Result, ShmemError, Team};

pub use gda_shmem::erased::{AmoOp, DynPe as CPe, Multi, SyncTy};

/// The process's OpenSHMEM state: the PE and the handles C holds (teams).
pub(crate) struct State {
    pub(crate) pe: Box<dyn CPe>,
    /// The load/store fast path (gda-shmem's view of this PE's P2P routes).
    pub(crate) fast: gda_shmem::erased::P2pView,
    /// Split teams by handle (`shmem_team_t` value − 3; 1 and 2 are the world and shared
    /// teams); `None` once destroyed, so a stale handle is an error, never a dangling pointer.
    pub(crate) teams: std::cell::RefCell<Vec<Option<Team>>>,
    /// Created contexts by handle (`shmem_ctx_t` value − 2; 1 is `SHMEM_CTX_DEFAULT`): the
    /// team handle each was created on; `None` once destroyed.
    pub(crate) ctxs: std::cell::RefCell<Vec<Option<usize>>>,
}

/// The state slot. Without `SHMEM_THREAD_MULTIPLE` it is accessed without a lock: under the
/// lower thread levels the program never runs two SHMEM calls at once, and orders them (so each
/// call sees the slot as the previous one left it). With it, every call holds [`LOCK`].
struct Slot(UnsafeCell<Option<State>>);

// SAFETY: see `Slot`: calls are serialised by the program, or by `LOCK`.
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot(UnsafeCell::new(None));
/// `shmem_finalize` ran (a later `shmem_init` is an error, as the specification says).
static FINALIZED: AtomicBool = AtomicBool::new(false);
/// `SHMEM_THREAD_MULTIPLE` was granted: calls take [`LOCK`].
static MULTIPLE: AtomicBool = AtomicBool::new(false);
/// Serialises the calls of a `SHMEM_THREAD_MULTIPLE` program. Reentrant: a routine built from
/// others (a collective's puts, a lock's atomics) takes it again on the same thread.
static LOCK: parking_lot::ReentrantMutex<()> = parking_lot::const_reentrant_mutex(());

/// A routine's access to the state: holds [`LOCK`] when the program is multithreaded, so the
/// single-threaded path pays one relaxed load.
pub(crate) struct Access {
    _g: Option<parking_lot::ReentrantMutexGuard<'static, ()>>,
    state: &'static State,
}

impl std::ops::Deref for Access {
    type Target = dyn CPe;
    fn deref(&self) -> &(dyn CPe + 'static) {
        self.state.pe.as_ref()
    }
}

impl Access {
    /// The state behind the PE (its handle tables).
    pub(crate) fn state(&self) -> &State {
        self.state
    }
}

/// Turns on the lock for `SHMEM_THREAD_MULTIPLE` (before the program's threads call).
pub(crate) fn set_multiple() {
    MULTIPLE.store(true, Ordering::Release);
}

/// Whether calls are serialised by the lock (waits then release it between polls).
pub(crate) fn multiple() -> bool {
    MULTIPLE.load(Ordering::Relaxed)
}

fn lock() -> Option<parking_lot::ReentrantMutexGuard<'static, ()>> {
    multiple().then(|| LOCK.lock())
}

/// Set in a process forked after `shmem_init` (`pthread_atfork`'s child handler): the PE is
/// its parent's; the child may not use it, nor finalize it at exit.
static FORKED: AtomicBool = AtomicBool::new(false);

/// The symmetric ranges of this process (heap, static data) the child handler privatises.
static RANGES: [(AtomicUsize, AtomicUsize); 2] = [
    (AtomicUsize::new(0), AtomicUsize::new(0)),
    (AtomicUsize::new(0), AtomicUsize::new(0)),
];

/// Whether this process is a child forked after `shmem_init`.
pub(crate) fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// `pthread_atfork` child handler. The heap and the static data are `MAP_SHARED` job objects:
/// without this a child's writes to its globals would appear in its parent (and at its
/// peers). Each range becomes a private copy at the same address: copied to a fresh private
/// mapping that is then moved over it (`mremap`), so no byte is ever unmapped. Only system
/// calls and a copy: what a child of a multithreaded process may do before exec.
extern "C" fn after_fork_in_child() {
    FORKED.store(true, Ordering::Relaxed);
    for (a, l) in &RANGES {
        let (addr, len) = (a.load(Ordering::Relaxed), l.load(Ordering::Relaxed));
        if addr == 0 || len == 0 {
            continue;
        }
        // SAFETY: a fresh private anonymous mapping of `len` bytes; `addr..addr + len` is this
        // process's (inherited) mapping of the range, readable; the copy fits; `mremap` with
        // MREMAP_FIXED replaces exactly that range with the copy. On any failure the range
        // stays shared, and the routines refuse to run in the child anyway.
        unsafe {
            let tmp = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if tmp == libc::MAP_FAILED {
                child_privatize_failed(b"mmap");
                continue;
            }
            std::ptr::copy_nonoverlapping(addr as *const u8, tmp.cast::<u8>(), len);
            let moved = libc::mremap(
                tmp,
                len,
                len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                addr as *mut libc::c_void,
            );
            if moved == libc::MAP_FAILED {
                child_privatize_failed(b"mremap");
                libc::munmap(tmp, len);
            }
        }
    }
}

/// The child handler could not give the child a private copy: it says so (one `write`, no
/// allocation: all a forked child may do here).
fn child_privatize_failed(what: &[u8]) {
    let msg: &[u8] =
        b"gda shmem: fork: the child's symmetric memory stays shared with its parent (";
    // SAFETY: writes of static bytes to stderr.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::write(2, what.as_ptr().cast(), what.len());
        libc::write(2, b" failed)\n".as_ptr().cast(), 9);
    }
}

/// This process's PE, or a fatal error naming `routine`.
pub(crate) fn pe(routine: &str) -> Access {
    if forked() {
        fatal(
            routine,
            "called in a process forked after shmem_init: the PE belongs to the parent (the \
             child has private copies of the symmetric data; exec, or use the parent)",
        );
    }
    let g = lock();
    // SAFETY: calls are serialised (see `Slot`); only `install`/`take` write the slot, and
    // not while an `Access` of another thread lives (they take the lock too).
    match unsafe { &*SLOT.0.get() } {
        Some(state) => Access { _g: g, state },
        None if FINALIZED.load(Ordering::Relaxed) => fatal(routine, "called after shmem_finalize"),
        None => fatal(
            routine,
            "called before shmem_init (call shmem_init first; run the program with gdarun -n N)",
        ),
    }
}

/// Whether `shmem_finalize` has run in this process.
pub(crate) fn finalized() -> bool {
    FINALIZED.load(Ordering::Relaxed)
}

/// Whether a PE is installed.
pub(crate) fn initialized() -> bool {
    let _g = lock();
    // SAFETY: as in `pe`.
    unsafe { (*SLOT.0.get()).is_some() }
}

pub(crate) fn install(p: Box<dyn CPe>) {
    let _g = lock();
    for ((a, l), (addr, len)) in RANGES.iter().zip(p.regions()) {
        a.store(addr, Ordering::Relaxed);
        l.store(len, Ordering::Relaxed);
    }
    static ATFORK: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function with no state of its own to run in fork's child.
    ATFORK.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
    });
    // SAFETY: as in `pe`; no reference from `pe` is live across `shmem_init`.
    unsafe {
        *SLOT.0.get() = Some(State {
            fast: gda_shmem::erased::P2pView::new(p.as_ref()),
            pe: p,
            teams: std::cell::RefCell::new(Vec::new()),
            ctxs: std::cell::RefCell::new(Vec::new()),
        });
    };
}

/// Removes the PE (dropping it is the collective finalize).
pub(crate) fn take() -> Option<Box<dyn CPe>> {
    let _g = lock();
    FINALIZED.store(true, Ordering::Relaxed);
    // SAFETY: as in `install`.
    unsafe { (*SLOT.0.get()).take() }.map(|s| s.pe)
}

/// Prints `gda shmem: <routine>: <what>`, tells the other PEs, exits with status 1 (without
/// the collective finalize, which the failed PE cannot join).
pub(crate) fn fatal(routine: &str, what: &str) -> ! {
    // One write: the PEs of a job share one stderr.
    gda_shmem::diag!("gda shmem: {routine}: {what}");
    if forked() {
        // The PE is the parent's: neither abort its job nor finalize it (exit's handler
        // knows).
        std::process::exit(1);
    }
    if let Some(p) = take() {
        p.abort(&format!("{routine}: {what}"));
        std::mem::forget(p);
    }
    std::process::exit(1)
}

/// A local buffer of `len` bytes a routine reads or writes (`what`: "source" or
/// "destination"); NULL with a non-zero length is a fatal error naming `routine`, not a SIGSEGV.
#[inline(always)]
pub(crate) fn local_buffer(routine: &str, p: *const u8, len: usize, what: &str) {
    if p.is_null() && len > 0 {
        null_buffer(routine, len, what);
    }
}

/// The fatal error of [`local_buffer`], out of the put/get hot path.
#[cold]
#[inline(never)]
fn null_buffer(routine: &str, len: usize, what: &str) -> ! {
    let verb = if what == "source" { "put" } else { "get" };
    fatal(
        routine,
        &format!("the local {what} is NULL ({len} bytes to {verb})"),
    )
}

/// `r`'s value, or a fatal error naming `routine`.
pub(crate) fn check<T>(routine: &str, r: Result<T>) -> T {
    r.unwrap_or_else(|e: ShmemError| fatal(routine, &e.to_string()))
}

/// Waits until `test` holds (a fatal error at the PE's timeout, or when the job breaks down).
/// A multithreaded program's other threads keep calling meanwhile: the lock is released
/// between polls, so a wait on a flag another thread of this PE sets cannot deadlock.
pub(crate) fn wait(
    routine: &str,
    what: &dyn Fn() -> String,
    test: &mut dyn FnMut(&dyn CPe) -> Result<bool>,
) {
    if !multiple() {
        let p = pe(routine);
        let pr: &dyn CPe = &*p;
        check(routine, p.wait_on(what, &mut || test(pr)));
        return;
    }
    let limit = pe(routine).timeout();
    let start = std::time::Instant::now();
    let mut next_health = start;
    loop {
        {
            let p = pe(routine);
            if check(routine, test(&*p)) {
                return;
            }
            // What gda-shmem's own waits do every 10 ms: notice a dead peer or a broken
            // bootstrap at once (not at the timeout), and keep completions flowing.
            if next_health.elapsed() >= std::time::Duration::from_millis(10) {
                next_health = std::time::Instant::now();
                check(routine, p.poll_health(what));
            }
        }
        if start.elapsed() > limit {
            fatal(
                routine,
                &format!(
                    "timed out after {limit:?} waiting for {} (GDA_SHMEM_TIMEOUT_MS)",
                    what()
                ),
            );
        }
        std::thread::yield_now();
    }
}

/// A PE number from C, or a fatal error.
pub(crate) fn target(routine: &str, pe: std::ffi::c_int) -> u32 {
    let n = self::pe(routine).n();
    match u32::try_from(pe) {
        Ok(p) if p < n => p,
        _ => fatal(routine, &format!("PE {pe} is not in 0..{n}")),
    }
}

/// `SHMEM_CMP_*` from C, or a fatal error.
pub(crate) fn cmp(routine: &str, c: std::ffi::c_int) -> Cmp {
    match c {
        0 => Cmp::Eq,
        1 => Cmp::Ne,
        2 => Cmp::Gt,
        3 => Cmp::Ge,
        4 => Cmp::Lt,
        5 => Cmp::Le,
        o => fatal(routine, &format!("{o} is not a SHMEM_CMP_* value")),
    }
}
