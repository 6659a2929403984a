//! Teams (issue 27): 2D splits (of the world and of a split team), negative strides, many
//! splits reusing destroyed teams' slots, the configuration a team is created with, and
//! collectives of zero elements doing nothing, with PEs as threads over P2P and RDMA.

use std::time::Duration;

use gda_shmem::{
    ActiveSet, Config, Pe, ReduceOp, Result, Sym, Team, TeamConfig, TransportPolicy, launch,
};

fn cfg(t: TransportPolicy) -> Config {
    Config {
        heap_size: 4 << 20,
        transport: t,
        timeout: Duration::from_secs(20),
        ..Config::default()
    }
}

/// Team `t`'s members as world PEs, in team order.
fn members(t: &Team) -> Vec<u32> {
    (0..t.n_pes())
        .map(|k| t.world_pe(k).expect("a member"))
        .collect()
}

/// An fcollect of every member's world PE gives the members in team order, and a sum agrees.
fn collectives_agree<P: gda_hal::Provider>(pe: &Pe<P>, t: &Team, buf: Sym<u64>) -> Result<()> {
    let n = t.n_pes() as usize;
    let src = buf.slice(0, 1)?;
    let dst = buf.slice(8, n)?;
    pe.write(src, 0, u64::from(pe.my_pe()))?;
    pe.fcollect(t, dst, src, 1)?;
    let mut got = vec![0u64; n];
    pe.copy_out(dst, 0, &mut got)?;
    let want: Vec<u64> = members(t).into_iter().map(u64::from).collect();
    assert_eq!(got, want, "PE {}: fcollect over {t:?}", pe.my_pe());
    pe.reduce(t, dst, src, 1, ReduceOp::Sum)?;
    assert_eq!(pe.read(dst, 0)?, want.iter().sum::<u64>());
    Ok(())
}

