//! This process's PE, the routines' access to it, and fatal errors.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

use gda_shmem::{Cmp, Pe, Result, ShmemError, Sym, Width};

/// An atomic operation on a `w`-wide operand (values as zero-extended bits).
#[derive(Clone, Copy, Debug)]
pub enum AmoOp {
    /// Read.
    Fetch,
    /// Store.
    Set(u64),
    /// Exchange.
    Swap(u64),
    /// Compare (first) and swap in (second).
    CompareSwap(u64, u64),
    /// Add (wrapping).
    Add(u64),
    /// Bitwise and.
    And(u64),
    /// Bitwise or.
    Or(u64),
    /// Bitwise xor.
    Xor(u64),
}

/// The type of a point-to-point synchronisation variable (its width and signedness decide the
/// comparison).
#[derive(Clone, Copy, Debug)]
pub enum SyncTy {
    /// `int32_t`, `int`.
    I32,
    /// `int64_t`, `long`, `long long`, `ptrdiff_t`.
    I64,
    /// `uint32_t`, `unsigned int`.
    U32,
    /// `uint64_t`, `unsigned long`, `unsigned long long`, `size_t`.
    U64,
}

/// What the C routines need of a PE, with the provider erased.
pub trait CPe {
    /// This PE.
    fn me(&self) -> u32;
    /// PEs.
    fn n(&self) -> u32;
    /// Collective allocation of `bytes` aligned to `align`.
    fn malloc(&self, align: usize, bytes: usize) -> Result<*mut u8>;
    /// Usable bytes of the allocation starting at `p`.
    fn allocation_bytes(&self, p: *const u8) -> Result<usize>;
    /// Collective free of what [`CPe::malloc`] returned.
    fn free(&self, p: *mut u8) -> Result<()>;
    /// `len` bytes at `src` (any local memory) to symmetric `dst` on `pe`.
    ///
    /// # Safety
    /// `src` is valid for `len` bytes.
    unsafe fn put(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        pe: u32,
        nbi: bool,
    ) -> Result<()>;
    /// `len` bytes of symmetric `src` on `pe` to `dst` (any local memory).
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes.
    unsafe fn get(&self, dst: *mut u8, src: *const u8, len: usize, pe: u32) -> Result<()>;
    /// An atomic on the `w`-wide symmetric operand at `addr` of `pe`; the old value.
    fn amo(&self, addr: *mut u8, w: Width, op: AmoOp, pe: u32) -> Result<u64>;
    /// `*ivar <cmp> value` on this PE: waits for it (`wait`) or tests it once.
    fn sync(&self, ivar: *mut u8, ty: SyncTy, cmp: Cmp, value: u64, wait: bool) -> Result<bool>;
    /// Where `pe`'s copy of the symmetric `addr` is mapped here, if `pe` is reached by
    /// load/store.
    fn ptr(&self, addr: *const u8, pe: u32) -> Result<Option<*mut u8>>;
    /// Whether `addr` lies in the symmetric heap.
    fn in_heap(&self, addr: *const u8) -> bool;
    /// Ordering of puts to each PE.
    fn fence(&self);
    /// Completion of everything this PE issued.
    fn quiet(&self) -> Result<()>;
    /// Quiet, then every PE.
    fn barrier_all(&self) -> Result<()>;
    /// Every PE, no quiet.
    fn sync_all(&self) -> Result<()>;
    /// Tells the other PEs this one failed.
    fn abort(&self, why: &str);
}

/// `T`-typed symmetric operand at `addr`.
fn operand<T: gda_shmem::Elem>(pe: &Pe<impl gda_hal::Provider>, addr: *const u8) -> Result<Sym<T>> {
    pe.sym_at(addr.cast::<T>(), 1)
}

fn amo_typed<T, P>(pe: &Pe<P>, s: Sym<T>, op: AmoOp, target: u32) -> Result<u64>
where
    T: gda_shmem::AtomicInt,
    P: gda_hal::Provider,
{
    let v = |b: u64| T::from_bits(b);
    Ok(match op {
        AmoOp::Fetch => pe.atomic_fetch(s, 0, target)?.to_bits(),
        AmoOp::Set(x) => {
            pe.atomic_set(s, 0, v(x), target)?;
            0
        }
        AmoOp::Swap(x) => pe.atomic_swap(s, 0, v(x), target)?.to_bits(),
        AmoOp::CompareSwap(c, x) => pe.atomic_compare_swap(s, 0, v(c), v(x), target)?.to_bits(),
        AmoOp::Add(x) => pe.atomic_fetch_add(s, 0, v(x), target)?.to_bits(),
        AmoOp::And(x) => pe.atomic_fetch_and(s, 0, v(x), target)?.to_bits(),
        AmoOp::Or(x) => pe.atomic_fetch_or(s, 0, v(x), target)?.to_bits(),
        AmoOp::Xor(x) => pe.atomic_fetch_xor(s, 0, v(x), target)?.to_bits(),
    })
}

fn sync_typed<T, P>(pe: &Pe<P>, s: Sym<T>, cmp: Cmp, value: u64, wait: bool) -> Result<bool>
where
    T: gda_shmem::AtomicInt + PartialOrd,
    P: gda_hal::Provider,
{
    let v = T::from_bits(value);
    if wait {
        pe.wait_until(s, 0, cmp, v)?;
        Ok(true)
    } else {
        pe.test(s, 0, cmp, v)
    }
}

