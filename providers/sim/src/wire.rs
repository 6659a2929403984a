//! Requests and responses between software NICs in different processes, executed where the
//! memory is.
//!
//! As on a real RC link, the requester's engine sends a **request** (WRITE or SEND with its
//! payload, READ, an atomic with its operands) naming the responder's NIC and QP, and the
//! responder's engine — in the process that owns the memory — checks it against its own state
//! (the QP's state, its connected peer and expected PSN, PD, rkey, bounds, rights, a posted
//! receive) exactly as between NICs of one process, executes it, and sends back a
//! **response**: an ACK, a NAK with the status the requester reports (remote access error,
//! remote invalid request, remote operation error, RNR), READ data or the atomic's original
//! value. So memory registered from any allocation works across processes, and two-sided
//! operations too.
//!
//! **Transport** ([`transport`], [`ring`]). Each fabric made by
//! [`Fabric::process`](crate::Fabric::process) listens on a Unix stream socket in the abstract
//! namespace named from the uid and the fabric id. A requester connects once per peer fabric
//! (when its first QP towards that fabric moves to RTR) and sends a *hello* naming its own
//! fabric, with a sealed shared-memory segment and its engine's
//! eventfd attached; the peer answers with a *welcome* and its own eventfd. From then on the
//! frames travel through the segment's two rings (requests, responses), written and read by the
//! engines themselves (or by program threads running the engine, `Fabric::progress`), and the
//! socket carries nothing: the kernel still does what a protocol between untrusting processes
//! must not re-implement — `SO_PEERCRED` says who connected (a process of another uid is
//! refused on both sides; a hello is believed only if the listener of the fabric it names
//! belongs to the connecting process: by pid, or by a secret when the peer lives in a PID
//! namespace this process cannot see), and a dead peer is an end of stream (its requesters fail
//! with `RETRY_EXC_ERR`, never hang). No engine ever blocks on its peer: a frame that does not
//! fit the ring waits in a send queue bounded in bytes, and a peer that stops reading for the
//! wire timeout loses the connection. The frames are plain little-endian bytes, so a network
//! transport between hosts can carry the same messages.
//!
//! **Direct placement** ([`direct`]): a responder may grant a requester QP a region peers can
//! map; that QP's WRITEs, READs and atomics on it are then placed by the requester itself
//! while the grant's gate is open, and never travel as frames.
//!
//! **Frames** (version 6: version 5 had no grants; version 4 no WRITE runs; the rings' layout of
//! version 3 changed, see [`ring`]). Every frame is a 16-byte header, a fixed body per kind,
//! then the payload. A malformed frame closes the connection with a (rate-limited) message; it
//! never reaches the engine.
//!
//! | header bytes | field |
//! |---|---|
//! | 0..4 | magic `GDAW` |
//! | 4..6 | version (6) |
//! | 6..8 | kind: 1 request, 2 response, 3 hello, 4 welcome, 5 verify, 6 verified, 7 grant ([`direct`]) |
//! | 8..12 | payload length (≤ 1 GiB, the port's `max_msg_sz`) |
//! | 12..16 | reserved, 0 |
//!
//! **Hello** (16-byte body, no payload; the connector's first frame on the socket, with two
//! descriptors attached: the segment's memfd, sealed against resizing, and the connector's
//! eventfd): bytes 0..8 the connector's fabric id; 8..16 a random secret, never 0, sent to
//! this acceptor only. The acceptor believes it only when the listener of that fabric belongs
//! to the process that connected: both pids from `SO_PEERCRED` when it sees them; when it sees
//! neither (the peer is in a PID namespace it cannot see, as between containers, where the
//! kernel reports pid 0) it connects to that listener and sends a **verify** (the same body:
//! its own fabric id and the secret), which the listener answers with a **verified** (its
//! fabric id and the secret if it sent that hello to the asker, else 0). **Welcome** (the same
//! body, naming the acceptor's fabric, secret 0, with its eventfd attached): the acceptor's
//! answer. Requests and responses then go through the rings only.
//!
//! **Request** (88-byte body): 0 `dst_nic`, 4 `dst_qpn`, 8 `src_nic`, 12 `src_qpn` (the source
//! fabric is the connection's), 16 `seq` (u64, the requester's tag echoed in the response),
//! 24 op (1 WRITE, 2 SEND, 3 READ, 4 atomic, 5 WRITE run), 25 has-immediate, 26 atomic width (4 or 8),
//! 27 atomic kind (0 none, 1 compare-swap, 2 fetch-add, 3 masked compare-swap, 4 masked
//! fetch-add), 28 immediate, 32 rkey, 36 PSN (24 bits), 40 remote address (u64), 48 length
//! (u64: READ bytes asked for, WRITE/SEND the payload's length), 56..88 four atomic operands
//! (u64). The responder executes a request only from the QP its own QP is connected to and
//! only at the PSN it expects: the requester's start PSN (`sq_psn`, the responder's `rq_psn`),
//! then one more per request executed successfully. A request from that QP with a PSN ahead
//! (by less than 2^23) was sent behind one that was not executed: it is answered
//! [`DISCARDED`] and not looked at; any other is [`REFUSED`].
//!
//! A **WRITE run** (op 5) is consecutive small WRITEs without immediate of one QP in one frame:
//! the requests `seq`, `seq + 1`, … with PSNs `psn`, `psn + 1`, …, each an entry of the
//! payload — remote address (u64), rkey (u32), length (u32, at most [`RUN_DATA_MAX`]), then
//! the data, padded with zeros to a multiple of 8 bytes; at most [`RUN_ENTRIES_MAX`] entries
//! and [`RUN_BYTES_MAX`] bytes. The body's rkey, remote address, has-immediate flag and atomic
//! kind are 0 and its length is the payload's. The responder executes
//! the entries in order, each exactly as the WRITE it stands for (admitted by its own PSN), and
//! answers each as it would that WRITE, until one does not succeed: that one is answered, and
//! the entries after it are dropped unanswered (as WRITEs behind it they would be
//! [`DISCARDED`]; the requester goes back to the failed one and forgets what followed it).
//! A run saves the 104-byte head per WRITE (an 8-byte put costs 24 bytes of ring, not 112)
//! and the responder's reading of each.
//!
//! **Response** (24-byte body): 0 `dst_nic`, 4 `dst_qpn` (the requester), 8 `seq` (u64),
//! 16 status (a `WcStatus` code, [`RNR`], [`REFUSED`] or [`DISCARDED`]), 20 count (0 or 1:
//! the request `seq` alone; n > 1, at most [`MAX_COALESCED`]: the n consecutive requests of
//! that QP up to `seq`, all successful — without payload, a coalesced acknowledgement as RC
//! coalesces ACKs; or with a payload of 8n bytes, the original values of n atomics, in order);
//! payload: READ data or an atomic's original value (8 bytes). A requester accepts a response
//! only for an outstanding request of that QP with that `seq`, and no longer than that request
//! can be answered; a response to n > 1 requests only when every request it names is
//! outstanding on that connection and answered without data (an acknowledgement) or with
//! responses of 8 bytes (a run of values: atomics, or 8-byte READs, which a peer could as well
//! answer one by one); else the connection closes.

