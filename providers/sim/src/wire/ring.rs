//! The shared memory a connection's frames travel through: one segment per connection, made
//! by the connecting process (a sealed memfd it passes over the socket), holding two
//! single-producer single-consumer byte rings — requests one way, responses the other.
//!
//! The peer maps the same pages, so nothing in them is trusted: each end keeps its own copy of
//! the counter it owns and only *reads* the other's; a counter that claims more bytes than the
//! ring holds, or runs backwards, is a corrupt ring and closes the connection. Bytes are copied
//! in and out with the device-memory copy (`mmio::dma_copy`), never referenced, since the peer
//! may be writing them at the same time. The memfd is sealed against shrinking before it is
//! sent and the acceptor checks the seals and the size before mapping, so a peer cannot turn
//! the mapping into a `SIGBUS`.
//!
//! Layout (byte offsets in the segment; counters little-endian `u64`, flags `u32`):
//!
//! | offset | field |
//! |---|---|
//! | 0, 64, 128, 132, 192 | ring 0 (requests, connector → acceptor): `head`, `tail`, `napping`, `starved`, `polled_ns` |
//! | 256, 320, 384, 388, 448 | ring 1 (responses, acceptor → connector): the same |
//! | 1024 + 8 *i*, *i* < [`GATES`] | gate *i* of direct placement: `state` (u32), `inflight` (u32) |
//!
//! Each counter has a cache line of its own, and so has `polled_ns`, which the consumer's
//! polling thread stores at every pass: a producer reads `napping` after every frame, and a
//! line shared with `polled_ns` would cost it a cache miss each time. Each end also keeps the
//! last value it read of the other's counter and reads the shared one again only when that
//! value no longer says there is room (producer) or data (consumer).
//! | 4096 | ring 0's data, [`RING_BYTES`] (byte `n` of the stream at `4096 + n mod RING_BYTES`) |
//! | 4096 + [`RING_BYTES`] | ring 1's data |
//!
//! Wake-ups: the consumer's engine, before it naps, sets its ring's `napping` word; a producer
//! that has written checks it (after a full fence) and wakes the peer's engine through the
//! eventfd the peer passed at connection time — unless a program thread of the consumer's
//! process looked at the ring within [`POLLED_RECENTLY`] (`polled_ns`, `CLOCK_MONOTONIC`):
//! that thread polls (`Fabric::progress`) and takes the frame sooner than a woken engine would
//! get a core. A producer that finds no room sets `starved`;
//! the consumer that frees room wakes it the same way. Both are hints: a lost one costs at most
//! one nap (a few milliseconds), never correctness.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use gda_hal::mmio;

/// Bytes of each ring's data area (a power of two).
pub(crate) const RING_BYTES: usize = 4 << 20;
/// The headers' page.
const HEADERS_BYTES: usize = 4096;
/// The whole segment: the headers, then the connector's ring (requests), then the acceptor's
/// (responses).
pub(crate) const SEGMENT_BYTES: usize = HEADERS_BYTES + 2 * RING_BYTES;

/// One ring's control words, each on its own cache line.
#[repr(C, align(64))]
struct Word64(AtomicU64);

#[repr(C, align(64))]
struct Flags {
    /// The consumer's engine naps: a producer that wrote wakes it.
    napping: AtomicU32,
    /// The producer waits for room: a consumer that freed some wakes it.
    starved: AtomicU32,
}

#[repr(C)]
struct Header {
    /// Bytes written so far (the producer's; the consumer only reads it).
    head: Word64,
    /// Bytes consumed so far (the consumer's; the producer only reads it).
    tail: Word64,
    flags: Flags,
    /// When a program thread of the consumer's process last looked at the ring
    /// (`CLOCK_MONOTONIC`, ns; `u64::MAX` while it is in a pass).
    polled_ns: Word64,
}

const _: () = assert!(std::mem::size_of::<Header>() == 256);
const _: () = assert!(std::mem::offset_of!(Header, flags) == 128);
const _: () = assert!(std::mem::offset_of!(Header, polled_ns) == 192);
const _: () = assert!(2 * std::mem::size_of::<Header>() <= HEADERS_BYTES);
const _: () = assert!(RING_BYTES.is_power_of_two());

