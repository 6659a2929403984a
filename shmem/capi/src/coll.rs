//! Teams and collectives: the team handles, the team-based collectives (1.5) and the
//! active-set collectives with `pSync` arrays (1.4 and earlier, still common).
//!
//! **Team handles.** `shmem_team_t` is a pointer-sized handle: 0 is `SHMEM_TEAM_INVALID`, 1
//! `SHMEM_TEAM_WORLD`, 2 `SHMEM_TEAM_SHARED`, and `3 + k` the `k`-th split team of this
//! process, looked up in a table, so a destroyed or made-up handle is an error, never a
//! dangling pointer.
//!
//! **Collectives**, team-based (1.5) and over active sets (`PE_start`, `logPE_stride`,
//! `PE_size`, `pSync`: 1.4 and earlier), are gda-shmem's: `Pe::broadcast`, … over a team and
//! `Pe::broadcast_set`, … over a `gda_shmem::ActiveSet` synchronising on the program's `pSync`
//! array (both run gda-shmem's one collective engine). This file converts the C arguments and
//! makes every error fatal.

use std::ffi::{c_int, c_long, c_void};

use gda_shmem::{ActiveSet, ReduceOp, Team, TeamConfig};

use crate::reduce::RedTy;
use crate::state::{check, fatal, pe};

/// The first handle value of a split team.
const FIRST_SPLIT: usize = 3;
/// `SHMEM_TEAM_WORLD`'s handle value.
pub(crate) const WORLD: usize = 1;

/// The team behind handle `h`, or `None`.
fn lookup(routine: &str, h: *mut c_void) -> Option<Team> {
    let p = pe(routine);
    match h as usize {
        1 => Some(p.team_world()),
        2 => Some(p.team_shared()),
        k if k >= FIRST_SPLIT => p
            .state()
            .teams
            .borrow()
            .get(k - FIRST_SPLIT)
            .cloned()
            .flatten(),
        _ => None,
    }
}

/// The world PE number of PE `pe` of team `h`, or `None` (no such team, or no such PE in it).
pub(crate) fn world_pe(routine: &str, h: *mut c_void, pe: c_int) -> Option<c_int> {
    let t = lookup(routine, h)?;
    t.world_pe(u32::try_from(pe).ok()?)
        .and_then(|w| c_int::try_from(w).ok())
}

/// Whether `h` is a live team handle.
pub(crate) fn team_is_live(routine: &str, h: *mut c_void) -> bool {
    lookup(routine, h).is_some()
}

/// The team behind handle `h`, or a fatal error.
fn team(routine: &str, h: *mut c_void) -> Team {
    lookup(routine, h).unwrap_or_else(|| {
        fatal(
            routine,
            &format!("{h:p} is not a team (SHMEM_TEAM_INVALID, destroyed, or never created)"),
        )
    })
}

/// A new handle for `t`.
fn handle(routine: &str, t: Team) -> *mut c_void {
    let p = pe(routine);
    let mut teams = p.state().teams.borrow_mut();
    let k = match teams.iter().position(Option::is_none) {
        Some(k) => {
            teams[k] = Some(t);
            k
        }
        None => {
            teams.push(Some(t));
            teams.len() - 1
        }
    };
    (FIRST_SPLIT + k) as *mut c_void
}

/// `shmem_team_my_pe`: this PE's number in `team`, or -1.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_my_pe(team: *mut c_void) -> c_int {
    lookup("shmem_team_my_pe", team).map_or(-1, |t| t.my_pe() as c_int)
}

/// `shmem_team_n_pes`: the PEs of `team`, or -1.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_n_pes(team: *mut c_void) -> c_int {
    lookup("shmem_team_n_pes", team).map_or(-1, |t| t.n_pes() as c_int)
}

/// `shmem_team_translate_pe`: `src_pe` of `src_team` in `dest_team`, or -1.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_translate_pe(
    src_team: *mut c_void,
    src_pe: c_int,
    dest_team: *mut c_void,
) -> c_int {
    let r = "shmem_team_translate_pe";
    match (
        lookup(r, src_team),
        lookup(r, dest_team),
        u32::try_from(src_pe),
    ) {
        (Some(s), Some(d), Ok(p)) => Team::translate(&s, p, &d).map_or(-1, |x| x as c_int),
        _ => -1,
    }
}

