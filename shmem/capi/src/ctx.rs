//! Communication contexts (`shmem_ctx_t`).
//!
//! A context here is a checked name for the PE's one set of routes: every context's operations
//! go through the same queues as the default context's, and `shmem_ctx_quiet`/`shmem_ctx_fence`
//! complete or order everything this PE issued, which is at least what the specification asks
//! of a context (ordering and completion of its own operations). Programs written for
//! contexts — per-thread contexts, `SHMEM_CTX_PRIVATE`, team contexts — run unchanged and
//! correctly; what they do not get here is independent progress of separate contexts.
//!
//! Handles: 0 is `SHMEM_CTX_INVALID`, 1 `SHMEM_CTX_DEFAULT`, `2 + k` the `k`-th created
//! context, looked up in a table (a destroyed or made-up handle is a clear error).
//! `shmem_ctx_quiet`, `shmem_ctx_fence` and `shmem_ctx_destroy` on `SHMEM_CTX_INVALID` do
//! nothing, as OpenSHMEM 1.5 says (what PEs outside a team do with the context
//! `shmem_team_create_ctx` could not make them, in the specification's own team-context
//! example); RMA and AMO on it stay a clear error (undefined in the specification).

use std::ffi::{c_int, c_long, c_void};

use crate::state::{check, fatal, pe};

/// The first handle value of a created context.
const FIRST_CTX: usize = 2;

/// The team handle of live context `ctx` (the world's for the default context), or a fatal
/// error naming `routine`.
fn ctx_team(routine: &str, ctx: *mut c_void) -> usize {
    let k = ctx as usize;
    let team = match k {
        1 => Some(crate::coll::WORLD),
        k if k >= FIRST_CTX => pe(routine)
            .state()
            .ctxs
            .borrow()
            .get(k - FIRST_CTX)
            .copied()
            .flatten(),
        _ => None,
    };
    team.unwrap_or_else(|| {
        fatal(
            routine,
            &format!("{ctx:p} is not a context (SHMEM_CTX_INVALID, destroyed, or never created)"),
        )
    })
}

/// Checks that `ctx` is a live context, or a fatal error naming `routine`.
fn ctx_ok(routine: &str, ctx: *mut c_void) {
    ctx_team(routine, ctx);
}

/// World PE number of `target`, a PE of team `team` (a context's, [`ctx_team`]):
/// point-to-point routines on a context number PEs within its team (OpenSHMEM 1.5,
/// "team-relative PE numbering"); the world team's numbers are world numbers already. A PE
/// outside the team is a fatal error naming `routine`.
fn ctx_pe(routine: &str, team: usize, target: c_int) -> c_int {
    if team == crate::coll::WORLD {
        return target;
    }
    crate::coll::world_pe(routine, team as *mut c_void, target).unwrap_or_else(|| {
        fatal(
            routine,
            &format!(
                "PE {target} is not a PE of the context's team ({} PEs)",
                crate::coll::shmem_team_n_pes(team as *mut c_void)
            ),
        )
    })
}

/// A new context on team handle `team` (non-zero status when the team is invalid).
///
/// # Safety
/// `ctx` is valid for a write.
unsafe fn create(routine: &str, team: usize, ctx: *mut *mut c_void) -> c_int {
    let p = pe(routine);
    let h = if team == 1 || team == 2 || crate::coll::team_is_live(routine, team as *mut c_void) {
        let mut ctxs = p.state().ctxs.borrow_mut();
        let k = match ctxs.iter().position(Option::is_none) {
            Some(k) => {
                ctxs[k] = Some(team);
                k
            }
            None => {
                ctxs.push(Some(team));
                ctxs.len() - 1
            }
        };
        FIRST_CTX + k
    } else {
        0
    };
    if ctx.is_null() {
        fatal(routine, "ctx is null");
    }
    // SAFETY: non-null, valid (caller).
    unsafe { *ctx = h as *mut c_void };
    c_int::from(h == 0)
}

/// `shmem_ctx_create`: a context on the world team (options accepted: every option's
/// guarantee holds for a context that shares the PE's routes).
///
/// # Safety
/// `ctx` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_ctx_create(options: c_long, ctx: *mut *mut c_void) -> c_int {
    let _ = options;
    // SAFETY: the caller's handle.
    unsafe { create("shmem_ctx_create", 1, ctx) }
}

/// `shmem_team_create_ctx`: a context on `team` (non-zero for an invalid team).
///
/// # Safety
/// `ctx` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_team_create_ctx(
    team: *mut c_void,
    options: c_long,
    ctx: *mut *mut c_void,
) -> c_int {
    let _ = options;
    // SAFETY: the caller's handle.
    unsafe { create("shmem_team_create_ctx", team as usize, ctx) }
}

/// Whether `ctx` is `SHMEM_CTX_INVALID` (what `shmem_team_create_ctx` gives PEs outside the
/// team), on which `shmem_ctx_quiet`, `_fence` and `_destroy` do nothing (1.5; the
/// specification's team-context example relies on it) — once the library is initialised.
fn invalid(routine: &str, ctx: *mut c_void) -> bool {
    if ctx.is_null() {
        pe(routine);
    }
    ctx.is_null()
}

