//! Remote memory access: `putmem`/`getmem`, the sized forms, and every standard RMA type's
//! `put`, `get`, `p`, `g`, `iput`, `iget` and non-blocking forms.
//!
//! Every routine checks that the symmetric side lies in the symmetric heap
//! ([`gda_shmem::Pe::sym_at`]); the local side is any memory of the caller's (its validity is
//! the C caller's obligation, as in every OpenSHMEM library).

use std::ffi::{c_int, c_void};

use crate::state::{check, fatal, local_buffer, pe, target};

/// `len` bytes from local `src` to symmetric `dst` on `target`.
///
/// # Safety
/// `src` is valid for `len` bytes.
pub(crate) unsafe fn put(
    routine: &str,
    dst: *mut u8,
    src: *const u8,
    len: usize,
    to: c_int,
    nbi: bool,
) {
    local_buffer(routine, src, len, "source");
    {
        let a = pe(routine);
        if let Some(d) = a.state().fast.local(dst as usize, len, to) {
            // SAFETY: `d` is the target's mapping of the checked symmetric range (kept mapped
            // while the PE lives, and the `Access` holds it); `src` is valid (caller). As the
            // P2P transport's put.
            unsafe { gda_hal::sym::sym_copy(d, src, len) };
            return;
        }
    }
    let t = target(routine, to);
    if len == 0 {
        return;
    }
    // SAFETY: `src` is valid for `len` bytes (caller).
    check(routine, unsafe { pe(routine).put(dst, src, len, t, nbi) });
}

/// `len` bytes from symmetric `src` on `target` to local `dst`.
///
/// # Safety
/// `dst` is valid for `len` bytes.
pub(crate) unsafe fn get(routine: &str, dst: *mut u8, src: *const u8, len: usize, from: c_int) {
    local_buffer(routine, dst, len, "destination");
    {
        let a = pe(routine);
        if let Some(s) = a.state().fast.local(src as usize, len, from) {
            // As the P2P transport's get: stores the target published are visible to the copy.
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            // SAFETY: `s` is the target's mapping of the checked symmetric range; `dst` is
            // valid (caller).
            unsafe { gda_hal::sym::sym_copy(dst, s, len) };
            return;
        }
    }
    let t = target(routine, from);
    if len == 0 {
        return;
    }
    // SAFETY: `dst` is valid for `len` bytes (caller).
    check(routine, unsafe { pe(routine).get(dst, src, len, t) });
}

/// Bytes of `n` elements of `size` bytes, or a fatal error.
fn bytes(routine: &str, n: usize, size: usize) -> usize {
    n.checked_mul(size)
        .unwrap_or_else(|| fatal(routine, &format!("{n} elements of {size} bytes overflow")))
}

/// A stride from C (`ptrdiff_t`, in elements), which must be positive.
fn stride(routine: &str, s: isize) -> usize {
    usize::try_from(s)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or_else(|| {
            fatal(
                routine,
                &format!("stride {s} is not a positive number of elements"),
            )
        })
}

/// Which way a strided transfer goes.
#[derive(Clone, Copy)]
pub(crate) enum Dir {
    /// Local `src` to symmetric `dst` on the PE (`iput`).
    Put,
    /// Symmetric `src` on the PE to local `dst` (`iget`).
    Get,
}

