//! The active-set collectives (`ActiveSet` and a `pSync` array: `barrier_set`, `sync_set`,
//! `broadcast_set`, `fcollect_set`, `collect_set`, `alltoall_set`, `alltoalls_set`,
//! `reduce_set`) with PEs as threads, over P2P, RDMA and mixed routes: the data each member
//! receives, the strided sets, `pSync` reuse and its words back at 0, the erased forms the C
//! ABI calls, and the errors of bad use.

use std::time::Duration;

use gda_shmem::erased::{DynPe, RedTy};
use gda_shmem::{
    ActiveSet, Config, Pe, ReduceOp, Result, ShmemError, Sym, TransportPolicy, launch,
};

fn cfg(t: TransportPolicy, hosts: Option<u32>) -> Config {
    Config {
        heap_size: 4 << 20,
        transport: t,
        timeout: Duration::from_secs(20),
        hosts,
        ..Config::default()
    }
}

/// Every `pSync` word of this PE is back at `SHMEM_SYNC_VALUE`.
fn psync_is_clean<P: gda_hal::Provider>(pe: &Pe<P>, psync: Sym<i64>) -> Result<()> {
    let mut words = vec![-1i64; ActiveSet::PSYNC_WORDS];
    pe.copy_out(psync, 0, &mut words)?;
    assert!(
        words.iter().all(|&w| w == ActiveSet::SYNC_VALUE),
        "PE {}: pSync left at {words:?}",
        pe.my_pe()
    );
    Ok(())
}

