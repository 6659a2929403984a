//! Requests and responses between software NICs in different processes, executed where the
//! memory is.
//!
//! As on a real RC link, the requester's engine sends a **request** (WRITE or SEND with its
//! payload, READ, an atomic with its operands) naming the responder's NIC and QP, and the
//! responder's engine — in the process that owns the memory — checks it against its own state
//! (QP state, PD, rkey, bounds, rights, a posted receive) exactly as between NICs of one
//! process, executes it, and sends back a **response**: an ACK, a NAK with the status the
//! requester reports (remote access error, remote invalid request, remote operation error,
//! RNR), READ data or the atomic's original value. So memory registered from any allocation
//! works across processes, and two-sided operations too.
//!
//! **Transport.** Each fabric made by [`Fabric::process`](crate::Fabric::process) listens on a
//! Unix stream socket in the abstract namespace named from the uid and the fabric id; a
//! requester connects once per peer fabric. Chosen over shared-memory rings because the kernel
//! then does what a ring protocol between untrusting processes must otherwise re-implement:
//! `SO_PEERCRED` says who connected (a process of another uid is refused on both sides), a dead
//! peer is an end-of-file (its requesters fail with `RETRY_EXC_ERR`, never hang), and
//! back-pressure never deadlocks two engines (each connection's reader is its own thread that
//! only queues). The frames are plain little-endian bytes, so a network transport between hosts
//! can carry the same messages.
//!
//! **Frames.** A 16-byte header — magic `GDAW`, version, kind, payload length (≤ 1 GiB, the
//! port's `max_msg_sz`) — then a fixed body per kind, then the payload. A malformed frame
//! closes the connection with a message; it never reaches the engine.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gda_hal::AtomicOp;

const MAGIC: u32 = u32::from_le_bytes(*b"GDAW");
const VERSION: u16 = 1;
const KIND_REQUEST: u16 = 1;
const KIND_RESPONSE: u16 = 2;
const HEADER_BYTES: usize = 16;
const REQUEST_BODY_BYTES: usize = 88;
const RESPONSE_BODY_BYTES: usize = 24;
/// Largest payload (a message of the port's `max_msg_sz`).
pub(crate) const MAX_PAYLOAD: u64 = 1 << 30;

/// Fabric ids of process fabrics: `TAG | 32 random bits`.
pub(crate) const PROCESS_TAG: u64 = 0x5650 << 48;
const TAG_MASK: u64 = 0xffff << 48;

/// Whether `fabric` names a process fabric (reachable by a socket).
pub(crate) fn is_process_fabric(fabric: u64) -> bool {
    fabric & TAG_MASK == PROCESS_TAG && fabric & !TAG_MASK <= TOKEN_MASK
}

/// Process fabric ids carry a 24-bit token (so an IPv4-mapped GID holds it with the NIC).
pub(crate) const TOKEN_MASK: u64 = 0xff_ffff;

/// The token of a process fabric id.
pub(crate) fn process_token(fabric: u64) -> Option<u32> {
    is_process_fabric(fabric).then_some((fabric & TOKEN_MASK) as u32)
}

/// The id of the process fabric with `token`.
pub(crate) fn process_fabric_id(token: u32) -> u64 {
    PROCESS_TAG | (u64::from(token) & TOKEN_MASK)
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReqOp {
    Write = 1,
    Send = 2,
    Read = 3,
    Atomic = 4,
}

/// A request, requester → responder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) dst_nic: u32,
    pub(crate) dst_qpn: u32,
    pub(crate) src_nic: u32,
    pub(crate) src_qpn: u32,
    pub(crate) seq: u64,
    pub(crate) op: ReqOp,
    pub(crate) imm: Option<u32>,
    pub(crate) rkey: u32,
    pub(crate) raddr: u64,
    /// READ: bytes asked for; WRITE/SEND: the payload's length.
    pub(crate) len: u64,
    pub(crate) atomic: Option<(AtomicOp, u32)>,
    pub(crate) payload: Vec<u8>,
}

