//! The PE handle: initialisation, transports, and the one-sided routines.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use gda_hal::shm::Segment;
use gda_hal::{
    AtomicOp, Payload, PostError, Provider, Remote, SendFlags, SendQueue, Sge, SqError, WorkRequest,
};

use crate::boot::Bootstrap;
use crate::domain::Domain;
use crate::error::{Result, ShmemError};
use crate::heap::{Allocator, Sym};
use crate::team::Teams;
use crate::types::{AtomicInt, Cmp, Elem, SignalOp, Width, cpu_load, cpu_rmw};

/// Which transport reaches which PE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportPolicy {
    /// P2P for PEs on the same host, RDMA for the others.
    Auto,
    /// RDMA through the provider for every other PE.
    Rdma,
    /// P2P for every PE (all must share the host).
    P2p,
}

impl std::str::FromStr for TransportPolicy {
    type Err = ShmemError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "" | "auto" => Ok(Self::Auto),
            "rdma" => Ok(Self::Rdma),
            "p2p" => Ok(Self::P2p),
            o => Err(ShmemError::Config(format!(
                "GDA_SHMEM_TRANSPORT={o:?}: expected auto, rdma or p2p"
            ))),
        }
    }
}

/// Configuration (defaults, or [`Config::from_env`]).
#[derive(Clone, Debug)]
pub struct Config {
    /// Symmetric heap bytes per PE (`GDA_SHMEM_HEAP_SIZE`, suffixes K/M/G; default 64 MiB).
    pub heap_size: usize,
    /// Transport choice (`GDA_SHMEM_TRANSPORT=auto|rdma|p2p`).
    pub transport: TransportPolicy,
    /// Bound of every wait (`GDA_SHMEM_TIMEOUT_MS`; default 30 s).
    pub timeout: Duration,
    /// Pretend the PEs are spread round-robin over this many hosts (`GDA_SHMEM_HOSTS`), so one
    /// machine can run the mixed P2P/RDMA configuration of a cluster.
    pub hosts: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            heap_size: 64 << 20,
            transport: TransportPolicy::Auto,
            timeout: Duration::from_secs(30),
            hosts: None,
        }
    }
}

/// Parses a size with an optional K/M/G suffix (binary).
pub fn parse_size(var: &str, s: &str) -> Result<usize> {
    let t = s.trim();
    let (num, mul) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|&n| n > 0)
        .ok_or_else(|| ShmemError::Config(format!("{var}={s:?} is not a size (e.g. 64M)")))
}

impl Config {
    /// Defaults overridden by `GDA_SHMEM_*` variables.
    pub fn from_env() -> Result<Self> {
        let mut c = Self::default();
        if let Ok(v) = std::env::var("GDA_SHMEM_HEAP_SIZE") {
            c.heap_size = parse_size("GDA_SHMEM_HEAP_SIZE", &v)?;
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_TRANSPORT") {
            c.transport = v.parse()?;
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_TIMEOUT_MS") {
            let ms: u64 = v.trim().parse().map_err(|_| {
                ShmemError::Config(format!("GDA_SHMEM_TIMEOUT_MS={v:?} is not a number"))
            })?;
            c.timeout = Duration::from_millis(ms.max(1));
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_HOSTS") {
            let h: u32 = v.trim().parse().ok().filter(|&h| h > 0).ok_or_else(|| {
                ShmemError::Config(format!("GDA_SHMEM_HOSTS={v:?} is not a positive number"))
            })?;
            c.hosts = Some(h);
        }
        Ok(c)
    }
}

/// Team slots (world, shared, and up to 14 split teams at once).
pub(crate) const TEAM_SLOTS: usize = 16;
/// Synchronisation words per team slot.
pub(crate) const PSYNC_WORDS: usize = 64;
/// Reduction/collect scratch per team slot.
pub(crate) const SCRATCH: usize = 64 << 10;
pub(crate) const TEAM_BYTES: usize = PSYNC_WORDS * 8 + SCRATCH;
/// Private staging memory for RDMA sources, destinations and atomic results.
const BOUNCE: usize = 4 << 20;

/// How a PE is reached.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// This PE.
    Local,
    /// Peer heap mapped here (`base` = its first byte in this address space).
    P2p(*mut u8),
    /// Through the provider: index into `rdma`.
    Rdma(usize),
}

struct RdmaPeer<P: Provider> {
    pe: u32,
    sq: SendQueue<P>,
    /// Peer's segment base in its address space, and its rkey.
    base: u64,
    rkey: u32,
    /// The next WQE to this PE waits for earlier ones (`fence`).
    fence: Cell<bool>,
    /// Something was posted since the last quiet.
    dirty: Cell<bool>,
}

/// Which transport reaches a PE (as reported by [`Pe::transport_to`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The calling PE itself.
    Local,
    /// Shared memory.
    P2p,
    /// RDMA through the provider.
    Rdma,
}

/// A processing element: its symmetric heap, its routes to every PE and its teams.
///
/// Created collectively ([`Pe::init`], or the helpers in [`crate::launch`]); one thread uses
/// it (`!Sync`). Dropping it is collective too (a final barrier over the bootstrap channel, so
/// no peer still writes into this heap).
pub struct Pe<P: Provider> {
    me: u32,
    n: u32,
    timeout: Duration,
    routes: Vec<Route>,
    rdma: Vec<RdmaPeer<P>>,
    lkey: u32,
    base: *mut u8,
    heap_size: usize,
    internal: usize,
    bounce: usize,
    bounce_used: Cell<usize>,
    heap: RefCell<Allocator>,
    /// The job heap's id (rank 0's pick at init): every `Sym` of this heap carries it.
    pub(crate) heap_id: u64,
    pids: Vec<u32>,
    /// Whether `pids[j]` can be checked for liveness here (another process, same host, same
    /// PID namespace).
    watch_pid: Vec<bool>,
    same_host: Vec<bool>,
    pub(crate) teams: RefCell<Teams>,
    boot: RefCell<Box<dyn Bootstrap>>,
    finalized: Cell<bool>,
    // Kept alive, and dropped in this order after the queues above: the QPs and regions, the
    // mapped peer heaps, this PE's heap.
    domain: Option<Box<dyn Domain<P = P>>>,
    peer_segs: std::mem::ManuallyDrop<Vec<Segment>>,
    seg: std::mem::ManuallyDrop<Segment>,
    /// The final barrier failed (a peer gave up): peers may still be storing into this heap,
    /// so its mapping is never unmapped (see `Drop`).
    unsafe_to_unmap: Cell<bool>,
}

// SAFETY: the raw pointers are into mappings the PE owns (or keeps alive); moving the PE to
// another thread moves that ownership. Not `Sync`: the routines use `Cell` state.
unsafe impl<P: Provider> Send for Pe<P> {}

fn host_key(rank: u32, cfg: &Config) -> String {
    if let Some(h) = cfg.hosts {
        return format!("simulated-host-{}", rank % h);
    }
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!("{}/{}", name.trim(), boot.trim())
}

/// What a PE tells the others about itself at init.
///
/// A process is identified by a random token drawn once per process (`process_token`), never
/// by its PID: PEs in different PID namespaces (containers, pods) can all be PID 1. The PID is
/// kept only to notice a dead peer, and only trusted for peers in our own PID namespace.
/// `base` is the peer's heap address *in its own address space*: it is used as an RDMA remote
/// address, never as a pointer here.
struct Info {
    token: u128,
    /// Rank 0's is the job heap's id (fresh for every init), which every [`Sym`] carries.
    heap_id: u64,
    pid: u32,
    pid_ns: u64,
    base: u64,
    len: u64,
    host: String,
}