/// How recently a program thread must have polled for its process to count as polling: a
/// producer then leaves the consumer's napping engine asleep, and the engine thread leaves the
/// pass to the program (`engine::run`). One window for both, so a wake-up a peer pays for never
/// finds an engine that goes back to sleep.
///
/// 200 µs, not a few: on a host with no spare core a polling thread is often off its CPU for
/// tens of microseconds (a peer's thread or its own engine took it), and an engine thread that
/// took the pass whenever the program had not polled for 20 µs ran beside it on the same
/// cores, so both took the requests in smaller batches at a higher cost each: 8-byte
/// `ib_send_bw` fell to 1.8–2.2 M msg/s in a third of the runs (2.6–3.2 in the others); with
/// 200 µs, 2.92–3.37 in 26 of 26 runs, interleaved with the old build (which gave 1.79–3.37),
/// latencies unchanged. The cost: a peer's request that arrives as the program stops polling
/// waits up to this window and one of the engine's naps (`engine::DEFERRED_NAP_MAX`, 320 µs),
/// where it waited 20 µs and one nap before; work a poster left to the engine does not wait
/// for the window (`FabricInner::handed`).
pub(crate) const POLLED_RECENTLY: std::time::Duration = std::time::Duration::from_micros(200);

/// `CLOCK_MONOTONIC` in nanoseconds: the same clock in every process of the host.
pub(crate) fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// Gates of direct placement in a segment (see `super::direct`): the acceptor (the
/// responder) opens and closes them, the connector (the requester) counts itself in while it
/// places.
pub(crate) const GATES: u16 = 384;
/// Where the gates start in the headers' page.
const GATES_AT: usize = 1024;
const _: () = assert!(GATES_AT + 8 * GATES as usize <= HEADERS_BYTES);
const _: () = assert!(GATES_AT >= 2 * std::mem::size_of::<Header>());

/// A gate's `state` once its responder stopped waiting for placements still in progress
/// (never a grant's value): each of them completes with an error at its requester.
pub(crate) const ABANDONED: u32 = u32::MAX;

/// One gate: the grant it stands for is open while `state` holds the value the grant names
/// (0 closed, [`ABANDONED`] closed with placements left in progress); `inflight` counts the
/// requester's placements in progress.
#[repr(C, align(8))]
pub(crate) struct Gate {
    pub(crate) state: AtomicU32,
    pub(crate) inflight: AtomicU32,
}

/// The peer broke the ring protocol (or scribbled over the counters).
#[derive(Debug)]
pub(crate) struct Corrupt(pub(crate) String);

/// A mapped segment.
pub(crate) struct Segment {
    base: *mut u8,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory, reached only through atomics and `dma_copy`.
unsafe impl Send for Segment {}
// SAFETY: as above; every access is either atomic or a copy that tolerates concurrent writers.
unsafe impl Sync for Segment {}

impl Segment {
    /// A new segment (the connecting side), sealed against resizing.
    pub(crate) fn create() -> io::Result<Self> {
        Self::map(gda_os::pages::sealed_memfd(
            "gda-sim-wire",
            SEGMENT_BYTES as u64,
        )?)
    }

    /// The segment a peer passed (the accepting side), after checking its seals and size.
    pub(crate) fn open(fd: OwnedFd) -> io::Result<Self> {
        use rustix::fs::SealFlags;
        let need = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
        let seals = rustix::fs::fcntl_get_seals(&fd)?;
        if !seals.contains(need) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment sealed with {seals:?}, not against resizing"),
            ));
        }
        let size = rustix::fs::fstat(&fd)?.st_size;
        if size != SEGMENT_BYTES as i64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment of {size} bytes, not {SEGMENT_BYTES}"),
            ));
        }
        Self::map(fd)
    }

    fn map(fd: OwnedFd) -> io::Result<Self> {
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: a new shared mapping of the whole (sealed) file; nothing else is replaced.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                SEGMENT_BYTES,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }?;
        Ok(Self {
            base: base.cast(),
            fd,
        })
    }

    /// The memfd, to pass to the peer.
    pub(crate) fn fd(&self) -> impl AsFd + '_ {
        self.fd.as_fd()
    }

    /// Gate `i` (`None` past the last).
    pub(crate) fn gate(&self, i: u16) -> Option<&Gate> {
        (i < GATES).then(|| {
            // SAFETY: inside the headers' page (asserted above), 8-aligned, mapped while `self`
            // lives; only ever accessed through atomics.
            unsafe { &*self.base.add(GATES_AT + 8 * usize::from(i)).cast::<Gate>() }
        })
    }

    fn header(&self, ring: usize) -> &Header {
        // SAFETY: two headers fit the first page (asserted); the mapping lives as long as
        // `self`; every field is atomic.
        unsafe {
            &*self
                .base
                .add(ring * std::mem::size_of::<Header>())
                .cast::<Header>()
        }
    }

    fn data(&self, ring: usize) -> *mut u8 {
        // SAFETY: inside the mapping (the layout of `SEGMENT_BYTES`).
        unsafe { self.base.add(HEADERS_BYTES + ring * RING_BYTES) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, no longer referenced (the ends hold the segment).
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), SEGMENT_BYTES) };
    }
}