/// A response, responder → requester. `status` is a `WcStatus` code, or [`RNR`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) dst_nic: u32,
    pub(crate) dst_qpn: u32,
    pub(crate) seq: u64,
    pub(crate) status: u32,
    pub(crate) payload: Vec<u8>,
}

/// `Response::status` for "receiver not ready" (no receive posted).
pub(crate) const RNR: u32 = 0xffff_0001;

/// Why a frame was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadFrame(pub(crate) String);

fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn header(kind: u16, payload: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_BYTES + REQUEST_BODY_BYTES + payload);
    put32(&mut v, MAGIC);
    v.extend_from_slice(&VERSION.to_le_bytes());
    v.extend_from_slice(&kind.to_le_bytes());
    put32(&mut v, payload as u32);
    put32(&mut v, 0);
    v
}

impl Request {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = header(KIND_REQUEST, self.payload.len());
        for x in [self.dst_nic, self.dst_qpn, self.src_nic, self.src_qpn] {
            put32(&mut v, x);
        }
        put64(&mut v, self.seq);
        let (akind, a, width) = match self.atomic {
            None => (0u8, [0u64; 4], 0u32),
            Some((AtomicOp::CompareSwap { compare, swap }, w)) => (1, [compare, swap, 0, 0], w),
            Some((AtomicOp::FetchAdd { add }, w)) => (2, [add, 0, 0, 0], w),
            Some((
                AtomicOp::MaskedCompareSwap {
                    compare,
                    compare_mask,
                    swap,
                    swap_mask,
                },
                w,
            )) => (3, [compare, compare_mask, swap, swap_mask], w),
            Some((
                AtomicOp::MaskedFetchAdd {
                    add,
                    field_boundary,
                },
                w,
            )) => (4, [add, field_boundary, 0, 0], w),
        };
        v.extend_from_slice(&[
            self.op as u8,
            u8::from(self.imm.is_some()),
            width as u8,
            akind,
        ]);
        put32(&mut v, self.imm.unwrap_or(0));
        put32(&mut v, self.rkey);
        put32(&mut v, 0);
        put64(&mut v, self.raddr);
        put64(&mut v, self.len);
        for x in a {
            put64(&mut v, x);
        }
        debug_assert_eq!(v.len(), HEADER_BYTES + REQUEST_BODY_BYTES);
        v.extend_from_slice(&self.payload);
        v
    }

    pub(crate) fn decode(body: &[u8], payload: Vec<u8>) -> Result<Self, BadFrame> {
        let b: &[u8; REQUEST_BODY_BYTES] = body
            .try_into()
            .map_err(|_| BadFrame(format!("request body of {} bytes", body.len())))?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
        let op = match b[24] {
            1 => ReqOp::Write,
            2 => ReqOp::Send,
            3 => ReqOp::Read,
            4 => ReqOp::Atomic,
            x => return Err(BadFrame(format!("request op {x}"))),
        };
        let width = u32::from(b[26]);
        let a = [u64_at(56), u64_at(64), u64_at(72), u64_at(80)];
        let atomic = match (op, b[27]) {
            (ReqOp::Atomic, k) => {
                if width != 4 && width != 8 {
                    return Err(BadFrame(format!("atomic width {width}")));
                }
                let aop = match k {
                    1 => AtomicOp::CompareSwap {
                        compare: a[0],
                        swap: a[1],
                    },
                    2 => AtomicOp::FetchAdd { add: a[0] },
                    3 => AtomicOp::MaskedCompareSwap {
                        compare: a[0],
                        compare_mask: a[1],
                        swap: a[2],
                        swap_mask: a[3],
                    },
                    4 => AtomicOp::MaskedFetchAdd {
                        add: a[0],
                        field_boundary: a[1],
                    },
                    x => return Err(BadFrame(format!("atomic kind {x}"))),
                };
                Some((aop, width))
            }
            (_, 0) => None,
            (_, x) => return Err(BadFrame(format!("atomic kind {x} on a non-atomic request"))),
        };
        let len = u64_at(48);
        let carries = matches!(op, ReqOp::Write | ReqOp::Send);
        if carries && len != payload.len() as u64 || !carries && !payload.is_empty() {
            return Err(BadFrame(format!(
                "length {len} with a payload of {} bytes",
                payload.len()
            )));
        }
        if len > MAX_PAYLOAD {
            return Err(BadFrame(format!("length {len} above {MAX_PAYLOAD}")));
        }
        Ok(Self {
            dst_nic: u32_at(0),
            dst_qpn: u32_at(4),
            src_nic: u32_at(8),
            src_qpn: u32_at(12),
            seq: u64_at(16),
            op,
            imm: (b[25] != 0).then(|| u32_at(28)),
            rkey: u32_at(32),
            raddr: u64_at(40),
            len,
            atomic,
            payload,
        })
    }
}