/// `shmem_team_config_t`: what a team is created with (gda-shmem's [`TeamConfig`]).
#[repr(C)]
pub struct CTeamConfig {
    /// `num_contexts`.
    pub num_contexts: c_int,
}

/// `SHMEM_TEAM_NUM_CONTEXTS`: the `config_mask` bit of `num_contexts`.
const NUM_CONTEXTS: c_long = 1;

/// The configuration a split asks for: the fields of `config` that `mask` names (the
/// defaults for the others, and for a null `config`).
fn team_config(routine: &str, config: *const CTeamConfig, mask: c_long) -> TeamConfig {
    // SAFETY: null or valid for a read (the C caller's).
    let Some(c) = (unsafe { config.as_ref() }) else {
        return TeamConfig::default();
    };
    if mask & NUM_CONTEXTS == 0 {
        return TeamConfig::default();
    }
    let num_contexts = u32::try_from(c.num_contexts).unwrap_or_else(|_| {
        fatal(
            routine,
            &format!("num_contexts {} must not be negative", c.num_contexts),
        )
    });
    TeamConfig { num_contexts }
}

/// `shmem_team_get_config`: 0, with the fields `config_mask` names as the team was created
/// (`num_contexts`: what its split asked for; 0 for the world and shared teams); -1 for an
/// invalid team.
///
/// # Safety
/// `config` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_team_get_config(
    team: *mut c_void,
    config_mask: c_long,
    config: *mut CTeamConfig,
) -> c_int {
    let Some(t) = lookup("shmem_team_get_config", team) else {
        return -1;
    };
    // SAFETY: null or valid for a write (caller).
    if let Some(c) = unsafe { config.as_mut() }
        && config_mask & NUM_CONTEXTS != 0
    {
        c.num_contexts = c_int::try_from(t.config().num_contexts).unwrap_or(c_int::MAX);
    }
    0
}

/// Splits `parent` (collective over it): `*new_team` is the new team's handle on its members
/// and `SHMEM_TEAM_INVALID` elsewhere; 0, or -1 when the split is impossible (as the
/// specification asks: an error return, with `*new_team` invalid, on every PE of the parent).
fn split(
    routine: &str,
    parent: &Team,
    (start, stride, size): (c_int, c_int, c_int),
    config: TeamConfig,
    new_team: *mut *mut c_void,
) -> c_int {
    let (Ok(start), Ok(size)) = (u32::try_from(start), u32::try_from(size)) else {
        fatal(
            routine,
            &format!("start {start} and size {size} must not be negative"),
        )
    };
    let r = pe(routine).team_split(parent, start, stride, size);
    let (h, status) = match r {
        Ok(Some(t)) => (handle(routine, t.with_config(config)), 0),
        Ok(None) => (std::ptr::null_mut(), 0),
        Err(e) => {
            // A split every parent member refuses alike (bad arguments, slots exhausted):
            // reported, not fatal.
            gda_shmem::diag!("gda shmem: {routine}: {e}");
            (std::ptr::null_mut(), -1)
        }
    };
    if !new_team.is_null() {
        // SAFETY: non-null, valid for a write (the C caller's handle).
        unsafe { *new_team = h };
    }
    status
}

/// `shmem_team_split_strided`.
///
/// # Safety
/// `new_team` is valid for a write; `config` is null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_team_split_strided(
    parent_team: *mut c_void,
    start: c_int,
    stride: c_int,
    size: c_int,
    config: *const CTeamConfig,
    config_mask: c_long,
    new_team: *mut *mut c_void,
) -> c_int {
    let r = "shmem_team_split_strided";
    if parent_team.is_null() {
        // SAFETY: as this function's contract.
        return unsafe { no_parent(new_team) };
    }
    let parent = team(r, parent_team);
    let config = team_config(r, config, config_mask);
    split(r, &parent, (start, stride, size), config, new_team)
}

