//! Atomics (standard, bitwise, and the 1.3 names), point-to-point synchronisation, ordering and
//! barriers.

use std::ffi::{c_int, c_long, c_longlong, c_uint, c_ulong, c_ulonglong};

use gda_shmem::Width;

use crate::state::{AmoOp, CPe, SyncTy, check, cmp, pe, target};

/// A C value atomics and waits carry as bits.
pub(crate) trait CVal: Copy {
    /// The value's bits, zero-extended from its width.
    fn bits(self) -> u64;
    /// The value from the low bits of its width.
    fn from_bits(b: u64) -> Self;
}

/// A C type atomics operate on (the integers of 32 and 64 bits, and for fetch, set and swap
/// `float` and `double`, moved as their bits).
pub(crate) trait CAmo: CVal {
    const WIDTH: Width;
}

/// A C integer type point-to-point waits and tests operate on.
pub(crate) trait CInt: CVal {
    const SYNC: SyncTy;
}

macro_rules! c_ints {
    ($($t:ty => $s:ident, $u:ty $(, $w:ident)?);* $(;)?) => {$(
        impl CVal for $t {
            fn bits(self) -> u64 { u64::from(self as $u) }
            fn from_bits(b: u64) -> Self { b as $u as $t }
        }
        impl CInt for $t {
            const SYNC: SyncTy = SyncTy::$s;
        }
        $(impl CAmo for $t {
            const WIDTH: Width = Width::$w;
        })?
    )*};
}
c_ints!(i32 => I32, u32, W32; u32 => U32, u32, W32; i64 => I64, u64, W64; u64 => U64, u64, W64;
        isize => I64, u64, W64; usize => U64, u64, W64; i16 => I16, u16; u16 => U16, u16);

macro_rules! c_floats {
    ($($t:ty => $w:ident, $u:ty);* $(;)?) => {$(
        impl CVal for $t {
            fn bits(self) -> u64 { u64::from(self.to_bits()) }
            fn from_bits(b: u64) -> Self { <$t>::from_bits(b as $u) }
        }
        impl CAmo for $t {
            const WIDTH: Width = Width::$w;
        }
    )*};
}
c_floats!(f32 => W32, u32; f64 => W64, u64);

/// `op` on the `T` at symmetric `addr` of PE `to`; the old value.
pub(crate) fn amo<T: CAmo>(routine: &str, addr: *const T, op: AmoOp, to: c_int) -> T {
    {
        let a = pe(routine);
        let w = size_of::<T>();
        if (addr as usize) % w == 0 {
            if let Some(p) = a.state().fast.local(addr as usize, w, to) {
                // SAFETY: `p` is the mapping of an aligned operand of width `w` in a live PE's
                // symmetric memory (the view's range check and the alignment test above).
                return T::from_bits(unsafe { gda_shmem::erased::P2pView::amo(p, T::WIDTH, op) });
            }
        }
    }
    let t = target(routine, to);
    T::from_bits(check(
        routine,
        pe(routine).amo(addr.cast_mut().cast(), T::WIDTH, op, t),
    ))
}

/// A non-blocking fetching atomic (`shmem_<type>_atomic_<op>_nbi`): `op` on the `T` at
/// symmetric `addr` of PE `to`, the old value stored to the local `fetch`. Done at once here
/// (the operation is complete, and `fetch` written, when the call returns), which meets the
/// contract that it is complete by the next `shmem_quiet`.
///
/// # Safety
/// `fetch` is null (a fatal error) or valid for a write of a `T`.
pub(crate) unsafe fn amo_nbi<T: CAmo>(
    routine: &str,
    fetch: *mut T,
    addr: *const T,
    op: AmoOp,
    to: c_int,
) {
    if fetch.is_null() {
        crate::state::fatal(routine, "the local fetch address is NULL");
    }
    let v = amo(routine, addr, op, to);
    // SAFETY: non-null, valid for a write (caller); unaligned is allowed (C's object may sit in
    // a packed structure).
    unsafe { fetch.write_unaligned(v) };
}

