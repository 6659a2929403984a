//! Active sets: the OpenSHMEM 1.4 way of naming the PEs of a collective (`PE_start`,
//! `logPE_stride`, `PE_size`), with a `pSync` array the program provides.
//!
//! Only the set's PEs call, so an active set cannot borrow a team slot (choosing one would
//! need the other PEs): it synchronises through the `pSync` array instead. The routines run
//! the same collective engine as the team forms (`pe/group.rs`), with `pSync`'s words as
//! the barrier counters; they leave every word at [`ActiveSet::SYNC_VALUE`] when they return
//! on every member, so one `pSync` serves any number of calls in a row.
//!
//! ```
//! use gda_shmem::{ActiveSet, Config, ReduceOp, launch};
//! let sums = launch::threads::<gda_native::Native, _, _>(4, &Config::default(), |pe| {
//!     let psync = pe.calloc::<i64>(ActiveSet::PSYNC_WORDS)?; // zero = SYNC_VALUE
//!     let x = pe.calloc::<u64>(1)?;
//!     pe.write(x, 0, u64::from(pe.my_pe()))?;
//!     // The even PEs: 0 and 2.
//!     let evens = ActiveSet::new(0, 1, 2)?;
//!     if evens.set_pe(pe.my_pe()).is_some() {
//!         pe.reduce_set(&evens, x, x, 1, ReduceOp::Sum, psync)?;
//!     }
//!     pe.barrier_all()?;
//!     pe.read(x, 0)
//! })
//! .unwrap();
//! assert_eq!(sums, [2, 1, 2, 3]);
//! ```

use std::fmt;

use gda_hal::Provider;

use super::Pe;
use super::group::{Group, Kind, SET_PSYNC_WORDS};
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::types::{Elem, ReduceOp, Reducible};

/// The PEs `start + k * 2^log_stride` for `k < size`, in that order: an OpenSHMEM 1.4 active
/// set. A value type, checked when made ([`ActiveSet::new`]); whether the set fits the job is
/// checked by each routine, against its PE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ActiveSet {
    start: u32,
    log_stride: u32,
    size: u32,
}

impl ActiveSet {
    /// Words of `pSync` every active-set routine needs (`SHMEM_BARRIER_SYNC_SIZE`,
    /// `SHMEM_BCAST_SYNC_SIZE`, `SHMEM_REDUCE_SYNC_SIZE`, … are all this).
    pub const PSYNC_WORDS: usize = SET_PSYNC_WORDS;
    /// What every `pSync` word must hold before its first use (`SHMEM_SYNC_VALUE`).
    pub const SYNC_VALUE: i64 = 0;
    /// The largest `log_stride` (strides up to 2^30, as C's `int` PE numbers allow).
    pub const MAX_LOG_STRIDE: u32 = 30;

    /// The set of `size` PEs from `start`, `2^log_stride` apart: an error when `size` is 0,
    /// `log_stride` exceeds [`ActiveSet::MAX_LOG_STRIDE`], or the last PE overflows `u32`.
    pub fn new(start: u32, log_stride: u32, size: u32) -> Result<Self> {
        let set = Self {
            start,
            log_stride,
            size,
        };
        if size == 0 || log_stride > Self::MAX_LOG_STRIDE {
            return Err(ShmemError::Invalid(format!(
                "{set} is malformed (PE_size ≥ 1, 0 ≤ logPE_stride ≤ {})",
                Self::MAX_LOG_STRIDE
            )));
        }
        if u32::try_from(set.last_u64()).is_err() {
            return Err(ShmemError::Invalid(format!(
                "{set} reaches PE {}, past the largest PE number",
                set.last_u64()
            )));
        }
        Ok(set)
    }

    /// The first PE (`PE_start`).
    #[must_use]
    pub fn start(&self) -> u32 {
        self.start
    }