/// `shmem_team_split_2d`: rows of `xrange` consecutive parent PEs (the x teams) and the
/// columns across them (the y teams), as `Pe::team_split_2d` (whose axes
/// `Team::split_2d_axes` gives; the two splits run here through the erased PE).
///
/// # Safety
/// `xaxis_team` and `yaxis_team` are valid for writes; the configs are null or valid.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameters
pub unsafe extern "C" fn shmem_team_split_2d(
    parent_team: *mut c_void,
    xrange: c_int,
    xaxis_config: *const CTeamConfig,
    xaxis_mask: c_long,
    xaxis_team: *mut *mut c_void,
    yaxis_config: *const CTeamConfig,
    yaxis_mask: c_long,
    yaxis_team: *mut *mut c_void,
) -> c_int {
    let r = "shmem_team_split_2d";
    if parent_team.is_null() {
        // SAFETY: as this function's contract.
        return unsafe {
            no_parent(yaxis_team);
            no_parent(xaxis_team)
        };
    }
    let parent = team(r, parent_team);
    let (xc, yc) = (
        team_config(r, xaxis_config, xaxis_mask),
        team_config(r, yaxis_config, yaxis_mask),
    );
    let xrange = u32::try_from(xrange)
        .unwrap_or_else(|_| fatal(r, &format!("xrange {xrange} must be positive")));
    let [x, y] = check(r, parent.split_2d_axes(xrange));
    let c = |a: gda_shmem::Axis| {
        (
            c_int::try_from(a.start).unwrap_or(c_int::MAX),
            a.stride,
            c_int::try_from(a.size).unwrap_or(c_int::MAX),
        )
    };
    let a = split(r, &parent, c(x), xc, xaxis_team);
    let b = split(r, &parent, c(y), yc, yaxis_team);
    if a == 0 && b == 0 {
        return 0;
    }
    // One axis failed (every PE alike: the free team slots are agreed on by all): the other
    // is destroyed, so a caller that sees the error has nothing to clean up, and both handles
    // are SHMEM_TEAM_INVALID.
    for out in [xaxis_team, yaxis_team] {
        if out.is_null() {
            continue;
        }
        // SAFETY: non-null, valid for reads and writes (the C caller's handle).
        let h = unsafe { *out };
        if !h.is_null() {
            shmem_team_destroy(h);
        }
        // SAFETY: as above.
        unsafe { *out = std::ptr::null_mut() };
    }
    -1
}

/// A split of `SHMEM_TEAM_INVALID`: no team is made, `new_team` is `SHMEM_TEAM_INVALID` and
/// the status is non-zero (OpenSHMEM 1.5; a program may split a team handle its own PE did
/// not get, so this is no misuse).
///
/// # Safety
/// `new_team` is null or valid for a write.
unsafe fn no_parent(new_team: *mut *mut c_void) -> c_int {
    if !new_team.is_null() {
        // SAFETY: non-null, valid for a write (the caller's contract).
        unsafe { *new_team = std::ptr::null_mut() };
    }
    -1
}

/// `shmem_team_destroy` (collective over the team). `SHMEM_TEAM_INVALID` (what a split gives
/// the PEs outside the new team, which programs destroy on every PE) does nothing; the world
/// and shared teams, and handles destroyed or never created, are refused with an error.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_destroy(team_h: *mut c_void) {
    let r = "shmem_team_destroy";
    let k = team_h as usize;
    if k == 0 {
        pe(r); // initialised, or the usual error
        return;
    }
    let t = if k >= FIRST_SPLIT {
        let p = pe(r);
        // Bound first: the table's borrow must end before `p` does.
        #[allow(clippy::let_and_return)]
        let t = p
            .state()
            .teams
            .borrow_mut()
            .get_mut(k - FIRST_SPLIT)
            .and_then(Option::take);
        t
    } else {
        None
    };
    match t {
        Some(t) => check(r, pe(r).team_destroy(t)),
        None => fatal(
            r,
            &format!("{team_h:p} is not a team this program split (or it was destroyed)"),
        ),
    }
}