/// `shmem_ctx_destroy`: quiets and releases a created context.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ctx_destroy(ctx: *mut c_void) {
    let r = "shmem_ctx_destroy";
    if invalid(r, ctx) {
        return;
    }
    let k = ctx as usize;
    if k == 1 {
        fatal(r, "SHMEM_CTX_DEFAULT cannot be destroyed");
    }
    ctx_ok(r, ctx);
    let p = pe(r);
    check(r, p.quiet());
    if let Some(slot) = p.state().ctxs.borrow_mut().get_mut(k - FIRST_CTX) {
        *slot = None;
    }
}

/// `shmem_ctx_get_team`: the team a context was created on (non-zero for an invalid one).
///
/// # Safety
/// `team` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_ctx_get_team(ctx: *mut c_void, team: *mut *mut c_void) -> c_int {
    let r = "shmem_ctx_get_team";
    let k = ctx as usize;
    let t = if k == 1 {
        Some(1)
    } else if k >= FIRST_CTX {
        pe(r)
            .state()
            .ctxs
            .borrow()
            .get(k - FIRST_CTX)
            .copied()
            .flatten()
    } else {
        None
    };
    if !team.is_null() {
        // SAFETY: non-null, valid (caller).
        unsafe { *team = t.unwrap_or(0) as *mut c_void };
    }
    c_int::from(t.is_none())
}

/// `shmem_ctx_fence`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ctx_fence(ctx: *mut c_void) {
    if invalid("shmem_ctx_fence", ctx) {
        return;
    }
    ctx_ok("shmem_ctx_fence", ctx);
    crate::amo::shmem_fence();
}

/// `shmem_ctx_quiet`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_ctx_quiet(ctx: *mut c_void) {
    if invalid("shmem_ctx_quiet", ctx) {
        return;
    }
    ctx_ok("shmem_ctx_quiet", ctx);
    crate::amo::shmem_quiet();
}

/// Context forms: check the context, then the default-context routine.
macro_rules! ctx_forms {
    ($(fn $name:ident($($a:ident: $t:ty),*; pe) $(-> $ret:ty)? => $module:ident;)*) => { paste::paste! { $(
        #[doc = concat!("`shmem_ctx_", stringify!($name), "`: `pe` numbers a PE of the context's team.\n\n# Safety\nAs `shmem_", stringify!($name), "`.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn [<shmem_ctx_ $name>](ctx: *mut c_void, $($a: $t,)* pe: c_int) $(-> $ret)? {
            let routine = concat!("shmem_ctx_", stringify!($name));
            let pe = ctx_pe(routine, ctx_team(routine, ctx), pe);
            // SAFETY: the caller's arguments, as the default-context routine requires.
            #[allow(unused_unsafe)]
            unsafe { crate::$module::[<shmem_ $name>]($($a,)* pe) }
        }
    )* } };
}

/// The RMA forms of one type.
macro_rules! ctx_rma {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        ctx_forms! {
            fn [<$name _put>](dest: *mut $t, source: *const $t, nelems: usize; pe) => rma;
            fn [<$name _get>](dest: *mut $t, source: *const $t, nelems: usize; pe) => rma;
            fn [<$name _put_nbi>](dest: *mut $t, source: *const $t, nelems: usize; pe) => rma;
            fn [<$name _get_nbi>](dest: *mut $t, source: *const $t, nelems: usize; pe) => rma;
            fn [<$name _iput>](dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize; pe) => rma;
            fn [<$name _iget>](dest: *mut $t, source: *const $t, dst: isize, sst: isize, nelems: usize; pe) => rma;
            fn [<$name _put_signal>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int; pe) => sync;
            fn [<$name _put_signal_nbi>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int; pe) => sync;
        }
    )* } };
}

/// `p` and `g` of one type.
macro_rules! ctx_pg {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        ctx_forms! {
            fn [<$name _p>](dest: *mut $t, value: $t; pe) => rma;
            fn [<$name _g>](source: *const $t; pe) -> $t => rma;
        }
    )* } };
}

/// The AMO forms of one type.
macro_rules! ctx_amo {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        ctx_forms! {
            fn [<$name _atomic_fetch>](source: *const $t; pe) -> $t => amo;
            fn [<$name _atomic_set>](dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_swap>](dest: *mut $t, value: $t; pe) -> $t => amo;
            fn [<$name _atomic_compare_swap>](dest: *mut $t, cond: $t, value: $t; pe) -> $t => amo;
            fn [<$name _atomic_fetch_inc>](dest: *mut $t; pe) -> $t => amo;
            fn [<$name _atomic_inc>](dest: *mut $t; pe) => amo;
            fn [<$name _atomic_fetch_add>](dest: *mut $t, value: $t; pe) -> $t => amo;
            fn [<$name _atomic_add>](dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_fetch_nbi>](fetch: *mut $t, source: *const $t; pe) => amo;
            fn [<$name _atomic_swap_nbi>](fetch: *mut $t, dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_compare_swap_nbi>](fetch: *mut $t, dest: *mut $t, cond: $t, value: $t; pe) => amo;
            fn [<$name _atomic_fetch_inc_nbi>](fetch: *mut $t, dest: *mut $t; pe) => amo;
            fn [<$name _atomic_fetch_add_nbi>](fetch: *mut $t, dest: *mut $t, value: $t; pe) => amo;
        }
    )* } };
}

