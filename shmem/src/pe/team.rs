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
//!
//! The barrier and the collectives themselves are the collective engine's
//! (`pe/group.rs`), which the active-set collectives (`pe/active.rs`) run too; this
//! file is the teams: their slots, splits, and the team forms of the routines.

use std::rc::Rc;

use gda_hal::Provider;

use super::group::{Group, Kind};
use super::{PSYNC_WORDS, Pe, TEAM_SLOTS};
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::types::{Elem, ReduceOp, Reducible};

/// What a team is created with (`shmem_team_config_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TeamConfig {
    /// Contexts the program means to create on the team (`num_contexts`): reported back by
    /// [`Team::config`]; gda reserves nothing per team, so any number can be created.
    pub num_contexts: u32,
}

/// Where one axis of a 2D split lies in its parent: the strided split of parent PEs `start,
/// start + stride, …` (`size` of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axis {
    /// The axis's first parent PE.
    pub start: u32,
    /// The distance between its parent PEs.
    pub stride: i32,
    /// Its PEs.
    pub size: u32,
}

/// A team: an ordered set of PEs with its own synchronisation area.
#[derive(Clone, Debug)]
pub struct Team {
    slot: usize,
    members: Rc<[u32]>,
    my: u32,
    config: TeamConfig,
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

    /// What the team was created with (`shmem_team_get_config`); the default for the world
    /// and shared teams.
    #[must_use]
    pub fn config(&self) -> TeamConfig {
        self.config
    }

    /// The team with `config` recorded (for callers that split through an interface without
    /// one: the C ABI's provider-erased PE).
    #[must_use]
    pub fn with_config(mut self, config: TeamConfig) -> Team {
        self.config = config;
        self
    }

    /// This PE's two axes when the team is split in 2D with `xrange` PEs a row
    /// (`shmem_team_split_2d`): the x axis is its row, `xrange` consecutive PEs (the last row
    /// may be shorter); the y axis its column, every `xrange`-th PE from its column's first.
    /// An `xrange` above the team's size is the team's size (one row). `xrange` 0 is an error.
    pub fn split_2d_axes(&self, xrange: u32) -> Result<[Axis; 2]> {
        let n = self.n_pes();
        if xrange == 0 || n == 0 {
            return Err(ShmemError::Invalid(format!(
                "a 2D split needs an xrange of at least 1 (got {xrange}) of a team of at least 1 \
                 PE ({n})"
            )));
        }
        let x = xrange.min(n);
        let (row, col) = (self.my / x, self.my % x);
        let stride = i32::try_from(x)
            .map_err(|_| ShmemError::Invalid(format!("xrange {x} does not fit a stride")))?;
        Ok([
            Axis {
                start: row * x,
                stride: 1,
                size: x.min(n - row * x),
            },
            Axis {
                start: col,
                stride,
                size: (n - col).div_ceil(x),
            },
        ])
    }
}

