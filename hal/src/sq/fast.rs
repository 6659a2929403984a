//! The typed fast path: posting operations whose shape is known at compile time through the
//! provider's const-generic device functions ([`Provider::post_write_inline`] and friends).
//!
//! What the shape decides is settled before the post: limits no queue of the provider can meet
//! are `const` assertions (a compile error, not a runtime failure), and what depends on the
//! queue — its `max_inline`, `max_sge`, the units a WQE may span — is probed once, when the
//! [`SendQueue`] is built, by running [`Provider::check`] on every shape the typed methods can
//! post ([`Limits`]). A typed post then compares its const parameter with one cached bound and
//! runs the same ring protocol as [`SendQueue::post`] (`post_with`): the per-post cost is the
//! ring protocol and the WQE stores, nothing else.

use super::SendQueue;
use crate::handle::{Cost, Posted, SqPos};
use crate::op::{
    AtomicOp, AtomicWidth, Completion, Payload, Remote, SendFlags, Sge, Signaled, Unsignaled,
    WorkRequest,
};
use crate::provider::{Checked, PostError, Provider};
use crate::sq::SqError;

/// Inline payloads the probe can express: typed inline posts above this are refused (the
/// generic [`SendQueue::post`] still takes them). Every provider's format maximum is below it.
pub const FAST_MAX_INLINE_BYTES: usize = 1024;
/// Gather entries the probe can express: typed posts with more are refused.
pub const FAST_MAX_SGES: usize = 32;

static ZEROS: [u8; FAST_MAX_INLINE_BYTES] = [0; FAST_MAX_INLINE_BYTES];
static SGES: [Sge; FAST_MAX_SGES] = [Sge {
    addr: 0,
    length: 1,
    lkey: 0,
}; FAST_MAX_SGES];

/// What a queue accepts of each typed operation, probed once at construction with
/// [`Provider::check`] and the queue's largest WQE. Bounds are exclusive: a typed write of
/// `LEN` inline bytes is accepted iff `LEN < write_inline`, and `check` accepted every smaller
/// one too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    write_inline: u32,
    write_sges: u32,
    read_sges: u32,
    send_sges: u32,
    /// Bit `2 * kind + (width == 8)` set when that atomic is accepted (kinds in [`kind`] order).
    atomics: u8,
}

/// The atomic's row in [`Limits::atomics`].
const fn kind(op: &AtomicOp) -> u32 {
    match op {
        AtomicOp::CompareSwap { .. } => 0,
        AtomicOp::FetchAdd { .. } => 1,
        AtomicOp::MaskedCompareSwap { .. } => 2,
        AtomicOp::MaskedFetchAdd { .. } => 3,
    }
}

const fn atomic_bit(op: &AtomicOp, bytes: u32) -> u8 {
    1 << (2 * kind(op) + (bytes == 8) as u32)
}