fn grids<P: gda_sim::Modeled>(n: u32, t: TransportPolicy) {
    launch::threads::<P, _, _>(n, &cfg(t), |pe| {
        let buf = pe.calloc::<u64>(64)?;
        let me = pe.my_pe();
        let world = pe.team_world();
        for xrange in [1, 2, 3, n, n + 5] {
            let x = xrange.min(n);
            let (xt, yt) = pe.team_split_2d(
                &world,
                xrange,
                TeamConfig { num_contexts: 2 },
                TeamConfig::default(),
            )?;
            let (row, col) = (me / x, me % x);
            let row_pes: Vec<u32> = (row * x..(row * x + x).min(n)).collect();
            let col_pes: Vec<u32> = (col..n).step_by(x as usize).collect();
            assert_eq!(members(&xt), row_pes, "x axis of xrange {xrange}");
            assert_eq!(members(&yt), col_pes, "y axis of xrange {xrange}");
            assert_eq!((xt.my_pe(), yt.my_pe()), (col, row));
            assert_eq!(xt.config().num_contexts, 2);
            assert_eq!(yt.config(), TeamConfig::default());
            collectives_agree(pe, &xt, buf)?;
            collectives_agree(pe, &yt, buf)?;
            pe.team_destroy(xt)?;
            pe.team_destroy(yt)?;
        }
        assert!(world.split_2d_axes(0).is_err(), "xrange 0");
        // A 3D grid: the y team of a 2D split, split in 2D again and destroyed at once.
        let (gx, gyz) =
            pe.team_split_2d(&world, 1, TeamConfig::default(), TeamConfig::default())?;
        let (gy, gz) = pe.team_split_2d(&gyz, 2, TeamConfig::default(), TeamConfig::default())?;
        pe.team_destroy(gyz)?;
        assert_eq!((gx.my_pe(), gy.my_pe(), gz.my_pe()), (0, me % 2, me / 2));
        collectives_agree(pe, &gz, buf)?;
        for t in [gx, gy, gz] {
            pe.team_destroy(t)?;
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn split_2d_over_p2p_and_rdma() {
    grids::<gda_native::Native>(4, TransportPolicy::P2p);
    grids::<gda_native::Native>(3, TransportPolicy::P2p);
    grids::<gda_mlx5::Mlx5>(4, TransportPolicy::Rdma);
}

fn downwards<P: gda_sim::Modeled>(n: u32, t: TransportPolicy) {
    launch::threads::<P, _, _>(n, &cfg(t), |pe| {
        let buf = pe.calloc::<u64>(64)?;
        let me = pe.my_pe();
        let world = pe.team_world();
        let rev = pe
            .team_split_strided(&world, n - 1, -1, n)?
            .expect("every PE");
        assert_eq!(members(&rev), (0..n).rev().collect::<Vec<_>>());
        assert_eq!(rev.my_pe(), n - 1 - me);
        collectives_agree(pe, &rev, buf)?;
        // A 2D split of the reversed team: its rows run down the world.
        let (xt, _yt) = pe.team_split_2d(&rev, 2, TeamConfig::default(), TeamConfig::default())?;
        let first = (n - 1 - me) / 2 * 2;
        let row: Vec<u32> = (first..(first + 2).min(n)).map(|k| n - 1 - k).collect();
        assert_eq!(members(&xt), row);
        let every_other = pe.team_split_strided(&world, n - 1, -2, n.div_ceil(2))?;
        assert_eq!(every_other.is_some(), (n - 1 - me) % 2 == 0);
        if let Some(t) = &every_other {
            let want: Vec<u32> = (0..n).rev().step_by(2).collect();
            assert_eq!(members(t), want);
            collectives_agree(pe, t, buf)?;
        }
        // Below the parent's first PE: an error on every PE, and nothing is created.
        assert!(pe.team_split_strided(&world, 0, -1, 2).is_err());
        Ok(())
    })
    .unwrap();
}

#[test]
fn negative_strides_run_down_the_parent() {
    downwards::<gda_native::Native>(4, TransportPolicy::P2p);
    downwards::<gda_bnxt::Bnxt>(3, TransportPolicy::Rdma);
}

/// More splits than slots, each destroyed before the next: the slots come back.
#[test]
fn splits_reuse_the_slots_of_destroyed_teams() {
    for t in [TransportPolicy::P2p, TransportPolicy::Rdma] {
        launch::threads::<gda_native::Native, _, _>(4, &cfg(t), |pe| {
            let buf = pe.calloc::<u64>(64)?;
            let world = pe.team_world();
            let me = pe.my_pe();
            for round in 0..40 {
                let a = pe.team_split_strided(&world, 0, 1, 2)?;
                let b = pe.team_split_strided(&world, 2, 1, 2)?;
                let mine = if me < 2 { a } else { b }.expect("a member");
                collectives_agree(pe, &mine, buf)?;
                let inner = pe.team_split_strided(&mine, round % 2, 1, 1)?;
                assert_eq!(inner.is_some(), mine.my_pe() == round % 2);
                if let Some(i) = inner {
                    pe.team_destroy(i)?;
                }
                pe.team_destroy(mine)?;
            }
            Ok(())
        })
        .unwrap();
    }
}

#[test]
fn a_team_reports_its_configuration() {
    launch::threads::<gda_native::Native, _, _>(2, &cfg(TransportPolicy::Auto), |pe| {
        let world = pe.team_world();
        assert_eq!(world.config(), TeamConfig::default());
        let c = TeamConfig { num_contexts: 3 };
        let t = pe
            .team_split_strided_with(&world, 0, 1, 2, c)?
            .expect("both");
        assert_eq!(t.config().num_contexts, 3);
        assert_eq!(
            t.clone()
                .with_config(TeamConfig::default())
                .config()
                .num_contexts,
            0
        );
        pe.team_destroy(t)
    })
    .unwrap();
}

/// Zero elements: nothing moves and nobody waits. Only PE 0 calls them (a collective that
/// synchronised would time out), on buffers it then finds untouched.
#[test]
fn collectives_of_zero_elements_do_nothing() {
    launch::threads::<gda_native::Native, _, _>(3, &cfg(TransportPolicy::Auto), |pe| {
        let src = pe.calloc::<u64>(8)?;
        let dst = pe.malloc::<u64>(8)?;
        let psync = pe.calloc::<i64>(ActiveSet::PSYNC_WORDS)?;
        pe.copy_in(dst, 0, &[7; 8])?;
        pe.barrier_all()?;
        if pe.my_pe() == 0 {
            let w = pe.team_world();
            let all = ActiveSet::new(0, 0, 3)?;
            pe.broadcast(&w, dst, src, 0, 1)?;
            pe.fcollect(&w, dst, src, 0)?;
            pe.alltoall(&w, dst, src, 0)?;
            pe.alltoalls(&w, dst, src, 1, 1, 0)?;
            pe.reduce(&w, dst, src, 0, ReduceOp::Sum)?;
            pe.broadcast_set(&all, dst, src, 0, 1, psync)?;
            pe.fcollect_set(&all, dst, src, 0, psync)?;
            pe.alltoall_set(&all, dst, src, 0, psync)?;
            pe.alltoalls_set(&all, dst, src, 1, 1, 0, psync)?;
            pe.reduce_set(&all, dst, src, 0, ReduceOp::Max, psync)?;
            // Misuse is still refused: a root outside the team, an op the type lacks.
            assert!(pe.broadcast(&w, dst, src, 0, 3).is_err());
        }
        let mut got = [0u64; 8];
        pe.copy_out(dst, 0, &mut got)?;
        assert_eq!(got, [7; 8]);
        let mut words = vec![-1i64; ActiveSet::PSYNC_WORDS];
        pe.copy_out(psync, 0, &mut words)?;
        assert!(words.iter().all(|&w| w == 0), "pSync untouched");
        // A collect's counts may differ: zero here, one elsewhere, and the others' parts land.
        let w = pe.team_world();
        pe.write(src, 0, 100 + u64::from(pe.my_pe()))?;
        let mine = usize::from(pe.my_pe() != 0);
        let total = pe.collect(&w, dst, src, mine)?;
        assert_eq!(total, 2);
        pe.copy_out(dst, 0, &mut got[..2])?;
        assert_eq!(&got[..2], &[101, 102]);
        pe.barrier_all()
    })
    .unwrap();
}