/// Every collective over `set` on this PE (a member), with the data checked. Returns the bits
/// of a floating-point sum whose value depends on the order it is combined in.
fn collectives_over<P: gda_hal::Provider>(
    pe: &Pe<P>,
    set: &ActiveSet,
    psync: Sym<i64>,
) -> Result<u64> {
    const N: usize = 4;
    let me = pe.my_pe();
    let k = set.set_pe(me).expect("a member") as usize;
    let size = set.size() as usize;
    // Allocations are collective over every PE: the same sizes whichever set this PE is in.
    let cap = pe.n_pes() as usize;
    let src = pe.malloc::<u64>(cap * N * 3)?;
    let dst = pe.malloc::<u64>(cap * N * 3)?;
    let fill = |s: Sym<u64>, f: &dyn Fn(usize) -> u64| -> Result<()> {
        let v: Vec<u64> = (0..s.len()).map(f).collect();
        pe.copy_in(s, 0, &v)
    };
    let out = |s: Sym<u64>, n: usize| -> Result<Vec<u64>> {
        let mut v = vec![0u64; n];
        pe.copy_out(s, 0, &mut v)?;
        Ok(v)
    };
    const SENTINEL: u64 = 0xdead;

    // Barrier: a put before it is seen after it.
    let flags = pe.calloc::<u64>(cap)?;
    let next = set.world_pe(((k + 1) % size) as u32).expect("a member");
    pe.put(flags, k, &[u64::from(me) + 1], next)?;
    pe.barrier_set(set, psync)?;
    let prev = set
        .world_pe(((k + size - 1) % size) as u32)
        .expect("a member");
    assert_eq!(pe.read(flags, (k + size - 1) % size)?, u64::from(prev) + 1);
    pe.sync_set(set, psync)?;

    // Broadcast from the last member: every other member gets its data; the root's own
    // destination is not written.
    let root = size - 1;
    fill(src, &|i| 1000 * u64::from(me) + i as u64)?;
    fill(dst, &|_| SENTINEL)?;
    pe.broadcast_set(set, dst, src, N, root as u32, psync)?;
    let root_pe = u64::from(set.world_pe(root as u32).expect("a member"));
    let got = out(dst, N)?;
    if k == root {
        assert_eq!(got, [SENTINEL; N], "the root's dst is left alone");
    } else {
        assert_eq!(
            got,
            (0..N as u64)
                .map(|i| 1000 * root_pe + i)
                .collect::<Vec<_>>()
        );
    }
    // Zero elements move nothing.
    pe.broadcast_set(set, dst, src, 0, 0, psync)?;
    assert_eq!(out(dst, N)?, got);

    // fcollect: block j from member j.
    pe.fcollect_set(set, dst, src, N, psync)?;
    let want: Vec<u64> = set
        .pes()
        .flat_map(|p| (0..N as u64).map(move |i| 1000 * u64::from(p) + i))
        .collect();
    assert_eq!(out(dst, size * N)?, want);

    // collect: member j gives j + 1 elements.
    fill(dst, &|_| SENTINEL)?;
    pe.collect_set(set, dst, src, k + 1, psync)?;
    let want: Vec<u64> = set
        .pes()
        .enumerate()
        .flat_map(|(j, p)| (0..=j as u64).map(move |i| 1000 * u64::from(p) + i))
        .collect();
    let total = want.len();
    let got = out(dst, total + 1)?;
    assert_eq!(got[..total], want[..]);
    assert_eq!(got[total], SENTINEL, "nothing past the total");

    // alltoall: block j of my source to member j, at block k.
    fill(src, &|i| {
        100 * u64::from(me) + (i / N) as u64 * 10 + (i % N) as u64
    })?;
    pe.alltoall_set(set, dst, src, N, psync)?;
    let want: Vec<u64> = set
        .pes()
        .flat_map(|p| (0..N as u64).map(move |i| 100 * u64::from(p) + k as u64 * 10 + i))
        .collect();
    assert_eq!(out(dst, size * N)?, want);

    // alltoalls: source stride 3, destination stride 2, 2 elements per member.
    let (ds, ss, n) = (2, 3, 2);
    fill(dst, &|_| SENTINEL)?;
    pe.alltoalls_set(set, dst, src, ds, ss, n, psync)?;
    let got = out(dst, cap * N * 3)?;
    for (j, p) in set.pes().enumerate() {
        for e in 0..n {
            // Member j sent me its src[(k * n + e) * ss].
            let i = (k * n + e) * ss;
            let sent = 100 * u64::from(p) + (i / N) as u64 * 10 + (i % N) as u64;
            assert_eq!(
                got[(j * n + e) * ds],
                sent,
                "alltoalls from member {j}, element {e}"
            );
            assert_eq!(
                got[(j * n + e) * ds + 1],
                SENTINEL,
                "between the strided elements"
            );
        }
    }

    // Reductions: integers, in place (dst == src), and floats in set order.
    let x = pe.malloc::<i64>(2)?;
    pe.copy_in(x, 0, &[i64::from(me) + 1, -i64::from(me)])?;
    let y = pe.malloc::<i64>(2)?;
    pe.reduce_set(set, y, x, 2, ReduceOp::Sum, psync)?;
    let sum: i64 = set.pes().map(|p| i64::from(p) + 1).sum();
    let negated: i64 = -set.pes().map(i64::from).sum::<i64>();
    assert_eq!(pe.read(y, 0)?, sum);
    assert_eq!(pe.read(y, 1)?, negated);
    pe.reduce_set(set, x, x, 2, ReduceOp::Max, psync)?;
    assert_eq!(pe.read(x, 0)?, i64::from(set.last()) + 1);
    assert_eq!(pe.read(x, 1)?, -i64::from(set.start()));
    // Values whose sum depends on the order: 1e16 and small parts that round away unless
    // combined first.
    let term = |p: u32| {
        if p == set.start() {
            1e16
        } else {
            0.75 + f64::from(p) * 0.5
        }
    };
    let f = pe.malloc::<f64>(1)?;
    pe.write(f, 0, term(me))?;
    pe.reduce_set(set, f, f, 1, ReduceOp::Sum, psync)?;
    let in_order = set.pes().map(term).reduce(|a, b| a + b).unwrap_or(0.0);
    let got = pe.read(f, 0)?;
    assert_eq!(got.to_bits(), in_order.to_bits(), "{got} vs {in_order}");

    pe.barrier_set(set, psync)?;
    pe.barrier_all()?;
    pe.free(f)?;
    pe.free(y)?;
    pe.free(x)?;
    pe.free(flags)?;
    pe.free(dst)?;
    pe.free(src)?;
    Ok(got.to_bits())
}

