//! How a PE reaches another: the [`Transport`] trait and its two implementations.
//!
//! Every one-sided routine of [`Pe`](crate::Pe) is written once, against [`Transport`]: it
//! range-checks its symmetric arguments into segment offsets, looks up the [`Route`] of the
//! target PE and calls one trait method. What differs between reaching a PE by load/store and
//! reaching it through a NIC lives here and nowhere else:
//!
//! | | [`P2p`] (peer heap mapped here; also this PE itself) | [`Rdma`] (one RC QP per peer) |
//! |---|---|---|
//! | put | a copy into the mapping | an inline WRITE, or WRITEs from staging |
//! | get | a copy out of the mapping | READs into staging, then a copy |
//! | atomics | CPU atomics on the mapping | NIC atomics (FADD, CAS, masked CAS), else a CAS loop; 4-byte CAS emulated with 8-byte CAS where the NIC lacks it |
//! | fence | a release fence | the FENCE flag on the next WQE |
//! | quiet | a SeqCst fence | wait for every posted WQE's completion |
//! | wait progress | nothing | poll the CQ |
//!
//! **Dispatch.** [`Route`] is an enum over the two implementations that implements the trait by
//! delegation: one predictable branch per call, after which the code is monomorphised for the
//! provider and fully inlinable (a P2P `shmem_p` becomes one 8-byte store). A trait object
//! would put an indirect call, opaque to inlining, on a path that is ~10 ns in total, and the
//! set of transports is closed (adding one is adding an arm here), so the enum costs nothing
//! in flexibility.
//!
//! The transports of one PE share its staging memory, its liveness information and its RDMA
//! domain; that context ([`Net`]) is passed to every method instead of being duplicated (or
//! reference-counted) in each route.

mod live;
pub(crate) mod p2p;
mod rdma;

pub(crate) use live::Liveness;
pub(crate) use p2p::{P2p, load};
pub(crate) use rdma::{QueueHooks, Rdma, Staging};

use gda_hal::Provider;

use crate::domain::{Conn, Nudge, Progress};
use crate::error::Result;
use crate::types::{SignalOp, Width};

/// An atomic memory operation on a 32- or 64-bit operand (the width is passed beside it).
///
/// Operand bits are zero-extended to 64 (see [`crate::AtomicInt::to_bits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Amo {
    /// Read the operand.
    Fetch,
    /// Store the value (fetching: a swap).
    Set(u64),
    /// Add (wrapping).
    Add(u64),
    /// Bitwise and.
    And(u64),
    /// Bitwise or.
    Or(u64),
    /// Bitwise xor.
    Xor(u64),
    /// Store `swap` if the operand equals `compare` (always fetching).
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
}

impl Amo {
    /// The value the operand takes when it was `old`, or `None` to leave it unchanged. Both
    /// transports use it: P2P inside a CPU atomic update, RDMA in its compare-and-swap loop when
    /// the NIC has no single atomic for the operation.
    #[inline]
    pub(crate) fn apply(self, old: u64, w: Width) -> Option<u64> {
        let new = match self {
            Self::Fetch => return None,
            Self::Set(v) => v,
            Self::Add(v) => old.wrapping_add(v),
            Self::And(v) => old & v,
            Self::Or(v) => old | v,
            Self::Xor(v) => old ^ v,
            Self::CompareSwap { compare, swap } => {
                if old != compare {
                    return None;
                }
                swap
            }
        };
        Some(new & all_ones(w))
    }
}

/// The operand mask of width `w`.
#[inline]
pub(crate) const fn all_ones(w: Width) -> u64 {
    match w {
        Width::W32 => 0xffff_ffff,
        Width::W64 => u64::MAX,
    }
}

/// One way of reaching one PE. Offsets are byte offsets into the PE's segment (the symmetric
/// heap, the team area, staging), already range-checked by the caller: the symmetric layout is
/// the same on every PE, so an offset names the same object everywhere.
///
/// Completion: `put`, `get_nbi`, `signal` and non-fetching `amo` may return before the target
/// has the data; `quiet` waits for all of them. `get` and fetching `amo` return with the value.
pub(crate) trait Transport<P: Provider> {
    /// Which kind of transport this is (for [`crate::Pe::transport_to`]).
    fn kind(&self) -> TransportKind;