    /// `log2` of the distance between members (`logPE_stride`).
    #[must_use]
    pub fn log_stride(&self) -> u32 {
        self.log_stride
    }

    /// The distance between members.
    #[must_use]
    pub fn stride(&self) -> u32 {
        1 << self.log_stride
    }

    /// Number of PEs (`PE_size`).
    #[must_use]
    pub fn size(&self) -> u32 {
        self.size
    }

    fn last_u64(&self) -> u64 {
        u64::from(self.start) + (u64::from(self.size).saturating_sub(1) << self.log_stride)
    }

    /// The last PE of the set.
    #[must_use]
    pub fn last(&self) -> u32 {
        // `new` checked that it fits.
        u32::try_from(self.last_u64()).unwrap_or(u32::MAX)
    }

    /// World PE of member `k` (`None` past the set).
    #[must_use]
    pub fn world_pe(&self, k: u32) -> Option<u32> {
        (k < self.size).then(|| self.start + (k << self.log_stride))
    }

    /// Index in the set of world PE `world` (`None` when it is not a member).
    #[must_use]
    pub fn set_pe(&self, world: u32) -> Option<u32> {
        let off = world.checked_sub(self.start)?;
        let k = off >> self.log_stride;
        (off & (self.stride() - 1) == 0 && k < self.size).then_some(k)
    }

    /// The members' world PEs, in set order.
    pub fn pes(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.size).map(|k| self.start + (k << self.log_stride))
    }
}

impl fmt::Display for ActiveSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "active set (PE_start {}, logPE_stride {}, PE_size {})",
            self.start, self.log_stride, self.size
        )
    }
}