pub(crate) mod direct;
pub(crate) mod pool;
mod ring;
mod transport;

pub(crate) use ring::{Gate, POLLED_RECENTLY};
pub(crate) use transport::{
    Conn, ConnList, Landing, PassClock, QpSlots, RingSpan, Vet, Wire, now_ns, pass_now, read_now_ns,
};

use std::fmt;
use std::io;
#[cfg(test)]
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use gda_hal::AtomicOp;

const MAGIC: u32 = u32::from_le_bytes(*b"GDAW");
const VERSION: u16 = 6;
pub(crate) const KIND_REQUEST: u16 = 1;
pub(crate) const KIND_RESPONSE: u16 = 2;
pub(crate) const KIND_HELLO: u16 = 3;
pub(crate) const KIND_WELCOME: u16 = 4;
/// Asks a fabric's owner whether the hello that named it came from it (see
/// `transport::authenticate`): the asker's fabric id and the hello's secret.
pub(crate) const KIND_VERIFY: u16 = 5;
/// The answer: the owner's fabric id and the secret, or 0 when it sent no such hello.
pub(crate) const KIND_VERIFIED: u16 = 6;
pub(crate) const HEADER_BYTES: usize = 16;
const REQUEST_BODY_BYTES: usize = 88;
const RESPONSE_BODY_BYTES: usize = 24;
/// The largest body of any frame kind.
pub(crate) const MAX_BODY_BYTES: usize = REQUEST_BODY_BYTES;
const HELLO_BODY_BYTES: usize = 16;
/// Header and body of a request (what a frame costs beyond its payload, at most).
pub(crate) const REQUEST_HEAD_BYTES: usize = HEADER_BYTES + REQUEST_BODY_BYTES;
/// Header and body of a response.
pub(crate) const RESPONSE_HEAD_BYTES: usize = HEADER_BYTES + RESPONSE_BODY_BYTES;
/// Largest payload (a message of the port's `max_msg_sz`).
pub(crate) const MAX_PAYLOAD: u64 = 1 << 30;
/// PSNs are 24 bits.
pub(crate) const PSN_MASK: u32 = 0x00ff_ffff;

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
    /// Several small WRITEs (see the module's documentation).
    WriteRun = 5,
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
    /// The request's packet sequence number (24 bits).
    pub(crate) psn: u32,
    pub(crate) raddr: u64,
    /// READ: bytes asked for; WRITE/SEND: the payload's length.
    pub(crate) len: u64,
    pub(crate) atomic: Option<(AtomicOp, u32)>,
    pub(crate) payload: Vec<u8>,
}

