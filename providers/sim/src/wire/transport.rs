//! Connections between process fabrics: the socket connects, proves who is at the other end
//! and tells when it is gone; the frames travel through shared-memory rings ([`super::ring`]),
//! written and read by the engines themselves — no thread sits between an engine and its peer.
//!
//! **Setting up.** The connecting fabric (the requester: each process whose QP moves to RTR
//! towards a QP of another connects to it then, so each pair of processes with QPs connected
//! both ways has one connection each way) opens the peer fabric's abstract
//! socket, checks its credentials (`SO_PEERCRED`: same user), makes a sealed segment and sends
//! a *hello* naming its own fabric with two descriptors attached: the segment and its engine's
//! eventfd. The accepting fabric believes the hello only if the listener of the fabric it names
//! belongs to the connecting process, checks the segment's seals and size, maps it and answers
//! with a *welcome* carrying its own eventfd. After that the socket carries nothing: each end
//! has one thread blocked on it that marks the connection dead at end of stream (the peer's
//! process ended, or closed it), and the engines see that.
//!
//! Bounds, each against a peer that misbehaves (or is stopped with `kill -STOP`):
//! - requests: a connection's request ring is its inbox (4 MiB); an engine takes a request
//!   only when its response fits the connection's send queue, so a peer that does not read its
//!   responses stops being served (and its ring fills), never costs memory;
//! - a frame's payload is allocated as its bytes arrive, never from what a header announces;
//! - frames waiting to be written: a byte budget per connection ([`OUT_BUDGET_BYTES`]); over
//!   it the engine leaves the request (or the request it would answer) for later;
//! - a peer that stops reading: once no byte has moved for the wire timeout the connection is
//!   closed (its requesters then fail with `RETRY_EXC_ERR`);
//! - a response is taken only for an outstanding request of its QP and sequence number, and
//!   only up to the length that request can be answered with;
//! - connections accepted: [`MAX_INBOUND_CONNS`] at once; more are refused;
//! - connections that never say hello: closed after [`HELLO_TIMEOUT`].

use std::collections::VecDeque;

// Keys are this process's QPs and the fabrics it connected to (looked up per request and
// response; no peer can insert any).
use rustc_hash::FxHashMap as HashMap;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

pub(crate) use super::ring::RingSpan;
use super::ring::{Consumer, Dir, Producer, Segment, wake};
use super::{
    BadFrame, HEADER_BYTES, KIND_HELLO, KIND_VERIFIED, KIND_VERIFY, KIND_WELCOME, Request,
    Response, handshake, handshake_with, parse_header, warn,
};

/// Frames queued on one connection and not yet written into its ring, in bytes.
pub(crate) const OUT_BUDGET_BYTES: usize = 64 << 20;
/// Connections a fabric serves at once (each has a thread watching its socket).
pub(crate) const MAX_INBOUND_CONNS: usize = 256;
/// How long an accepted connection may take to say hello.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// The default wire timeout ([`Wire::timeout`]).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// The least time between two connections to a peer fabric (after one died).
const RECONNECT_GAP: Duration = Duration::from_millis(50);
/// Frames an engine takes from one connection per scan (the others get their turn).
const FRAMES_PER_SCAN: usize = 64;
/// Stack of the per-connection threads (they hold no large buffers on it).
const THREAD_STACK_BYTES: usize = 128 << 10;

/// `CLOCK_MONOTONIC` in nanoseconds: a clock that fits an atomic. Inside an
/// engine pass ([`PassClock`]) it is the time the pass began: a pass takes microseconds, every
/// deadline it checks is milliseconds or more, and one clock read per pass instead of one per
/// frame and per request is what the rate of small requests needs.
pub(crate) fn now_ns() -> u64 {
    pass_now().unwrap_or_else(read_now_ns)
}

/// The clock of the engine pass this thread runs ([`PassClock`]), if it runs one.
pub(crate) fn pass_now() -> Option<u64> {
    PASS_NOW.with(std::cell::Cell::get)
}

/// `CLOCK_MONOTONIC` (what `Instant` reads on Linux), also the clock of the rings' polling
/// marks: a pass reads it once for both.
pub(crate) fn read_now_ns() -> u64 {
    super::ring::monotonic_ns()
}