/// Per-PE team bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct Teams {
    used: [bool; TEAM_SLOTS],
    /// Barriers completed per slot (what the counters must reach).
    pub(super) epoch: [u64; TEAM_SLOTS],
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
        config: TeamConfig::default(),
    });
    t.shared = Some(Team {
        slot: 1,
        members: shared,
        my: my_shared,
        config: TeamConfig::default(),
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
            config: TeamConfig::default(),
        })
    }

    /// The PEs on this host (`SHMEM_TEAM_SHARED`): those reached by load/store when P2P is on.
    pub fn team_shared(&self) -> Team {
        self.teams.borrow().shared.clone().unwrap_or_else(|| Team {
            slot: 1,
            members: Rc::from([]),
            my: 0,
            config: TeamConfig::default(),
        })
    }

    /// The collective group of `team` (its members and its slot's counters).
    fn group<'a>(&self, team: &'a Team) -> Group<'a> {
        Group {
            members: &team.members,
            my: team.my as usize,
            kind: Kind::Team { slot: team.slot },
        }
    }

    /// Synchronises the team's PEs without completing outstanding operations
    /// (`shmem_team_sync`; `sync_all` for the world).
    pub fn team_sync(&self, team: &Team) -> Result<()> {
        self.group_sync(&self.group(team))
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
        self.group_allgather_u64(&self.group(team), v)
    }

    /// Collective over `parent`: the team of parent PEs `start, start + stride, …` (`size` of
    /// them, in that order: with a negative stride the new team runs down the parent); `None`
    /// on PEs not in it (`shmem_team_split_strided`).
    pub fn team_split_strided(
        &self,
        parent: &Team,
        start: u32,
        stride: i32,
        size: u32,
    ) -> Result<Option<Team>> {
        self.team_split_strided_with(parent, start, stride, size, TeamConfig::default())
    }

    /// [`Pe::team_split_strided`] with the new team's [`TeamConfig`].
    pub fn team_split_strided_with(
        &self,
        parent: &Team,
        start: u32,
        stride: i32,
        size: u32,
        config: TeamConfig,
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
            let ps = self.slot_psync(slot);
            // SAFETY: this PE's psync words of a slot no team of this PE uses.
            unsafe { gda_hal::sym::sym_fill(self.local_ptr(ps)?.cast(), 0, PSYNC_WORDS * 8) };
        }
        self.team_barrier(parent)?;
        let Some(my) = my else { return Ok(None) };
        Ok(Some(Team {
            slot,
            members,
            my: my as u32,
            config,
        }))
    }

    /// Collective over `parent`: splits it into a grid of rows of `xrange` PEs
    /// (`shmem_team_split_2d`). Returns this PE's x team (its row: parent PEs `r * xrange ..`,
    /// numbered by column) and y team (its column: every `xrange`-th parent PE, numbered by
    /// row); every parent PE is in one of each. `xrange` above the parent's size is its size.
    pub fn team_split_2d(
        &self,
        parent: &Team,
        xrange: u32,
        x_config: TeamConfig,
        y_config: TeamConfig,
    ) -> Result<(Team, Team)> {
        self.member(parent)?;
        let [x, y] = parent.split_2d_axes(xrange)?;
        let missing = |axis: &str| {
            ShmemError::Invalid(format!(
                "PE {} is outside its own {axis} axis of a 2D split",
                self.my_pe()
            ))
        };
        let xt = self
            .team_split_strided_with(parent, x.start, x.stride, x.size, x_config)?
            .ok_or_else(|| missing("x"))?;
        let yt = self
            .team_split_strided_with(parent, y.start, y.stride, y.size, y_config)?
            .ok_or_else(|| missing("y"))?;
        Ok((xt, yt))
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
        self.group_broadcast(&self.group(team), dst, src, n, root as usize, true)
    }

    /// `dst[k*n..(k+1)*n]` on every member ← `src[0..n]` of member k (`shmem_fcollect`).
    pub fn fcollect<T: Elem>(&self, team: &Team, dst: Sym<T>, src: Sym<T>, n: usize) -> Result<()> {
        self.member(team)?;
        self.group_fcollect(&self.group(team), dst, src, n)
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
        let total = self.group_collect(&self.group(team), dst, src, n)?;
        // A team's all-gather of the counts always gives the total.
        total.ok_or_else(|| ShmemError::Invalid("a team collect without its total".into()))
    }

    /// `dst[k*n..]` of member j ← `src[j*n..]` of member k (`shmem_alltoall`).
    pub fn alltoall<T: Elem>(&self, team: &Team, dst: Sym<T>, src: Sym<T>, n: usize) -> Result<()> {
        self.member(team)?;
        self.group_alltoall(&self.group(team), dst, src, n)
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
        self.group_alltoalls(&self.group(team), dst, src, dst_stride, src_stride, n)
    }

    /// `dst[i] = op over members of src[i]` for `i < n`, on every member (`shmem_*_reduce`);
    /// `dst` may be `src` (but not overlap it otherwise). Combined in team order, so floats
    /// agree bit for bit on every PE.
    pub fn reduce<T: Reducible>(
        &self,
        team: &Team,
        dst: Sym<T>,
        src: Sym<T>,
        n: usize,
        op: ReduceOp,
    ) -> Result<()> {
        self.member(team)?;
        self.group_reduce(&self.group(team), dst, src, n, op)
    }
}
