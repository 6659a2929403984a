//! Teams, barriers and collectives.
//!
//! Every team owns one of 16 internal symmetric areas: synchronisation words and a
//! scratch buffer. `TEAM_WORLD` has slot 0 and `TEAM_SHARED` slot 1; a split picks the lowest
//! slot free on every member of the parent (agreed by an all-gather of free-slot masks), so two
//! teams that share a PE never share a slot.
//!
//! **Barrier** is a dissemination barrier: ⌈log₂ n⌉ rounds; in round k each member increments
//! word k at the member 2^k ahead (an atomic add over whatever transport reaches it) and waits
//! until its own word k has reached the number of barriers so far. Counters only grow, so no
//! reset races; no PE is a serial coordinator; a timeout names the member it waited for.
//! Collectives are built from puts into the destination (symmetric) and team barriers.

use std::rc::Rc;

use gda_hal::Provider;

use super::{PSYNC_WORDS, Pe, SCRATCH, TEAM_SLOTS};
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::types::{Cmp, Elem, ReduceOp, Reducible};

/// A team: an ordered set of PEs with its own synchronisation area.
#[derive(Clone, Debug)]
pub struct Team {
    slot: usize,
    members: Rc<[u32]>,
    my: u32,
}

impl Team {
    /// This PE's number in the team.
    #[must_use]
    pub fn my_pe(&self) -> u32 {
        self.my
    }

    /// Number of PEs in the team.
    #[must_use]
    pub fn n_pes(&self) -> u32 {
        self.members.len() as u32
    }

    /// World PE of team member `pe`.
    #[must_use]
    pub fn world_pe(&self, pe: u32) -> Option<u32> {
        self.members.get(pe as usize).copied()
    }

    /// Team number of world PE `world`.
    #[must_use]
    pub fn team_pe(&self, world: u32) -> Option<u32> {
        self.members
            .iter()
            .position(|&m| m == world)
            .map(|i| i as u32)
    }

    /// `pe` of team `src` in team `dst` (`shmem_team_translate_pe`).
    #[must_use]
    pub fn translate(src: &Team, pe: u32, dst: &Team) -> Option<u32> {
        dst.team_pe(src.world_pe(pe)?)
    }
}

/// Per-PE team bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct Teams {
    used: [bool; TEAM_SLOTS],
    /// Barriers completed per slot (what the counters must reach).
    epoch: [u64; TEAM_SLOTS],
    world: Option<Team>,
    shared: Option<Team>,
}

pub(crate) fn init_teams<P: Provider>(pe: &Pe<P>) -> Result<()> {
    let me = pe.my_pe();
    let world: Rc<[u32]> = (0..pe.n_pes()).collect();
    let shared: Rc<[u32]> = (0..pe.n_pes())
        .filter(|&j| j == me || pe.same_host(j))
        .collect();
    let my_shared = shared.iter().position(|&m| m == me).unwrap_or(0) as u32;
    let mut t = pe.teams.borrow_mut();
    t.used[0] = true;
    t.used[1] = true;
    t.world = Some(Team {
        slot: 0,
        members: world,
        my: me,
    });
    t.shared = Some(Team {
        slot: 1,
        members: shared,
        my: my_shared,
    });
    Ok(())
}

impl<P: Provider> Pe<P> {
    /// All PEs (`SHMEM_TEAM_WORLD`).
    pub fn team_world(&self) -> Team {
        self.teams.borrow().world.clone().unwrap_or_else(|| Team {
            slot: 0,
            members: Rc::from([]),
            my: 0,
        })
    }

    /// The PEs on this host (`SHMEM_TEAM_SHARED`): those reached by load/store when P2P is on.
    pub fn team_shared(&self) -> Team {
        self.teams.borrow().shared.clone().unwrap_or_else(|| Team {
            slot: 1,
            members: Rc::from([]),
            my: 0,
        })
    }

    fn psync(&self, team: &Team) -> Sym<u64> {
        Sym::new(self.team_area(team.slot), PSYNC_WORDS, self.heap_id)
    }