/// This process's identity among PEs: 128 random bits from the OS, drawn once.
fn process_token() -> u128 {
    static TOKEN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    // rand's thread RNG is a CSPRNG seeded from the OS.
    *TOKEN.get_or_init(rand::random)
}

const INFO_FIXED: usize = 16 + 8 + 4 + 8 + 8 + 8;

impl Info {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(INFO_FIXED + self.host.len());
        b.extend_from_slice(&self.token.to_le_bytes());
        b.extend_from_slice(&self.heap_id.to_le_bytes());
        b.extend_from_slice(&self.pid.to_le_bytes());
        b.extend_from_slice(&self.pid_ns.to_le_bytes());
        b.extend_from_slice(&self.base.to_le_bytes());
        b.extend_from_slice(&self.len.to_le_bytes());
        b.extend_from_slice(self.host.as_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<Self> {
        let (mut fixed, host) = b
            .split_at_checked(INFO_FIXED)
            .ok_or_else(|| ShmemError::Boot(format!("malformed PE info ({} bytes)", b.len())))?;
        // `fixed` holds exactly INFO_FIXED bytes: every `take` below is in bounds.
        fn take<const N: usize>(b: &mut &[u8]) -> [u8; N] {
            let (head, rest) = b.split_at(N);
            *b = rest;
            head.try_into().unwrap_or([0; N])
        }
        Ok(Self {
            token: u128::from_le_bytes(take(&mut fixed)),
            heap_id: u64::from_le_bytes(take(&mut fixed)),
            pid: u32::from_le_bytes(take(&mut fixed)),
            pid_ns: u64::from_le_bytes(take(&mut fixed)),
            base: u64::from_le_bytes(take(&mut fixed)),
            len: u64::from_le_bytes(take(&mut fixed)),
            host: String::from_utf8_lossy(host).into_owned(),
        })
    }
}

impl<P: Provider> Pe<P> {
    /// Collective initialisation over `boot`. `domain` is the NIC for RDMA routes (`None`: P2P
    /// only, an error if some PE needs RDMA).
    pub fn init(
        mut boot: Box<dyn Bootstrap>,
        mut domain: Option<Box<dyn Domain<P = P>>>,
        cfg: &Config,
    ) -> Result<Self> {
        let (me, n) = (boot.rank(), boot.size());
        let job = boot.job().to_owned();
        let heap_size = cfg.heap_size.next_multiple_of(4096);
        let internal = heap_size;
        let bounce = internal + TEAM_SLOTS * TEAM_BYTES;
        let total = bounce + BOUNCE;
        let seg = Segment::create(&job, &format!("heap{me}"), total)
            .map_err(|e| ShmemError::io(format!("PE {me}: symmetric heap of {total} bytes"), e))?;
        let mine = Info {
            token: process_token(),
            heap_id: rand::random(),
            pid: std::process::id(),
            pid_ns: gda_hal::shm::pid_namespace(),
            base: seg.as_ptr() as u64,
            len: total as u64,
            host: host_key(me, cfg),
        };
        let infos = boot
            .allgather(&mine.encode())?
            .iter()
            .map(|b| Info::decode(b))
            .collect::<Result<Vec<_>>>()?;
        if let Some((j, i)) = infos
            .iter()
            .enumerate()
            .find(|(_, i)| i.len != total as u64)
        {
            return Err(ShmemError::Config(format!(
                "PE {j} has a heap of {} bytes, PE {me} of {total}: GDA_SHMEM_HEAP_SIZE must agree",
                i.len
            )));
        }
        let same_host: Vec<bool> = infos.iter().map(|i| i.host == mine.host).collect();
        // Routes, and the segments of same-host processes mapped here.
        let mut routes = Vec::with_capacity(n as usize);
        let mut peer_segs = Vec::new();
        let mut rdma_pes = Vec::new();
        for (j, info) in infos.iter().enumerate() {
            let j32 = j as u32;
            let p2p = match cfg.transport {
                _ if j32 == me => {
                    routes.push(Route::Local);
                    continue;
                }
                TransportPolicy::Rdma => false,
                TransportPolicy::Auto => same_host[j],
                TransportPolicy::P2p if same_host[j] => true,
                TransportPolicy::P2p => {
                    return Err(ShmemError::Config(format!(
                        "GDA_SHMEM_TRANSPORT=p2p but PE {j} is on another host ({})",
                        info.host
                    )));
                }
            };
            if !p2p {
                rdma_pes.push(j32);
                routes.push(Route::Rdma(rdma_pes.len() - 1));
            } else {
                // Every peer heap is mapped by name, also a thread PE's of this very process
                // (a second mapping of the same pages): an address a peer sent is never
                // dereferenced here, and same-looking PIDs cannot confuse two processes.
                let s = Segment::open(&job, &format!("heap{j}"), total)
                    .map_err(|e| ShmemError::io(format!("PE {me}: mapping PE {j}'s heap"), e))?;
                routes.push(Route::P2p(s.as_ptr()));
                peer_segs.push(s);
            }
        }
        // RDMA: register the whole segment once, one RC QP per RDMA peer, exchange endpoints.
        let mut lkey = 0;
        let mut blob = Vec::new();
        let mut qp_of = Vec::new();
        if !rdma_pes.is_empty() {
            let d = domain.as_mut().ok_or_else(|| {
                ShmemError::Config(format!(
                    "PE {me} reaches PEs {rdma_pes:?} by RDMA but no RDMA domain was given"
                ))
            })?;
            let (l, r) = d.register(&seg, 0, total)?;
            lkey = l;
            blob.extend_from_slice(&r.to_le_bytes());
            for &j in &rdma_pes {
                let (q, ep) = d.create_qp()?;
                qp_of.push(q);
                blob.extend_from_slice(&j.to_le_bytes());
                blob.extend_from_slice(&(ep.len() as u32).to_le_bytes());
                blob.extend_from_slice(&ep);
            }
        }
        let blobs = boot.allgather(&blob)?;
        let mut rdma = Vec::with_capacity(rdma_pes.len());
        for (k, &j) in rdma_pes.iter().enumerate() {
            let b = &blobs[j as usize];
            let (rkey, ep) = find_endpoint(b, me).ok_or_else(|| {
                ShmemError::Boot(format!("PE {j} published no RDMA endpoint for PE {me}"))
            })?;
            let d = domain
                .as_mut()
                .ok_or_else(|| ShmemError::Invalid("no domain".into()))?;
            d.connect(qp_of[k], ep).map_err(|e| ShmemError::Rdma {
                pe: j,
                what: e.to_string(),
            })?;
            let (wq, cq) = d.queues(qp_of[k])?;
            let ms = u64::try_from(cfg.timeout.as_millis()).unwrap_or(u64::MAX);
            // SAFETY: the domain owns the QP and CQ and outlives the queue (field order: `rdma`
            // drops first); this queue is their only poster and poller.
            let sq = unsafe { SendQueue::<P>::new(wq, cq, ms) }.map_err(|e| ShmemError::Rdma {
                pe: j,
                what: e.to_string(),
            })?;
            rdma.push(RdmaPeer {
                pe: j,
                sq,
                base: infos[j as usize].base,
                rkey,
                fence: Cell::new(false),
                dirty: Cell::new(false),
            });
        }
        // Everyone has mapped and connected: the names can go (a PE killed from now on leaves
        // nothing in /dev/shm).
        boot.barrier()?;
        seg.unlink()
            .map_err(|e| ShmemError::io("removing the heap's name", e))?;
        if let Some(d) = domain.as_mut() {
            d.connected()?;
        }
        boot.barrier()?;
        let pe = Self {
            me,
            n,
            timeout: cfg.timeout,
            routes,
            rdma,
            lkey,
            base: seg.as_ptr(),
            heap_size,
            internal,
            bounce,
            bounce_used: Cell::new(0),
            heap: RefCell::new(Allocator::new(heap_size)),
            heap_id: infos[0].heap_id,
            pids: infos.iter().map(|i| i.pid).collect(),
            // Liveness by PID only for other processes of our PID namespace (a PID from another
            // namespace names some unrelated process here).
            watch_pid: infos
                .iter()
                .map(|i| {
                    i.token != mine.token
                        && i.host == mine.host
                        && i.pid_ns == mine.pid_ns
                        && mine.pid_ns != 0
                })
                .collect(),
            same_host,
            teams: RefCell::new(Teams::default()),
            boot: RefCell::new(boot),
            finalized: Cell::new(false),
            domain,
            peer_segs: std::mem::ManuallyDrop::new(peer_segs),
            seg: std::mem::ManuallyDrop::new(seg),
            unsafe_to_unmap: Cell::new(false),
        };
        crate::team::init_teams(&pe)?;
        Ok(pe)
    }