/// Which ring of a segment: the connector's requests or the acceptor's responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Requests = 0,
    Responses = 1,
}

/// The writing end of one ring.
pub(crate) struct Producer {
    ring: usize,
    /// Bytes written (this end's own count; the shared copy is only published).
    head: u64,
    /// The consumer's `tail` as last read (checked when read).
    tail_seen: u64,
}

/// The reading end of one ring.
pub(crate) struct Consumer {
    ring: usize,
    /// Bytes consumed (this end's own count).
    tail: u64,
    /// The producer's `head` as last read (checked when read).
    head_seen: u64,
}

/// Copies `len` bytes between `buf` and the ring at byte position `pos`, in at most two pieces
/// across the wrap. `into_ring` chooses the direction.
///
/// # Safety
/// `buf` must be valid for `len` bytes (for writing when `!into_ring`); `len ≤ RING_BYTES`.
unsafe fn copy_wrapped(
    seg: &Segment,
    ring: usize,
    pos: u64,
    buf: *mut u8,
    len: usize,
    into_ring: bool,
) {
    let [(a, first), (b, rest)] = pieces(seg, ring, pos, len);
    // SAFETY: both pieces are inside the ring's data area (`pieces`); `buf` is the caller's.
    // `dma_copy` tolerates a peer writing the shared bytes concurrently (they are treated as
    // untrusted input).
    unsafe {
        if into_ring {
            mmio::dma_copy(a, buf, first);
            mmio::dma_copy(b, buf.add(first), rest);
        } else {
            mmio::dma_copy(buf, a, first);
            mmio::dma_copy(buf.add(first), b, rest);
        }
    }
}

/// Where `len ≤ RING_BYTES` bytes from byte position `pos` of ring `ring` lie in its data area:
/// at most two pieces, in order (the second, from the area's start, is empty unless they wrap).
fn pieces(seg: &Segment, ring: usize, pos: u64, len: usize) -> [(*mut u8, usize); 2] {
    debug_assert!(len <= RING_BYTES);
    let data = seg.data(ring);
    let at = (pos as usize) & (RING_BYTES - 1);
    let first = len.min(RING_BYTES - at);
    // SAFETY: `at < RING_BYTES`: inside the data area, as are `at + first ≤ RING_BYTES` and,
    // from its start, `len - first ≤ at` bytes.
    [(unsafe { data.add(at) }, first), (data, len - first)]
}

/// Bytes still in a ring (at most two pieces, in order): a payload a responder copies straight
/// to its destination instead of into a buffer first. The pointers are into the shared segment,
/// valid while the connection lives and the bytes are not consumed; the peer can write them
/// meanwhile (they are untrusted input, read with `mmio::dma_copy`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingSpan {
    pub(crate) pieces: [(*const u8, usize); 2],
}

impl RingSpan {
    /// Bytes in all.
    pub(crate) fn len(&self) -> usize {
        self.pieces[0].1 + self.pieces[1].1
    }

