//! What one request costs the cross-process engine (`wire`), without the scheduler: two
//! process fabrics in this process, connected as two processes are (socket, shared rings), and
//! one thread that posts a batch of requests on one side and then runs both fabrics' passes
//! (`Fabric::progress`, as the verbs library's post and poll do) until the batch completes.
//! So the figure is the CPU time of the requester's and the responder's work per request —
//! what bounds a message rate when each side has a core — with no wake-up in it.
//!
//! `cargo run --release -p gda-sim --example wire_rate [-- ROUNDS [FILTER]]` (FILTER: only the
//! requests whose name contains it, e.g. `fetch`, for a profiler)
//!
//! Prints first the time of a QP pair's first WRITE after bring-up and a 5 ms pause (a
//! connection not made at RTR is made by it), then
//! ns per request for 8-byte inline WRITEs and 8-byte fetch-adds, in batches of 1, 16
//! and 64, and for 64-KiB WRITEs and READs (to and from a region) in batches of 1 and 16 (each the best
//! of 5 runs of ROUNDS batches, default 2,000; a tenth as many of 64 KiB).

use std::time::Instant;

use gda_hal::{AtomicOp, Payload, Remote, SendFlags, SendQueue, Sge, WorkRequest};
use gda_native::Native;
use gda_sim::{Access, Cq, CqMode, Fabric, FabricConfig, Qp, QpInit};

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let filter = std::env::args().nth(2).unwrap_or_default();
    // First, before this thread is pinned: the fabrics' own threads (which accept and greet
    // connections) must be free to run on either CPU, as in a program.
    if filter.is_empty() || "first".contains(filter.as_str()) {
        first_write();
    }
    let a = Fabric::process(FabricConfig::default()).expect("process fabric");
    let b = Fabric::process(FabricConfig::default()).expect("process fabric");
    // This thread on CPU 0, the engine threads on CPU 1 (when there is one): they leave the
    // work to this thread, which polls, but wake now and then; there they take no CPU time
    // from it.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        let _ = gda_os::cpu::restrict(&gda_os::cpu::set_of(&[0]));
        a.set_engine_cpus(&[1]).expect("engine CPU");
        b.set_engine_cpus(&[1]).expect("engine CPU");
    }
    let (na, nb) = (a.add_nic_for::<Native>(), b.add_nic_for::<Native>());
    let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
    let (cqa, qa, _cqb, _qb) = pair(&pa, &pb, 256);
    let local = pa.alloc_mr(64 << 10, Access::ALL);
    let remote = pb.alloc_mr(64 << 10, Access::ALL);
    // SAFETY: the QP and CQ outlive the queue (dropped at the end of main, after it).
    let sq =
        unsafe { SendQueue::<Native>::new(qa.sq_handle::<Native>().unwrap(), cqa.handle(), 5000) }
            .unwrap();
    let to = Remote {
        addr: remote.addr(),
        rkey: remote.rkey(),
    };
    let value = 7u64.to_le_bytes();
    let write = WorkRequest::Write {
        remote: to,
        payload: Payload::Inline(&value),
        imm: None,
    };
    let sge = [Sge {
        addr: local.addr(),
        length: 8,
        lkey: local.lkey(),
    }];
    let fadd = WorkRequest::Atomic {
        remote: to,
        local: sge[0],
        op: AtomicOp::FetchAdd { add: 1 },
        bytes: 8,
    };
    let big = [Sge {
        addr: local.addr(),
        length: 64 << 10,
        lkey: local.lkey(),
    }];
    let write_64k = WorkRequest::Write {
        remote: to,
        payload: Payload::Sges(&big),
        imm: None,
    };
    let read_64k = WorkRequest::Read {
        remote: to,
        sges: &big,
    };
    println!("# request            batch  ns/request (best of 5 x {rounds} batches)");
    for (name, wr, batches) in [
        ("8-B WRITE inline", &write, &[1u64, 16, 64][..]),
        ("8-B fetch-add", &fadd, &[1, 16, 64][..]),
        ("64-KiB WRITE", &write_64k, &[1, 16][..]),
        ("64-KiB READ", &read_64k, &[1, 16][..]),
    ] {
        if !name.contains(filter.as_str()) {
            continue;
        }
        let rounds = if batches.len() == 2 {
            rounds / 10
        } else {
            rounds
        };
        for &batch in batches {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..rounds {
                    for _ in 0..batch {
                        sq.post(wr, SendFlags::SIGNALED).expect("post");
                    }
                    // Done when the newest WQE is complete ("every WQE starting below
                    // `complete_below` is complete"; the marker is its start + 1).
                    let c = sq.counters();
                    while c.complete_below() < c.last_rung_marker() {
                        a.progress();
                        b.progress();
                        sq.poll().expect("completion");
                    }
                }
                let ns = t.elapsed().as_nanos() as f64 / (rounds * batch) as f64;
                best = best.min(ns);
            }
            println!("{name:<20} {batch:>5}  {best:>8.0}");
        }
    }
    drop(sq);
    if filter.is_empty() || "streamed".contains(filter.as_str()) {
        // A fresh pair (a queue starts at position 0).
        let (cqa, qa, _cqb, _qb) = pair(&pa, &pb, 1024);
        let hook = a.post_hook(na.index(), qa.qpn()).expect("the QP's hook");
        // SAFETY: the QP and CQ outlive the queue (dropped inside `streamed`).
        let sq = unsafe {
            SendQueue::<Native>::new(qa.sq_handle::<Native>().unwrap(), cqa.handle(), 5000)
        }
        .unwrap();
        streamed(&a, &b, sq, hook, to, rounds);
    }
}

