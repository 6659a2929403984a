//! A PE with its provider erased ([`DynPe`]), and the erased forms of what its methods take:
//! atomic operations ([`AmoOp`]), point-to-point variable types ([`SyncTy`]), multi-variable
//! waits ([`Multi`]), reduction types ([`RedTy`], with [`Complex`] numbers). The C ABI
//! (`gda-shmem-c`) holds its PE as `Box<dyn DynPe>` and marshals C arguments into these calls;
//! the `gda` CLI runs one code path for every provider through the same trait.

use crate::pe::Pe;
use crate::{
    ActiveSet, Cmp, Elem, ReduceOp, Reducible, Result, ShmemError, SignalOp, Sym, Team, Width,
};

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
    /// `short` (deprecated; `wait_until`, `test` and `wait` only).
    I16,
    /// `unsigned short` (deprecated; `wait_until` and `test` only).
    U16,
}

/// The three kinds of multi-variable wait and test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Multi {
    /// Every considered variable.
    All,
    /// One of them.
    Any,
    /// At least one; all that hold.
    Some,
}

/// A PE with its provider erased: what the C ABI and the `gda` CLI need of one, behind one
/// object-safe trait (implemented for every `Pe<P>`). Operands are addresses and erased
/// types; each method turns them back into the typed routine of [`Pe`].
pub trait DynPe {
    /// This PE.
    fn me(&self) -> u32;
    /// The SHMEM device context (`crate::device`), built on first use.
    fn device_context(&self) -> Result<*const crate::device::DeviceCtx>;
    /// PEs.
    fn n(&self) -> u32;
    /// Collective allocation of `bytes` aligned to `align`.
    fn malloc(&self, align: usize, bytes: usize) -> Result<*mut u8>;
    /// Usable bytes of the allocation starting at `p`.
    fn allocation_bytes(&self, p: *const u8) -> Result<usize>;
    /// Collective free of what [`DynPe::malloc`] returned.
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
    /// Which of the `n` variables of type `ty` at `ivars` not excluded by `skip` satisfy
    /// `<cmp> value` — or `<cmp> values[i]` when `values` is not null — tested once through
    /// gda-shmem's `test_all`/`test_any`/`test_some` and their vector forms: whether `kind`
    /// holds (for `Any`/`Some` also when nothing is considered), and the indices that satisfy
    /// it (for `All`: every considered one when it holds, else none).
    ///
    /// # Safety
    /// `values` is null or valid for `n` elements of `ty`.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routines' parameters
    unsafe fn test_vars(
        &self,
        kind: Multi,
        ivars: *mut u8,
        ty: SyncTy,
        n: usize,
        skip: &[bool],
        cmp: Cmp,
        value: u64,
        values: *const u8,
    ) -> Result<(bool, Vec<usize>)>;
    /// One health step of a wait this library polls itself (gda-shmem's `Pe::poll_health`):
    /// a dead same-host PE or a broken bootstrap is an error; completions keep flowing.
    fn poll_health(&self, what: &dyn Fn() -> String) -> Result<()>;
    /// The lock word at `lock` (gda-shmem's `Pe::test_lock`/`clear_lock`): takes it if free
    /// (`Ok(true)`: this PE holds it now), or, with `clear`, releases it.
    fn lock(&self, lock: *mut u8, clear: bool) -> Result<bool>;
    /// Where `pe`'s copy of the symmetric `addr` is mapped here, if `pe` is reached by
    /// load/store.
    fn ptr(&self, addr: *const u8, pe: u32) -> Result<Option<*mut u8>>;
    /// Whether `addr` lies in the symmetric heap.
    fn in_heap(&self, addr: *const u8) -> bool;
    /// Checks that `[addr, addr + len)` is symmetric memory (the user heap or the static
    /// data), with the error a routine reaching it would give: how a routine that moves
    /// several pieces of one range (the strided ones) checks all of it before moving any.
    fn sym_range(&self, addr: *const u8, len: usize) -> Result<()>;
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
    /// This PE's symmetric regions here: the user heap and the static data (address, bytes).
    fn regions(&self) -> [(usize, usize); 2];
    /// The bound of every wait (`GDA_SHMEM_TIMEOUT_MS`).
    fn timeout(&self) -> std::time::Duration;
    /// Polls `done` until it holds, within the PE's timeout (see [`Pe::wait_on`]).
    fn wait_on(
        &self,
        what: &dyn Fn() -> String,
        done: &mut dyn FnMut() -> Result<bool>,
    ) -> Result<()>;
    /// Put of `len` bytes, then the 64-bit signal at `sig` updated by `op` (ordered after).
    ///
    /// # Safety
    /// `src` is valid for `len` bytes.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
    unsafe fn put_signal(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        sig: *mut u8,
        value: u64,
        op: SignalOp,
        pe: u32,
    ) -> Result<()>;
    /// This PE's signal word at `sig`.
    fn signal_fetch(&self, sig: *const u8) -> Result<u64>;
    /// `SHMEM_TEAM_WORLD`.
    fn team_world(&self) -> Team;
    /// `SHMEM_TEAM_SHARED`.
    fn team_shared(&self) -> Team;
    /// Collective over `parent`: the team of its PEs `start + k * stride`, `k < size`
    /// (`None` on the PEs outside it).
    fn team_split(&self, parent: &Team, start: u32, stride: i32, size: u32)
    -> Result<Option<Team>>;
    /// Collective over `t`: releases it.
    fn team_destroy(&self, t: Team) -> Result<()>;
    /// Every PE of `t`, no quiet.
    fn team_sync(&self, t: &Team) -> Result<()>;
    /// `bytes` of symmetric `src` on `t`'s `root` to symmetric `dst` of every member.
    fn broadcast(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        root: u32,
    ) -> Result<()>;
    /// Every member's `bytes` at `src` concatenated, in team order, into every `dst`
    /// (`fixed`: the same `bytes` everywhere, `fcollect`).
    fn collect(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        fixed: bool,
    ) -> Result<()>;
    /// Block `j` of `bytes` of every member's `src` to member `j`'s `dst` at the sender's
    /// team index.
    fn alltoall(&self, t: &Team, dst: *mut u8, src: *const u8, bytes: usize) -> Result<()>;
    /// Strided all-to-all over `t` (gda-shmem's `Pe::alltoalls`) of `n` elements of `elem`
    /// bytes (1, 2, 4, 8 or 16) per member; strides in elements.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
    fn alltoalls(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        dst_stride: usize,
        src_stride: usize,
        n: usize,
        elem: usize,
    ) -> Result<()>;
    /// `n` elements of type `ty` reduced with `op` over `t`, into every member's `dst`.
    fn reduce(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        n: usize,
        ty: RedTy,
        op: ReduceOp,
    ) -> Result<()>;
    /// Every PE of `set` arrives on the `pSync` at `psync` (`quiet` first: `shmem_barrier`;
    /// without: `shmem_sync`).
    fn barrier_set(&self, set: &ActiveSet, psync: *const i64, quiet: bool) -> Result<()>;
    /// `bytes` of symmetric `src` on `set`'s member `root` to symmetric `dst` of every other
    /// member (`Pe::broadcast_set`).
    fn broadcast_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        root: u32,
        psync: *const i64,
    ) -> Result<()>;
    /// Every member's `bytes` at `src` concatenated, in set order, into every `dst` (`fixed`:
    /// the same `bytes` everywhere, `fcollect`).
    fn collect_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        fixed: bool,
        psync: *const i64,
    ) -> Result<()>;
    /// Block `j` of `bytes` of every member's `src` to member `j`'s `dst` at the sender's
    /// index in `set`.
    fn alltoall_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        psync: *const i64,
    ) -> Result<()>;
    /// Strided all-to-all over `set` (`Pe::alltoalls_set`) of `n` elements of `elem` bytes
    /// (1, 2, 4, 8 or 16) per member; strides in elements.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
    fn alltoalls_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        dst_stride: usize,
        src_stride: usize,
        n: usize,
        elem: usize,
        psync: *const i64,
    ) -> Result<()>;
    /// `n` elements of type `ty` reduced with `op` over `set`, into every member's `dst`.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
    fn reduce_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        n: usize,
        ty: RedTy,
        op: ReduceOp,
        psync: *const i64,
    ) -> Result<()>;
    /// The full self-test ([`crate::selftest::run`]).
    fn selftest(&self, rounds: usize) -> Result<crate::selftest::Report>;
    /// How this PE reaches `pe`.
    fn transport_to(&self, pe: u32) -> Result<crate::TransportKind>;
    /// The provider whose device functions drive the RDMA queues (`mlx5`, `bnxt`, …).
    fn provider(&self) -> &'static str;
    /// Where the symmetric heap lives.
    fn heap_placement(&self) -> crate::HeapPlacement;
}

