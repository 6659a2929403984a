//! PEs as processes meeting over TCP at rank 0.
//!
//! Rank 0 listens; every other rank connects (retrying until the deadline: rank 0 may start
//! last). Each connection proves knowledge of the job secret in both directions before it
//! counts:
//!
//! 1. rank 0 sends a nonce and the secret's id (`HMAC(secret, "gda-key-id" | job)`, 8 bytes) —
//!    a client whose secret has another id knows at once that its copy is stale (it re-reads
//!    the secret file) or wrong (a clear error), without ever answering with it;
//! 2. the client answers with its rank, its own nonce and
//!    `HMAC-SHA256(secret, "gda-client" | job | rank | nonce0)`;
//! 3. rank 0 answers `ok` + `HMAC(secret, "gda-server" | job | rank | nonce1)`, or a refusal with
//!    its reason (a rank that already joined, a rank outside the job).
//!
//! Rank 0 runs every handshake on its own thread with its own deadline
//! ([`HANDSHAKE_TIMEOUT`]), so idle or slow connections cannot add up and stall the
//! rendezvous; frames before authentication are capped at the handshake's size, so nobody can
//! make rank 0 allocate before proving the secret. At most `MAX_HANDSHAKES` (256) run at once;
//! past that, a new connection takes the place of the oldest one that has not answered yet
//! (which is closed), never the other way round: whoever floods the port from outside the job
//! (another user, who cannot know the secret) only pushes out their own idle connections, while
//! a rank answers within a round trip of its hello. A rank whose connection was closed before
//! rank 0's verdict connects again (its key id matched, so the secret is right). A connection that fails (wrong secret, wrong
//! job, garbage, silence) is dropped and does not count; the rendezvous goes on. Collectives go
//! through rank 0 (`allgather`: everyone sends, rank 0 answers with all); they run only at
//! init, team creation and finalize.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::Bootstrap;
use super::secret::Secret;
use crate::error::{Result, ShmemError};

/// Largest frame after authentication (bootstrap collectives carry endpoints and team masks).
const MAX_FRAME: u32 = 64 << 20;
/// Rank 0's first frame: nonce and key id.
const HELLO_BYTES: usize = 32 + KEY_ID_BYTES;
const KEY_ID_BYTES: usize = 8;
/// The client's answer: rank, nonce, tag.
const ANSWER_BYTES: usize = 4 + 32 + 32;
/// Rank 0's verdict: a status byte, then the server tag or a refusal reason.
const VERDICT_MAX: usize = 1 + 256;
/// Bound of one handshake at rank 0 (each runs on its own thread: these never add up).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Handshakes rank 0 runs at once; past it a new connection closes the oldest one that has not
/// answered yet (a flood from outside the job pushes out only its own connections).
const MAX_HANDSHAKES: usize = 256;

/// A handshake rank 0 runs, as its accept loop keeps it: the connection (to close it when it
/// must make room) and how far it got.
struct Pending {
    stream: TcpStream,
    stage: std::sync::Arc<std::sync::atomic::AtomicU8>,
}
/// [`Pending::stage`]: waiting for the client's answer; answered (being verified, never
/// pushed out); over (its thread ended).
const WAITING: u8 = 0;
const ANSWERED: u8 = 1;
const OVER: u8 = 2;

/// One process PE's bootstrap.
pub struct TcpBoot {
    rank: u32,
    size: u32,
    job: String,
    names: gda_os::shm::JobNames,
    timeout: Duration,
    /// Rank 0: connections of ranks 1.., by rank. Others: the connection to rank 0.
    peers: Vec<Option<TcpStream>>,
}

fn hmac(secret: &[u8], role: &[u8], job: &str, rank: u32, nonce: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    m.update(role);
    m.update(job.as_bytes());
    m.update(&rank.to_le_bytes());
    m.update(nonce);
    m
}

fn mac(secret: &[u8], role: &[u8], job: &str, rank: u32, nonce: &[u8]) -> [u8; 32] {
    hmac(secret, role, job, rank, nonce)
        .finalize()
        .into_bytes()
        .into()
}

fn verify(secret: &[u8], role: &[u8], job: &str, rank: u32, nonce: &[u8], tag: &[u8]) -> bool {
    hmac(secret, role, job, rank, nonce)
        .verify_slice(tag)
        .is_ok()
}