/// Strided transfer: element `k` of `src` (stride `src_s`) to element `k` of `dst` (stride
/// `dst_s`), elements of `size` bytes, one element at a time — once both whole ranges, from the
/// first element to the end of the last, are checked, as the contiguous routines check theirs:
/// the symmetric one in the symmetric memory, the local one mapped readable (a put's source)
/// or writable (a get's destination). A range that fails is a fatal error before anything
/// moved, never a transfer cut short or a SIGSEGV part-way.
///
/// # Safety
/// The local side (`src` for a put, `dst` for a get) is valid for the strided elements.
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameters, plus size and way
pub(crate) unsafe fn strided(
    dir: Dir,
    routine: &str,
    dst: *mut u8,
    src: *const u8,
    dst_s: isize,
    src_s: isize,
    n: usize,
    size: usize,
    to: c_int,
) {
    let (ds, ss) = (stride(routine, dst_s), stride(routine, src_s));
    // Offsets in bytes of element `k` on each side, overflow-checked.
    let at = |k: usize, s: usize| bytes(routine, bytes(routine, k, s), size);
    if n == 0 || size == 0 {
        return;
    }
    // Bytes from the first element to the end of the last.
    let span = |s: usize| {
        at(n - 1, s)
            .checked_add(size)
            .unwrap_or_else(|| fatal(routine, &format!("{n} elements of {size} bytes overflow")))
    };
    let (sym, sym_span, local, local_span, what) = match dir {
        Dir::Put => (dst.cast_const(), span(ds), src, span(ss), "source"),
        Dir::Get => (src, span(ss), dst.cast_const(), span(ds), "destination"),
    };
    let sym_end = (sym as usize).checked_add(sym_span);
    let local_end = (local as usize).checked_add(local_span);
    if sym_end.is_none() || local_end.is_none() {
        fatal(
            routine,
            &format!("{n} elements at stride {ds} / {ss} run past the end of the address space"),
        );
    }
    local_buffer(routine, local, local_span, what);
    target(routine, to);
    {
        let a = pe(routine);
        check(routine, a.sym_range(sym, sym_span));
        // The local range: this PE's symmetric memory is mapped read-write; anything else is
        // looked up in the process's mappings.
        let [heap, data] = a.regions();
        let l = local as usize;
        let inside = |(base, len): (usize, usize)| {
            l.checked_sub(base)
                .is_some_and(|off| off <= len && local_span <= len - off)
        };
        if !inside(heap) && !inside(data) {
            let write = matches!(dir, Dir::Get);
            if gda_os::pages::accessible(l, local_span, write).is_ok_and(|ok| !ok) {
                fatal(
                    routine,
                    &format!(
                        "the local {what} [{local:p}, +{local_span} bytes) ({n} elements at \
                         stride {}) is not {} memory of this process; nothing was moved",
                        if write { ds } else { ss },
                        if write { "writable" } else { "readable" }
                    ),
                );
            }
        }
    }
    for k in 0..n {
        let (d, s) = (dst.wrapping_add(at(k, ds)), src.wrapping_add(at(k, ss)));
        match dir {
            // SAFETY: element `k` of the caller's strided source.
            Dir::Put => unsafe { put(routine, d, s, size, to, false) },
            // SAFETY: element `k` of the caller's strided destination.
            Dir::Get => unsafe { get(routine, d, s, size, to) },
        }
    }
}

/// `shmem_putmem`.
///
/// # Safety
/// `source` is valid for `nelems` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_putmem(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe: c_int,
) {
    // SAFETY: the caller's source.
    unsafe {
        put(
            "shmem_putmem",
            dest.cast(),
            source.cast(),
            nelems,
            pe,
            false,
        )
    };
}

/// `shmem_getmem`.
///
/// # Safety
/// `dest` is valid for `nelems` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_getmem(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe: c_int,
) {
    // SAFETY: the caller's destination.
    unsafe { get("shmem_getmem", dest.cast(), source.cast(), nelems, pe) };
}

/// `shmem_putmem_nbi`: complete (source reusable, data delivered) by `shmem_quiet`.
///
/// # Safety
/// `source` is valid for `nelems` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_putmem_nbi(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe: c_int,
) {
    // SAFETY: the caller's source.
    unsafe {
        put(
            "shmem_putmem_nbi",
            dest.cast(),
            source.cast(),
            nelems,
            pe,
            true,
        )
    };
}

/// `shmem_getmem_nbi` (done at once: a blocking get also meets the non-blocking contract).
///
/// # Safety
/// `dest` is valid for `nelems` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_getmem_nbi(
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe: c_int,
) {
    // SAFETY: the caller's destination.
    unsafe { get("shmem_getmem_nbi", dest.cast(), source.cast(), nelems, pe) };
}

/// The sized forms (`shmem_put32`, …): elements of `$bits` bits.
macro_rules! sized {
    ($($bits:literal),*) => { paste::paste! { $(
        #[doc = concat!("`shmem_put", $bits, "`.\n\n# Safety\n`source` is valid for the elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_put $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe: c_int) {
            let r = concat!("shmem_put", $bits);
            // SAFETY: the caller's source.
            unsafe { put(r, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), pe, false) };
        }
        #[doc = concat!("`shmem_get", $bits, "`.\n\n# Safety\n`dest` is valid for the elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_get $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe: c_int) {
            let r = concat!("shmem_get", $bits);
            // SAFETY: the caller's destination.
            unsafe { get(r, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), pe) };
        }
        #[doc = concat!("`shmem_put", $bits, "_nbi`.\n\n# Safety\n`source` is valid for the elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_put $bits _nbi>](dest: *mut c_void, source: *const c_void, nelems: usize, pe: c_int) {
            let r = concat!("shmem_put", $bits, "_nbi");
            // SAFETY: the caller's source.
            unsafe { put(r, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), pe, true) };
        }
        #[doc = concat!("`shmem_get", $bits, "_nbi`.\n\n# Safety\n`dest` is valid for the elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_get $bits _nbi>](dest: *mut c_void, source: *const c_void, nelems: usize, pe: c_int) {
            let r = concat!("shmem_get", $bits, "_nbi");
            // SAFETY: the caller's destination.
            unsafe { get(r, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), pe) };
        }
        #[doc = concat!("`shmem_iput", $bits, "`.\n\n# Safety\n`source` is valid for the strided elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_iput $bits>](dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int) {
            // SAFETY: the caller's source.
            unsafe { strided(Dir::Put, concat!("shmem_iput", $bits), dest.cast(), source.cast(), dst, sst, nelems, $bits / 8, pe) };
        }
        #[doc = concat!("`shmem_iget", $bits, "`.\n\n# Safety\n`dest` is valid for the strided elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_iget $bits>](dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe: c_int) {
            // SAFETY: the caller's destination.
            unsafe { strided(Dir::Get, concat!("shmem_iget", $bits), dest.cast(), source.cast(), dst, sst, nelems, $bits / 8, pe) };
        }
    )* } };
}
sized!(8, 16, 32, 64, 128);