/// The whole job, then the even PEs (stride 2^1) while the odd ones run their own set on
/// another `pSync`; `pSync` is reused across all the calls and clean at the end.
fn every_collective<P: gda_sim::Modeled>(n: u32, c: &Config) {
    let bits = launch::threads::<P, _, _>(n, c, |pe| {
        let psync = pe.calloc::<i64>(ActiveSet::PSYNC_WORDS)?;
        let other = pe.calloc::<i64>(ActiveSet::PSYNC_WORDS)?;
        let all = ActiveSet::new(0, 0, n)?;
        let world_bits = collectives_over(pe, &all, psync)?;
        let me = pe.my_pe();
        let evens = ActiveSet::new(0, 1, n.div_ceil(2))?;
        let part_bits = if me % 2 == 0 {
            collectives_over(pe, &evens, psync)?
        } else {
            collectives_over(pe, &ActiveSet::new(1, 1, n / 2)?, other)?
        };
        pe.barrier_all()?;
        psync_is_clean(pe, psync)?;
        psync_is_clean(pe, other)?;
        Ok((world_bits, part_bits, me % 2))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bits.len(), n as usize);
    // The order-dependent float sum agrees bit for bit on every member of each set.
    assert!(bits.iter().all(|b| b.0 == bits[0].0), "{bits:?}");
    for parity in [0, 1] {
        let mut part = bits.iter().filter(|b| b.2 == parity).map(|b| b.1);
        if let Some(first) = part.next() {
            assert!(part.all(|b| b == first), "{bits:?}");
        }
    }
}

#[test]
fn active_sets_over_p2p() {
    every_collective::<gda_native::Native>(4, &cfg(TransportPolicy::P2p, None));
    every_collective::<gda_native::Native>(5, &cfg(TransportPolicy::P2p, None));
}

#[test]
fn active_sets_over_rdma() {
    every_collective::<gda_mlx5::Mlx5>(3, &cfg(TransportPolicy::Rdma, None));
    every_collective::<gda_bnxt::Bnxt>(2, &cfg(TransportPolicy::Rdma, None));
}

#[test]
fn active_sets_over_mixed_routes() {
    every_collective::<gda_native::Native>(4, &cfg(TransportPolicy::Auto, Some(2)));
}

#[test]
fn a_set_of_one_pe() {
    every_collective::<gda_native::Native>(1, &cfg(TransportPolicy::Auto, None));
}

/// The provider-erased forms (what the C ABI calls) on addresses: the variable `collect`, a
/// `double` reduction and `sync`.
#[test]
fn the_erased_forms_run_the_same_collectives() {
    let c = cfg(TransportPolicy::Auto, None);
    launch::threads::<gda_native::Native, _, _>(3, &c, |pe| {
        let d: &dyn DynPe = pe;
        let set = ActiveSet::new(0, 0, 3)?;
        let psync = pe.calloc::<i64>(ActiveSet::PSYNC_WORDS)?;
        let ps = pe.local_ptr(psync)?.cast_const();
        let me = pe.my_pe() as usize;
        let src = pe.malloc::<u8>(8)?;
        let dst = pe.malloc::<u8>(16)?;
        pe.copy_in(src, 0, &[me as u8 + 1; 8])?;
        pe.copy_in(dst, 0, &[0u8; 16])?;
        let (sp, dp) = (pe.local_ptr(src)?, pe.local_ptr(dst)?);
        d.collect_set(&set, dp, sp, me + 1, false, ps)?;
        let mut got = [0u8; 16];
        pe.copy_out(dst, 0, &mut got)?;
        assert_eq!(got[..7], [1, 2, 2, 3, 3, 3, 0]);
        let f = pe.malloc::<f64>(1)?;
        pe.write(f, 0, me as f64 + 0.5)?;
        let fp = pe.local_ptr(f)?.cast::<u8>();
        d.reduce_set(&set, fp, fp, 1, RedTy::F64, ReduceOp::Prod, ps)?;
        assert_eq!(pe.read(f, 0)?, 0.5 * 1.5 * 2.5);
        d.barrier_set(&set, ps, false)?;
        pe.barrier_all()?;
        psync_is_clean(pe, psync)?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

fn invalid(r: Result<()>, want: &str) {
    match r {
        Err(e @ (ShmemError::Invalid(_) | ShmemError::Range(_) | ShmemError::BadPe { .. })) => {
            let s = e.to_string();
            assert!(s.contains(want), "{s} (wanted {want:?})");
        }
        other => panic!("wanted an error containing {want:?}, got {other:?}"),
    }
}

/// Bad use is an error on the PE that made it, before any PE waits on it: the others carry on
/// and `pSync` stays clean.
#[test]
fn bad_use_of_active_sets_is_an_error() {
    let c = cfg(TransportPolicy::Auto, None);
    launch::threads::<gda_native::Native, _, _>(3, &c, |pe| {
        let me = pe.my_pe();
        let psync = pe.calloc::<i64>(ActiveSet::PSYNC_WORDS)?;
        let buf = pe.calloc::<u64>(8)?;
        let all = ActiveSet::new(0, 0, 3)?;

        invalid(
            pe.barrier_set(&ActiveSet::new(0, 0, 4)?, psync),
            "reaches PE 3, beyond the job's 3 PEs",
        );
        invalid(
            pe.sync_set(&ActiveSet::new(1, 0, 3)?, psync),
            "beyond the job's 3 PEs",
        );
        let evens = ActiveSet::new(0, 1, 2)?;
        if me == 1 {
            invalid(
                pe.barrier_set(&evens, psync),
                "does not hold PE 1, which called it",
            );
        }
        invalid(
            pe.barrier_set(&all, psync.slice(0, ActiveSet::PSYNC_WORDS - 1)?),
            "active-set routines need 33",
        );
        // Not symmetric: the erased form with a local array.
        let local = [0i64; ActiveSet::PSYNC_WORDS];
        let d: &dyn DynPe = pe;
        invalid(
            d.barrier_set(&all, local.as_ptr(), true),
            "pSync must be 33 symmetric longs",
        );
        invalid(
            pe.broadcast_set(&all, buf, buf, 1, 3, psync),
            "PE 3 is not in 0..3",
        );
        invalid(pe.fcollect_set(&all, buf, buf, 3, psync), "out of range");
        invalid(
            pe.alltoall_set(&all, buf, buf, usize::MAX, psync),
            "overflows",
        );
        invalid(
            pe.alltoalls_set(&all, buf, buf, 0, 1, 1, psync),
            "strides must be at least 1",
        );
        invalid(
            pe.reduce_set(
                &all,
                buf.slice(1, 4)?,
                buf.slice(0, 4)?,
                4,
                ReduceOp::Sum,
                psync,
            ),
            "overlap without being the same array",
        );
        let f = pe.calloc::<f64>(1)?;
        invalid(
            pe.reduce_set(&all, f, f, 1, ReduceOp::And, psync),
            "And is not defined for f64",
        );
        // None of it touched pSync: the set still synchronises, and leaves it clean.
        pe.barrier_set(&all, psync)?;
        pe.reduce_set(&all, buf, buf, 8, ReduceOp::Sum, psync)?;
        pe.barrier_all()?;
        psync_is_clean(pe, psync)?;
        pe.free(f)?;
        pe.free(buf)?;
        pe.free(psync)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}