/// `shmem_team_sync`: every PE of `team`, no quiet.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_sync(team_h: *mut c_void) -> c_int {
    let r = "shmem_team_sync";
    let t = team(r, team_h);
    check(r, pe(r).team_sync(&t));
    0
}

/// `shmem_team_ptr`: where team member `pe`'s `dest` is mapped here, or null (also for
/// `SHMEM_TEAM_INVALID`, and a `pe` outside the team).
#[unsafe(no_mangle)]
pub extern "C" fn shmem_team_ptr(
    team_h: *mut c_void,
    dest: *const c_void,
    pe_: c_int,
) -> *mut c_void {
    let r = "shmem_team_ptr";
    let Some(t) = lookup(r, team_h) else {
        return std::ptr::null_mut();
    };
    match u32::try_from(pe_).ok().and_then(|p| t.world_pe(p)) {
        Some(w) => crate::setup::shmem_ptr(dest, w as c_int),
        None => std::ptr::null_mut(),
    }
}

/// `shmem_sync` (active set): every PE of the set, no quiet.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_sync(
    pe_start: c_int,
    log_stride: c_int,
    pe_size: c_int,
    p_sync: *mut c_long,
) {
    let r = "shmem_sync";
    let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
    check(r, pe(r).barrier_set(&set, p_sync.cast::<i64>(), false));
}

/// `shmem_barrier` (active set, 1.4): quiet, then every PE of the set.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_barrier(
    pe_start: c_int,
    log_stride: c_int,
    pe_size: c_int,
    p_sync: *mut c_long,
) {
    let r = "shmem_barrier";
    let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
    check(r, pe(r).barrier_set(&set, p_sync.cast::<i64>(), true));
}

// ---- Argument conversion -------------------------------------------------------------------

/// The active set `pe_start + k * 2^log_stride`, `k < pe_size`, or a fatal error when it is
/// malformed or `pSync` is null (gda-shmem checks the rest: that it fits the job and holds
/// this PE, and that `pSync` is symmetric).
fn active_set(
    routine: &str,
    pe_start: c_int,
    log_stride: c_int,
    pe_size: c_int,
    p_sync: *mut c_long,
) -> ActiveSet {
    let set = match (
        u32::try_from(pe_start),
        u32::try_from(log_stride),
        u32::try_from(pe_size),
    ) {
        (Ok(s), Ok(l), Ok(n)) => check(routine, ActiveSet::new(s, l, n)),
        _ => fatal(
            routine,
            &format!(
                "active set (PE_start {pe_start}, logPE_stride {log_stride}, PE_size {pe_size}) \
                 is malformed (PE_size ≥ 1, PE_start ≥ 0, 0 ≤ logPE_stride ≤ {})",
                ActiveSet::MAX_LOG_STRIDE
            ),
        ),
    };
    if p_sync.is_null() {
        fatal(routine, "pSync is null");
    }
    set
}

/// `a * b` bytes, or a fatal error.
fn bytes(routine: &str, n: usize, w: usize) -> usize {
    n.checked_mul(w)
        .unwrap_or_else(|| fatal(routine, "a collective's byte count overflows"))
}

/// A count from C (`size_t` is already unsigned; `int` counts must not be negative).
fn count(routine: &str, n: c_int) -> usize {
    usize::try_from(n).unwrap_or_else(|_| fatal(routine, &format!("count {n} is negative")))
}

/// A collective of zero elements whose count every member shares: nothing to do (gda-shmem's
/// rule), and no buffer to convert (a zero-length one may be any pointer, null too). The team
/// must still be one.
fn no_elements(routine: &str, team_h: *mut c_void) -> c_int {
    let _ = team(routine, team_h);
    0
}

/// The source of a `collect` that gives zero elements: never read, so any symmetric address
/// will do (the destination), whatever the program passed (null too).
fn collect_source(nelems: usize, source: *const c_void, dest: *mut c_void) -> *const c_void {
    if nelems == 0 {
        dest.cast_const()
    } else {
        source
    }
}