/// A response, responder → requester. `status` is a `WcStatus` code, [`RNR`] or [`REFUSED`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) dst_nic: u32,
    pub(crate) dst_qpn: u32,
    pub(crate) seq: u64,
    pub(crate) status: u32,
    pub(crate) payload: Vec<u8>,
    /// Requests this response answers: `seq` and the `count - 1` before it (of the same QP),
    /// all successful and without payload — RC's coalesced acknowledgement. 1 for one request.
    pub(crate) count: u32,
    /// Not on the wire: the pass that took this response already wrote its data (all the READ
    /// asked for) to the READ's local buffers, straight from the ring (`transport::Landing`);
    /// `payload` is then empty.
    pub(crate) landed: bool,
}

/// Smallest payload copied straight from registered memory into a ring (a gathered WRITE or
/// SEND, a READ's data at the responder) and a READ's data straight out of it at the requester
/// (`transport::Landing`), instead of through a buffer: below it the buffer costs less than the
/// bookkeeping. (A WRITE or SEND that has arrived whole executes from the ring at any size.)
pub(crate) const DIRECT_MIN: usize = 1024;

/// The largest WRITE that joins a run (the bytes of an entry's data).
pub(crate) const RUN_DATA_MAX: usize = 256;
/// An entry's head in a WRITE run: remote address, rkey, length.
pub(crate) const RUN_ENTRY_HEAD: usize = 16;

/// The most WRITEs in one run (what one coalesced acknowledgement can answer).
pub(crate) const RUN_ENTRIES_MAX: u64 = MAX_COALESCED as u64;
/// The largest payload of a WRITE run (a requester's runs stay within its batch of frames).
pub(crate) const RUN_BYTES_MAX: usize = 64 << 10;

/// The head of a run entry for a WRITE of `len` bytes to `raddr` (`rkey`).
pub(crate) fn run_entry_head(raddr: u64, rkey: u32, len: usize) -> [u8; RUN_ENTRY_HEAD] {
    let mut h = [0u8; RUN_ENTRY_HEAD];
    h[..8].copy_from_slice(&raddr.to_le_bytes());
    h[8..12].copy_from_slice(&rkey.to_le_bytes());
    h[12..].copy_from_slice(&(len as u32).to_le_bytes());
    h
}