thread_local! {
    /// [`now_ns`] for the pass this thread runs, if any.
    static PASS_NOW: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// The clock of one engine pass: while it lives, [`now_ns`] on this thread returns the time it
/// was made. Nothing in a pass waits for time to pass.
pub(crate) struct PassClock(());

impl PassClock {
    pub(crate) fn start() -> Self {
        PASS_NOW.with(|c| c.set(Some(read_now_ns())));
        Self(())
    }
}

impl Drop for PassClock {
    fn drop(&mut self) {
        PASS_NOW.with(|c| c.set(None));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A frame (or what is left of it) waiting for room in the ring.
struct OutFrame {
    head: Vec<u8>,
    payload: Vec<u8>,
    /// Bytes of `head` then `payload` already written.
    sent: usize,
}

impl OutFrame {
    fn size(&self) -> usize {
        self.head.len() + self.payload.len()
    }
    /// Writes what fits; whether the frame is done.
    fn push(&mut self, seg: &Segment, ring: &mut Producer) -> Result<bool, super::ring::Corrupt> {
        while self.sent < self.size() {
            let part = if self.sent < self.head.len() {
                &self.head[self.sent..]
            } else {
                &self.payload[self.sent - self.head.len()..]
            };
            let n = ring.write(seg, part)?;
            self.sent += n;
            if n < part.len() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// A frame's payload to send: the caller's buffer, or bytes it keeps.
enum Body<'a> {
    Owned(Vec<u8>),
    Borrowed(&'a [u8]),
}

impl Body<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Body::Owned(v) => v,
            Body::Borrowed(b) => b,
        }
    }
    fn into_vec(self) -> Vec<u8> {
        match self {
            Body::Owned(v) => v,
            Body::Borrowed(b) => b.to_vec(),
        }
    }
}

/// The writing side of a connection.
struct Tx {
    ring: Producer,
    queue: VecDeque<OutFrame>,
    /// Bytes of `queue` not yet written.
    queued: usize,
    /// When the queue last became non-empty or moved ([`now_ns`]): it stalls from then.
    since_ns: u64,
}

/// A frame being read: its header and body, and the payload so far.
struct Partial {
    /// The body (`body_len` bytes of it): no allocation per frame.
    body: [u8; super::MAX_BODY_BYTES],
    body_len: usize,
    len: usize,
    payload: Vec<u8>,
    /// A response nobody waits for, or a request whose payload is not kept (`taken`): its
    /// payload is consumed, not kept.
    skip: bool,
    /// A request vetted before its payload ([`Vet::Refuse`], [`Vet::Stream`]).
    taken: Option<Taken>,
}

/// What the responder said of a request before taking its payload, and what came of it.
struct Taken {
    req: Request,
    /// What to answer: a refusal, or — streamed — success until a piece fails.
    status: u32,
    /// A WRITE's region, and whether its responder QP is still in service: its payload goes
    /// straight there as it comes.
    to: Option<(Arc<crate::mem::MrInner>, InService)>,
    /// Bytes of the payload consumed so far.
    done: u64,
}

impl Taken {
    /// The next piece of a vetted request's payload: a streamed WRITE's goes to its region
    /// while every piece so far did and its QP is in service; anything else is dropped.
    fn stream(&mut self, span: &RingSpan) {
        let ok = gda_hal::WcStatus::Success as u32;
        if let Some((mr, in_service)) = &self.to
            && self.status == ok
        {
            if !in_service() {
                // Out of service meanwhile: nothing more lands; answered as a QP not in
                // service answers.
                self.status = gda_hal::WcStatus::RetryExcErr as u32;
            } else {
                let mut at = self.req.raddr + self.done;
                for (src, n) in span.pieces {
                    // SAFETY: `[raddr, raddr + len)` was checked against `mr` for REMOTE_WRITE
                    // and `done + span.len() ≤ len`; `mr` is pinned per copy (a region
                    // deregistered meanwhile fails it); the ring's piece is valid for `n`
                    // bytes until consumed.
                    let r = unsafe { crate::mem::dma_copy_pinned(&[mr], at as *mut u8, src, n) };
                    if r.is_err() {
                        self.status = gda_hal::WcStatus::RemAccessErr as u32;
                        break;
                    }
                    at += n as u64;
                }
            }
        }
        self.done += span.len() as u64;
    }
}

/// What a responder says of a request whose payload has not arrived whole, before any of the
/// payload is taken (so a peer cannot make it hold what it has no right to send).
pub(crate) enum Vet {
    /// Keep the payload as it comes (a SEND to its connected QP at the PSN it expects).
    Buffer,
    /// Not taken: the payload is consumed unread and the request answered with this status
    /// (not its connected QP, a wrong PSN, a bad key or range, no QP in service).
    Refuse(u32),
    /// A WRITE with every check passed: its payload goes straight into the region, piece by
    /// piece as it comes (the region pinned per piece, the QP still in service), nothing held.
    Stream(Arc<crate::mem::MrInner>, InService),
}

/// Whether a streamed WRITE's responder QP is still in service (RTR or RTS), asked before each
/// piece.
pub(crate) type InService = Box<dyn Fn() -> bool + Send + Sync>;

/// The reading side of a connection.
struct Rx {
    ring: Consumer,
    partial: Option<Partial>,
}

/// A frame an engine took from a connection.
pub(crate) enum Incoming {
    Request(Request),
    /// A WRITE or SEND whose payload is still in the ring ([`Conn::release`] consumes it).
    InRing(Request, RingSpan),
    Response(Response),
    /// A request vetted before its payload came ([`Vet`]): its payload is consumed (streamed
    /// into its region, or dropped) and it is answered with this status — on success (a
    /// streamed WRITE) after the responder's checks again.
    Taken(Request, u32),
}

/// One connection to a peer fabric: requests this process sends and their responses (one it
/// made), or requests a peer sends and this process's responses (one it accepted).
pub(crate) struct Conn {
    pub(crate) id: u64,
    /// The peer's fabric: the one this process connected to, or the one an accepted peer
    /// proved it owns (its hello).
    pub(crate) peer: u64,
    /// Requests come in and responses go out (or the other way round).
    pub(crate) accepted: bool,
    sock: UnixStream,
    seg: Segment,
    tx: Mutex<Tx>,
    /// `Tx::queued`, readable without the lock ([`Conn::has_room`]).
    queued: AtomicUsize,
    rx: Mutex<Rx>,
    dead: AtomicBool,
    /// When it died ([`now_ns`]).
    died_ns: AtomicU64,
    /// When bytes last moved on the connection, either way ([`now_ns`]).
    progress: AtomicU64,
    /// The peer engine's eventfd (an accepted connection has it from the hello, one this
    /// process made from the welcome).
    peer_wake: OnceLock<OwnedFd>,
    /// A request that found no receive posted, held a moment before it is answered RNR, and
    /// when it was first tried ([`now_ns`]).
    held: Mutex<Option<(Request, u64)>>,
    /// Direct placement, as the responder (an accepted connection): the gates handed out.
    gates: Mutex<super::direct::Gates>,
    /// Direct placement, as the requester (a connection this process made): the grants held,
    /// by (requester NIC, requester QP, rkey).
    grants: Mutex<HashMap<(u32, u32, u32), Arc<super::direct::Grant>>>,
    /// How many `grants` holds, as its last change left it: a requester that holds none (most
    /// connections, and every one before its first grant) looks no further, without the lock.
    grants_held: AtomicUsize,
    /// The fabric's count of direct placements ([`Wire::placed`]).
    pub(crate) placed: Arc<AtomicU64>,
    wire: Weak<Wire>,
}

impl Drop for Conn {
    /// A SEND still held for a receive goes with the connection: its count too.
    fn drop(&mut self) {
        let held = self
            .held
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if held {
            if let Some(w) = self.wire.upgrade() {
                w.held.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// The rings of each side: a connector writes requests and reads responses.
fn dirs(accepted: bool) -> (Dir, Dir) {
    if accepted {
        (Dir::Responses, Dir::Requests)
    } else {
        (Dir::Requests, Dir::Responses)
    }
}

impl Conn {
    fn new(
        wire: &Arc<Wire>,
        sock: UnixStream,
        seg: Segment,
        peer: u64,
        accepted: bool,
        peer_wake: Option<OwnedFd>,
    ) -> Self {
        let (out, inn) = dirs(accepted);
        let w = OnceLock::new();
        if let Some(fd) = peer_wake {
            let _ = w.set(fd);
        }
        Self {
            id: wire.next_conn.fetch_add(1, Ordering::Relaxed),
            peer,
            accepted,
            sock,
            seg,
            tx: Mutex::new(Tx {
                ring: Producer::new(out),
                queue: VecDeque::new(),
                queued: 0,
                since_ns: 0,
            }),
            queued: AtomicUsize::new(0),
            rx: Mutex::new(Rx {
                ring: Consumer::new(inn),
                partial: None,
            }),
            dead: AtomicBool::new(false),
            died_ns: AtomicU64::new(0),
            progress: AtomicU64::new(now_ns()),
            peer_wake: w,
            held: Mutex::new(None),
            gates: Mutex::default(),
            grants: Mutex::default(),
            grants_held: AtomicUsize::new(0),
            placed: wire.placed.clone(),
            wire: Arc::downgrade(wire),
        }
    }

    /// The peer is gone (end of stream, a protocol error, a stall).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Closes the connection: its thread ends, its requesters see it dead.
    pub(crate) fn kill(&self) {
        if self.dead.swap(true, Ordering::AcqRel) {
            return;
        }
        self.died_ns.store(now_ns(), Ordering::Relaxed);
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        if let Some(w) = self.wire.upgrade() {
            w.conns_changed();
            w.kick();
        }
    }

    fn broken(&self, why: &str) {
        if !self.is_dead() {
            warn(format_args!(
                "closing the connection with fabric {:#x}: {why}",
                self.peer
            ));
        }
        self.kill();
    }

    /// How long nothing has moved on the connection, counting from `since_ns` at the latest.
    pub(crate) fn idle(&self, since_ns: u64) -> Duration {
        let last = self.progress.load(Ordering::Relaxed).max(since_ns);
        Duration::from_nanos(now_ns().saturating_sub(last))
    }

    fn stamp(&self) {
        self.progress.store(now_ns(), Ordering::Relaxed);
    }

    fn wake_peer(&self) {
        if let Some(fd) = self.peer_wake.get() {
            wake(fd);
        }
    }

    /// Whether a frame of `bytes` fits in the send queue now (one frame of any size fits an
    /// empty queue).
    pub(crate) fn has_room(&self, bytes: usize) -> bool {
        // The queue's size as its last change left it (no lock: asked once per request).
        let queued = self.queued.load(Ordering::Relaxed);
        queued == 0 || queued + bytes <= OUT_BUDGET_BYTES
    }

    /// Writes a frame whose payload (`len` bytes) `fill(dst, n)` copies straight into the
    /// ring, when nothing is queued and the whole frame fits now: `Ok(true)`. `Ok(false)`:
    /// nothing was sent (no room, or the connection is dead): stage the payload and
    /// [`Conn::send`] it. `Err`: `fill` failed, nothing was sent.
    pub(crate) fn send_direct<E>(
        &self,
        head: &[u8],
        len: usize,
        fill: impl FnMut(*mut u8, usize) -> Result<(), E>,
    ) -> Result<bool, E> {
        if self.is_dead() {
            return Ok(false);
        }
        let mut q = lock(&self.tx);
        if !q.queue.is_empty() {
            return Ok(false);
        }
        let q = &mut *q;
        match q.ring.write_whole(&self.seg, head, len, fill) {
            Ok(None) => Ok(false),
            Ok(Some(Ok(()))) => {
                if q.ring.consumer_napping(&self.seg) {
                    self.wake_peer();
                }
                Ok(true)
            }
            Ok(Some(Err(e))) => Err(e),
            Err(c) => {
                self.broken(&c.0);
                Ok(false)
            }
        }
    }

    /// Writes a frame into the ring, queueing what does not fit (written by later
    /// [`Conn::flush`]es); `false` when the connection is dead.
    pub(crate) fn send(&self, head: &[u8], payload: Vec<u8>) -> bool {
        self.send_frame(head, Body::Owned(payload))
    }

    /// [`Conn::send`] of a payload the caller keeps: copied into the ring, and into a buffer
    /// only when it must wait for room.
    pub(crate) fn send_copy(&self, head: &[u8], payload: &[u8]) -> bool {
        self.send_frame(head, Body::Borrowed(payload))
    }

    fn send_frame(&self, head: &[u8], payload: Body<'_>) -> bool {
        if self.is_dead() {
            return false;
        }
        let mut q = lock(&self.tx);
        let q = &mut *q;
        if q.queue.is_empty() {
            // The whole frame at once when it fits (no buffer for the head, none for a
            // borrowed payload).
            let bytes = payload.bytes();
            let mut off = 0usize;
            let whole = q.ring.write_whole(&self.seg, head, bytes.len(), |dst, n| {
                // SAFETY: `write_whole` hands out ring pieces of `n` writable bytes, in order,
                // `bytes.len()` in all.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().add(off), dst, n) };
                off += n;
                Ok::<(), std::convert::Infallible>(())
            });
            match whole {
                Ok(Some(_)) => {
                    if q.ring.consumer_napping(&self.seg) {
                        self.wake_peer();
                    }
                    if let Body::Owned(v) = payload {
                        super::pool::recycle(v);
                    }
                    return true;
                }
                Ok(None) => {}
                Err(c) => {
                    self.broken(&c.0);
                    return false;
                }
            }
        }
        let mut f = OutFrame {
            head: head.to_vec(),
            payload: payload.into_vec(),
            sent: 0,
        };
        if q.queue.is_empty() {
            // What fits now goes now (a large payload streams as the peer reads).
            match f.push(&self.seg, &mut q.ring) {
                Ok(true) => {
                    if q.ring.consumer_napping(&self.seg) {
                        self.wake_peer();
                    }
                    super::pool::recycle(f.payload);
                    return true;
                }
                Ok(false) => q.ring.set_starved(&self.seg),
                Err(c) => {
                    self.broken(&c.0);
                    return false;
                }
            }
        }
        if q.queue.is_empty() {
            q.since_ns = now_ns();
        }
        q.queued += f.size() - f.sent;
        self.queued.store(q.queued, Ordering::Relaxed);
        q.queue.push_back(f);
        if q.ring.consumer_napping(&self.seg) {
            self.wake_peer();
        }
        true
    }

    /// Writes queued frames as the ring makes room; whether any byte moved. Closes the
    /// connection when frames have waited the wire timeout with no byte moving.
    pub(crate) fn flush(&self) -> bool {
        let mut guard = lock(&self.tx);
        if guard.queue.is_empty() {
            return false;
        }
        let q = &mut *guard;
        let mut moved = false;
        let mut broken = None;
        while let Some(f) = q.queue.front_mut() {
            let before = f.sent;
            let done = match f.push(&self.seg, &mut q.ring) {
                Ok(d) => d,
                Err(c) => {
                    broken = Some(c.0);
                    break;
                }
            };
            let n = f.sent - before;
            q.queued -= n;
            self.queued.store(q.queued, Ordering::Relaxed);
            moved |= n > 0;
            if !done {
                q.ring.set_starved(&self.seg);
                break;
            }
            if let Some(f) = q.queue.pop_front() {
                super::pool::recycle(f.payload);
            }
        }
        if moved {
            self.stamp();
            q.since_ns = now_ns();
            if q.ring.consumer_napping(&self.seg) {
                self.wake_peer();
            }
        } else if broken.is_none() {
            let limit = self.wire.upgrade().map_or(DEFAULT_TIMEOUT, |w| w.timeout());
            if self.idle(q.since_ns) > limit {
                broken = Some(format!("it read nothing for {limit:?}"));
            }
        }
        drop(guard);
        if let Some(m) = broken {
            self.broken(&m);
            return true;
        }
        moved
    }

    /// Takes the next whole frame from the ring, if one has arrived; `Err` (the connection is
    /// then closed) on a malformed frame. A request is taken only when `answer_fits` says its
    /// response (of at most the given payload) fits the send queue; a response only when
    /// `admit` says a request waits for it.
    fn take(
        &self,
        answer_fits: impl Fn(usize) -> bool,
        admit: impl Fn(&Response, usize) -> Admit,
        mut vet: impl FnMut(&Request) -> Vet,
    ) -> Result<Option<Incoming>, String> {
        let mut rx = lock(&self.rx);
        let rx = &mut *rx;
        let mut avail = rx.ring.available(&self.seg).map_err(|c| c.0)?;
        if rx.partial.is_none() {
            if avail < HEADER_BYTES {
                avail = rx.ring.available_now(&self.seg).map_err(|c| c.0)?;
            }
            if avail < HEADER_BYTES {
                return Ok(None);
            }
            let mut h = [0u8; HEADER_BYTES];
            rx.ring.peek(&self.seg, 0, &mut h);
            let (kind, body_len, len) = parse_header(&h).map_err(|e| e.to_string())?;
            let want = if self.accepted {
                super::KIND_REQUEST
            } else {
                super::KIND_RESPONSE
            };
            if kind != want {
                return Err(format!("a frame of kind {kind} where {want} comes"));
            }
            if avail < HEADER_BYTES + body_len + len {
                // What the producer's count said when last read is not the whole frame: read
                // it again.
                avail = rx.ring.available_now(&self.seg).map_err(|c| c.0)?;
            }
            if avail < HEADER_BYTES + body_len {
                return Ok(None);
            }
            let mut body_buf = [0u8; super::MAX_BODY_BYTES];
            let body = body_buf
                .get_mut(..body_len)
                .ok_or_else(|| format!("a frame body of {body_len} bytes"))?;
            rx.ring.peek(&self.seg, HEADER_BYTES, body);
            let body = &*body;
            let mut taken = None;
            let skip = if self.accepted {
                let req = Request::decode_head(body, len).map_err(|BadFrame(m)| m)?;
                if !answer_fits(req.answer_bytes()) {
                    return Ok(None);
                }
                // A WRITE or SEND that has arrived whole: its payload is copied from the ring
                // to its destination by the caller, which then consumes it (`release`; one
                // held for a receive keeps a copy).
                if matches!(req.op, super::ReqOp::Write | super::ReqOp::Send)
                    && len > 0
                    && avail >= HEADER_BYTES + body_len + len
                {
                    if rx.ring.consume(&self.seg, HEADER_BYTES + body_len) {
                        self.wake_peer();
                    }
                    self.stamp();
                    let span = rx.ring.span(&self.seg, len);
                    return Ok(Some(Incoming::InRing(req, span)));
                }
                // Its payload comes in pieces: vetted before any of it is taken.
                if len > 0
                    && avail < HEADER_BYTES + body_len + len
                    && req.op != super::ReqOp::WriteRun
                {
                    let (status, to) = match vet(&req) {
                        Vet::Buffer => (None, None),
                        Vet::Refuse(status) => (Some(status), None),
                        Vet::Stream(mr, in_service) => (
                            Some(gda_hal::WcStatus::Success as u32),
                            Some((mr, in_service)),
                        ),
                    };
                    taken = status.map(|status| Taken {
                        req,
                        status,
                        to,
                        done: 0,
                    });
                    taken.is_some()
                } else {
                    false
                }
            } else {
                let resp = Response::decode(body, Vec::new()).map_err(|BadFrame(m)| m)?;
                match admit(&resp, len) {
                    Admit::Land(slots) if avail >= HEADER_BYTES + body_len + len => {
                        // Arrived whole: its data goes from the ring to the READ's buffers.
                        if rx.ring.consume(&self.seg, HEADER_BYTES + body_len) {
                            self.wake_peer();
                        }
                        let span = rx.ring.span(&self.seg, len);
                        let landed = slots.land(resp.seq, self.id, &span);
                        if rx.ring.consume(&self.seg, len) {
                            self.wake_peer();
                        }
                        self.stamp();
                        // Without a slot now (its QP destroyed, or its request sent again
                        // under a new number) it is delivered to nobody, as a late one is.
                        return Ok(Some(Incoming::Response(match landed {
                            Some(Ok(())) => Response {
                                landed: true,
                                ..resp
                            },
                            Some(Err(status)) => Response {
                                status: status as u32,
                                ..resp
                            },
                            None => resp,
                        })));
                    }
                    // Not whole yet: read into a buffer, `finish` writes it.
                    Admit::Read | Admit::Land(_) => false,
                    Admit::Skip => true,
                    Admit::Refuse(m) => return Err(m),
                }
            };
            let whole = HEADER_BYTES + body_len + len;
            if !skip && avail >= whole {
                // Arrived whole (the usual case): taken at once, with one consume.
                let mut payload = if len > 0 {
                    super::pool::take(len)
                } else {
                    Vec::new()
                };
                // SAFETY: `len` bytes of reserved capacity, all written by `peek_into` before
                // the length covers them; the frame is available whole.
                unsafe {
                    rx.ring.peek_into(
                        &self.seg,
                        HEADER_BYTES + body_len,
                        payload.as_mut_ptr(),
                        len,
                    );
                    payload.set_len(len);
                }
                if rx.ring.consume(&self.seg, whole) {
                    self.wake_peer();
                }
                self.stamp();
                return if self.accepted {
                    Request::decode(body, payload)
                        .map(|r| Some(Incoming::Request(r)))
                        .map_err(|BadFrame(m)| m)
                } else {
                    Response::decode(body, payload)
                        .map(|r| Some(Incoming::Response(r)))
                        .map_err(|BadFrame(m)| m)
                };
            }
            if rx.ring.consume(&self.seg, HEADER_BYTES + body_len) {
                self.wake_peer();
            }
            avail -= HEADER_BYTES + body_len;
            rx.partial = Some(Partial {
                body: body_buf,
                body_len,
                len,
                payload: Vec::new(),
                skip,
                taken,
            });
        }
        let Some(p) = rx.partial.as_mut() else {
            return Ok(None);
        };
        let got = if p.skip { 0 } else { p.payload.len() };
        let left = p.len - got;
        let n = left.min(avail);
        if n > 0 {
            if !p.skip {
                // Grows with the bytes that arrived, never with what the header announced.
                if p.payload.capacity() == 0 {
                    p.payload = super::pool::take(n);
                } else {
                    p.payload.reserve(n);
                }
                let start = p.payload.len();
                // SAFETY: `n` bytes of reserved capacity, all written by `peek_into` before the
                // length covers them; `n` bytes are available.
                unsafe {
                    rx.ring
                        .peek_into(&self.seg, 0, p.payload.as_mut_ptr().add(start), n);
                    p.payload.set_len(start + n);
                }
            } else {
                if let Some(t) = p.taken.as_mut() {
                    t.stream(&rx.ring.span(&self.seg, n));
                }
                p.len -= n;
            }
            if rx.ring.consume(&self.seg, n) {
                self.wake_peer();
            }
            self.stamp();
        }
        let complete = if p.skip {
            p.len == 0
        } else {
            p.payload.len() == p.len
        };
        if !complete {
            return Ok(None);
        }
        let Some(p) = rx.partial.take() else {
            return Ok(None);
        };
        if let Some(t) = p.taken {
            return Ok(Some(Incoming::Taken(t.req, t.status)));
        }
        if p.skip {
            // A response to a request given up on (or never sent): not kept.
            return Ok(None);
        }
        if self.accepted {
            Request::decode(&p.body[..p.body_len], p.payload)
                .map(|r| Some(Incoming::Request(r)))
                .map_err(|BadFrame(m)| m)
        } else {
            Response::decode(&p.body[..p.body_len], p.payload)
                .map(|r| Some(Incoming::Response(r)))
                .map_err(|BadFrame(m)| m)
        }
    }

    /// Holds `req` (first tried at `since`) to be tried again before anything else.
    pub(crate) fn hold(&self, req: Request, since: u64) {
        if lock(&self.held).replace((req, since)).is_none() {
            if let Some(w) = self.wire.upgrade() {
                w.held.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// Consumes the payload of an [`Incoming::InRing`] request (copied out, or dropped).
    pub(crate) fn release(&self, span: RingSpan) {
        let mut rx = lock(&self.rx);
        if rx.ring.consume(&self.seg, span.len()) {
            self.wake_peer();
        }
    }

    /// The held request, if any.
    pub(crate) fn take_held(&self) -> Option<(Request, u64)> {
        let held = lock(&self.held).take();
        if held.is_some() {
            if let Some(w) = self.wire.upgrade() {
                w.held.fetch_sub(1, Ordering::AcqRel);
            }
        }
        held
    }

    /// Says whether this process's engine naps (the peer wakes it when it writes).
    pub(crate) fn set_napping(&self, napping: bool) {
        lock(&self.rx).ring.set_napping(&self.seg, napping);
    }

    /// Says a program thread of this process polls the connection now (`now`:
    /// [`monotonic_ns`](super::ring::monotonic_ns)).
    fn set_polled(&self, now: u64) {
        // The ring this end consumes is fixed by which end it is: no need for the lock.
        super::ring::set_polled(&self.seg, dirs(self.accepted).1, now);
    }

    /// Gate `i` of direct placement in the connection's segment.
    pub(crate) fn gate(&self, i: u16) -> Option<&super::ring::Gate> {
        self.seg.gate(i)
    }

    /// Waits for the socket to end (the peer's process ended or closed it), then marks the
    /// connection dead. After the handshake the socket carries only grants of direct placement
    /// (`super::direct`), from the acceptor to the connector; anything else breaks the
    /// protocol and closes the connection too.
    fn watch(&self) {
        use super::direct::GRANT_FRAME_BYTES;
        if self.accepted {
            // Nothing may come this way: a byte is enough to break the protocol.
            let mut b = [0u8; 1];
            loop {
                match rustix::io::read(&self.sock, &mut b) {
                    Err(rustix::io::Errno::INTR) => continue,
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        self.broken("it wrote on the socket after the handshake");
                        break;
                    }
                }
            }
            self.kill();
            return;
        }
        loop {
            match recv_with_fds::<GRANT_FRAME_BYTES>(&self.sock) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(None) => break,
                Err(e) => {
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                    ) {
                        self.broken(&format!("reading its socket: {e}"));
                    }
                    break;
                }
                Ok(Some((frame, fds))) => {
                    let mut fds = fds.into_iter();
                    let fd = fds.next();
                    let checked = if fds.next().is_some() {
                        Err("a grant with more than one descriptor".to_string())
                    } else {
                        super::direct::Grant::accept(&frame, fd)
                    };
                    let mut g = lock(&self.grants);
                    // A responder holds at most `GATES` grants open on a connection; more, or
                    // more mapped memory than `GRANTED_BYTES_MAX`, is a peer exhausting this
                    // process's address space.
                    let checked = checked.and_then(|(key, grant)| {
                        let others = g.iter().filter(|(k, _)| **k != key);
                        let bytes: u64 = others.clone().map(|(_, h)| h.mapped_bytes()).sum();
                        if others.count() >= usize::from(super::ring::GATES)
                            || bytes + grant.mapped_bytes() > super::direct::GRANTED_BYTES_MAX
                        {
                            Err("more grants than a responder can hold open".to_string())
                        } else {
                            Ok((key, grant))
                        }
                    });
                    match checked {
                        Ok((key, grant)) => {
                            g.insert(key, Arc::new(grant));
                            self.grants_held.store(g.len(), Ordering::Release);
                        }
                        Err(why) => {
                            self.broken(&why);
                            break;
                        }
                    }
                }
            }
        }
        self.kill();
    }
}

// ---- direct placement (`super::direct`): the connection's side of grants ------------------

/// A grant as its responder keeps it ([`crate::shared::Withdraw`]): which gate of which
/// connection, and the value it holds while the grant does.
#[derive(Debug)]
struct GrantRef {
    conn: Weak<Conn>,
    gate: u16,
    value: u32,
}

impl crate::shared::Withdraw for GrantRef {
    fn withdraw(&self, until: Option<std::time::Instant>) {
        if let Some(c) = self.conn.upgrade() {
            c.close_gate(self.gate, self.value, until);
        }
    }

    fn alive(&self) -> bool {
        // Its connection lives and its gate still holds it (a closed gate may serve another
        // grant since).
        self.conn.upgrade().is_some_and(|c| {
            c.seg
                .gate(self.gate)
                .is_some_and(|g| g.state.load(Ordering::Acquire) == self.value)
        })
    }
}

impl Conn {
    /// The grant this process holds for requester `(nic, qpn)` and `rkey` (a connection this
    /// process made).
    pub(crate) fn grant(&self, key: (u32, u32, u32)) -> Option<Arc<super::direct::Grant>> {
        // ORDERING: Acquire pairs with the Release stores after each change of `grants`; a
        // grant taken a moment ago and not seen yet only sends this request on the wire.
        if self.grants_held.load(Ordering::Acquire) == 0 {
            return None;
        }
        lock(&self.grants).get(&key).cloned()
    }

    /// Whether `key` was offered a grant (or found not grantable) already.
    pub(crate) fn offered(&self, key: super::direct::GrantKey) -> bool {
        lock(&self.gates).offered(&key)
    }

    /// Drops `grant`, found closed — not a newer grant that took its key since.
    pub(crate) fn forget_grant(&self, key: (u32, u32, u32), grant: &Arc<super::direct::Grant>) {
        let mut g = lock(&self.grants);
        if g.get(&key).is_some_and(|h| Arc::ptr_eq(h, grant)) {
            g.remove(&key);
        }
        self.grants_held.store(g.len(), Ordering::Release);
    }

    /// Offers requester QP `key.0, key.1` direct access to `mr` through responder QP
    /// `key.2, key.3` (an accepted connection, after a request from it on `mr` succeeded):
    /// opens a gate, keeps the grant in the region's and the QP's grants (to be closed), and
    /// sends it with the region's memory on the socket. Nothing when the region cannot be
    /// shared, every gate is in use, the region or the QP is leaving service, or the socket is
    /// full (a later request offers it again).
    ///
    /// The gate opens under the QP's grant list's lock, and the region's memory is held
    /// throughout, so a grant is either opened before the QP's (or region's) withdrawal takes
    /// its list — and closed by it — or never opened: whatever the interleaving with
    /// `modify_qp(ERR)`, a destroy or a deregistration, no grant outlives them.
    pub(crate) fn offer(
        self: &Arc<Self>,
        key: super::direct::GrantKey,
        mr: &crate::mem::MrInner,
        qp_grants: &crate::shared::Grants,
        port_up: &std::sync::atomic::AtomicBool,
    ) {
        let mut gates = lock(&self.gates);
        if gates.offered(&key) {
            return;
        }
        let Some(region) = mr.shared.as_ref() else {
            gates.refuse(key);
            return;
        };
        // Held until the grant is recorded (see `SharedRegion::backing`).
        let backing = region.backing();
        let Some(backing) = backing.as_ref() else {
            return;
        };
        let rights = super::direct::rights_of(mr.access);
        // A grant without a right to write hands over a descriptor opened read-only: the
        // kernel then refuses the requester a writable mapping of it (`mmap` or `mprotect`
        // with PROT_WRITE), whatever its code does. Not grantable when it cannot be opened.
        let read_only = if rights & super::direct::WRITING_RIGHTS == 0 {
            match super::direct::reopen_read_only(backing.fd()) {
                Ok(fd) => Some(fd),
                Err(_) => {
                    gates.refuse(key);
                    return;
                }
            }
        } else {
            None
        };
        let seg = &self.seg;
        let Some((gate, value)) = gates.take(|i| {
            seg.gate(i)
                .is_some_and(|g| g.inflight.load(Ordering::SeqCst) == 0)
        }) else {
            return;
        };
        let Some(g) = self.seg.gate(gate) else {
            return;
        };
        gates.record(key, gate);
        drop(gates);
        let r = || {
            Box::new(GrantRef {
                conn: Arc::downgrade(self),
                gate,
                value,
            })
        };
        let opened = qp_grants.open_with(r(), port_up, || {
            region.grants().push(r());
            // ORDERING: SeqCst, as every store and load of a gate's state (`close_gate`).
            g.state.store(value, Ordering::SeqCst);
        });
        if !opened {
            // The QP is in error or destroyed, or its NIC's port is down: the gate never
            // opened.
            lock(&self.gates).release(gate);
            return;
        }
        let f = super::direct::encode(key, rights, mr.addr, mr.len, gate, value, backing.offset());
        let fd = read_only.as_ref().map_or(backing.fd(), |fd| fd.as_fd());
        if send_with_fds(&self.sock, &f, &[fd]).is_err() {
            self.close_gate(gate, value, None);
        }
    }

    /// Closes gate `gate` if it still holds `value`; with `until`, then waits (at most until
    /// then, and not once the connection is dead) for placements through it to end. If some
    /// are still in progress when it stops waiting, the gate says so ([`ABANDONED`]): their
    /// requester checks the gate after its copy and reports an error for each, never success
    /// (the memory may have gone back to the program meanwhile, or the QP out of service); the
    /// gate is reused only once they have ended.
    ///
    /// [`ABANDONED`]: super::ring::ABANDONED
    pub(crate) fn close_gate(&self, gate: u16, value: u32, until: Option<std::time::Instant>) {
        let Some(g) = self.seg.gate(gate) else {
            return;
        };
        // ORDERING: SeqCst pairs with the requester's SeqCst `inflight` increment and `state`
        // loads (`engine::wire::place`): either it sees the gate closed, or the load below sees
        // it counted.
        if g.state
            .compare_exchange(value, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return;
        }
        if let Some(until) = until {
            while g.inflight.load(Ordering::SeqCst) != 0
                && !self.is_dead()
                && std::time::Instant::now() < until
            {
                std::thread::yield_now();
            }
        }
        if g.inflight.load(Ordering::SeqCst) == 0 {
            lock(&self.gates).release(gate);
        } else {
            // ORDERING: SeqCst: a placement whose check after its copy comes before this store
            // finished its copy before the caller goes on (frees, moves back) — it reported
            // success rightly; one whose check comes after sees it and reports an error.
            g.state.store(super::ring::ABANDONED, Ordering::SeqCst);
            lock(&self.gates).quarantine(gate);
        }
    }
}

/// What the engine does with a response's payload.
pub(crate) enum Admit {
    Read,
    /// A READ's data, to be written where its requester wants it straight from the ring
    /// ([`QpSlots::land`]).
    Land(QpSlots),
    Skip,
    Refuse(String),
}

/// Writes a READ's data where its requester wants it, straight from the ring, when its
/// response comes: made by the requester's engine when it sends the READ, run by the pass that
/// takes the response ([`QpSlots::land`]), which checks the local buffers then and pins them
/// while it writes, as `finish` does with a response's payload. Saves the copy through a
/// buffer: a 64-KiB READ stream is copied once on each side, as a WRITE stream is. `Err` is the
/// completion status of a local fault (the response then completes the READ with it).
pub(crate) type Landing = Box<dyn FnOnce(&RingSpan) -> Result<(), gda_hal::WcStatus> + Send>;

/// The outstanding requests of one requester QP, in the order they were sent, with their
/// responses as they come: shared by the QP's engine (which sends and completes them) and the
/// pass that takes responses from the connection.
#[derive(Clone, Default)]
pub(crate) struct QpSlots(Arc<SlotTable>);

#[derive(Default)]
struct SlotTable {
    slots: Mutex<VecDeque<Slot>>,
    /// The newest `seq` a response was delivered for (sequence numbers only grow): a request
    /// newer than it has no response yet, which the QP's engine learns without the lock.
    answered: AtomicU64,
}

impl QpSlots {
    /// The table itself.
    fn table(&self) -> MutexGuard<'_, VecDeque<Slot>> {
        lock(&self.0.slots)
    }

    /// Records request `seq` as sent on `conn`; its response may carry up to `max` payload
    /// bytes. Requests of one QP are answered in order.
    pub(crate) fn expect(&self, seq: u64, conn: u64, max: u64) {
        self.expect_all(conn, [(seq, max, None)]);
    }

    /// Records the requests `(seq, max, landing)` as sent on `conn`, in order
    /// ([`QpSlots::expect`]).
    pub(crate) fn expect_all(
        &self,
        conn: u64,
        reqs: impl IntoIterator<Item = (u64, u64, Option<Landing>)>,
    ) {
        self.table()
            .extend(reqs.into_iter().map(|(seq, max, land)| Slot {
                seq,
                conn,
                max,
                resp: None,
                land,
            }));
    }

    /// Runs the landing of request `seq` (sent on `conn`) over `span`, its response's data, with
    /// the slot table locked: a QP destroyed meanwhile ([`Wire::forget`] clears its table
    /// under that lock) has no slot left, and its buffers are not written after its destroy
    /// returned. `None` when the slot or its landing is gone.
    pub(crate) fn land(
        &self,
        seq: u64,
        conn: u64,
        span: &RingSpan,
    ) -> Option<Result<(), gda_hal::WcStatus>> {
        let mut q = self.table();
        let land = slot_index(&q, seq)
            .and_then(|i| q.get_mut(i))
            .filter(|s| s.conn == conn && s.resp.is_none())
            .and_then(|s| s.land.take())?;
        Some(land(span))
    }

    /// Moves the responses that have come for the oldest requests, from request `seq` (the
    /// oldest outstanding) on and in order, into `into` (one lock for all of them).
    pub(crate) fn take_answered(&self, seq: u64, into: &mut VecDeque<Response>) {
        // ORDERING: Acquire pairs with `Wire::deliver`'s Release store, made after the slots
        // were filled (the lock below orders the rest).
        if self.0.answered.load(Ordering::Acquire) < seq {
            return;
        }
        let mut q = self.table();
        if q.front().is_none_or(|s| s.seq != seq) {
            return;
        }
        while let Some(r) = q.front_mut().and_then(|s| s.resp.take()) {
            into.push_back(r);
            q.pop_front();
        }
    }

    /// Takes back the slot of request `seq` that [`QpSlots::expect`] just made (the request
    /// was not sent after all).
    pub(crate) fn unexpect(&self, seq: u64) {
        let mut q = self.table();
        if q.back().is_some_and(|s| s.seq == seq) {
            q.pop_back();
        }
    }

    /// Forgets every outstanding request (given up, or to be sent again): late responses are
    /// skipped.
    pub(crate) fn clear(&self) {
        self.table().clear();
    }
}

/// A requester's slot for one outstanding request.
struct Slot {
    seq: u64,
    conn: u64,
    max: u64,
    resp: Option<Response>,
    /// Where its data goes when it is a READ's ([`Landing`]).
    land: Option<Landing>,
}

/// Where the slot of request `seq` is in `q` (slots are in increasing `seq` order, and
/// consecutive as requests are sent: found at once, by its distance from the first; a search
/// otherwise).
fn slot_index(q: &VecDeque<Slot>, seq: u64) -> Option<usize> {
    let first = q.front()?.seq;
    let at = usize::try_from(seq.wrapping_sub(first)).ok()?;
    if q.get(at).is_some_and(|s| s.seq == seq) {
        return Some(at);
    }
    q.iter().position(|s| s.seq == seq)
}

fn slot(q: &VecDeque<Slot>, seq: u64) -> Option<&Slot> {
    slot_index(q, seq).and_then(|i| q.get(i))
}

/// A pass's list of the live connections, kept between passes and brought up to date only
/// when one came or died ([`Wire::conns`]).
#[derive(Default)]
pub(crate) struct ConnList {
    /// [`Wire::conns_gen`] when `list` was made (`None`: never).
    made: Option<u64>,
    pub(crate) list: Vec<Arc<Conn>>,
}

/// How the transport wakes the engine of its fabric.
pub(crate) type Kick = Box<dyn Fn() + Send + Sync>;

/// This process's end of the message transport.
pub(crate) struct Wire {
    /// This fabric's id (what its hellos say).
    pub(crate) id: u64,
    /// Its engine naps on this eventfd; peers (and local doorbells) write it to wake it.
    wake_fd: OwnedFd,
    /// Outstanding requests and their responses, in order, by the requester's (NIC, QP).
    responses: Mutex<HashMap<(u32, u32), QpSlots>>,
    /// Connections to peer fabrics, by fabric id.
    out: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Connections made to peer fabrics so far (a statistic: `Fabric::stats`).
    made: AtomicU64,
    /// WRITEs and READs placed directly (`super::direct`), counted by the connections.
    placed: Arc<AtomicU64>,
    /// Every live connection, both ways (the engine serves them).
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Moves when a connection is added or dies (see [`Wire::conns`]).
    conns_gen: AtomicU64,
    /// Accepted connections open now.
    inbound: Arc<AtomicUsize>,
    next_conn: AtomicU64,
    /// Wakes this process's engine (set by [`Wire::start`]).
    kick: Mutex<Option<Kick>>,
    /// The wire timeout, in nanoseconds.
    timeout_ns: AtomicU64,
    /// When a program thread of this process last ran the engine's pass
    /// ([`monotonic_ns`](super::ring::monotonic_ns)).
    polled_ns: AtomicU64,
    /// The secret of each hello sent and not yet answered, by peer fabric: the peer may ask
    /// about it before it welcomes us, when it cannot see this process's pid (`authenticate`).
    proving: Mutex<HashMap<u64, u64>>,
    /// Connections holding a SEND that found no receive ([`Conn::hold`], given back by
    /// [`Conn::take_held`] or when the connection goes).
    held: AtomicUsize,
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

pub(crate) fn socket_name(fabric: u64) -> String {
    format!("gda-sim/{}/{fabric:016x}", uid())
}

/// The process at the other end of `s` (its pid as this process sees it, `None` when it lives
/// in a PID namespace this process cannot see), refusing a peer of another user.
pub(crate) fn check_peer(s: &UnixStream) -> io::Result<Option<u32>> {
    let cred = gda_os::process::peer_cred(s.as_fd())?;
    if cred.uid != uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "a process of uid {} (pid {}) is not this job's user",
                cred.uid,
                Shown(cred.pid)
            ),
        ));
    }
    Ok(cred.pid)
}

/// A peer's pid in messages: the number, or where it lives when this process cannot see it.
struct Shown(Option<u32>);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(p) => write!(f, "{p}"),
            None => f.write_str("hidden (another PID namespace)"),
        }
    }
}