impl Limits {
    /// Probes `sq` (whose WQEs may span at most `max_units`).
    pub(crate) fn probe<P: Provider>(sq: &P::Sq, max_units: u32) -> Self {
        let ok = |wr: &WorkRequest<'_>| P::check(sq, wr).is_ok_and(|c| c.units <= max_units);
        let remote = Remote { addr: 0, rkey: 0 };
        // The first size refused bounds the accepted ones (every limit grows with the size).
        let below = |max: usize, fits: &dyn Fn(usize) -> bool| {
            (0..=max).find(|&n| !fits(n)).unwrap_or(max + 1) as u32
        };
        let inline_max = FAST_MAX_INLINE_BYTES.min(P::MAX_INLINE_BYTES as usize);
        let sges = |n: usize| SGES.get(..n).unwrap_or(&[]);
        let write_inline = below(inline_max, &|n| {
            ok(&WorkRequest::Write {
                remote,
                payload: Payload::Inline(ZEROS.get(..n).unwrap_or(&[])),
                imm: None,
            })
        });
        let write_sges = below(FAST_MAX_SGES, &|n| {
            ok(&WorkRequest::Write {
                remote,
                payload: Payload::Sges(sges(n)),
                imm: None,
            })
        });
        let read_sges = below(FAST_MAX_SGES, &|n| {
            ok(&WorkRequest::Read {
                remote,
                sges: sges(n),
            })
        });
        let send_sges = below(FAST_MAX_SGES, &|n| {
            ok(&WorkRequest::Send {
                payload: Payload::Sges(sges(n)),
                imm: Some(0),
            })
        });
        let mut atomics = 0;
        let ops = [
            AtomicOp::CompareSwap {
                compare: 0,
                swap: 0,
            },
            AtomicOp::FetchAdd { add: 0 },
            AtomicOp::MaskedCompareSwap {
                compare: 0,
                compare_mask: 0,
                swap: 0,
                swap_mask: 0,
            },
            AtomicOp::MaskedFetchAdd {
                add: 0,
                field_boundary: 0,
            },
        ];
        for op in ops {
            for bytes in [4, 8] {
                let wr = WorkRequest::Atomic {
                    remote,
                    local: Sge::default(),
                    op,
                    bytes,
                };
                if ok(&wr) {
                    atomics |= atomic_bit(&op, bytes);
                }
            }
        }
        Self {
            write_inline,
            write_sges,
            read_sges,
            send_sges,
            atomics,
        }
    }
}

/// `Err` unless `n < below`; `err(max)` names the largest accepted size.
#[inline(always)]
fn admit(n: usize, below: u32, err: impl FnOnce(u32) -> PostError) -> Result<(), SqError> {
    if n < below as usize {
        Ok(())
    } else {
        Err(SqError::Post(err(below.saturating_sub(1))))
    }
}

/// One typed operation: its runtime form (for the cost and for flags the device functions do
/// not take) and its const-generic device function.
trait FastOp<P: Provider> {
    /// The same operation as a [`WorkRequest`].
    fn request(&self) -> WorkRequest<'_>;

    /// Writes the WQE with the provider's const-generic device function.
    ///
    /// # Safety
    /// As [`Provider::post`] for [`FastOp::request`].
    unsafe fn write<C: Completion>(&self, sq: &P::Sq, at: SqPos) -> Posted;
}

struct WriteInline<'a, const LEN: usize>(Remote, &'a [u8; LEN]);
struct WriteSges<'a, const N: usize>(Remote, &'a [Sge; N]);
struct ReadSges<'a, const N: usize>(Remote, &'a [Sge; N]);
struct SendSges<'a, const N: usize>(&'a [Sge; N], Option<u32>);
struct Atomic<W: AtomicWidth>(Remote, Sge, AtomicOp, core::marker::PhantomData<W>);

impl<P: Provider, const LEN: usize> FastOp<P> for WriteInline<'_, LEN> {
    #[inline(always)]
    fn request(&self) -> WorkRequest<'_> {
        WorkRequest::Write {
            remote: self.0,
            payload: Payload::Inline(self.1),
            imm: None,
        }
    }
    #[inline(always)]
    unsafe fn write<C: Completion>(&self, sq: &P::Sq, at: SqPos) -> Posted {
        // SAFETY: forwarded from the caller.
        unsafe { P::post_write_inline::<C, LEN>(sq, at, self.0, self.1) }
    }
}

impl<P: Provider, const N: usize> FastOp<P> for WriteSges<'_, N> {
    #[inline(always)]
    fn request(&self) -> WorkRequest<'_> {
        WorkRequest::Write {
            remote: self.0,
            payload: Payload::Sges(self.1),
            imm: None,
        }
    }
    #[inline(always)]
    unsafe fn write<C: Completion>(&self, sq: &P::Sq, at: SqPos) -> Posted {
        // SAFETY: forwarded from the caller.
        unsafe { P::post_write::<C, N>(sq, at, self.0, self.1) }
    }
}

