//! The cross-process fabric: sim NICs in different processes of one host reach each other.
//!
//! Each process keeps its own [`Fabric`](crate::Fabric) and engine. A fabric joined to a host job
//! ([`Fabric::shared`](crate::Fabric::shared)) publishes, in a small shared-memory *registry*
//! (`/gda-<job>-sim<rank>.<tag>`, the tag keyed with the job's secret: `gda_os::shm::JobNames`), what a remote requester needs to act as this process's responder:
//! its QPs (number, protection domain, state) and the regions registered for remote access
//! with [`Pd::register_shared`](crate::Pd::register_shared) (rkey, address, length, rights, and
//! the shared-memory segment that backs them). A requester's engine executes RDMA WRITE, READ and
//! atomics against a peer by mapping the peer's segments and checking every access against the
//! peer's published keys, bounds, rights, PD and QP state: the same checks, and the same error
//! completions, as between NICs of one process.
//!
//! Only the owner writes its registry, under a lock, inside a seqlock (`seq` odd while writing);
//! readers take a consistent snapshot and reuse it until `seq` moves. A peer whose process is
//! gone stops answering (the requester's retries run out: `RETRY_EXC_ERR`).
//!
//! Two-sided operations (SEND, WRITE_WITH_IMM) need the peer's receive queue and are not carried
//! across processes; they complete with `REM_INV_REQ_ERR`.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use gda_os::shm::Segment;

use crate::mem::{Access, Fault};
use crate::types::{Endpoint, QpState};

/// Fabric ids of cross-process fabrics: `TAG | job hash << 16 | rank`.
const TAG: u64 = 0x5348 << 48;
const MAGIC: u64 = 0x6764_615f_7369_6d32; // "gda_sim2"
const MR_SLOTS: usize = 128;
const QP_SLOTS: usize = 4096;
/// How often a requester checks that a peer's process still exists.
const ALIVE_CHECK: Duration = Duration::from_millis(20);

#[repr(C)]
struct MrSlot {
    /// 0 free, 1 used.
    used: AtomicU64,
    rkey_pd: AtomicU64,
    access: AtomicU64,
    addr: AtomicU64,
    len: AtomicU64,
    seg_off: AtomicU64,
    seg_len: AtomicU64,
    seg: [AtomicU64; 8],
}

#[repr(C)]
struct QpSlot {
    /// `nic << 32 | qpn`, 0 when free (QPNs are never 0).
    key: AtomicU64,
    /// `pd << 32 | state`.
    state_pd: AtomicU64,
}

#[repr(C)]
struct Registry {
    magic: AtomicU64,
    pid: AtomicU64,
    /// The owner's PID namespace (`gda_os::process::pid_namespace`): its `pid` means something
    /// here only if ours is the same.
    pid_ns: AtomicU64,
    seq: AtomicU64,
    mrs: [MrSlot; MR_SLOTS],
    qps: [QpSlot; QP_SLOTS],
}

fn job_hash(job: &str) -> u64 {
    // FNV-1a folded to 32 bits: only needs to tell jobs apart within one host.
    let h = job.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h ^ (h >> 32)) & 0xffff_ffff
}

/// This process's side of a cross-process fabric.
pub(crate) struct HostLink {
    job: String,
    names: gda_os::shm::JobNames,
    rank: u32,
    prefix: u64,
    own: Segment,
    write: Mutex<()>,
    peers: RwLock<HashMap<u32, Arc<Peer>>>,
}

impl std::fmt::Debug for HostLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLink")
            .field("job", &self.job)
            .field("rank", &self.rank)
            .finish_non_exhaustive()
    }
}

fn registry(seg: &Segment) -> &Registry {
    // SAFETY: the segment is at least `size_of::<Registry>()` bytes (checked at create/open),
    // page-aligned, and every field is an atomic, so shared access from processes is sound.
    unsafe { &*seg.as_ptr().cast::<Registry>() }
}