/// Connects to the socket of `fabric` without waiting: a listener whose backlog is full (its
/// process stopped) is `WouldBlock`, not a hang.
pub(crate) fn connect_to(fabric: u64) -> io::Result<UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    let addr = SocketAddrUnix::new_abstract_name(socket_name(fabric).as_bytes())?;
    rustix::net::connect(&fd, &addr)?;
    rustix::io::ioctl_fionbio(&fd, false)?;
    Ok(UnixStream::from(fd))
}

/// Sends `bytes` with `fds` attached (one `sendmsg`, not waiting: the socket is new and empty).
pub(crate) fn send_with_fds(
    s: &UnixStream,
    bytes: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    if !anc.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other(
            "descriptors do not fit the control buffer",
        ));
    }
    let n = rustix::net::sendmsg(
        s,
        &[IoSlice::new(bytes)],
        &mut anc,
        SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
    )?;
    if n != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short handshake write",
        ));
    }
    Ok(())
}

/// Receives exactly `N` bytes and the descriptors attached to them (at most 2); `Ok(None)` at
/// an end of stream before the first byte.
pub(crate) fn recv_with_fds<const N: usize>(
    s: &UnixStream,
) -> io::Result<Option<([u8; N], Vec<OwnedFd>)>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut buf = [0u8; N];
    let mut fds = Vec::new();
    let mut got = 0;
    while got < N {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let r = rustix::net::recvmsg(
            s,
            &mut [IoSliceMut::new(&mut buf[got..])],
            &mut anc,
            RecvFlags::CMSG_CLOEXEC,
        );
        let r = match r {
            Ok(r) => r,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        for m in anc.drain() {
            if let RecvAncillaryMessage::ScmRights(it) = m {
                fds.extend(it);
            }
        }
        if r.bytes == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if r.flags.contains(rustix::net::ReturnFlags::CTRUNC) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "too many descriptors",
            ));
        }
        got += r.bytes;
    }
    Ok(Some((buf, fds)))
}