impl Response {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = header(KIND_RESPONSE, self.payload.len());
        put32(&mut v, self.dst_nic);
        put32(&mut v, self.dst_qpn);
        put64(&mut v, self.seq);
        put32(&mut v, self.status);
        put32(&mut v, 0);
        v.extend_from_slice(&self.payload);
        v
    }

    pub(crate) fn decode(body: &[u8], payload: Vec<u8>) -> Result<Self, BadFrame> {
        let b: &[u8; RESPONSE_BODY_BYTES] = body
            .try_into()
            .map_err(|_| BadFrame(format!("response body of {} bytes", body.len())))?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(Self {
            dst_nic: u32_at(0),
            dst_qpn: u32_at(4),
            seq: u64::from(u32_at(8)) | u64::from(u32_at(12)) << 32,
            status: u32_at(16),
            payload,
        })
    }
}

/// A decoded frame.
#[derive(Debug)]
pub(crate) enum Frame {
    Request(Request),
    Response(Response),
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub(crate) fn read_frame(r: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut h = [0u8; HEADER_BYTES];
    match r.read_exact(&mut h) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let version = u16::from_le_bytes([h[4], h[5]]);
    let kind = u16::from_le_bytes([h[6], h[7]]);
    let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if magic != MAGIC || version != VERSION {
        return Err(bad(format!(
            "not a gda-sim frame (magic {magic:#x}, version {version})"
        )));
    }
    if u64::from(len) > MAX_PAYLOAD {
        return Err(bad(format!("payload of {len} bytes above {MAX_PAYLOAD}")));
    }
    let body_len = match kind {
        KIND_REQUEST => REQUEST_BODY_BYTES,
        KIND_RESPONSE => RESPONSE_BODY_BYTES,
        k => return Err(bad(format!("frame kind {k}"))),
    };
    let mut body = vec![0u8; body_len];
    r.read_exact(&mut body)?;
    let mut payload = vec![0u8; len as usize];
    r.read_exact(&mut payload)?;
    let f = if kind == KIND_REQUEST {
        Request::decode(&body, payload).map(Frame::Request)
    } else {
        Response::decode(&body, payload).map(Frame::Response)
    };
    f.map(Some).map_err(|BadFrame(m)| bad(m))
}

/// One connection's sending side.
pub(crate) struct Conn {
    out: Mutex<UnixStream>,
    /// The peer is gone (end of stream, an error, a malformed frame).
    pub(crate) dead: AtomicBool,
}

impl Conn {
    pub(crate) fn send(&self, frame: &[u8]) -> bool {
        if self.dead.load(Ordering::Acquire) {
            return false;
        }
        let ok = self
            .out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(frame)
            .is_ok();
        if !ok {
            self.dead.store(true, Ordering::Release);
        }
        ok
    }
}

/// A request waiting for the responder's engine.
pub(crate) struct Inbound {
    pub(crate) conn: Arc<Conn>,
    pub(crate) req: Request,
}

/// This process's end of the message transport.
pub(crate) struct Wire {
    /// Requests from peers, for this engine.
    pub(crate) inbox: Mutex<VecDeque<Inbound>>,
    /// Responses to this process's requesters, by (NIC, QP).
    pub(crate) responses: Mutex<HashMap<(u32, u32), Response>>,
    /// Connections to peer fabrics, by fabric id.
    out: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Wakes this process's engine (set by [`Wire::start`]).
    kick: Mutex<Option<Kick>>,
}

/// How the transport wakes the engine of its fabric.
pub(crate) type Kick = Box<dyn Fn() + Send + Sync>;

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

fn socket_name(fabric: u64) -> String {
    format!("gda-sim/{}/{fabric:016x}", uid())
}

/// Refuses a peer of another user.
fn check_peer(s: &UnixStream) -> io::Result<()> {
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
    Ok(())
}

impl Wire {
    /// Listens for peers on the socket of fabric `id`; `Err(AddrInUse)` when the id is taken.
    pub(crate) fn listen(id: u64) -> io::Result<(Arc<Self>, UnixListener)> {
        let addr = SocketAddr::from_abstract_name(socket_name(id).as_bytes())?;
        let l = UnixListener::bind_addr(&addr)?;
        let w = Arc::new(Self {
            inbox: Mutex::new(VecDeque::new()),
            responses: Mutex::new(HashMap::new()),
            out: Mutex::new(HashMap::new()),
            kick: Mutex::new(None),
        });
        Ok((w, l))
    }