    fn scratch(&self, team: &Team) -> Sym<u8> {
        Sym::new(
            self.team_area(team.slot) + PSYNC_WORDS * 8,
            SCRATCH,
            self.heap_id,
        )
    }

    /// Synchronises the team's PEs without completing outstanding operations
    /// (`shmem_team_sync`; `sync_all` for the world).
    pub fn team_sync(&self, team: &Team) -> Result<()> {
        let n = team.members.len();
        if n <= 1 {
            return Ok(());
        }
        let epoch = {
            let mut t = self.teams.borrow_mut();
            t.epoch[team.slot] += 1;
            t.epoch[team.slot]
        };
        let psync = self.psync(team);
        let my = team.my as usize;
        let mut k = 0;
        while (1usize << k) < n {
            let d = 1usize << k;
            let to = team.members[(my + d) % n];
            let from = team.members[(my + n - d % n) % n];
            self.atomic_add(psync, k, 1u64, to)?;
            self.wait_for(
                &|| format!("barrier round {k} of a team of {n} (epoch {epoch})"),
                &|| vec![from],
                || self.test(psync, k, Cmp::Ge, epoch),
            )?;
            k += 1;
        }
        Ok(())
    }

    /// Completes every outstanding operation, then synchronises the team.
    pub fn team_barrier(&self, team: &Team) -> Result<()> {
        self.quiet()?;
        self.team_sync(team)
    }

    /// `shmem_barrier_all`: quiet, then every PE arrives.
    pub fn barrier_all(&self) -> Result<()> {
        let w = self.team_world();
        self.team_barrier(&w)
    }

    /// `shmem_sync_all`: every PE arrives (outstanding operations are not waited for).
    pub fn sync_all(&self) -> Result<()> {
        let w = self.team_world();
        self.team_sync(&w)
    }

    fn member(&self, team: &Team) -> Result<()> {
        if team.members.get(team.my as usize) != Some(&self.my_pe()) {
            return Err(ShmemError::Invalid(format!(
                "PE {} is not a member of this team",
                self.my_pe()
            )));
        }
        Ok(())
    }

