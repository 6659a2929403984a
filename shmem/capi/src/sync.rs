//! Signals (put-with-signal, fetch, wait), distributed locks, and the multi-variable waits and
//! tests (`_all`, `_any`, `_some` and their `_vector` forms).

use std::ffi::{c_int, c_long, c_void};

use gda_shmem::SignalOp;

use crate::amo::CInt;
use crate::state::{CPe, Multi, check, cmp, fatal, pe, target, wait};

// ---- Signals -------------------------------------------------------------------------------

/// `SHMEM_SIGNAL_*` from C, or a fatal error.
fn sig_op(routine: &str, op: c_int) -> SignalOp {
    match op {
        0 => SignalOp::Set,
        1 => SignalOp::Add,
        o => fatal(
            routine,
            &format!("{o} is not SHMEM_SIGNAL_SET or SHMEM_SIGNAL_ADD"),
        ),
    }
}

/// Put of `len` bytes, then the signal.
///
/// # Safety
/// `src` is valid for `len` bytes.
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
pub(crate) unsafe fn put_signal(
    routine: &str,
    dst: *mut u8,
    src: *const u8,
    len: usize,
    sig: *mut u64,
    signal: u64,
    op: c_int,
    to: c_int,
) {
    crate::state::local_buffer(routine, src, len, "source");
    let (op, t) = (sig_op(routine, op), target(routine, to));
    // SAFETY: the caller's source.
    check(routine, unsafe {
        pe(routine).put_signal(dst, src, len, sig.cast(), signal, op, t)
    });
}

macro_rules! put_signals {
    ($($name:ident: $w:expr),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_put_signal`.\n\n# Safety\n`source` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _put_signal>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int) {
            let r = concat!("shmem_", stringify!($name), "_put_signal");
            let len = nelems.checked_mul($w).unwrap_or_else(|| fatal(r, "size overflows"));
            // SAFETY: the caller's source.
            unsafe { put_signal(r, dest.cast(), source.cast(), len, sig_addr, signal, sig_op, pe) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_put_signal_nbi`.\n\n# Safety\n`source` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _put_signal_nbi>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int) {
            let r = concat!("shmem_", stringify!($name), "_put_signal_nbi");
            let len = nelems.checked_mul($w).unwrap_or_else(|| fatal(r, "size overflows"));
            // SAFETY: the caller's source.
            unsafe { put_signal(r, dest.cast(), source.cast(), len, sig_addr, signal, sig_op, pe) };
        }
    )* } };
}

put_signals!(
    float: 4, double: 8, longdouble: 16, char: 1, schar: 1, short: 2, int: 4, long: 8,
    longlong: 8, uchar: 1, ushort: 2, uint: 4, ulong: 8, ulonglong: 8, int8: 1, int16: 2,
    int32: 4, int64: 8, uint8: 1, uint16: 2, uint32: 4, uint64: 8, size: 8, ptrdiff: 8,
);

/// `shmem_putmem_signal`.
///
/// # Safety
/// `source` is valid for `nelems` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_putmem_signal(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    sig_addr: *mut u64,
    signal: u64,
    sig_op: c_int,
    pe: c_int,
) {
    // SAFETY: the caller's source.
    unsafe {
        put_signal(
            "shmem_putmem_signal",
            dest.cast(),
            source.cast(),
            nelems,
            sig_addr,
            signal,
            sig_op,
            pe,
        )
    };
}

/// `shmem_putmem_signal_nbi`.
///
/// # Safety
/// `source` is valid for `nelems` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_putmem_signal_nbi(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    sig_addr: *mut u64,
    signal: u64,
    sig_op: c_int,
    pe: c_int,
) {
    // SAFETY: the caller's source.
    unsafe {
        put_signal(
            "shmem_putmem_signal_nbi",
            dest.cast(),
            source.cast(),
            nelems,
            sig_addr,
            signal,
            sig_op,
            pe,
        )
    };
}

macro_rules! sized_put_signals {
    ($($bits:literal),*) => { paste::paste! { $(
        #[doc = concat!("`shmem_put", $bits, "_signal`.\n\n# Safety\n`source` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_put $bits _signal>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int) {
            let r = concat!("shmem_put", $bits, "_signal");
            let len = nelems.checked_mul($bits / 8).unwrap_or_else(|| fatal(r, "size overflows"));
            // SAFETY: the caller's source.
            unsafe { put_signal(r, dest.cast(), source.cast(), len, sig_addr, signal, sig_op, pe) };
        }
        #[doc = concat!("`shmem_put", $bits, "_signal_nbi`.\n\n# Safety\n`source` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_put $bits _signal_nbi>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int, pe: c_int) {
            let r = concat!("shmem_put", $bits, "_signal_nbi");
            let len = nelems.checked_mul($bits / 8).unwrap_or_else(|| fatal(r, "size overflows"));
            // SAFETY: the caller's source.
            unsafe { put_signal(r, dest.cast(), source.cast(), len, sig_addr, signal, sig_op, pe) };
        }
    )* } };
}
sized_put_signals!(8, 16, 32, 64, 128);

