//! # gda-device — the device API's headers, compiled for the host, called from Rust
//!
//! `device/include/gda` is header-only C++ for GPU kernels (and CPU threads). `build.rs`
//! compiles it for the host (`shim/gda_device_shim.cpp`) behind a C ABI that this crate binds,
//! so Rust code can post through the very code a kernel runs: the differential tests
//! (testing/rdma-ref: against rdma-core and gda's Rust device functions), the posting protocol
//! on the software NIC, and `gda wire encode --impl device`. See `device/README.md`.

use gda_hal::{AtomicOp, Payload, Posted, Remote, Sge, WorkRequest};

pub mod bnxt;
pub mod shmem;

/// `DevWr` of `shim/dev_wr.hpp`: one request for every shim.
#[repr(C)]
pub(crate) struct DevWr {
    kind: u32,
    has_imm: u32,
    imm: u32,
    inline_data: u32,
    remote: Remote,
    sges: *const Sge,
    n_sges: u32,
    inline_ptr: *const u8,
    inline_len: u32,
    atomic_kind: u32,
    atomic_bytes: u32,
    a_compare: u64,
    a_swap: u64,
    a_add: u64,
    a_compare_mask: u64,
    a_swap_mask: u64,
    a_field_boundary: u64,
}

unsafe extern "C" {
    fn gdadev_mlx5_post_ring(
        sq: *const gda_mlx5::Mlx5Sq,
        cur_post: u32,
        wr: *const DevWr,
        flags: u32,
        blueflame: u32,
        out: *mut Posted,
    ) -> u32;
    fn gdadev_layout(out: *mut u64);
    fn gdadev_mlx5_wc_status(syndrome: u8) -> u32;
    fn gdadev_any_write_value(
        s: *const AnySq,
        pos: gda_hal::SqPos,
        remote: Remote,
        value: u64,
        bytes: u32,
        flags: u32,
        out: *mut Posted,
    ) -> i32;
    fn gdadev_native_post_ring(
        wq: *const gda_hal::WqHandle,
        cur_post: u32,
        wr: *const DevWr,
        flags: u32,
        out: *mut Posted,
    );
    fn gdadev_mlx5_write_inline8_ring(
        sq: *const gda_mlx5::Mlx5Sq,
        at: gda_hal::SqPos,
        remote: Remote,
        value: u64,
    ) -> gda_hal::SqPos;
    fn gdadev_mlx5_threads_write(
        q: *const gda_hal::SqDevice<gda_mlx5::Mlx5Sq>,
        threads: u32,
        per: u32,
        quiet_every: u32,
        remote: Remote,
    ) -> i32;
    fn gdadev_native_threads_write(
        q: *const gda_hal::SqDevice<gda_hal::WqHandle>,
        threads: u32,
        per: u32,
        quiet_every: u32,
        remote: Remote,
    ) -> i32;
    fn gdadev_bnxt_threads_write(
        q: *const gda_hal::SqDevice<gda_bnxt::BnxtSq>,
        threads: u32,
        per: u32,
        quiet_every: u32,
        remote: Remote,
    ) -> i32;
    fn gdadev_protocol_layout(out: *mut u64);
}

/// The header's signalled 8-byte inline RDMA WRITE with doorbell record and doorbell at `at`
/// (one `extern "C"` call); the next position.
///
/// # Safety
/// `sq`'s ring, record and register are valid and writable.
#[must_use]
pub unsafe fn write_inline8_ring(
    sq: &gda_mlx5::Mlx5Sq,
    at: gda_hal::SqPos,
    remote: Remote,
    value: u64,
) -> gda_hal::SqPos {
    // SAFETY: forwarded from the caller.
    unsafe { gdadev_mlx5_write_inline8_ring(sq, at, remote, value) }
}

/// A provider whose queues the header's posting protocol (`gda/sq.hpp`) drives from host
/// threads in these bindings.
pub trait ThreadsWrite: gda_hal::Provider {
    /// See [`threads_write`].
    ///
    /// # Safety
    /// As [`threads_write`].
    unsafe fn threads_write(
        q: &gda_hal::SqDevice<Self::Sq>,
        threads: u32,
        per: u32,
        quiet_every: u32,
        remote: Remote,
    ) -> i32;
}

impl ThreadsWrite for gda_mlx5::Mlx5 {
    unsafe fn threads_write(
        q: &gda_hal::SqDevice<gda_mlx5::Mlx5Sq>,
        threads: u32,
        per: u32,
        quiet_every: u32,
        remote: Remote,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        unsafe { gdadev_mlx5_threads_write(q, threads, per, quiet_every, remote) }
    }
}

impl ThreadsWrite for gda_native::Native {
    unsafe fn threads_write(
        q: &gda_hal::SqDevice<gda_hal::WqHandle>,
        threads: u32,
        per: u32,
        quiet_every: u32,
        remote: Remote,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        unsafe { gdadev_native_threads_write(q, threads, per, quiet_every, remote) }
    }
}