/// A `collect` with nothing to give and a null destination: `dest` is symmetric, so it is null
/// on every member, and no member may give anything either. Nothing to do.
fn empty_collect(nelems: usize, dest: *mut c_void) -> bool {
    nelems == 0 && dest.is_null()
}

/// Both strides of an `alltoalls` from C, positive, or a fatal error.
fn strides(routine: &str, dst_s: isize, sst: isize) -> (usize, usize) {
    match (usize::try_from(dst_s), usize::try_from(sst)) {
        (Ok(ds), Ok(ss)) if ds > 0 && ss > 0 => (ds, ss),
        _ => fatal(
            routine,
            &format!("strides {dst_s} and {sst} must be positive"),
        ),
    }
}

// ---- Team-based collectives (1.5) ----------------------------------------------------------

macro_rules! team_colls {
    ($($name:ident: $w:expr),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_broadcast`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _broadcast>](team_h: *mut c_void, dest: *mut c_void, source: *const c_void, nelems: usize, pe_root: c_int) -> c_int {
            let r = concat!("shmem_", stringify!($name), "_broadcast");
            if nelems == 0 { return no_elements(r, team_h); }
            let t = team(r, team_h);
            let root = u32::try_from(pe_root).unwrap_or(u32::MAX);
            check(r, pe(r).broadcast(&t, dest.cast(), source.cast(), bytes(r, nelems, $w), root));
            0
        }
        #[doc = concat!("`shmem_", stringify!($name), "_collect`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _collect>](team_h: *mut c_void, dest: *mut c_void, source: *const c_void, nelems: usize) -> c_int {
            let r = concat!("shmem_", stringify!($name), "_collect");
            if empty_collect(nelems, dest) { return no_elements(r, team_h); }
            let t = team(r, team_h);
            let source = collect_source(nelems, source, dest);
            check(r, pe(r).collect(&t, dest.cast(), source.cast(), bytes(r, nelems, $w), false));
            0
        }
        #[doc = concat!("`shmem_", stringify!($name), "_fcollect`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _fcollect>](team_h: *mut c_void, dest: *mut c_void, source: *const c_void, nelems: usize) -> c_int {
            let r = concat!("shmem_", stringify!($name), "_fcollect");
            if nelems == 0 { return no_elements(r, team_h); }
            let t = team(r, team_h);
            check(r, pe(r).collect(&t, dest.cast(), source.cast(), bytes(r, nelems, $w), true));
            0
        }
        #[doc = concat!("`shmem_", stringify!($name), "_alltoall`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _alltoall>](team_h: *mut c_void, dest: *mut c_void, source: *const c_void, nelems: usize) -> c_int {
            let r = concat!("shmem_", stringify!($name), "_alltoall");
            if nelems == 0 { return no_elements(r, team_h); }
            let t = team(r, team_h);
            check(r, pe(r).alltoall(&t, dest.cast(), source.cast(), bytes(r, nelems, $w)));
            0
        }
        #[doc = concat!("`shmem_", stringify!($name), "_alltoalls`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _alltoalls>](team_h: *mut c_void, dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize) -> c_int {
            let r = concat!("shmem_", stringify!($name), "_alltoalls");
            if nelems == 0 { return no_elements(r, team_h); }
            let t = team(r, team_h);
            let (ds, ss) = strides(r, dst, sst);
            check(r, pe(r).alltoalls(&t, dest.cast(), source.cast(), ds, ss, nelems, $w));
            0
        }
    )* } };
}

use std::ffi::{
    c_char, c_double, c_float, c_longlong, c_schar, c_short, c_uchar, c_uint, c_ulong, c_ulonglong,
    c_ushort,
};

team_colls!(
    float: size_of::<c_float>(), double: size_of::<c_double>(), longdouble: 16,
    char: size_of::<c_char>(), schar: size_of::<c_schar>(), short: size_of::<c_short>(),
    int: size_of::<c_int>(), long: size_of::<c_long>(), longlong: size_of::<c_longlong>(),
    uchar: size_of::<c_uchar>(), ushort: size_of::<c_ushort>(), uint: size_of::<c_uint>(),
    ulong: size_of::<c_ulong>(), ulonglong: size_of::<c_ulonglong>(), int8: 1, int16: 2,
    int32: 4, int64: 8, uint8: 1, uint16: 2, uint32: 4, uint64: 8, size: 8, ptrdiff: 8,
);

/// `shmem_broadcastmem`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_broadcastmem(
    team_h: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
    pe_root: c_int,
) -> c_int {
    shmem_uchar_broadcast(team_h, dest, source, nelems, pe_root)
}
/// `shmem_collectmem`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_collectmem(
    team_h: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    shmem_uchar_collect(team_h, dest, source, nelems)
}
/// `shmem_fcollectmem`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_fcollectmem(
    team_h: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    shmem_uchar_fcollect(team_h, dest, source, nelems)
}
/// `shmem_alltoallmem`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_alltoallmem(
    team_h: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    nelems: usize,
) -> c_int {
    shmem_uchar_alltoall(team_h, dest, source, nelems)
}
/// `shmem_alltoallsmem`.
#[unsafe(no_mangle)]
pub extern "C" fn shmem_alltoallsmem(
    team_h: *mut c_void,
    dest: *mut c_void,
    source: *const c_void,
    dst: isize,
    sst: isize,
    nelems: usize,
) -> c_int {
    shmem_uchar_alltoalls(team_h, dest, source, dst, sst, nelems)
}

macro_rules! team_reductions {
    ($op:ident, $v:ident: $($name:ident: $ty:ident),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_reduce`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_ $name _ $op _reduce>](team_h: *mut c_void, dest: *mut c_void, source: *const c_void, nreduce: usize) -> c_int {
            let r = concat!("shmem_", stringify!($name), "_", stringify!($op), "_reduce");
            if nreduce == 0 { return no_elements(r, team_h); }
            let t = team(r, team_h);
            check(r, pe(r).reduce(&t, dest.cast(), source.cast(), nreduce, RedTy::$ty, ReduceOp::$v));
            0
        }
    )* } };
}