/// The public id of a secret (which secret, not the secret: an HMAC of a fixed message).
fn key_id(secret: &[u8], job: &str) -> [u8; KEY_ID_BYTES] {
    let m = mac(secret, b"gda-key-id", job, 0, &[]);
    let mut id = [0u8; KEY_ID_BYTES];
    id.copy_from_slice(&m[..KEY_ID_BYTES]);
    id
}

fn send(s: &mut TcpStream, b: &[u8]) -> std::io::Result<()> {
    let n = u32::try_from(b.len()).map_err(|_| std::io::Error::other("frame too large"))?;
    let mut f = Vec::with_capacity(4 + b.len());
    f.extend_from_slice(&n.to_le_bytes());
    f.extend_from_slice(b);
    s.write_all(&f)
}

/// Reads one frame of at most `max` bytes (refused before allocating if longer).
fn recv(s: &mut TcpStream, deadline: Instant, max: u32) -> std::io::Result<Vec<u8>> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::ErrorKind::TimedOut.into());
    }
    s.set_read_timeout(Some(left))?;
    let mut n = [0u8; 4];
    s.read_exact(&mut n)?;
    let n = u32::from_le_bytes(n);
    if n > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {n} bytes (at most {max} allowed here)"),
        ));
    }
    let mut b = vec![0u8; n as usize];
    s.read_exact(&mut b)?;
    Ok(b)
}

/// Rank 0's refusal of a client, with the reason it is told.
fn refuse(s: &mut TcpStream, why: &str) {
    let _ = send(s, &[&[1u8][..], why.as_bytes()].concat());
}

/// Whether an I/O error means the other end closed or reset the connection.
fn closed(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::UnexpectedEof | K::BrokenPipe | K::ConnectionReset | K::ConnectionAborted
    )
}

/// A verified client, handed from its handshake thread to rank 0's main loop.
struct Verified {
    rank: u32,
    stream: TcpStream,
    nonce1: [u8; 32],
}

/// What a client's handshake attempt came to.
enum Joined {
    Yes(TcpStream),
    /// Rank 0 closed before greeting (busy, or not rank 0 yet): try again.
    Retry(String),
    /// Rank 0 has another secret than ours: re-read it (file) or give up (known).
    OtherSecret,
}

/// Where rank 0 listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meet {
    /// At this address (given by the launcher: `GDA_SHMEM_BOOT`, `MASTER_ADDR`/`MASTER_PORT`).
    At(SocketAddr),
    /// At this host, on a port derived from the job secret (20000–59999): a launcher that
    /// names no address (mpirun, srun) would otherwise use a port any user can compute from
    /// the public job id and take first, stopping the job.
    KeyedPort(std::net::IpAddr),
}

impl From<SocketAddr> for Meet {
    fn from(a: SocketAddr) -> Self {
        Self::At(a)
    }
}

impl Meet {
    fn resolve(self, key: &[u8], job: &str) -> SocketAddr {
        match self {
            Self::At(a) => a,
            Self::KeyedPort(ip) => {
                let m = mac(key, b"gda-port", job, 0, &[]);
                let v = u16::from_le_bytes([m[0], m[1]]);
                SocketAddr::new(ip, 20_000 + v % 40_000)
            }
        }
    }
}

/// The listening socket `gdarun` bound for rank 0 and passed down (`GDA_SHMEM_BOOT_FD`), if it
/// is one, listening at exactly `addr`: between a launcher finding a free port and rank 0
/// binding it, another user could take it.
fn inherited_listener(addr: SocketAddr) -> Option<TcpListener> {
    use std::os::fd::{BorrowedFd, FromRawFd};
    let fd: i32 = std::env::var("GDA_SHMEM_BOOT_FD")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if fd < 3 {
        return None;
    }
    // Checked through /proc before borrowing: a number that is not open here is not touched.
    std::fs::symlink_metadata(format!("/proc/self/fd/{fd}")).ok()?;
    // SAFETY: the descriptor is open (checked above) and only inspected while borrowed.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    let listening = rustix::net::sockopt::socket_acceptconn(b).ok()?;
    let local = rustix::net::getsockname(b).ok()?;
    let local = std::net::SocketAddr::try_from(local).ok()?;
    if !listening || local != addr {
        return None;
    }
    // SAFETY: a listening socket at our address that the launcher left open for this process
    // alone; nothing else in this process owns it.
    Some(unsafe { TcpListener::from_raw_fd(fd) })
}