    /// This PE's number.
    #[must_use]
    pub fn my_pe(&self) -> u32 {
        self.me
    }

    /// Number of PEs.
    #[must_use]
    pub fn n_pes(&self) -> u32 {
        self.n
    }

    /// The transport that reaches `pe`.
    pub fn transport_to(&self, pe: u32) -> Result<Transport> {
        Ok(match self.route(pe)? {
            Route::Local => Transport::Local,
            Route::P2p(_) => Transport::P2p,
            Route::Rdma(_) => Transport::Rdma,
        })
    }

    /// Whether `pe` runs on this host (what `TEAM_SHARED` holds).
    pub fn same_host(&self, pe: u32) -> bool {
        self.same_host.get(pe as usize).copied().unwrap_or(false)
    }

    /// The configured wait bound.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn route(&self, pe: u32) -> Result<Route> {
        self.routes
            .get(pe as usize)
            .copied()
            .ok_or(ShmemError::BadPe { pe, n_pes: self.n })
    }

    // ---------------------------------------------------------------- symmetric heap

    /// Collective: allocates `n` elements (uninitialised contents) with identical offsets on
    /// every PE; ends with a barrier, as `shmem_malloc` does.
    pub fn malloc<T: Elem>(&self, n: usize) -> Result<Sym<T>> {
        self.align::<T>(align_of::<T>().max(8), n)
    }

    /// Collective: as [`Pe::malloc`], zero-filled.
    pub fn calloc<T: Elem>(&self, n: usize) -> Result<Sym<T>> {
        let s = self.align_nobarrier::<T>(align_of::<T>().max(8), n)?;
        // SAFETY: the block is inside the heap and nobody else uses it before the barrier.
        unsafe { std::ptr::write_bytes(self.base.add(s.off), 0, n * size_of::<T>()) };
        self.barrier_all()?;
        Ok(s)
    }

    /// Collective: `n` elements aligned to `alignment` bytes (a power of two).
    pub fn align<T: Elem>(&self, alignment: usize, n: usize) -> Result<Sym<T>> {
        let s = self.align_nobarrier(alignment, n)?;
        self.barrier_all()?;
        Ok(s)
    }

    fn align_nobarrier<T: Elem>(&self, alignment: usize, n: usize) -> Result<Sym<T>> {
        let bytes = n.checked_mul(size_of::<T>()).ok_or_else(|| {
            ShmemError::Invalid(format!(
                "{n} elements of {} overflow",
                std::any::type_name::<T>()
            ))
        })?;
        let off = self
            .heap
            .borrow_mut()
            .alloc(bytes, alignment.max(align_of::<T>()))?;
        Ok(Sym::new(off, n, self.heap_id))
    }

    /// Collective: frees an allocation (after a barrier, so no PE still accesses it).
    pub fn free<T: Elem>(&self, s: Sym<T>) -> Result<()> {
        self.mine(&s)?;
        self.barrier_all()?;
        self.heap.borrow_mut().free(s.off)
    }

    /// Live allocations (for leak checks).
    #[must_use]
    pub fn allocations(&self) -> usize {
        self.heap.borrow().live()
    }

    /// Heap size per PE.
    #[must_use]
    pub fn heap_size(&self) -> usize {
        self.heap_size
    }

    /// This PE's copy of `s`: a raw pointer for loads and stores (others may write it at any
    /// time; use [`Pe::read`]/[`Pe::write`] or atomics unless you synchronised).
    pub fn local_ptr<T: Elem>(&self, s: Sym<T>) -> Result<*mut T> {
        let off = self.at(s, 0, s.len)?;
        // SAFETY: `at` checked that `s` belongs to this heap and lies inside it.
        Ok(unsafe { self.base.add(off).cast() })
    }

    /// Refuses a `Sym` of another job's heap.
    fn mine<T: Elem>(&self, s: &Sym<T>) -> Result<()> {
        if s.heap == self.heap_id {
            Ok(())
        } else {
            Err(ShmemError::Invalid(format!(
                "{s:?} was allocated in another symmetric heap (another job or init) than PE \
                 {}'s",
                self.me
            )))
        }
    }

    /// Byte offset of elements `[idx, idx + n)` of `s` in this PE's segment: `s` must belong
    /// to this job's heap and the range must lie in the allocation and in the symmetric part of
    /// the segment (overflow-checked).
    pub(crate) fn at<T: Elem>(&self, s: Sym<T>, idx: usize, n: usize) -> Result<usize> {
        self.mine(&s)?;
        let off = s.range(idx, n)?;
        let end = n
            .checked_mul(size_of::<T>())
            .and_then(|b| off.checked_add(b));
        match end {
            Some(e) if e <= self.bounce => Ok(off),
            _ => Err(ShmemError::Range(format!(
                "{s:?} elements {idx}..+{n} leave PE {}'s symmetric memory",
                self.me
            ))),
        }
    }

    /// Reads element `idx` of this PE's copy (a volatile load).
    pub fn read<T: Elem>(&self, s: Sym<T>, idx: usize) -> Result<T> {
        let off = self.at(s, idx, 1)?;
        // SAFETY: in range; volatile because peers write it behind the compiler's back.
        Ok(unsafe { std::ptr::read_volatile(self.base.add(off).cast::<T>()) })
    }

    /// Writes element `idx` of this PE's copy (a volatile store).
    pub fn write<T: Elem>(&self, s: Sym<T>, idx: usize, v: T) -> Result<()> {
        let off = self.at(s, idx, 1)?;
        // SAFETY: in range.
        unsafe { std::ptr::write_volatile(self.base.add(off).cast::<T>(), v) };
        Ok(())
    }

