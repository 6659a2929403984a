//! The sockets under the wire protocol: listening, connecting, the hello, and one reader and
//! one writer thread per connection — so that the engine thread only ever queues.
//!
//! Bounds, each against a peer that misbehaves (or is stopped with `kill -STOP`):
//! - requests read but not yet executed: a byte budget per connection ([`INBOX_BUDGET_BYTES`]);
//!   over it the reader stops reading, which back-pressures the peer's socket. One frame larger
//!   than the budget passes when nothing else of that connection is queued.
//! - frames waiting to be sent: a byte budget per connection ([`OUT_BUDGET_BYTES`]); over it the
//!   engine leaves the request (or the request it would answer) for later.
//! - a peer that stops reading: the writer closes the connection once no byte has moved for the
//!   wire timeout (its requesters then fail with `RETRY_EXC_ERR`).
//! - a response is read only for the one outstanding request of its QP and sequence number,
//!   and only up to the length that request can be answered with.
//! - connections accepted: [`MAX_INBOUND_CONNS`] at once; more are refused.
//! - connections that never say hello: closed after [`HELLO_TIMEOUT`].

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufReader, IoSlice, Read};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::{
    BadFrame, Head, Request, Response, hello, read_head, read_payload, skip_payload, warn,
};

/// Requests read from one connection and not yet executed, in bytes (payloads and heads).
pub(crate) const INBOX_BUDGET_BYTES: usize = 64 << 20;
/// Frames queued on one connection and not yet written, in bytes.
pub(crate) const OUT_BUDGET_BYTES: usize = 64 << 20;
/// Connections a fabric serves at once (each has a reader and a writer thread).
pub(crate) const MAX_INBOUND_CONNS: usize = 256;
/// How long an accepted connection may take to say hello.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// The default wire timeout ([`Wire::timeout`]).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one blocking write waits before the writer looks at the clock again.
const SEND_SLICE: Duration = Duration::from_millis(100);
/// Stack of the per-connection threads (they hold no large buffers on it).
const THREAD_STACK_BYTES: usize = 256 << 10;

/// Nanoseconds since the first call in this process: a clock that fits an atomic.
pub(crate) fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A frame on its way out.
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
    fn done(&self) -> bool {
        self.sent >= self.size()
    }
    /// One `sendmsg` of what is left; the bytes written.
    fn send(&self, sock: &UnixStream, flags: rustix::net::SendFlags) -> io::Result<usize> {
        let (h, p) = if self.sent < self.head.len() {
            (&self.head[self.sent..], &self.payload[..])
        } else {
            (&[][..], &self.payload[self.sent - self.head.len()..])
        };
        let iov = [IoSlice::new(h), IoSlice::new(p)];
        // MSG_NOSIGNAL: a peer that closed is an error here, never a SIGPIPE in the program
        // (a C program using the verbs library keeps the default SIGPIPE action).
        rustix::net::sendmsg(
            sock,
            &iov,
            &mut rustix::net::SendAncillaryBuffer::default(),
            flags | rustix::net::SendFlags::NOSIGNAL,
        )
        .map_err(io::Error::from)
    }
}

#[derive(Default)]
struct OutQueue {
    frames: VecDeque<OutFrame>,
    /// Bytes of `frames` and of the frame the writer holds.
    bytes: usize,
    /// The writer holds a frame (taken off `frames`, partly written).
    writing: bool,
    /// The engine found the queue full: wake it when a frame has gone.
    kick_when_drained: bool,
}

#[derive(Default)]
struct InboxCount {
    bytes: usize,
    reader_waits: bool,
}

