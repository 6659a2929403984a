//! Every routine with PEs as threads, over P2P, RDMA through each sim device model, and mixed.

use std::time::Duration;

use gda_shmem::{Config, TransportKind, TransportPolicy, launch, selftest};

fn cfg(t: TransportPolicy, hosts: Option<u32>) -> Config {
    Config {
        heap_size: 16 << 20,
        transport: t,
        timeout: Duration::from_secs(20),
        hosts,
        ..Config::default()
    }
}

fn check<P: gda_sim::Modeled>(n: u32, c: &Config, want: TransportKind) {
    let r = launch::threads::<P, _, _>(n, c, |pe| {
        let other = (pe.my_pe() + 1) % pe.n_pes();
        if other != pe.my_pe() {
            assert_eq!(pe.transport_to(other)?, want);
        }
        selftest::run(pe, 64)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.len(), n as usize);
    assert!(
        r[0].checks.len() >= if n > 1 { 8 } else { 5 },
        "{:?}",
        r[0].checks
    );
}

#[test]
fn p2p_threads() {
    check::<gda_native::Native>(4, &cfg(TransportPolicy::P2p, None), TransportKind::P2p);
}

#[test]
fn rdma_threads_native() {
    check::<gda_native::Native>(3, &cfg(TransportPolicy::Rdma, None), TransportKind::Rdma);
}

#[test]
fn rdma_threads_mlx5() {
    check::<gda_mlx5::Mlx5>(3, &cfg(TransportPolicy::Rdma, None), TransportKind::Rdma);
}

#[test]
fn rdma_threads_bnxt() {
    check::<gda_bnxt::Bnxt>(3, &cfg(TransportPolicy::Rdma, None), TransportKind::Rdma);
}

#[test]
fn mixed_threads() {
    // Two simulated hosts: PE k and k+1 on different hosts (RDMA), k and k+2 together (P2P).
    let c = cfg(TransportPolicy::Auto, Some(2));
    launch::threads::<gda_mlx5::Mlx5, _, _>(4, &c, |pe| {
        let me = pe.my_pe();
        assert_eq!(pe.transport_to((me + 1) % 4)?, TransportKind::Rdma);
        assert_eq!(pe.transport_to((me + 2) % 4)?, TransportKind::P2p);
        assert_eq!(pe.team_shared().n_pes(), 2);
        selftest::run(pe, 32)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn single_pe() {
    check::<gda_native::Native>(1, &cfg(TransportPolicy::Auto, None), TransportKind::Local);
}

#[test]
fn chaos_seeds_over_rdma_threads() {
    // The engine delays data, completions and QP service order differently per seed; every
    // routine and ordering check must still hold.
    for seed in [3u64, 11, 2024, 77777] {
        let fabric = gda_sim::Fabric::new(gda_sim::FabricConfig { chaos: Some(seed) });
        let c = cfg(TransportPolicy::Rdma, None);
        let run = |f: &gda_sim::Fabric| match seed % 3 {
            0 => {
                launch::threads_on::<gda_native::Native, _, _>(3, &c, f, |pe| selftest::run(pe, 32))
                    .map(|_| ())
            }
            1 => launch::threads_on::<gda_mlx5::Mlx5, _, _>(3, &c, f, |pe| selftest::run(pe, 32))
                .map(|_| ()),
            _ => launch::threads_on::<gda_bnxt::Bnxt, _, _>(3, &c, f, |pe| selftest::run(pe, 32))
                .map(|_| ()),
        };
        run(&fabric).unwrap_or_else(|e| panic!("chaos seed {seed}: {e}"));
    }
}

#[test]
fn misuse_gets_clear_errors() {
    let c = cfg(TransportPolicy::Auto, None);
    launch::threads::<gda_native::Native, _, _>(2, &c, |pe| {
        let x = pe.malloc::<u64>(4)?;
        let e = pe.put(x, 3, &[1, 2], 1).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
        let e = pe.atomic_add(x, 0, 1u64, 9).unwrap_err().to_string();
        assert!(e.contains("PE 9 is not in 0..2"), "{e}");
        let e = pe
            .iput(x, 0, 0, &[1u64, 2], 1, 2, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("strides must be at least 1"), "{e}");
        let e = pe
            .iput(x, 0, 1, &[1u64, 2], 2, 2, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("iput reads src[2] of 2"), "{e}");
        let e = pe
            .iget(&mut [0u64; 4], 1, x, 0, 4, 2, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
        let e = pe
            .iget(&mut [0u64; 4], usize::MAX, x, 0, 1, 2, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("iget writes out"), "{e}");
        let e = pe.malloc::<u8>(1 << 40).unwrap_err().to_string();
        assert!(e.contains("GDA_SHMEM_HEAP_SIZE"), "{e}");
        let b = pe.malloc::<u32>(3)?;
        let odd = b.slice(1, 2)?;
        let w = pe.team_world();
        assert!(pe.reduce(&w, odd, odd, 2, gda_shmem::ReduceOp::Sum).is_ok());
        pe.free(b)?;
        pe.free(x)?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // A PE that fails makes the others fail at once (not at the timeout), naming it.
    let t = std::time::Instant::now();
    let e = launch::threads::<gda_native::Native, _, _>(3, &c, |pe| {
        if pe.my_pe() == 1 {
            return Err(gda_shmem::ShmemError::Invalid("boom".into()));
        }
        pe.barrier_all()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("boom"), "{e}");
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn a_sym_of_one_heap_is_refused_by_another() {
    // Before the fix only the `Sym`'s own range was checked: a big allocation of one job used
    // on a `Pe` with a smaller heap read and wrote past that heap.
    let mut big = cfg(TransportPolicy::P2p, None);
    big.heap_size = 1 << 20;
    let mut small = big.clone();
    small.heap_size = 64 << 10;
    let far = launch::threads::<gda_native::Native, _, _>(1, &big, |pe| {
        let _pad = pe.malloc::<u8>(512 << 10)?;
        let far = pe.malloc::<u64>(1024)?;
        assert!(far.offset() > small_heap_bytes());
        Ok(far)
    })
    .unwrap_or_else(|e| panic!("{e}"))[0];
    launch::threads::<gda_native::Native, _, _>(2, &small, |pe| {
        let own = pe.malloc::<u64>(4)?;
        for e in [
            pe.put(far, 0, &[1u64], 1).unwrap_err(),
            pe.get(&mut [0u64; 1], far, 0, 1).unwrap_err(),
            pe.read(far, 0).unwrap_err(),
            pe.write(far, 0, 7).unwrap_err(),
            pe.atomic_add(far, 0, 1u64, 1).unwrap_err(),
            pe.local_ptr(far).unwrap_err(),
            pe.free(far).unwrap_err(),
        ] {
            assert!(e.to_string().contains("another symmetric heap"), "{e}");
        }
        // The heap's own allocations still work, and nothing was touched.
        pe.write(own, 0, 5)?;
        assert_eq!(pe.read(own, 0)?, 5);
        pe.free(own)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

fn small_heap_bytes() -> usize {
    64 << 10
}

/// The enum's former name still names it (callers written against `Transport` compile).
#[test]
fn transport_is_still_the_kind_enum() {
    let k: gda_shmem::Transport = TransportKind::P2p;
    assert_eq!(k, gda_shmem::pe::Transport::P2p);
    assert_eq!(format!("{:?}", gda_shmem::Transport::Rdma), "Rdma");
}

/// Locks (`set_lock`, `test_lock`, `clear_lock`) protect a read-modify-write of plain gets and
/// puts on PE 0 from every PE; misuse (taking a held lock again, releasing one not held) is an
/// error naming it. Vector waits and tests compare each variable with its own value.
fn locks_and_vector_waits<P: gda_sim::Modeled>(t: TransportPolicy) -> usize {
    const ROUNDS: i64 = 25;
    let c = cfg(t, None);
    let checks = launch::threads::<P, _, _>(3, &c, |pe| {
        let lock = pe.calloc::<i64>(1)?;
        let ctr = pe.calloc::<i64>(1)?;
        let flags = pe.calloc::<u64>(4)?;
        pe.barrier_all()?;
        for _ in 0..ROUNDS {
            pe.set_lock(lock, 0)?;
            let v = pe.g(ctr, 0, 0)?;
            pe.p(ctr, 0, v + 1, 0)?;
            pe.clear_lock(lock, 0)?;
        }
        pe.barrier_all()?;
        let total = pe.g(ctr, 0, 0)?;
        assert_eq!(total, 3 * ROUNDS, "PE {}", pe.my_pe());
        let mut checks = 1;
        // Misuse: a second take by the holder, a release by a non-holder.
        if pe.my_pe() == 1 {
            assert!(pe.test_lock(lock, 0)?, "the lock is free again");
            let e = pe.test_lock(lock, 0).unwrap_err().to_string();
            assert!(e.contains("not recursive"), "{e}");
            pe.clear_lock(lock, 0)?;
            let e = pe.clear_lock(lock, 0).unwrap_err().to_string();
            assert!(e.contains("not held by this PE (it is free)"), "{e}");
            checks += 2;
        }
        pe.barrier_all()?;
        // Vector waits: PE 0 stores i + 10 into flags[i] on every other PE; each waits for
        // its own vector of values.
        let want: Vec<u64> = (0..4).map(|i| i + 10).collect();
        assert!(!pe.test_all_vector(flags, None, gda_shmem::Cmp::Eq, &want)?);
        assert_eq!(
            pe.test_any_vector(flags, None, gda_shmem::Cmp::Eq, &want)?,
            None
        );
        pe.barrier_all()?;
        if pe.my_pe() == 0 {
            for j in 1..pe.n_pes() {
                for i in 0..4 {
                    pe.atomic_set(flags, i, i as u64 + 10, j)?;
                }
            }
            pe.quiet()?;
        } else {
            pe.wait_until_all_vector(flags, None, gda_shmem::Cmp::Eq, &want)?;
            let skip = [true, false, true, false];
            let some = pe.wait_until_some_vector(flags, Some(&skip), gda_shmem::Cmp::Eq, &want)?;
            assert_eq!(some, [1, 3]);
            let any = pe.test_any_vector(flags, Some(&skip), gda_shmem::Cmp::Ne, &want)?;
            assert_eq!(any, None);
            let e = pe
                .test_all_vector(flags, None, gda_shmem::Cmp::Eq, &want[..3])
                .unwrap_err()
                .to_string();
            assert!(e.contains("3 comparison values for 4 variables"), "{e}");
            checks += 4;
        }
        pe.barrier_all()?;
        Ok(checks)
    })
    .unwrap_or_else(|e| panic!("{t:?}: {e}"));
    checks.iter().sum()
}

#[test]
fn locks_and_vector_waits_on_every_route() {
    // PE 0: 1 check; PE 1: 1 + 2 + 4; PE 2: 1 + 4.
    assert_eq!(
        locks_and_vector_waits::<gda_native::Native>(TransportPolicy::P2p),
        13
    );
    assert_eq!(
        locks_and_vector_waits::<gda_native::Native>(TransportPolicy::Rdma),
        13
    );
    assert_eq!(
        locks_and_vector_waits::<gda_mlx5::Mlx5>(TransportPolicy::Rdma),
        13
    );
    assert_eq!(
        locks_and_vector_waits::<gda_bnxt::Bnxt>(TransportPolicy::Rdma),
        13
    );
}

/// `alltoalls` on a team: element k of block j of each member's source (stride 3) lands at
/// element k of block `me` of member j's destination (stride 2); a zero stride is refused.
fn alltoalls_strided<P: gda_sim::Modeled>(t: TransportPolicy) -> usize {
    const N: usize = 3;
    let c = cfg(t, None);
    let r = launch::threads::<P, _, _>(3, &c, |pe| {
        let size = pe.n_pes() as usize;
        let me = pe.my_pe() as u64;
        let src = pe.calloc::<u64>(size * N * 3)?;
        let dst = pe.calloc::<u64>(size * N * 2)?;
        for j in 0..size {
            for k in 0..N {
                // From `me` to member j, element k.
                pe.p(
                    src,
                    (j * N + k) * 3,
                    me << 16 | (j as u64) << 8 | k as u64,
                    pe.my_pe(),
                )?;
            }
        }
        pe.barrier_all()?;
        let world = pe.team_world();
        pe.alltoalls(&world, dst, src, 2, 3, N)?;
        let mut checked = 0;
        for j in 0..size {
            for k in 0..N {
                let got = pe.g(dst, (j * N + k) * 2, pe.my_pe())?;
                assert_eq!(
                    got,
                    (j as u64) << 16 | me << 8 | k as u64,
                    "from {j}, element {k}"
                );
                // The elements between the strided ones are untouched.
                assert_eq!(pe.g(dst, (j * N + k) * 2 + 1, pe.my_pe())?, 0);
                checked += 2;
            }
        }
        let e = pe
            .alltoalls(&world, dst, src, 0, 3, N)
            .unwrap_err()
            .to_string();
        assert!(e.contains("strides must be at least 1"), "{e}");
        pe.barrier_all()?;
        Ok(checked + 1)
    })
    .unwrap_or_else(|e| panic!("{t:?}: {e}"));
    r.iter().sum()
}

#[test]
fn alltoalls_on_every_route() {
    // 3 PEs × (3 blocks × 3 elements × 2 checks + 1).
    assert_eq!(
        alltoalls_strided::<gda_native::Native>(TransportPolicy::P2p),
        57
    );
    assert_eq!(
        alltoalls_strided::<gda_mlx5::Mlx5>(TransportPolicy::Rdma),
        57
    );
    assert_eq!(
        alltoalls_strided::<gda_bnxt::Bnxt>(TransportPolicy::Rdma),
        57
    );
}

/// A PE waiting for a value that never comes times out on time even while it serves a peer that
/// writes to it without pause: PEs as threads, each on its own process fabric (the wire
/// engine, whose waits run the engine's pass; a pass that serves something restarts the
/// spinning, and the wait still looks at the clock every 256 rounds).
#[test]
fn a_wait_that_serves_a_busy_peer_still_times_out() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    let c = Config {
        timeout: Duration::from_millis(300),
        ..cfg(TransportPolicy::Rdma, None)
    };
    let stop = AtomicBool::new(false);
    let open = |_| {
        let f = process_fabric()?;
        let g = f.clone();
        Ok(gda_shmem::RdmaNic {
            progress: Some(Arc::new(move || g.progress()) as gda_shmem::Progress),
            ..gda_shmem::RdmaNic::new(gda_sim::SimDevice::<gda_native::Native>::new(&f))
        })
    };
    let r = launch::threads_with(2, &c, open, |pe| {
        let flag = pe.calloc::<u64>(2)?;
        pe.barrier_all()?;
        if pe.my_pe() == 0 {
            // Writes the other word of PE 1's pair until PE 1 gives up (at most 5 s).
            let t = Instant::now();
            let mut puts = 0u64;
            while !stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(5) {
                pe.put_nbi(flag, 1, &[puts], 1)?;
                puts += 1;
                if puts % 32 == 0 {
                    pe.quiet()?;
                }
            }
            pe.quiet()?;
            Ok((puts, Duration::ZERO, String::new()))
        } else {
            let t = Instant::now();
            let e = pe.wait_until(flag, 0, gda_shmem::Cmp::Eq, 42);
            let waited = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            Ok((0, waited, format!("{e:?}")))
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let (puts, _, _) = &r[0];
    let (_, waited, e) = &r[1];
    assert!(*puts > 100, "the peer wrote {puts} times");
    assert!(e.contains("Timeout"), "{e}");
    assert!(
        *waited < Duration::from_secs(2),
        "a 300 ms wait ended after {waited:?}"
    );
}

/// Non-blocking puts whose doorbell work the PE left to the software NIC (`RdmaNic::defer`,
/// as `launch` sets it on the wire engine) arrive while the PE makes no further call: the
/// engine thread serves them within its short nap. PEs as threads, each on its own process
/// fabric; PE 0 streams puts for a while (its engine thread, once it looks, naps short and
/// accepts deferred doorbells), ends with a put to a second word and sleeps; PE 1 times that
/// last put's arrival from its posting. The fabrics' statistics show puts really were left to
/// the engine.
#[test]
fn non_blocking_puts_left_to_the_engine_arrive_without_a_quiet() {
    use std::sync::Mutex;
    use std::time::Instant;
    let fabrics = Mutex::new(Vec::new());
    let open = |_| {
        let f = process_fabric()?;
        fabrics.lock().unwrap().push(f.clone());
        Ok(wire_nic(&f))
    };
    const ROUNDS: u64 = 4;
    // When PE 0 posted each round's last put.
    let posted = Mutex::new(Vec::new());
    let r = launch::threads_with(2, &cfg(TransportPolicy::Rdma, None), open, |pe| {
        let words = pe.calloc::<u64>(2)?;
        let mut arrived = Vec::new();
        for round in 1..=ROUNDS {
            pe.barrier_all()?;
            if pe.my_pe() == 0 {
                let t = Instant::now();
                let mut k = 0u64;
                while t.elapsed() < Duration::from_millis(40) {
                    pe.put_nbi(words, 0, &[k], 1)?;
                    k += 1;
                }
                pe.put_nbi(words, 1, &[round], 1)?;
                posted.lock().unwrap().push(Instant::now());
                // No call into the library for a while: only the engine can send the tail.
                std::thread::sleep(Duration::from_millis(200));
                pe.quiet()?;
            } else {
                pe.wait_until(words, 1, gda_shmem::Cmp::Eq, round)?;
                arrived.push(Instant::now());
            }
        }
        pe.barrier_all()?;
        Ok(arrived)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let posted = posted.into_inner().unwrap();
    let arrived = &r[1];
    assert_eq!(posted.len() as u64, ROUNDS);
    assert_eq!(arrived.len() as u64, ROUNDS);
    let late: Vec<Duration> = posted
        .iter()
        .zip(arrived)
        .map(|(p, a)| a.saturating_duration_since(*p))
        .collect();
    // Left to the engine, the last put arrives after its short nap (at most 320 us) and a
    // wake-up; waiting for PE 0's quiet would take the whole 200 ms.
    let worst = late.iter().max().copied().unwrap_or_default();
    assert!(
        worst < Duration::from_millis(60),
        "a put took {worst:?} to arrive: {late:?}"
    );
    let deferred: u64 = fabrics
        .lock()
        .unwrap()
        .iter()
        .map(|f| f.stats().deferred_doorbells)
        .sum();
    assert!(deferred > 0, "no put was left to the engine");
}

/// A PE that posts and then spins on its own memory for the peer's answer (a plain load, not a
/// SHMEM wait, which would serve) gets it after one wake-up of its engine thread: while a
/// program posts, its engine naps short and is not woken by responses to its requests, but it
/// is by peers' requests. PEs as threads, each on its own process fabric (post hooks, as
/// `launch` sets them); PE 0 puts a round number and spins until PE 1's put of it back lands.
/// Measured: median round trip 16–30 µs; 340–350 µs (the engine's longest short nap) when
/// peers' requests did not wake it. A timing test: a debug build takes 230–330 µs per round
/// trip by itself, and parallel tests add scheduler delays, so it runs in release and alone
/// (`.ci/run`: `cargo nextest run --release -p gda-shmem --features sim --test threads
/// --run-ignored only -j 1 a_pe_spinning`).
#[test]
#[ignore = "timing: run in release and alone (.ci/run does)"]
fn a_pe_spinning_on_its_memory_gets_a_peers_put_after_one_wake_up() {
    use std::sync::Mutex;
    use std::time::Instant;
    let open = |_| Ok(wire_nic(&process_fabric()?));
    const ROUNDS: u64 = 300;
    let rtt = Mutex::new(Vec::new());
    launch::threads_with(2, &cfg(TransportPolicy::Rdma, None), open, |pe| {
        let words = pe.calloc::<u64>(2)?;
        let mine = pe.local_ptr(words)?;
        pe.barrier_all()?;
        for round in 1..=ROUNDS {
            if pe.my_pe() == 0 {
                let t = Instant::now();
                pe.put(words, 0, &[round], 1)?;
                let deadline = t + Duration::from_secs(5);
                // SAFETY: word 1 of this PE's own symmetric allocation of two words.
                while unsafe { std::ptr::read_volatile(mine.add(1)) } != round {
                    if Instant::now() > deadline {
                        return Err(gda_shmem::ShmemError::Config(format!(
                            "round {round}: no answer in 5 s"
                        )));
                    }
                    std::hint::spin_loop();
                }
                rtt.lock().unwrap().push(t.elapsed());
            } else {
                pe.wait_until(words, 0, gda_shmem::Cmp::Eq, round)?;
                pe.put(words, 1, &[round], 0)?;
            }
        }
        pe.barrier_all()?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mut v = rtt.into_inner().unwrap();
    assert_eq!(v.len() as u64, ROUNDS);
    v.sort();
    let median = v[v.len() / 2];
    assert!(
        median < Duration::from_micros(150),
        "median round trip {median:?} (p90 {:?})",
        v[v.len() * 9 / 10]
    );
}

/// A process fabric (the wire engine) for a PE of `launch::threads_with`.
fn process_fabric() -> gda_shmem::Result<gda_sim::Fabric> {
    gda_sim::Fabric::process(gda_sim::FabricConfig::default())
        .map_err(|e| gda_shmem::ShmemError::Config(e.to_string()))
}

/// The RDMA NIC a launched PE gets on `f` (`launch::sim_nic`: post hooks, the pass in waits,
/// deferred doorbells), native queues.
fn wire_nic(f: &gda_sim::Fabric) -> gda_shmem::RdmaNic<gda_sim::SimDevice<gda_native::Native>> {
    launch::sim_nic(f, gda_sim::SimDevice::<gda_native::Native>::new(f))
}
