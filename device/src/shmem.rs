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
    fn gdadev_shmem_check(ctx: *const u8) -> i32;
    fn gdadev_shmem_describe(status: i32) -> *const std::ffi::c_char;
}

/// A status of the header's routines (`gda::shmem::Status`): its number, and what it says
/// (`gda::shmem::describe`) when displayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status(pub i32);

impl Status {
    /// A context of another ABI version.
    pub const BAD_CONTEXT: Self = Self(9);
    /// The context's provider is not compiled in.
    pub const NOT_COMPILED_IN: Self = Self(10);
    /// A context of another size, or with a nonzero reserved field.
    pub const BAD_CONTEXT_SIZE: Self = Self(11);
    /// An unknown provider tag, or RDMA routes without one.
    pub const BAD_PROVIDER: Self = Self(12);
    /// `queue_bytes` is not the provider's queue size, or no queue array.
    pub const BAD_QUEUE_STRIDE: Self = Self(13);
    /// The segment, heap, work area and staging slots do not fit together.
    pub const BAD_WORK_AREA: Self = Self(14);
    /// No PEs, this PE not among them, or no peer array.
    pub const BAD_PEERS: Self = Self(15);
    /// A timeout of 0 or beyond 2^62 ns.
    pub const BAD_TIMEOUT: Self = Self(16);
    /// A queue of another provider than the context's.
    pub const BAD_QUEUE: Self = Self(6);
    /// No such PE, or no route to it.
    pub const BAD_PE: Self = Self(7);
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: the header returns a static NUL-terminated string for any value.
        let s = unsafe { std::ffi::CStr::from_ptr(gdadev_shmem_describe(self.0)) };
        write!(f, "{} (status {})", s.to_string_lossy(), self.0)
    }
}

impl std::error::Error for Status {}

/// `gda::shmem::check` of a context: `Ok`, or what is wrong with it.
///
/// # Safety
/// `ctx` points at `size_of::<DeviceCtx>()` readable bytes.
pub unsafe fn check(ctx: *const u8) -> Result<(), Status> {
    // SAFETY: forwarded from the caller.
    match unsafe { gdadev_shmem_check(ctx) } {
        0 => Ok(()),
        e => Err(Status(e)),
    }
}

/// `n` 8-byte puts to `dst[i % 1024]` on `pe` through the header, then a quiet: the seconds
/// taken, or the header's `Status`.
///
/// # Safety
/// `ctx` is a live `DeviceCtx` of this process (`Pe::device_context`), used by one thread;
/// `dst` is a symmetric allocation of at least 1024 `u64`s.
pub unsafe fn put8_rate(ctx: *const u8, dst: *mut u64, pe: u32, n: u64) -> Result<f64, Status> {
    let mut s = 0.0;
    let pe = i32::try_from(pe).map_err(|_| Status::BAD_PE)?;
    // SAFETY: forwarded from the caller; `s` is a local.
    match unsafe { gdadev_shmem_put8_rate(ctx, dst, pe, n, &mut s) } {
        0 => Ok(s),
        e => Err(Status(e)),
    }
}

/// `n` rounds of an 8-byte put and a quiet through the header: each round trip in µs, or the
/// header's `Status`.
///
/// # Safety
/// As [`put8_rate`].
pub unsafe fn put8_quiet(
    ctx: *const u8,
    dst: *mut u64,
    pe: u32,
    n: u64,
) -> Result<Vec<f64>, Status> {
    let mut us = vec![0.0; usize::try_from(n).map_err(|_| Status(5))?];
    let pe = i32::try_from(pe).map_err(|_| Status::BAD_PE)?;
    // SAFETY: forwarded from the caller; `us` holds `n` values.
    match unsafe { gdadev_shmem_put8_quiet(ctx, dst, pe, n, us.as_mut_ptr()) } {
        0 => Ok(us),
        e => Err(Status(e)),
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