/// The first request of a QP pair just brought up, from its post to its completion: what a
/// program's first message costs (a connection to the peer process that is not made yet is
/// made then). Each of the 5 runs has fabrics of its own, so each connects anew; prints the
/// median in microseconds.
fn first_write() {
    let mut us = Vec::new();
    for _ in 0..5 {
        let a = Fabric::process(FabricConfig::default()).expect("process fabric");
        let b = Fabric::process(FabricConfig::default()).expect("process fabric");
        let (na, nb) = (a.add_nic_for::<Native>(), b.add_nic_for::<Native>());
        let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
        let remote = pb.alloc_mr(4096, Access::ALL);
        let (cqa, qa, _cqb, _qb) = pair(&pa, &pb, 64);
        // What a program does between bringing its QPs up and its first request (perftest:
        // a handshake over TCP): the peer's threads meanwhile take what bring-up started.
        std::thread::sleep(std::time::Duration::from_millis(5));
        // SAFETY: the QP and CQ outlive the queue (dropped at the end of this iteration).
        let sq = unsafe {
            SendQueue::<Native>::new(qa.sq_handle::<Native>().unwrap(), cqa.handle(), 5000)
        }
        .unwrap();
        let value = 7u64.to_le_bytes();
        let write = WorkRequest::Write {
            remote: Remote {
                addr: remote.addr(),
                rkey: remote.rkey(),
            },
            payload: Payload::Inline(&value),
            imm: None,
        };
        let t = Instant::now();
        sq.post(&write, SendFlags::SIGNALED).expect("post");
        let c = sq.counters();
        while c.complete_below() < c.last_rung_marker() {
            a.progress();
            b.progress();
            sq.poll().expect("completion");
        }
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    println!(
        "# first WRITE after bring-up: {:.0} us (median of 5; {:.0}-{:.0})",
        us[2], us[0], us[4]
    );
}

/// A QP of `pa` connected to one of `pb`, each with a CQ of its own, `sq_units` units each.
fn pair(pa: &gda_sim::Pd, pb: &gda_sim::Pd, sq_units: u32) -> (Cq, Qp, Cq, Qp) {
    let cqa = pa.nic().create_cq(4096, CqMode::Normal).unwrap();
    let cqb = pb.nic().create_cq(4096, CqMode::Normal).unwrap();
    let init = QpInit {
        sq_units,
        ..QpInit::default()
    };
    let qa = pa.create_qp(init, &cqa, &cqa).unwrap();
    let qb = pb.create_qp(init, &cqb, &cqb).unwrap();
    qa.bring_up_at(&qb.endpoint(), qb.start_psn()).unwrap();
    qb.bring_up_at(&qa.endpoint(), qa.start_psn()).unwrap();
    (cqa, qa, cqb, qb)
}

/// How gda-shmem drives the engine between two processes, with one core each: this thread
/// posts 8-byte inline WRITEs back to back, running the QP's work after each doorbell
/// ([`Fabric::post_hook`]) and the whole pass whenever it polls for room; a second thread
/// stands in for the peer, running its fabric's pass in a loop as a waiting PE does. Prints
/// the message rate (best of 5 runs).
fn streamed(
    a: &Fabric,
    b: &Fabric,
    mut sq: SendQueue<Native>,
    hook: impl Fn() + Send + Sync,
    to: Remote,
    rounds: u64,
) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let n = rounds * 64;
    let a2 = a.clone();
    sq.set_host_progress(Some(std::sync::Arc::new(move || a2.progress())));
    std::thread::scope(|s| {
        let responder = std::thread::Builder::new().name("responder".into());
        let _ = responder.spawn_scoped(s, || {
            // CPU 1 if there is one (this thread inherited CPU 0 alone).
            let _ = gda_os::cpu::restrict(&gda_os::cpu::set_of(&[1]));
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                b.progress();
            }
        });
        let h = &hook;
        let value = 7u64.to_le_bytes();
        let write = WorkRequest::Write {
            remote: to,
            payload: Payload::Inline(&value),
            imm: None,
        };
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..n {
                sq.post(&write, SendFlags::empty()).expect("post");
                h();
            }
            sq.quiet().expect("quiet");
            best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        println!(
            "{:<20} {:>5}  {best:>8.0}  ({:.2} M/s; requester and responder on their own cores)",
            "8-B WRITE streamed",
            "-",
            1e3 / best
        );
    });
}
