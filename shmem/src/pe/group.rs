//! The one collective engine: every collective of a team ([`super::team`]) and of an active set
//! ([`super::active`]) runs the code here, over a [`Group`].
//!
//! A group is an ordered list of world PEs, this PE's index among them, and how the members
//! synchronise ([`Kind`]):
//!
//! - **a team** synchronises on the counters of its team slot (its own symmetric area). They
//!   only grow: round `k` of the n-th barrier waits until word `k` has reached n, so there is
//!   no reset to race with. The slot also has a scratch buffer, which reductions and the
//!   variable-size `collect` use to gather every member's part.
//! - **an active set** (OpenSHMEM 1.4: `PE_start`, `logPE_stride`, `PE_size`) has no slot: only
//!   the set's PEs call, so none can be agreed on. It synchronises on the caller's `pSync`
//!   array, as the specification intends, with the words as counters: round `k` adds 1 to word
//!   `k` of the partner's `pSync`, waits for its own word `k` to reach 1 and takes 1 off it
//!   again. A partner already in the next call on the same `pSync` can neither lose nor steal
//!   a round, and every word is back at `SHMEM_SYNC_VALUE` (0) when the set is quiet. There is
//!   no scratch: reductions get every member's source instead, and `collect` passes its
//!   running offset along `pSync` word [`COLLECT_WORD`].
//!
//! Both kinds run the same dissemination barrier (⌈log₂ n⌉ rounds; in round `k` each member
//! signals the member 2^k ahead and waits for the one 2^k behind), and every collective is the
//! same sequence: enter (every member's destination is free), one-sided puts (or gets), quiet,
//! barrier. Reductions combine in member order on every member, so floating-point results
//! agree bit for bit. A collective of zero elements whose count every member shares
//! (broadcast, fcollect, alltoall(s), reductions) does nothing: no synchronisation, no check
//! of the buffers (nothing is read or written); `collect`, whose counts may differ, still runs.

use gda_hal::Provider;

use super::{PSYNC_WORDS, Pe, SCRATCH};
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::types::{Cmp, Elem, ReduceOp, Reducible};

/// `pSync` words an active set's barrier rounds use (`log2` of the largest set, 2^31 PEs).
pub(crate) const ROUND_WORDS: usize = 32;
/// The `pSync` word that carries a `collect`'s running offset along an active set.
pub(crate) const COLLECT_WORD: usize = ROUND_WORDS;
/// `pSync` words every active-set routine needs (`SHMEM_*_SYNC_SIZE`).
pub(crate) const SET_PSYNC_WORDS: usize = COLLECT_WORD + 1;

/// How a group's members synchronise.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// A team: the counters and scratch of team slot `slot`.
    Team {
        /// The team's slot.
        slot: usize,
    },
    /// An active set: the caller's `pSync` (at least [`SET_PSYNC_WORDS`] words, checked when
    /// the group is made).
    Set {
        /// The program's `pSync` array.
        psync: Sym<i64>,
    },
}

/// The PEs a collective runs over: world PEs in member order, this PE's index, the sync kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Group<'a> {
    pub(crate) members: &'a [u32],
    pub(crate) my: usize,
    pub(crate) kind: Kind,
}

impl Group<'_> {
    /// Members.
    fn len(&self) -> usize {
        self.members.len()
    }
}

/// `a * b`, or an error naming what overflowed.
fn times(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| ShmemError::Invalid(format!("{what}: {a} × {b} overflows")))
}

/// Whether elements `[a.off, a.off + n)` and `[b.off, b.off + n)` share a byte without being
/// the same array.
fn partly_overlap<T: Elem>(a: Sym<T>, b: Sym<T>, n: usize) -> bool {
    let bytes = n.saturating_mul(size_of::<T>());
    a.off != b.off && a.off < b.off.saturating_add(bytes) && b.off < a.off.saturating_add(bytes)
}