    /// Writes `src` at `off` of the target. `src` may be reused on return.
    fn put(&self, net: &Net<P>, off: usize, src: &[u8]) -> Result<()>;

    /// [`Transport::put`] where only the next quiet must see it delivered (`put_nbi`): a
    /// transport may batch its doorbell work. The default is `put`.
    fn put_nbi(&self, net: &Net<P>, off: usize, src: &[u8]) -> Result<()> {
        self.put(net, off, src)
    }

    /// Reads `len` bytes at `off` of the target to `dst`, blocking until they are there.
    ///
    /// # Safety
    /// `dst` must be valid for `len` bytes of writes. It may point into this PE's symmetric
    /// memory (which peers and the NIC write concurrently), so implementations never form a
    /// reference to it.
    unsafe fn get(&self, net: &Net<P>, off: usize, dst: *mut u8, len: usize) -> Result<()>;

    /// Reads `len` bytes at `src_off` of the target into this PE's own segment at `dst_off`,
    /// complete by the next quiet.
    fn get_nbi(&self, net: &Net<P>, dst_off: usize, src_off: usize, len: usize) -> Result<()>;

    /// Reads `n` elements of `elem` bytes, `stride` bytes apart from `off` of the target, into
    /// `dst`, `dst_stride` bytes apart (blocking). The default reads element by element.
    ///
    /// # Safety
    /// `dst + k * dst_stride` must be valid for `elem` bytes of writes for every `k < n`.
    #[allow(clippy::too_many_arguments)] // a strided transfer is described by this many numbers
    unsafe fn get_strided(
        &self,
        net: &Net<P>,
        off: usize,
        elem: usize,
        stride: usize,
        n: usize,
        dst: *mut u8,
        dst_stride: usize,
    ) -> Result<()> {
        for k in 0..n {
            // SAFETY: the element's destination is valid (caller); `off + k * stride` was
            // range-checked with the whole strided range.
            unsafe { self.get(net, off + k * stride, dst.add(k * dst_stride), elem)? };
        }
        Ok(())
    }

    /// Updates the 64-bit signal word at `off`, ordered after every earlier put to the target:
    /// a PE that observes the signal observes the data.
    fn signal(&self, net: &Net<P>, off: usize, value: u64, op: SignalOp) -> Result<()>;

    /// Applies `op` atomically to the `w`-wide operand at `off` (aligned). With `fetch` it
    /// returns the old value; without, the result is unspecified (0) and the operation may
    /// complete only at the next quiet.
    fn amo(&self, net: &Net<P>, off: usize, w: Width, op: Amo, fetch: bool) -> Result<u64>;

    /// Orders this PE's later puts, signals and atomics to the target after earlier ones,
    /// without waiting.
    fn fence(&self);

    /// Waits until every operation issued to the target is complete and visible there.
    fn quiet(&self, net: &Net<P>) -> Result<()>;

    /// Lets outstanding work progress while this PE waits for something else.
    fn progress(&self);
}

/// The route to one PE: the closed set of transports, dispatched statically (see the module
/// documentation for why not `dyn Transport`).
// The RDMA arm holds its send queue inline: one route per PE is a few hundred bytes at most,
// while boxing it would add a pointer chase to every RDMA post.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Route<P: Provider> {
    /// Load/store (peers on this host, and this PE itself).
    P2p(P2p),
    /// Through the provider's queues.
    Rdma(Rdma<P>),
}

/// Delegates one trait method to the route's transport.
macro_rules! delegate {
    ($self:ident, $t:ident => $e:expr) => {
        match $self {
            Route::P2p($t) => $e,
            Route::Rdma($t) => $e,
        }
    };
}