impl<P: Provider> Pe<P> {
    /// Runs `f` over the collective group of `set` synchronising on `psync`: an error when the
    /// set leaves the job or does not hold this PE, or `psync` is too short (or not this job's
    /// symmetric memory).
    fn with_set<R>(
        &self,
        set: &ActiveSet,
        psync: Sym<i64>,
        f: impl FnOnce(&Group<'_>) -> Result<R>,
    ) -> Result<R> {
        let (n, me) = (self.n_pes(), self.my_pe());
        if set.last() >= n {
            return Err(ShmemError::Invalid(format!(
                "{set} reaches PE {}, beyond the job's {n} PEs",
                set.last()
            )));
        }
        let Some(my) = set.set_pe(me) else {
            return Err(ShmemError::Invalid(format!(
                "{set} does not hold PE {me}, which called it"
            )));
        };
        if psync.len() < ActiveSet::PSYNC_WORDS {
            return Err(ShmemError::Invalid(format!(
                "pSync {psync:?} has {} words; active-set routines need {} \
                 (SHMEM_*_SYNC_SIZE)",
                psync.len(),
                ActiveSet::PSYNC_WORDS
            )));
        }
        // This job's symmetric memory, and inside it.
        self.at(psync, 0, ActiveSet::PSYNC_WORDS)?;
        let members: Vec<u32> = set.pes().collect();
        f(&Group {
            members: &members,
            my: my as usize,
            kind: Kind::Set { psync },
        })
    }

    /// Every PE of `set` arrives (outstanding operations are not waited for): `shmem_sync`
    /// with an active set.
    pub fn sync_set(&self, set: &ActiveSet, psync: Sym<i64>) -> Result<()> {
        self.with_set(set, psync, |g| self.group_sync(g))
    }

    /// Completes every outstanding operation, then every PE of `set` arrives: `shmem_barrier`.
    pub fn barrier_set(&self, set: &ActiveSet, psync: Sym<i64>) -> Result<()> {
        self.with_set(set, psync, |g| self.group_barrier(g))
    }

    /// `dst[0..n]` of every member but the root ← `src[0..n]` of member `root` (an index in
    /// the set; 1.4's `shmem_broadcast32/64`: the root's `dst` is not written, so `dst` may be
    /// `src`).
    pub fn broadcast_set<T: Elem>(
        &self,
        set: &ActiveSet,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        root: u32,
        psync: Sym<i64>,
    ) -> Result<()> {
        self.with_set(set, psync, |g| {
            self.group_broadcast(g, dst, src, n, root as usize, false)
        })
    }

    /// `dst[k*n..(k+1)*n]` of every member ← `src[0..n]` of member `k`, in set order
    /// (`shmem_fcollect32/64`).
    pub fn fcollect_set<T: Elem>(
        &self,
        set: &ActiveSet,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        psync: Sym<i64>,
    ) -> Result<()> {
        self.with_set(set, psync, |g| self.group_fcollect(g, dst, src, n))
    }

    /// Every member's `src[0..n]` (`n` may differ between members) concatenated in set order
    /// into every member's `dst` (`shmem_collect32/64`).
    pub fn collect_set<T: Elem>(
        &self,
        set: &ActiveSet,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        psync: Sym<i64>,
    ) -> Result<()> {
        self.with_set(set, psync, |g| self.group_collect(g, dst, src, n).map(drop))
    }

    /// `dst[k*n..]` of member `j` ← `src[j*n..]` of member `k` (`shmem_alltoall32/64`).
    pub fn alltoall_set<T: Elem>(
        &self,
        set: &ActiveSet,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        psync: Sym<i64>,
    ) -> Result<()> {
        self.with_set(set, psync, |g| self.group_alltoall(g, dst, src, n))
    }

    /// Strided all-to-all over `set` (`shmem_alltoalls32/64`), as [`Pe::alltoalls`] does over
    /// a team: element `k < n` of block `j` of this member's `src` → element `k` of block `me`
    /// of member `j`'s `dst`; strides in elements, at least 1.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's parameters
    pub fn alltoalls_set<T: Elem>(
        &self,
        set: &ActiveSet,
        dst: Sym<T>,
        src: Sym<T>,
        dst_stride: usize,
        src_stride: usize,
        n: usize,
        psync: Sym<i64>,
    ) -> Result<()> {
        self.with_set(set, psync, |g| {
            self.group_alltoalls(g, dst, src, dst_stride, src_stride, n)
        })
    }

    /// `dst[i] = op over members of src[i]` for `i < n`, on every member (`shmem_*_to_all`;
    /// no `pWrk` is needed). `dst` may be `src`, but not overlap it otherwise. Combined in set
    /// order, so floats agree bit for bit on every member.
    pub fn reduce_set<T: Reducible>(
        &self,
        set: &ActiveSet,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        op: ReduceOp,
        psync: Sym<i64>,
    ) -> Result<()> {
        self.with_set(set, psync, |g| self.group_reduce(g, dst, src, n, op))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_checked_when_made() {
        let s = ActiveSet::new(1, 2, 3).unwrap();
        assert_eq!(s.pes().collect::<Vec<_>>(), [1, 5, 9]);
        assert_eq!((s.stride(), s.last()), (4, 9));
        assert_eq!(s.world_pe(2), Some(9));
        assert_eq!(s.world_pe(3), None);
        assert_eq!(s.set_pe(5), Some(1));
        assert_eq!(s.set_pe(6), None, "between members");
        assert_eq!(s.set_pe(0), None, "before the start");
        assert_eq!(s.set_pe(13), None, "past the end");
        let e = ActiveSet::new(0, 0, 0).unwrap_err().to_string();
        assert!(e.contains("PE_size 0) is malformed"), "{e}");
        assert!(ActiveSet::new(0, 31, 2).is_err());
        assert!(ActiveSet::new(0, 30, 2).is_ok());
        let e = ActiveSet::new(u32::MAX, 0, 2).unwrap_err().to_string();
        assert!(e.contains("past the largest PE number"), "{e}");
        assert_eq!(ActiveSet::new(u32::MAX, 0, 1).unwrap().last(), u32::MAX);
    }
}
