//! The `Provider` seam: one zero-sized marker type per NIC family.
//!
//! A provider is a bundle of associated consts (queue geometry) and associated functions
//! (device functions), used by static dispatch only — no `self`, no vtables — so
//! `post_write::<Signaled, 1>` on `Mlx5` compiles to the handful of stores an mlx5 WQE is.
//! Device functions are `#[inline(always)]`, allocation-free and panic-free; they are `unsafe`
//! because handles carry raw device addresses. Preconditions are documented and not checked on
//! the hot path ([`Provider::check`] checks them for tools and tests).

use crate::handle::{Cost, CqHandle, Posted, QueueHandle, SqPos, WorkCompletion, WqHandle};
use crate::index::ProdIdx;
use crate::op::{AtomicOp, AtomicWidth, Completion, Payload, Remote, SendFlags, Sge, WorkRequest};
use crate::progress::{CollapsedProgress, OutOfWindow};

/// Why a work request cannot be posted on a queue (found by [`Provider::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// Inline payload longer than the QP's (or the format's) maximum.
    InlineTooLong {
        /// Requested bytes.
        len: usize,
        /// Maximum allowed.
        max: u32,
    },
    /// More gather entries than the QP allows.
    TooManySges {
        /// Requested entries.
        n: usize,
        /// Maximum allowed.
        max: u32,
    },
    /// The WQE is larger than the format or the ring can hold.
    WqeTooLarge {
        /// Units the WQE needs.
        units: u32,
        /// Units available.
        max: u32,
    },
    /// Ring size not a power of two (or zero).
    BadRing,
    /// Atomic width other than 4 or 8, or a width the operation does not support.
    BadAtomicWidth(u32),
    /// The operation is not supported by this provider.
    Unsupported,
    /// The queue handle is inconsistent (a field the provider needs is missing or invalid).
    BadHandle {
        /// What is wrong.
        what: &'static str,
    },
    /// A [`Checked`] request was posted on a queue other than the one it was checked against
    /// (check it with that queue's [`crate::SendQueue::check`]).
    OtherQueue,
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::InlineTooLong { len, max } => {
                write!(
                    f,
                    "inline payload of {len} bytes exceeds the maximum of {max}"
                )
            }
            Self::TooManySges { n, max } => {
                write!(f, "{n} gather entries exceed the maximum of {max}")
            }
            Self::WqeTooLarge { units, max } => {
                write!(f, "WQE needs {units} queue units but at most {max} fit")
            }
            Self::BadRing => f.write_str("ring size must be a non-zero power of two"),
            Self::BadAtomicWidth(w) => write!(f, "atomic width {w} is not supported (use 4 or 8)"),
            Self::Unsupported => f.write_str("operation not supported by this provider"),
            Self::BadHandle { what } => write!(f, "bad queue handle: {what}"),
            Self::OtherQueue => {
                f.write_str("request was checked against a different queue; check it on this one")
            }
        }
    }
}

impl crate::error::Error for PostError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            Self::InlineTooLong { .. } | Self::TooManySges { .. } | Self::WqeTooLarge { .. } => {
                ErrorKind::TooLarge
            }
            Self::BadRing | Self::BadAtomicWidth(_) | Self::BadHandle { .. } | Self::OtherQueue => {
                ErrorKind::InvalidArgument
            }
            Self::Unsupported => ErrorKind::Unsupported,
        }
    }
}

/// A work request that [`Provider::check`] accepted for one queue, with the [`Cost`] it derived.
///
/// Validation happens once, here; [`Provider::post_checked`] and
/// [`crate::SendQueue::post_checked`] reuse the cost instead of classifying the request again,
/// so a caller posting the same request repeatedly pays for the check once. The value borrows
/// the queue handle it was checked against, and a [`crate::SendQueue`] refuses one checked
/// against another queue ([`PostError::OtherQueue`]).
pub struct Checked<'a, P: Provider> {
    sq: &'a P::Sq,
    wr: WorkRequest<'a>,
    cost: Cost,
}