    /// Copies this PE's elements `[idx, idx + out.len())` out.
    pub fn copy_out<T: Elem>(&self, s: Sym<T>, idx: usize, out: &mut [T]) -> Result<()> {
        let off = self.at(s, idx, out.len())?;
        fence(Ordering::Acquire);
        // SAFETY: in range; `out` is a distinct Rust slice.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(off).cast::<T>(),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    /// Copies `src` into this PE's elements from `idx`.
    pub fn copy_in<T: Elem>(&self, s: Sym<T>, idx: usize, src: &[T]) -> Result<()> {
        let off = self.at(s, idx, src.len())?;
        // SAFETY: in range.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(off).cast::<T>(), src.len())
        };
        fence(Ordering::Release);
        Ok(())
    }

    /// Internal symmetric area of team slot `slot` (psync words, then scratch).
    pub(crate) fn team_area(&self, slot: usize) -> usize {
        self.internal + slot * TEAM_BYTES
    }

    // ---------------------------------------------------------------- RDMA plumbing

    fn rdma_err(&self, pe: u32, e: SqError) -> ShmemError {
        if let Some(g) = self.gone_pe(Some(pe)) {
            return g;
        }
        ShmemError::Rdma {
            pe,
            what: e.to_string(),
        }
    }

    fn post(&self, r: &RdmaPeer<P>, wr: &WorkRequest<'_>) -> std::result::Result<(), SqError> {
        let flags = if r.fence.get() {
            SendFlags::FENCE
        } else {
            SendFlags::empty()
        };
        r.sq.post(wr, flags)?;
        // The software NIC's engine may be napping: wake it now (one atomic load when it is
        // awake; hardware NICs need nothing here).
        self.kick();
        r.fence.set(false);
        r.dirty.set(true);
        Ok(())
    }

    /// `bytes` of private staging memory (segment offset), draining RDMA when it is used up.
    fn stage(&self, bytes: usize) -> Result<usize> {
        let bytes = bytes.next_multiple_of(64);
        if bytes > BOUNCE {
            return Err(ShmemError::Invalid(format!(
                "staging {bytes} bytes at once"
            )));
        }
        if self.bounce_used.get() + bytes > BOUNCE {
            self.quiet()?;
        }
        let at = self.bounce + self.bounce_used.get();
        self.bounce_used.set(self.bounce_used.get() + bytes);
        Ok(at)
    }

    fn sge(&self, seg_off: usize, len: usize) -> Sge {
        Sge {
            addr: self.base as u64 + seg_off as u64,
            length: len as u32,
            lkey: self.lkey,
        }
    }

    fn remote(&self, r: &RdmaPeer<P>, seg_off: usize) -> Remote {
        Remote {
            addr: r.base + seg_off as u64,
            rkey: r.rkey,
        }
    }

    fn kick(&self) {
        if let Some(d) = &self.domain {
            d.kick();
        }
    }

    fn rdma_quiet(&self, r: &RdmaPeer<P>) -> Result<()> {
        if r.dirty.get() {
            r.sq.quiet().map_err(|e| self.rdma_err(r.pe, e))?;
            r.dirty.set(false);
        }
        Ok(())
    }