/// `*ivar <cmp> value` on this PE: waited for, or tested once.
fn sync<T: CInt>(routine: &str, ivar: *const T, c: c_int, value: T, wait: bool) -> bool {
    let c = cmp(routine, c);
    let test = |p: &dyn CPe| p.sync(ivar.cast_mut().cast(), T::SYNC, c, value.bits(), false);
    if wait {
        crate::state::wait(
            routine,
            &|| format!("{ivar:p} {c:?} {}", value.bits()),
            &mut |p| test(p),
        );
        true
    } else {
        check(routine, test(&*pe(routine)))
    }
}

macro_rules! amos {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_fetch>](source: *const $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_fetch"), source, AmoOp::Fetch, pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_set`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_set>](dest: *mut $t, value: $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_atomic_set"), dest, AmoOp::Set(value.bits()), pe);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_swap`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_swap>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_swap"), dest, AmoOp::Swap(value.bits()), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_compare_swap`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_compare_swap>](dest: *mut $t, cond: $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_compare_swap"), dest, AmoOp::CompareSwap(cond.bits(), value.bits()), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_inc`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_fetch_inc>](dest: *mut $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_fetch_inc"), dest, AmoOp::Add(1), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_inc`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_inc>](dest: *mut $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_atomic_inc"), dest, AmoOp::Add(1), pe);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_add`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_fetch_add>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_fetch_add"), dest, AmoOp::Add(value.bits()), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_add`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_add>](dest: *mut $t, value: $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_atomic_add"), dest, AmoOp::Add(value.bits()), pe);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _wait_until>](ivar: *mut $t, cmp: c_int, cmp_value: $t) {
            sync(concat!("shmem_", stringify!($name), "_wait_until"), ivar, cmp, cmp_value, true);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _test>](ivar: *mut $t, cmp: c_int, cmp_value: $t) -> c_int {
            c_int::from(sync(concat!("shmem_", stringify!($name), "_test"), ivar, cmp, cmp_value, false))
        }
        #[doc = concat!("`shmem_", stringify!($name), "_wait` (1.3): until `*ivar != cmp_value`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _wait>](ivar: *mut $t, cmp_value: $t) {
            sync(concat!("shmem_", stringify!($name), "_wait"), ivar, 1, cmp_value, true);
        }
    )* } };
}

macro_rules! bitwise {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        bitwise!(@op $name, $t, and, And);
        bitwise!(@op $name, $t, or, Or);
        bitwise!(@op $name, $t, xor, Xor);
    )* } };
    (@op $name:ident, $t:ty, $op:ident, $v:ident) => { paste::paste! {
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_", stringify!($op), "`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_fetch_ $op>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_fetch_", stringify!($op)), dest, AmoOp::$v(value.bits()), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_", stringify!($op), "`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_ $op>](dest: *mut $t, value: $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_atomic_", stringify!($op)), dest, AmoOp::$v(value.bits()), pe);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_", stringify!($op), "_nbi`.\n\n# Safety\n`fetch` is valid for a write.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_ $op _nbi>](fetch: *mut $t, dest: *mut $t, value: $t, pe: c_int) {
            // SAFETY: the caller's `fetch`.
            unsafe { amo_nbi(concat!("shmem_", stringify!($name), "_atomic_fetch_", stringify!($op), "_nbi"), fetch, dest, AmoOp::$v(value.bits()), pe) };
        }
    } };
}

/// The 1.3 `fetch`, `set` and `swap` of one type (the integer AMO types and the extended
/// `float` and `double`).
macro_rules! old_fetch_set_swap {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_fetch` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _fetch>](source: *const $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_fetch"), source, AmoOp::Fetch, pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_set` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _set>](dest: *mut $t, value: $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_set"), dest, AmoOp::Set(value.bits()), pe);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_swap` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _swap>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_swap"), dest, AmoOp::Swap(value.bits()), pe)
        }
    )* } };
}

/// The other 1.3 AMOs of one integer type.
macro_rules! old_amos {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_cswap` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _cswap>](dest: *mut $t, cond: $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_cswap"), dest, AmoOp::CompareSwap(cond.bits(), value.bits()), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_finc` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _finc>](dest: *mut $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_finc"), dest, AmoOp::Add(1), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_inc` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _inc>](dest: *mut $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_inc"), dest, AmoOp::Add(1), pe);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_fadd` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _fadd>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_fadd"), dest, AmoOp::Add(value.bits()), pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_add` (1.3).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _add>](dest: *mut $t, value: $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_add"), dest, AmoOp::Add(value.bits()), pe);
        }
    )* } };
}