/// `T`-typed symmetric operand at `addr`.
fn operand<T: crate::Elem>(pe: &Pe<impl gda_hal::Provider>, addr: *const u8) -> Result<Sym<T>> {
    pe.sym_at(addr.cast::<T>(), 1)
}

fn amo_typed<T, P>(pe: &Pe<P>, s: Sym<T>, op: AmoOp, target: u32) -> Result<u64>
where
    T: crate::AtomicInt,
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
    T: crate::AtomicInt + PartialOrd,
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

/// [`vars_typed`] for the 16-bit (`short`, `unsigned short`) variables OpenSHMEM 1.5 lists
/// for the multi-variable tests too, element by element through [`Pe::test_short`] (their
/// `_any` form as fair as the others').
///
/// # Safety
/// As [`DynPe::test_vars`].
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routines' parameters
unsafe fn vars_short<T, P>(
    pe: &Pe<P>,
    kind: Multi,
    ivars: *mut u8,
    n: usize,
    skip: &[bool],
    cmp: Cmp,
    value: u64,
    values: *const u8,
) -> Result<(bool, Vec<usize>)>
where
    T: crate::ShortInt,
    P: gda_hal::Provider,
{
    let s = pe.sym_at(ivars.cast_const().cast::<T>(), n)?;
    let one = T::from_u16(value as u16);
    let value = |i: usize| {
        if values.is_null() {
            one
        } else {
            // SAFETY: `values` holds `n` elements of `T` (caller); `i < n`.
            unsafe { values.cast::<T>().add(i).read_unaligned() }
        }
    };
    let considered: Vec<usize> = (0..n)
        .filter(|&i| !skip.get(i).copied().unwrap_or(false))
        .collect();
    Ok(match kind {
        Multi::All => {
            let mut ok = true;
            for &i in &considered {
                ok &= pe.test_short(s, i, cmp, value(i))?;
            }
            (ok, if ok { considered } else { Vec::new() })
        }
        Multi::Any => {
            let f = pe.fair_any(s, Some(skip), |i| pe.test_short(s, i, cmp, value(i)))?;
            (
                f.is_some() || considered.is_empty(),
                f.into_iter().collect(),
            )
        }
        Multi::Some => {
            let mut f = Vec::new();
            for &i in &considered {
                if pe.test_short(s, i, cmp, value(i))? {
                    f.push(i);
                }
            }
            (!f.is_empty() || considered.is_empty(), f)
        }
    })
}

