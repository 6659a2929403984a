//! The end-to-end check of every routine, run collectively by all PEs.
//!
//! `gda shmem check` runs it (under `gdarun`, `mpirun`, …) and the test suite runs it with PEs
//! as threads and as processes over every transport. Each check computes the expected data
//! independently and fails with an error naming the routine, the PE and the values, never a
//! panic. Needs at least 2 PEs for the ordering checks (1 PE runs what applies).

use gda_hal::Provider;

use crate::error::{Result, ShmemError};
use crate::pe::Pe;
use crate::team::Team;
use crate::types::{AtomicInt, Cmp, ReduceOp, Reducible, SignalOp};

macro_rules! ensure {
    ($pe:expr, $cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(ShmemError::Invalid(format!("selftest on PE {}: {}", $pe.my_pe(), format!($($fmt)*))));
        }
    };
}

/// What one PE checked.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Names of the checks that ran.
    pub checks: Vec<&'static str>,
}

/// Runs every check; `rounds` scales the ordering stress loops.
pub fn run<P: Provider>(pe: &Pe<P>, rounds: usize) -> Result<Report> {
    let mut r = Report::default();
    heap(pe)?;
    r.checks.push("malloc/calloc/align/free: identical offsets");
    put_get(pe)?;
    r.checks.push("put/get/p/g/iput/iget/nbi/large");
    atomics::<P, u64>(pe)?;
    atomics::<P, i64>(pe)?;
    atomics::<P, u32>(pe)?;
    atomics::<P, i32>(pe)?;
    r.checks
        .push("atomics 32/64 signed/unsigned: fetch set swap cswap inc add and or xor");
    waits(pe)?;
    r.checks.push("wait_until/test all/any/some");
    if pe.n_pes() > 1 {
        signal_before_data(pe, rounds)?;
        r.checks
            .push("put_signal set/add: signal never before data");
        fence_orders(pe, rounds)?;
        r.checks.push("fence: puts to one PE arrive in order");
        quiet_completes(pe, rounds)?;
        r.checks.push("quiet: earlier puts visible");
    }
    teams(pe)?;
    r.checks
        .push("teams: world/shared/split/translate + collectives + reductions");
    pe.barrier_all()?;
    Ok(r)
}

fn heap<P: Provider>(pe: &Pe<P>) -> Result<()> {
    let before = pe.allocations();
    let a = pe.malloc::<u8>(13)?;
    let b = pe.align::<u64>(4096, 3)?;
    let c = pe.calloc::<u32>(1000)?;
    ensure!(
        pe,
        b.offset() % 4096 == 0,
        "align(4096) gave {:#x}",
        b.offset()
    );
    for i in 0..1000 {
        ensure!(pe, pe.read(c, i)? == 0, "calloc not zero at {i}");
    }
    // Offsets agree: gather everyone's and compare.
    let offs = pe.malloc::<u64>(3 * pe.n_pes() as usize)?;
    let mine = pe.malloc::<u64>(3)?;
    pe.copy_in(
        mine,
        0,
        &[a.offset() as u64, b.offset() as u64, c.offset() as u64],
    )?;
    pe.barrier_all()?;
    pe.fcollect(&pe.team_world(), offs, mine, 3)?;
    let mut all = vec![0u64; 3 * pe.n_pes() as usize];
    pe.copy_out(offs, 0, &mut all)?;
    for (j, w) in all.chunks(3).enumerate() {
        ensure!(
            pe,
            w == [a.offset() as u64, b.offset() as u64, c.offset() as u64],
            "PE {j} has offsets {w:?}"
        );
    }
    pe.free(mine)?;
    pe.free(offs)?;
    pe.free(c)?;
    pe.free(b)?;
    pe.free(a)?;
    ensure!(
        pe,
        pe.allocations() == before,
        "leak: {} live",
        pe.allocations()
    );
    ensure!(pe, pe.free(a).is_err(), "double free accepted");
    ensure!(
        pe,
        pe.malloc::<u8>(pe.heap_size() + 1).is_err(),
        "over-allocation accepted"
    );
    Ok(())
}

