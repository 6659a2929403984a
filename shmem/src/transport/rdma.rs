//! RDMA: one RC QP per peer, driven by the provider's device functions from the calling thread
//! (`SendQueue<P>`: no proxy). Sources, destinations and atomic results go through staging
//! memory, a private registered part of this PE's segment.

use std::cell::Cell;

use gda_hal::{
    AtomicOp, Payload, PostError, Provider, Remote, SendFlags, SendQueue, Sge, SqError, W32, W64,
    WorkRequest, sym,
};

use super::TransportKind;
use super::{Amo, Net, Transport, all_ones};
use crate::error::{Result, ShmemError};
use crate::statics::DATA_TAG;
use crate::types::{SignalOp, Width};

/// Private staging memory: a bump allocator over a range of this PE's segment, recycled by
/// every quiet (when nothing in flight can still read or write it).
pub(crate) struct Staging {
    /// Segment offset of the first byte.
    at: usize,
    /// Bytes.
    len: usize,
    /// Bytes handed out since the last quiet.
    used: Cell<usize>,
}

impl Staging {
    /// Staging over `len` bytes at segment offset `at`.
    pub(crate) fn new(at: usize, len: usize) -> Self {
        Self {
            at,
            len,
            used: Cell::new(0),
        }
    }

    /// `bytes` of staging (a segment offset), quieting every route first when it is used up.
    fn take<P: Provider>(&self, net: &Net<P>, bytes: usize) -> Result<usize> {
        let bytes = bytes.next_multiple_of(64);
        if bytes > self.len {
            return Err(ShmemError::Invalid(format!(
                "staging {bytes} bytes at once"
            )));
        }
        if self.used.get() + bytes > self.len {
            // Staged bytes of any route may still be in flight: all of them must complete.
            net.quiet_all()?;
        }
        let at = self.at + self.used.get();
        self.used.set(self.used.get() + bytes);
        Ok(at)
    }

    /// Everything staged is complete (called by a quiet of every route).
    pub(crate) fn reset(&self) {
        self.used.set(0);
    }

    /// The largest transfer staged at once (half of staging, so two can be in flight).
    fn chunk(&self) -> usize {
        self.len / 2
    }
}

/// What runs a queue's work on a NIC whose work runs in host threads (the software NIC's).
pub(crate) struct QueueHooks {
    /// Called after each doorbell ([`crate::domain::RdmaNic::post_nudge`]; else the NIC's
    /// wake-up).
    pub(crate) nudge: Option<crate::domain::Nudge>,
    /// Lets `put_nbi` leave doorbells to the NIC ([`crate::domain::RdmaNic::defer`]).
    pub(crate) defer: Option<crate::domain::Defer>,
}

/// A PE reached through the provider: its queue and where its segment is.
pub(crate) struct Rdma<P: Provider> {
    pe: u32,
    sq: SendQueue<P>,
    /// The peer's segment base in *its* address space (a remote address, never a pointer).
    base: u64,
    rkey: u32,
    /// The peer's static data: its address there and its key (0, 0 when the job has none).
    data: (u64, u32),
    /// The next WQE to this PE waits for earlier ones (`fence`).
    fence: Cell<bool>,
    /// Something was posted since the last quiet.
    dirty: Cell<bool>,
    /// What to call after each doorbell of this queue, when the NIC gave one per QP
    /// ([`crate::domain::RdmaNic::post_nudge`]; else the NIC's wake-up).
    nudge: Option<crate::domain::Nudge>,
    /// Lets `put_nbi` leave doorbells to the NIC ([`crate::domain::RdmaNic::defer`]).
    defer: Option<crate::domain::Defer>,
    /// Non-blocking puts posted since this queue's work last ran (`nudge`).
    unrun: Cell<u32>,
    /// The queue's protocol state when the caller's queue memory placed it (GPU memory);
    /// declared after `sq`, so it outlives the queue.
    _state: Option<gda_hal::control::PlacedBuffer>,
}