impl ThreadsWrite for gda_bnxt::Bnxt {
    unsafe fn threads_write(
        q: &gda_hal::SqDevice<gda_bnxt::BnxtSq>,
        threads: u32,
        per: u32,
        quiet_every: u32,
        remote: Remote,
    ) -> i32 {
        // SAFETY: forwarded from the caller.
        unsafe { gdadev_bnxt_threads_write(q, threads, per, quiet_every, remote) }
    }
}

/// `threads` host threads post `per` 8-byte inline WRITEs each through the header's
/// many-producer protocol on `q` (thread t's i-th value `t << 32 | i` to slot `t * per + i` of
/// `remote`), quieting every `quiet_every` posts (0: only at the end). 0 or the header's
/// `SqStatus`.
///
/// # Safety
/// `q` is a live queue's `SendQueue::device_queue`, posted to and polled by nobody else than
/// its `SendQueue`'s protocol (Rust or header producers), and `remote` holds `threads * per`
/// 8-byte slots.
#[must_use]
pub unsafe fn threads_write<P: ThreadsWrite>(
    q: &gda_hal::SqDevice<P::Sq>,
    threads: u32,
    per: u32,
    quiet_every: u32,
    remote: Remote,
) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe { P::threads_write(q, threads, per, quiet_every, remote) }
}

/// Sizes and offsets of the protocol's structs as the C++ compiler lays them out
/// (`gdadev_protocol_layout`): SqState (11), SqProto (9), mlx5, native and bnxt Queue (2 each).
#[must_use]
pub fn protocol_layout() -> [u64; 26] {
    let mut v = [0u64; 26];
    // SAFETY: writes exactly 26 values.
    unsafe { gdadev_protocol_layout(v.as_mut_ptr()) };
    v
}

/// Sizes and offsets of the ABI structs as the C++ compiler lays them out (the order of
/// `gdadev_layout`), then the ABI version.
#[must_use]
pub fn layout() -> [u64; 27] {
    let mut v = [0u64; 27];
    // SAFETY: writes exactly 27 values.
    unsafe { gdadev_layout(v.as_mut_ptr()) };
    v
}

/// Posts `wr` at `cur_post` on `sq` with the header's functions and rings (BlueFlame when
/// `blueflame`): the Posted and the next BlueFlame offset.
///
/// # Safety
/// `sq`'s ring, doorbell record and register are valid, writable and large enough for the
/// request (which `Mlx5::check` accepted).
#[must_use]
pub unsafe fn post_ring(
    sq: &gda_mlx5::Mlx5Sq,
    cur_post: u32,
    wr: &WorkRequest<'_>,
    flags: u32,
    blueflame: bool,
) -> (Posted, u32) {
    let mut local = Sge::default();
    let d = dev_wr(wr, &mut local);
    let mut out = Posted::default();
    // SAFETY: `d` points at memory alive for the call; the queue is valid (caller).
    let next =
        unsafe { gdadev_mlx5_post_ring(sq, cur_post, &d, flags, u32::from(blueflame), &mut out) };
    (out, next)
}

/// The request as `DevWr`; an atomic's local entry is kept in `local` (which `sges` points at).
pub(crate) fn dev_wr(wr: &WorkRequest<'_>, local: &mut Sge) -> DevWr {
    let mut d = DevWr {
        kind: 0,
        has_imm: 0,
        imm: 0,
        inline_data: 0,
        remote: Remote::default(),
        sges: core::ptr::null(),
        n_sges: 0,
        inline_ptr: core::ptr::null(),
        inline_len: 0,
        atomic_kind: 0,
        atomic_bytes: 8,
        a_compare: 0,
        a_swap: 0,
        a_add: 0,
        a_compare_mask: 0,
        a_swap_mask: 0,
        a_field_boundary: 0,
    };
    let payload = |d: &mut DevWr, p: &Payload<'_>| match p {
        Payload::Inline(b) => {
            d.inline_data = 1;
            d.inline_ptr = b.as_ptr();
            d.inline_len = b.len() as u32;
        }
        Payload::Sges(s) => {
            d.sges = s.as_ptr();
            d.n_sges = s.len() as u32;
        }
    };
    match wr {
        WorkRequest::Write {
            remote,
            payload: p,
            imm,
        } => {
            d.remote = *remote;
            payload(&mut d, p);
            (d.has_imm, d.imm) = (u32::from(imm.is_some()), imm.unwrap_or(0));
        }
        WorkRequest::Send { payload: p, imm } => {
            d.kind = 1;
            payload(&mut d, p);
            (d.has_imm, d.imm) = (u32::from(imm.is_some()), imm.unwrap_or(0));
        }
        WorkRequest::Read { remote, sges } => {
            d.kind = 2;
            d.remote = *remote;
            d.sges = sges.as_ptr();
            d.n_sges = sges.len() as u32;
        }
        WorkRequest::Atomic {
            remote,
            local: l,
            op,
            bytes,
        } => {
            d.kind = 3;
            d.remote = *remote;
            *local = *l;
            d.sges = &raw const *local;
            d.n_sges = 1;
            d.atomic_bytes = *bytes;
            match *op {
                AtomicOp::CompareSwap { compare, swap } => {
                    (d.atomic_kind, d.a_compare, d.a_swap) = (0, compare, swap);
                }
                AtomicOp::FetchAdd { add } => (d.atomic_kind, d.a_add) = (1, add),
                AtomicOp::MaskedCompareSwap {
                    compare,
                    compare_mask,
                    swap,
                    swap_mask,
                } => {
                    (d.atomic_kind, d.a_compare, d.a_compare_mask) = (2, compare, compare_mask);
                    (d.a_swap, d.a_swap_mask) = (swap, swap_mask);
                }
                AtomicOp::MaskedFetchAdd {
                    add,
                    field_boundary,
                } => (d.atomic_kind, d.a_add, d.a_field_boundary) = (3, add, field_boundary),
            }
        }
        WorkRequest::Nop => d.kind = 4,
    }
    d
}