impl TcpBoot {
    /// Rendezvous of `size` PEs at `addr` for `job`, authenticated with `secret`.
    pub fn connect(
        rank: u32,
        size: u32,
        addr: impl Into<Meet>,
        job: &str,
        secret: &[u8],
        timeout: Duration,
    ) -> Result<Self> {
        Self::connect_with(
            rank,
            size,
            addr,
            job,
            &Secret::Known(secret.to_vec()),
            timeout,
        )
    }

    /// [`TcpBoot::connect`] with the secret from `secret` (rank 0 needs it at once; the others
    /// wait for a secret file to appear, and re-read a stale one).
    pub fn connect_with(
        rank: u32,
        size: u32,
        addr: impl Into<Meet>,
        job: &str,
        secret: &Secret,
        timeout: Duration,
    ) -> Result<Self> {
        if size == 0 || rank >= size {
            return Err(ShmemError::Config(format!("rank {rank} of {size}")));
        }
        let deadline = Instant::now() + timeout;
        let meet = addr.into();
        let mut peers: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
        let key = if rank == 0 {
            let key = secret.current()?.ok_or_else(|| {
                ShmemError::Boot("rank 0 has no job secret to listen with".into())
            })?;
            Self::serve(
                &mut peers,
                meet.resolve(&key, job),
                job,
                &key,
                deadline,
                timeout,
            )?;
            key
        } else {
            let (s, key) = Self::dial(rank, meet, job, secret, deadline, timeout)?;
            peers[0] = Some(s);
            key
        };
        // The secret every rank proved it holds keys the job's object names.
        let names = gda_os::shm::JobNames::new(job, mac(&key, b"gda-shm-names", job, 0, &[]))
            .map_err(|e| ShmemError::Config(e.to_string()))?;
        for s in peers.iter().flatten() {
            let _ = s.set_nodelay(true);
            let _ = s.set_nonblocking(false);
            let _ = s.set_write_timeout(Some(timeout));
        }
        Ok(Self {
            rank,
            size,
            job: job.to_owned(),
            names,
            timeout,
            peers,
        })
    }