fn sync_short<T, P>(pe: &Pe<P>, s: Sym<T>, cmp: Cmp, value: u64, wait: bool) -> Result<bool>
where
    T: crate::ShortInt,
    P: gda_hal::Provider,
{
    let v = T::from_u16(value as u16);
    if wait {
        pe.wait_until_short(s, 0, cmp, v)?;
        Ok(true)
    } else {
        pe.test_short(s, 0, cmp, v)
    }
}

/// The symmetric `T`s from `a` to the end of the region holding it (the heap or the static
/// data): for operands whose extent is known only inside the routine, which checks what it
/// touches against it.
fn to_end<T: crate::Elem>(pe: &Pe<impl gda_hal::Provider>, a: *const u8) -> Result<Sym<T>> {
    let one = pe.sym_at(a.cast::<T>(), 1)?;
    pe.sym_at(a.cast::<T>(), pe.room(one)? / size_of::<T>())
}

/// What a collective runs over: a team, or an active set with its `pSync`.
#[derive(Clone, Copy)]
enum Over<'a> {
    Team(&'a Team),
    Set(&'a ActiveSet, Sym<i64>),
}

/// The `pSync` array at `p`: [`ActiveSet::PSYNC_WORDS`] symmetric words.
fn psync_at(pe: &Pe<impl gda_hal::Provider>, p: *const i64) -> Result<Sym<i64>> {
    pe.sym_at(p, ActiveSet::PSYNC_WORDS).map_err(|e| match e {
        ShmemError::Range(what) => ShmemError::Range(format!(
            "pSync must be {} symmetric longs: {what}",
            ActiveSet::PSYNC_WORDS
        )),
        e => e,
    })
}

/// [`DynPe::alltoalls`] and [`DynPe::alltoalls_set`] at element type `T`.
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
fn alltoalls_typed<T: crate::Elem, P: gda_hal::Provider>(
    pe: &Pe<P>,
    over: Over<'_>,
    dst: *mut u8,
    src: *const u8,
    ds: usize,
    ss: usize,
    n: usize,
) -> Result<()> {
    let (d, s) = (to_end::<T>(pe, dst)?, to_end::<T>(pe, src)?);
    match over {
        Over::Team(t) => pe.alltoalls(t, d, s, ds, ss, n),
        Over::Set(set, ps) => pe.alltoalls_set(set, d, s, ds, ss, n, ps),
    }
}

/// The strided all-to-all of `elem`-byte elements.
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
fn alltoalls_erased<P: gda_hal::Provider>(
    pe: &Pe<P>,
    over: Over<'_>,
    dst: *mut u8,
    src: *const u8,
    ds: usize,
    ss: usize,
    n: usize,
    elem: usize,
) -> Result<()> {
    match elem {
        1 => alltoalls_typed::<u8, P>(pe, over, dst, src, ds, ss, n),
        2 => alltoalls_typed::<u16, P>(pe, over, dst, src, ds, ss, n),
        4 => alltoalls_typed::<u32, P>(pe, over, dst, src, ds, ss, n),
        8 => alltoalls_typed::<u64, P>(pe, over, dst, src, ds, ss, n),
        16 => alltoalls_typed::<[u8; 16], P>(pe, over, dst, src, ds, ss, n),
        w => Err(ShmemError::Invalid(format!("{w}-byte elements"))),
    }
}

/// [`DynPe::test_vars`] at type `T`.
///
/// # Safety
/// As [`DynPe::test_vars`].
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routines' parameters
unsafe fn vars_typed<T, P>(
    pe: &Pe<P>,
    kind: Multi,
    ivars: *mut u8,
    n: usize,
    skip: &[bool],
    cmp: Cmp,
    value: u64,
    values: *const u8,
) -> Result<(bool, Vec<usize>)>
where
    T: crate::AtomicInt + PartialOrd,
    P: gda_hal::Provider,
{
    let s = pe.sym_at(ivars.cast_const().cast::<T>(), n)?;
    let considered: Vec<usize> = (0..n)
        .filter(|&i| !skip.get(i).copied().unwrap_or(false))
        .collect();
    let skip = Some(skip);
    let vals: Option<Vec<T>> = (!values.is_null()).then(|| {
        (0..n)
            // SAFETY: `values` holds `n` elements of `T` (caller).
            .map(|i| unsafe { values.cast::<T>().add(i).read_unaligned() })
            .collect()
    });
    let one = T::from_bits(value);
    Ok(match (kind, &vals) {
        (Multi::All, None) => {
            let ok = pe.test_all(s, skip, cmp, one)?;
            (ok, if ok { considered } else { Vec::new() })
        }
        (Multi::All, Some(v)) => {
            let ok = pe.test_all_vector(s, skip, cmp, v)?;
            (ok, if ok { considered } else { Vec::new() })
        }
        (Multi::Any, None) => {
            let f = pe.test_any(s, skip, cmp, one)?;
            (
                f.is_some() || considered.is_empty(),
                f.into_iter().collect(),
            )
        }
        (Multi::Any, Some(v)) => {
            let f = pe.test_any_vector(s, skip, cmp, v)?;
            (
                f.is_some() || considered.is_empty(),
                f.into_iter().collect(),
            )
        }
        (Multi::Some, None) => {
            let f = pe.test_some(s, skip, cmp, one)?;
            (!f.is_empty() || considered.is_empty(), f)
        }
        (Multi::Some, Some(v)) => {
            let f = pe.test_some_vector(s, skip, cmp, v)?;
            (!f.is_empty() || considered.is_empty(), f)
        }
    })
}

impl<P: gda_hal::Provider> DynPe for Pe<P> {
    fn me(&self) -> u32 {
        self.my_pe()
    }
    fn device_context(&self) -> Result<*const crate::device::DeviceCtx> {
        Pe::device_context(self).map(std::ptr::from_ref)
    }
    fn n(&self) -> u32 {
        self.n_pes()
    }
    fn malloc(&self, align: usize, bytes: usize) -> Result<*mut u8> {
        let s = self.align_agreed::<u8>(align, bytes)?;
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
            SyncTy::I16 => sync_short(self, operand::<i16>(self, ivar)?, cmp, value, wait),
            SyncTy::U16 => sync_short(self, operand::<u16>(self, ivar)?, cmp, value, wait),
        }
    }
    unsafe fn test_vars(
        &self,
        kind: Multi,
        ivars: *mut u8,
        ty: SyncTy,
        n: usize,
        skip: &[bool],
        cmp: Cmp,
        value: u64,
        values: *const u8,
    ) -> Result<(bool, Vec<usize>)> {
        // SAFETY: (every arm) forwarded from the caller.
        unsafe {
            match ty {
                SyncTy::I32 => vars_typed::<i32, P>(self, kind, ivars, n, skip, cmp, value, values),
                SyncTy::I64 => vars_typed::<i64, P>(self, kind, ivars, n, skip, cmp, value, values),
                SyncTy::U32 => vars_typed::<u32, P>(self, kind, ivars, n, skip, cmp, value, values),
                SyncTy::U64 => vars_typed::<u64, P>(self, kind, ivars, n, skip, cmp, value, values),
                SyncTy::I16 => vars_short::<i16, P>(self, kind, ivars, n, skip, cmp, value, values),
                SyncTy::U16 => vars_short::<u16, P>(self, kind, ivars, n, skip, cmp, value, values),
            }
        }
    }
    fn poll_health(&self, what: &dyn Fn() -> String) -> Result<()> {
        Pe::poll_health(self, what)
    }
    fn lock(&self, lock: *mut u8, clear: bool) -> Result<bool> {
        let l = self.sym_at(lock.cast_const().cast::<i64>(), 1)?;
        if clear {
            self.clear_lock(l, 0).map(|()| true)
        } else {
            self.test_lock(l, 0)
        }
    }
    fn ptr(&self, addr: *const u8, pe: u32) -> Result<Option<*mut u8>> {
        self.remote_ptr(self.sym_at(addr, 1)?, pe)
    }
    fn sym_range(&self, addr: *const u8, len: usize) -> Result<()> {
        self.sym_at(addr, len).map(drop)
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
    fn regions(&self) -> [(usize, usize); 2] {
        self.symmetric_regions().map(|(p, n)| (p as usize, n))
    }
    fn timeout(&self) -> std::time::Duration {
        Pe::timeout(self)
    }
    fn wait_on(
        &self,
        what: &dyn Fn() -> String,
        done: &mut dyn FnMut() -> Result<bool>,
    ) -> Result<()> {
        Pe::wait_on(self, what, done)
    }
    unsafe fn put_signal(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        sig: *mut u8,
        value: u64,
        op: SignalOp,
        pe: u32,
    ) -> Result<()> {
        let d = self.sym_at(dst, len)?;
        let s = operand::<u64>(self, sig)?;
        // SAFETY: `src` is valid for `len` bytes (caller).
        let data = unsafe { std::slice::from_raw_parts(src, len) };
        Pe::put_signal(self, d, 0, data, s, 0, value, op, pe)
    }
    fn signal_fetch(&self, sig: *const u8) -> Result<u64> {
        Pe::signal_fetch(self, operand::<u64>(self, sig)?, 0)
    }
    fn team_world(&self) -> Team {
        Pe::team_world(self)
    }
    fn team_shared(&self) -> Team {
        Pe::team_shared(self)
    }
    fn team_split(
        &self,
        parent: &Team,
        start: u32,
        stride: i32,
        size: u32,
    ) -> Result<Option<Team>> {
        self.team_split_strided(parent, start, stride, size)
    }
    fn team_destroy(&self, t: Team) -> Result<()> {
        Pe::team_destroy(self, t)
    }
    fn team_sync(&self, t: &Team) -> Result<()> {
        Pe::team_sync(self, t)
    }
    fn broadcast(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        root: u32,
    ) -> Result<()> {
        let (d, s) = (self.sym_at(dst, bytes)?, self.sym_at(src, bytes)?);
        Pe::broadcast(self, t, d, s, bytes, root)
    }
    fn collect(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        fixed: bool,
    ) -> Result<()> {
        let s = self.sym_at(src, bytes)?;
        if fixed {
            let all = bytes.checked_mul(t.n_pes() as usize).ok_or_else(|| {
                ShmemError::Invalid(format!("{bytes} bytes from {} PEs overflow", t.n_pes()))
            })?;
            self.fcollect(t, self.sym_at(dst, all)?, s, bytes)
        } else {
            // The total is known only inside the collective: the destination is checked
            // against the heap's (or static data's) end there, through the largest `Sym` the
            // address allows.
            let d = self.sym_at(dst, 1)?;
            let room = self.room(d)?;
            Pe::collect(self, t, self.sym_at(dst, room)?, s, bytes).map(drop)
        }
    }
    fn alltoall(&self, t: &Team, dst: *mut u8, src: *const u8, bytes: usize) -> Result<()> {
        let all = bytes.checked_mul(t.n_pes() as usize).ok_or_else(|| {
            ShmemError::Invalid(format!("{bytes} bytes to {} PEs overflow", t.n_pes()))
        })?;
        Pe::alltoall(
            self,
            t,
            self.sym_at(dst, all)?,
            self.sym_at(src, all)?,
            bytes,
        )
    }
    fn alltoalls(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        dst_stride: usize,
        src_stride: usize,
        n: usize,
        elem: usize,
    ) -> Result<()> {
        let (ds, ss) = (dst_stride, src_stride);
        alltoalls_erased(self, Over::Team(t), dst, src, ds, ss, n, elem)
    }
    fn reduce(
        &self,
        t: &Team,
        dst: *mut u8,
        src: *const u8,
        n: usize,
        ty: RedTy,
        op: ReduceOp,
    ) -> Result<()> {
        team_reduce(self, t, dst, src, n, ty, op)
    }
    fn barrier_set(&self, set: &ActiveSet, psync: *const i64, quiet: bool) -> Result<()> {
        let ps = psync_at(self, psync)?;
        if quiet {
            Pe::barrier_set(self, set, ps)
        } else {
            Pe::sync_set(self, set, ps)
        }
    }
    fn broadcast_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        root: u32,
        psync: *const i64,
    ) -> Result<()> {
        let (d, s) = (self.sym_at(dst, bytes)?, self.sym_at(src, bytes)?);
        Pe::broadcast_set(self, set, d, s, bytes, root, psync_at(self, psync)?)
    }
    fn collect_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        fixed: bool,
        psync: *const i64,
    ) -> Result<()> {
        let (s, ps) = (self.sym_at(src, bytes)?, psync_at(self, psync)?);
        if fixed {
            let all = bytes.checked_mul(set.size() as usize).ok_or_else(|| {
                ShmemError::Invalid(format!("{bytes} bytes from {} PEs overflow", set.size()))
            })?;
            self.fcollect_set(set, self.sym_at(dst, all)?, s, bytes, ps)
        } else {
            // Where this PE's part goes is known only inside the collective: the destination
            // reaches to the end of its region there.
            Pe::collect_set(self, set, to_end::<u8>(self, dst)?, s, bytes, ps)
        }
    }
    fn alltoall_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        psync: *const i64,
    ) -> Result<()> {
        let all = bytes.checked_mul(set.size() as usize).ok_or_else(|| {
            ShmemError::Invalid(format!("{bytes} bytes to {} PEs overflow", set.size()))
        })?;
        let (d, s) = (self.sym_at(dst, all)?, self.sym_at(src, all)?);
        Pe::alltoall_set(self, set, d, s, bytes, psync_at(self, psync)?)
    }
    fn alltoalls_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        dst_stride: usize,
        src_stride: usize,
        n: usize,
        elem: usize,
        psync: *const i64,
    ) -> Result<()> {
        let over = Over::Set(set, psync_at(self, psync)?);
        alltoalls_erased(self, over, dst, src, dst_stride, src_stride, n, elem)
    }
    fn reduce_set(
        &self,
        set: &ActiveSet,
        dst: *mut u8,
        src: *const u8,
        n: usize,
        ty: RedTy,
        op: ReduceOp,
        psync: *const i64,
    ) -> Result<()> {
        let ps = psync_at(self, psync)?;
        set_reduce(self, set, dst, src, n, ty, op, ps)
    }
    fn selftest(&self, rounds: usize) -> Result<crate::selftest::Report> {
        crate::selftest::run(self, rounds)
    }
    fn transport_to(&self, pe: u32) -> Result<crate::TransportKind> {
        Pe::transport_to(self, pe)
    }
    fn provider(&self) -> &'static str {
        P::NAME
    }
    fn heap_placement(&self) -> crate::HeapPlacement {
        Pe::heap_placement(self)
    }
}