/// Appends to a WRITE run's payload the entry of a WRITE of `data` to `raddr` (`rkey`).
pub(crate) fn push_run_entry(out: &mut Vec<u8>, raddr: u64, rkey: u32, data: &[u8]) {
    out.extend_from_slice(&run_entry_head(raddr, rkey, data.len()));
    out.extend_from_slice(data);
    out.resize(out.len() + data.len().wrapping_neg() % 8, 0);
}

/// One WRITE of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunEntry<'a> {
    pub(crate) raddr: u64,
    pub(crate) rkey: u32,
    pub(crate) data: &'a [u8],
}

/// The entries of a WRITE run's payload, in order; `Err` at the first malformed one (a
/// truncated head, a length above [`RUN_DATA_MAX`] or past the payload, padding that is not
/// zeros). [`Request::decode`] checks a run whole before anyone executes it.
pub(crate) fn run_entries(
    mut p: &[u8],
) -> impl Iterator<Item = Result<RunEntry<'_>, BadFrame>> + '_ {
    std::iter::from_fn(move || {
        if p.is_empty() {
            return None;
        }
        let Some((head, rest)) = p.split_first_chunk::<RUN_ENTRY_HEAD>() else {
            p = &[];
            return Some(Err(BadFrame("a WRITE run entry cut short".into())));
        };
        let raddr = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        let rkey = u32::from_le_bytes(head[8..12].try_into().unwrap_or_default());
        let len = u32::from_le_bytes(head[12..16].try_into().unwrap_or_default()) as usize;
        // The bound first: `len` is small before it is rounded up.
        let padded = (len <= RUN_DATA_MAX).then(|| len.next_multiple_of(8));
        let Some(padded) = padded.filter(|&n| n <= rest.len()) else {
            p = &[];
            return Some(Err(BadFrame(format!(
                "a WRITE run entry of {len} bytes ({} left, {RUN_DATA_MAX} at most)",
                rest.len()
            ))));
        };
        let (data, pad) = rest[..padded].split_at(len);
        if pad.iter().any(|&b| b != 0) {
            p = &[];
            return Some(Err(BadFrame(
                "a WRITE run entry's padding is not zeros".into(),
            )));
        }
        p = &rest[padded..];
        Some(Ok(RunEntry { raddr, rkey, data }))
    })
}

/// The most requests one coalesced acknowledgement answers.
pub(crate) const MAX_COALESCED: u32 = 1024;

/// `Response::status` for "receiver not ready" (no receive posted).
pub(crate) const RNR: u32 = 0xffff_0001;
/// `Response::status` for a request the responder's QP refused without looking at it: not from
/// the QP it is connected to, or a PSN behind the one it expects. Retransmitting cannot help,
/// so the requester completes with `RETRY_EXC_ERR` at once (hardware drops such packets, and
/// the requester's retries run out).
pub(crate) const REFUSED: u32 = 0xffff_0002;
/// `Response::status` for a request from the connected QP with a PSN past the one expected: it
/// was sent behind a request that was not executed (RNR, or no QP yet), and is dropped; the
/// requester, going back to that request, sends it again (go-back-N).
pub(crate) const DISCARDED: u32 = 0xffff_0003;

/// Why a frame was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadFrame(pub(crate) String);

/// A frame head of `N` bytes: the 16-byte header (`kind`, a payload of `payload` bytes), then
/// the body `body` writes, field by field, little-endian (no allocation: a head is built for
/// every request and response).
fn head<const N: usize>(
    kind: u16,
    payload: usize,
    body: impl FnOnce(&mut HeadWriter<'_, N>),
) -> [u8; N] {
    let mut buf = [0u8; N];
    let mut v = HeadWriter {
        buf: &mut buf,
        at: 0,
    };
    v.bytes(&MAGIC.to_le_bytes());
    v.bytes(&VERSION.to_le_bytes());
    v.bytes(&kind.to_le_bytes());
    v.u32(payload as u32);
    v.u32(0);
    body(&mut v);
    debug_assert_eq!(v.at, N, "a frame head of kind {kind} fills its {N} bytes");
    buf
}

/// Writes the fields of a frame head in order ([`head`]).
struct HeadWriter<'a, const N: usize> {
    buf: &'a mut [u8; N],
    at: usize,
}