amos!(
    int: c_int, long: c_long, longlong: c_longlong, uint: c_uint, ulong: c_ulong,
    ulonglong: c_ulonglong, int32: i32, int64: i64, uint32: u32, uint64: u64, size: usize,
    ptrdiff: isize,
);
bitwise!(
    uint: c_uint, ulong: c_ulong, ulonglong: c_ulonglong, int32: i32, int64: i64, uint32: u32,
    uint64: u64,
);
old_fetch_set_swap!(int: c_int, long: c_long, longlong: c_longlong);
old_amos!(int: c_int, long: c_long, longlong: c_longlong);

/// The non-blocking fetching forms of the standard AMO types.
macro_rules! standard_nbi {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_compare_swap_nbi`.\n\n# Safety\n`fetch` is valid for a write.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_compare_swap_nbi>](fetch: *mut $t, dest: *mut $t, cond: $t, value: $t, pe: c_int) {
            // SAFETY: the caller's `fetch`.
            unsafe { amo_nbi(concat!("shmem_", stringify!($name), "_atomic_compare_swap_nbi"), fetch, dest, AmoOp::CompareSwap(cond.bits(), value.bits()), pe) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_inc_nbi`.\n\n# Safety\n`fetch` is valid for a write.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_inc_nbi>](fetch: *mut $t, dest: *mut $t, pe: c_int) {
            // SAFETY: the caller's `fetch`.
            unsafe { amo_nbi(concat!("shmem_", stringify!($name), "_atomic_fetch_inc_nbi"), fetch, dest, AmoOp::Add(1), pe) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_add_nbi`.\n\n# Safety\n`fetch` is valid for a write.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_add_nbi>](fetch: *mut $t, dest: *mut $t, value: $t, pe: c_int) {
            // SAFETY: the caller's `fetch`.
            unsafe { amo_nbi(concat!("shmem_", stringify!($name), "_atomic_fetch_add_nbi"), fetch, dest, AmoOp::Add(value.bits()), pe) };
        }
    )* } };
}

/// The non-blocking fetching forms of the extended AMO types (the standard ones, `float` and
/// `double`).
macro_rules! extended_nbi {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch_nbi`.\n\n# Safety\n`fetch` is valid for a write.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_fetch_nbi>](fetch: *mut $t, source: *const $t, pe: c_int) {
            // SAFETY: the caller's `fetch`.
            unsafe { amo_nbi(concat!("shmem_", stringify!($name), "_atomic_fetch_nbi"), fetch, source, AmoOp::Fetch, pe) };
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_swap_nbi`.\n\n# Safety\n`fetch` is valid for a write.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ $name _atomic_swap_nbi>](fetch: *mut $t, dest: *mut $t, value: $t, pe: c_int) {
            // SAFETY: the caller's `fetch`.
            unsafe { amo_nbi(concat!("shmem_", stringify!($name), "_atomic_swap_nbi"), fetch, dest, AmoOp::Swap(value.bits()), pe) };
        }
    )* } };
}

/// `fetch`, `set` and `swap` of the extended AMO types that are not standard ones (`float`,
/// `double`: operated on as their bits), in their 1.4 names (the 1.3 ones:
/// `old_fetch_set_swap!`).
macro_rules! extended_only {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_fetch`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_fetch>](source: *const $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_fetch"), source, AmoOp::Fetch, pe)
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_set`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_set>](dest: *mut $t, value: $t, pe: c_int) {
            amo::<$t>(concat!("shmem_", stringify!($name), "_atomic_set"), dest, AmoOp::Set(value.bits()), pe);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_atomic_swap`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _atomic_swap>](dest: *mut $t, value: $t, pe: c_int) -> $t {
            amo(concat!("shmem_", stringify!($name), "_atomic_swap"), dest, AmoOp::Swap(value.bits()), pe)
        }
    )* } };
}