fn put_get<P: Provider>(pe: &Pe<P>) -> Result<()> {
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let pat = |pe: u32, i: usize| (pe as u64) << 32 | i as u64;
    let buf = pe.calloc::<u64>(1024)?;
    let src: Vec<u64> = (0..1024).map(|i| pat(me, i)).collect();
    pe.put(buf, 0, &src, right)?;
    pe.barrier_all()?;
    for i in 0..1024 {
        let v = pe.read(buf, i)?;
        ensure!(
            pe,
            v == pat(left, i),
            "put: buf[{i}] = {v:#x}, want {:#x}",
            pat(left, i)
        );
    }
    let mut got = vec![0u64; 1024];
    pe.get(&mut got, buf, 0, right)?;
    ensure!(pe, got == src, "get from PE {right} disagrees");
    pe.barrier_all()?;
    // p / g, out-of-range refused.
    pe.p(buf, 5, 0xabcd_u64 + u64::from(me), right)?;
    ensure!(
        pe,
        pe.put(buf, 1020, &[0u64; 8], right).is_err(),
        "put past the allocation accepted"
    );
    ensure!(pe, pe.g(buf, 0, n + 3).is_err(), "bad PE accepted");
    pe.barrier_all()?;
    ensure!(pe, pe.g(buf, 5, me)? == 0xabcd + u64::from(left), "p/g");
    // iput / iget: every third element.
    let st = pe.calloc::<i32>(300)?;
    let vals: Vec<i32> = (0..200)
        .map(|i| i * 7 - i32::try_from(me).unwrap_or(0))
        .collect();
    pe.iput(st, 1, 3, &vals, 2, 99, right)?;
    pe.barrier_all()?;
    let mut out = vec![0i32; 198];
    pe.iget(&mut out, 2, st, 1, 3, 99, me)?;
    for k in 0..99 {
        let want = vals[k * 2] + i32::try_from(me).unwrap_or(0) - i32::try_from(left).unwrap_or(0);
        ensure!(
            pe,
            out[k * 2] == want,
            "iput/iget element {k}: {} want {want}",
            out[k * 2]
        );
    }
    // nbi + quiet.
    let nb = pe.calloc::<u16>(64)?;
    let v16: Vec<u16> = (0..64).map(|i| i as u16 * 3 + me as u16).collect();
    pe.put_nbi(nb, 0, &v16, right)?;
    pe.quiet()?;
    pe.barrier_all()?;
    let dst = pe.calloc::<u16>(64)?;
    pe.get_nbi(dst, 0, nb, 0, 64, right)?;
    pe.quiet()?;
    let mut g16 = vec![0u16; 64];
    pe.copy_out(dst, 0, &mut g16)?;
    let want: Vec<u16> = (0..64).map(|i| i as u16 * 3 + me as u16).collect();
    ensure!(pe, g16 == want, "get_nbi of what PE {right} holds");
    // Large: 3 MiB (several staging chunks on RDMA) to the right.
    let big = pe.calloc::<u8>(3 << 20)?;
    let bytes: Vec<u8> = (0..3usize << 20)
        .map(|i| (i * 31 + me as usize) as u8)
        .collect();
    pe.put(big, 0, &bytes, right)?;
    pe.barrier_all()?;
    let mut back = vec![0u8; 3 << 20];
    pe.copy_out(big, 0, &mut back)?;
    ensure!(
        pe,
        back.iter()
            .enumerate()
            .all(|(i, &b)| b == (i * 31 + left as usize) as u8),
        "3 MiB put"
    );
    let mut back2 = vec![0u8; 3 << 20];
    pe.get(&mut back2, big, 0, right)?;
    ensure!(pe, back2 == bytes, "3 MiB get");
    pe.free(big)?;
    pe.free(dst)?;
    pe.free(nb)?;
    pe.free(st)?;
    pe.free(buf)
}