impl<P: Provider> Rdma<P> {
    /// The route to PE `pe` over `sq`, whose segment starts at remote address `base` (key
    /// `rkey`) and its static data at `data.0` (key `data.1`); `state` holds `sq`'s protocol
    /// state if it is not the queue's own; `hooks` are what runs its work on a software NIC.
    pub(crate) fn new(
        pe: u32,
        sq: SendQueue<P>,
        state: Option<gda_hal::control::PlacedBuffer>,
        base: u64,
        rkey: u32,
        data: (u64, u32),
        hooks: QueueHooks,
    ) -> Self {
        let QueueHooks { nudge, defer } = hooks;
        Self {
            pe,
            sq,
            base,
            rkey,
            data,
            fence: Cell::new(false),
            dirty: Cell::new(false),
            nudge,
            defer,
            unrun: Cell::new(0),
            _state: state,
        }
    }

    /// The peer's segment: its address there and its key.
    pub(crate) fn segment(&self) -> (u64, u32) {
        (self.base, self.rkey)
    }

    /// The queue to this PE (shared with device-API producers through its state).
    pub(crate) fn queue(&self) -> &SendQueue<P> {
        &self.sq
    }

    /// The error to report for `e` during `op`: a dead peer explains itself better than the
    /// flushed completion its death caused.
    #[cold]
    fn err(&self, net: &Net<P>, op: &'static str, e: SqError) -> ShmemError {
        net.live.gone(Some(self.pe)).unwrap_or(ShmemError::Rdma {
            pe: self.pe,
            op,
            source: e,
        })
    }

    #[inline]
    fn remote(&self, off: usize) -> Remote {
        if off >= DATA_TAG {
            Remote {
                addr: self.data.0 + (off - DATA_TAG) as u64,
                rkey: self.data.1,
            }
        } else {
            Remote {
                addr: self.base + off as u64,
                rkey: self.rkey,
            }
        }
    }

    /// This PE's bytes `off..off + len` (segment or static data) as a gather/scatter entry.
    #[inline]
    fn sge(net: &Net<P>, off: usize, len: usize) -> Sge {
        Sge {
            addr: net.local(off) as u64,
            length: len as u32,
            lkey: if off >= DATA_TAG {
                net.data_lkey
            } else {
                net.lkey
            },
        }
    }

    /// Posts with `post(sq, flags)`: the generic [`SendQueue::post`] or one of its typed
    /// entry points (`post_write_inline::<8>` for `p` and signals, `post_atomic` for AMOs,
    /// one-entry WRITEs and READs for staged transfers: the same WQE and ring protocol, without
    /// classifying a request each time). The flags carry this route's pending fence.
    #[inline]
    fn post_with(
        &self,
        net: &Net<P>,
        post: impl FnOnce(&SendQueue<P>, SendFlags) -> std::result::Result<u64, SqError>,
    ) -> std::result::Result<(), SqError> {
        self.post_only(post)?;
        self.run(net);
        Ok(())
    }

    /// Posts with `post` (see [`Rdma::post_with`]) without running the queue's work.
    #[inline]
    fn post_only(
        &self,
        post: impl FnOnce(&SendQueue<P>, SendFlags) -> std::result::Result<u64, SqError>,
    ) -> std::result::Result<(), SqError> {
        let flags = if self.fence.get() {
            SendFlags::FENCE
        } else {
            SendFlags::empty()
        };
        post(&self.sq, flags)?;
        self.fence.set(false);
        self.dirty.set(true);
        Ok(())
    }

    /// After a doorbell: the software NIC's engine may be napping: wake it now (one atomic
    /// load when it is awake; hardware NICs need nothing here), or run this queue's work here
    /// — everything rung so far, the puts `put_nbi` left too.
    #[inline]
    fn run(&self, net: &Net<P>) {
        match &self.nudge {
            Some(n) => n(),
            None => net.kick(),
        }
        self.unrun.set(0);
    }

    /// An inline WRITE of `src` to `remote`: the typed entry point for the sizes of SHMEM's
    /// elements and signals, the generic one otherwise.
    #[inline]
    fn write_inline(
        &self,
        net: &Net<P>,
        remote: Remote,
        src: &[u8],
    ) -> std::result::Result<(), SqError> {
        self.post_inline(remote, src)?;
        self.run(net);
        Ok(())
    }