/// The bitwise AMO forms of one type.
macro_rules! ctx_bitwise {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        ctx_forms! {
            fn [<$name _atomic_fetch_and>](dest: *mut $t, value: $t; pe) -> $t => amo;
            fn [<$name _atomic_and>](dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_fetch_or>](dest: *mut $t, value: $t; pe) -> $t => amo;
            fn [<$name _atomic_or>](dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_fetch_xor>](dest: *mut $t, value: $t; pe) -> $t => amo;
            fn [<$name _atomic_xor>](dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_fetch_and_nbi>](fetch: *mut $t, dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_fetch_or_nbi>](fetch: *mut $t, dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_fetch_xor_nbi>](fetch: *mut $t, dest: *mut $t, value: $t; pe) => amo;
        }
    )* } };
}

/// The AMO forms of the extended types that are not standard ones (`float`, `double`).
macro_rules! ctx_extended {
    ($($name:ident: $t:ty),* $(,)?) => { paste::paste! { $(
        ctx_forms! {
            fn [<$name _atomic_fetch>](source: *const $t; pe) -> $t => amo;
            fn [<$name _atomic_set>](dest: *mut $t, value: $t; pe) => amo;
            fn [<$name _atomic_swap>](dest: *mut $t, value: $t; pe) -> $t => amo;
            fn [<$name _atomic_fetch_nbi>](fetch: *mut $t, source: *const $t; pe) => amo;
            fn [<$name _atomic_swap_nbi>](fetch: *mut $t, dest: *mut $t, value: $t; pe) => amo;
        }
    )* } };
}

/// The sized forms.
macro_rules! ctx_sized {
    ($($bits:literal),*) => { paste::paste! { $(
        ctx_forms! {
            fn [<put $bits>](dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
            fn [<get $bits>](dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
            fn [<put $bits _nbi>](dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
            fn [<get $bits _nbi>](dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
            fn [<iput $bits>](dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize; pe) => rma;
            fn [<iget $bits>](dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize; pe) => rma;
            fn [<put $bits _signal>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int; pe) => sync;
            fn [<put $bits _signal_nbi>](dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int; pe) => sync;
        }
    )* } };
}

use crate::rma::longdouble;
use std::ffi::{
    c_char, c_double, c_float, c_longlong, c_schar, c_short, c_uchar, c_uint, c_ulong, c_ulonglong,
    c_ushort,
};

ctx_rma!(
    float: c_float, double: c_double, longdouble: longdouble, char: c_char, schar: c_schar,
    short: c_short, int: c_int, long: c_long, longlong: c_longlong, uchar: c_uchar,
    ushort: c_ushort, uint: c_uint, ulong: c_ulong, ulonglong: c_ulonglong, int8: i8,
    int16: i16, int32: i32, int64: i64, uint8: u8, uint16: u16, uint32: u32, uint64: u64,
    size: usize, ptrdiff: isize,
);
ctx_pg!(
    float: c_float, double: c_double, char: c_char, schar: c_schar, short: c_short, int: c_int,
    long: c_long, longlong: c_longlong, uchar: c_uchar, ushort: c_ushort, uint: c_uint,
    ulong: c_ulong, ulonglong: c_ulonglong, int8: i8, int16: i16, int32: i32, int64: i64,
    uint8: u8, uint16: u16, uint32: u32, uint64: u64, size: usize, ptrdiff: isize,
);
ctx_amo!(
    int: c_int, long: c_long, longlong: c_longlong, uint: c_uint, ulong: c_ulong,
    ulonglong: c_ulonglong, int32: i32, int64: i64, uint32: u32, uint64: u64, size: usize,
    ptrdiff: isize,
);
ctx_bitwise!(
    uint: c_uint, ulong: c_ulong, ulonglong: c_ulonglong, int32: i32, int64: i64, uint32: u32,
    uint64: u64,
);
ctx_extended!(float: c_float, double: c_double);
ctx_sized!(8, 16, 32, 64, 128);
ctx_forms! {
    fn putmem(dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
    fn getmem(dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
    fn putmem_nbi(dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
    fn getmem_nbi(dest: *mut c_void, source: *const c_void, nelems: usize; pe) => rma;
    fn putmem_signal(dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int; pe) => sync;
    fn putmem_signal_nbi(dest: *mut c_void, source: *const c_void, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: c_int; pe) => sync;
}