fn atomics<P: Provider, T: AtomicInt + PartialOrd>(pe: &Pe<P>) -> Result<()> {
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let t = |v: u64| T::from_bits(v);
    let b = |v: T| v.to_bits();
    // Neighbours in the same 8-byte word must not be disturbed (32-bit ops).
    let x = pe.calloc::<T>(4)?;
    let target = n - 1;
    // fetch_inc: all results distinct, final = n.
    let mine = pe.atomic_fetch_inc(x, 1, target)?;
    pe.atomic_inc(x, 2, target)?;
    pe.atomic_add(x, 2, t(2), target)?;
    pe.barrier_all()?;
    let all = pe.malloc::<u64>(n as usize)?;
    let one = pe.malloc::<u64>(1)?;
    pe.write(one, 0, b(mine))?;
    pe.barrier_all()?;
    pe.fcollect(&pe.team_world(), all, one, 1)?;
    let mut seen = vec![0u64; n as usize];
    pe.copy_out(all, 0, &mut seen)?;
    seen.sort_unstable();
    ensure!(
        pe,
        seen == (0..u64::from(n)).collect::<Vec<_>>(),
        "fetch_inc results {seen:?}"
    );
    ensure!(
        pe,
        b(pe.atomic_fetch(x, 1, target)?) == u64::from(n),
        "fetch after inc"
    );
    ensure!(
        pe,
        b(pe.atomic_fetch(x, 2, target)?) == 3 * u64::from(n),
        "inc+add"
    );
    ensure!(
        pe,
        b(pe.atomic_fetch(x, 0, target)?) == 0 && b(pe.atomic_fetch(x, 3, target)?) == 0,
        "neighbours disturbed"
    );
    pe.barrier_all()?;
    // fetch_add returns old; and/or/xor with one bit per PE (bit me % width).
    let bits = if size_of::<T>() == 4 { 32 } else { 64 };
    let bit = 1u64 << (me % bits);
    pe.atomic_fetch_or(x, 0, t(bit), target)?;
    pe.atomic_or(x, 3, t(bit), target)?;
    pe.barrier_all()?;
    let all_bits = (0..n).fold(0u64, |a, j| a | 1 << (j % bits));
    ensure!(
        pe,
        b(pe.atomic_fetch(x, 0, target)?) == all_bits,
        "or: {:#x} want {all_bits:#x}",
        b(pe.atomic_fetch(x, 0, target)?)
    );
    pe.barrier_all()?;
    let old = pe.atomic_fetch_and(
        x,
        0,
        t(!bit & if bits == 32 { 0xffff_ffff } else { u64::MAX }),
        target,
    )?;
    ensure!(pe, b(old) & bit != 0, "fetch_and old lacks my bit");
    pe.atomic_xor(x, 3, t(bit), target)?;
    pe.barrier_all()?;
    let x0 = b(pe.atomic_fetch(x, 0, target)?);
    ensure!(pe, x0 == 0, "and cleared every bit: {x0:#x}");
    if n <= bits {
        let x3 = b(pe.atomic_fetch(x, 3, target)?);
        ensure!(pe, x3 == 0, "xor of or: {x3:#x}");
    }
    let f = pe.atomic_fetch_xor(x, 1, t(0), target)?;
    ensure!(pe, b(f) == u64::from(n), "fetch_xor 0 returns the value");
    pe.barrier_all()?;
    // set / swap / compare_swap on my own slot of a per-PE array at the target.
    let y = pe.calloc::<T>(n as usize)?;
    pe.atomic_set(y, me as usize, t(41), target)?;
    pe.barrier_all()?;
    let old = pe.atomic_swap(y, me as usize, t(42), target)?;
    ensure!(pe, b(old) == 41, "swap old {}", b(old));
    let c1 = pe.atomic_compare_swap(y, me as usize, t(7), t(9), target)?;
    ensure!(pe, b(c1) == 42, "failed cswap returns current");
    let c2 = pe.atomic_compare_swap(y, me as usize, t(42), t(43), target)?;
    ensure!(pe, b(c2) == 42, "cswap returns old");
    let fa = pe.atomic_fetch_add(y, me as usize, t(10), target)?;
    ensure!(pe, b(fa) == 43, "fetch_add old");
    pe.barrier_all()?;
    for j in 0..n {
        ensure!(
            pe,
            b(pe.atomic_fetch(y, j as usize, target)?) == 53,
            "slot {j} of the set/swap/cswap/add chain"
        );
    }
    // Negative values for signed types survive the round trip.
    pe.barrier_all()?;
    if me == 0 {
        pe.atomic_set(y, 0, t(u64::MAX), target)?;
        let v = pe.atomic_fetch(y, 0, target)?;
        ensure!(pe, v == t(u64::MAX), "all-ones value");
    }
    pe.barrier_all()?;
    pe.free(y)?;
    pe.free(one)?;
    pe.free(all)?;
    pe.free(x)
}