impl<P: Provider, const N: usize> FastOp<P> for ReadSges<'_, N> {
    #[inline(always)]
    fn request(&self) -> WorkRequest<'_> {
        WorkRequest::Read {
            remote: self.0,
            sges: self.1,
        }
    }
    #[inline(always)]
    unsafe fn write<C: Completion>(&self, sq: &P::Sq, at: SqPos) -> Posted {
        // SAFETY: forwarded from the caller.
        unsafe { P::post_read::<C, N>(sq, at, self.0, self.1) }
    }
}

impl<P: Provider, const N: usize> FastOp<P> for SendSges<'_, N> {
    #[inline(always)]
    fn request(&self) -> WorkRequest<'_> {
        WorkRequest::Send {
            payload: Payload::Sges(self.0),
            imm: self.1,
        }
    }
    #[inline(always)]
    unsafe fn write<C: Completion>(&self, sq: &P::Sq, at: SqPos) -> Posted {
        // SAFETY: forwarded from the caller.
        unsafe { P::post_send::<C, N>(sq, at, self.0, self.1) }
    }
}

impl<P: Provider, W: AtomicWidth> FastOp<P> for Atomic<W> {
    #[inline(always)]
    fn request(&self) -> WorkRequest<'_> {
        WorkRequest::Atomic {
            remote: self.0,
            local: self.1,
            op: self.2,
            bytes: W::BYTES,
        }
    }
    #[inline(always)]
    unsafe fn write<C: Completion>(&self, sq: &P::Sq, at: SqPos) -> Posted {
        // SAFETY: forwarded from the caller.
        unsafe { P::post_atomic::<C, W>(sq, at, self.0, self.1, self.2) }
    }
}

/// Flags the const-generic device functions express (`SIGNALED` as their [`Completion`]
/// parameter; `INLINE` is implied by the operation). Others take the generic encoder.
const TYPED_FLAGS: SendFlags = SendFlags::SIGNALED.union(SendFlags::INLINE);

impl<P: Provider> SendQueue<P> {
    /// Posts a typed operation the caller has admitted against [`Limits`]: the cost (which
    /// folds to a constant for fixed-size formats), then the shared ring protocol, writing the
    /// WQE with the signalled or unsignalled instance of its device function.
    #[inline(always)]
    fn post_fast<O: FastOp<P>>(&self, op: &O, flags: SendFlags) -> Result<u64, SqError> {
        let wr = op.request();
        let cost: Cost = P::cost(&self.sq, &wr);
        self.post_with(cost, flags, |pos, flags| {
            // SAFETY: (all three arms) the shape was admitted against `Limits`, so `check`
            // accepts `wr` on this queue and its WQE fits the window; `cost` is `P::cost` of
            // it; `post_with` reserved `cost.units` at `pos` and waited until they were free;
            // the handle is live (constructor contract).
            unsafe {
                if !TYPED_FLAGS.contains(flags) {
                    // FENCE/SOLICITED: the generic encoder writes the same WQE with them.
                    P::post_checked(&Checked::new_unchecked(&self.sq, wr, cost), pos, flags)
                } else if flags.contains(SendFlags::SIGNALED) {
                    op.write::<Signaled>(&self.sq, pos)
                } else {
                    op.write::<Unsignaled>(&self.sq, pos)
                }
            }
        })
    }

    /// RDMA WRITE of `LEN` inline bytes, with the provider's
    /// [`post_write_inline`](Provider::post_write_inline). Writes the same WQE as
    /// [`SendQueue::post`] of the equivalent [`WorkRequest`], through the same ring protocol,
    /// without classifying or checking a request: `LEN` above the provider's format maximum
    /// does not compile, and the queue's own bound was found when it was built.
    ///
    /// # Errors
    /// [`PostError::InlineTooLong`] (with the largest `LEN` this queue accepts) if `LEN` is
    /// above the queue's `max_inline` or its WQE would exceed the queue's largest; otherwise
    /// as [`SendQueue::post`].
    #[inline]
    pub fn post_write_inline<const LEN: usize>(
        &self,
        remote: Remote,
        data: &[u8; LEN],
        flags: SendFlags,
    ) -> Result<u64, SqError> {
        const {
            assert!(
                LEN <= P::MAX_INLINE_BYTES as usize && LEN <= FAST_MAX_INLINE_BYTES,
                "inline payload longer than the provider's format allows"
            );
        }
        admit(LEN, self.fast.write_inline, |max| {
            PostError::InlineTooLong { len: LEN, max }
        })?;
        self.post_fast(&WriteInline(remote, data), flags)
    }