impl HostLink {
    pub(crate) fn create(names: &gda_os::shm::JobNames, rank: u32) -> io::Result<Self> {
        let job = names.job();
        if rank > 0xffff {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("rank {rank} is above the cross-process fabric's 65535"),
            ));
        }
        let own = Segment::create(
            job,
            &names.what(&format!("sim{rank}")),
            size_of::<Registry>(),
        )?;
        let r = registry(&own);
        r.pid
            .store(u64::from(std::process::id()), Ordering::Relaxed);
        r.pid_ns
            .store(gda_os::process::pid_namespace(), Ordering::Relaxed);
        r.magic.store(MAGIC, Ordering::Release);
        Ok(Self {
            job: job.to_owned(),
            names: names.clone(),
            rank,
            prefix: TAG | job_hash(job) << 16,
            own,
            write: Mutex::new(()),
            peers: RwLock::new(HashMap::new()),
        })
    }

    /// The job this fabric belongs to.
    pub(crate) fn job(&self) -> &str {
        &self.job
    }

    /// The fabric id of this process's fabric.
    pub(crate) fn fabric_id(&self) -> u64 {
        self.prefix | u64::from(self.rank)
    }

    /// Removes the registry's name (mappings, ours and peers', stay valid).
    pub(crate) fn unlink(&self) -> io::Result<()> {
        self.own.unlink()
    }

    fn edit<R>(&self, f: impl FnOnce(&Registry) -> R) -> R {
        let _g = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let r = registry(&self.own);
        // ORDERING: odd while editing; readers that saw an odd or changed seq retry.
        r.seq.fetch_add(1, Ordering::AcqRel);
        std::sync::atomic::fence(Ordering::Release);
        let out = f(r);
        r.seq.fetch_add(1, Ordering::Release);
        out
    }

    /// Publishes a region backed by `seg` (at `seg_off`); returns its slot.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn publish_mr(
        &self,
        rkey: u32,
        pd: u32,
        access: Access,
        addr: u64,
        len: u64,
        seg: &str,
        seg_off: u64,
        seg_len: u64,
    ) -> Result<usize, String> {
        let name = seg.as_bytes();
        if name.len() > 64 {
            return Err(format!("segment name {seg:?} is longer than 64 bytes"));
        }
        self.edit(|r| {
            let (i, s) = r
                .mrs
                .iter()
                .enumerate()
                .find(|(_, s)| s.used.load(Ordering::Relaxed) == 0)
                .ok_or_else(|| format!("more than {MR_SLOTS} cross-process regions"))?;
            s.rkey_pd
                .store(u64::from(rkey) | u64::from(pd) << 32, Ordering::Relaxed);
            s.access.store(u64::from(access.bits()), Ordering::Relaxed);
            s.addr.store(addr, Ordering::Relaxed);
            s.len.store(len, Ordering::Relaxed);
            s.seg_off.store(seg_off, Ordering::Relaxed);
            s.seg_len.store(seg_len, Ordering::Relaxed);
            let mut words = [0u8; 64];
            words[..name.len()].copy_from_slice(name);
            for (w, c) in s.seg.iter().zip(words.chunks_exact(8)) {
                w.store(
                    u64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
                    Ordering::Relaxed,
                );
            }
            s.used.store(1, Ordering::Relaxed);
            Ok(i)
        })
    }

    pub(crate) fn retract_mr(&self, slot: usize) {
        self.edit(|r| {
            if let Some(s) = r.mrs.get(slot) {
                s.used.store(0, Ordering::Relaxed);
            }
        });
    }

    /// Publishes (or updates) a QP's state.
    pub(crate) fn publish_qp(&self, nic: u32, qpn: u32, pd: u32, state: Option<QpState>) {
        let key = u64::from(nic) << 32 | u64::from(qpn);
        self.edit(|r| {
            let slot = r
                .qps
                .iter()
                .find(|s| s.key.load(Ordering::Relaxed) == key)
                .or_else(|| {
                    state.and_then(|_| r.qps.iter().find(|s| s.key.load(Ordering::Relaxed) == 0))
                });
            if let Some(s) = slot {
                match state {
                    Some(st) => {
                        s.state_pd
                            .store(u64::from(pd) << 32 | st as u64, Ordering::Relaxed);
                        s.key.store(key, Ordering::Relaxed);
                    }
                    None => s.key.store(0, Ordering::Relaxed),
                }
            }
        });
    }

    /// The peer a foreign endpoint belongs to (`None`: not a fabric of this job).
    pub(crate) fn peer_of(&self, ep: &Endpoint) -> Option<io::Result<Arc<Peer>>> {
        if ep.fabric & !0xffff != self.prefix {
            return None;
        }
        let rank = (ep.fabric & 0xffff) as u32;
        if let Some(p) = self
            .peers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&rank)
        {
            return Some(Ok(p.clone()));
        }
        let what = self.names.what(&format!("sim{rank}"));
        let p = Segment::open(&self.job, &what, size_of::<Registry>()).and_then(|seg| {
            if registry(&seg).magic.load(Ordering::Acquire) != MAGIC {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a gda sim registry", seg.name()),
                ));
            }
            let ns = registry(&seg).pid_ns.load(Ordering::Relaxed);
            let same_ns = ns != 0 && ns == gda_os::process::pid_namespace();
            let peer = Arc::new(Peer {
                job: self.job.clone(),
                // A PID from another namespace names an unrelated process here: such a
                // peer's death shows as a timeout instead.
                pid: if same_ns {
                    registry(&seg).pid.load(Ordering::Relaxed) as i32
                } else {
                    0
                },
                reg: seg,
                segs: Mutex::new(HashMap::new()),
            });
            // Map what the peer has registered now, while the names still exist.
            peer.snapshot()?;
            Ok(peer)
        });
        Some(p.map(|p| {
            self.peers
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .entry(rank)
                .or_insert(p)
                .clone()
        }))
    }
}