impl<const N: usize> HeadWriter<'_, N> {
    fn bytes(&mut self, b: &[u8]) {
        self.buf[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
    fn u32(&mut self, x: u32) {
        self.bytes(&x.to_le_bytes());
    }
    fn u64(&mut self, x: u64) {
        self.bytes(&x.to_le_bytes());
    }
}

/// A request's header and body.
pub(crate) type RequestHead = [u8; REQUEST_HEAD_BYTES];
/// A response's header and body.
pub(crate) type ResponseHead = [u8; RESPONSE_HEAD_BYTES];

/// The hello (or welcome) frame of a connection, naming fabric `fabric`.
pub(crate) fn handshake(kind: u16, fabric: u64) -> Vec<u8> {
    handshake_with(kind, fabric, 0)
}

/// A handshake frame (hello, welcome, verify, verified) naming fabric `fabric`, with `secret`:
/// a hello's proof of origin, which only the fabric that sent it and the fabric it went to
/// know (0 in a welcome).
pub(crate) fn handshake_with(kind: u16, fabric: u64, secret: u64) -> Vec<u8> {
    head::<{ HEADER_BYTES + HELLO_BODY_BYTES }>(kind, 0, |v| {
        v.u64(fabric);
        v.u64(secret);
    })
    .to_vec()
}

impl Request {
    /// Header and body (the payload goes after them, unchanged).
    #[cfg(test)]
    pub(crate) fn encode_head(&self) -> Vec<u8> {
        self.encode_head_for(self.payload.len()).to_vec()
    }

    /// Header and body for a payload of `len` bytes sent apart from `self` (written straight
    /// from the requester's memory into the ring).
    pub(crate) fn encode_head_for(&self, len: usize) -> RequestHead {
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
        head(KIND_REQUEST, len, |v| {
            for x in [self.dst_nic, self.dst_qpn, self.src_nic, self.src_qpn] {
                v.u32(x);
            }
            v.u64(self.seq);
            v.bytes(&[
                self.op as u8,
                u8::from(self.imm.is_some()),
                width as u8,
                akind,
            ]);
            v.u32(self.imm.unwrap_or(0));
            v.u32(self.rkey);
            v.u32(self.psn & PSN_MASK);
            v.u64(self.raddr);
            v.u64(self.len);
            for x in a {
                v.u64(x);
            }
        })
    }

    /// The whole frame.
    #[cfg(test)]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = self.encode_head();
        v.extend_from_slice(&self.payload);
        v
    }

    /// A request's header (its payload, of `payload_len` bytes, still to come): checked as
    /// [`Request::decode`] checks it, with an empty `payload`.
    pub(crate) fn decode_head(body: &[u8], payload_len: usize) -> Result<Self, BadFrame> {
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
            5 => ReqOp::WriteRun,
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
        if op == ReqOp::WriteRun && (b[25] != 0 || u32_at(32) != 0 || u64_at(40) != 0) {
            return Err(BadFrame(
                "a WRITE run with an immediate, rkey or address of its own".into(),
            ));
        }
        let carries = matches!(op, ReqOp::Write | ReqOp::Send | ReqOp::WriteRun);
        if carries && len != payload_len as u64 || !carries && payload_len != 0 {
            return Err(BadFrame(format!(
                "length {len} with a payload of {payload_len} bytes"
            )));
        }
        if len > MAX_PAYLOAD {
            return Err(BadFrame(format!("length {len} above {MAX_PAYLOAD}")));
        }
        let psn = u32_at(36);
        if psn > PSN_MASK {
            return Err(BadFrame(format!("PSN {psn:#x} above 24 bits")));
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
            psn,
            raddr: u64_at(40),
            len,
            atomic,
            payload: Vec::new(),
        })
    }

    /// A whole request: its header and its payload.
    pub(crate) fn decode(body: &[u8], payload: Vec<u8>) -> Result<Self, BadFrame> {
        let r = Self::decode_head(body, payload.len())?;
        if r.op == ReqOp::WriteRun {
            // Checked whole here, so the responder executes none of a malformed run; bounded,
            // so one frame cannot ask for much more work than a requester's batch holds.
            if payload.is_empty() || payload.len() > RUN_BYTES_MAX {
                return Err(BadFrame(format!(
                    "a WRITE run of {} bytes (1 to {RUN_BYTES_MAX})",
                    payload.len()
                )));
            }
            let mut n = 0u64;
            for e in run_entries(&payload) {
                e?;
                n += 1;
            }
            if n > RUN_ENTRIES_MAX {
                return Err(BadFrame(format!(
                    "a WRITE run of {n} entries ({RUN_ENTRIES_MAX} at most)"
                )));
            }
        }
        Ok(Self { payload, ..r })
    }

    /// The response to this request alone with `status` and no payload (the caller adds one).
    pub(crate) fn answer(&self, status: u32) -> Response {
        Response {
            dst_nic: self.src_nic,
            dst_qpn: self.src_qpn,
            seq: self.seq,
            status,
            payload: Vec::new(),
            count: 1,
            landed: false,
        }
    }

    /// The most bytes of responses this request is answered with: one response with its
    /// payload, or for a WRITE run the frames its entries' answers can take (the
    /// acknowledgement pending before it, one per `MAX_COALESCED` entries or 64 KiB of data,
    /// a failure's, rounded up).
    pub(crate) fn answer_bytes(&self) -> usize {
        match self.op {
            ReqOp::WriteRun => 6 * RESPONSE_HEAD_BYTES,
            _ => RESPONSE_HEAD_BYTES.saturating_add(self.response_payload() as usize),
        }
    }

    /// The most payload a response to this request carries.
    pub(crate) fn response_payload(&self) -> u64 {
        match self.op {
            ReqOp::Read => self.len,
            ReqOp::Atomic => 8,
            ReqOp::Write | ReqOp::Send | ReqOp::WriteRun => 0,
        }
    }
}