/// One connection to a peer fabric: requests this process sends and their responses (one it
/// made), or requests a peer sends and this process's responses (one it accepted).
pub(crate) struct Conn {
    pub(crate) id: u64,
    /// The peer's fabric: the one this process connected to, or the one an accepted peer
    /// proved it owns (its hello).
    pub(crate) peer: u64,
    sock: UnixStream,
    out: Mutex<OutQueue>,
    out_cv: Condvar,
    dead: AtomicBool,
    /// When bytes last moved on the connection, either way ([`now_ns`]).
    progress: Arc<AtomicU64>,
    inbox: Mutex<InboxCount>,
    inbox_cv: Condvar,
    wire: Weak<Wire>,
}

impl Conn {
    /// The peer is gone (end of stream, an error, a malformed frame, a stall).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Closes the connection: both threads end, its requesters see it dead.
    pub(crate) fn kill(&self) {
        if self.dead.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        // Wake the writer and a reader waiting for inbox room (under their locks, so neither
        // misses it between its check of `dead` and its wait).
        drop(lock(&self.out));
        self.out_cv.notify_all();
        drop(lock(&self.inbox));
        self.inbox_cv.notify_all();
        if let Some(w) = self.wire.upgrade() {
            w.kick();
        }
    }

    /// How long nothing has moved on the connection, counting from `since_ns` at the latest.
    pub(crate) fn idle(&self, since_ns: u64) -> Duration {
        let last = self.progress.load(Ordering::Relaxed).max(since_ns);
        Duration::from_nanos(now_ns().saturating_sub(last))
    }

    /// Whether a frame of `bytes` fits in the send queue now (one frame of any size fits an
    /// empty queue); if not, the engine is woken when the queue drains.
    pub(crate) fn has_room(&self, bytes: usize) -> bool {
        let mut q = lock(&self.out);
        let fits = q.bytes == 0 || q.bytes + bytes <= OUT_BUDGET_BYTES;
        if !fits {
            q.kick_when_drained = true;
        }
        fits
    }