impl<P: Provider> Pe<P> {
    /// The counters of team slot `slot`.
    pub(crate) fn slot_psync(&self, slot: usize) -> Sym<u64> {
        Sym::new(self.team_area(slot), PSYNC_WORDS, self.heap_id)
    }

    /// The scratch buffer of team slot `slot`.
    fn slot_scratch(&self, slot: usize) -> Sym<u8> {
        Sym::new(
            self.team_area(slot) + PSYNC_WORDS * 8,
            SCRATCH,
            self.heap_id,
        )
    }

    /// The dissemination barrier's rounds: `round(k, to, from)` for `k < ⌈log₂ n⌉`, where
    /// `to` is the member 2^k ahead (to signal) and `from` the one 2^k behind (to wait for).
    fn dissemination(
        g: &Group<'_>,
        mut round: impl FnMut(usize, u32, u32) -> Result<()>,
    ) -> Result<()> {
        let n = g.len();
        let mut k = 0;
        while (1usize << k) < n {
            let d = 1usize << k;
            round(
                k,
                g.members[(g.my + d) % n],
                g.members[(g.my + n - d % n) % n],
            )?;
            k += 1;
        }
        Ok(())
    }

    /// Every member arrives (outstanding operations are not waited for): the dissemination
    /// barrier on the group's counters (see the module documentation).
    pub(crate) fn group_sync(&self, g: &Group<'_>) -> Result<()> {
        let n = g.len();
        if n <= 1 {
            return Ok(());
        }
        match g.kind {
            Kind::Team { slot } => {
                // What the counters must reach this time: the barriers so far.
                let epoch = {
                    let mut t = self.teams.borrow_mut();
                    t.epoch[slot] += 1;
                    t.epoch[slot]
                };
                let psync = self.slot_psync(slot);
                Self::dissemination(g, |k, to, from| {
                    self.atomic_add(psync, k, 1u64, to)?;
                    self.wait_for(
                        &|| format!("barrier round {k} of a team of {n} (epoch {epoch})"),
                        &|| vec![from],
                        || self.test(psync, k, Cmp::Ge, epoch),
                    )
                })
            }
            Kind::Set { psync } => {
                let me = self.my_pe();
                Self::dissemination(g, |k, to, from| {
                    self.atomic_add(psync, k, 1i64, to)?;
                    self.wait_for(
                        &|| {
                            format!(
                                "round {k} of an active-set barrier of {n} PEs (pSync {psync:?}, \
                                 from PE {from})"
                            )
                        },
                        &|| vec![from],
                        || self.test(psync, k, Cmp::Ge, 1i64),
                    )?;
                    // The arrival is consumed: the word is back where it was before the round.
                    self.atomic_add(psync, k, -1i64, me)
                })
            }
        }
    }

    /// Completes every outstanding operation, then synchronises the group.
    pub(crate) fn group_barrier(&self, g: &Group<'_>) -> Result<()> {
        self.quiet()?;
        self.group_sync(g)
    }

    /// The start of a collective: every member's destination is free. A team only
    /// synchronises; an active set also completes this PE's earlier operations first, as the
    /// 1.4 routines always have here (a program may count on its puts into a source having
    /// landed).
    fn group_enter(&self, g: &Group<'_>) -> Result<()> {
        match g.kind {
            Kind::Team { .. } => self.group_sync(g),
            Kind::Set { .. } => self.group_barrier(g),
        }
    }