    /// Posts [`Rdma::write_inline`]'s WRITE without running the queue's work.
    #[inline]
    fn post_inline(&self, remote: Remote, src: &[u8]) -> std::result::Result<(), SqError> {
        match src.len() {
            8 => self.post_only(|sq, f| sq.post_write_inline::<8>(remote, &first::<8>(src), f)),
            4 => self.post_only(|sq, f| sq.post_write_inline::<4>(remote, &first::<4>(src), f)),
            2 => self.post_only(|sq, f| sq.post_write_inline::<2>(remote, &first::<2>(src), f)),
            1 => self.post_only(|sq, f| sq.post_write_inline::<1>(remote, &first::<1>(src), f)),
            _ => self.post_only(|sq, f| {
                sq.post(
                    &WorkRequest::Write {
                        remote,
                        payload: Payload::Inline(src),
                        imm: None,
                    },
                    f,
                )
            }),
        }
    }

    /// Posts one atomic with its result into staging. `Ok(Err(_))`: the NIC refused the
    /// operation (it lacks it at this width); the caller falls back.
    fn amo_post(
        &self,
        net: &Net<P>,
        off: usize,
        w: Width,
        op: AtomicOp,
    ) -> Result<std::result::Result<usize, PostError>> {
        let at = net.staging.take(net, 8)?;
        let (remote, local) = (self.remote(off), Self::sge(net, at, w.bytes() as usize));
        let posted = match w {
            Width::W32 => self.post_with(net, |sq, f| sq.post_atomic::<W32>(remote, local, op, f)),
            Width::W64 => self.post_with(net, |sq, f| sq.post_atomic::<W64>(remote, local, op, f)),
        };
        match posted {
            Ok(()) => Ok(Ok(at)),
            Err(SqError::Post(e)) => Ok(Err(e)),
            Err(e) => Err(self.err(net, "atomic", e)),
        }
    }

    /// An atomic whose old value is needed: post, wait, decode. `Ok(Err(_))`: the NIC lacks
    /// the operation at this width.
    fn amo_fetch(
        &self,
        net: &Net<P>,
        off: usize,
        w: Width,
        op: AtomicOp,
    ) -> Result<std::result::Result<u64, PostError>> {
        let at = match self.amo_post(net, off, w, op)? {
            Ok(at) => at,
            Err(e) => return Ok(Err(e)),
        };
        self.complete(net, "atomic")?;
        let mut b = [0u8; 8];
        let n = w.bytes() as usize;
        // SAFETY: the atomic completed and wrote `n` (<= 8) bytes at staging offset `at`, in
        // this PE's segment; `b` is a distinct local array.
        unsafe { sym::sym_copy(b.as_mut_ptr(), net.base.wrapping_add(at), n) };
        // The NIC writes the old value in its own byte order.
        let v = if P::ATOMIC_RESULT_BIG_ENDIAN {
            b[..n].iter().fold(0u64, |a, &x| a << 8 | u64::from(x))
        } else {
            b[..n]
                .iter()
                .rev()
                .fold(0u64, |a, &x| a << 8 | u64::from(x))
        };
        Ok(Ok(v))
    }

    /// Compare-and-swap through the NIC at width `w`, falling back (when the NIC has no
    /// `w`-wide CAS, e.g. 4-byte CAS on bnxt) to an 8-byte CAS of the aligned word holding
    /// the operand that changes only the operand's bytes.
    fn cas(&self, net: &Net<P>, off: usize, w: Width, compare: u64, swap: u64) -> Result<u64> {
        match self.amo_fetch(net, off, w, AtomicOp::CompareSwap { compare, swap })? {
            Ok(v) => return Ok(v),
            // An 8-byte operand has no wider word to fall back on: report the NIC's refusal.
            Err(e) if w == Width::W64 => {
                return Err(self.err(net, "compare-and-swap", SqError::Post(e)));
            }
            Err(_) => {}
        }
        let word = off & !7;
        let shift = (off - word) * 8;
        let lane = 0xffff_ffffu64 << shift;
        let mut cur = self
            .amo_fetch(net, word, Width::W64, AtomicOp::FetchAdd { add: 0 })?
            .unwrap_or(0);
        loop {
            let old32 = (cur & lane) >> shift;
            if old32 != compare & 0xffff_ffff {
                return Ok(old32);
            }
            let new = (cur & !lane) | ((swap & 0xffff_ffff) << shift);
            let op = AtomicOp::CompareSwap {
                compare: cur,
                swap: new,
            };
            let got = self.amo_fetch(net, word, Width::W64, op)?.unwrap_or(cur);
            if got == cur {
                return Ok(old32);
            }
            cur = got;
        }
    }