    /// A copy of its bytes, in a buffer of [`super::pool`] (a request held for a receive keeps
    /// its payload after the span is released).
    pub(crate) fn copy_out(&self) -> Vec<u8> {
        let len = self.len();
        let mut v = super::pool::take(len);
        let mut at = v.as_mut_ptr();
        for (p, n) in self.pieces {
            // SAFETY: a span's pieces are valid for their lengths until it is released (the
            // peer may write them: copied, never referenced); `v` has room for `len`, their sum.
            unsafe {
                gda_hal::mmio::dma_copy(at, p, n);
                at = at.add(n);
            }
        }
        // SAFETY: the `len` bytes were all written above.
        unsafe { v.set_len(len) };
        v
    }
}

impl Producer {
    pub(crate) fn new(dir: Dir) -> Self {
        Self {
            ring: dir as usize,
            head: 0,
            tail_seen: 0,
        }
    }

    /// Bytes free now: at least `want` when the consumer's count last read says so (no read
    /// of the shared line), else as the shared count says now.
    fn room_for(&mut self, seg: &Segment, want: usize) -> Result<usize, Corrupt> {
        let free = RING_BYTES - self.head.wrapping_sub(self.tail_seen) as usize;
        if free >= want {
            return Ok(free);
        }
        self.room(seg)
    }

    /// Bytes free now (reading the consumer's count).
    pub(crate) fn room(&mut self, seg: &Segment) -> Result<usize, Corrupt> {
        // ORDERING: Acquire pairs with the consumer's Release store of `tail` after it copied
        // the bytes out, so the space is free before it is overwritten.
        let tail = seg.header(self.ring).tail.0.load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        // The consumer's count never runs backwards past what it had said, nor ahead of ours.
        if used > RING_BYTES as u64 || tail.wrapping_sub(self.tail_seen) > RING_BYTES as u64 {
            return Err(Corrupt(format!(
                "the consumer claims {tail} bytes consumed of {} written",
                self.head
            )));
        }
        self.tail_seen = tail;
        Ok(RING_BYTES - used as usize)
    }

    /// Writes as much of `bytes` as fits; the bytes written (published to the consumer).
    pub(crate) fn write(&mut self, seg: &Segment, bytes: &[u8]) -> Result<usize, Corrupt> {
        let n = bytes.len().min(self.room_for(seg, bytes.len())?);
        if n > 0 {
            // SAFETY: `n ≤ room ≤ RING_BYTES` bytes of `bytes`, into free ring space.
            unsafe { self.copy_in(seg, &bytes[..n]) };
            self.publish(seg, n);
        }
        Ok(n)
    }

    /// Copies `bytes` into the ring at the written position (not published).
    ///
    /// # Safety
    /// `bytes.len()` bytes from the written position are free ring space.
    unsafe fn copy_in(&self, seg: &Segment, bytes: &[u8]) {
        // SAFETY: free ring space (the caller's contract); the source is only read.
        unsafe {
            copy_wrapped(
                seg,
                self.ring,
                self.head,
                bytes.as_ptr().cast_mut(),
                bytes.len(),
                true,
            )
        };
    }

    /// Publishes the next `n` bytes, copied in before, to the consumer.
    fn publish(&mut self, seg: &Segment, n: usize) {
        self.head += n as u64;
        // ORDERING: Release publishes the bytes copied in before with the new head.
        seg.header(self.ring)
            .head
            .0
            .store(self.head, Ordering::Release);
    }

    /// Writes a whole frame or nothing: `head`, then `len` bytes that `fill(dst, n)` copies in
    /// (called for at most two pieces, in order, across the wrap), published together once
    /// every piece is in. `Ok(None)`: no room for all of it now; `Ok(Some(Err))`: `fill`
    /// failed, and nothing was published (the next frame overwrites what was copied).
    pub(crate) fn write_whole<E>(
        &mut self,
        seg: &Segment,
        head: &[u8],
        len: usize,
        mut fill: impl FnMut(*mut u8, usize) -> Result<(), E>,
    ) -> Result<Option<Result<(), E>>, Corrupt> {
        let total = head.len() + len;
        if total > self.room_for(seg, total)? {
            return Ok(None);
        }
        // SAFETY: `head.len() ≤ room` bytes of `head`, into free ring space.
        unsafe { self.copy_in(seg, head) };
        // The pieces are free ring space (room checked).
        for (dst, n) in pieces(seg, self.ring, self.head + head.len() as u64, len) {
            if n > 0 {
                if let Err(e) = fill(dst, n) {
                    return Ok(Some(Err(e)));
                }
            }
        }
        self.publish(seg, total);
        Ok(Some(Ok(())))
    }