    /// Queues a frame (written at once when the socket takes it, never waiting); `false` when
    /// the connection is dead.
    pub(crate) fn send(&self, head: Vec<u8>, payload: Vec<u8>) -> bool {
        let mut q = lock(&self.out);
        if self.is_dead() {
            return false;
        }
        let mut f = OutFrame {
            head,
            payload,
            sent: 0,
        };
        if q.frames.is_empty() && !q.writing {
            // Nothing ahead of it: try the socket directly (no thread hand-off on the common
            // path), without waiting.
            loop {
                match f.send(&self.sock, rustix::net::SendFlags::DONTWAIT) {
                    Ok(n) => {
                        f.sent += n;
                        self.stamp();
                        if f.done() {
                            return true;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        drop(q);
                        self.kill();
                        return false;
                    }
                }
            }
        }
        q.bytes += f.size();
        q.frames.push_back(f);
        drop(q);
        self.out_cv.notify_one();
        true
    }

    fn stamp(&self) {
        self.progress.store(now_ns(), Ordering::Relaxed);
    }

    /// Counts `bytes` of requests against the inbox budget, waiting while over it; `false` once
    /// the connection is dead.
    fn reserve_inbox(&self, bytes: usize, budget: usize) -> bool {
        let mut b = lock(&self.inbox);
        while b.bytes > 0 && b.bytes + bytes > budget {
            if self.is_dead() {
                return false;
            }
            b.reader_waits = true;
            b = self
                .inbox_cv
                .wait_timeout(b, SEND_SLICE)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        b.bytes += bytes;
        true
    }

    /// Gives back what [`Conn::reserve_inbox`] counted, once the request is done.
    pub(crate) fn release_inbox(&self, bytes: usize) {
        let mut b = lock(&self.inbox);
        b.bytes = b.bytes.saturating_sub(bytes);
        if std::mem::take(&mut b.reader_waits) {
            drop(b);
            self.inbox_cv.notify_all();
        }
    }

    /// Bytes of requests read from this connection and not yet executed.
    #[cfg(test)]
    pub(crate) fn inbox_bytes(&self) -> usize {
        lock(&self.inbox).bytes
    }

    /// The writer: sends queued frames, waiting as long as the socket makes it; closes the
    /// connection when no byte has gone for the wire timeout.
    fn write_loop(self: &Arc<Self>) {
        loop {
            let mut f = {
                let mut q = lock(&self.out);
                loop {
                    if self.is_dead() {
                        return;
                    }
                    if let Some(f) = q.frames.pop_front() {
                        q.writing = true;
                        break f;
                    }
                    q = self.out_cv.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            let mut last = Instant::now();
            while !f.done() {
                match f.send(&self.sock, rustix::net::SendFlags::empty()) {
                    Ok(n) => {
                        f.sent += n;
                        self.stamp();
                        last = Instant::now();
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        let limit = self.wire.upgrade().map_or(DEFAULT_TIMEOUT, |w| w.timeout());
                        if self.is_dead() {
                            return;
                        }
                        if last.elapsed() > limit {
                            warn(format_args!(
                                "fabric {:#x} read nothing for {limit:?}: closing its connection",
                                self.peer
                            ));
                            self.kill();
                            return;
                        }
                    }
                    Err(_) => {
                        self.kill();
                        return;
                    }
                }
            }
            let mut q = lock(&self.out);
            q.writing = false;
            q.bytes -= f.size();
            let kick = std::mem::take(&mut q.kick_when_drained);
            drop(q);
            if kick {
                if let Some(w) = self.wire.upgrade() {
                    w.kick();
                }
            }
        }
    }
}

/// A request waiting for the responder's engine.
pub(crate) struct Inbound {
    pub(crate) conn: Arc<Conn>,
    pub(crate) req: Request,
    /// What it counts against its connection's inbox budget.
    pub(crate) bytes: usize,
}

/// A requester's slot for its one outstanding request.
enum Slot {
    Waiting { seq: u64, conn: u64, max: u64 },
    Done(Response),
}

/// What the reader does with a response's payload.
enum Admit {
    Read,
    Skip,
    Refuse(String),
}

/// How the transport wakes the engine of its fabric.
pub(crate) type Kick = Box<dyn Fn() + Send + Sync>;

/// This process's end of the message transport.
pub(crate) struct Wire {
    /// This fabric's id (what its hellos say).
    pub(crate) id: u64,
    /// Requests from peers, for this engine.
    pub(crate) inbox: Mutex<VecDeque<Inbound>>,
    /// Outstanding requests and their responses, by the requester's (NIC, QP).
    responses: Mutex<HashMap<(u32, u32), Slot>>,
    /// Connections to peer fabrics, by fabric id.
    out: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Every connection, to close them with the fabric.
    conns: Mutex<Vec<Weak<Conn>>>,
    /// Accepted connections open now.
    inbound: Arc<AtomicUsize>,
    next_conn: AtomicU64,
    /// Wakes this process's engine (set by [`Wire::start`]).
    kick: Mutex<Option<Kick>>,
    /// The wire timeout, in nanoseconds.
    timeout_ns: AtomicU64,
    /// The inbox budget of each connection (tests lower it).
    inbox_budget: AtomicUsize,
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

fn socket_name(fabric: u64) -> String {
    format!("gda-sim/{}/{fabric:016x}", uid())
}

/// The process at the other end of `s` (its pid as this process sees it), refusing a peer of
/// another user.
fn check_peer(s: &UnixStream) -> io::Result<u32> {
    let cred = rustix::net::sockopt::socket_peercred(s)?;
    if cred.uid.as_raw() != uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "a process of uid {} (pid {}) is not this job's user",
                cred.uid.as_raw(),
                cred.pid.as_raw_nonzero()
            ),
        ));
    }
    Ok(cred.pid.as_raw_nonzero().get() as u32)
}

/// Connects to the socket of `fabric` without waiting: a listener whose backlog is full (its
/// process stopped) is `WouldBlock`, not a hang.
fn connect_to(fabric: u64) -> io::Result<UnixStream> {
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
    let s = UnixStream::from(fd);
    s.set_write_timeout(Some(SEND_SLICE))?;
    Ok(s)
}

/// Whether the peer of `s` (pid `pid`) owns fabric `fabric`: the listener of that fabric's
/// socket was made by the same process. (A process can claim only its own fabrics; a fabric id
/// is unique on the host while its listener lives.)
fn authenticate(pid: u32, fabric: u64) -> Result<(), String> {
    if !super::is_process_fabric(fabric) {
        return Err(format!("its hello names {fabric:#x}, not a process fabric"));
    }
    let probe = connect_to(fabric)
        .map_err(|e| format!("its hello names fabric {fabric:#x}, which does not listen ({e})"))?;
    let owner = check_peer(&probe).map_err(|e| format!("fabric {fabric:#x}: {e}"))?;
    if pid == 0 || owner != pid {
        return Err(format!(
            "its hello names fabric {fabric:#x}, which belongs to pid {owner}, not to pid {pid}"
        ));
    }
    Ok(())
}

/// A reader that stamps the connection's progress clock.
struct Counting<R> {
    inner: R,
    progress: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.progress.store(now_ns(), Ordering::Relaxed);
        }
        Ok(n)
    }
}

