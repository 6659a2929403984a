//! Symmetric-memory copy (`gda_hal::sym::sym_copy`, what every P2P put and get and the C ABI's
//! load/store path run) against the C library's `memcpy`, from 8 B to 1 MiB.
//!
//! The destination is a `MAP_SHARED` mapping, as a peer's symmetric heap is; the source is an
//! ordinary heap buffer, as a program's local buffer is. Each size copies the same bytes again
//! and again, so the data is as cache-resident as it is in a put-rate loop.
//!
//! Run: `cargo bench --bench sym_copy` (add `-- --quick` for a short run). Throughput is
//! reported in bytes, so criterion prints GiB/s next to each time.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gda::hal::sym::sym_copy;

const MAX: usize = 1 << 20;

fn copies(c: &mut Criterion) {
    let job = format!("bench{}", std::process::id());
    let map = gda_os::shm::Segment::create(&job, "copy", MAX).expect("a 1 MiB shared mapping");
    // The mapping stays; only the name goes.
    map.unlink().expect("unlink the bench segment");
    let dst = map.as_ptr();
    let src: Vec<u8> = (0..MAX).map(|i| i as u8).collect();
    let mut g = c.benchmark_group("sym_copy");
    let mut len = 8;
    while len <= MAX {
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("gda", len), &len, |b, &len| {
            // SAFETY: `dst` maps MAX bytes, `src` holds MAX bytes, `len <= MAX`; distinct.
            b.iter(|| unsafe { sym_copy(black_box(dst), black_box(src.as_ptr()), len) })
        });
        g.bench_with_input(BenchmarkId::new("memcpy", len), &len, |b, &len| {
            // SAFETY: as above.
            b.iter(|| unsafe {
                std::ptr::copy_nonoverlapping(black_box(src.as_ptr()), black_box(dst), len)
            })
        });
        len *= 4;
    }
    g.finish();
}

criterion_group!(benches, copies);
criterion_main!(benches);