    /// Rank 0: accepts until every rank joined; each handshake runs on its own thread.
    fn serve(
        peers: &mut [Option<TcpStream>],
        addr: SocketAddr,
        job: &str,
        secret: &[u8],
        deadline: Instant,
        timeout: Duration,
    ) -> Result<()> {
        let size = peers.len() as u32;
        if size == 1 {
            // Nobody to meet: no socket (a one-PE job needs no port).
            return Ok(());
        }
        let l = match inherited_listener(addr) {
            Some(l) => l,
            None => TcpListener::bind(addr)
                .map_err(|e| ShmemError::Boot(format!("rank 0 cannot listen on {addr}: {e}")))?,
        };
        l.set_nonblocking(true)
            .map_err(|e| ShmemError::io("listener", e))?;
        let (tx, rx) = mpsc::channel::<Verified>();
        let in_flight = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Handshakes running, oldest first.
        let mut pending = std::collections::VecDeque::<Pending>::new();
        let mut joined = 1;
        while joined < size {
            let mut idle = true;
            match l.accept() {
                Ok((s, _)) => {
                    idle = false;
                    use std::sync::atomic::Ordering::Relaxed;
                    pending.retain(|p| p.stage.load(Relaxed) != OVER);
                    if pending.len() >= MAX_HANDSHAKES {
                        // Make room: close the oldest handshake still waiting for its answer
                        // (its thread ends at once). One that answered is being verified.
                        if let Some(i) = pending
                            .iter()
                            .position(|p| p.stage.load(Relaxed) == WAITING)
                        {
                            if let Some(p) = pending.remove(i) {
                                let _ = p.stream.shutdown(std::net::Shutdown::Both);
                            }
                        }
                    }
                    // Threads of closed handshakes end within a scheduling round; should they
                    // not, new connections wait for them rather than add threads without end.
                    let stage = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(WAITING));
                    let kept = s.try_clone();
                    if in_flight.load(Relaxed) >= 2 * MAX_HANDSHAKES || kept.is_err() {
                        drop(s);
                    } else if let Ok(kept) = kept {
                        in_flight.fetch_add(1, Relaxed);
                        let (tx, job, secret, n, st) = (
                            tx.clone(),
                            job.to_owned(),
                            secret.to_vec(),
                            in_flight.clone(),
                            stage.clone(),
                        );
                        let hs_deadline = deadline.min(Instant::now() + HANDSHAKE_TIMEOUT);
                        let spawned = std::thread::Builder::new()
                            .name("gda-handshake".into())
                            .spawn(move || {
                                let closer = s.try_clone();
                                match Self::greet(s, size, &job, &secret, hs_deadline, &st) {
                                    Some(v) => {
                                        let _ = tx.send(v);
                                    }
                                    // Hung up now, not when the loop lets go of its copy.
                                    None => {
                                        if let Ok(c) = closer {
                                            let _ = c.shutdown(std::net::Shutdown::Both);
                                        }
                                    }
                                }
                                st.store(OVER, Relaxed);
                                n.fetch_sub(1, Relaxed);
                            });
                        if spawned.is_err() {
                            in_flight.fetch_sub(1, Relaxed);
                        } else {
                            pending.push_back(Pending {
                                stream: kept,
                                stage,
                            });
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ShmemError::io("accepting a rendezvous connection", e)),
            }
            while let Ok(mut v) = rx.try_recv() {
                idle = false;
                let _ = v.stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT));
                let slot = &mut peers[v.rank as usize];
                if slot.is_some() {
                    refuse(
                        &mut v.stream,
                        &format!("rank {} already joined this job", v.rank),
                    );
                    continue;
                }
                let tag = mac(secret, b"gda-server", job, v.rank, &v.nonce1);
                if send(&mut v.stream, &[&[0u8][..], &tag[..]].concat()).is_ok() {
                    *slot = Some(v.stream);
                    joined += 1;
                }
            }
            if Instant::now() >= deadline {
                let missing = (1..size).filter(|&r| peers[r as usize].is_none()).collect();
                return Err(ShmemError::Timeout {
                    what: format!("ranks to join the rendezvous at {addr}"),
                    after: timeout,
                    missing,
                });
            }
            if idle {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// Rank 0's side of one handshake, up to the client's proof; `Some` if it proved the
    /// secret for a rank of this job.
    fn greet(
        mut s: TcpStream,
        size: u32,
        job: &str,
        secret: &[u8],
        deadline: Instant,
        stage: &std::sync::atomic::AtomicU8,
    ) -> Option<Verified> {
        s.set_nonblocking(false).ok()?;
        s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
        let nonce0: [u8; 32] = rand::random();
        send(&mut s, &[&nonce0[..], &key_id(secret, job)[..]].concat()).ok()?;
        // Capped at the answer's size: nothing big is allocated before the proof.
        let m = recv(&mut s, deadline, ANSWER_BYTES as u32).ok()?;
        if m.len() != ANSWER_BYTES {
            return None;
        }
        stage.store(ANSWERED, std::sync::atomic::Ordering::Relaxed);
        let rank = u32::from_le_bytes(m[..4].try_into().ok()?);
        if !verify(secret, b"gda-client", job, rank, &nonce0, &m[36..]) {
            return None;
        }
        if rank == 0 || rank >= size {
            refuse(
                &mut s,
                &format!("rank {rank} is not in 1..{size} of this job"),
            );
            return None;
        }
        let mut nonce1 = [0u8; 32];
        nonce1.copy_from_slice(&m[4..36]);
        Some(Verified {
            rank,
            stream: s,
            nonce1,
        })
    }

    /// A client: connects and handshakes until admitted or the deadline.
    fn dial(
        rank: u32,
        meet: Meet,
        job: &str,
        secret: &Secret,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(TcpStream, Vec<u8>)> {
        let mut last = String::from("nothing tried yet");
        let mut addr = match meet {
            Meet::At(a) => a.to_string(),
            Meet::KeyedPort(ip) => format!("{ip} (port from the job secret)"),
        };
        loop {
            if Instant::now() >= deadline {
                return Err(ShmemError::Timeout {
                    what: format!("rank 0 at {addr} ({last})"),
                    after: timeout,
                    missing: vec![0],
                });
            }
            let Some(key) = secret.current()? else {
                last = "the job secret file does not exist yet".into();
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            let at = meet.resolve(&key, job);
            addr = at.to_string();
            match TcpStream::connect_timeout(&at, Duration::from_millis(500)) {
                Ok(s) => match Self::join(s, rank, job, &key, deadline)? {
                    Joined::Yes(s) => return Ok((s, key)),
                    Joined::Retry(why) => last = why,
                    Joined::OtherSecret => match secret {
                        Secret::Known(_) => {
                            return Err(ShmemError::Boot(format!(
                                "rank {rank}: rank 0 at {addr} uses another job secret than this \
                                 PE (GDA_SHMEM_SECRET must be the same on every rank)"
                            )));
                        }
                        Secret::File(p) => {
                            last = format!("the secret in {} is not rank 0's (yet)", p.display());
                        }
                    },
                },
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A client's side of the handshake on a fresh connection.
    fn join(
        mut s: TcpStream,
        rank: u32,
        job: &str,
        secret: &[u8],
        deadline: Instant,
    ) -> Result<Joined> {
        let fail =
            |e: String| ShmemError::Boot(format!("rank {rank}: handshake with rank 0 failed: {e}"));
        let _ = s.set_write_timeout(Some(HANDSHAKE_TIMEOUT));
        let hello = match recv(&mut s, deadline, HELLO_BYTES as u32) {
            Ok(h) if h.len() == HELLO_BYTES => h,
            Ok(h) => return Err(fail(format!("greeting of {} bytes", h.len()))),
            Err(e) if closed(&e) => {
                return Ok(Joined::Retry(
                    "rank 0 closed the connection before greeting".into(),
                ));
            }
            Err(e) => return Err(fail(e.to_string())),
        };
        let (nonce0, id) = hello.split_at(32);
        if id != key_id(secret, job) {
            return Ok(Joined::OtherSecret);
        }
        let nonce1: [u8; 32] = rand::random();
        let mut m = rank.to_le_bytes().to_vec();
        m.extend_from_slice(&nonce1);
        m.extend_from_slice(&mac(secret, b"gda-client", job, rank, nonce0));
        let lost = |e: std::io::Error| {
            if closed(&e) {
                fail(format!(
                    "rank 0 closed the connection without an answer ({e}): it did not accept \
                     rank {rank}'s proof of the job secret, or the handshake took longer than \
                     {HANDSHAKE_TIMEOUT:?}"
                ))
            } else {
                fail(e.to_string())
            }
        };
        // Closed before the verdict: rank 0 made room for newer connections (a flood at its
        // port) before this one's answer came. The key id matched, so the secret is right:
        // connect again.
        let again = |e: &std::io::Error| {
            closed(e).then(|| {
                Joined::Retry(format!(
                    "rank 0 closed the connection before its verdict ({e}); busy, or the \
                     handshake took longer than {HANDSHAKE_TIMEOUT:?}"
                ))
            })
        };
        if let Err(e) = send(&mut s, &m) {
            return again(&e).ok_or_else(|| lost(e));
        }
        let verdict = match recv(&mut s, deadline, VERDICT_MAX as u32) {
            Ok(v) => v,
            Err(e) => return again(&e).ok_or_else(|| lost(e)),
        };
        match verdict.split_first() {
            Some((0, tag)) if verify(secret, b"gda-server", job, rank, &nonce1, tag) => {
                Ok(Joined::Yes(s))
            }
            Some((0, _)) => Err(fail("rank 0 does not know the job secret".into())),
            Some((1, why)) => Err(fail(format!(
                "rank 0 refused: {}",
                String::from_utf8_lossy(why)
            ))),
            _ => Err(fail("malformed answer from rank 0".into())),
        }
    }
}

impl Bootstrap for TcpBoot {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn job(&self) -> &str {
        &self.job
    }

    fn names(&self) -> &gda_os::shm::JobNames {
        &self.names
    }

    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let deadline = Instant::now() + self.timeout;
        let lost = |r: u32, e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::TimedOut
                || e.kind() == std::io::ErrorKind::WouldBlock
            {
                ShmemError::Timeout {
                    what: "a bootstrap collective".into(),
                    after: self.timeout,
                    missing: vec![r],
                }
            } else if closed(&e) {
                ShmemError::Boot(format!(
                    "rank {r} closed its bootstrap connection during a collective (its process \
                     exited, failed or was killed: see its own output) [{e}]"
                ))
            } else {
                ShmemError::Boot(format!("bootstrap connection to rank {r} failed: {e}"))
            }
        };
        if self.rank == 0 {
            let mut all = vec![mine.to_vec()];
            let mut missing = Vec::new();
            let mut first_err = None;
            for (r, p) in self.peers.iter_mut().enumerate().skip(1) {
                let Some(s) = p.as_mut() else {
                    missing.push(r as u32);
                    continue;
                };
                match recv(s, deadline, MAX_FRAME) {
                    Ok(b) => all.push(b),
                    Err(e) => {
                        missing.push(r as u32);
                        first_err.get_or_insert(lost(r as u32, e));
                        all.push(Vec::new());
                    }
                }
            }
            if !missing.is_empty() {
                return Err(match first_err {
                    Some(ShmemError::Timeout { what, after, .. }) => ShmemError::Timeout {
                        what,
                        after,
                        missing,
                    },
                    Some(e) => e,
                    None => ShmemError::Boot("rendezvous incomplete".into()),
                });
            }
            let mut flat = Vec::new();
            for b in &all {
                flat.extend_from_slice(&(b.len() as u32).to_le_bytes());
                flat.extend_from_slice(b);
            }
            for (r, p) in self.peers.iter_mut().enumerate().skip(1) {
                if let Some(s) = p.as_mut() {
                    send(s, &flat).map_err(|e| lost(r as u32, e))?;
                }
            }
            Ok(all)
        } else {
            let s = self.peers[0]
                .as_mut()
                .ok_or_else(|| ShmemError::Boot("no rank 0".into()))?;
            send(s, mine).map_err(|e| lost(0, e))?;
            let flat = recv(s, deadline, MAX_FRAME).map_err(|e| lost(0, e))?;
            let mut out = Vec::with_capacity(self.size as usize);
            let mut at = 0usize;
            while at < flat.len() {
                let n = flat
                    .get(at..at + 4)
                    .and_then(|b| b.try_into().ok())
                    .map(u32::from_le_bytes)
                    .ok_or_else(|| ShmemError::Boot("malformed allgather reply".into()))?
                    as usize;
                let b = flat
                    .get(at + 4..at + 4 + n)
                    .ok_or_else(|| ShmemError::Boot("malformed allgather reply".into()))?;
                out.push(b.to_vec());
                at += 4 + n;
            }
            if out.len() != self.size as usize {
                return Err(ShmemError::Boot(format!(
                    "allgather reply has {} entries, expected {}",
                    out.len(),
                    self.size
                )));
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_addr() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    #[test]
    fn rendezvous_allgather_and_stray_connections() {
        let addr = free_addr();
        let t = Duration::from_secs(20);
        let spawn = |r: u32| {
            std::thread::spawn(move || {
                let mut b = TcpBoot::connect(r, 4, addr, "jobA", b"secret", t).unwrap();
                let a = b.allgather(&[r as u8; 3]).unwrap();
                b.barrier().unwrap();
                a
            })
        };
        let mut hs = vec![spawn(0)];
        // Strays reach rank 0 before the real ranks: garbage, a wrong secret, a silent
        // connection. None of them may join, and the rendezvous must still complete.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut g = loop {
            match TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("rank 0 never listened: {e}"),
            }
        };
        let _ = g.write_all(b"GET / HTTP/1.0\r\n\r\n");
        let e = TcpBoot::connect(1, 4, addr, "jobA", b"wrong", Duration::from_secs(5));
        assert!(e.is_err(), "a wrong secret joined");
        let _idle = TcpStream::connect(addr);
        hs.extend((1..4).map(spawn));
        for h in hs {
            let a = h.join().unwrap();
            assert_eq!(a, (0..4u8).map(|r| vec![r; 3]).collect::<Vec<_>>());
        }
    }

    fn connect_raw(addr: SocketAddr) -> TcpStream {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match TcpStream::connect(addr) {
                Ok(s) => return s,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => panic!("rank 0 never listened: {e}"),
            }
        }
    }

    #[test]
    fn idle_connections_do_not_stall_the_rendezvous() {
        // Before the fix rank 0 served handshakes one at a time, 2 s each: a handful of idle
        // connections timed a job out. Now each has its own thread and deadline.
        let addr = free_addr();
        let t = Duration::from_secs(30);
        let r0 = std::thread::spawn(move || TcpBoot::connect(0, 3, addr, "jobI", b"k", t));
        let idle: Vec<TcpStream> = (0..40).map(|_| connect_raw(addr)).collect();
        let start = Instant::now();
        let rs: Vec<_> = (1..3)
            .map(|r| std::thread::spawn(move || TcpBoot::connect(r, 3, addr, "jobI", b"k", t)))
            .collect();
        for h in rs {
            h.join().unwrap().unwrap();
        }
        r0.join().unwrap().unwrap();
        assert!(
            start.elapsed() < HANDSHAKE_TIMEOUT / 2,
            "40 idle connections delayed the rendezvous by {:?}",
            start.elapsed()
        );
        drop(idle);
    }

    /// A flood of connections from outside the job does not delay it (issue 44, item 8): a
    /// thread keeps connections to rank 0's port open and silent, replacing each that rank 0
    /// closes at once (up to four times `MAX_HANDSHAKES` of them), while ranks 1 and 2 join. Before, every slot was
    /// held by the flood and each rank got in only when a slot's 5-s handshake deadline
    /// expired (5-11 s); now the oldest silent connection makes room, and the job meets in well
    /// under a handshake's deadline.
    #[test]
    fn a_flood_of_connections_from_outside_does_not_delay_the_rendezvous() {
        crate::launch::raise_open_file_limit();
        let addr = free_addr();
        let t = Duration::from_secs(30);
        let r0 = std::thread::spawn(move || TcpBoot::connect(0, 3, addr, "jobF", b"k", t));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let opened = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let flooder = {
            let (stop, opened) = (stop.clone(), opened.clone());
            std::thread::spawn(move || {
                // Every connection is held open and silent for as long as rank 0 keeps it; one
                // it closed is replaced at once (the flood keeps every slot it can).
                let mut held: std::collections::VecDeque<TcpStream> = Default::default();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if held.len() < 4 * MAX_HANDSHAKES {
                        if let Ok(s) = TcpStream::connect(addr) {
                            let _ = s.set_nonblocking(true);
                            held.push_back(s);
                            opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    // Let go of the connections rank 0 closed (EOF after its hello).
                    for _ in 0..8 {
                        let Some(mut s) = held.pop_front() else { break };
                        let mut b = [0u8; 64];
                        let gone = loop {
                            match s.read(&mut b) {
                                Ok(0) => break true,
                                Ok(_) => {}
                                Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
                            }
                        };
                        if !gone {
                            held.push_back(s);
                        }
                    }
                }
            })
        };
        // The flood fills every handshake slot first.
        let filled = Instant::now();
        while opened.load(std::sync::atomic::Ordering::Relaxed) < (MAX_HANDSHAKES + 64) as u64 {
            assert!(
                filled.elapsed() < Duration::from_secs(20),
                "the flood never filled the slots"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let start = Instant::now();
        let rs: Vec<_> = (1..3)
            .map(|r| std::thread::spawn(move || TcpBoot::connect(r, 3, addr, "jobF", b"k", t)))
            .collect();
        for h in rs {
            h.join().unwrap().unwrap();
        }
        r0.join().unwrap().unwrap();
        let took = start.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        flooder.join().unwrap();
        let opened = opened.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            opened > MAX_HANDSHAKES as u64,
            "the flood opened only {opened} connections"
        );
        assert!(
            took < HANDSHAKE_TIMEOUT / 2,
            "a flood of {opened} connections delayed the rendezvous by {took:?}"
        );
    }

    #[test]
    fn preauth_frames_are_capped_and_refusals_are_explained() {
        let addr = free_addr();
        let t = Duration::from_secs(20);
        let r0 = std::thread::spawn(move || TcpBoot::connect(0, 2, addr, "jobC", b"k", t));
        // Announce a 64 MiB frame before authenticating: rank 0 must hang up at once instead
        // of allocating and waiting for it.
        let mut s = connect_raw(addr);
        let hello = recv(&mut s, Instant::now() + t, HELLO_BYTES as u32).unwrap();
        assert_eq!(hello.len(), HELLO_BYTES);
        s.write_all(&(64u32 << 20).to_le_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let start = Instant::now();
        let mut b = [0u8; 1];
        let n = s.read(&mut b);
        assert!(
            matches!(n, Ok(0)) || n.as_ref().is_err_and(closed),
            "rank 0 kept the connection: {n:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(1));
        // A rank outside the job is told why.
        let e = refused(5, 6, addr, "jobC", b"k");
        assert!(e.contains("rank 5 is not in 1..2"), "{e}");
        // Wrong secret: the client knows before answering, and says so.
        let e = refused(1, 2, addr, "jobC", b"other");
        assert!(e.contains("another job secret"), "{e}");
        let _b1 = TcpBoot::connect(1, 2, addr, "jobC", b"k", t).unwrap();
        r0.join().unwrap().unwrap();
    }

    /// The error a client that must be refused gets.
    fn refused(rank: u32, size: u32, addr: SocketAddr, job: &str, secret: &[u8]) -> String {
        TcpBoot::connect(rank, size, addr, job, secret, Duration::from_secs(5))
            .err()
            .unwrap()
            .to_string()
    }

    #[test]
    fn duplicate_ranks_are_refused_with_a_reason() {
        let addr = free_addr();
        let t = Duration::from_secs(20);
        let r0 = std::thread::spawn(move || TcpBoot::connect(0, 3, addr, "jobD", b"k", t));
        let _a = TcpBoot::connect(1, 3, addr, "jobD", b"k", t).unwrap();
        let e = refused(1, 3, addr, "jobD", b"k");
        assert!(e.contains("rank 1 already joined"), "{e}");
        let _c = TcpBoot::connect(2, 3, addr, "jobD", b"k", t).unwrap();
        r0.join().unwrap().unwrap();
    }

    #[test]
    fn a_stale_secret_file_is_reread_not_used() {
        let dir = std::env::temp_dir().join(format!("gda-tcp-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("job.secret");
        // An earlier job with the same id left its secret behind.
        let private = |p: &std::path::Path, secret: [u8; 32]| {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(p)
                .unwrap();
            f.write_all(hex::encode(secret).as_bytes()).unwrap();
        };
        private(&path, [7u8; 32]);
        let addr = free_addr();
        let t = Duration::from_secs(20);
        let p = path.clone();
        let r1 = std::thread::spawn(move || {
            TcpBoot::connect_with(1, 2, addr, "jobS", &Secret::File(p), t)
        });
        // Rank 0 starts late, listening with a fresh secret before writing it out.
        std::thread::sleep(Duration::from_millis(300));
        let fresh = [9u8; 32];
        let r0 = std::thread::spawn(move || TcpBoot::connect(0, 2, addr, "jobS", &fresh, t));
        std::thread::sleep(Duration::from_millis(300));
        private(&dir.join("new"), fresh);
        std::fs::rename(dir.join("new"), &path).unwrap();
        r1.join().unwrap().unwrap();
        r0.join().unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_ranks_are_named() {
        let addr = free_addr();
        // Rank 2 joins, then finds rank 0 gone at its first collective.
        let h = std::thread::spawn(move || {
            TcpBoot::connect(2, 4, addr, "jobB", b"s", Duration::from_secs(5))
                .and_then(|mut b| b.allgather(b"x"))
                .map(|_| ())
        });
        match TcpBoot::connect(0, 4, addr, "jobB", b"s", Duration::from_millis(600)) {
            Err(ShmemError::Timeout { missing, .. }) => assert_eq!(missing, vec![1, 3]),
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert!(h.join().unwrap().is_err());
        // Nobody listening: the client names rank 0.
        match TcpBoot::connect(1, 2, free_addr(), "jobB", b"s", Duration::from_millis(300)) {
            Err(ShmemError::Timeout { missing, .. }) => assert_eq!(missing, vec![0]),
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
}