    /// Every member's `v`, in team order (through the team's scratch).
    pub(crate) fn team_allgather_u64(&self, team: &Team, v: u64) -> Result<Vec<u64>> {
        let n = team.members.len();
        if n * 8 > SCRATCH {
            return Err(ShmemError::Invalid(format!(
                "team of {n} is larger than the scratch allows"
            )));
        }
        let scratch = self.scratch(team);
        self.team_sync(team)?;
        for &m in team.members.iter() {
            self.put(scratch, team.my as usize * 8, &v.to_le_bytes(), m)?;
        }
        self.team_barrier(team)?;
        let mut raw = vec![0u8; n * 8];
        self.copy_out(scratch, 0, &mut raw)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect())
    }

    /// Collective over `parent`: the team of parent PEs `start, start + stride, …` (`size` of
    /// them); `None` on PEs not in it (`shmem_team_split_strided`).
    pub fn team_split_strided(
        &self,
        parent: &Team,
        start: u32,
        stride: i32,
        size: u32,
    ) -> Result<Option<Team>> {
        self.member(parent)?;
        let pn = parent.members.len() as i64;
        let idx: Vec<i64> = (0..i64::from(size))
            .map(|k| i64::from(start) + k * i64::from(stride))
            .collect();
        if size == 0 || idx.iter().any(|&i| i < 0 || i >= pn) {
            return Err(ShmemError::Invalid(format!(
                "split start {start} stride {stride} size {size} leaves a parent team of {pn}"
            )));
        }
        let members: Rc<[u32]> = idx.iter().map(|&i| parent.members[i as usize]).collect();
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != members.len() {
            return Err(ShmemError::Invalid(
                "split names a PE twice (stride 0?)".into(),
            ));
        }
        let free_mask = {
            let t = self.teams.borrow();
            (0..TEAM_SLOTS)
                .filter(|&s| !t.used[s])
                .fold(0u64, |m, s| m | 1 << s)
        };
        let masks = self.team_allgather_u64(parent, free_mask)?;
        let common = masks.iter().fold(u64::MAX, |a, &m| a & m);
        let me = self.my_pe();
        // Members need a slot free on all of them; the parent's mask covers them.
        if common == 0 {
            self.team_barrier(parent)?;
            return Err(ShmemError::Invalid(format!(
                "more than {TEAM_SLOTS} teams at once"
            )));
        }
        let slot = common.trailing_zeros() as usize;
        let my = members.iter().position(|&m| m == me);
        if my.is_some() {
            let mut t = self.teams.borrow_mut();
            t.used[slot] = true;
            t.epoch[slot] = 0;
            drop(t);
            // The slot's counters start from zero on every member, before anyone uses them
            // (the parent barrier below).
            let ps = Sym::<u64>::new(self.team_area(slot), PSYNC_WORDS, self.heap_id);
            // SAFETY: this PE's psync words of a slot no team of this PE uses.
            unsafe { gda_hal::sym::sym_fill(self.local_ptr(ps)?.cast(), 0, PSYNC_WORDS * 8) };
        }
        self.team_barrier(parent)?;
        let Some(my) = my else { return Ok(None) };
        Ok(Some(Team {
            slot,
            members,
            my: my as u32,
        }))
    }

    /// Collective over the team: releases its slot (`shmem_team_destroy`).
    pub fn team_destroy(&self, team: Team) -> Result<()> {
        if team.slot < 2 {
            return Err(ShmemError::Invalid(
                "the world and shared teams cannot be destroyed".into(),
            ));
        }
        self.member(&team)?;
        self.team_barrier(&team)?;
        self.teams.borrow_mut().used[team.slot] = false;
        Ok(())
    }

    fn local_copy<T: Elem>(&self, src: Sym<T>, idx: usize, n: usize) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); n];
        self.copy_out(src, idx, &mut v)?;
        Ok(v)
    }

    /// `dst[0..n]` on every member ← `src[0..n]` of member `root` (`shmem_broadcast`).
    pub fn broadcast<T: Elem>(
        &self,
        team: &Team,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        root: u32,
    ) -> Result<()> {
        self.member(team)?;
        if root >= team.n_pes() {
            return Err(ShmemError::BadPe {
                pe: root,
                n_pes: team.n_pes(),
            });
        }
        dst.range(0, n)?;
        self.team_sync(team)?;
        if team.my == root {
            let data = self.local_copy(src, 0, n)?;
            for &m in team.members.iter() {
                self.put(dst, 0, &data, m)?;
            }
        }
        self.team_barrier(team)
    }

    /// `dst[k*n..(k+1)*n]` on every member ← `src[0..n]` of member k (`shmem_fcollect`).
    pub fn fcollect<T: Elem>(&self, team: &Team, dst: Sym<T>, src: Sym<T>, n: usize) -> Result<()> {
        self.member(team)?;
        dst.range(0, n * team.members.len())?;
        let data = self.local_copy(src, 0, n)?;
        self.team_sync(team)?;
        for &m in team.members.iter() {
            self.put(dst, team.my as usize * n, &data, m)?;
        }
        self.team_barrier(team)
    }

    /// Concatenation of every member's `src[0..n_k]` (n_k may differ) into `dst` on every
    /// member, in team order (`shmem_collect`); returns the total.
    pub fn collect<T: Elem>(
        &self,
        team: &Team,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
    ) -> Result<usize> {
        self.member(team)?;
        let data = self.local_copy(src, 0, n)?;
        let counts = self.team_allgather_u64(team, n as u64)?;
        let total: u64 = counts.iter().sum();
        let at: u64 = counts[..team.my as usize].iter().sum();
        dst.range(0, total as usize)?;
        for &m in team.members.iter() {
            self.put(dst, at as usize, &data, m)?;
        }
        self.team_barrier(team)?;
        Ok(total as usize)
    }

    /// `dst[k*n..]` of member j ← `src[j*n..]` of member k (`shmem_alltoall`).
    pub fn alltoall<T: Elem>(&self, team: &Team, dst: Sym<T>, src: Sym<T>, n: usize) -> Result<()> {
        self.member(team)?;
        let size = team.members.len();
        dst.range(0, n * size)?;
        let data = self.local_copy(src, 0, n * size)?;
        self.team_sync(team)?;
        for (j, &m) in team.members.iter().enumerate() {
            self.put(dst, team.my as usize * n, &data[j * n..(j + 1) * n], m)?;
        }
        self.team_barrier(team)
    }

    /// Strided all-to-all (`shmem_alltoalls`): element `k < n` of block `j` of this member's
    /// `src` (`src[(j * n + k) * src_stride]`) → element `k` of block `me` of member `j`'s
    /// `dst` (`dst[(me * n + k) * dst_stride]`); strides in elements, at least 1.
    pub fn alltoalls<T: Elem>(
        &self,
        team: &Team,
        dst: Sym<T>,
        src: Sym<T>,
        dst_stride: usize,
        src_stride: usize,
        n: usize,
    ) -> Result<()> {
        self.member(team)?;
        if dst_stride == 0 || src_stride == 0 {
            return Err(ShmemError::Invalid(format!(
                "alltoalls strides must be at least 1 (dst {dst_stride}, src {src_stride})"
            )));
        }
        let size = team.members.len();
        // The last element either side touches: (size * n - 1) * stride, checked for overflow
        // and against the allocations before anything moves.
        let span = |stride: usize| {
            (size * n)
                .checked_sub(1)
                .map(|last| last.checked_mul(stride).and_then(|x| x.checked_add(1)))
                .unwrap_or(Some(0))
                .ok_or_else(|| {
                    ShmemError::Invalid(format!(
                        "alltoalls of {n} elements to {size} PEs at stride {stride} overflows"
                    ))
                })
        };
        let (dspan, sspan) = (span(dst_stride)?, span(src_stride)?);
        dst.range(0, dspan)?;
        let data = self.local_copy(src, 0, sspan)?;
        self.team_sync(team)?;
        if n > 0 {
            for (j, &m) in team.members.iter().enumerate() {
                let block: Vec<T> = (0..n).map(|k| data[(j * n + k) * src_stride]).collect();
                self.iput(
                    dst,
                    team.my as usize * n * dst_stride,
                    dst_stride,
                    &block,
                    1,
                    n,
                    m,
                )?;
            }
        }
        self.team_barrier(team)
    }

    /// `dst[i] = op over members of src[i]` for `i < n`, on every member (`shmem_*_reduce`);
    /// `dst` may be `src`. Combined in team order, so floats agree bit for bit on every PE.
    pub fn reduce<T: Reducible>(
        &self,
        team: &Team,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        op: ReduceOp,
    ) -> Result<()> {
        self.member(team)?;
        if T::combine(op, T::zeroed(), T::zeroed()).is_none() {
            return Err(ShmemError::Invalid(format!(
                "{op:?} is not defined for {}",
                std::any::type_name::<T>()
            )));
        }
        dst.range(0, n)?;
        src.range(0, n)?;
        let size = team.members.len();
        let chunk = (SCRATCH / (size * size_of::<T>())).max(1);
        if chunk * size * size_of::<T>() > SCRATCH {
            return Err(ShmemError::Invalid(format!(
                "team of {size} too large for {} reductions",
                std::any::type_name::<T>()
            )));
        }
        let scratch = self.scratch(team);
        let mut at = 0;
        while at < n {
            let len = chunk.min(n - at);
            let mine = self.local_copy(src, at, len)?;
            let bytes: &[u8] = bytemuck::cast_slice(&mine);
            self.team_sync(team)?;
            for &m in team.members.iter() {
                self.put(scratch, team.my as usize * chunk * size_of::<T>(), bytes, m)?;
            }
            self.team_barrier(team)?;
            let mut raw = vec![0u8; size * chunk * size_of::<T>()];
            self.copy_out(scratch, 0, &mut raw)?;
            let vals: Vec<T> = raw
                .chunks_exact(size_of::<T>())
                .map(bytemuck::pod_read_unaligned)
                .collect();
            let mut acc: Vec<T> = vals[..len].to_vec();
            for k in 1..size {
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = T::combine(op, *a, vals[k * chunk + i]).unwrap_or(*a);
                }
            }
            self.copy_in(dst, at, &acc)?;
            at += len;
        }
        self.team_sync(team)
    }
}
