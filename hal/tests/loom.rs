//! Model-checks the posting protocol's counters with loom:
//! `RUSTFLAGS="--cfg loom" cargo test -p gda-hal --test loom --release --features loom-internals`.
//!
//! Producers share a tiny ring; a fake device completes whatever has been rung. Every
//! interleaving must ring doorbells in reservation order with monotone doorbell values, never
//! let a producer write a slot the device has not finished with, and make quiet return only
//! after everything reserved before it completed.
#![cfg(loom)]

use gda_hal::Cost;
use gda_hal::sq::{Counters, SqError, Waiter};
use loom::sync::Arc;
use loom::sync::Mutex;
use loom::sync::atomic::{AtomicU64, Ordering};

struct FakeNic {
    /// Doorbell values in the order they were stored, with the WQE's message number, PSN and
    /// packet count.
    rung: Mutex<Vec<(u64, u32, u32, u32)>>,
    /// What the device has executed and completed (positions below are done).
    done: AtomicU64,
}

fn run(producers: usize, units: u32, entries: u32, posts_each: usize, tracks_psn: bool) {
    // Spin-waits make the full state space explode; a preemption bound (3 for two producers, 1
    // for three) still covers the interleavings that broke other libraries (a second producer
    // between reserve and ring, a poller between two rings).
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(if producers > 2 { 1 } else { 3 });
    b.check(move || {
        let c = Arc::new(Counters::with_capacity(entries, tracks_psn));
        let nic = Arc::new(FakeNic {
            rung: Mutex::new(Vec::new()),
            done: AtomicU64::new(0),
        });
        let progress = |c: &Counters, nic: &FakeNic| -> Result<(), SqError> {
            // The device completes every doorbell it has seen — possibly before the producer
            // that rang it has passed the ticket on. The poller reads the CQE, then the bound:
            // the window check must accept every real completion.
            let seen = nic.rung.lock().unwrap().last().map_or(0, |r| r.0);
            nic.done.fetch_max(seen, Ordering::AcqRel);
            assert!(
                seen <= c.ring_bound(),
                "a real completion fell outside the ring bound"
            );
            c.set_complete_below(seen);
            Ok(())
        };
        let handles: Vec<_> = (0..producers)
            .map(|t| {
                let c = c.clone();
                let nic = nic.clone();
                loom::thread::spawn(move || {
                    for _ in 0..posts_each {
                        let mut w = Waiter::new(1_000);
                        // Producers send messages of different packet counts: PSNs must still
                        // follow reservation order exactly.
                        let packets = t as u32 + 1;
                        let (start, pos) = c.reserve(Cost { units, packets });
                        assert_eq!(u64::from(pos.unit.0), start);
                        c.wait_room(start, units, &mut w, || progress(&c, &nic))
                            .unwrap();
                        // The slots we are about to write must be ones the device finished.
                        assert!(
                            start + u64::from(units)
                                <= nic.done.load(Ordering::Acquire) + u64::from(entries)
                        );
                        c.ring_in_order(start, units, &mut w, || {
                            nic.rung.lock().unwrap().push((
                                start + u64::from(units),
                                pos.msg,
                                pos.psn,
                                packets,
                            ))
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
        let mut psn = 0u32;
        for (i, &(end, msg, p, packets)) in rung.iter().enumerate() {
            assert_eq!(
                end,
                (i as u64 + 1) * u64::from(units),
                "doorbells out of reservation order: {rung:?}"
            );
            if tracks_psn {
                assert_eq!(msg, i as u32, "message numbers out of order: {rung:?}");
                assert_eq!(p, psn, "PSNs out of order: {rung:?}");
                psn += packets;
            } else {
                assert_eq!((msg, p), (0, 0));
            }
        }
    });
}

#[test]
fn two_producers_one_post_each() {
    run(2, 1, 2, 1, false);
}

#[test]
fn two_producers_ring_full() {
    run(2, 2, 2, 1, false);
}

#[test]
fn three_producers() {
    run(3, 1, 4, 1, false);
}

#[test]
fn two_producers_two_posts_wrapping() {
    run(2, 1, 2, 2, false);
}

#[test]
fn two_producers_psn_tracking_wrapping() {
    // bnxt: unit, message number and PSN advance together (one CAS) under any interleaving.
    run(2, 1, 2, 2, true);
}

#[test]
fn two_producers_psn_tracking_ring_full() {
    run(2, 2, 2, 1, true);
}

/// `reserved()` on a PSN-tracking queue (bnxt: the reservation word keeps only the low bits of
/// the position, widened against the completion floor) read while another producer reserves,
/// rings and completes: never past what has been reserved. (Reading the word before the floor
/// let a floor that had overtaken it wrap the widening to 2^24 units ahead, and a quiet wait
/// for work that would never exist.)
#[test]
fn reserved_never_runs_ahead_with_psn_tracking() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(|| {
        let c = Arc::new(Counters::with_capacity(4, true));
        let producer = {
            let c = c.clone();
            loom::thread::spawn(move || {
                let mut w = Waiter::new(1_000);
                let (start, _) = c.reserve(Cost {
                    units: 1,
                    packets: 1,
                });
                c.wait_room(start, 1, &mut w, || Ok(())).unwrap();
                c.ring_in_order(start, 1, &mut w, || ()).unwrap();
                c.set_complete_below(start + 1);
            })
        };
        // (Read on a thread of its own: loom explores it against the producer.)
        let reader = {
            let c = c.clone();
            loom::thread::spawn(move || c.reserved())
        };
        let seen = reader.join().unwrap();
        assert!(seen <= 1, "reserved() read {seen} with one unit reserved");
        producer.join().unwrap();
    });
}

/// The shipped `SendQueue` — reservation, quarter-ring signalling, ring-in-order, polling and
/// `quiet` with its signalled-NOP marker — driven through a fake provider whose "device" executes
/// rung WQEs when the CQ is polled and, like hardware, writes CQEs only for signalled ones.
mod shipped_quiet {
    use gda_hal::op::{SendFlags, WorkRequest};
    use gda_hal::progress::{CollapsedProgress, OutOfWindow};
    use gda_hal::{
        Checked, Cost, CqHandle, PostError, Posted, ProdIdx, Provider, SendQueue, Sge, SqPos,
    };
    use gda_hal::{WcOpcode, WcStatus, WorkCompletion, WqHandle};
    use loom::sync::{Arc, Mutex};

    /// The fake NIC: WQE slots (signalled or not), the doorbell, and the CQEs written so far.
    #[derive(Default)]
    struct Nic {
        slots: Vec<bool>,
        doorbell: u64,
        executed: u64,
        cqes: Vec<u32>,
    }

    type Dev = Mutex<Nic>;

    fn dev<'a>(addr: u64) -> &'a Dev {
        // SAFETY: every handle of these tests carries the address of a `Dev` that the model
        // iteration keeps alive (an `Arc` held until all threads joined).
        unsafe { &*(addr as *const Dev) }
    }

    #[derive(Clone, Copy, Debug)]
    struct Fake;

    impl Provider for Fake {
        type Sq = WqHandle;
        type Rq = WqHandle;
        const NAME: &'static str = "fake";
        const SQ_UNIT_BYTES: u32 = 64;
        const MAX_INLINE_BYTES: u32 = 0;
        const MAX_WQE_UNITS: u32 = 1;
        const HAS_DOORBELL_RECORD: bool = false;
        const WQE_COUNTER_BITS: u32 = 32;
        const CQ_INDEX_BITS: u32 = 32;
        const ATOMIC_RESULT_BIG_ENDIAN: bool = false;

        fn cost(_: &WqHandle, _: &WorkRequest<'_>) -> Cost {
            Cost {
                units: 1,
                packets: 0,
            }
        }
        fn check(sq: &WqHandle, wr: &WorkRequest<'_>) -> Result<Cost, PostError> {
            sq.ring().ok_or(PostError::BadRing)?;
            Ok(Self::cost(sq, wr))
        }
        unsafe fn post_checked(req: &Checked<'_, Self>, at: SqPos, f: SendFlags) -> Posted {
            let sq = req.queue();
            let mut n = dev(sq.buf).lock().unwrap();
            let slot = (at.unit.0 % sq.entries) as usize;
            n.slots[slot] = f.contains(SendFlags::SIGNALED);
            Posted::new(
                at,
                Cost {
                    units: 1,
                    packets: 0,
                },
                [0; 8],
            )
        }
        unsafe fn ring_sq(sq: &WqHandle, posted: &Posted) {
            let mut n = dev(sq.buf).lock().unwrap();
            let next = u64::from(posted.next.unit.0);
            assert!(next > n.doorbell, "doorbells must move forward");
            n.doorbell = next;
        }
        unsafe fn post_recv<const N: usize>(_: &WqHandle, _: ProdIdx, _: &[Sge; N]) {}
        unsafe fn ring_rq(_: &WqHandle, _: ProdIdx) {}
        unsafe fn poll_cq(cq: &CqHandle, ci: u32) -> Option<WorkCompletion> {
            let mut n = dev(cq.buf).lock().unwrap();
            // The device executes everything rung so far, writing CQEs for signalled WQEs.
            while n.executed < n.doorbell {
                let pos = n.executed;
                let len = n.slots.len() as u64;
                if n.slots[(pos % len) as usize] {
                    n.cqes.push(pos as u32);
                }
                n.executed += 1;
            }
            n.cqes.get(ci as usize).map(|&c| WorkCompletion {
                status: WcStatus::Success,
                opcode: WcOpcode::RdmaWrite,
                wqe_counter: c,
                byte_len: 0,
                imm: None,
                qpn: 1,
                vendor_err: 0,
                is_recv: false,
            })
        }
        unsafe fn update_cq_ci(_: &CqHandle, _: u32) {}
        unsafe fn poll_collapsed(
            _: &WqHandle,
            _: &CqHandle,
            _: &mut CollapsedProgress,
            _: u64,
        ) -> Result<Option<WorkCompletion>, OutOfWindow> {
            Ok(None)
        }
    }

    /// Executions of the last model: quiets that returned (and were checked), and producers
    /// whose waits ran out of yields (see [`run`]).
    static FINISHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static STARVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// `producers` threads post `posts` unsignalled-by-request writes each on an 8-unit ring (so
    /// the quarter-ring rule leaves some WQEs unsignalled) and quiet. Whatever the interleaving,
    /// quiet returns only once the device has executed everything reserved before it began —
    /// through the signalled NOP when the newest WQE asked for no CQE.
    ///
    /// Every wait of the queue yields to loom at each step, and loom may pick the yielding
    /// waiter again and again over the runnable thread it waits for — with two producers, one
    /// spins in `quiet` polling a CQ whose poller lock (`cq_busy`) the other holds, one store
    /// away from releasing it. Choosing a yielded thread is not a preemption, so the preemption
    /// bound does not end that path and it exceeds any branch budget. That is loom's search, not
    /// a livelock: the holder is runnable and never waits inside the poll, so any fair
    /// scheduler runs it. Under loom a wait therefore gives up after `yields` yields
    /// (`Waiter`): a producer whose wait ran out was starved by an unfair schedule, and the
    /// run counts it instead of checking it. With one producer nothing can starve.
    /// Counts a wait that ran out of yields (only possible with other producers).
    fn starved(producers: usize, e: gda_hal::SqError) {
        use gda_hal::SqError;
        assert!(
            producers > 1 && matches!(e, SqError::Timeout { .. } | SqError::Poisoned),
            "{e}"
        );
        STARVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counters above are per model: the test harness runs tests on parallel threads, so
    /// models run one at a time (a two-producer model's starved waits once landed in the
    /// one-producer model's count and failed it).
    static ONE_MODEL_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn run(producers: usize, posts: usize, yields: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let _serial = ONE_MODEL_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        FINISHED.store(0, Relaxed);
        STARVED.store(0, Relaxed);
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        // Waiting producers poll in a loop (yielding each step): allow long waits.
        b.max_branches = 100_000;
        b.check(move || {
            let nic = Arc::new(Mutex::new(Nic {
                slots: vec![false; 8],
                ..Nic::default()
            }));
            let addr = &*nic as *const Dev as u64;
            let wq = WqHandle {
                buf: addr,
                entries: 8,
                qpn: 1,
                max_sge: 1,
                ..WqHandle::default()
            };
            let cq = CqHandle {
                buf: addr,
                entries: 8,
                cqe_bytes: 8,
                ..CqHandle::default()
            };
            // SAFETY: the fake device outlives the queue; only this queue polls the CQ.
            let sq = Arc::new(unsafe { SendQueue::<Fake>::new(wq, cq, yields) }.unwrap());
            let handles: Vec<_> = (0..producers)
                .map(|_| {
                    let (sq, nic) = (sq.clone(), nic.clone());
                    loom::thread::spawn(move || {
                        for _ in 0..posts {
                            if let Err(e) = sq.post(&WorkRequest::Nop, SendFlags::empty()) {
                                starved(producers, e);
                                return false;
                            }
                        }
                        let before = sq.counters().reserved();
                        if let Err(e) = sq.quiet() {
                            starved(producers, e);
                            return false;
                        }
                        let executed = nic.lock().unwrap().executed;
                        assert!(
                            executed >= before,
                            "quiet returned with {executed} of {before} reserved WQEs executed"
                        );
                        FINISHED.fetch_add(1, Relaxed);
                        true
                    })
                })
                .collect();
            let mut all = true;
            for h in handles {
                all &= h.join().unwrap();
            }
            if all {
                let n = nic.lock().unwrap();
                assert_eq!(
                    n.doorbell,
                    sq.counters().reserved(),
                    "every reservation was rung"
                );
            }
        });
        let (finished, starved) = (FINISHED.load(Relaxed), STARVED.load(Relaxed));
        eprintln!("{producers} producers: {finished} quiets checked, {starved} waits starved");
        assert!(finished > 0);
        if producers == 1 {
            assert_eq!(starved, 0);
        }
    }

    #[test]
    fn one_producer_unsignalled_then_quiet() {
        run(1, 1, 1_000);
    }

    #[test]
    fn two_unsignalled_posts_then_quiet() {
        run(1, 2, 1_000);
    }

    #[test]
    fn two_producers_then_quiet() {
        run(2, 1, 3);
    }

    /// Two posts each: the quarter-ring signal falls on either producer's WQE, and a quiet may
    /// find the other producer's NOP (or its own) as the newest signalled WQE.
    #[test]
    fn two_producers_two_posts_then_quiet() {
        run(2, 2, 2);
    }
}