/// The typed array forms of every standard RMA type (`$t` has the C type's size; it is never
/// read as a value here).
macro_rules! typed_arrays {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_put`.\n\n# Safety\n`source` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _put>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            let r = concat!("shmem_", stringify!($name), "_put");
            // SAFETY: the caller's source.
            unsafe { put(r, dest.cast(), source.cast(), bytes(r, nelems, size_of::<$t>()), pe, false) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_get`.\n\n# Safety\n`dest` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _get>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            let r = concat!("shmem_", stringify!($name), "_get");
            // SAFETY: the caller's destination.
            unsafe { get(r, dest.cast(), source.cast(), bytes(r, nelems, size_of::<$t>()), pe) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_put_nbi`.\n\n# Safety\n`source` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _put_nbi>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            let r = concat!("shmem_", stringify!($name), "_put_nbi");
            // SAFETY: the caller's source.
            unsafe { put(r, dest.cast(), source.cast(), bytes(r, nelems, size_of::<$t>()), pe, true) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_get_nbi`.\n\n# Safety\n`dest` is valid for `nelems` elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _get_nbi>](dest: *mut $t, source: *const $t, nelems: usize, pe: c_int) {
            let r = concat!("shmem_", stringify!($name), "_get_nbi");
            // SAFETY: the caller's destination.
            unsafe { get(r, dest.cast(), source.cast(), bytes(r, nelems, size_of::<$t>()), pe) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_iput`.\n\n# Safety\n`source` is valid for the strided elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _iput>](dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: c_int) {
            // SAFETY: the caller's source.
            unsafe { strided(Dir::Put, concat!("shmem_", stringify!($name), "_iput"), dest.cast(), source.cast(), dst, sst, nelems, size_of::<$t>(), pe) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_iget`.\n\n# Safety\n`dest` is valid for the strided elements.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _iget>](dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize, pe: c_int) {
            // SAFETY: the caller's destination.
            unsafe { strided(Dir::Get, concat!("shmem_", stringify!($name), "_iget"), dest.cast(), source.cast(), dst, sst, nelems, size_of::<$t>(), pe) };
        }
    )* } };
}

/// `p` and `g` of the types Rust passes by value as C does (`long double` is in the header,
/// as inline functions over `shmem_putmem`/`shmem_getmem`).
macro_rules! typed_values {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_p`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _p>](dest: *mut $t, value: $t, pe: c_int) {
            let r = concat!("shmem_", stringify!($name), "_p");
            // SAFETY: `value` is a local of `size_of::<$t>()` bytes.
            unsafe { put(r, dest.cast(), (&raw const value).cast(), size_of::<$t>(), pe, false) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_g`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _g>](source: *const $t, pe: c_int) -> $t {
            let r = concat!("shmem_", stringify!($name), "_g");
            let mut v: $t = Default::default();
            // SAFETY: `v` is a local of `size_of::<$t>()` bytes.
            unsafe { get(r, (&raw mut v).cast(), source.cast(), size_of::<$t>(), pe) };
            v
        }
    )* } };
}

use std::ffi::{
    c_char, c_double, c_float, c_long, c_longlong, c_schar, c_short, c_uchar, c_uint, c_ulong,
    c_ulonglong, c_ushort,
};

/// `long double`'s size and alignment (x86-64 SysV: 16 bytes).
#[allow(non_camel_case_types)]
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct longdouble([u8; 16]);

typed_arrays!(
    float: c_float, double: c_double, longdouble: longdouble, char: c_char, schar: c_schar,
    short: c_short, int: c_int, long: c_long, longlong: c_longlong, uchar: c_uchar,
    ushort: c_ushort, uint: c_uint, ulong: c_ulong, ulonglong: c_ulonglong, int8: i8,
    int16: i16, int32: i32, int64: i64, uint8: u8, uint16: u16, uint32: u32, uint64: u64,
    size: usize, ptrdiff: isize,
);
typed_values!(
    float: c_float, double: c_double, char: c_char, schar: c_schar, short: c_short, int: c_int,
    long: c_long, longlong: c_longlong, uchar: c_uchar, ushort: c_ushort, uint: c_uint,
    ulong: c_ulong, ulonglong: c_ulonglong, int8: i8, int16: i16, int32: i32, int64: i64,
    uint8: u8, uint16: u16, uint32: u32, uint64: u64, size: usize, ptrdiff: isize,
);