/// `shmem_signal_fetch`: this PE's signal word.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_signal_fetch(sig_addr: *const u64) -> u64 {
    let r = "shmem_signal_fetch";
    check(r, pe(r).signal_fetch(sig_addr.cast()))
}

/// `shmem_signal_wait_until`: waits for this PE's signal word to satisfy the comparison, and
/// returns it.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_signal_wait_until(sig_addr: *mut u64, cmp_: c_int, cmp_value: u64) -> u64 {
    let r = "shmem_signal_wait_until";
    let c = cmp(r, cmp_);
    wait(
        r,
        &|| format!("signal {sig_addr:p} {c:?} {cmp_value}"),
        &mut |p| {
            p.sync(
                sig_addr.cast(),
                crate::state::SyncTy::U64,
                c,
                cmp_value,
                false,
            )
        },
    );
    check(r, pe(r).signal_fetch(sig_addr.cast()))
}

// ---- Locks ---------------------------------------------------------------------------------

// The lock protocol is gda-shmem's (`Pe::test_lock`, `Pe::clear_lock`: the word on PE 0 holds
// 0 when free, the holder's PE number + 1 otherwise). A blocking `shmem_set_lock` polls the
// non-blocking form here so that other threads of a multithreaded program run between polls.

/// `shmem_set_lock`: waits until this PE holds the lock.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_set_lock(lock: *mut c_long) {
    let r = "shmem_set_lock";
    wait(r, &|| format!("the lock {lock:p}"), &mut |p| {
        p.lock(lock.cast(), false)
    });
}

/// `shmem_test_lock`: takes the lock if it is free (0), else returns 1 at once.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_test_lock(lock: *mut c_long) -> c_int {
    let r = "shmem_test_lock";
    let p = pe(r);
    c_int::from(!check(r, p.lock(lock.cast(), false)))
}

/// `shmem_clear_lock`: completes this PE's accesses (quiet), then releases the lock. Releasing
/// a lock this PE does not hold is an error.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_clear_lock(lock: *mut c_long) {
    let r = "shmem_clear_lock";
    let p = pe(r);
    check(r, p.lock(lock.cast(), true));
}

// ---- Multi-variable waits and tests --------------------------------------------------------

/// Which of `ivars[0..n]` a wait considers (`status[i] != 0` excludes `i`).
///
/// # Safety
/// `status` is null or valid for `n` reads.
unsafe fn considered(status: *const c_int, n: usize) -> Vec<usize> {
    (0..n)
        // SAFETY: `i < n` and `status` is valid for `n` (caller).
        .filter(|&i| status.is_null() || unsafe { *status.add(i) } == 0)
        .collect()
}

/// Tests (or, with `block`, waits for) `kind` of the considered `ivars` through gda-shmem's
/// multi-variable tests ([`CPe::test_vars`]); returns the indices that hold (for `All`: all
/// of them when they do, else none).
///
/// # Safety
/// `ivars` and the optional arrays are valid for `n` elements.
#[allow(clippy::too_many_arguments)] // every parameter of the C routines
unsafe fn multi<T: CInt>(
    routine: &str,
    kind: Multi,
    block: bool,
    ivars: *mut T,
    n: usize,
    status: *const c_int,
    c: c_int,
    one: T,
    values: *const T,
) -> Vec<usize> {
    let c = cmp(routine, c);
    if n == 0 {
        return Vec::new();
    }
    let skip: Vec<bool> = (0..n)
        // SAFETY: `status` is null or valid for `n` (caller).
        .map(|i| !status.is_null() && unsafe { *status.add(i) } != 0)
        .collect();
    let mut found = Vec::new();
    let mut scan = |p: &dyn CPe| -> gda_shmem::Result<bool> {
        // SAFETY: `values` is null or valid for `n` elements (caller).
        let (holds, f) = unsafe {
            p.test_vars(
                kind,
                ivars.cast(),
                T::SYNC,
                n,
                &skip,
                c,
                one.bits(),
                values.cast(),
            )
        }?;
        found = f;
        Ok(holds)
    };
    if block {
        wait(
            routine,
            &|| format!("{n} variables at {ivars:p} {c:?}"),
            &mut scan,
        );
    } else {
        let p = pe(routine);
        check(routine, scan(&*p));
    }
    found
}

/// Writes `found` to `indices` and returns its length.
///
/// # Safety
/// `indices` is valid for as many writes as there are considered elements.
unsafe fn report(found: &[usize], indices: *mut usize) -> usize {
    for (k, &i) in found.iter().enumerate() {
        // SAFETY: at most one write per considered element (caller).
        unsafe { *indices.add(k) = i };
    }
    found.len()
}