fn waits<P: Provider>(pe: &Pe<P>) -> Result<()> {
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let flags = pe.calloc::<u64>(n as usize)?;
    // Everyone sets its slot at every PE; each then waits for all / any / some.
    for j in 0..n {
        pe.atomic_set(flags, me as usize, u64::from(me) + 1, j)?;
    }
    pe.wait_until_all(flags, None, Cmp::Ge, 1)?;
    ensure!(pe, pe.test_all(flags, None, Cmp::Ne, 0)?, "test_all");
    let any = pe.wait_until_any(flags, None, Cmp::Eq, u64::from(n))?;
    ensure!(pe, any == Some(n as usize - 1), "wait_until_any {any:?}");
    let mut skip = vec![false; n as usize];
    skip[0] = true;
    let some = pe.wait_until_some(flags, Some(&skip), Cmp::Gt, 0)?;
    ensure!(
        pe,
        some == (1..n as usize).collect::<Vec<_>>(),
        "wait_until_some {some:?}"
    );
    ensure!(
        pe,
        pe.test_any(flags, None, Cmp::Gt, u64::from(n))?.is_none(),
        "test_any"
    );
    ensure!(
        pe,
        pe.test(flags, me as usize, Cmp::Eq, u64::from(me) + 1)?,
        "test"
    );
    ensure!(
        pe,
        pe.test_some(flags, None, Cmp::Lt, 2)? == vec![0],
        "test_some"
    );
    let none = vec![true; n as usize];
    ensure!(
        pe,
        pe.wait_until_any(flags, Some(&none), Cmp::Eq, 0)?.is_none(),
        "all excluded"
    );
    pe.free(flags)
}

/// Each PE streams `rounds` messages to its right neighbour with put_signal (alternating Set
/// and Add); the receiver checks every message's data once its signal shows.
fn signal_before_data<P: Provider>(pe: &Pe<P>, rounds: usize) -> Result<()> {
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let data = pe.calloc::<u64>(64 * rounds)?;
    let sig_set = pe.calloc::<u64>(1)?;
    let sig_add = pe.calloc::<u64>(1)?;
    let ack = pe.calloc::<u64>(1)?;
    for k in 0..rounds {
        let msg: Vec<u64> = (0..64)
            .map(|i| (k as u64) << 20 | u64::from(me) << 8 | i)
            .collect();
        if k % 2 == 0 {
            pe.put_signal(
                data,
                k * 64,
                &msg,
                sig_set,
                0,
                k as u64 + 1,
                SignalOp::Set,
                right,
            )?;
        } else {
            pe.put_signal_nbi(data, k * 64, &msg, sig_add, 0, 1, SignalOp::Add, right)?;
        }
        // Receive message k from the left.
        if k % 2 == 0 {
            pe.signal_wait_until(sig_set, 0, Cmp::Ge, k as u64 + 1)?;
        } else {
            pe.signal_wait_until(sig_add, 0, Cmp::Ge, k.div_ceil(2) as u64)?;
        }
        for i in 0..64 {
            let want = (k as u64) << 20 | u64::from(left) << 8 | i as u64;
            let v = pe.read(data, k * 64 + i)?;
            ensure!(
                pe,
                v == want,
                "message {k} word {i} from PE {left}: signal seen before data ({v:#x} want {want:#x})"
            );
        }
    }
    pe.quiet()?;
    pe.barrier_all()?;
    ensure!(
        pe,
        pe.signal_fetch(sig_add, 0)? == (rounds / 2) as u64,
        "signal add total"
    );
    pe.free(ack)?;
    pe.free(sig_add)?;
    pe.free(sig_set)?;
    pe.free(data)
}

/// Puts separated by fence arrive in order: the sender writes block k then (after a fence) the
/// counter k + 1; whenever the receiver sees counter c, blocks 0..c must be there.
fn fence_orders<P: Provider>(pe: &Pe<P>, rounds: usize) -> Result<()> {
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let blocks = pe.calloc::<u64>(rounds * 16)?;
    let counter = pe.calloc::<u64>(1)?;
    for k in 0..rounds {
        let blk = [k as u64 + 1 + (u64::from(me) << 32); 16];
        pe.put(blocks, k * 16, &blk, right)?;
        pe.fence();
        pe.p(counter, 0, k as u64 + 1, right)?;
        pe.fence();
        // Observe the left neighbour's stream as it lands.
        let c = pe.read(counter, 0)? as usize;
        for j in 0..c {
            let v = pe.read(blocks, j * 16 + 15)?;
            let want = j as u64 + 1 + (u64::from(left) << 32);
            ensure!(
                pe,
                v == want,
                "fence: counter {c} seen but block {j} holds {v:#x}"
            );
        }
    }
    pe.wait_until(counter, 0, Cmp::Eq, rounds as u64)?;
    for j in 0..rounds {
        ensure!(
            pe,
            pe.read(blocks, j * 16)? == j as u64 + 1 + (u64::from(left) << 32),
            "fence final block {j}"
        );
    }
    pe.barrier_all()?;
    pe.free(counter)?;
    pe.free(blocks)
}