/// Receives a hello or welcome: (kind, the fabric it names, the descriptors attached);
/// `Ok(None)` at an end of stream before the first byte. The header is checked before the body
/// is waited for, so garbage is refused at once.
fn recv_handshake(s: &UnixStream) -> io::Result<Option<Handshake>> {
    let Some((h, mut fds)) = recv_with_fds::<HEADER_BYTES>(s)? else {
        return Ok(None);
    };
    match parse_header(&h)? {
        (k @ (KIND_HELLO | KIND_WELCOME | KIND_VERIFY | KIND_VERIFIED), 16, 0) => {
            let Some((b, more)) = recv_with_fds::<16>(s)? else {
                return Err(io::ErrorKind::UnexpectedEof.into());
            };
            fds.extend(more);
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[i..i + 8]);
                u64::from_le_bytes(w)
            };
            Ok(Some(Handshake {
                kind: k,
                fabric: word(0),
                secret: word(8),
                fds,
            }))
        }
        (k, _, _) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of kind {k} where the handshake comes"),
        )),
    }
}

/// A handshake frame as received.
struct Handshake {
    kind: u16,
    fabric: u64,
    secret: u64,
    fds: Vec<OwnedFd>,
}

/// Checks that `fd` is an eventfd and makes writes to it non-blocking, so waking the peer can
/// never block an engine (a peer could pass a full pipe instead).
fn check_eventfd(fd: &OwnedFd) -> io::Result<()> {
    let link = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(fd)
    ))?;
    if link.as_os_str() != "anon_inode:[eventfd]" {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the wake-up descriptor is {}, not an eventfd",
                link.display()
            ),
        ));
    }
    let fl = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, fl | rustix::fs::OFlags::NONBLOCK)?;
    Ok(())
}