// ---- The load/store fast path ------------------------------------------------------------

impl From<AmoOp> for crate::transport::Amo {
    // Inlined into the C ABI's fast path, across the crate boundary.
    #[inline(always)]
    fn from(op: AmoOp) -> Self {
        use crate::transport::Amo;
        match op {
            AmoOp::Fetch => Amo::Fetch,
            AmoOp::Set(v) | AmoOp::Swap(v) => Amo::Set(v),
            AmoOp::CompareSwap(compare, swap) => Amo::CompareSwap { compare, swap },
            AmoOp::Add(v) => Amo::Add(v),
            AmoOp::And(v) => Amo::And(v),
            AmoOp::Or(v) => Amo::Or(v),
            AmoOp::Xor(v) => Amo::Xor(v),
        }
    }
}

/// Where every PE reached by load/store has its heap and static data mapped here: the C ABI's
/// fast path for puts, gets and atomics to such PEs, one range check and then what the P2P
/// transport does ([`P2pView::amo`] is its very atomic), without the calls in between. PEs
/// reached by RDMA are `None` and take the full path.
#[derive(Clone, Debug)]
pub struct P2pView {
    /// This PE's user heap (address, bytes).
    heap: (usize, usize),
    /// This PE's static data (address, bytes; 0 bytes without).
    data: (usize, usize),
    /// Per PE: where its heap and its static data start here.
    peers: Vec<Option<(usize, usize)>>,
}