/// After quiet, every earlier put is visible: puts, quiet, then an atomic flag (on another
/// path: an atomic, not ordered with the puts except by the quiet).
fn quiet_completes<P: Provider>(pe: &Pe<P>, rounds: usize) -> Result<()> {
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let area = pe.calloc::<u32>(rounds * 8)?;
    let flag = pe.calloc::<u64>(1)?;
    for k in 0..rounds {
        pe.put(area, k * 8, &[k as u32 + me; 8], right)?;
    }
    pe.quiet()?;
    pe.atomic_set(flag, 0, 1u64, right)?;
    pe.wait_until(flag, 0, Cmp::Eq, 1)?;
    for k in 0..rounds {
        let v = pe.read(area, k * 8 + 7)?;
        ensure!(pe, v == k as u32 + left, "quiet: put {k} not visible ({v})");
    }
    pe.barrier_all()?;
    pe.free(flag)?;
    pe.free(area)
}

fn reductions<P: Provider, T: Reducible>(
    pe: &Pe<P>,
    team: &Team,
    int: bool,
    val: impl Fn(u32, usize) -> T,
) -> Result<()> {
    let n = 3000; // more than one scratch chunk for 8-byte types on big teams
    let src = pe.malloc::<T>(n)?;
    let dst = pe.malloc::<T>(n)?;
    let me = team.my_pe();
    let mine: Vec<T> = (0..n).map(|i| val(me, i)).collect();
    pe.copy_in(src, 0, &mine)?;
    let ops: &[ReduceOp] = if int {
        &[
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Min,
            ReduceOp::Max,
            ReduceOp::And,
            ReduceOp::Or,
            ReduceOp::Xor,
        ]
    } else {
        &[ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max]
    };
    for &op in ops {
        pe.team_barrier(team)?;
        pe.reduce(team, dst, src, n, op)?;
        let mut got = vec![T::zeroed(); n];
        pe.copy_out(dst, 0, &mut got)?;
        for (i, g) in got.iter().enumerate() {
            let want =
                (1..team.n_pes()).fold(val(0, i), |a, m| T::combine(op, a, val(m, i)).unwrap_or(a));
            ensure!(
                pe,
                *g == want,
                "{op:?} over {} PEs of {}: element {i} = {g:?}, want {want:?}",
                team.n_pes(),
                std::any::type_name::<T>()
            );
        }
    }
    if !int {
        ensure!(
            pe,
            pe.reduce(team, dst, src, n, ReduceOp::Xor).is_err(),
            "xor on floats accepted"
        );
    }
    // In place.
    pe.reduce(team, src, src, n, ReduceOp::Max)?;
    let mut got = vec![T::zeroed(); n];
    pe.copy_out(src, 0, &mut got)?;
    for (i, g) in got.iter().enumerate() {
        let want = (1..team.n_pes()).fold(val(0, i), |a, m| {
            T::combine(ReduceOp::Max, a, val(m, i)).unwrap_or(a)
        });
        ensure!(pe, *g == want, "in-place max element {i}");
    }
    pe.free(dst)?;
    pe.free(src)
}