/// Whether the peer of a connection (pid `pid`) that sent a hello naming `fabric` with
/// `secret` owns that fabric, asked by fabric `me`. A process can claim only its own fabrics (a
/// fabric id is unique on the host while its listener lives): the listener of that fabric's
/// socket must belong to the same process — by pid when this process sees both pids, else
/// (peers in another PID namespace, as in containers, where the kernel shows no pid) by asking
/// the fabric's listener whether it sent that secret to `me`. The secret went only to `me`, so
/// an impostor cannot name it, and the owner's answer says nothing to anyone else who asks.
fn authenticate(me: u64, pid: Option<u32>, fabric: u64, secret: u64) -> Result<(), String> {
    if !super::is_process_fabric(fabric) {
        return Err(format!("its hello names {fabric:#x}, not a process fabric"));
    }
    let probe = connect_to(fabric)
        .map_err(|e| format!("its hello names fabric {fabric:#x}, which does not listen ({e})"))?;
    let owner = check_peer(&probe).map_err(|e| format!("fabric {fabric:#x}: {e}"))?;
    match (pid, owner) {
        (Some(p), Some(o)) if p == o => Ok(()),
        (None, None) if secret != 0 => {
            let asked = probe.set_read_timeout(Some(HELLO_TIMEOUT)).is_ok()
                && send_with_fds(&probe, &handshake_with(KIND_VERIFY, me, secret), &[]).is_ok();
            match recv_handshake(&probe) {
                Ok(Some(h))
                    if asked
                        && h.kind == KIND_VERIFIED
                        && h.fabric == fabric
                        && h.secret == secret =>
                {
                    Ok(())
                }
                _ => Err(format!(
                    "its hello names fabric {fabric:#x}, whose owner (its pid hidden in \
                     another PID namespace) did not send it"
                )),
            }
        }
        _ => Err(format!(
            "its hello names fabric {fabric:#x}, which belongs to pid {}, not to pid {}",
            Shown(owner),
            Shown(pid)
        )),
    }
}