impl<P: Provider> Clone for Checked<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: Provider> Copy for Checked<'_, P> {}

impl<P: Provider> core::fmt::Debug for Checked<'_, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Checked")
            .field("provider", &P::NAME)
            .field("wr", &self.wr)
            .field("cost", &self.cost)
            .finish_non_exhaustive()
    }
}

impl<'a, P: Provider> Checked<'a, P> {
    /// Checks `wr` against the queue `sq` ([`Provider::check`]).
    ///
    /// # Errors
    /// The [`PostError`] `check` returns.
    #[inline]
    pub fn new(sq: &'a P::Sq, wr: &WorkRequest<'a>) -> Result<Self, PostError> {
        let cost = P::check(sq, wr)?;
        Ok(Self { sq, wr: *wr, cost })
    }

    /// A request known to be valid for `sq` without checking it.
    ///
    /// # Safety
    /// [`Provider::check`] must accept `wr` on `sq`, and `cost` must be what it returns (equally,
    /// [`Provider::cost`]): device functions trust both to stay inside the reserved units.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn new_unchecked(sq: &'a P::Sq, wr: WorkRequest<'a>, cost: Cost) -> Self {
        Self { sq, wr, cost }
    }

    /// The queue handle the request was checked against.
    #[inline(always)]
    #[must_use]
    pub const fn queue(&self) -> &'a P::Sq {
        self.sq
    }

    /// The request.
    #[inline(always)]
    #[must_use]
    pub const fn request(&self) -> &WorkRequest<'a> {
        &self.wr
    }

    /// What it consumes of the queue.
    #[inline(always)]
    #[must_use]
    pub const fn cost(&self) -> Cost {
        self.cost
    }
}

/// The checks every provider makes before posting: ring geometry, inline length against
/// `max_inline` (already capped by the format), gather entries against the QP, atomic widths
/// (standard CS/FA are 8 bytes; masked ones 4 or 8). Returns the number of gather entries.
pub fn check_common(
    wq: &WqHandle,
    wr: &WorkRequest<'_>,
    max_inline: u32,
) -> Result<usize, PostError> {
    if wq.ring().is_none() {
        return Err(PostError::BadRing);
    }
    let n = match wr {
        WorkRequest::Write {
            payload: Payload::Inline(d),
            ..
        }
        | WorkRequest::Send {
            payload: Payload::Inline(d),
            ..
        } => {
            if d.len() > max_inline as usize {
                return Err(PostError::InlineTooLong {
                    len: d.len(),
                    max: max_inline,
                });
            }
            0
        }
        WorkRequest::Write {
            payload: Payload::Sges(s),
            ..
        }
        | WorkRequest::Send {
            payload: Payload::Sges(s),
            ..
        }
        | WorkRequest::Read { sges: s, .. } => s.len(),
        WorkRequest::Atomic { op, bytes, .. } => {
            let ok = match op {
                AtomicOp::CompareSwap { .. } | AtomicOp::FetchAdd { .. } => *bytes == 8,
                _ => *bytes == 4 || *bytes == 8,
            };
            if !ok {
                return Err(PostError::BadAtomicWidth(*bytes));
            }
            1
        }
        WorkRequest::Nop => 0,
    };
    if n > wq.max_sge as usize {
        return Err(PostError::TooManySges { n, max: wq.max_sge });
    }
    Ok(n)
}