impl Drop for HostLink {
    fn drop(&mut self) {
        let _ = self.own.unlink();
    }
}

/// A peer process's registry, mapped.
pub(crate) struct Peer {
    job: String,
    pid: i32,
    reg: Segment,
    segs: Mutex<HashMap<String, Arc<Segment>>>,
}

/// One published region of a peer, with its local mapping.
#[derive(Clone)]
pub(crate) struct PeerMr {
    rkey: u32,
    pd: u32,
    access: Access,
    addr: u64,
    len: u64,
    /// Local address of the region's first byte.
    base: u64,
    _seg: Arc<Segment>,
}

impl Peer {
    /// A consistent copy of the peer's regions (mapping their segments on first sight).
    fn snapshot(&self) -> io::Result<(u64, Vec<PeerMr>)> {
        let r = registry(&self.reg);
        // The owner may be descheduled mid-edit (oversubscribed hosts): retry for a while,
        // yielding, before giving up.
        let give_up = Instant::now() + Duration::from_secs(2);
        let mut tries = 0u32;
        while tries < 64 || Instant::now() < give_up {
            tries = tries.saturating_add(1);
            if tries > 64 {
                std::thread::yield_now();
            }
            let g1 = r.seq.load(Ordering::Acquire);
            if g1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut raw = Vec::new();
            for s in &r.mrs {
                if s.used.load(Ordering::Relaxed) == 1 {
                    let mut name = Vec::with_capacity(64);
                    for w in &s.seg {
                        name.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
                    }
                    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                    name.truncate(end);
                    let rp = s.rkey_pd.load(Ordering::Relaxed);
                    raw.push((
                        rp as u32,
                        (rp >> 32) as u32,
                        Access::from_bits_truncate(s.access.load(Ordering::Relaxed) as u32),
                        s.addr.load(Ordering::Relaxed),
                        s.len.load(Ordering::Relaxed),
                        s.seg_off.load(Ordering::Relaxed),
                        s.seg_len.load(Ordering::Relaxed),
                        String::from_utf8_lossy(&name).into_owned(),
                    ));
                }
            }
            std::sync::atomic::fence(Ordering::Acquire);
            if r.seq.load(Ordering::Relaxed) != g1 {
                continue;
            }
            let mut out = Vec::with_capacity(raw.len());
            for (rkey, pd, access, addr, len, off, seg_len, name) in raw {
                let seg = self.segment(&name, seg_len)?;
                if off.checked_add(len).is_none_or(|e| e > seg.len() as u64) {
                    continue;
                }
                out.push(PeerMr {
                    rkey,
                    pd,
                    access,
                    addr,
                    len,
                    base: seg.as_ptr() as u64 + off,
                    _seg: seg,
                });
            }
            return Ok((g1, out));
        }
        Err(io::Error::other("peer registry kept changing"))
    }