    /// RDMA WRITE gathering `N` entries, with the provider's
    /// [`post_write`](Provider::post_write); otherwise as [`SendQueue::post_write_inline`].
    ///
    /// # Errors
    /// [`PostError::TooManySges`] (with the most this queue accepts) if `N` is above the
    /// queue's `max_sge` or the WQE would exceed the queue's largest; otherwise as
    /// [`SendQueue::post`].
    #[inline]
    pub fn post_write<const N: usize>(
        &self,
        remote: Remote,
        sges: &[Sge; N],
        flags: SendFlags,
    ) -> Result<u64, SqError> {
        admit(N, self.fast.write_sges, |max| PostError::TooManySges {
            n: N,
            max,
        })?;
        self.post_fast(&WriteSges(remote, sges), flags)
    }

    /// RDMA READ scattering into `N` local entries, with the provider's
    /// [`post_read`](Provider::post_read); otherwise as [`SendQueue::post_write_inline`].
    ///
    /// # Errors
    /// As [`SendQueue::post_write`].
    #[inline]
    pub fn post_read<const N: usize>(
        &self,
        remote: Remote,
        sges: &[Sge; N],
        flags: SendFlags,
    ) -> Result<u64, SqError> {
        admit(N, self.fast.read_sges, |max| PostError::TooManySges {
            n: N,
            max,
        })?;
        self.post_fast(&ReadSges(remote, sges), flags)
    }

    /// SEND gathering `N` entries, with an immediate if `imm` is set, with the provider's
    /// [`post_send`](Provider::post_send); otherwise as [`SendQueue::post_write_inline`].
    ///
    /// # Errors
    /// As [`SendQueue::post_write`].
    #[inline]
    pub fn post_send<const N: usize>(
        &self,
        sges: &[Sge; N],
        imm: Option<u32>,
        flags: SendFlags,
    ) -> Result<u64, SqError> {
        admit(N, self.fast.send_sges, |max| PostError::TooManySges {
            n: N,
            max,
        })?;
        self.post_fast(&SendSges(sges, imm), flags)
    }

    /// An atomic of width `W` on `remote` (aligned to `W::BYTES`), the old value landing at
    /// `local`, with the provider's [`post_atomic`](Provider::post_atomic); otherwise as
    /// [`SendQueue::post_write_inline`].
    ///
    /// # Errors
    /// [`PostError::BadAtomicWidth`] if the operation is not defined at this width (standard
    /// compare-swap and fetch-add are 8 bytes), [`PostError::Unsupported`] if the provider
    /// has no such atomic; otherwise as [`SendQueue::post`].
    #[inline]
    pub fn post_atomic<W: AtomicWidth>(
        &self,
        remote: Remote,
        local: Sge,
        op: AtomicOp,
        flags: SendFlags,
    ) -> Result<u64, SqError> {
        if self.fast.atomics & atomic_bit(&op, W::BYTES) == 0 {
            // Not accepted at construction: report exactly what `check` says.
            let wr = WorkRequest::Atomic {
                remote,
                local,
                op,
                bytes: W::BYTES,
            };
            self.check(&wr)?;
            return Err(SqError::Post(PostError::Unsupported));
        }
        self.post_fast(
            &Atomic::<W>(remote, local, op, core::marker::PhantomData),
            flags,
        )
    }
}
