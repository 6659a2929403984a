//! Connected QP pairs are freed when dropped. The engine once held each QP's responder with a
//! strong reference, so two QPs that both sent (or a loopback QP) kept each other — and their
//! CQs, rings and regions — alive forever: `gda chaos` grew by 0.4 MB per seed.
//!
//! This test binary counts live heap bytes with its own global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use gda_hal::{Payload, Remote, SendFlags, SendQueue, WorkRequest};
use gda_native::Native;
use gda_sim::{Access, CqMode, Fabric, FabricConfig, Mr, QpInit};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's obligations are the system allocator's.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn write(sq: &SendQueue<Native>, to: &Mr) {
    let wr = WorkRequest::Write {
        remote: Remote {
            addr: to.addr(),
            rkey: to.rkey(),
        },
        payload: Payload::Inline(&[7u8; 8]),
        imm: None,
    };
    sq.post(&wr, SendFlags::empty()).unwrap();
    sq.quiet().unwrap();
}

/// Two QPs that both send, then a loopback QP; everything dropped at the end.
fn once(seed: u64) {
    let fabric = Fabric::new(FabricConfig { chaos: Some(seed) });
    let (na, nb) = (
        fabric.add_nic_for::<Native>(),
        fabric.add_nic_for::<Native>(),
    );
    let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
    let (ca, cb) = (
        na.create_cq(256, CqMode::Normal).unwrap(),
        nb.create_cq(256, CqMode::Normal).unwrap(),
    );
    let (a, b) = (
        pa.create_qp(QpInit::default(), &ca, &ca).unwrap(),
        pb.create_qp(QpInit::default(), &cb, &cb).unwrap(),
    );
    a.bring_up(&b.endpoint()).unwrap();
    b.bring_up(&a.endpoint()).unwrap();
    let (ma, mb) = (
        pa.alloc_mr(64, Access::REMOTE_WRITE),
        pb.alloc_mr(64, Access::REMOTE_WRITE),
    );
    let l = pa.create_qp(QpInit::default(), &ca, &ca).unwrap();
    l.bring_up(&l.endpoint()).unwrap();
    {
        // SAFETY: the QPs and CQs outlive the queues (this block); each queue is its QP's only
        // poster and its CQ's only poller while it lives (the loopback queue comes after).
        let (sa, sb) = unsafe {
            (
                SendQueue::<Native>::new(a.sq_handle::<Native>().unwrap(), ca.handle(), 20_000)
                    .unwrap(),
                SendQueue::<Native>::new(b.sq_handle::<Native>().unwrap(), cb.handle(), 20_000)
                    .unwrap(),
            )
        };
        write(&sa, &mb);
        write(&sb, &ma);
    }
    // SAFETY: as above.
    let sl =
        unsafe { SendQueue::<Native>::new(l.sq_handle::<Native>().unwrap(), ca.handle(), 20_000) }
            .unwrap();
    write(&sl, &ma);
}

#[test]
fn connected_qps_that_both_sent_are_freed() {
    once(0);
    std::thread::sleep(Duration::from_millis(50));
    let start = LIVE.load(Ordering::Relaxed);
    const RUNS: isize = 20;
    for seed in 1..=RUNS as u64 {
        once(seed);
    }
    std::thread::sleep(Duration::from_millis(50));
    let grew = LIVE.load(Ordering::Relaxed) - start;
    // Before the fix: about 120 KB per run (two CQs, rings and regions).
    assert!(
        grew < 8 * 1024,
        "live heap grew by {grew} bytes over {RUNS} runs ({} per run)",
        grew / RUNS
    );
}