/// Answers a fabric that asks whether this process sent it a hello with `secret`.
fn answer_verify(w: &Wire, s: &UnixStream, asker: u64, secret: u64) {
    let sent = lock(&w.proving).get(&asker) == Some(&secret) && secret != 0;
    let _ = send_with_fds(
        s,
        &handshake_with(KIND_VERIFIED, w.id, if sent { secret } else { 0 }),
        &[],
    );
}

/// An accepted connection's place under [`MAX_INBOUND_CONNS`], given back when it ends.
struct InboundSlot(Arc<AtomicUsize>);

impl Drop for InboundSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(THREAD_STACK_BYTES)
        .spawn(f)
        .is_ok()
}

impl Wire {
    /// Listens for peers on the socket of fabric `id`; `Err(AddrInUse)` when the id is taken.
    pub(crate) fn listen(id: u64) -> io::Result<(Arc<Self>, UnixListener)> {
        let addr = SocketAddr::from_abstract_name(socket_name(id).as_bytes())?;
        let l = UnixListener::bind_addr(&addr)?;
        let wake_fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        let w = Arc::new(Self {
            id,
            wake_fd,
            responses: Mutex::new(HashMap::default()),
            out: Mutex::new(HashMap::default()),
            made: AtomicU64::new(0),
            placed: Arc::default(),
            conns: Mutex::new(Vec::new()),
            conns_gen: AtomicU64::new(0),
            inbound: Arc::new(AtomicUsize::new(0)),
            next_conn: AtomicU64::new(1),
            kick: Mutex::new(None),
            timeout_ns: AtomicU64::new(DEFAULT_TIMEOUT.as_nanos() as u64),
            polled_ns: AtomicU64::new(0),
            proving: Mutex::new(HashMap::default()),
            held: AtomicUsize::new(0),
        });
        Ok((w, l))
    }