    /// Every member's `v`, in member order, through the team slot's scratch (a team only).
    pub(crate) fn group_allgather_u64(&self, g: &Group<'_>, v: u64) -> Result<Vec<u64>> {
        let Kind::Team { slot } = g.kind else {
            return Err(ShmemError::Invalid(
                "an all-gather needs a team's scratch (an active set has none)".into(),
            ));
        };
        let n = g.len();
        if n * 8 > SCRATCH {
            return Err(ShmemError::Invalid(format!(
                "team of {n} is larger than the scratch allows"
            )));
        }
        let scratch = self.slot_scratch(slot);
        self.group_sync(g)?;
        for &m in g.members {
            self.put(scratch, g.my * 8, &v.to_le_bytes(), m)?;
        }
        self.group_barrier(g)?;
        let mut raw = vec![0u8; n * 8];
        self.copy_out(scratch, 0, &mut raw)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect())
    }

    /// Where this member's `n` elements go in a `collect` (the sum of the earlier members'),
    /// and the total when this kind learns it. Collective; on return every member's
    /// destination is free. A team all-gathers the counts; an active set passes the running
    /// offset along `pSync` word [`COLLECT_WORD`] (stored as offset + 1: 0 is "not yet").
    fn group_collect_offset(&self, g: &Group<'_>, n: usize) -> Result<(usize, Option<usize>)> {
        match g.kind {
            Kind::Team { .. } => {
                let counts = self.group_allgather_u64(g, n as u64)?;
                let sum = |c: &[u64]| {
                    c.iter()
                        .try_fold(0usize, |a, &x| a.checked_add(usize::try_from(x).ok()?))
                        .ok_or_else(|| {
                            ShmemError::Invalid("the collect's total overflows".to_string())
                        })
                };
                Ok((sum(&counts[..g.my])?, Some(sum(&counts)?)))
            }
            Kind::Set { psync } => {
                self.group_barrier(g)?;
                let me = self.my_pe();
                let at = if g.my == 0 {
                    0
                } else {
                    let from = g.members[g.my - 1];
                    self.wait_for(
                        &|| format!("the collect offset from PE {from} (pSync {psync:?})"),
                        &|| vec![from],
                        || self.test(psync, COLLECT_WORD, Cmp::Ne, 0i64),
                    )?;
                    let v = self.atomic_swap(psync, COLLECT_WORD, 0i64, me)?;
                    v.checked_sub(1)
                        .and_then(|at| usize::try_from(at).ok())
                        .ok_or_else(|| {
                            ShmemError::Invalid(format!(
                                "pSync word {COLLECT_WORD} holds {v}, not a collect offset (was \
                                 pSync at SHMEM_SYNC_VALUE?)"
                            ))
                        })?
                };
                if g.my + 1 < g.len() {
                    let next = at
                        .checked_add(n)
                        .and_then(|x| i64::try_from(x).ok()?.checked_add(1))
                        .ok_or_else(|| {
                            ShmemError::Invalid("the collect's total overflows".to_string())
                        })?;
                    self.atomic_set(psync, COLLECT_WORD, next, g.members[g.my + 1])?;
                }
                Ok((at, None))
            }
        }
    }

    fn local_copy<T: Elem>(&self, src: Sym<T>, idx: usize, n: usize) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); n];
        self.copy_out(src, idx, &mut v)?;
        Ok(v)
    }

    /// `dst[0..n]` of every member ← `src[0..n]` of member `root`; the root's own `dst` only
    /// with `to_root` (an active set's broadcast leaves it alone).
    pub(crate) fn group_broadcast<T: Elem>(
        &self,
        g: &Group<'_>,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        root: usize,
        to_root: bool,
    ) -> Result<()> {
        if root >= g.len() {
            return Err(ShmemError::BadPe {
                pe: u32::try_from(root).unwrap_or(u32::MAX),
                n_pes: g.len() as u32,
            });
        }
        if n == 0 {
            return Ok(()); // nothing to move: no member waits for another
        }
        dst.range(0, n)?;
        self.group_enter(g)?;
        if g.my == root {
            let data = self.local_copy(src, 0, n)?;
            for (k, &m) in g.members.iter().enumerate() {
                if k != root || to_root {
                    self.put(dst, 0, &data, m)?;
                }
            }
        }
        self.group_barrier(g)
    }

    /// `dst[k*n..(k+1)*n]` of every member ← `src[0..n]` of member `k`.
    pub(crate) fn group_fcollect<T: Elem>(
        &self,
        g: &Group<'_>,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(()); // every member passes the same `n`: nothing to move anywhere
        }
        dst.range(0, times(n, g.len(), "fcollect")?)?;
        let data = self.local_copy(src, 0, n)?;
        self.group_enter(g)?;
        for &m in g.members {
            self.put(dst, g.my * n, &data, m)?;
        }
        self.group_barrier(g)
    }

    /// Every member's `src[0..n_k]` (`n_k` may differ) concatenated in member order into every
    /// member's `dst`; the total, when this kind learns it (a team does).
    pub(crate) fn group_collect<T: Elem>(
        &self,
        g: &Group<'_>,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
    ) -> Result<Option<usize>> {
        let data = self.local_copy(src, 0, n)?;
        let (at, total) = self.group_collect_offset(g, n)?;
        dst.range(at, n)?;
        if let Some(total) = total {
            dst.range(0, total)?;
        }
        if n > 0 {
            for &m in g.members {
                self.put(dst, at, &data, m)?;
            }
        }
        self.group_barrier(g)?;
        Ok(total)
    }

    /// `dst[k*n..]` of member `j` ← `src[j*n..]` of member `k`.
    pub(crate) fn group_alltoall<T: Elem>(
        &self,
        g: &Group<'_>,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(()); // every member passes the same `n`: nothing to move anywhere
        }
        let all = times(n, g.len(), "alltoall")?;
        dst.range(0, all)?;
        let data = self.local_copy(src, 0, all)?;
        self.group_enter(g)?;
        for (j, &m) in g.members.iter().enumerate() {
            self.put(dst, g.my * n, &data[j * n..(j + 1) * n], m)?;
        }
        self.group_barrier(g)
    }

    /// Strided all-to-all: element `k < n` of block `j` of this member's `src`
    /// (`src[(j * n + k) * src_stride]`) → element `k` of block `me` of member `j`'s `dst`
    /// (`dst[(me * n + k) * dst_stride]`); strides in elements, at least 1.
    pub(crate) fn group_alltoalls<T: Elem>(
        &self,
        g: &Group<'_>,
        dst: Sym<T>,
        src: Sym<T>,
        dst_stride: usize,
        src_stride: usize,
        n: usize,
    ) -> Result<()> {
        if dst_stride == 0 || src_stride == 0 {
            return Err(ShmemError::Invalid(format!(
                "alltoalls strides must be at least 1 (dst {dst_stride}, src {src_stride})"
            )));
        }
        if n == 0 {
            return Ok(()); // every member passes the same `n`: nothing to move anywhere
        }
        let size = g.len();
        // The last element either side touches: (size * n - 1) * stride, checked for overflow
        // and against the allocations before anything moves.
        let span = |stride: usize| {
            size.checked_mul(n)
                .map(|all| {
                    all.checked_sub(1)
                        .map_or(Some(0), |last| last.checked_mul(stride)?.checked_add(1))
                })
                .unwrap_or(None)
                .ok_or_else(|| {
                    ShmemError::Invalid(format!(
                        "alltoalls of {n} elements to {size} PEs at stride {stride} overflows"
                    ))
                })
        };
        let (dspan, sspan) = (span(dst_stride)?, span(src_stride)?);
        dst.range(0, dspan)?;
        let data = self.local_copy(src, 0, sspan)?;
        self.group_enter(g)?;
        for (j, &m) in g.members.iter().enumerate() {
            let block: Vec<T> = (0..n).map(|k| data[(j * n + k) * src_stride]).collect();
            self.iput(dst, g.my * n * dst_stride, dst_stride, &block, 1, n, m)?;
        }
        self.group_barrier(g)
    }

    /// `dst[i] = op over members of src[i]` for `i < n`, on every member; `dst` may be `src`
    /// but not overlap it otherwise. Every member combines the members' values in member order
    /// (so floats agree bit for bit). A team gathers them in its scratch, in chunks (each
    /// member puts its chunk into every member's scratch); an active set gets every member's
    /// `src` between two barriers (the second: no member still reads a `src` that `dst` is).
    pub(crate) fn group_reduce<T: Reducible>(
        &self,
        g: &Group<'_>,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        op: ReduceOp,
    ) -> Result<()> {
        if T::combine(op, T::zeroed(), T::zeroed()).is_none() {
            return Err(ShmemError::Invalid(format!(
                "{op:?} is not defined for {}",
                std::any::type_name::<T>()
            )));
        }
        if n == 0 {
            return Ok(()); // every member passes the same `n`: nothing to combine
        }
        dst.range(0, n)?;
        src.range(0, n)?;
        if partly_overlap(dst, src, n) {
            return Err(ShmemError::Invalid(format!(
                "a reduction's destination {dst:?} and source {src:?} overlap without being the \
                 same array"
            )));
        }
        // `acc[i] = acc[i] op row[i]`: the one combining step, in member order.
        let fold = |acc: &mut [T], row: &[T]| {
            for (a, &b) in acc.iter_mut().zip(row) {
                *a = T::combine(op, *a, b).unwrap_or(*a);
            }
        };
        let size = g.len();
        match g.kind {
            Kind::Team { slot } => {
                let chunk = (SCRATCH / (size * size_of::<T>())).max(1);
                if chunk * size * size_of::<T>() > SCRATCH {
                    return Err(ShmemError::Invalid(format!(
                        "team of {size} too large for {} reductions",
                        std::any::type_name::<T>()
                    )));
                }
                let scratch = self.slot_scratch(slot);
                let mut at = 0;
                while at < n {
                    let len = chunk.min(n - at);
                    let mine = self.local_copy(src, at, len)?;
                    let bytes: &[u8] = bytemuck::cast_slice(&mine);
                    self.group_sync(g)?;
                    for &m in g.members {
                        self.put(scratch, g.my * chunk * size_of::<T>(), bytes, m)?;
                    }
                    self.group_barrier(g)?;
                    let mut raw = vec![0u8; size * chunk * size_of::<T>()];
                    self.copy_out(scratch, 0, &mut raw)?;
                    let vals: Vec<T> = raw
                        .chunks_exact(size_of::<T>())
                        .map(bytemuck::pod_read_unaligned)
                        .collect();
                    let mut acc: Vec<T> = vals[..len].to_vec();
                    for k in 1..size {
                        fold(&mut acc, &vals[k * chunk..k * chunk + len]);
                    }
                    self.copy_in(dst, at, &acc)?;
                    at += len;
                }
                // No member puts the next chunk (or collective) into a scratch still read.
                self.group_sync(g)
            }
            Kind::Set { .. } => {
                self.group_enter(g)?;
                let mut acc = vec![T::zeroed(); n];
                let mut row = vec![T::zeroed(); n];
                for (k, &m) in g.members.iter().enumerate() {
                    if k == 0 {
                        self.get(&mut acc, src, 0, m)?;
                    } else {
                        self.get(&mut row, src, 0, m)?;
                        fold(&mut acc, &row);
                    }
                }
                self.group_barrier(g)?;
                self.copy_in(dst, 0, &acc)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_told_from_the_same_array() {
        let s = |off: usize| Sym::<u32>::new(off, 4, 1);
        assert!(!partly_overlap(s(0), s(0), 4), "the same array");
        assert!(partly_overlap(s(0), s(4), 4), "one element apart");
        assert!(partly_overlap(s(12), s(0), 4), "the last element");
        assert!(!partly_overlap(s(0), s(16), 4), "adjacent");
        assert!(!partly_overlap(s(0), s(4), 0), "nothing to overlap");
    }

    #[test]
    fn products_that_overflow_are_errors() {
        assert_eq!(times(3, 4, "x").ok(), Some(12));
        assert!(times(usize::MAX, 2, "fcollect").is_err());
    }
}