macro_rules! multis {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_all`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_all>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_value: $t) {
            // SAFETY: the caller's arrays.
            unsafe { multi(concat!("shmem_", stringify!($name), "_wait_until_all"), Multi::All, true, ivars, nelems, status, cmp, cmp_value, std::ptr::null()) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_any`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_any>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's arrays.
            let f = unsafe { multi(concat!("shmem_", stringify!($name), "_wait_until_any"), Multi::Any, true, ivars, nelems, status, cmp, cmp_value, std::ptr::null()) };
            f.first().copied().unwrap_or(usize::MAX)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_some`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_some>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's arrays.
            unsafe { report(&multi(concat!("shmem_", stringify!($name), "_wait_until_some"), Multi::Some, true, ivars, nelems, status, cmp, cmp_value, std::ptr::null()), indices) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_all_vector`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_all_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_values: *const $t) {
            // SAFETY: the caller's arrays.
            unsafe { multi(concat!("shmem_", stringify!($name), "_wait_until_all_vector"), Multi::All, true, ivars, nelems, status, cmp, Default::default(), cmp_values) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_any_vector`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_any_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_values: *const $t) -> usize {
            // SAFETY: the caller's arrays.
            let f = unsafe { multi(concat!("shmem_", stringify!($name), "_wait_until_any_vector"), Multi::Any, true, ivars, nelems, status, cmp, Default::default(), cmp_values) };
            f.first().copied().unwrap_or(usize::MAX)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until_some_vector`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _wait_until_some_vector>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp: c_int, cmp_values: *const $t) -> usize {
            // SAFETY: the caller's arrays.
            unsafe { report(&multi(concat!("shmem_", stringify!($name), "_wait_until_some_vector"), Multi::Some, true, ivars, nelems, status, cmp, Default::default(), cmp_values), indices) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_all`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _test_all>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_value: $t) -> c_int {
            // SAFETY: the caller's arrays.
            let idx = unsafe { considered(status, nelems) };
            // SAFETY: as above.
            let f = unsafe { multi(concat!("shmem_", stringify!($name), "_test_all"), Multi::All, false, ivars, nelems, status, cmp, cmp_value, std::ptr::null()) };
            c_int::from(f.len() == idx.len())
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_any`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _test_any>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's arrays.
            let f = unsafe { multi(concat!("shmem_", stringify!($name), "_test_any"), Multi::Any, false, ivars, nelems, status, cmp, cmp_value, std::ptr::null()) };
            f.first().copied().unwrap_or(usize::MAX)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_some`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _test_some>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp: c_int, cmp_value: $t) -> usize {
            // SAFETY: the caller's arrays.
            unsafe { report(&multi(concat!("shmem_", stringify!($name), "_test_some"), Multi::Some, false, ivars, nelems, status, cmp, cmp_value, std::ptr::null()), indices) }
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_all_vector`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _test_all_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_values: *const $t) -> c_int {
            // SAFETY: the caller's arrays.
            let idx = unsafe { considered(status, nelems) };
            // SAFETY: as above.
            let f = unsafe { multi(concat!("shmem_", stringify!($name), "_test_all_vector"), Multi::All, false, ivars, nelems, status, cmp, Default::default(), cmp_values) };
            c_int::from(f.len() == idx.len())
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_any_vector`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _test_any_vector>](ivars: *mut $t, nelems: usize, status: *const c_int, cmp: c_int, cmp_values: *const $t) -> usize {
            // SAFETY: the caller's arrays.
            let f = unsafe { multi(concat!("shmem_", stringify!($name), "_test_any_vector"), Multi::Any, false, ivars, nelems, status, cmp, Default::default(), cmp_values) };
            f.first().copied().unwrap_or(usize::MAX)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test_some_vector`.\n\n# Safety\nThe arrays are valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _test_some_vector>](ivars: *mut $t, nelems: usize, indices: *mut usize, status: *const c_int, cmp: c_int, cmp_values: *const $t) -> usize {
            // SAFETY: the caller's arrays.
            unsafe { report(&multi(concat!("shmem_", stringify!($name), "_test_some_vector"), Multi::Some, false, ivars, nelems, status, cmp, Default::default(), cmp_values), indices) }
        }
    )* } };
}

use std::ffi::{c_longlong, c_short, c_uint, c_ulong, c_ulonglong, c_ushort};
multis!(
    short: c_short, ushort: c_ushort, int: c_int, long: c_long, longlong: c_longlong, uint: c_uint, ulong: c_ulong,
    ulonglong: c_ulonglong, int32: i32, int64: i64, uint32: u32, uint64: u64, size: usize,
    ptrdiff: isize,
);