macro_rules! bitwise_types {
    ($m:ident, $op:ident, $v:ident) => {
        $m!($op, $v: uchar: U8, ushort: U16, uint: U32, ulong: U64, ulonglong: U64, int8: I8,
            int16: I16, int32: I32, int64: I64, uint8: U8, uint16: U16, uint32: U32, uint64: U64,
            size: U64);
    };
}
macro_rules! ordered_types {
    ($m:ident, $op:ident, $v:ident) => {
        $m!($op, $v: char: I8, schar: I8, short: I16, int: I32, long: I64, longlong: I64,
            ptrdiff: I64, uchar: U8, ushort: U16, uint: U32, ulong: U64, ulonglong: U64,
            int8: I8, int16: I16, int32: I32, int64: I64, uint8: U8, uint16: U16, uint32: U32,
            uint64: U64, size: U64, float: F32, double: F64);
    };
}
bitwise_types!(team_reductions, and, And);
bitwise_types!(team_reductions, or, Or);
bitwise_types!(team_reductions, xor, Xor);
ordered_types!(team_reductions, max, Max);
ordered_types!(team_reductions, min, Min);
ordered_types!(team_reductions, sum, Sum);
ordered_types!(team_reductions, prod, Prod);
team_reductions!(sum, Sum: complexf: C32, complexd: C64);
team_reductions!(prod, Prod: complexf: C32, complexd: C64);

// ---- Active-set collectives (1.4 names) ----------------------------------------------------

