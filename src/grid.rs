//! Kernels on CPU threads: run a closure as a grid of threads with ids, the way a GPU launches a
//! kernel, so tests and examples read like GDA kernels.
//!
//! A host-side runtime helper, so it lives in the facade: it is no concern of a NIC (it was in
//! the software NIC's crate) and needs `std` threads, which the `no_std` core (`gda-hal`) must
//! not grow. Device code is written against `gda::hal` either way; only its launch differs.
//!
//! ```
//! let ids = gda::grid::launch(4, |t| t.id * 10 + t.grid);
//! assert_eq!(ids, [4, 14, 24, 34]);
//! ```

/// A thread's position in the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadIdx {
    /// This thread's id, `0..grid`.
    pub id: usize,
    /// Number of threads in the grid.
    pub grid: usize,
}

/// Runs `kernel` on `grid` threads and waits for all of them (`std::thread::scope`). Returns
/// each thread's result in id order; a panicking thread's panic is resumed here after the
/// others finished.
pub fn launch<R: Send, F: Fn(ThreadIdx) -> R + Sync>(grid: usize, kernel: F) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..grid)
            .map(|id| {
                let k = &kernel;
                std::thread::Builder::new()
                    .name(format!("gda-kernel-{id}"))
                    .spawn_scoped(s, move || k(ThreadIdx { id, grid }))
                    .expect("spawn a kernel thread")
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
