//! Per-post cost of the posting protocol's three entry points for the same request, on each
//! provider: `SendQueue::post(&WorkRequest)` (checks and classifies every time),
//! `SendQueue::post_checked` (checked once, outside the loop) and the typed fast path
//! (`post_write_inline::<8>`, `post_write::<1>`, `post_atomic::<W64>`).
//!
//! Each queue lies over ordinary memory with a stand-in doorbell, so what is timed is the ring
//! protocol (reserve, signal decision, room check, ticket, doorbell stores) plus the WQE stores
//! — no device. Batches stay inside the ring's window (no completion is ever waited for); a
//! fresh queue is built, untimed, for every batch.
//!
//! Run: `cargo bench --bench sq_post` (add `-- --quick` for a short run).

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use gda::hal::{
    AtomicOp, CqHandle, Payload, Provider, Remote, SendFlags, SendQueue, Sge, W64, WorkRequest,
    WqHandle,
};
use gda_bnxt::Bnxt;
use gda_bnxt::mode::Mode;
use gda_mlx5::{Mlx5, Mlx5Sq};
use gda_native::Native;

const ENTRIES: u32 = 4096;
/// Posts per queue: below every provider's window for one-unit WQEs.
const BATCH: u64 = 2048;

/// Queue memory: ring, doorbell record and register, side table (bnxt PSN table), CQ.
struct Mem {
    ring: Vec<u128>,
    words: Vec<u128>,
    side: Vec<u128>,
    cq: Vec<u128>,
}

impl Mem {
    fn new() -> Self {
        Self {
            ring: vec![0; ENTRIES as usize * 128 / 16],
            words: vec![0; 64],
            side: vec![0; ENTRIES as usize],
            cq: vec![0; ENTRIES as usize * 4],
        }
    }
    fn wq(&mut self) -> WqHandle {
        WqHandle {
            buf: self.ring.as_mut_ptr() as u64,
            dbrec: self.words.as_mut_ptr() as u64,
            db: self.words.as_mut_ptr() as u64 + 256,
            entries: ENTRIES,
            stride: 0,
            qpn: 0x1234,
            max_inline: 64,
            max_sge: 4,
        }
    }
    fn cq(&mut self) -> CqHandle {
        CqHandle {
            buf: self.cq.as_mut_ptr() as u64,
            entries: ENTRIES,
            cqe_bytes: 64,
            ..CqHandle::default()
        }
    }
}

trait Bench: Provider {
    fn sq(m: &mut Mem) -> Self::Sq;
}
impl Bench for Mlx5 {
    fn sq(m: &mut Mem) -> Mlx5Sq {
        Mlx5Sq {
            wq: m.wq(),
            bf_size: 0,
        }
    }
}
impl Bench for Native {
    fn sq(m: &mut Mem) -> WqHandle {
        m.wq()
    }
}
impl Bench for Bnxt {
    fn sq(m: &mut Mem) -> gda_bnxt::BnxtSq {
        let mode = Mode::default();
        let table = m.side.as_mut_ptr() as u64;
        gda_bnxt::BnxtSq::new(m.wq(), mode, table, mode.psn_entries(ENTRIES), 4096, 0).unwrap()
    }
}

/// Runs `batch(queue, n)` (which times its own `n` posts) over fresh queues of `BATCH` posts.
fn timed<P: Bench>(iters: u64, mut batch: impl FnMut(&SendQueue<P>, u64) -> Duration) -> Duration {
    let mut m = Mem::new();
    let (mut total, mut left) = (Duration::ZERO, iters);
    while left > 0 {
        let n = left.min(BATCH);
        let (h, cq) = (P::sq(&mut m), m.cq());
        // SAFETY: the memory outlives the queue; nothing else posts or polls; the batch never
        // fills the window, so the (empty) CQ is never read.
        let sq = unsafe { SendQueue::<P>::new(h, cq, 10_000) }.unwrap();
        total += batch(&sq, n);
        left -= n;
    }
    total
}

/// Times `n` calls of `post`.
fn each<R>(n: u64, mut post: impl FnMut() -> R) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        black_box(post());
    }
    t.elapsed()
}

const REMOTE: Remote = Remote {
    addr: 0x7f00_0000_1000,
    rkey: 0xabcd,
};
const SGE: [Sge; 1] = [Sge {
    addr: 0x7f00_0000_2000,
    length: 8,
    lkey: 0x5678,
}];
const FA: AtomicOp = AtomicOp::FetchAdd { add: 1 };

fn provider<P: Bench>(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("sq_post/{}", P::NAME));
    let data = [0x5au8; 8];
    let inline = WorkRequest::Write {
        remote: REMOTE,
        payload: Payload::Inline(&data),
        imm: None,
    };
    let gather = WorkRequest::Write {
        remote: REMOTE,
        payload: Payload::Sges(&SGE),
        imm: None,
    };
    let local = SGE[0];
    let atomic = WorkRequest::Atomic {
        remote: REMOTE,
        local,
        op: FA,
        bytes: 8,
    };
    let f = SendFlags::empty();
    for (name, wr) in [
        ("write_inline_8B", inline),
        ("write_1sge", gather),
        ("fetch_add_8B", atomic),
    ] {
        g.bench_function(format!("{name}/post"), |b| {
            b.iter_custom(|n| {
                timed::<P>(n, |sq, n| {
                    each(n, || black_box(sq.post(black_box(&wr), f)).unwrap())
                })
            })
        });
        g.bench_function(format!("{name}/post_checked"), |b| {
            b.iter_custom(|n| {
                timed::<P>(n, |sq, n| {
                    // Checked once, outside the timed loop.
                    let req = sq.check(&wr).unwrap();
                    each(n, || {
                        black_box(sq.post_checked(black_box(&req), f)).unwrap()
                    })
                })
            })
        });
    }
    g.bench_function("write_inline_8B/typed", |b| {
        b.iter_custom(|n| {
            timed::<P>(n, |sq, n| {
                each(n, || {
                    black_box(sq.post_write_inline::<8>(black_box(REMOTE), black_box(&data), f))
                        .unwrap();
                })
            })
        })
    });
    g.bench_function("write_1sge/typed", |b| {
        b.iter_custom(|n| {
            timed::<P>(n, |sq, n| {
                each(n, || {
                    black_box(sq.post_write::<1>(black_box(REMOTE), black_box(&SGE), f)).unwrap();
                })
            })
        })
    });
    g.bench_function("fetch_add_8B/typed", |b| {
        b.iter_custom(|n| {
            timed::<P>(n, |sq, n| {
                each(n, || {
                    black_box(sq.post_atomic::<W64>(black_box(REMOTE), black_box(local), FA, f))
                        .unwrap();
                })
            })
        })
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    provider::<Mlx5>(c);
    provider::<Bnxt>(c);
    provider::<Native>(c);
}

criterion_group!(benches, bench);
criterion_main!(benches);