    /// Starts accepting once the fabric exists; `kick` wakes its engine when a connection
    /// comes or goes.
    pub(crate) fn start(self: &Arc<Self>, l: UnixListener, kick: Kick) {
        *lock(&self.kick) = Some(kick);
        let me = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("gda-sim-accept".into())
            .spawn(move || {
                for s in l.incoming() {
                    let Some(w) = me.upgrade() else { return };
                    let Ok(s) = s else { continue };
                    let pid = match check_peer(&s) {
                        Ok(pid) => pid,
                        Err(e) => {
                            warn(format_args!("refused a connection: {e}"));
                            continue;
                        }
                    };
                    if w.inbound.fetch_add(1, Ordering::AcqRel) >= MAX_INBOUND_CONNS {
                        w.inbound.fetch_sub(1, Ordering::AcqRel);
                        warn(format_args!(
                            "refused a connection from pid {}: fabric {:#x} serves \
                             {MAX_INBOUND_CONNS} connections already",
                            Shown(pid),
                            w.id
                        ));
                        continue;
                    }
                    let slot = InboundSlot(w.inbound.clone());
                    let me = me.clone();
                    drop(w);
                    spawn("gda-sim-wire", move || serve_accepted(&me, s, pid, slot));
                }
            });
    }

    pub(crate) fn kick(&self) {
        if let Some(k) = lock(&self.kick).as_ref() {
            k();
        }
    }

    /// The engine's eventfd (it naps on it).
    pub(crate) fn wake_fd(&self) -> &OwnedFd {
        &self.wake_fd
    }

    /// Wakes this process's engine from its nap.
    pub(crate) fn wake_self(&self) {
        wake(&self.wake_fd);
    }

    /// How long a request may go with no byte moving on its connection before it fails
    /// (`RETRY_EXC_ERR`), and a connection whose peer reads nothing before it is closed.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout_ns.load(Ordering::Relaxed))
    }

    pub(crate) fn set_timeout(&self, t: Duration) {
        self.timeout_ns
            .store(t.as_nanos().max(1) as u64, Ordering::Relaxed);
    }

    fn register(&self, c: &Arc<Conn>) {
        lock(&self.conns).push(c.clone());
        self.conns_changed();
    }

    /// Says on every connection whether this process's engine naps (peers then wake it).
    pub(crate) fn set_napping(&self, napping: bool) {
        for c in lock(&self.conns).iter() {
            c.set_napping(napping);
        }
    }

    /// Says on the connections peers made to this process (their requests come in on them)
    /// that its engine naps: peers' requests wake it, while responses to its own requests
    /// (on the connections it made) leave it asleep.
    pub(crate) fn set_napping_for_requests(&self) {
        for c in lock(&self.conns).iter().filter(|c| c.accepted) {
            c.set_napping(true);
        }
    }

    /// Says on every connection that a program thread of this process polls: `in_pass`, it
    /// is in a pass now (peers writing meanwhile leave the napping engine asleep, however long
    /// the pass); else it polled just now (see [`super::ring`]).
    pub(crate) fn set_polled(&self, in_pass: bool, conns: &ConnList) {
        // The pass's clock when a pass ends (its start: the mark errs on the old side).
        let mark = if in_pass { u64::MAX } else { now_ns() };
        self.polled_ns.store(mark, Ordering::Relaxed);
        for c in &conns.list {
            c.set_polled(mark);
        }
    }

    /// How long ago a program thread last ran (or finished) the engine's pass: while that is
    /// short, the engine thread leaves the work to it rather than take a core (and the turn)
    /// it needs.
    pub(crate) fn since_polled(&self) -> Duration {
        let last = self.polled_ns.load(Ordering::Relaxed);
        // `u64::MAX`: a program thread is in a pass now, however long it has run.
        Duration::from_nanos(super::ring::monotonic_ns().saturating_sub(last))
    }

    /// Brings `into` up to date with the live connections (dead ones are dropped); one atomic
    /// load when none came or went since its last update.
    pub(crate) fn conns(&self, into: &mut ConnList) {
        // ORDERING: Acquire pairs with the AcqRel bump after a connection is added or dies.
        let now = self.conns_gen.load(Ordering::Acquire);
        if into.made == Some(now) {
            return;
        }
        into.list.clear();
        let mut all = lock(&self.conns);
        all.retain(|c| !c.is_dead());
        into.list.extend(all.iter().cloned());
        into.made = Some(now);
    }

    /// Says a connection came or died (pass lists are brought up to date).
    fn conns_changed(&self) {
        self.conns_gen.fetch_add(1, Ordering::AcqRel);
    }

    /// The connection to fabric `peer` (made when a QP to it moves to RTR, else on first use,
    /// and again after one dies); `None` when it cannot be reached now. Never waits on the
    /// peer.
    pub(crate) fn conn_to(self: &Arc<Self>, peer: u64) -> Option<Arc<Conn>> {
        let mut out = lock(&self.out);
        if let Some(c) = out.get(&peer) {
            if !c.is_dead() {
                return Some(c.clone());
            }
            // Retransmissions come every millisecond: reconnect at most every RECONNECT_GAP
            // (each connection costs a segment and a thread until it dies).
            let since = now_ns().saturating_sub(c.died_ns.load(Ordering::Relaxed));
            if since < RECONNECT_GAP.as_nanos() as u64 {
                return None;
            }
        }
        let s = connect_to(peer).ok()?;
        if let Err(e) = check_peer(&s) {
            warn(format_args!("not connecting to fabric {peer:#x}: {e}"));
            return None;
        }
        let seg = match Segment::create() {
            Ok(s) => s,
            Err(e) => {
                warn(format_args!("no shared segment for fabric {peer:#x}: {e}"));
                return None;
            }
        };
        // Never 0 (which proves nothing).
        let secret = rand::RngCore::next_u64(&mut rand::rngs::OsRng) | 1;
        lock(&self.proving).insert(peer, secret);
        let hello = handshake_with(KIND_HELLO, self.id, secret);
        if let Err(e) = send_with_fds(&s, &hello, &[seg.fd().as_fd(), self.wake_fd.as_fd()]) {
            warn(format_args!("no hello to fabric {peer:#x}: {e}"));
            self.forget_secret(peer, secret);
            return None;
        }
        let c = Arc::new(Conn::new(self, s, seg, peer, false, None));
        let rc = c.clone();
        if !spawn("gda-sim-wire", move || {
            // The welcome brings the peer engine's eventfd; until it does, the peer finds our
            // requests when it scans.
            let answer = recv_handshake(&rc.sock);
            // Answered (or not at all): the peer verified the hello before it welcomed us.
            if let Some(w) = rc.wire.upgrade() {
                w.forget_secret(rc.peer, secret);
            }
            match answer {
                Ok(Some(Handshake {
                    kind: KIND_WELCOME,
                    fabric,
                    mut fds,
                    ..
                })) if fabric == rc.peer && fds.len() == 1 => {
                    let fd = fds.remove(0);
                    if let Err(e) = check_eventfd(&fd) {
                        rc.broken(&e.to_string());
                        return;
                    }
                    let _ = rc.peer_wake.set(fd);
                    // It may have napped before we could wake it.
                    rc.wake_peer();
                    rc.watch();
                }
                Ok(None) => rc.kill(),
                Ok(Some(_)) => rc.broken("its answer to the hello is not a welcome"),
                Err(e) => rc.broken(&e.to_string()),
            }
        }) {
            c.kill();
            self.forget_secret(peer, secret);
            return None;
        }
        self.register(&c);
        out.insert(peer, c.clone());
        self.made.fetch_add(1, Ordering::Relaxed);
        Some(c)
    }

    /// Drops the secret of the hello sent to `peer`, unless a newer hello replaced it.
    fn forget_secret(&self, peer: u64, secret: u64) {
        let mut p = lock(&self.proving);
        if p.get(&peer) == Some(&secret) {
            p.remove(&peer);
        }
    }

    /// Hellos sent whose secrets are still kept (a statistic for tests).
    #[cfg(test)]
    pub(crate) fn secrets_kept(&self) -> usize {
        lock(&self.proving).len()
    }

    /// SENDs held for a receive, as counted (for tests).
    #[cfg(test)]
    pub(crate) fn sends_held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Whether a connection may hold a SEND waiting for a receive (a receive posted now should
    /// be offered to it by a pass).
    pub(crate) fn holds_sends(&self) -> bool {
        self.held.load(Ordering::Acquire) > 0
    }

    /// How many connections this process has made to peer fabrics (each reconnection counts).
    pub(crate) fn connections_made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// How many WRITEs and READs this process placed directly into peers' regions.
    pub(crate) fn placed(&self) -> u64 {
        self.placed.load(Ordering::Relaxed)
    }

    /// The outstanding requests of the requester (`nic`, `qpn`), which its engine keeps (one
    /// lookup per QP, not one per request).
    pub(crate) fn slots(&self, key: (u32, u32)) -> QpSlots {
        lock(&self.responses).entry(key).or_default().clone()
    }

    /// Forgets the requester `key` (its QP is destroyed): late responses are skipped.
    pub(crate) fn forget(&self, key: (u32, u32)) {
        if let Some(q) = lock(&self.responses).remove(&key) {
            q.clear();
        }
        // Its grants of direct placement go too (their mappings with them).
        for c in lock(&self.conns).iter() {
            let mut g = lock(&c.grants);
            if !g.is_empty() {
                g.retain(|k, _| (k.0, k.1) != key);
                c.grants_held.store(g.len(), Ordering::Release);
            }
        }
    }

    /// The outstanding requests of `key`, if it has any table.
    fn slots_of(&self, key: (u32, u32)) -> Option<QpSlots> {
        lock(&self.responses).get(&key).cloned()
    }

    /// [`Wire::slots_of`] through `cache`, the table of the previous response of a scan (the
    /// responses on a connection mostly go to one QP).
    fn slots_cached(
        &self,
        key: (u32, u32),
        cache: &std::cell::RefCell<Option<((u32, u32), QpSlots)>>,
    ) -> Option<QpSlots> {
        let mut c = cache.borrow_mut();
        match &*c {
            Some((k, s)) if *k == key => Some(s.clone()),
            _ => {
                let s = self.slots_of(key)?;
                *c = Some((key, s.clone()));
                Some(s)
            }
        }
    }

    fn admit(&self, conn: u64, resp: &Response, len: usize, slots: Option<QpSlots>) -> Admit {
        let Some(slots) = slots else {
            return Admit::Skip;
        };
        let q = slots.table();
        // A successful READ's data of the length asked for: written where the READ wants it.
        let lands = resp.count == 1
            && resp.status == gda_hal::WcStatus::Success as u32
            && len > 0
            && slot(&q, resp.seq).is_some_and(|s| {
                s.conn == conn && s.resp.is_none() && len as u64 == s.max && s.land.is_some()
            });
        if lands {
            drop(q);
            return Admit::Land(slots);
        }
        let q = Some(&*q);
        let Some(s) = q
            .and_then(|q| slot(q, resp.seq))
            .filter(|s| s.conn == conn && s.resp.is_none())
        else {
            return Admit::Skip;
        };
        if resp.count > 1 {
            // A coalesced response: successes of the `count` requests up to `seq`, every one
            // outstanding on this connection — without data (an acknowledgement, of requests
            // answered without data) or with 8 bytes each (atomics' original values, of
            // requests answered with 8 bytes).
            let each = if len == 0 { 0 } else { 8 };
            let ok = resp.status == gda_hal::WcStatus::Success as u32
                && len as u64 == each * u64::from(resp.count)
                && resp.count <= super::MAX_COALESCED
                && q.is_some_and(|q| {
                    (0..u64::from(resp.count)).all(|k| {
                        slot(q, resp.seq.wrapping_sub(k))
                            .is_some_and(|s| s.conn == conn && s.resp.is_none() && s.max == each)
                    })
                });
            return if ok {
                Admit::Read
            } else {
                Admit::Refuse(format!(
                    "a response to {} requests up to {} with {len} bytes that are not all \
                     outstanding and answered with {each} bytes each",
                    resp.count, resp.seq
                ))
            };
        }
        if len as u64 > s.max {
            Admit::Refuse(format!(
                "a response of {len} bytes to a request answered with {} at most",
                s.max
            ))
        } else {
            Admit::Read
        }
    }

    fn deliver(&self, conn: u64, resp: Response, slots: Option<QpSlots>) {
        let Some(slots) = slots else {
            return;
        };
        let mut q = slots.table();
        let q = &mut *q;
        let Some(at) = slot_index(q, resp.seq) else {
            return;
        };
        // A coalesced response answers the `count - 1` slots before this one too (`admit`
        // checked them), each with its 8 bytes of a run of atomics' values.
        let n = resp.count as usize;
        let values = n > 1 && resp.payload.len() == 8 * n;
        let mut newest = None;
        for k in 0..n - 1 {
            let seq = resp.seq.wrapping_sub((n - 1 - k) as u64);
            let i = slot_index(q, seq);
            if let Some(s) = i
                .and_then(|i| q.get_mut(i))
                .filter(|s| s.conn == conn && s.resp.is_none())
            {
                s.resp = Some(Response {
                    dst_nic: resp.dst_nic,
                    dst_qpn: resp.dst_qpn,
                    seq: s.seq,
                    status: resp.status,
                    payload: if values {
                        resp.payload[8 * k..8 * k + 8].to_vec()
                    } else {
                        Vec::new()
                    },
                    count: 1,
                    landed: false,
                });
                newest = Some(s.seq);
            }
        }
        if let Some(s) = q.get_mut(at).filter(|s| s.conn == conn && s.resp.is_none()) {
            newest = Some(s.seq);
            let mut last = Response { count: 1, ..resp };
            if values {
                last.payload.drain(..8 * (n - 1));
            }
            s.resp = Some(last);
        }
        if let Some(seq) = newest {
            // ORDERING: Release, after the slots it answers were filled (see `take_answered`).
            slots.0.answered.fetch_max(seq, Ordering::Release);
        }
    }

    /// Takes the next request of `c` (when its response fits the send queue); responses that
    /// have come on it are delivered to their requesters' slots on the way (`moved` is set).
    /// A malformed frame closes the connection.
    ///
    /// A WRITE or SEND whose payload is still in the ring comes with its [`RingSpan`]: the
    /// caller copies it out (or not) and then calls [`Conn::release`] before taking the next.
    pub(crate) fn take(
        &self,
        c: &Conn,
        moved: &mut bool,
        mut vet: impl FnMut(&Request) -> Vet,
    ) -> Option<(Request, Option<RingSpan>, Option<u32>)> {
        // The slot table of the previous response (for this scan only: a table forgotten
        // meanwhile takes a late response harmlessly, as one that came just before would).
        let cache = std::cell::RefCell::new(None);
        for _ in 0..FRAMES_PER_SCAN {
            let got = c.take(
                |n| c.has_room(n),
                |r, len| {
                    self.admit(
                        c.id,
                        r,
                        len,
                        self.slots_cached((r.dst_nic, r.dst_qpn), &cache),
                    )
                },
                &mut vet,
            );
            match got {
                Ok(None) => return None,
                Ok(Some(Incoming::Request(r))) => return Some((r, None, None)),
                Ok(Some(Incoming::InRing(r, span))) => return Some((r, Some(span), None)),
                Ok(Some(Incoming::Taken(r, status))) => return Some((r, None, Some(status))),
                Ok(Some(Incoming::Response(r))) => {
                    *moved = true;
                    let slots = self.slots_cached((r.dst_nic, r.dst_qpn), &cache);
                    self.deliver(c.id, r, slots);
                }
                Err(m) => {
                    c.broken(&m);
                    return None;
                }
            }
        }
        None
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        for c in lock(&self.conns).drain(..) {
            c.kill();
        }
        // Wake the accept thread, which then finds the wire gone and closes the listener
        // (freeing the fabric's name) instead of waiting for the next peer.
        drop(connect_to(self.id));
    }
}