/// A NIC family's data path.
///
/// The provider owns its types, as wgpu-hal's backends do: its send- and receive-queue handles
/// carry its own fields next to the common [`WqHandle`]; its CQE layout is its own (read by its
/// own `poll_cq`, which returns a [`WorkCompletion`]).
pub trait Provider: Copy + Send + Sync + 'static {
    /// The send queue as device code sees it (mlx5: with the BlueFlame size; bnxt: with the
    /// WQE mode, PSN table, path MTU and first PSN decoded at creation).
    type Sq: QueueHandle;
    /// The receive queue as device code sees it.
    type Rq: QueueHandle;

    /// Short name (`"mlx5"`, `"bnxt"`, `"sim"`).
    const NAME: &'static str;
    /// Bytes in one send-queue unit (mlx5: 64-byte WQEBB).
    const SQ_UNIT_BYTES: u32;
    /// Largest inline payload the format can express in one WQE.
    const MAX_INLINE_BYTES: u32;
    /// Most units one WQE may span.
    const MAX_WQE_UNITS: u32;
    /// Whether the queue has a doorbell record in host memory.
    const HAS_DOORBELL_RECORD: bool;
    /// Width in bits of the WQE counter the hardware reports in completions.
    const WQE_COUNTER_BITS: u32;
    /// Width in bits of the CQ consumer index the hardware tracks.
    const CQ_INDEX_BITS: u32;
    /// Whether the NIC writes an atomic's fetched (old) value to the local buffer big-endian
    /// (ConnectX does by default: `atomic_req_8B_endianness_mode` 0, verbs'
    /// `ATOMIC_HCA_REPLY_BE`) rather than in host order. Readers of fetch results convert.
    const ATOMIC_RESULT_BIG_ENDIAN: bool;
    /// Whether device functions need [`SqPos::msg`] and [`SqPos::psn`] (bnxt RC fills a PSN/MSN
    /// table entry per WQE). When false those fields are ignored and the posting protocol
    /// advances the unit counter alone (one `fetch_add`).
    const TRACKS_PSN: bool = false;

    /// The provider's tag in the device API's handles (`gda::ProviderTag` in
    /// `device/include/gda/any.hpp`): 1 native, 2 mlx5, 3 bnxt; 0 for a provider the device
    /// API does not know (a kernel refuses its queues).
    const DEVICE_TAG: u32 = 0;
    /// PCI vendor ids (`ibv_device_attr::vendor_id`) of the real NICs this provider's format
    /// runs on; empty for a format only the software NIC executes.
    const PCI_VENDOR_IDS: &'static [u32] = &[];

    /// What `wr` consumes of the queue: units to reserve, and packets for PSN accounting.
    fn cost(sq: &Self::Sq, wr: &WorkRequest<'_>) -> Cost;

    /// Checks `wr` against the queue's limits; `Ok` (with its cost) means `post` may be called.
    fn check(sq: &Self::Sq, wr: &WorkRequest<'_>) -> Result<Cost, PostError>;

    /// Width in bits of the completion counter on this queue, for widening it
    /// ([`CollapsedProgress`]). At most [`Provider::WQE_COUNTER_BITS`]; smaller when the device
    /// reports positions modulo the ring (bnxt's consumer index).
    #[inline(always)]
    fn completion_bits(sq: &Self::Sq) -> u32 {
        let _ = sq;
        Self::WQE_COUNTER_BITS
    }

    /// Writes the WQE for a checked request at position `at` on the queue it was checked
    /// against ([`Checked::queue`]) and returns what its doorbell needs. The request's
    /// [`Checked::cost`] is used as is: nothing `check` derived is derived again.
    ///
    /// # Safety
    /// `req.queue().wq().buf` must address a ring of `entries` units that the caller may write
    /// (and the provider's side tables, if its handle names any); the units
    /// `[at.unit, at.unit + req.cost().units)` must be reserved by the caller and free; inline
    /// and gather sources must be readable.
    unsafe fn post_checked(req: &Checked<'_, Self>, at: SqPos, flags: SendFlags) -> Posted;

    /// Writes the WQE for `wr` at position `at` and returns what its doorbell needs (derives the
    /// cost, then [`Provider::post_checked`]).
    ///
    /// # Safety
    /// `sq.wq().buf` must address a ring of `sq.wq().entries` units that the caller may write
    /// (and the provider's side tables, if its handle names any); the units
    /// `[at.unit, at.unit + cost(sq, wr).units)` must be reserved by the caller and free;
    /// [`Provider::check`] must accept `wr`; inline and gather sources must be readable.
    #[inline(always)]
    unsafe fn post(sq: &Self::Sq, at: SqPos, wr: &WorkRequest<'_>, flags: SendFlags) -> Posted {
        // SAFETY: the caller guarantees `check` accepts `wr`, and `cost` is what it returns.
        let req = unsafe { Checked::<Self>::new_unchecked(sq, *wr, Self::cost(sq, wr)) };
        // SAFETY: forwarded from the caller.
        unsafe { Self::post_checked(&req, at, flags) }
    }

    /// RDMA WRITE of `N` gather entries (`N` known at compile time).
    ///
    /// # Safety
    /// As [`Provider::post`].
    #[inline(always)]
    unsafe fn post_write<C: Completion, const N: usize>(
        sq: &Self::Sq,
        at: SqPos,
        remote: Remote,
        sges: &[Sge; N],
    ) -> Posted {
        // SAFETY: forwarded from the caller. The request is a constant of the call site, so
        // `post`'s dispatch on it folds away after inlining.
        unsafe {
            Self::post(
                sq,
                at,
                &WorkRequest::Write {
                    remote,
                    payload: Payload::Sges(sges),
                    imm: None,
                },
                SendFlags::for_completion::<C>(),
            )
        }
    }

    /// RDMA WRITE of `LEN` inline bytes (`LEN` known at compile time).
    ///
    /// # Safety
    /// As [`Provider::post`]; `LEN <= wq.max_inline`.
    #[inline(always)]
    unsafe fn post_write_inline<C: Completion, const LEN: usize>(
        sq: &Self::Sq,
        at: SqPos,
        remote: Remote,
        data: &[u8; LEN],
    ) -> Posted {
        // SAFETY: forwarded from the caller. The request is a constant of the call site, so
        // `post`'s dispatch on it folds away after inlining.
        unsafe {
            Self::post(
                sq,
                at,
                &WorkRequest::Write {
                    remote,
                    payload: Payload::Inline(data),
                    imm: None,
                },
                SendFlags::for_completion::<C>(),
            )
        }
    }

    /// RDMA READ into `N` local gather entries.
    ///
    /// # Safety
    /// As [`Provider::post`].
    #[inline(always)]
    unsafe fn post_read<C: Completion, const N: usize>(
        sq: &Self::Sq,
        at: SqPos,
        remote: Remote,
        sges: &[Sge; N],
    ) -> Posted {
        // SAFETY: forwarded from the caller. The request is a constant of the call site, so
        // `post`'s dispatch on it folds away after inlining.
        unsafe {
            Self::post(
                sq,
                at,
                &WorkRequest::Read { remote, sges },
                SendFlags::for_completion::<C>(),
            )
        }
    }

    /// SEND of `N` gather entries, with an immediate if `imm` is set.
    ///
    /// # Safety
    /// As [`Provider::post`].
    #[inline(always)]
    unsafe fn post_send<C: Completion, const N: usize>(
        sq: &Self::Sq,
        at: SqPos,
        sges: &[Sge; N],
        imm: Option<u32>,
    ) -> Posted {
        // SAFETY: forwarded from the caller. The request is a constant of the call site, so
        // `post`'s dispatch on it folds away after inlining.
        unsafe {
            Self::post(
                sq,
                at,
                &WorkRequest::Send {
                    payload: Payload::Sges(sges),
                    imm,
                },
                SendFlags::for_completion::<C>(),
            )
        }
    }

    /// An atomic of width `W`; the old value is written to `local`.
    ///
    /// # Safety
    /// As [`Provider::post`]; `remote.addr` aligned to `W::BYTES`.
    #[inline(always)]
    unsafe fn post_atomic<C: Completion, W: AtomicWidth>(
        sq: &Self::Sq,
        at: SqPos,
        remote: Remote,
        local: Sge,
        op: AtomicOp,
    ) -> Posted {
        // SAFETY: forwarded from the caller. The request is a constant of the call site, so
        // `post`'s dispatch on it folds away after inlining.
        unsafe {
            Self::post(
                sq,
                at,
                &WorkRequest::Atomic {
                    remote,
                    local,
                    op,
                    bytes: W::BYTES,
                },
                SendFlags::for_completion::<C>(),
            )
        }
    }

    /// A NOP: the smallest WQE, completing in order — a signalled marker (bnxt has no NOP type and
    /// posts a zero-length RDMA WRITE).
    ///
    /// # Safety
    /// As [`Provider::post`].
    #[inline(always)]
    unsafe fn post_nop<C: Completion>(sq: &Self::Sq, at: SqPos) -> Posted {
        // SAFETY: forwarded from the caller. The request is a constant of the call site, so
        // `post`'s dispatch on it folds away after inlining.
        unsafe { Self::post(sq, at, &WorkRequest::Nop, SendFlags::for_completion::<C>()) }
    }

    /// Publishes the WQEs up to `posted.next` and rings the doorbell: release fence, doorbell
    /// record, doorbell register. Callers ring in producer order (one producer at a time per QP).
    ///
    /// # Safety
    /// The handle's doorbell record and register must be valid for the provider's stores.
    unsafe fn ring_sq(sq: &Self::Sq, posted: &Posted);

    /// Writes a receive WQE of `N` entries at receive position `at`.
    ///
    /// # Safety
    /// The receive ring must hold `entries` WQEs of `stride` bytes (see [`WqHandle`]); slot `at`
    /// must be free; `N <= max_sge`.
    unsafe fn post_recv<const N: usize>(rq: &Self::Rq, at: ProdIdx, sges: &[Sge; N]);

    /// Publishes receive WQEs up to `next` (exclusive).
    ///
    /// # Safety
    /// The handle's doorbell record (or register) must be valid.
    unsafe fn ring_rq(rq: &Self::Rq, next: ProdIdx);

    /// Returns the completion at consumer index `ci` if software owns it.
    ///
    /// # Safety
    /// `cq.buf` must address `cq.entries` CQEs of `cq.cqe_bytes` bytes.
    unsafe fn poll_cq(cq: &CqHandle, ci: u32) -> Option<WorkCompletion>;

    /// Tells the device that CQEs below `ci` are consumed.
    ///
    /// # Safety
    /// `cq.dbrec` must be valid.
    unsafe fn update_cq_ci(cq: &CqHandle, ci: u32);

    /// The position a send completion reports, as a unit counter of `wq` that lies inside the
    /// newest WQE it completes (what [`CollapsedProgress::observe`] widens). mlx5 and sim
    /// report the WQE's first unit as is; bnxt reports the consumer index *after* the retired
    /// WQEs, in doorbell units, which this maps back.
    #[inline(always)]
    fn completed_unit(sq: &Self::Sq, wc: &WorkCompletion) -> u32 {
        let _ = sq;
        wc.wqe_counter
    }

    /// Reads a collapsed CQ's slot and folds it into `progress`, window-checked against `rung`
    /// (the producer position covered by rung doorbells) for the send queue `sq` that reports to
    /// it. `Ok(None)` means nothing new yet.
    ///
    /// # Safety
    /// `cq.buf` must address one CQE of `cq.cqe_bytes` bytes.
    unsafe fn poll_collapsed(
        sq: &Self::Sq,
        cq: &CqHandle,
        progress: &mut CollapsedProgress,
        rung: u64,
    ) -> Result<Option<WorkCompletion>, OutOfWindow>;
}