    /// Writes `src` to segment offset `off` of PE `pe` (any transport).
    pub(crate) fn put_bytes(&self, pe: u32, off: usize, src: &[u8]) -> Result<()> {
        match self.route(pe)? {
            // SAFETY: `off..off+len` was range-checked against a symmetric allocation (or is in
            // the internal area), and both heaps have the same layout.
            Route::Local => unsafe {
                std::ptr::copy(src.as_ptr(), self.base.add(off), src.len());
            },
            // SAFETY: as above, in the peer's mapping.
            Route::P2p(b) => unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), b.add(off), src.len());
            },
            Route::Rdma(i) => {
                let r = &self.rdma[i];
                let max_inline = r.sq.wq().max_inline as usize;
                if src.len() <= max_inline {
                    let wr = WorkRequest::Write {
                        remote: self.remote(r, off),
                        payload: Payload::Inline(src),
                        imm: None,
                    };
                    self.post(r, &wr).map_err(|e| self.rdma_err(pe, e))?;
                    return Ok(());
                }
                // Stage through private registered memory: the caller may reuse `src` at once.
                let chunk = BOUNCE / 2;
                for (k, part) in src.chunks(chunk).enumerate() {
                    let at = self.stage(part.len())?;
                    // SAFETY: `at..at+len` is private staging memory inside the segment.
                    unsafe {
                        std::ptr::copy_nonoverlapping(part.as_ptr(), self.base.add(at), part.len())
                    };
                    let wr = WorkRequest::Write {
                        remote: self.remote(r, off + k * chunk),
                        payload: Payload::Sges(&[self.sge(at, part.len())]),
                        imm: None,
                    };
                    self.post(r, &wr).map_err(|e| self.rdma_err(pe, e))?;
                }
            }
        }
        Ok(())
    }

    /// Reads segment offset `off` of PE `pe` into `out` (blocking).
    pub(crate) fn get_bytes(&self, pe: u32, off: usize, out: &mut [u8]) -> Result<()> {
        // SAFETY: `out` is valid for `out.len()` bytes of writes.
        unsafe { self.get_into(pe, off, out.as_mut_ptr(), out.len()) }
    }

    /// Reads `len` bytes at segment offset `off` of PE `pe` to `dst` (blocking). `dst` is a raw
    /// pointer, not a slice: it may be this PE's own symmetric memory, which peers (and the
    /// NIC) may write concurrently, so no Rust reference to it is ever formed.
    ///
    /// # Safety
    /// `dst` must be valid for `len` bytes of writes; `off..off + len` range-checked.
    unsafe fn get_into(&self, pe: u32, off: usize, dst: *mut u8, len: usize) -> Result<()> {
        match self.route(pe)? {
            Route::Local => {
                fence(Ordering::Acquire);
                // SAFETY: range-checked by the caller; `dst` valid (caller); may overlap.
                unsafe { std::ptr::copy(self.base.add(off), dst, len) };
            }
            Route::P2p(b) => {
                fence(Ordering::Acquire);
                // SAFETY: as above, in the peer's mapping (a distinct mapping from `dst`'s).
                unsafe { std::ptr::copy(b.add(off), dst, len) };
            }
            Route::Rdma(i) => {
                let r = &self.rdma[i];
                let chunk = BOUNCE / 2;
                let mut done = 0;
                while done < len {
                    let part = chunk.min(len - done);
                    let at = self.stage(part)?;
                    let wr = WorkRequest::Read {
                        remote: self.remote(r, off + done),
                        sges: &[self.sge(at, part)],
                    };
                    self.post(r, &wr).map_err(|e| self.rdma_err(pe, e))?;
                    self.rdma_quiet(r)?;
                    // SAFETY: the READ has completed into `at..at+part`; `dst + done` is valid
                    // for `part` bytes (caller); staging never overlaps the destination.
                    unsafe { std::ptr::copy(self.base.add(at), dst.add(done), part) };
                    done += part;
                }
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- put / get

    /// Copies `src` to elements `[idx, idx + src.len())` of `dst` on `pe`; `src` may be reused
    /// on return (delivery is complete at the next [`Pe::quiet`]).
    pub fn put<T: Elem>(&self, dst: Sym<T>, idx: usize, src: &[T], pe: u32) -> Result<()> {
        let off = self.at(dst, idx, src.len())?;
        self.put_bytes(pe, off, bytemuck::cast_slice(src))
    }

    /// Non-blocking put. Here the source is copied (or staged) before return, so it behaves as
    /// [`Pe::put`]; completion is still only guaranteed by [`Pe::quiet`].
    pub fn put_nbi<T: Elem>(&self, dst: Sym<T>, idx: usize, src: &[T], pe: u32) -> Result<()> {
        self.put(dst, idx, src, pe)
    }

    /// Single-element put (`shmem_p`).
    pub fn p<T: Elem>(&self, dst: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.put(dst, idx, std::slice::from_ref(&v), pe)
    }

    /// Copies elements `[idx, idx + out.len())` of `src` on `pe` into `out` (blocking).
    pub fn get<T: Elem>(&self, out: &mut [T], src: Sym<T>, idx: usize, pe: u32) -> Result<()> {
        let off = self.at(src, idx, out.len())?;
        self.get_bytes(pe, off, bytemuck::cast_slice_mut(out))
    }

    /// Single-element get (`shmem_g`).
    pub fn g<T: Elem>(&self, src: Sym<T>, idx: usize, pe: u32) -> Result<T> {
        let mut v = [T::zeroed()];
        self.get(&mut v, src, idx, pe)?;
        Ok(v[0])
    }

    /// Non-blocking get into symmetric memory of this PE: `dst[didx..]` receives
    /// `src[sidx..sidx+n]` of `pe` by the next [`Pe::quiet`].
    pub fn get_nbi<T: Elem>(
        &self,
        dst: Sym<T>,
        didx: usize,
        src: Sym<T>,
        sidx: usize,
        n: usize,
        pe: u32,
    ) -> Result<()> {
        let doff = self.at(dst, didx, n)?;
        let soff = self.at(src, sidx, n)?;
        let bytes = n * size_of::<T>();
        match self.route(pe)? {
            Route::Rdma(i) if bytes > 0 => {
                let r = &self.rdma[i];
                let wr = WorkRequest::Read {
                    remote: self.remote(r, soff),
                    sges: &[self.sge(doff, bytes)],
                };
                self.post(r, &wr).map_err(|e| self.rdma_err(pe, e))
            }
            _ => {
                // SAFETY: `doff..doff+bytes` is this PE's heap, range-checked; written through
                // a raw pointer (peers may write it too).
                unsafe { self.get_into(pe, soff, self.base.add(doff), bytes) }
            }
        }
    }

    /// Strided put (`shmem_iput`): `n` elements, `src[k * sst]` → `dst[idx + k * dst_stride]`.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn iput<T: Elem>(
        &self,
        dst: Sym<T>,
        idx: usize,
        dst_stride: usize,
        src: &[T],
        src_stride: usize,
        n: usize,
        pe: u32,
    ) -> Result<()> {
        self.mine(&dst)?;
        if !strided(
            "iput",
            "reads src",
            n,
            src_stride,
            src.len(),
            dst,
            idx,
            dst_stride,
        )? {
            return Ok(());
        }
        for k in 0..n {
            self.put(
                dst,
                idx + k * dst_stride,
                std::slice::from_ref(&src[k * src_stride]),
                pe,
            )?;
        }
        Ok(())
    }

    /// Strided get (`shmem_iget`): `n` elements, `src[idx + k * src_stride]` of `pe` →
    /// `out[k * out_stride]`.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn iget<T: Elem>(
        &self,
        out: &mut [T],
        out_stride: usize,
        src: Sym<T>,
        idx: usize,
        src_stride: usize,
        n: usize,
        pe: u32,
    ) -> Result<()> {
        self.mine(&src)?;
        if !strided(
            "iget",
            "writes out",
            n,
            out_stride,
            out.len(),
            src,
            idx,
            src_stride,
        )? {
            return Ok(());
        }
        if let Route::Rdma(_) = self.route(pe)? {
            // One READ of the covering range, then pick the elements: far fewer round trips.
            let span = (n - 1) * src_stride + 1;
            let mut tmp = vec![T::zeroed(); span];
            self.get(&mut tmp, src, idx, pe)?;
            for k in 0..n {
                out[k * out_stride] = tmp[k * src_stride];
            }
            return Ok(());
        }
        for k in 0..n {
            out[k * out_stride] = self.g(src, idx + k * src_stride, pe)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- signals

    /// Put with signal: writes `src` to `dst[idx..]` on `pe`, then updates `sig[sidx]` on `pe`
    /// (`Set` or `Add` `value`) so that a PE that observes the signal also observes the data.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn put_signal<T: Elem>(
        &self,
        dst: Sym<T>,
        idx: usize,
        src: &[T],
        sig: Sym<u64>,
        sidx: usize,
        value: u64,
        op: SignalOp,
        pe: u32,
    ) -> Result<()> {
        let soff = self.at(sig, sidx, 1)?;
        self.put(dst, idx, src, pe)?;
        match self.route(pe)? {
            Route::Local | Route::P2p(_) => {
                // Release: the data stores above happen-before the signal store.
                let p = self.peer_addr(pe, soff)?;
                // SAFETY: an aligned u64 inside the heap of `pe`, accessed atomically.
                let a = unsafe { std::sync::atomic::AtomicU64::from_ptr(p.cast()) };
                match op {
                    SignalOp::Set => a.store(value, Ordering::Release),
                    SignalOp::Add => {
                        a.fetch_add(value, Ordering::Release);
                    }
                }
            }
            Route::Rdma(i) => {
                // RC executes a QP's WQEs in order: the data WRITE is placed before the signal
                // WRITE/atomic that follows it on the same QP.
                let r = &self.rdma[i];
                match op {
                    SignalOp::Set => {
                        let b = value.to_le_bytes();
                        let wr = WorkRequest::Write {
                            remote: self.remote(r, soff),
                            payload: Payload::Inline(&b),
                            imm: None,
                        };
                        self.post(r, &wr).map_err(|e| self.rdma_err(pe, e))?;
                    }
                    SignalOp::Add => {
                        if let Err(e) =
                            self.amo_post(i, soff, Width::W64, AtomicOp::FetchAdd { add: value })?
                        {
                            return Err(ShmemError::Rdma {
                                pe,
                                what: format!("signal add: {e}"),
                            });
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Non-blocking put with signal (completes by [`Pe::quiet`]).
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn put_signal_nbi<T: Elem>(
        &self,
        dst: Sym<T>,
        idx: usize,
        src: &[T],
        sig: Sym<u64>,
        sidx: usize,
        value: u64,
        op: SignalOp,
        pe: u32,
    ) -> Result<()> {
        self.put_signal(dst, idx, src, sig, sidx, value, op, pe)
    }

    /// This PE's signal word (`shmem_signal_fetch`).
    pub fn signal_fetch(&self, sig: Sym<u64>, sidx: usize) -> Result<u64> {
        let off = self.at(sig, sidx, 1)?;
        // SAFETY: aligned u64 in this PE's heap.
        Ok(unsafe { cpu_load(self.base.add(off), Width::W64) })
    }

    /// Waits until this PE's `sig[sidx] <cmp> value`; returns the signal's value.
    pub fn signal_wait_until(
        &self,
        sig: Sym<u64>,
        sidx: usize,
        cmp: Cmp,
        value: u64,
    ) -> Result<u64> {
        self.wait_until(sig, sidx, cmp, value)?;
        self.signal_fetch(sig, sidx)
    }

    // ---------------------------------------------------------------- atomics

    fn peer_addr(&self, pe: u32, off: usize) -> Result<*mut u8> {
        match self.route(pe)? {
            // SAFETY: `off` is range-checked inside the heap.
            Route::Local => Ok(unsafe { self.base.add(off) }),
            // SAFETY: as above, in the peer's mapping.
            Route::P2p(b) => Ok(unsafe { b.add(off) }),
            Route::Rdma(_) => Err(ShmemError::Invalid(
                "no load/store path to an RDMA peer".into(),
            )),
        }
    }

    /// Posts one atomic with its result into staging; returns the staging offset.
    fn amo_post(
        &self,
        i: usize,
        off: usize,
        w: Width,
        op: AtomicOp,
    ) -> Result<std::result::Result<usize, PostError>> {
        let r = &self.rdma[i];
        let at = self.stage(8)?;
        let wr = WorkRequest::Atomic {
            remote: self.remote(r, off),
            local: self.sge(at, w.bytes() as usize),
            op,
            bytes: w.bytes(),
        };
        match self.post(r, &wr) {
            Ok(()) => Ok(Ok(at)),
            Err(SqError::Post(e)) => Ok(Err(e)),
            Err(e) => Err(self.rdma_err(r.pe, e)),
        }
    }

    /// An atomic whose old value is needed: post, wait, decode. `Ok(None)` if the NIC lacks it.
    fn amo_fetch(&self, i: usize, off: usize, w: Width, op: AtomicOp) -> Result<Option<u64>> {
        let at = match self.amo_post(i, off, w, op)? {
            Ok(at) => at,
            Err(_) => return Ok(None),
        };
        self.rdma_quiet(&self.rdma[i])?;
        let mut b = [0u8; 8];
        let n = w.bytes() as usize;
        // SAFETY: the atomic completed and wrote `n` bytes at `at`.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(at), b.as_mut_ptr(), n) };
        let v = if P::ATOMIC_RESULT_BIG_ENDIAN {
            b[..n].iter().fold(0u64, |a, &x| a << 8 | u64::from(x))
        } else {
            b[..n]
                .iter()
                .rev()
                .fold(0u64, |a, &x| a << 8 | u64::from(x))
        };
        Ok(Some(v))
    }

    /// Compare-and-swap through the NIC at width `w`, falling back (when the NIC has no
    /// `w`-wide CAS, e.g. 4-byte CAS on bnxt) to an 8-byte CAS of the aligned word holding
    /// the operand that changes only the operand's bytes.
    fn rdma_cas(&self, i: usize, off: usize, w: Width, compare: u64, swap: u64) -> Result<u64> {
        if let Some(v) = self.amo_fetch(i, off, w, AtomicOp::CompareSwap { compare, swap })? {
            return Ok(v);
        }
        if w == Width::W64 {
            return Err(ShmemError::Rdma {
                pe: self.rdma[i].pe,
                what: "the NIC has no 8-byte compare-and-swap".into(),
            });
        }
        let word = off & !7;
        let shift = (off - word) * 8;
        let lane = 0xffff_ffffu64 << shift;
        let mut cur = self
            .amo_fetch(i, word, Width::W64, AtomicOp::FetchAdd { add: 0 })?
            .unwrap_or(0);
        loop {
            let old32 = (cur & lane) >> shift;
            if old32 != compare & 0xffff_ffff {
                return Ok(old32);
            }
            let new = (cur & !lane) | ((swap & 0xffff_ffff) << shift);
            let got = self
                .amo_fetch(
                    i,
                    word,
                    Width::W64,
                    AtomicOp::CompareSwap {
                        compare: cur,
                        swap: new,
                    },
                )?
                .unwrap_or(cur);
            if got == cur {
                return Ok(old32);
            }
            cur = got;
        }
    }

    /// Read-modify-write at `off` of `pe`: `f(old) = Some(new)` stores `new`; returns `old`.
    /// `native` is the single NIC atomic that does the same, if there is one; without it (or
    /// when the NIC refuses it) a compare-and-swap loop does the job.
    fn rmw(
        &self,
        pe: u32,
        off: usize,
        w: Width,
        fetch: bool,
        native: Option<AtomicOp>,
        f: impl Fn(u64) -> Option<u64>,
    ) -> Result<u64> {
        let mask = if w == Width::W32 {
            0xffff_ffff
        } else {
            u64::MAX
        };
        match self.route(pe)? {
            Route::Local | Route::P2p(_) => {
                let p = self.peer_addr(pe, off)?;
                // SAFETY: an aligned operand inside the heap of `pe`, accessed atomically.
                Ok(unsafe { cpu_rmw(p, w, |v| f(v).map(|n| n & mask)) })
            }
            Route::Rdma(i) => {
                if let Some(op) = native {
                    if !fetch {
                        if let Ok(_at) = self.amo_post(i, off, w, op)? {
                            return Ok(0);
                        }
                    } else if let Some(v) = self.amo_fetch(i, off, w, op)? {
                        return Ok(v);
                    }
                }
                let mut cur = self.rdma_cas(i, off, w, 0, 0)?;
                loop {
                    let Some(new) = f(cur) else { return Ok(cur) };
                    let got = self.rdma_cas(i, off, w, cur, new & mask)?;
                    if got == cur {
                        return Ok(cur);
                    }
                    cur = got;
                }
            }
        }
    }

    fn amo_off<T: AtomicInt>(&self, s: Sym<T>, idx: usize) -> Result<usize> {
        let off = self.at(s, idx, 1)?;
        if off % size_of::<T>() != 0 {
            return Err(ShmemError::Range(format!(
                "atomic target {s:?}[{idx}] is not aligned"
            )));
        }
        Ok(off)
    }

    fn all(w: Width) -> u64 {
        if w == Width::W32 {
            0xffff_ffff
        } else {
            u64::MAX
        }
    }

    /// Atomic fetch (`shmem_atomic_fetch`).
    pub fn atomic_fetch<T: AtomicInt>(&self, s: Sym<T>, idx: usize, pe: u32) -> Result<T> {
        let off = self.amo_off(s, idx)?;
        let v = match self.route(pe)? {
            Route::Local | Route::P2p(_) => {
                // SAFETY: aligned operand in the heap of `pe`.
                unsafe { cpu_load(self.peer_addr(pe, off)?, T::WIDTH) }
            }
            Route::Rdma(i) => {
                match self.amo_fetch(i, off, T::WIDTH, AtomicOp::FetchAdd { add: 0 })? {
                    Some(v) => v,
                    None => self.rdma_cas(i, off, T::WIDTH, 0, 0)?,
                }
            }
        };
        Ok(T::from_bits(v))
    }

    /// Atomic set (`shmem_atomic_set`).
    pub fn atomic_set<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        let off = self.amo_off(s, idx)?;
        let b = v.to_bits();
        let native = AtomicOp::MaskedCompareSwap {
            compare: 0,
            compare_mask: 0,
            swap: b,
            swap_mask: Self::all(T::WIDTH),
        };
        self.rmw(pe, off, T::WIDTH, false, Some(native), |_| Some(b))
            .map(|_| ())
    }

    /// Atomic swap (`shmem_atomic_swap`): returns the old value.
    pub fn atomic_swap<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<T> {
        let off = self.amo_off(s, idx)?;
        let b = v.to_bits();
        let native = AtomicOp::MaskedCompareSwap {
            compare: 0,
            compare_mask: 0,
            swap: b,
            swap_mask: Self::all(T::WIDTH),
        };
        self.rmw(pe, off, T::WIDTH, true, Some(native), |_| Some(b))
            .map(T::from_bits)
    }

    /// Atomic compare-and-swap (`shmem_atomic_compare_swap`): returns the old value.
    pub fn atomic_compare_swap<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        cond: T,
        v: T,
        pe: u32,
    ) -> Result<T> {
        let off = self.amo_off(s, idx)?;
        let (c, b) = (cond.to_bits(), v.to_bits());
        match self.route(pe)? {
            Route::Rdma(i) => self.rdma_cas(i, off, T::WIDTH, c, b).map(T::from_bits),
            _ => self
                .rmw(pe, off, T::WIDTH, true, None, |old| (old == c).then_some(b))
                .map(T::from_bits),
        }
    }

    /// Atomic fetch-and-add.
    pub fn atomic_fetch_add<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        v: T,
        pe: u32,
    ) -> Result<T> {
        let off = self.amo_off(s, idx)?;
        let a = v.to_bits();
        self.rmw(
            pe,
            off,
            T::WIDTH,
            true,
            Some(AtomicOp::FetchAdd { add: a }),
            |o| Some(o.wrapping_add(a)),
        )
        .map(T::from_bits)
    }

    /// Atomic add.
    pub fn atomic_add<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        let off = self.amo_off(s, idx)?;
        let a = v.to_bits();
        self.rmw(
            pe,
            off,
            T::WIDTH,
            false,
            Some(AtomicOp::FetchAdd { add: a }),
            |o| Some(o.wrapping_add(a)),
        )
        .map(|_| ())
    }

    /// Atomic fetch-and-increment.
    pub fn atomic_fetch_inc<T: AtomicInt>(&self, s: Sym<T>, idx: usize, pe: u32) -> Result<T> {
        self.atomic_fetch_add(s, idx, T::from_bits(1), pe)
    }

    /// Atomic increment.
    pub fn atomic_inc<T: AtomicInt>(&self, s: Sym<T>, idx: usize, pe: u32) -> Result<()> {
        self.atomic_add(s, idx, T::from_bits(1), pe)
    }

    fn bitwise<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        v: T,
        pe: u32,
        fetch: bool,
        op: char,
    ) -> Result<T> {
        let off = self.amo_off(s, idx)?;
        let b = v.to_bits();
        let all = Self::all(T::WIDTH);
        // AND clears the bits `v` lacks, OR sets the bits `v` has: one masked swap each. XOR
        // depends on the old value: a CAS loop.
        let (native, f): (Option<AtomicOp>, BitFn) = match op {
            '&' => (
                Some(AtomicOp::MaskedCompareSwap {
                    compare: 0,
                    compare_mask: 0,
                    swap: 0,
                    swap_mask: !b & all,
                }),
                Box::new(move |o| Some(o & b)),
            ),
            '|' => (
                Some(AtomicOp::MaskedCompareSwap {
                    compare: 0,
                    compare_mask: 0,
                    swap: all,
                    swap_mask: b,
                }),
                Box::new(move |o| Some(o | b)),
            ),
            _ => (None, Box::new(move |o| Some(o ^ b))),
        };
        self.rmw(pe, off, T::WIDTH, fetch, native, f)
            .map(T::from_bits)
    }

    /// Atomic fetch-and-and.
    pub fn atomic_fetch_and<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        v: T,
        pe: u32,
    ) -> Result<T> {
        self.bitwise(s, idx, v, pe, true, '&')
    }
    /// Atomic fetch-and-or.
    pub fn atomic_fetch_or<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<T> {
        self.bitwise(s, idx, v, pe, true, '|')
    }
    /// Atomic fetch-and-xor.
    pub fn atomic_fetch_xor<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        v: T,
        pe: u32,
    ) -> Result<T> {
        self.bitwise(s, idx, v, pe, true, '^')
    }
    /// Atomic and.
    pub fn atomic_and<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.bitwise(s, idx, v, pe, false, '&').map(|_| ())
    }
    /// Atomic or.
    pub fn atomic_or<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.bitwise(s, idx, v, pe, false, '|').map(|_| ())
    }
    /// Atomic xor.
    pub fn atomic_xor<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.bitwise(s, idx, v, pe, false, '^').map(|_| ())
    }

    // ---------------------------------------------------------------- ordering

    /// Waits until every put, get, atomic and signal this PE issued is complete and visible
    /// at its target.
    pub fn quiet(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        for r in &self.rdma {
            self.rdma_quiet(r)?;
            r.fence.set(false);
        }
        self.bounce_used.set(0);
        Ok(())
    }

    /// Orders this PE's puts, atomics and signals to each PE: those issued after the fence
    /// are delivered after those issued before it. Not a quiet: nothing is waited for here.
    /// P2P: a release fence (later stores cannot pass earlier ones). RDMA: the next WQE to
    /// each PE carries the FENCE flag (the NIC starts it only after earlier READs and atomics
    /// on that QP completed; WRITEs on one RC QP are placed in order).
    pub fn fence(&self) {
        fence(Ordering::Release);
        for r in &self.rdma {
            if r.dirty.get() {
                r.fence.set(true);
            }
        }
    }

    // ---------------------------------------------------------------- waiting

    /// The PE (if any) whose process is gone; `only`: check just that one.
    pub(crate) fn gone_pe(&self, only: Option<u32>) -> Option<ShmemError> {
        (0..self.n)
            .filter(|&j| only.is_none_or(|o| o == j))
            .filter(|&j| self.watch_pid[j as usize])
            .find(|&j| !gda_hal::shm::process_alive(self.pids[j as usize]))
            .map(|j| ShmemError::PeGone {
                pe: j,
                pid: self.pids[j as usize],
                what: "the job".into(),
            })
    }

    /// Polls `done` until it holds, within the timeout, failing early when a same-host PE's
    /// process is gone. `missing` names the PEs awaited, for the timeout error.
    pub(crate) fn wait_for(
        &self,
        what: &dyn Fn() -> String,
        missing: &dyn Fn() -> Vec<u32>,
        mut done: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let start = Instant::now();
        let mut next_check = start + Duration::from_millis(10);
        let mut spins = 0u32;
        loop {
            if done()? {
                return Ok(());
            }
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
                continue;
            }
            // Spin, then yield. With RDMA routes a wait that has lasted a while also naps, for
            // an eighth of the time waited so far (at most 1 ms: the wake-up delay stays a small
            // fraction of the wait): with the software NIC the engines are extra threads, and
            // on an oversubscribed host (2 cores here) a waiter that only yields keeps them
            // from the CPU, while short fixed naps cost a timer interrupt each.
            let now = Instant::now();
            let waited = now - start;
            if !self.rdma.is_empty() && waited > Duration::from_micros(50) {
                std::thread::sleep((waited / 8).min(Duration::from_millis(1)));
            } else {
                std::thread::yield_now();
            }
            if now >= next_check {
                next_check = now + Duration::from_millis(10);
                if let Some(ShmemError::PeGone { pe, pid, .. }) = self.gone_pe(None) {
                    return Err(ShmemError::PeGone {
                        pe,
                        pid,
                        what: what(),
                    });
                }
                if let Some(why) = self.boot.borrow().broken() {
                    return Err(ShmemError::Boot(format!(
                        "{why} (while waiting for {})",
                        what()
                    )));
                }
                // Keep RDMA completions flowing so peers' waits on us make progress.
                for r in &self.rdma {
                    if r.dirty.get() {
                        let _ = r.sq.poll();
                    }
                }
                if now - start >= self.timeout {
                    return Err(ShmemError::Timeout {
                        what: what(),
                        after: self.timeout,
                        missing: missing(),
                    });
                }
            }
        }
    }

    /// Waits until this PE's `ivar[idx] <cmp> value` (`shmem_wait_until`).
    pub fn wait_until<T: AtomicInt + PartialOrd>(
        &self,
        ivar: Sym<T>,
        idx: usize,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        let off = self.amo_off(ivar, idx)?;
        // SAFETY: aligned operand in this PE's heap.
        let load = || T::from_bits(unsafe { cpu_load(self.base.add(off), T::WIDTH) });
        self.wait_for(
            &|| format!("{ivar:?}[{idx}] {cmp:?} {value:?}"),
            &Vec::new,
            || Ok(cmp.holds(load(), value)),
        )
    }

    /// Whether this PE's `ivar[idx] <cmp> value` holds now (`shmem_test`).
    pub fn test<T: AtomicInt + PartialOrd>(
        &self,
        ivar: Sym<T>,
        idx: usize,
        cmp: Cmp,
        value: T,
    ) -> Result<bool> {
        let off = self.amo_off(ivar, idx)?;
        // SAFETY: aligned operand in this PE's heap.
        let v = T::from_bits(unsafe { cpu_load(self.base.add(off), T::WIDTH) });
        Ok(cmp.holds(v, value))
    }

    fn satisfied<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for i in 0..ivars.len() {
            if status.is_some_and(|s| s.get(i).copied().unwrap_or(false)) {
                continue;
            }
            if self.test(ivars, i, cmp, value)? {
                out.push(i);
            }
        }
        Ok(out)
    }

    fn considered(n: usize, status: Option<&[bool]>) -> usize {
        (0..n)
            .filter(|&i| !status.is_some_and(|s| s.get(i).copied().unwrap_or(false)))
            .count()
    }

    /// Whether every element of `ivars` not excluded by `status` (true = skip) satisfies the
    /// comparison (`shmem_test_all`).
    pub fn test_all<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<bool> {
        Ok(self.satisfied(ivars, status, cmp, value)?.len()
            == Self::considered(ivars.len(), status))
    }

    /// The first element satisfying the comparison, if any (`shmem_test_any`).
    pub fn test_any<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        Ok(self.satisfied(ivars, status, cmp, value)?.first().copied())
    }

    /// Every element satisfying the comparison (`shmem_test_some`).
    pub fn test_some<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        self.satisfied(ivars, status, cmp, value)
    }

    /// Waits until every considered element satisfies the comparison (`shmem_wait_until_all`).
    pub fn wait_until_all<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        self.wait_for(
            &|| format!("all of {ivars:?} {cmp:?} {value:?}"),
            &Vec::new,
            || self.test_all(ivars, status, cmp, value),
        )
    }

    /// Waits until some considered element satisfies it; returns its index
    /// (`shmem_wait_until_any`; `None` if every element is excluded).
    pub fn wait_until_any<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        if Self::considered(ivars.len(), status) == 0 {
            return Ok(None);
        }
        let mut found = None;
        self.wait_for(
            &|| format!("any of {ivars:?} {cmp:?} {value:?}"),
            &Vec::new,
            || {
                found = self.test_any(ivars, status, cmp, value)?;
                Ok(found.is_some())
            },
        )?;
        Ok(found)
    }

    /// Waits until at least one considered element satisfies it; returns all that do
    /// (`shmem_wait_until_some`).
    pub fn wait_until_some<T: AtomicInt + PartialOrd>(
        &self,
        ivars: Sym<T>,
        status: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        if Self::considered(ivars.len(), status) == 0 {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        self.wait_for(
            &|| format!("some of {ivars:?} {cmp:?} {value:?}"),
            &Vec::new,
            || {
                found = self.test_some(ivars, status, cmp, value)?;
                Ok(!found.is_empty())
            },
        )?;
        Ok(found)
    }

    // ---------------------------------------------------------------- finalize

    /// Tells the other PEs (where the bootstrap can: threads) that this one failed, so their
    /// waits end at once with `why` instead of at the timeout.
    pub fn abort(&self, why: &str) {
        self.boot.borrow().abort(why);
    }

    /// Collective finalize: quiet, then a bootstrap barrier (so no peer still writes into this
    /// heap), then the heap and queues are released. Dropping a `Pe` does the same, ignoring
    /// errors.
    pub fn finalize(self) -> Result<()> {
        self.finish()
    }

    fn finish(&self) -> Result<()> {
        if self.finalized.replace(true) {
            return Ok(());
        }
        let q = self.quiet();
        let b = self.boot.borrow_mut().barrier();
        let r = q.and(b);
        if r.is_err() {
            self.unsafe_to_unmap.set(true);
        }
        r
    }
}