    /// Starts accepting once the fabric exists; `kick` wakes its engine when a request or a
    /// response arrives.
    pub(crate) fn start(self: &Arc<Self>, l: UnixListener, kick: Kick) {
        *self.kick.lock().unwrap_or_else(|e| e.into_inner()) = Some(kick);
        let me = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("gda-sim-accept".into())
            .spawn(move || {
                for s in l.incoming() {
                    let Some(w) = me.upgrade() else { return };
                    let Ok(s) = s else { continue };
                    if let Err(e) = check_peer(&s) {
                        eprintln!("gda-sim: refused a connection: {e}");
                        continue;
                    }
                    w.serve(s, false);
                }
            });
    }

    fn kick(&self) {
        if let Some(k) = self.kick.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            k();
        }
    }

    /// Spawns the reader of `s`: requests go to the inbox, responses to `responses`.
    fn serve(self: &Arc<Self>, s: UnixStream, expect_responses: bool) -> Option<Arc<Conn>> {
        let reader = s.try_clone().ok()?;
        let conn = Arc::new(Conn {
            out: Mutex::new(s),
            dead: AtomicBool::new(false),
        });
        let (me, c) = (Arc::downgrade(self), conn.clone());
        let spawned = std::thread::Builder::new()
            .name("gda-sim-wire".into())
            .spawn(move || {
                let mut r = io::BufReader::with_capacity(1 << 16, reader);
                loop {
                    let f = read_frame(&mut r);
                    let Some(w) = me.upgrade() else { return };
                    match f {
                        Ok(Some(Frame::Request(req))) if !expect_responses => {
                            w.inbox
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push_back(Inbound {
                                    conn: c.clone(),
                                    req,
                                });
                        }
                        Ok(Some(Frame::Response(resp))) if expect_responses => {
                            w.responses
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert((resp.dst_nic, resp.dst_qpn), resp);
                        }
                        Ok(Some(f)) => {
                            eprintln!("gda-sim: unexpected frame {f:?}; closing the connection");
                            c.dead.store(true, Ordering::Release);
                        }
                        // The peer's process ended (a clean close or a reset): its requesters'
                        // and ours learn it from `dead`; nothing to report.
                        Ok(None) => c.dead.store(true, Ordering::Release),
                        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                            c.dead.store(true, Ordering::Release);
                        }
                        Err(e) => {
                            eprintln!("gda-sim: closing a connection: {e}");
                            c.dead.store(true, Ordering::Release);
                        }
                    }
                    w.kick();
                    if c.dead.load(Ordering::Acquire) {
                        return;
                    }
                }
            });
        spawned.ok().map(|_| conn)
    }

    /// The connection to fabric `peer` (made on first use); `None` when it cannot be reached.
    pub(crate) fn conn_to(self: &Arc<Self>, peer: u64) -> Option<Arc<Conn>> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = out.get(&peer).filter(|c| !c.dead.load(Ordering::Acquire)) {
            return Some(c.clone());
        }
        let addr = SocketAddr::from_abstract_name(socket_name(peer).as_bytes()).ok()?;
        let s = UnixStream::connect_addr(&addr).ok()?;
        if let Err(e) = check_peer(&s) {
            eprintln!("gda-sim: not connecting to fabric {peer:#x}: {e}");
            return None;
        }
        let c = self.serve(s, true)?;
        out.insert(peer, c.clone());
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(op: ReqOp, payload: Vec<u8>, atomic: Option<(AtomicOp, u32)>) -> Request {
        Request {
            dst_nic: 1,
            dst_qpn: 0x1234,
            src_nic: 2,
            src_qpn: 0x77,
            seq: 1 << 40,
            op,
            imm: Some(0xdead_beef),
            rkey: 0xabcd,
            raddr: 0x7fff_0000_1000,
            len: payload.len() as u64,
            atomic,
            payload,
        }
    }

    #[test]
    fn frames_round_trip() {
        let cases = [
            req(ReqOp::Write, vec![1, 2, 3], None),
            req(ReqOp::Send, vec![], None),
            Request {
                len: 4096,
                ..req(ReqOp::Read, vec![], None)
            },
            req(
                ReqOp::Atomic,
                vec![],
                Some((
                    AtomicOp::MaskedCompareSwap {
                        compare: 1,
                        compare_mask: 2,
                        swap: 3,
                        swap_mask: 4,
                    },
                    8,
                )),
            ),
            req(
                ReqOp::Atomic,
                vec![],
                Some((AtomicOp::FetchAdd { add: 9 }, 4)),
            ),
        ];
        let mut n = 0;
        for r in cases {
            let bytes = r.encode();
            match read_frame(&mut bytes.as_slice()).unwrap() {
                Some(Frame::Request(back)) => assert_eq!(back, r),
                f => panic!("{f:?}"),
            }
            n += 1;
        }
        let resp = Response {
            dst_nic: 3,
            dst_qpn: 4,
            seq: 5,
            status: RNR,
            payload: vec![9; 100],
        };
        match read_frame(&mut resp.encode().as_slice()).unwrap() {
            Some(Frame::Response(back)) => assert_eq!(back, resp),
            f => panic!("{f:?}"),
        }
        assert_eq!(n, 5);
    }

    #[test]
    fn malformed_frames_are_refused() {
        let good = req(ReqOp::Write, vec![1, 2, 3], None).encode();
        let mut refused = 0;
        let mutations: [(usize, u8); 5] = [(0, b'X'), (4, 9), (6, 7), (16 + 24, 9), (16 + 27, 3)];
        for (at, v) in mutations {
            let mut b = good.clone();
            b[at] = v;
            assert!(read_frame(&mut b.as_slice()).is_err(), "byte {at} = {v}");
            refused += 1;
        }
        // A payload length above the limit is refused before anything is allocated.
        let mut b = good.clone();
        b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_frame(&mut b.as_slice()).is_err());
        // A truncated frame is an error, an empty stream a clean end.
        assert!(read_frame(&mut &good[..good.len() - 1]).is_err());
        assert!(read_frame(&mut &[][..]).unwrap().is_none());
        assert_eq!(refused, 5);
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic the parser.
        #[test]
        fn arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = read_frame(&mut bytes.as_slice());
        }
    }
}