    /// Says the producer waits for room (the consumer wakes it when it frees some).
    pub(crate) fn set_starved(&self, seg: &Segment) {
        seg.header(self.ring)
            .flags
            .starved
            .store(1, Ordering::SeqCst);
    }

    /// Whether the consumer's engine naps and must be woken now: not while a program thread
    /// of its process polls the ring (it takes what we wrote); otherwise clears the word (one
    /// wake-up serves every later write until it naps again).
    pub(crate) fn consumer_napping(&self, seg: &Segment) -> bool {
        // ORDERING: the full fence orders the head store before this load, pairing with the
        // consumer's SeqCst store of `napping` before its last look: either it sees our bytes
        // or we see it napping.
        fence(Ordering::SeqCst);
        let flags = &seg.header(self.ring).flags;
        if flags.napping.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let polled = seg.header(self.ring).polled_ns.0.load(Ordering::Relaxed);
        if monotonic_ns().saturating_sub(polled) < POLLED_RECENTLY.as_nanos() as u64 {
            return false;
        }
        flags.napping.swap(0, Ordering::AcqRel) != 0
    }
}

impl Consumer {
    pub(crate) fn new(dir: Dir) -> Self {
        Self {
            ring: dir as usize,
            tail: 0,
            head_seen: 0,
        }
    }

    /// Bytes written and not yet consumed: those the producer's count last read announced,
    /// while some are left (no read of the shared line), else as the shared count says now.
    pub(crate) fn available(&mut self, seg: &Segment) -> Result<usize, Corrupt> {
        let known = self.head_seen.wrapping_sub(self.tail);
        if known > 0 && known <= RING_BYTES as u64 {
            return Ok(known as usize);
        }
        self.available_now(seg)
    }

    /// Bytes written and not yet consumed, as the producer's count says now.
    pub(crate) fn available_now(&mut self, seg: &Segment) -> Result<usize, Corrupt> {
        // ORDERING: Acquire pairs with the producer's Release store of `head`.
        let head = seg.header(self.ring).head.0.load(Ordering::Acquire);
        let n = head.wrapping_sub(self.tail);
        if n > RING_BYTES as u64 {
            return Err(Corrupt(format!(
                "the producer claims {head} bytes written, {} consumed",
                self.tail
            )));
        }
        self.head_seen = head;
        Ok(n as usize)
    }

    /// Copies `buf.len()` bytes starting `skip` bytes past the consumed position, without
    /// consuming them. The caller has seen `skip + buf.len()` bytes available.
    pub(crate) fn peek(&self, seg: &Segment, skip: usize, buf: &mut [u8]) {
        // SAFETY: `buf` is ours, `buf.len()` bytes; the caller has seen them available.
        unsafe { self.peek_into(seg, skip, buf.as_mut_ptr(), buf.len()) };
    }

    /// [`Consumer::peek`] into `n` bytes at `dst`, which may be uninitialised (a buffer's
    /// spare capacity: no slice is made over it).
    ///
    /// # Safety
    /// `dst` is valid for writing `n` bytes; the caller has seen `skip + n` bytes available.
    pub(crate) unsafe fn peek_into(&self, seg: &Segment, skip: usize, dst: *mut u8, n: usize) {
        debug_assert!(skip + n <= RING_BYTES);
        // SAFETY: `dst` is the caller's, for `n` bytes; the bytes are inside the ring.
        unsafe { copy_wrapped(seg, self.ring, self.tail + skip as u64, dst, n, false) };
    }

    /// Where the `n` bytes at the consumed position lie in the ring: at most two pieces
    /// (across the wrap), in order. The caller has seen `n` bytes available; they stay valid
    /// (the producer does not overwrite them) until they are consumed.
    pub(crate) fn span(&self, seg: &Segment, n: usize) -> RingSpan {
        let [(a, first), (b, rest)] = pieces(seg, self.ring, self.tail, n);
        RingSpan {
            pieces: [(a.cast_const(), first), (b.cast_const(), rest)],
        }
    }