/// Posts `wr` (any kind, NOP included) at `cur_post` on the native-format queue `wq` with the
/// header's `gda/native.hpp` and rings its doorbell; the Posted.
///
/// # Safety
/// `wq`'s ring and doorbell word are valid and writable, the request accepted by
/// `Native::check`.
#[must_use]
pub unsafe fn native_post_ring(
    wq: &gda_hal::WqHandle,
    cur_post: u32,
    wr: &WorkRequest<'_>,
    flags: u32,
) -> Posted {
    let mut local = Sge::default();
    let d = dev_wr(wr, &mut local);
    let mut out = Posted::default();
    // SAFETY: `d` and `local` live across the call; the queue is valid (caller).
    unsafe { gdadev_native_post_ring(wq, cur_post, &d, flags, &mut out) };
    out
}

/// `gda::AnySq` of `device/include/gda/any.hpp`: a provider tag, the ABI version and the
/// provider's queue handle (`WqHandle` for native, `Mlx5Sq` for mlx5, `BnxtSq` for bnxt),
/// padded to 72 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AnySq {
    /// 1 native, 2 mlx5, 3 bnxt.
    pub tag: u32,
    /// `gda::ABI_VERSION` (1).
    pub abi: u32,
    /// The handle's bytes.
    pub q: [u64; 9],
}

const _: () = assert!(size_of::<AnySq>() == 80);

impl AnySq {
    /// A tagged queue holding `handle` (at most 72 bytes, `#[repr(C)]`).
    #[must_use]
    pub fn new<H: Copy>(tag: u32, abi: u32, handle: &H) -> Self {
        const { assert!(size_of::<H>() <= 72) };
        let mut q = [0u64; 9];
        // SAFETY: `H` is a plain `#[repr(C)]` handle of at most 72 bytes (asserted), copied as
        // bytes into `q`.
        unsafe {
            core::ptr::copy_nonoverlapping(
                core::ptr::from_ref(handle).cast::<u8>(),
                q.as_mut_ptr().cast::<u8>(),
                size_of::<H>(),
            );
        }
        Self { tag, abi, q }
    }
}

/// A register value written and rung through the header's provider dispatch: the header's
/// `PostStatus` (0 posted, 1 provider not compiled in, 2 bad handle) and the Posted.
///
/// # Safety
/// The handle's queue memory is valid and writable.
#[must_use]
pub unsafe fn any_write_value(
    s: &AnySq,
    cur: u32,
    remote: Remote,
    value: u64,
    flags: u32,
) -> (i32, Posted) {
    // SAFETY: forwarded from the caller.
    unsafe { any_write_value_at(s, gda_hal::SqPos::at_unit(cur), remote, value, 8, flags) }
}

/// As [`any_write_value`] at a whole position (bnxt's message number and PSN too), of an
/// 8-byte value or, when `bytes` is 4, its low 4 bytes.
///
/// # Safety
/// As [`any_write_value`].
#[must_use]
pub unsafe fn any_write_value_at(
    s: &AnySq,
    pos: gda_hal::SqPos,
    remote: Remote,
    value: u64,
    bytes: u32,
    flags: u32,
) -> (i32, Posted) {
    let mut out = Posted::default();
    // SAFETY: forwarded from the caller.
    let r = unsafe { gdadev_any_write_value(s, pos, remote, value, bytes, flags, &mut out) };
    (r, out)
}

/// The `gda_hal::WcStatus` number the header gives an mlx5 error CQE's syndrome.
#[must_use]
pub fn mlx5_wc_status(syndrome: u8) -> u32 {
    // SAFETY: a pure function of its argument.
    unsafe { gdadev_mlx5_wc_status(syndrome) }
}