impl P2pView {
    /// The view of `p`'s routes (valid while `p` lives).
    pub fn new(p: &dyn DynPe) -> Self {
        let [heap, data] = p.regions();
        let peers = (0..p.n())
            .map(|j| {
                let h = p.ptr(heap.0 as *const u8, j).ok().flatten()? as usize;
                let d = if data.1 > 0 {
                    p.ptr(data.0 as *const u8, j).ok().flatten()? as usize
                } else {
                    0
                };
                Some((h, d))
            })
            .collect();
        Self { heap, data, peers }
    }

    /// PE `pe`'s copy of `[addr, addr + len)` mapped here, when `pe` is reached by load/store
    /// and the range lies in the heap or the static data; else `None` (the full path then
    /// checks and reports).
    #[inline(always)]
    pub fn local(&self, addr: usize, len: usize, pe: i32) -> Option<*mut u8> {
        let (h, d) = (*self.peers.get(usize::try_from(pe).ok()?)?)?;
        let off = addr.wrapping_sub(self.heap.0);
        if off < self.heap.1 && len <= self.heap.1 - off {
            return Some((h + off) as *mut u8);
        }
        let off = addr.wrapping_sub(self.data.0);
        if off < self.data.1 && len <= self.data.1 - off {
            return Some((d + off) as *mut u8);
        }
        None
    }