impl<P: gda_hal::Provider> CPe for Pe<P> {
    fn me(&self) -> u32 {
        self.my_pe()
    }
    fn n(&self) -> u32 {
        self.n_pes()
    }
    fn malloc(&self, align: usize, bytes: usize) -> Result<*mut u8> {
        let s = self.align::<u8>(align, bytes)?;
        self.local_ptr(s)
    }
    fn allocation_bytes(&self, p: *const u8) -> Result<usize> {
        Pe::allocation_bytes(self, self.sym_at(p, 1)?)
    }
    fn free(&self, p: *mut u8) -> Result<()> {
        self.free(self.sym_at(p, 1)?)
    }
    unsafe fn put(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        pe: u32,
        nbi: bool,
    ) -> Result<()> {
        let d = self.sym_at(dst, len)?;
        // SAFETY: `src` is valid for `len` bytes (caller).
        let data = unsafe { std::slice::from_raw_parts(src, len) };
        if nbi {
            self.put_nbi(d, 0, data, pe)
        } else {
            self.put(d, 0, data, pe)
        }
    }
    unsafe fn get(&self, dst: *mut u8, src: *const u8, len: usize, pe: u32) -> Result<()> {
        let s = self.sym_at(src, len)?;
        // SAFETY: `dst` is valid for `len` bytes (caller).
        let out = unsafe { std::slice::from_raw_parts_mut(dst, len) };
        Pe::get(self, out, s, 0, pe)
    }
    fn amo(&self, addr: *mut u8, w: Width, op: AmoOp, pe: u32) -> Result<u64> {
        match w {
            Width::W32 => amo_typed(self, operand::<u32>(self, addr)?, op, pe),
            Width::W64 => amo_typed(self, operand::<u64>(self, addr)?, op, pe),
        }
    }
    fn sync(&self, ivar: *mut u8, ty: SyncTy, cmp: Cmp, value: u64, wait: bool) -> Result<bool> {
        match ty {
            SyncTy::I32 => sync_typed(self, operand::<i32>(self, ivar)?, cmp, value, wait),
            SyncTy::I64 => sync_typed(self, operand::<i64>(self, ivar)?, cmp, value, wait),
            SyncTy::U32 => sync_typed(self, operand::<u32>(self, ivar)?, cmp, value, wait),
            SyncTy::U64 => sync_typed(self, operand::<u64>(self, ivar)?, cmp, value, wait),
        }
    }
    fn ptr(&self, addr: *const u8, pe: u32) -> Result<Option<*mut u8>> {
        self.remote_ptr(self.sym_at(addr, 1)?, pe)
    }
    fn in_heap(&self, addr: *const u8) -> bool {
        self.sym_at(addr, 1).is_ok()
    }
    fn fence(&self) {
        Pe::fence(self);
    }
    fn quiet(&self) -> Result<()> {
        Pe::quiet(self)
    }
    fn barrier_all(&self) -> Result<()> {
        Pe::barrier_all(self)
    }
    fn sync_all(&self) -> Result<()> {
        Pe::sync_all(self)
    }
    fn abort(&self, why: &str) {
        Pe::abort(self, why);
    }
}

/// The PE slot. Accessed without a lock: the library provides thread levels up to
/// `SHMEM_THREAD_SERIALIZED`, under which the program never runs two SHMEM calls at once, and
/// orders them (so each call sees the slot as the previous one left it).
struct Slot(UnsafeCell<Option<Box<dyn CPe>>>);

// SAFETY: see `Slot`: calls are serialised by the program (the thread levels provided).
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot(UnsafeCell::new(None));
/// `shmem_finalize` ran (a later `shmem_init` is an error, as the specification says).
static FINALIZED: AtomicBool = AtomicBool::new(false);

/// This process's PE, or a fatal error naming `routine`.
pub(crate) fn pe(routine: &str) -> &'static dyn CPe {
    // SAFETY: calls are serialised (see `Slot`); only `install`/`take` write the slot.
    match unsafe { &*SLOT.0.get() } {
        Some(p) => p.as_ref(),
        None if FINALIZED.load(Ordering::Relaxed) => fatal(routine, "called after shmem_finalize"),
        None => fatal(
            routine,
            "called before shmem_init (call shmem_init first; run the program with gdarun -n N)",
        ),
    }
}

/// Whether a PE is installed.
pub(crate) fn initialized() -> bool {
    // SAFETY: as in `pe`.
    unsafe { (*SLOT.0.get()).is_some() }
}

pub(crate) fn install(p: Box<dyn CPe>) {
    // SAFETY: as in `pe`; no reference from `pe` is live across `shmem_init`.
    unsafe { *SLOT.0.get() = Some(p) };
}

/// Removes the PE (dropping it is the collective finalize).
pub(crate) fn take() -> Option<Box<dyn CPe>> {
    FINALIZED.store(true, Ordering::Relaxed);
    // SAFETY: as in `install`.
    unsafe { (*SLOT.0.get()).take() }
}

/// Prints `gda shmem: <routine>: <what>`, tells the other PEs, exits with status 1 (without
/// the collective finalize, which the failed PE cannot join).
pub(crate) fn fatal(routine: &str, what: &str) -> ! {
    use std::io::Write;
    // One write: the PEs of a job share one stderr.
    let line = format!("gda shmem: {routine}: {what}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(p) = take() {
        p.abort(&format!("{routine}: {what}"));
        std::mem::forget(p);
    }
    std::process::exit(1)
}

/// `r`'s value, or a fatal error naming `routine`.
pub(crate) fn check<T>(routine: &str, r: Result<T>) -> T {
    r.unwrap_or_else(|e: ShmemError| fatal(routine, &e.to_string()))
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