fn collectives<P: Provider>(pe: &Pe<P>, team: &Team) -> Result<()> {
    let (me, n) = (team.my_pe(), team.n_pes() as usize);
    let k = 37;
    let src = pe.malloc::<u32>(k * n)?;
    let dst = pe.malloc::<u32>(k * n)?;
    let mine: Vec<u32> = (0..k * n).map(|i| me * 100_000 + i as u32).collect();
    pe.copy_in(src, 0, &mine)?;
    for root in [0, n as u32 - 1] {
        pe.broadcast(team, dst, src, k, root)?;
        let mut got = vec![0u32; k];
        pe.copy_out(dst, 0, &mut got)?;
        ensure!(
            pe,
            got == (0..k)
                .map(|i| root * 100_000 + i as u32)
                .collect::<Vec<_>>(),
            "broadcast from {root}"
        );
    }
    pe.fcollect(team, dst, src, k)?;
    let mut got = vec![0u32; k * n];
    pe.copy_out(dst, 0, &mut got)?;
    for j in 0..n {
        ensure!(
            pe,
            got[j * k..j * k + k]
                == (0..k)
                    .map(|i| j as u32 * 100_000 + i as u32)
                    .collect::<Vec<_>>()[..],
            "fcollect block {j}"
        );
    }
    // collect: member j contributes j + 1 elements.
    let total = pe.collect(team, dst, src, me as usize + 1)?;
    ensure!(pe, total == n * (n + 1) / 2, "collect total {total}");
    let mut got = vec![0u32; total];
    pe.copy_out(dst, 0, &mut got)?;
    let want: Vec<u32> = (0..n)
        .flat_map(|j| (0..=j).map(move |i| j as u32 * 100_000 + i as u32))
        .collect();
    ensure!(pe, got == want, "collect data");
    pe.alltoall(team, dst, src, k)?;
    pe.copy_out(dst, 0, &mut vec![0u32; k * n][..])?;
    let mut got = vec![0u32; k * n];
    pe.copy_out(dst, 0, &mut got)?;
    for j in 0..n {
        let want: Vec<u32> = (0..k)
            .map(|i| j as u32 * 100_000 + (me as usize * k + i) as u32)
            .collect();
        ensure!(
            pe,
            got[j * k..j * k + k] == want[..],
            "alltoall block from {j}"
        );
    }
    pe.free(dst)?;
    pe.free(src)?;
    reductions::<P, i32>(pe, team, true, |m, i| {
        (m as i32 + 1) * if i % 2 == 0 { 1 } else { -1 } + i as i32 % 7
    })?;
    reductions::<P, u64>(pe, team, true, |m, i| {
        (u64::from(m) + 3) << (i % 40) | i as u64
    })?;
    reductions::<P, u8>(pe, team, true, |m, i| (m as u8).wrapping_mul(17) ^ i as u8)?;
    reductions::<P, f64>(pe, team, false, |m, i| f64::from(m) * 0.5 - i as f64 / 3.0)?;
    reductions::<P, f32>(pe, team, false, |m, i| (m as f32 + 1.0) / (i as f32 + 1.0))?;
    Ok(())
}

fn teams<P: Provider>(pe: &Pe<P>) -> Result<()> {
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let world = pe.team_world();
    ensure!(pe, world.my_pe() == me && world.n_pes() == n, "world team");
    let shared = pe.team_shared();
    ensure!(
        pe,
        (0..shared.n_pes()).all(|k| shared
            .world_pe(k)
            .is_some_and(|w| w == me || pe.same_host(w))),
        "shared team holds other hosts"
    );
    pe.sync_all()?;
    collectives(pe, &world)?;
    // Even PEs, then odd PEs (disjoint teams, same slot is fine).
    let evens = pe.team_split_strided(&world, 0, 2, n.div_ceil(2))?;
    let odds = if n > 1 {
        pe.team_split_strided(&world, 1, 2, n / 2)?
    } else {
        None
    };
    let mine = if me % 2 == 0 {
        evens.clone()
    } else {
        odds.clone()
    };
    let Some(t) = mine else {
        return Err(ShmemError::Invalid(format!(
            "PE {me} is in neither split team"
        )));
    };
    ensure!(pe, t.my_pe() == me / 2, "split numbering");
    ensure!(
        pe,
        Team::translate(&t, t.my_pe(), &world) == Some(me),
        "translate to world"
    );
    ensure!(
        pe,
        Team::translate(&world, me ^ 1, &t).is_none() || n % 2 == 1,
        "translate of a non-member"
    );
    ensure!(
        pe,
        pe.team_split_strided(&world, 0, 1, n + 1).is_err(),
        "oversized split accepted"
    );
    collectives(pe, &t)?;
    pe.team_barrier(&t)?;
    pe.team_destroy(t)?;
    ensure!(
        pe,
        pe.team_destroy(world.clone()).is_err(),
        "destroying world accepted"
    );
    pe.barrier_all()
}