    /// `op` on the operand of width `w` at `p` (from [`P2pView::local`]); the old value.
    ///
    /// # Safety
    /// `p` came from [`P2pView::local`] for an operand of width `w`, aligned to it, and its PE
    /// lives.
    #[inline(always)]
    pub unsafe fn amo(p: *mut u8, w: Width, op: AmoOp) -> u64 {
        // SAFETY: forwarded from the caller.
        unsafe { crate::transport::p2p::amo_at(p, w, op.into()) }
    }
}

// ---- Reduction types -------------------------------------------------------------------

/// A C complex number (`float _Complex`, `double _Complex`): two `F`s, real first, as C lays
/// it out. Only sum and product are defined for it, as the specification says.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Complex<F>(pub F, pub F);

// SAFETY: `repr(C)` pair of the same float type: no padding, every bit pattern valid.
unsafe impl bytemuck::Zeroable for Complex<f32> {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Complex<f32> {}
// SAFETY: as above.
unsafe impl bytemuck::Zeroable for Complex<f64> {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Complex<f64> {}

macro_rules! complex {
    ($($f:ty),*) => {$(
        impl Elem for Complex<$f> {}
        impl Reducible for Complex<$f> {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Option<Self> {
                match op {
                    ReduceOp::Sum => Some(Complex(a.0 + b.0, a.1 + b.1)),
                    ReduceOp::Prod => Some(Complex(a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)),
                    _ => None,
                }
            }
        }
    )*};
}
complex!(f32, f64);

/// The element type of a reduction, as the C routine's name gives it.
#[derive(Clone, Copy, Debug)]
pub enum RedTy {
    /// `signed char`, `char` (signed on this ABI), `int8_t`.
    I8,
    /// `short`, `int16_t`.
    I16,
    /// `int`, `int32_t`.
    I32,
    /// `long`, `long long`, `int64_t`, `ptrdiff_t`.
    I64,
    /// `unsigned char`, `uint8_t`.
    U8,
    /// `unsigned short`, `uint16_t`.
    U16,
    /// `unsigned int`, `uint32_t`.
    U32,
    /// `unsigned long`, `unsigned long long`, `uint64_t`, `size_t`.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `float _Complex`.
    C32,
    /// `double _Complex`.
    C64,
}

/// Runs `$e` with `$T` bound to the Rust type of `$ty`.
macro_rules! with_type {
    ($ty:expr, $T:ident => $e:expr) => {
        match $ty {
            RedTy::I8 => {
                type $T = i8;
                $e
            }
            RedTy::I16 => {
                type $T = i16;
                $e
            }
            RedTy::I32 => {
                type $T = i32;
                $e
            }
            RedTy::I64 => {
                type $T = i64;
                $e
            }
            RedTy::U8 => {
                type $T = u8;
                $e
            }
            RedTy::U16 => {
                type $T = u16;
                $e
            }
            RedTy::U32 => {
                type $T = u32;
                $e
            }
            RedTy::U64 => {
                type $T = u64;
                $e
            }
            RedTy::F32 => {
                type $T = f32;
                $e
            }
            RedTy::F64 => {
                type $T = f64;
                $e
            }
            RedTy::C32 => {
                type $T = Complex<f32>;
                $e
            }
            RedTy::C64 => {
                type $T = Complex<f64>;
                $e
            }
        }
    };
}

/// The team reduction of `n` elements of `ty` (the Rust implementation, monomorphised).
pub fn team_reduce<P: gda_hal::Provider>(
    pe: &Pe<P>,
    t: &Team,
    dst: *mut u8,
    src: *const u8,
    n: usize,
    ty: RedTy,
    op: ReduceOp,
) -> Result<()> {
    with_type!(ty, T => {
        let d = pe.sym_at(dst.cast::<T>().cast_const(), n)?;
        let s = pe.sym_at(src.cast::<T>(), n)?;
        pe.reduce(t, d, s, n, op)
    })
}

/// The active-set reduction of `n` elements of `ty` (the Rust implementation, monomorphised).
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
pub fn set_reduce<P: gda_hal::Provider>(
    pe: &Pe<P>,
    set: &ActiveSet,
    dst: *mut u8,
    src: *const u8,
    n: usize,
    ty: RedTy,
    op: ReduceOp,
    psync: Sym<i64>,
) -> Result<()> {
    with_type!(ty, T => {
        let d = pe.sym_at(dst.cast::<T>().cast_const(), n)?;
        let s = pe.sym_at(src.cast::<T>(), n)?;
        pe.reduce_set(set, d, s, n, op, psync)
    })
}

/// Bytes of one element of `ty`.
pub fn width(ty: RedTy) -> usize {
    with_type!(ty, T => size_of::<T>())
}