/// The deprecated 16-bit point-to-point forms: `wait_until` and `test` of `short` and
/// `unsigned short` (1.4), and `shmem_short_wait` (1.3).
macro_rules! short_syncs {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_wait_until` (deprecated).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _wait_until>](ivar: *mut $t, cmp: c_int, cmp_value: $t) {
            sync(concat!("shmem_", stringify!($name), "_wait_until"), ivar, cmp, cmp_value, true);
        }
        #[doc = concat!("`shmem_", stringify!($name), "_test` (deprecated).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _test>](ivar: *mut $t, cmp: c_int, cmp_value: $t) -> c_int {
            c_int::from(sync(concat!("shmem_", stringify!($name), "_test"), ivar, cmp, cmp_value, false))
        }
    )* } };
}

standard_nbi!(
    int: c_int, long: c_long, longlong: c_longlong, uint: c_uint, ulong: c_ulong,
    ulonglong: c_ulonglong, int32: i32, int64: i64, uint32: u32, uint64: u64, size: usize,
    ptrdiff: isize,
);
extended_nbi!(
    float: f32, double: f64, int: c_int, long: c_long, longlong: c_longlong, uint: c_uint,
    ulong: c_ulong, ulonglong: c_ulonglong, int32: i32, int64: i64, uint32: u32, uint64: u64,
    size: usize, ptrdiff: isize,
);
extended_only!(float: f32, double: f64);
old_fetch_set_swap!(float: f32, double: f64);
short_syncs!(short: i16, ushort: u16);

/// `shmem_short_wait` (1.3): until `*ivar != cmp_value`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_short_wait(ivar: *mut i16, cmp_value: i16) {
    sync("shmem_short_wait", ivar, 1, cmp_value, true);
}

/// `shmem_wait` (1.3, `long`): until `*ivar != cmp_value`. (C11 programs reach the
/// type-generic `shmem_wait` of the header instead.)
#[unsafe(no_mangle)]
pub extern "C" fn shmem_wait(ivar: *mut c_long, cmp_value: c_long) {
    sync("shmem_wait", ivar, 1, cmp_value, true);
}

/// `shmem_wait_until` (1.3, `long`). (C11 programs reach the type-generic `shmem_wait_until`
/// of the header instead.)
#[unsafe(no_mangle)]
pub extern "C" fn shmem_wait_until(ivar: *mut c_long, cmp: c_int, cmp_value: c_long) {
    sync("shmem_wait_until", ivar, cmp, cmp_value, true);
}

/// `shmem_swap` (1.3, `long`). (C11 programs reach the type-generic `shmem_swap` of the
/// header instead.)
#[unsafe(no_mangle)]
pub extern "C" fn shmem_swap(dest: *mut c_long, value: c_long, pe: c_int) -> c_long {
    amo("shmem_swap", dest, AmoOp::Swap(value.bits()), pe)
}

/// `shmem_fence`: puts to each PE are delivered in order.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_fence() {
    pe("shmem_fence").fence();
}

/// `shmem_quiet`: everything this PE issued is complete.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_quiet() {
    check("shmem_quiet", pe("shmem_quiet").quiet());
}

/// `shmem_barrier_all`: quiet, then every PE arrives.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_barrier_all() {
    check("shmem_barrier_all", pe("shmem_barrier_all").barrier_all());
}

/// `shmem_sync_all`: every PE arrives (no quiet).
#[unsafe(no_mangle)]
pub extern "C" fn shmem_sync_all() {
    check("shmem_sync_all", pe("shmem_sync_all").sync_all());
}

/// The 1.3 cache-management routines: no-ops (symmetric memory is coherent here), kept so
/// programs that call them link.
macro_rules! cache_noops {
    ($($name:ident($($a:ident: $t:ty),*)),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "` (1.3; a no-op).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($a: $t),*) {
            $(let _ = $a;)*
        }
    )*};
}
cache_noops!(
    shmem_clear_cache_inv(), shmem_set_cache_inv(), shmem_udcflush(),
    shmem_clear_cache_line_inv(target: *mut std::ffi::c_void),
    shmem_set_cache_line_inv(target: *mut std::ffi::c_void),
    shmem_udcflush_line(target: *mut std::ffi::c_void),
);