impl Response {
    /// Header and body for a payload of `len` bytes sent apart from `self`.
    pub(crate) fn encode_head_for(&self, len: usize) -> ResponseHead {
        head(KIND_RESPONSE, len, |v| {
            v.u32(self.dst_nic);
            v.u32(self.dst_qpn);
            v.u64(self.seq);
            v.u32(self.status);
            // 0 for one request (the field was reserved before acknowledgements were
            // coalesced).
            v.u32(if self.count > 1 { self.count } else { 0 });
        })
    }

    /// The whole frame.
    #[cfg(test)]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = self.encode_head_for(self.payload.len()).to_vec();
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
            count: u32_at(20).max(1),
            landed: false,
        })
    }
}

fn bad(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// Checks a frame's 16-byte header: (kind, body bytes, payload bytes).
pub(crate) fn parse_header(h: &[u8; HEADER_BYTES]) -> io::Result<(u16, usize, usize)> {
    let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let version = u16::from_le_bytes([h[4], h[5]]);
    let kind = u16::from_le_bytes([h[6], h[7]]);
    let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if magic != MAGIC || version != VERSION {
        return Err(bad(format!(
            "not a gda-sim frame of version {VERSION} (magic {magic:#x}, version {version})"
        )));
    }
    if u64::from(len) > MAX_PAYLOAD {
        return Err(bad(format!("payload of {len} bytes above {MAX_PAYLOAD}")));
    }
    let body_len = match kind {
        KIND_REQUEST => REQUEST_BODY_BYTES,
        KIND_RESPONSE => RESPONSE_BODY_BYTES,
        KIND_HELLO | KIND_WELCOME | KIND_VERIFY | KIND_VERIFIED if len == 0 => HELLO_BODY_BYTES,
        KIND_HELLO | KIND_WELCOME | KIND_VERIFY | KIND_VERIFIED => {
            return Err(bad(format!("hello with a payload of {len} bytes")));
        }
        k => return Err(bad(format!("frame kind {k}"))),
    };
    Ok((kind, body_len, len as usize))
}

/// A decoded frame.
#[cfg(test)]
#[derive(Debug)]
pub(crate) enum Frame {
    Request(Request),
    Response(Response),
    Hello(u64),
}

/// Reads one whole frame; `Ok(None)` at a clean end of stream.
#[cfg(test)]
pub(crate) fn read_frame(r: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut h = [0u8; HEADER_BYTES];
    match r.read_exact(&mut h) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let (kind, body_len, len) = parse_header(&h)?;
    let mut body = vec![0u8; body_len];
    r.read_exact(&mut body)?;
    if matches!(
        kind,
        KIND_HELLO | KIND_WELCOME | KIND_VERIFY | KIND_VERIFIED
    ) {
        return Ok(Some(Frame::Hello(u64::from_le_bytes(
            body[..8]
                .try_into()
                .map_err(|_| bad("short hello".into()))?,
        ))));
    }
    let mut payload = Vec::new();
    r.take(len as u64).read_to_end(&mut payload)?;
    if payload.len() < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let f = if kind == KIND_REQUEST {
        Request::decode(&body, payload).map(Frame::Request)
    } else {
        Response::decode(&body, payload).map(Frame::Response)
    };
    f.map(Some).map_err(|BadFrame(m)| bad(m))
}

/// At most one warning line per this interval; the others are counted.
const WARN_INTERVAL: Duration = Duration::from_secs(1);

/// A rate limit for warnings: one line per [`WARN_INTERVAL`], the rest counted and reported
/// with the next line that passes.
#[derive(Debug, Default)]
pub(crate) struct WarnLimit {
    last: Option<Instant>,
    suppressed: u64,
}

impl WarnLimit {
    /// Whether a warning at `now` is printed; if so, how many were suppressed before it.
    pub(crate) fn admit(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < WARN_INTERVAL)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

static WARNINGS: Mutex<WarnLimit> = Mutex::new(WarnLimit {
    last: None,
    suppressed: 0,
});

/// Prints `gda-sim: <msg>` on stderr, at most one line a second for the whole process (a peer
/// that opens 20,000 bad connections costs a few lines, not 20,000), with the number of
/// similar messages left out since the last line.
pub(crate) fn warn(msg: fmt::Arguments<'_>) {
    let admitted = WARNINGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .admit(Instant::now());
    match admitted {
        Some(0) => eprintln!("gda-sim: {msg}"),
        Some(n) => eprintln!("gda-sim: {msg} ({n} similar suppressed)"),
        None => {}
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
            psn: 0x00ab_cdef,
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
            count: 1,
            landed: false,
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
        // Magic, version, kind, op, atomic kind on a WRITE, a PSN above 24 bits.
        let mutations: [(usize, u8); 6] = [
            (0, b'X'),
            (4, 9),
            (6, 7),
            (16 + 24, 9),
            (16 + 27, 3),
            (16 + 39, 1),
        ];
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
        // A hello carries no payload.
        let mut h = handshake(KIND_HELLO, 7);
        h[8] = 1;
        h.push(0);
        assert!(read_frame(&mut h.as_slice()).is_err());
        assert_eq!(refused, 6);
    }

    #[test]
    fn write_runs_round_trip_and_malformed_ones_are_refused() {
        let mut payload = Vec::new();
        push_run_entry(&mut payload, 0x1000, 7, b"eight b!");
        push_run_entry(&mut payload, 0x2000, 9, b"odd");
        push_run_entry(&mut payload, 0x3000, 9, b"");
        assert_eq!(payload.len(), 3 * RUN_ENTRY_HEAD + 8 + 8);
        let run = Request {
            op: ReqOp::WriteRun,
            imm: None,
            rkey: 0,
            raddr: 0,
            ..req(ReqOp::WriteRun, payload.clone(), None)
        };
        let back = match read_frame(&mut run.encode().as_slice()).unwrap() {
            Some(Frame::Request(r)) => r,
            f => panic!("{f:?}"),
        };
        assert_eq!(back, run);
        let entries: Vec<RunEntry<'_>> = run_entries(&back.payload).map(Result::unwrap).collect();
        assert_eq!(
            entries,
            [
                RunEntry {
                    raddr: 0x1000,
                    rkey: 7,
                    data: b"eight b!"
                },
                RunEntry {
                    raddr: 0x2000,
                    rkey: 9,
                    data: b"odd"
                },
                RunEntry {
                    raddr: 0x3000,
                    rkey: 9,
                    data: b""
                },
            ]
        );
        // Each malformed run is refused whole.
        let mut cases: Vec<(&str, Request)> = Vec::new();
        let with = |p: Vec<u8>| Request {
            len: p.len() as u64,
            payload: p,
            ..run.clone()
        };
        let mut p = payload.clone();
        p[24 + 16 + 3] = 1; // the padding after "odd"
        cases.push(("padding", with(p)));
        let mut p = payload.clone();
        p[12..16].copy_from_slice(&(RUN_DATA_MAX as u32 + 8).to_le_bytes());
        p.resize(p.len() + RUN_DATA_MAX + 8, 0);
        cases.push(("an entry above the limit", with(p)));
        cases.push(("a cut entry", with(payload[..payload.len() - 4].to_vec())));
        cases.push(("no entry", with(Vec::new())));
        cases.push((
            "an rkey of its own",
            Request {
                rkey: 1,
                ..run.clone()
            },
        ));
        cases.push((
            "an immediate",
            Request {
                imm: Some(1),
                ..run.clone()
            },
        ));
        let mut many = Vec::new();
        for k in 0..=RUN_ENTRIES_MAX {
            push_run_entry(&mut many, 8 * k, 7, b"");
        }
        cases.push(("more entries than one acknowledgement answers", with(many)));
        let mut big = Vec::new();
        while big.len() <= RUN_BYTES_MAX {
            push_run_entry(&mut big, 0x1000, 7, &[1; RUN_DATA_MAX]);
        }
        cases.push(("more bytes than a run holds", with(big)));
        let n = cases.len();
        for (what, r) in cases {
            assert!(read_frame(&mut r.encode().as_slice()).is_err(), "{what}");
        }
        assert_eq!(n, 8);
        // At the limits: accepted.
        let mut most = Vec::new();
        for k in 0..RUN_ENTRIES_MAX {
            push_run_entry(&mut most, 8 * k, 7, b"");
        }
        assert!(read_frame(&mut with(most).encode().as_slice()).is_ok());
    }

    #[test]
    fn hello_round_trip_and_layout() {
        let h = handshake(KIND_HELLO, 0x5650_0000_00ab_cdef);
        assert_eq!(h.len(), HEADER_BYTES + HELLO_BODY_BYTES);
        assert_eq!(&h[..4], b"GDAW");
        assert_eq!(&h[16..24], &0x5650_0000_00ab_cdef_u64.to_le_bytes());
        match read_frame(&mut h.as_slice()).unwrap() {
            Some(Frame::Hello(f)) => assert_eq!(f, 0x5650_0000_00ab_cdef),
            f => panic!("{f:?}"),
        }
        // The request's PSN sits at body offset 36, as the module documents.
        let r = req(ReqOp::Write, vec![1], None).encode();
        assert_eq!(&r[16 + 36..16 + 40], &0x00ab_cdef_u32.to_le_bytes());
    }

    #[test]
    fn warnings_are_one_a_second_with_a_count() {
        let mut w = WarnLimit::default();
        let t = Instant::now();
        assert_eq!(w.admit(t), Some(0));
        for i in 1..1000 {
            assert_eq!(w.admit(t + Duration::from_micros(i)), None);
        }
        assert_eq!(w.admit(t + Duration::from_millis(999)), None);
        assert_eq!(w.admit(t + Duration::from_secs(1)), Some(1000));
        assert_eq!(w.admit(t + Duration::from_secs(3)), Some(0));
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic the parser.
        #[test]
        fn arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = read_frame(&mut bytes.as_slice());
        }
    }
}