    /// Consumes `n` bytes (already peeked or to be skipped); whether the producer asked to be
    /// woken when room appears.
    pub(crate) fn consume(&mut self, seg: &Segment, n: usize) -> bool {
        self.tail += n as u64;
        let h = seg.header(self.ring);
        // ORDERING: Release: the bytes were copied out before the space is handed back.
        h.tail.0.store(self.tail, Ordering::Release);
        fence(Ordering::SeqCst);
        h.flags.starved.load(Ordering::Relaxed) != 0
            && h.flags.starved.swap(0, Ordering::AcqRel) != 0
    }

    /// Says whether this end's engine naps (producers wake it while it does).
    pub(crate) fn set_napping(&self, seg: &Segment, napping: bool) {
        seg.header(self.ring)
            .flags
            .napping
            .store(u32::from(napping), Ordering::SeqCst);
    }
}

/// Says a program thread of this process polls ring `dir` (the one it consumes): at `now`
/// ([`monotonic_ns`]), or `u64::MAX` while it is in a pass.
pub(crate) fn set_polled(seg: &Segment, dir: Dir, now: u64) {
    seg.header(dir as usize)
        .polled_ns
        .0
        .store(now, Ordering::Relaxed);
}

/// Wakes an engine that naps on its eventfd.
pub(crate) fn wake(fd: &OwnedFd) {
    // A full counter (EAGAIN) already means "awake"; other errors leave the nap to time out.
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_cross_the_wrap_in_order_and_corrupt_counters_are_caught() {
        let seg = Segment::create().unwrap();
        let mut p = Producer::new(Dir::Requests);
        let mut c = Consumer::new(Dir::Requests);
        // Walk the positions across the wrap several times with odd sizes.
        let mut sent = 0u64;
        let mut got = 0u64;
        let chunk: Vec<u8> = (0..300_001u32).map(|i| (i % 251) as u8).collect();
        while got < 5 * RING_BYTES as u64 {
            let n = p
                .write(&seg, &chunk[(sent % 251) as usize..][..100_000])
                .unwrap();
            sent += n as u64;
            let avail = c.available(&seg).unwrap();
            let mut buf = vec![0u8; avail];
            c.peek(&seg, 0, &mut buf);
            for (i, b) in buf.iter().enumerate() {
                assert_eq!(
                    *b,
                    ((got + i as u64) % 251) as u8,
                    "byte {}",
                    got + i as u64
                );
            }
            c.consume(&seg, avail);
            got += avail as u64;
        }
        assert_eq!(got, sent);
        // A producer claiming more than the ring holds, and a consumer running ahead.
        seg.header(0)
            .head
            .0
            .store(got + RING_BYTES as u64 + 1, Ordering::Release);
        assert!(c.available(&seg).is_err());
        seg.header(0).tail.0.store(sent + 1, Ordering::Release);
        assert!(p.room(&seg).is_err());
    }

    #[test]
    fn a_napping_consumer_is_woken_unless_its_process_polls() {
        let seg = Segment::create().unwrap();
        let p = Producer::new(Dir::Requests);
        let c = Consumer::new(Dir::Requests);
        assert!(!p.consumer_napping(&seg), "awake: no wake-up");
        c.set_napping(&seg, true);
        // A program thread polled just now: it takes the frame, the engine sleeps on.
        set_polled(&seg, Dir::Requests, monotonic_ns());
        assert!(!p.consumer_napping(&seg));
        // In a pass however long: the same.
        set_polled(&seg, Dir::Requests, u64::MAX);
        assert!(!p.consumer_napping(&seg));
        // Polled long ago: wake it, once.
        set_polled(
            &seg,
            Dir::Requests,
            monotonic_ns() - 10 * POLLED_RECENTLY.as_nanos() as u64,
        );
        assert!(p.consumer_napping(&seg));
        assert!(
            !p.consumer_napping(&seg),
            "one wake-up serves until it naps again"
        );
    }

    #[test]
    fn an_unsealed_or_resized_segment_is_refused() {
        let fd = rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, SEGMENT_BYTES as u64).unwrap();
        assert!(Segment::open(fd).is_err());
        use rustix::fs::{MemfdFlags, SealFlags};
        let fd =
            rustix::fs::memfd_create("t", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
        rustix::fs::ftruncate(&fd, 4096).unwrap();
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .unwrap();
        assert!(Segment::open(fd).is_err());
    }
}
