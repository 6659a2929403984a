//! This process's PE, the routines' access to it, and fatal errors.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gda_shmem::{Cmp, Pe, ReduceOp, Result, ShmemError, SignalOp, Sym, Team, Width};

use crate::reduce::RedTy;

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

/// What the C routines need of a PE, with the provider erased.
pub trait CPe {
    /// This PE.
    fn me(&self) -> u32;
    /// The SHMEM device context (`gda_shmem::device`), built on first use.
    fn device_context(&self) -> Result<*const gda_shmem::device::DeviceCtx>;
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

/// [`CPe::alltoalls`] at element type `T`: the symmetric operands reach as far as their
/// allocations allow; gda-shmem checks what the routine touches against them.
#[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
fn alltoalls_typed<T: gda_shmem::Elem, P: gda_hal::Provider>(
    pe: &Pe<P>,
    t: &Team,
    dst: *mut u8,
    src: *const u8,
    ds: usize,
    ss: usize,
    n: usize,
) -> Result<()> {
    let whole = |a: *const u8| -> Result<Sym<T>> {
        let one = pe.sym_at(a.cast::<T>(), 1)?;
        pe.sym_at(a.cast::<T>(), pe.room(one)? / size_of::<T>())
    };
    pe.alltoalls(t, whole(dst)?, whole(src)?, ds, ss, n)
}

/// [`CPe::test_vars`] at type `T`.
///
/// # Safety
/// As [`CPe::test_vars`].
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
    T: gda_shmem::AtomicInt + PartialOrd,
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

impl<P: gda_hal::Provider> CPe for Pe<P> {
    fn me(&self) -> u32 {
        self.my_pe()
    }
    fn device_context(&self) -> Result<*const gda_shmem::device::DeviceCtx> {
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
        match elem {
            1 => alltoalls_typed::<u8, P>(self, t, dst, src, ds, ss, n),
            2 => alltoalls_typed::<u16, P>(self, t, dst, src, ds, ss, n),
            4 => alltoalls_typed::<u32, P>(self, t, dst, src, ds, ss, n),
            8 => alltoalls_typed::<u64, P>(self, t, dst, src, ds, ss, n),
            16 => alltoalls_typed::<[u8; 16], P>(self, t, dst, src, ds, ss, n),
            w => Err(ShmemError::Invalid(format!("{w}-byte elements"))),
        }
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
        crate::reduce::team_reduce(self, t, dst, src, n, ty, op)
    }
}

/// Where every PE reached by load/store has its heap and static data mapped here: the fast
/// path of puts, gets and atomics to such PEs, which does what the P2P transport does (the
/// same `gda_hal::mmio` accesses) without the calls in between. PEs reached by RDMA are
/// `None` and take the full path.
pub(crate) struct Fast {
    /// This PE's user heap (address, bytes).
    heap: (usize, usize),
    /// This PE's static data (address, bytes; 0 bytes without).
    data: (usize, usize),
    /// Per PE: where its heap and its static data start here.
    peers: Vec<Option<(usize, usize)>>,
}

impl Fast {
    fn new(p: &dyn CPe) -> Self {
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
    pub(crate) fn local(&self, addr: usize, len: usize, pe: std::ffi::c_int) -> Option<*mut u8> {
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
}

/// The process's OpenSHMEM state: the PE and the handles C holds (teams).
pub(crate) struct State {
    pub(crate) pe: Box<dyn CPe>,
    /// The load/store fast path.
    pub(crate) fast: Fast,
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
            fast: Fast::new(p.as_ref()),
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