/// Checks a strided transfer of `n` elements: local slice stride and length, symmetric side
/// stride and range. `Ok(false)`: nothing to do.
#[allow(clippy::too_many_arguments)]
fn strided<T: Elem>(
    what: &str,
    local_does: &str,
    n: usize,
    local_stride: usize,
    local_len: usize,
    sym: Sym<T>,
    idx: usize,
    sym_stride: usize,
) -> Result<bool> {
    if n == 0 {
        return Ok(false);
    }
    if local_stride == 0 || sym_stride == 0 {
        return Err(ShmemError::Invalid(format!(
            "{what} strides must be at least 1"
        )));
    }
    let last = (n - 1).checked_mul(local_stride).filter(|&l| l < local_len);
    if last.is_none() {
        return Err(ShmemError::Range(format!(
            "{what} {local_does}[{}] of {local_len}",
            (n - 1).saturating_mul(local_stride)
        )));
    }
    let end = (n - 1)
        .checked_mul(sym_stride)
        .and_then(|d| d.checked_add(idx))
        .ok_or_else(|| ShmemError::Range(format!("{what} stride overflows")))?;
    sym.range(end, 1)?;
    Ok(true)
}

/// The CAS-loop form of a bitwise atomic.
type BitFn = Box<dyn Fn(u64) -> Option<u64>>;

fn find_endpoint(b: &[u8], me: u32) -> Option<(u32, &[u8])> {
    let rkey = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
    let mut at = 4;
    while at + 8 <= b.len() {
        let j = u32::from_le_bytes(b[at..at + 4].try_into().ok()?);
        let n = u32::from_le_bytes(b[at + 4..at + 8].try_into().ok()?) as usize;
        let ep = b.get(at + 8..at + 8 + n)?;
        if j == me {
            return Some((rkey, ep));
        }
        at += 8 + n;
    }
    None
}

impl<P: Provider> Drop for Pe<P> {
    fn drop(&mut self) {
        let _ = self.finish();
        if self.unsafe_to_unmap.get() {
            // The job broke down before every PE passed the final barrier: the in-process NIC
            // engine may still execute a peer's RDMA into this mapping (it was registered by
            // address). Keeping the mapping (its name is already gone) is a bounded
            // leak on an error path; unmapping could crash a peer.
            return;
        }
        // SAFETY: every PE passed the final barrier after a quiet, so nothing accesses these
        // mappings any more; they are dropped exactly once, here.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut self.peer_segs);
            std::mem::ManuallyDrop::drop(&mut self.seg);
        }
    }
}
