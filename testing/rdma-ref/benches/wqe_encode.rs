//! WQE encoding cost: gda's mlx5 device functions next to rdma-core's own `mlx5_post_send` for
//! the same work request, measured in the same run. Both write the WQE into a 256-WQEBB ring in
//! ordinary memory, update the doorbell record and store the 8-byte doorbell to a stand-in
//! register; rdma-core also parses the `ibv_send_wr`, takes its locks and keeps its wrid tables.
//!
//! Run: `cargo bench -p gda-rdma-ref --bench wqe_encode`

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use gda_hal::{AtomicOp, Provider, Remote, Sge, Signaled, SqPos, W64, WqHandle};
use gda_mlx5::Mlx5;
use gda_rdma_ref::case::{self, IBV_SEND_INLINE, ibv_wr};
use gda_rdma_ref::{RefQpCfg, RefSge, RefWr, mlx5_post_loop};

const RING: u32 = 256;

fn bench(c: &mut Criterion) {
    let mut ring = case::ring(RING);
    let mut dbrec = [0u32; 2];
    let mut db = [0u64; 64];
    let wq = gda_mlx5::Mlx5Sq {
        wq: WqHandle {
            buf: ring.as_mut_ptr() as u64,
            dbrec: dbrec.as_mut_ptr() as u64,
            db: db.as_mut_ptr() as u64,
            entries: RING,
            stride: 0,
            qpn: 0x1234,
            max_inline: 256,
            max_sge: 4,
        },
        bf_size: 0,
    };
    let remote = Remote {
        addr: 0x7f00_0000_1000,
        rkey: 0xabcd,
    };
    let sge = [Sge {
        addr: 0x7f00_0000_2000,
        length: 8,
        lkey: 0x5678,
    }];
    let payload = [0x5au8; 64];
    let cfg = RefQpCfg {
        qp_num: 0x1234,
        sq_wqe_cnt: RING,
        cur_post: 0,
        max_inline: 256,
        max_sge: 4,
        bf_size: 0,
        sig_all: 0,
    };
    let mut g = c.benchmark_group("wqe_encode");

    let mut at = SqPos::ZERO;
    g.bench_function("gda/write_8B", |b| {
        b.iter(|| {
            // SAFETY: the ring, record and register are owned by this benchmark.
            unsafe {
                let p =
                    Mlx5::post_write::<Signaled, 1>(&wq, at, black_box(remote), black_box(&sge));
                Mlx5::ring_sq(&wq, &p);
                at = p.next;
            }
        })
    });
    // The device API's header (C++, compiled for the host, reached through one extern "C"
    // call) next to the Rust device function (inlined here), on the same ring.
    g.bench_function("gda/write_inline_8B", |b| {
        b.iter(|| {
            // SAFETY: as above.
            unsafe {
                let p = Mlx5::post_write_inline::<Signaled, 8>(
                    &wq,
                    at,
                    black_box(remote),
                    black_box(&[0x5au8; 8]),
                );
                Mlx5::ring_sq(&wq, &p);
                at = p.next;
            }
        })
    });
    g.bench_function("device-header/write_inline_8B", |b| {
        b.iter(|| {
            // SAFETY: as above.
            at = unsafe {
                gda_rdma_ref::device::write_inline8_ring(&wq, at, black_box(remote), 0x5a5a)
            };
        })
    });
    g.bench_function("gda/write_inline_64B", |b| {
        b.iter(|| {
            // SAFETY: as above.
            unsafe {
                let p = Mlx5::post_write_inline::<Signaled, 64>(
                    &wq,
                    at,
                    black_box(remote),
                    black_box(&payload),
                );
                Mlx5::ring_sq(&wq, &p);
                at = p.next;
            }
        })
    });
    g.bench_function("gda/atomic_fadd", |b| {
        b.iter(|| {
            // SAFETY: as above.
            unsafe {
                let p = Mlx5::post_atomic::<Signaled, W64>(
                    &wq,
                    at,
                    black_box(remote),
                    sge[0],
                    AtomicOp::FetchAdd { add: 1 },
                );
                Mlx5::ring_sq(&wq, &p);
                at = p.next;
            }
        })
    });

    let mut ref_ring = case::ring(RING);
    let mut rdma_core =
        |name: &str,
         wr: RefWr,
         g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>| {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    let t = Instant::now();
                    let ok = mlx5_post_loop(&cfg, &wr, case::bytes_mut(&mut ref_ring), iters);
                    let e = t.elapsed();
                    assert_eq!(ok, iters, "rdma-core refused a post");
                    e
                })
            });
        };
    let mut wr = RefWr {
        opcode: ibv_wr::RDMA_WRITE,
        send_flags: 2,
        rkey: remote.rkey,
        remote_addr: remote.addr,
        num_sge: 1,
        ..Default::default()
    };
    wr.sg_list[0] = RefSge {
        addr: sge[0].addr,
        length: 8,
        lkey: sge[0].lkey,
    };
    rdma_core("rdma-core/write_8B", wr, &mut g);
    let mut inl = wr;
    inl.send_flags = 2 | IBV_SEND_INLINE;
    inl.sg_list[0] = RefSge {
        addr: payload.as_ptr() as u64,
        length: 64,
        lkey: 0,
    };
    rdma_core("rdma-core/write_inline_64B", inl, &mut g);
    let mut fa = wr;
    fa.opcode = ibv_wr::ATOMIC_FETCH_AND_ADD;
    fa.compare_add = 1;
    rdma_core("rdma-core/atomic_fadd", fa, &mut g);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