impl<P: Provider> Transport<P> for Route<P> {
    #[inline]
    fn kind(&self) -> TransportKind {
        delegate!(self, t => Transport::<P>::kind(t))
    }
    #[inline]
    fn put(&self, net: &Net<P>, off: usize, src: &[u8]) -> Result<()> {
        delegate!(self, t => t.put(net, off, src))
    }
    #[inline]
    fn put_nbi(&self, net: &Net<P>, off: usize, src: &[u8]) -> Result<()> {
        delegate!(self, t => t.put_nbi(net, off, src))
    }
    #[inline]
    unsafe fn get(&self, net: &Net<P>, off: usize, dst: *mut u8, len: usize) -> Result<()> {
        // SAFETY: the caller's obligations are passed on unchanged.
        delegate!(self, t => unsafe { t.get(net, off, dst, len) })
    }
    #[inline]
    fn get_nbi(&self, net: &Net<P>, dst_off: usize, src_off: usize, len: usize) -> Result<()> {
        delegate!(self, t => t.get_nbi(net, dst_off, src_off, len))
    }
    #[inline]
    unsafe fn get_strided(
        &self,
        net: &Net<P>,
        off: usize,
        elem: usize,
        stride: usize,
        n: usize,
        dst: *mut u8,
        dst_stride: usize,
    ) -> Result<()> {
        // SAFETY: the caller's obligations are passed on unchanged.
        delegate!(self, t => unsafe { t.get_strided(net, off, elem, stride, n, dst, dst_stride) })
    }
    #[inline]
    fn signal(&self, net: &Net<P>, off: usize, value: u64, op: SignalOp) -> Result<()> {
        delegate!(self, t => t.signal(net, off, value, op))
    }
    #[inline]
    fn amo(&self, net: &Net<P>, off: usize, w: Width, op: Amo, fetch: bool) -> Result<u64> {
        delegate!(self, t => t.amo(net, off, w, op, fetch))
    }
    #[inline]
    fn fence(&self) {
        delegate!(self, t => Transport::<P>::fence(t))
    }
    #[inline]
    fn quiet(&self, net: &Net<P>) -> Result<()> {
        delegate!(self, t => t.quiet(net))
    }
    #[inline]
    fn progress(&self) {
        delegate!(self, t => Transport::<P>::progress(t))
    }
}

/// Which transport reaches a PE (as reported by [`crate::Pe::transport_to`]).
///
/// Named `Transport` before the transports became a trait; `gda_shmem::Transport` is still an
/// alias of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    /// The calling PE itself.
    Local,
    /// Shared memory.
    P2p,
    /// RDMA through the provider.
    Rdma,
}

/// Everything a PE uses to reach the others: a route per PE and what the routes share.
///
/// Field order is drop order: the queues (in `routes`) go before the domain that owns their QPs
/// and CQs.
pub(crate) struct Net<P: Provider> {
    /// Route to PE `j` at index `j` (this PE's own: P2P to its own heap).
    pub(crate) routes: Vec<Route<P>>,
    /// This PE's segment (heap, team area, staging) in this address space.
    pub(crate) base: *mut u8,
    /// The segment's local key (0 without RDMA routes).
    pub(crate) lkey: u32,
    /// This PE's static data (the program's variables) in this address space; null without.
    pub(crate) data: *mut u8,
    /// The static data's local key (0 without RDMA routes or static data).
    pub(crate) data_lkey: u32,
    /// Private registered memory for RDMA sources, destinations and atomic results.
    pub(crate) staging: Staging,
    /// Which peers' processes can be checked for liveness, to report a dead peer rather than
    /// the RDMA error its death caused.
    pub(crate) live: Liveness,
    /// How many routes are RDMA (waits nap when there are any: see `Pe::wait_for`).
    pub(crate) rdma_routes: usize,
    /// The NIC control path, `None` when every route is P2P.
    /// The NIC's control-path objects (PD, region, QPs, CQs), kept alive for the queues.
    pub(crate) _nic: Option<Box<dyn Conn<P>>>,
    /// The NIC's engine wake-up (the software NIC's; `None` on hardware and P2P).
    pub(crate) nudge: Option<Nudge>,
    /// Runs the NIC's work in the waiting thread (the software NIC between processes; `None`
    /// on hardware and P2P).
    pub(crate) progress: Option<Progress>,
}