    fn segment(&self, what: &str, len: u64) -> io::Result<Arc<Segment>> {
        let mut m = self.segs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = m.get(what) {
            return Ok(s.clone());
        }
        let s = Arc::new(Segment::open(&self.job, what, len as usize)?);
        m.insert(what.to_owned(), s.clone());
        Ok(s)
    }

    fn alive(&self) -> bool {
        self.pid <= 0 || gda_os::process::process_alive(self.pid as u32)
    }

    fn qp(&self, nic: u32, qpn: u32) -> Option<(QpState, u32)> {
        let key = u64::from(nic) << 32 | u64::from(qpn);
        registry(&self.reg)
            .qps
            .iter()
            .find(|s| s.key.load(Ordering::Acquire) == key)
            .map(|s| {
                let v = s.state_pd.load(Ordering::Acquire);
                (QpState::from_u8(v as u8), (v >> 32) as u32)
            })
    }

    /// Whether the peer has a QP `ep` names (any state).
    pub(crate) fn has_qp(&self, ep: &Endpoint) -> bool {
        self.qp(ep.nic, ep.qpn).is_some()
    }
}

/// A requester's view of one remote-process responder QP (engine only).
pub(crate) struct PeerQp {
    peer: Arc<Peer>,
    nic: u32,
    qpn: u32,
    seq: u64,
    mrs: Vec<PeerMr>,
    checked: Instant,
    alive: bool,
}

impl PeerQp {
    pub(crate) fn new(peer: Arc<Peer>, ep: &Endpoint) -> Self {
        Self {
            peer,
            nic: ep.nic,
            qpn: ep.qpn,
            seq: u64::MAX,
            mrs: Vec::new(),
            checked: Instant::now(),
            alive: true,
        }
    }

    /// The responder's PD if it can answer now (process alive, QP in RTR or RTS).
    pub(crate) fn ready(&mut self) -> Option<u32> {
        if self.checked.elapsed() > ALIVE_CHECK {
            self.alive = self.peer.alive();
            self.checked = Instant::now();
        }
        if !self.alive {
            return None;
        }
        match self.peer.qp(self.nic, self.qpn) {
            Some((QpState::Rtr | QpState::Rts, pd)) => Some(pd),
            _ => None,
        }
    }

    /// Checks a remote access like the peer's NIC would and returns the local address of
    /// `addr` in this process's mapping of the peer's memory.
    pub(crate) fn translate(
        &mut self,
        pd: u32,
        rkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<u64, Fault> {
        let g = registry(&self.peer.reg).seq.load(Ordering::Acquire);
        if g != self.seq {
            match self.peer.snapshot() {
                Ok((g, mrs)) => {
                    self.seq = g;
                    self.mrs = mrs;
                }
                Err(_) => return Err(Fault::BadKey),
            }
        }
        let mr = self
            .mrs
            .iter()
            .find(|m| m.rkey == rkey)
            .ok_or(Fault::BadKey)?;
        if mr.pd != pd {
            return Err(Fault::WrongPd);
        }
        // Overflow-checked on both sides: the region's bounds come from another process.
        let inside = addr >= mr.addr
            && addr
                .checked_add(len)
                .zip(mr.addr.checked_add(mr.len))
                .is_some_and(|(e, end)| e <= end);
        if !inside {
            return Err(Fault::OutOfBounds);
        }
        if !mr.access.contains(need) {
            return Err(Fault::NoAccess);
        }
        Ok(mr.base + (addr - mr.addr))
    }
}
