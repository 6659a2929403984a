//! The SHMEM device API (`gda/shmem.hpp`) compiled for the host: what `gda shmem perf` times
//! next to the Rust API, and the context layout the C++ compiler sees.
//!
//! A context is passed as an address (`gda_shmem::device::DeviceCtx`; this crate does not
//! depend on gda-shmem): the layout test compares [`layout`] with `DeviceCtx::LAYOUT`.

unsafe extern "C" {
    fn gdadev_shmem_put8_rate(
        ctx: *const u8,
        dst: *mut u64,
        pe: i32,
        n: u64,
        secs: *mut f64,
    ) -> i32;
    fn gdadev_shmem_put8_quiet(ctx: *const u8, dst: *mut u64, pe: i32, n: u64, us: *mut f64)
    -> i32;
    fn gdadev_shmem_layout(out: *mut u64);
}

/// `n` 8-byte puts to `dst[i % 1024]` on `pe` through the header, then a quiet: the seconds
/// taken, or the header's `Status` number.
///
/// # Safety
/// `ctx` is a live `DeviceCtx` of this process (`Pe::device_context`), used by one thread;
/// `dst` is a symmetric allocation of at least 1024 `u64`s.
pub unsafe fn put8_rate(ctx: *const u8, dst: *mut u64, pe: u32, n: u64) -> Result<f64, i32> {
    let mut s = 0.0;
    let pe = i32::try_from(pe).map_err(|_| 7)?;
    // SAFETY: forwarded from the caller; `s` is a local.
    match unsafe { gdadev_shmem_put8_rate(ctx, dst, pe, n, &mut s) } {
        0 => Ok(s),
        e => Err(e),
    }
}

/// `n` rounds of an 8-byte put and a quiet through the header: each round trip in µs, or the
/// header's `Status` number.
///
/// # Safety
/// As [`put8_rate`].
pub unsafe fn put8_quiet(ctx: *const u8, dst: *mut u64, pe: u32, n: u64) -> Result<Vec<f64>, i32> {
    let mut us = vec![0.0; usize::try_from(n).map_err(|_| 5)?];
    let pe = i32::try_from(pe).map_err(|_| 7)?;
    // SAFETY: forwarded from the caller; `us` holds `n` values.
    match unsafe { gdadev_shmem_put8_quiet(ctx, dst, pe, n, us.as_mut_ptr()) } {
        0 => Ok(us),
        e => Err(e),
    }
}

/// `sizeof(gda::shmem::Ctx)`, its field offsets in declaration order, `sizeof(Peer)`, then the
/// header's `ABI_VERSION`.
#[must_use]
pub fn layout() -> [u64; 22] {
    let mut v = [0u64; 22];
    // SAFETY: writes exactly 22 values.
    unsafe { gdadev_shmem_layout(v.as_mut_ptr()) };
    v
}