impl<P: Provider> Net<P> {
    /// This PE's byte at symmetric offset `off` (segment, or static data at
    /// [`DATA_TAG`](crate::statics::DATA_TAG) and above); `off` is range-checked by the caller.
    #[inline(always)]
    pub(crate) fn local(&self, off: usize) -> *mut u8 {
        if off >= crate::statics::DATA_TAG {
            self.data.wrapping_add(off - crate::statics::DATA_TAG)
        } else {
            self.base.wrapping_add(off)
        }
    }

    /// Quiets every route, then recycles the staging memory (nothing in flight uses it any
    /// more).
    pub(crate) fn quiet_all(&self) -> Result<()> {
        // P2P routes differ only in the mapping they store to: one quiet (a full fence) covers
        // all of them, so it runs once, not once per same-host PE.
        if let Some(p) = self.first_p2p() {
            p.quiet(self)?;
        }
        for r in &self.routes {
            if let Route::Rdma(t) = r {
                t.quiet(self)?;
            }
        }
        self.staging.reset();
        Ok(())
    }

    /// Orders later operations to every PE after earlier ones (the P2P fence once, as above).
    pub(crate) fn fence_all(&self) {
        if let Some(p) = self.first_p2p() {
            Transport::<P>::fence(p);
        }
        for r in &self.routes {
            if let Route::Rdma(t) = r {
                t.fence();
            }
        }
    }

    /// A P2P route (every PE has one: to itself).
    fn first_p2p(&self) -> Option<&P2p> {
        self.routes.iter().find_map(|r| match r {
            Route::P2p(p) => Some(p),
            Route::Rdma(_) => None,
        })
    }

    /// Lets every route's outstanding work progress.
    pub(crate) fn progress_all(&self) {
        let _ = self.run_nic();
        for r in &self.routes {
            r.progress();
        }
    }

    /// Wakes the NIC before this PE waits on it. Hardware needs nothing; the software NIC's
    /// engine naps when idle (see [`crate::domain::Nudge`]).
    /// One pass of the NIC's work in this thread, where the NIC allows it (see
    /// [`crate::domain::RdmaNic::progress`]); whether it did anything.
    #[inline]
    pub(crate) fn run_nic(&self) -> bool {
        self.progress.as_ref().is_some_and(|p| p())
    }

    #[inline]
    pub(crate) fn kick(&self) {
        if let Some(n) = &self.nudge {
            n();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amo_apply_is_each_operation_at_its_width() {
        use Width::{W32, W64};
        assert_eq!(Amo::Fetch.apply(5, W64), None);
        assert_eq!(Amo::Set(9).apply(5, W64), Some(9));
        // 32-bit results wrap at 32 bits (the operand's bits, zero-extended).
        assert_eq!(Amo::Add(1).apply(0xffff_ffff, W32), Some(0));
        assert_eq!(Amo::Add(1).apply(0xffff_ffff, W64), Some(0x1_0000_0000));
        assert_eq!(Amo::Add(u64::MAX).apply(0, W64), Some(u64::MAX));
        assert_eq!(Amo::And(0b1100).apply(0b1010, W32), Some(0b1000));
        assert_eq!(Amo::Or(0b1100).apply(0b1010, W32), Some(0b1110));
        assert_eq!(Amo::Xor(0b1100).apply(0b1010, W32), Some(0b0110));
        let cas = Amo::CompareSwap {
            compare: 3,
            swap: 4,
        };
        assert_eq!(cas.apply(3, W32), Some(4));
        assert_eq!(cas.apply(2, W32), None);
        assert_eq!(all_ones(W32), 0xffff_ffff);
        assert_eq!(all_ones(W64), u64::MAX);
    }
}