macro_rules! active_colls {
    ($($bits:literal),*) => { paste::paste! { $(
        #[doc = concat!("`shmem_broadcast", $bits, "` (active set; the root's `dest` is not written).")]
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn [<shmem_broadcast $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_root: c_int, pe_start: c_int, log_stride: c_int, pe_size: c_int, p_sync: *mut c_long) {
            let r = concat!("shmem_broadcast", $bits);
            let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
            if nelems == 0 { return; }
            let root = u32::try_from(pe_root).unwrap_or(u32::MAX);
            check(r, pe(r).broadcast_set(&set, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), root, p_sync.cast::<i64>()));
        }
        #[doc = concat!("`shmem_collect", $bits, "` (active set).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_collect $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_stride: c_int, pe_size: c_int, p_sync: *mut c_long) {
            let r = concat!("shmem_collect", $bits);
            let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
            if empty_collect(nelems, dest) { return; }
            let source = collect_source(nelems, source, dest);
            check(r, pe(r).collect_set(&set, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), false, p_sync.cast::<i64>()));
        }
        #[doc = concat!("`shmem_fcollect", $bits, "` (active set).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_fcollect $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_stride: c_int, pe_size: c_int, p_sync: *mut c_long) {
            let r = concat!("shmem_fcollect", $bits);
            let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
            if nelems == 0 { return; }
            check(r, pe(r).collect_set(&set, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), true, p_sync.cast::<i64>()));
        }
        #[doc = concat!("`shmem_alltoall", $bits, "` (active set).")]
        #[unsafe(no_mangle)]
        pub extern "C" fn [<shmem_alltoall $bits>](dest: *mut c_void, source: *const c_void, nelems: usize, pe_start: c_int, log_stride: c_int, pe_size: c_int, p_sync: *mut c_long) {
            let r = concat!("shmem_alltoall", $bits);
            let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
            if nelems == 0 { return; }
            check(r, pe(r).alltoall_set(&set, dest.cast(), source.cast(), bytes(r, nelems, $bits / 8), p_sync.cast::<i64>()));
        }
        #[doc = concat!("`shmem_alltoalls", $bits, "` (active set).")]
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn [<shmem_alltoalls $bits>](dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize, pe_start: c_int, log_stride: c_int, pe_size: c_int, p_sync: *mut c_long) {
            let r = concat!("shmem_alltoalls", $bits);
            let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
            if nelems == 0 { return; }
            let (ds, ss) = strides(r, dst, sst);
            check(r, pe(r).alltoalls_set(&set, dest.cast(), source.cast(), ds, ss, nelems, $bits / 8, p_sync.cast::<i64>()));
        }
    )* } };
}
active_colls!(32, 64);

macro_rules! to_all {
    ($op:ident, $v:ident: $($name:ident: $ty:ident),* $(,)?) => { paste::paste! { $(
        #[doc = concat!("`shmem_", stringify!($name), "_", stringify!($op), "_to_all` (active set; `pWrk` is not needed).")]
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn [<shmem_ $name _ $op _to_all>](dest: *mut c_void, source: *const c_void, nreduce: c_int, pe_start: c_int, log_stride: c_int, pe_size: c_int, p_wrk: *mut c_void, p_sync: *mut c_long) {
            let r = concat!("shmem_", stringify!($name), "_", stringify!($op), "_to_all");
            let _ = p_wrk;
            let set = active_set(r, pe_start, log_stride, pe_size, p_sync);
            if nreduce == 0 { return; }
            check(r, pe(r).reduce_set(&set, dest.cast(), source.cast(), count(r, nreduce), RedTy::$ty, ReduceOp::$v, p_sync.cast::<i64>()));
        }
    )* } };
}
to_all!(and, And: short: I16, int: I32, long: I64, longlong: I64);
to_all!(or, Or: short: I16, int: I32, long: I64, longlong: I64);
to_all!(xor, Xor: short: I16, int: I32, long: I64, longlong: I64);
to_all!(max, Max: short: I16, int: I32, long: I64, longlong: I64, float: F32, double: F64);
to_all!(min, Min: short: I16, int: I32, long: I64, longlong: I64, float: F32, double: F64);
to_all!(sum, Sum: short: I16, int: I32, long: I64, longlong: I64, float: F32, double: F64, complexf: C32, complexd: C64);
to_all!(prod, Prod: short: I16, int: I32, long: I64, longlong: I64, float: F32, double: F64, complexf: C32, complexd: C64);