type FrameReader = BufReader<Counting<UnixStream>>;

fn frame_reader(s: UnixStream, progress: Arc<AtomicU64>) -> FrameReader {
    BufReader::with_capacity(1 << 16, Counting { inner: s, progress })
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
        let w = Arc::new(Self {
            id,
            inbox: Mutex::new(VecDeque::new()),
            responses: Mutex::new(HashMap::new()),
            out: Mutex::new(HashMap::new()),
            conns: Mutex::new(Vec::new()),
            inbound: Arc::new(AtomicUsize::new(0)),
            next_conn: AtomicU64::new(1),
            kick: Mutex::new(None),
            timeout_ns: AtomicU64::new(DEFAULT_TIMEOUT.as_nanos() as u64),
            inbox_budget: AtomicUsize::new(INBOX_BUDGET_BYTES),
        });
        Ok((w, l))
    }

    /// Starts accepting once the fabric exists; `kick` wakes its engine when a request or a
    /// response arrives.
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
                            "refused a connection from pid {pid}: fabric {:#x} serves \
                             {MAX_INBOUND_CONNS} connections already",
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

    /// How long a request may go with no byte moving on its connection before it fails
    /// (`RETRY_EXC_ERR`), and a connection whose peer reads nothing before it is closed.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout_ns.load(Ordering::Relaxed))
    }

    pub(crate) fn set_timeout(&self, t: Duration) {
        self.timeout_ns
            .store(t.as_nanos().max(1) as u64, Ordering::Relaxed);
    }

    #[cfg(test)]
    pub(crate) fn set_inbox_budget(&self, bytes: usize) {
        self.inbox_budget.store(bytes, Ordering::Relaxed);
    }

    /// A connection over `s` to fabric `peer`, with its writer running.
    fn new_conn(
        self: &Arc<Self>,
        s: UnixStream,
        peer: u64,
        progress: Arc<AtomicU64>,
    ) -> Option<Arc<Conn>> {
        let conn = Arc::new(Conn {
            id: self.next_conn.fetch_add(1, Ordering::Relaxed),
            peer,
            sock: s,
            out: Mutex::new(OutQueue::default()),
            out_cv: Condvar::new(),
            dead: AtomicBool::new(false),
            progress,
            inbox: Mutex::new(InboxCount::default()),
            inbox_cv: Condvar::new(),
            wire: Arc::downgrade(self),
        });
        let c = conn.clone();
        if !spawn("gda-sim-wout", move || c.write_loop()) {
            return None;
        }
        let mut all = lock(&self.conns);
        all.retain(|c| c.strong_count() > 0);
        all.push(Arc::downgrade(&conn));
        Some(conn)
    }

    /// The connection to fabric `peer` (made on first use, and again after one dies); `None`
    /// when it cannot be reached now. Never waits on the peer.
    pub(crate) fn conn_to(self: &Arc<Self>, peer: u64) -> Option<Arc<Conn>> {
        let mut out = lock(&self.out);
        if let Some(c) = out.get(&peer).filter(|c| !c.is_dead()) {
            return Some(c.clone());
        }
        let s = connect_to(peer).ok()?;
        if let Err(e) = check_peer(&s) {
            warn(format_args!("not connecting to fabric {peer:#x}: {e}"));
            return None;
        }
        let reader = s.try_clone().ok()?;
        let progress = Arc::new(AtomicU64::new(now_ns()));
        let c = self.new_conn(s, peer, progress.clone())?;
        c.send(hello(self.id), Vec::new());
        let (me, rc) = (Arc::downgrade(self), c.clone());
        if !spawn("gda-sim-wire", move || {
            read_loop(&me, &rc, frame_reader(reader, progress), false);
        }) {
            c.kill();
            return None;
        }
        out.insert(peer, c.clone());
        Some(c)
    }

    /// Records the request `seq` of the requester (`nic`, `qpn`) as sent on `conn`; its
    /// response may carry up to `max` payload bytes.
    pub(crate) fn expect(&self, key: (u32, u32), seq: u64, conn: u64, max: u64) {
        lock(&self.responses).insert(key, Slot::Waiting { seq, conn, max });
    }

    /// The response to request `seq` of `key`, once it has arrived.
    pub(crate) fn take_response(&self, key: (u32, u32), seq: u64) -> Option<Response> {
        let mut m = lock(&self.responses);
        match m.get(&key) {
            Some(Slot::Done(r)) if r.seq == seq => match m.remove(&key) {
                Some(Slot::Done(r)) => Some(r),
                _ => None,
            },
            _ => None,
        }
    }

    /// Forgets the outstanding request of `key` (given up): a late response is skipped.
    pub(crate) fn forget(&self, key: (u32, u32)) {
        lock(&self.responses).remove(&key);
    }

    fn admit(&self, conn: u64, resp: &Response, len: usize) -> Admit {
        match lock(&self.responses).get(&(resp.dst_nic, resp.dst_qpn)) {
            Some(Slot::Waiting { seq, conn: c, max }) if *seq == resp.seq && *c == conn => {
                if len as u64 > *max {
                    Admit::Refuse(format!(
                        "a response of {len} bytes to a request answered with {max} at most"
                    ))
                } else {
                    Admit::Read
                }
            }
            _ => Admit::Skip,
        }
    }

    fn deliver(&self, conn: u64, resp: Response) {
        let mut m = lock(&self.responses);
        let key = (resp.dst_nic, resp.dst_qpn);
        if let Some(Slot::Waiting { seq, conn: c, .. }) = m.get(&key) {
            if *seq == resp.seq && *c == conn {
                m.insert(key, Slot::Done(resp));
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        for c in lock(&self.conns).drain(..) {
            if let Some(c) = c.upgrade() {
                c.kill();
            }
        }
        // Wake the accept thread, which then finds the wire gone and closes the listener
        // (freeing the fabric's name) instead of waiting for the next peer.
        drop(connect_to(self.id));
    }
}

/// An accepted connection: its hello, then its requests until it ends.
fn serve_accepted(me: &Weak<Wire>, s: UnixStream, pid: u32, _slot: InboundSlot) {
    let progress = Arc::new(AtomicU64::new(now_ns()));
    let (Ok(reader), Ok(())) = (s.try_clone(), s.set_read_timeout(Some(HELLO_TIMEOUT))) else {
        return;
    };
    let mut r = frame_reader(reader, progress.clone());
    let peer = match read_head(&mut r) {
        // A connection that closes at once (another fabric checking who owns this one).
        Ok(None) => return,
        Ok(Some(h)) => match h.hello_fabric() {
            Some(f) => f,
            None => {
                warn(format_args!(
                    "refused a connection from pid {pid}: its first frame is not a hello"
                ));
                return;
            }
        },
        Err(e) => {
            warn(format_args!("refused a connection from pid {pid}: {e}"));
            return;
        }
    };
    if let Err(e) = authenticate(pid, peer) {
        warn(format_args!("refused a connection from pid {pid}: {e}"));
        return;
    }
    if s.set_read_timeout(None).is_err() || s.set_write_timeout(Some(SEND_SLICE)).is_err() {
        return;
    }
    let Some(conn) = me.upgrade().and_then(|w| w.new_conn(s, peer, progress)) else {
        return;
    };
    read_loop(me, &conn, r, true);
}

/// Reads frames until the connection ends: requests (on an accepted connection) go to the
/// inbox, responses (on one this process made) to their requester's slot.
fn read_loop(me: &Weak<Wire>, c: &Arc<Conn>, mut r: FrameReader, accepted: bool) {
    let why = loop {
        let h = match read_head(&mut r) {
            Ok(Some(h)) => h,
            // The peer's process ended (a clean close or a reset), or this end closed it:
            // its requesters and ours learn it from `dead`; nothing to report.
            Ok(None) => break None,
            Err(e) if c.is_dead() || e.kind() == io::ErrorKind::ConnectionReset => break None,
            Err(e) => break Some(e.to_string()),
        };
        let Some(w) = me.upgrade() else { break None };
        let done = if accepted {
            read_request(&w, c, &mut r, h)
        } else {
            read_response(&w, c, &mut r, h)
        };
        w.kick();
        if let Err(e) = done {
            break e;
        }
    };
    if let Some(m) = why {
        warn(format_args!(
            "closing the connection with fabric {:#x}: {m}",
            c.peer
        ));
    }
    c.kill();
}

fn read_request(
    w: &Wire,
    c: &Arc<Conn>,
    r: &mut FrameReader,
    h: Head,
) -> Result<(), Option<String>> {
    if !h.is_request() {
        return Err(Some(format!(
            "a frame of kind {} where requests come",
            h.kind
        )));
    }
    let bytes = super::REQUEST_HEAD_BYTES + h.payload_len;
    // Back-pressure: past the budget, stop reading (the peer's socket fills) until the engine
    // has executed some of this connection's requests.
    if !c.reserve_inbox(bytes, w.inbox_budget.load(Ordering::Relaxed)) {
        return Err(None);
    }
    let req = read_payload(r, h.payload_len)
        .map_err(|e| e.to_string())
        .and_then(|p| Request::decode(&h.body, p).map_err(|BadFrame(m)| m));
    match req {
        Ok(req) => {
            lock(&w.inbox).push_back(Inbound {
                conn: c.clone(),
                req,
                bytes,
            });
            Ok(())
        }
        Err(m) => {
            c.release_inbox(bytes);
            Err((!c.is_dead()).then_some(m))
        }
    }
}

fn read_response(w: &Wire, c: &Conn, r: &mut FrameReader, h: Head) -> Result<(), Option<String>> {
    if !h.is_response() {
        return Err(Some(format!(
            "a frame of kind {} where responses come",
            h.kind
        )));
    }
    let resp = Response::decode(&h.body, Vec::new()).map_err(|BadFrame(m)| Some(m))?;
    let io = |e: io::Error| (!c.is_dead()).then(|| e.to_string());
    match w.admit(c.id, &resp, h.payload_len) {
        Admit::Read => {
            let payload = read_payload(r, h.payload_len).map_err(io)?;
            w.deliver(c.id, Response { payload, ..resp });
            Ok(())
        }
        // A response to a request given up on (or never sent): not kept.
        Admit::Skip => skip_payload(r, h.payload_len).map_err(io),
        Admit::Refuse(m) => Err(Some(m)),
    }
}