    /// Waits for everything posted to this PE.
    fn complete(&self, net: &Net<P>, op: &'static str) -> Result<()> {
        if self.dirty.get() {
            self.sq.quiet().map_err(|e| self.err(net, op, e))?;
            self.dirty.set(false);
        }
        Ok(())
    }

    /// The NIC's single atomic for `op` at width `w`, if there is one. AND clears the bits the
    /// operand lacks, OR sets the bits it has, SET replaces them all: one masked swap each; XOR
    /// depends on the old value and has none.
    fn native(op: Amo, w: Width) -> Option<AtomicOp> {
        let all = all_ones(w);
        let masked = |swap, swap_mask| AtomicOp::MaskedCompareSwap {
            compare: 0,
            compare_mask: 0,
            swap,
            swap_mask,
        };
        match op {
            Amo::Fetch => Some(AtomicOp::FetchAdd { add: 0 }),
            Amo::Add(a) => Some(AtomicOp::FetchAdd { add: a }),
            Amo::Set(b) => Some(masked(b, all)),
            Amo::And(b) => Some(masked(0, !b & all)),
            Amo::Or(b) => Some(masked(all, b)),
            Amo::Xor(_) => None,
            Amo::CompareSwap { compare, swap } => Some(AtomicOp::CompareSwap { compare, swap }),
        }
    }
}

impl<P: Provider> Transport<P> for Rdma<P> {
    #[inline]
    fn kind(&self) -> TransportKind {
        TransportKind::Rdma
    }

    #[inline]
    fn put(&self, net: &Net<P>, off: usize, src: &[u8]) -> Result<()> {
        if src.len() <= self.sq.wq().max_inline as usize {
            return self
                .write_inline(net, self.remote(off), src)
                .map_err(|e| self.err(net, "put", e));
        }
        // Stage through private registered memory: the caller may reuse `src` at once.
        let chunk = net.staging.chunk();
        for (k, part) in src.chunks(chunk).enumerate() {
            let at = net.staging.take(net, part.len())?;
            // SAFETY: `at..at + len` is staging memory inside this PE's segment, handed out to
            // this transfer only; `part` is a Rust slice.
            unsafe { sym::sym_copy(net.base.wrapping_add(at), part.as_ptr(), part.len()) };
            let (remote, sge) = (self.remote(off + k * chunk), Self::sge(net, at, part.len()));
            self.post_with(net, |sq, f| sq.post_write::<1>(remote, &[sge], f))
                .map_err(|e| self.err(net, "put", e))?;
        }
        Ok(())
    }

    fn put_nbi(&self, net: &Net<P>, off: usize, src: &[u8]) -> Result<()> {
        let n = self.unrun.get();
        let Some(defer) = self
            .defer
            .as_ref()
            .filter(|_| src.len() <= self.sq.wq().max_inline as usize)
        else {
            return self.put(net, off, src);
        };
        self.post_inline(self.remote(off), src)
            .map_err(|e| self.err(net, "put", e))?;
        // Rung: the NIC serves it within a bounded time, unless it naps for long or has been
        // left enough in a row (then it is served here, with the ones before it).
        if defer(n) {
            self.unrun.set(n + 1);
        } else {
            self.run(net);
        }
        Ok(())
    }

    unsafe fn get(&self, net: &Net<P>, off: usize, dst: *mut u8, len: usize) -> Result<()> {
        let chunk = net.staging.chunk();
        let mut done = 0;
        while done < len {
            let part = chunk.min(len - done);
            let at = net.staging.take(net, part)?;
            let (remote, sge) = (self.remote(off + done), Self::sge(net, at, part));
            self.post_with(net, |sq, f| sq.post_read::<1>(remote, &[sge], f))
                .map_err(|e| self.err(net, "get", e))?;
            self.complete(net, "get")?;
            // SAFETY: the READ has completed into staging `at..at + part`; `dst + done` is
            // valid for `part` bytes (caller); staging never overlaps the destination.
            unsafe { sym::sym_copy(dst.add(done), net.base.wrapping_add(at), part) };
            done += part;
        }
        Ok(())
    }

