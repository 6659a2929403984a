//! PEs as processes meeting over TCP at rank 0.
//!
//! Rank 0 listens; every other rank connects (retrying until the deadline: rank 0 may start
//! last). Each connection proves knowledge of the job secret in both directions before it
//! counts: rank 0 sends a nonce, the client answers with its rank, its own nonce and
//! `HMAC-SHA256(secret, "gda-client" | job | rank | nonce0)`, rank 0 answers with
//! `HMAC(secret, "gda-server" | job | rank | nonce1)`. A connection that fails (wrong secret,
//! wrong job, duplicate or out-of-range rank, garbage) is dropped and does not count; the
//! rendezvous goes on. Collectives go through rank 0 (`allgather`: everyone sends, rank 0
//! answers with all); they run only at init, team creation and finalize.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::Bootstrap;
use crate::error::{Result, ShmemError};

const MAX_FRAME: u32 = 64 << 20;

/// One process PE's bootstrap.
pub struct TcpBoot {
    rank: u32,
    size: u32,
    job: String,
    timeout: Duration,
    /// Rank 0: connections of ranks 1.., by rank. Others: the connection to rank 0.
    peers: Vec<Option<TcpStream>>,
}

fn mac(secret: &[u8], role: &[u8], job: &str, rank: u32, nonce: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    m.update(role);
    m.update(job.as_bytes());
    m.update(&rank.to_le_bytes());
    m.update(nonce);
    m.finalize().into_bytes().into()
}

fn verify(secret: &[u8], role: &[u8], job: &str, rank: u32, nonce: &[u8], tag: &[u8]) -> bool {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    m.update(role);
    m.update(job.as_bytes());
    m.update(&rank.to_le_bytes());
    m.update(nonce);
    m.verify_slice(tag).is_ok()
}

fn send(s: &mut TcpStream, b: &[u8]) -> std::io::Result<()> {
    let n = u32::try_from(b.len()).map_err(|_| std::io::Error::other("frame too large"))?;
    s.write_all(&n.to_le_bytes())?;
    s.write_all(b)
}

fn recv(s: &mut TcpStream, deadline: Instant) -> std::io::Result<Vec<u8>> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::ErrorKind::TimedOut.into());
    }
    s.set_read_timeout(Some(left))?;
    let mut n = [0u8; 4];
    s.read_exact(&mut n)?;
    let n = u32::from_le_bytes(n);
    if n > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut b = vec![0u8; n as usize];
    s.read_exact(&mut b)?;
    Ok(b)
}

impl TcpBoot {
    /// Rendezvous of `size` PEs at `addr` for `job`, authenticated with `secret`.
    pub fn connect(
        rank: u32,
        size: u32,
        addr: SocketAddr,
        job: &str,
        secret: &[u8],
        timeout: Duration,
    ) -> Result<Self> {
        if size == 0 || rank >= size {
            return Err(ShmemError::Config(format!("rank {rank} of {size}")));
        }
        let deadline = Instant::now() + timeout;
        let mut peers: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
        if rank == 0 {
            let l = TcpListener::bind(addr)
                .map_err(|e| ShmemError::Boot(format!("rank 0 cannot listen on {addr}: {e}")))?;
            l.set_nonblocking(true)
                .map_err(|e| ShmemError::io("listener", e))?;
            let mut joined = 1;
            while joined < size {
                match l.accept() {
                    Ok((mut s, _)) => {
                        if let Some(r) = Self::admit(&mut s, size, job, secret, &peers, deadline) {
                            peers[r as usize] = Some(s);
                            joined += 1;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if Instant::now() >= deadline {
                            let missing =
                                (1..size).filter(|&r| peers[r as usize].is_none()).collect();
                            return Err(ShmemError::Timeout {
                                what: format!("ranks to join the rendezvous at {addr}"),
                                after: timeout,
                                missing,
                            });
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(e) => return Err(ShmemError::io("accepting a rendezvous connection", e)),
                }
            }
        } else {
            let mut last = String::new();
            let s = loop {
                if Instant::now() >= deadline {
                    return Err(ShmemError::Timeout {
                        what: format!("rank 0 at {addr} ({last})"),
                        after: timeout,
                        missing: vec![0],
                    });
                }
                match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                    Ok(mut s) => match Self::join(&mut s, rank, job, secret, deadline) {
                        Ok(()) => break s,
                        Err(e) => return Err(e),
                    },
                    Err(e) => {
                        last = e.to_string();
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            };
            peers[0] = Some(s);
        }
        for s in peers.iter().flatten() {
            let _ = s.set_nodelay(true);
            let _ = s.set_nonblocking(false);
        }
        Ok(Self {
            rank,
            size,
            job: job.to_owned(),
            timeout,
            peers,
        })
    }

    /// Rank 0's side of the handshake; `Some(rank)` if the connection proved the secret.
    fn admit(
        s: &mut TcpStream,
        size: u32,
        job: &str,
        secret: &[u8],
        peers: &[Option<TcpStream>],
        deadline: Instant,
    ) -> Option<u32> {
        s.set_nonblocking(false).ok()?;
        // A silent stray connection must not stall the rendezvous for long.
        let hs_deadline = deadline.min(Instant::now() + Duration::from_secs(2));
        let nonce0: [u8; 32] = rand::random();
        send(s, &nonce0).ok()?;
        let m = recv(s, hs_deadline).ok()?;
        if m.len() != 4 + 32 + 32 {
            return None;
        }
        let rank = u32::from_le_bytes(m[..4].try_into().ok()?);
        if rank == 0 || rank >= size || peers[rank as usize].is_some() {
            return None;
        }
        if !verify(secret, b"gda-client", job, rank, &nonce0, &m[36..]) {
            return None;
        }
        send(s, &mac(secret, b"gda-server", job, rank, &m[4..36])).ok()?;
        Some(rank)
    }

    /// A client's side of the handshake.
    fn join(
        s: &mut TcpStream,
        rank: u32,
        job: &str,
        secret: &[u8],
        deadline: Instant,
    ) -> Result<()> {
        let fail =
            |e: String| ShmemError::Boot(format!("rank {rank}: handshake with rank 0 failed: {e}"));
        let nonce0 = recv(s, deadline).map_err(|e| fail(e.to_string()))?;
        let nonce1: [u8; 32] = rand::random();
        let mut m = rank.to_le_bytes().to_vec();
        m.extend_from_slice(&nonce1);
        m.extend_from_slice(&mac(secret, b"gda-client", job, rank, &nonce0));
        send(s, &m).map_err(|e| fail(e.to_string()))?;
        let tag = recv(s, deadline).map_err(|e| {
            fail(format!(
                "{e} (wrong job secret, or rank {rank} already joined?)"
            ))
        })?;
        if !verify(secret, b"gda-server", job, rank, &nonce1, &tag) {
            return Err(fail("rank 0 does not know the job secret".into()));
        }
        Ok(())
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
            } else {
                ShmemError::Boot(format!("connection to rank {r} lost: {e}"))
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
                match recv(s, deadline) {
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
            let flat = recv(s, deadline).map_err(|e| lost(0, e))?;
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
