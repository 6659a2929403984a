//! Model-checks the posting protocol's counters with loom:
//! `RUSTFLAGS="--cfg loom" cargo test -p gda-hal --test loom --release`.
//!
//! Producers share a tiny ring; a fake device completes whatever has been rung. Every
//! interleaving must ring doorbells in reservation order with monotone doorbell values, never
//! let a producer write a slot the device has not finished with, and make quiet return only
//! after everything reserved before it completed.
#![cfg(loom)]

use gda_hal::sq::{Counters, SqError, Waiter};
use loom::sync::Arc;
use loom::sync::Mutex;
use loom::sync::atomic::{AtomicU64, Ordering};

struct FakeNic {
    /// Doorbell values in the order they were stored.
    rung: Mutex<Vec<u64>>,
    /// What the device has executed and completed (positions below are done).
    done: AtomicU64,
}

fn run(producers: usize, units: u32, entries: u32, posts_each: usize) {
    // Spin-waits make the full state space explode; a preemption bound (3 for two producers, 1
    // for three) still covers the interleavings that broke other libraries (a second producer
    // between reserve and ring, a poller between two rings).
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(if producers > 2 { 1 } else { 3 });
    b.check(move || {
        let c = Arc::new(Counters::new(entries));
        let nic = Arc::new(FakeNic {
            rung: Mutex::new(Vec::new()),
            done: AtomicU64::new(0),
        });
        let progress = |c: &Counters, nic: &FakeNic| -> Result<(), SqError> {
            // The device completes every doorbell it has seen — possibly before the producer
            // that rang it has passed the ticket on. The poller reads the CQE, then the bound:
            // the window check must accept every real completion.
            let seen = nic.rung.lock().unwrap().last().copied().unwrap_or(0);
            nic.done.fetch_max(seen, Ordering::AcqRel);
            assert!(
                seen <= c.ring_bound(),
                "a real completion fell outside the ring bound"
            );
            c.set_complete_below(seen);
            Ok(())
        };
        let handles: Vec<_> = (0..producers)
            .map(|_| {
                let c = c.clone();
                let nic = nic.clone();
                loom::thread::spawn(move || {
                    for _ in 0..posts_each {
                        let mut w = Waiter::new(1_000);
                        let start = c.reserve(units);
                        c.wait_room(start, units, &mut w, || progress(&c, &nic))
                            .unwrap();
                        // The slots we are about to write must be ones the device finished.
                        assert!(
                            start + u64::from(units)
                                <= nic.done.load(Ordering::Acquire) + u64::from(entries)
                        );
                        c.ring_in_order(start, units, &mut w, || {
                            nic.rung.lock().unwrap().push(start + u64::from(units))
                        })
                        .unwrap();
                    }
                    let mut w = Waiter::new(1_000);
                    c.quiet_all(&mut w, || progress(&c, &nic)).unwrap();
                    // Quiet returned: at least everything this producer posted is complete.
                    assert!(c.complete_below() >= 1);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let rung = nic.rung.lock().unwrap().clone();
        let total = producers * posts_each;
        assert_eq!(rung.len(), total);
        for (i, v) in rung.iter().enumerate() {
            assert_eq!(
                *v,
                (i as u64 + 1) * u64::from(units),
                "doorbells out of reservation order: {rung:?}"
            );
        }
    });
}

#[test]
fn two_producers_one_post_each() {
    run(2, 1, 2, 1);
}

#[test]
fn two_producers_ring_full() {
    run(2, 2, 2, 1);
}

#[test]
fn three_producers() {
    run(3, 1, 4, 1);
}

#[test]
fn two_producers_two_posts_wrapping() {
    run(2, 1, 2, 2);
}