    fn get_nbi(&self, net: &Net<P>, dst_off: usize, src_off: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        // The READ lands straight in this PE's symmetric memory (registered with the rest of
        // the segment): nothing to copy at quiet.
        let (remote, sge) = (self.remote(src_off), Self::sge(net, dst_off, len));
        self.post_with(net, |sq, f| sq.post_read::<1>(remote, &[sge], f))
            .map_err(|e| self.err(net, "get", e))
    }

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
        if n == 0 {
            return Ok(());
        }
        // One READ of the covering range, then pick the elements: one round trip, not `n`.
        let span = (n - 1) * stride + elem;
        let mut tmp = vec![0u8; span];
        // SAFETY: `tmp` is valid for `span` bytes of writes.
        unsafe { self.get(net, off, tmp.as_mut_ptr(), span)? };
        for k in 0..n {
            let from = &tmp[k * stride..k * stride + elem];
            // SAFETY: the element's destination is valid for `elem` bytes (caller).
            unsafe { sym::sym_copy(dst.add(k * dst_stride), from.as_ptr(), elem) };
        }
        Ok(())
    }

    fn signal(&self, net: &Net<P>, off: usize, value: u64, op: SignalOp) -> Result<()> {
        // RC executes a QP's WQEs in order: the data WRITE is placed before the signal
        // WRITE/atomic that follows it on the same QP.
        match op {
            SignalOp::Set => self
                .write_inline(net, self.remote(off), &value.to_le_bytes())
                .map_err(|e| self.err(net, "signal set", e)),
            SignalOp::Add => {
                match self.amo_post(net, off, Width::W64, AtomicOp::FetchAdd { add: value })? {
                    Ok(_) => Ok(()),
                    Err(e) => Err(self.err(net, "signal add", SqError::Post(e))),
                }
            }
        }
    }

    // Out of line: `Route::amo` then stays small enough to inline into `Pe::amo`, which keeps
    // the load/store route's atomic a locked instruction and a few checks (with the NIC path
    // inlined too, whole-program optimisation left `Route::amo` a call, and P2P atomic adds
    // fell from 117 to 91 M/s in `gda shmem rates --transport p2p`). A NIC atomic costs far
    // more than the call.
    #[inline(never)]
    fn amo(&self, net: &Net<P>, off: usize, w: Width, op: Amo, fetch: bool) -> Result<u64> {
        // Compare-and-swap is its own NIC operation, with its own 4-byte fallback.
        if let Amo::CompareSwap { compare, swap } = op {
            return self.cas(net, off, w, compare, swap);
        }
        if let Some(native) = Self::native(op, w) {
            if !fetch {
                if self.amo_post(net, off, w, native)?.is_ok() {
                    return Ok(0);
                }
            } else if let Ok(v) = self.amo_fetch(net, off, w, native)? {
                return Ok(v);
            }
        }
        // No single NIC atomic (or the NIC refused it): a compare-and-swap loop (a fetch is
        // then one CAS that stores what it finds).
        let mut cur = self.cas(net, off, w, 0, 0)?;
        loop {
            let Some(new) = op.apply(cur, w) else {
                return Ok(cur);
            };
            let got = self.cas(net, off, w, cur, new)?;
            if got == cur {
                return Ok(cur);
            }
            cur = got;
        }
    }

    #[inline]
    fn fence(&self) {
        // Only if something was posted: the flag makes the NIC wait for earlier READs and
        // atomics on this QP before starting the next WQE.
        if self.dirty.get() {
            self.fence.set(true);
        }
    }

    fn quiet(&self, net: &Net<P>) -> Result<()> {
        self.complete(net, "quiet")?;
        self.fence.set(false);
        Ok(())
    }

    #[inline]
    fn progress(&self) {
        // Keep completions flowing so peers' waits on us make progress; errors surface at the
        // next quiet.
        if self.dirty.get() {
            let _ = self.sq.poll();
        }
    }
}

/// The first `N` bytes of `src` (which has exactly `N`: the caller matched its length).
#[inline(always)]
fn first<const N: usize>(src: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&src[..N]);
    a
}