/// An accepted connection: its hello (with the segment and the peer's eventfd), the welcome,
/// then watching the socket until it ends.
fn serve_accepted(me: &Weak<Wire>, s: UnixStream, pid: Option<u32>, _slot: InboundSlot) {
    if s.set_read_timeout(Some(HELLO_TIMEOUT)).is_err() {
        return;
    }
    let refuse = |m: &str| {
        warn(format_args!(
            "refused a connection from pid {}: {m}",
            Shown(pid)
        ));
    };
    let (peer, secret, mut fds) = match recv_handshake(&s) {
        // A connection that closes at once (another fabric checking who owns this one).
        Ok(None) => return,
        Ok(Some(Handshake {
            kind: KIND_HELLO,
            fabric,
            secret,
            fds,
        })) => (fabric, secret, fds),
        // Another fabric checking that a hello naming this one came from here.
        Ok(Some(Handshake {
            kind: KIND_VERIFY,
            fabric,
            secret,
            ..
        })) => {
            if let Some(w) = me.upgrade() {
                answer_verify(&w, &s, fabric, secret);
            }
            return;
        }
        Ok(Some(_)) => return refuse("its first frame is not a hello"),
        Err(e) => return refuse(&e.to_string()),
    };
    let Some(my_id) = me.upgrade().map(|w| w.id) else {
        return;
    };
    if let Err(e) = authenticate(my_id, pid, peer, secret) {
        return refuse(&e);
    }
    if fds.len() != 2 {
        return refuse(&format!(
            "its hello carries {} descriptors, not 2",
            fds.len()
        ));
    }
    let wake_fd = fds.remove(1);
    if let Err(e) = check_eventfd(&wake_fd) {
        return refuse(&e.to_string());
    }
    let seg = match Segment::open(fds.remove(0)) {
        Ok(seg) => seg,
        Err(e) => return refuse(&e.to_string()),
    };
    let Some(w) = me.upgrade() else { return };
    let welcome = handshake(KIND_WELCOME, w.id);
    if send_with_fds(&s, &welcome, &[w.wake_fd.as_fd()]).is_err()
        || s.set_read_timeout(None).is_err()
    {
        return;
    }
    let c = Arc::new(Conn::new(&w, s, seg, peer, true, Some(wake_fd)));
    w.register(&c);
    w.kick();
    drop(w);
    c.watch();
}
