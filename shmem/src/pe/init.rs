//! Collective initialisation: the heap segment, the exchange of PE information, the routes.

use std::cell::{Cell, RefCell};

use gda_hal::control::{QueueBuffer, QueueMemory};
use gda_hal::{Provider, SendQueue};

use super::team::Teams;
use super::{BOUNCE, Config, Liveness, Pe, TEAM_BYTES, TEAM_SLOTS, TransportPolicy};
use crate::boot::Bootstrap;
use crate::domain::{Conn, Defer, DeviceConn, Nudge, PostNudge, Progress, RdmaNic};
use crate::error::{Result, ShmemError};
use crate::heap::Allocator;
use crate::memory::{HeapPlacement, LocalSeg};
use crate::statics::StaticSeg;
use crate::transport::{Net, P2p, Rdma, Route, Staging};

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
/// address, never as a pointer here. `shared` is what a same-host peer needs to map the heap
/// besides the job and rank (a GPU heap's IPC handle; nothing for host shared memory).
struct Info {
    token: u128,
    /// Rank 0's is the job heap's id (fresh for every init), which every [`Sym`](crate::Sym) carries.
    heap_id: u64,
    pid: u32,
    pid_ns: u64,
    base: u64,
    len: u64,
    /// The static data's address in the peer's address space (an RDMA remote address) and
    /// length (0, 0 without).
    data_base: u64,
    data_len: u64,
    /// [`StaticRange::fingerprint`](crate::StaticRange::fingerprint) (0 without static data).
    data_sig: u64,
    placement: HeapPlacement,
    shared: Vec<u8>,
    host: String,
}

/// This process's identity among PEs: 128 random bits from the OS, drawn once.
fn process_token() -> u128 {
    static TOKEN: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    // rand's thread RNG is a CSPRNG seeded from the OS.
    *TOKEN.get_or_init(rand::random)
}

const INFO_FIXED: usize = 16 + 8 + 4 + 8 + 8 + 8 + 8 + 8 + 8 + 1 + 4;

impl Info {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(INFO_FIXED + self.host.len());
        b.extend_from_slice(&self.token.to_le_bytes());
        b.extend_from_slice(&self.heap_id.to_le_bytes());
        b.extend_from_slice(&self.pid.to_le_bytes());
        b.extend_from_slice(&self.pid_ns.to_le_bytes());
        b.extend_from_slice(&self.base.to_le_bytes());
        b.extend_from_slice(&self.len.to_le_bytes());
        b.extend_from_slice(&self.data_base.to_le_bytes());
        b.extend_from_slice(&self.data_len.to_le_bytes());
        b.extend_from_slice(&self.data_sig.to_le_bytes());
        b.push(self.placement.code());
        b.extend_from_slice(&(self.shared.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.shared);
        b.extend_from_slice(self.host.as_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<Self> {
        let (mut fixed, rest) = b
            .split_at_checked(INFO_FIXED)
            .ok_or_else(|| ShmemError::Boot(format!("malformed PE info ({} bytes)", b.len())))?;
        // `fixed` holds exactly INFO_FIXED bytes: every `take` below is in bounds.
        fn take<const N: usize>(b: &mut &[u8]) -> [u8; N] {
            let (head, rest) = b.split_at(N);
            *b = rest;
            head.try_into().unwrap_or([0; N])
        }
        let token = u128::from_le_bytes(take(&mut fixed));
        let heap_id = u64::from_le_bytes(take(&mut fixed));
        let pid = u32::from_le_bytes(take(&mut fixed));
        let pid_ns = u64::from_le_bytes(take(&mut fixed));
        let base = u64::from_le_bytes(take(&mut fixed));
        let len = u64::from_le_bytes(take(&mut fixed));
        let data_base = u64::from_le_bytes(take(&mut fixed));
        let data_len = u64::from_le_bytes(take(&mut fixed));
        let data_sig = u64::from_le_bytes(take(&mut fixed));
        let placement = HeapPlacement::from_code(take::<1>(&mut fixed)[0])?;
        let n_shared = u32::from_le_bytes(take(&mut fixed)) as usize;
        let (shared, host) = rest.split_at_checked(n_shared).ok_or_else(|| {
            ShmemError::Boot(format!(
                "malformed PE info ({n_shared} bytes of heap handle, {} left)",
                rest.len()
            ))
        })?;
        Ok(Self {
            token,
            heap_id,
            pid,
            pid_ns,
            base,
            len,
            data_base,
            data_len,
            data_sig,
            placement,
            shared: shared.to_vec(),
            host: String::from_utf8_lossy(host).into_owned(),
        })
    }
}

impl<P: Provider> Pe<P> {
    /// Collective initialisation over `boot`, reaching RDMA peers through `nic`: any
    /// control-path device of provider `P` (the software NIC's `gda_sim::SimDevice`, or a
    /// hardware one).
    pub fn init<D>(boot: Box<dyn Bootstrap>, nic: RdmaNic<D>, cfg: &Config) -> Result<Self>
    where
        D: gda_hal::control::Device<Provider = P> + 'static,
    {
        let hooks = (
            nic.nudge.clone(),
            nic.progress.clone(),
            nic.post_nudge.clone(),
            nic.defer.clone(),
        );
        let conn = DeviceConn::open(nic)?;
        Self::init_with(boot, Some(Box::new(conn)), hooks, cfg)
    }

    /// Collective initialisation over `boot` with P2P routes only (an error if some PE needs
    /// RDMA).
    pub fn init_p2p(boot: Box<dyn Bootstrap>, cfg: &Config) -> Result<Self> {
        Self::init_with(boot, None, (None, None, None, None), cfg)
    }

    fn init_with(
        mut boot: Box<dyn Bootstrap>,
        mut domain: Option<Box<dyn Conn<P>>>,
        (nudge, progress, post_nudge, defer): (
            Option<Nudge>,
            Option<Progress>,
            Option<PostNudge>,
            Option<Defer>,
        ),
        cfg: &Config,
    ) -> Result<Self> {
        let (me, n) = (boot.rank(), boot.size());
        let job = boot.job().to_owned();
        let keyed = boot.names().clone();
        let heap_size = cfg.heap_size.next_multiple_of(4096);
        let internal = heap_size;
        let bounce = internal + TEAM_SLOTS * TEAM_BYTES;
        let total = bounce + BOUNCE;
        let mut seg = LocalSeg::create(
            cfg.heap,
            &keyed,
            me,
            total,
            cfg.gpu,
            cfg.local_rank.unwrap_or(me),
        )?;
        // Until the names are removed below (every peer has mapped them), an init that fails
        // removes them on its way out: a thread launch has no gdarun to sweep the job.
        let mut names = Names {
            job: &job,
            whats: Vec::new(),
        };
        if matches!(seg, LocalSeg::Host(_)) {
            names.whats.push(keyed.what(&format!("heap{me}")));
        }
        let statics = match cfg.static_data {
            // SAFETY: the range came from `StaticRange::executable`, whose caller promised
            // that nothing else writes it during this init.
            Some(r) => Some(unsafe { StaticSeg::claim(r, &keyed, me) }?),
            None => None,
        };
        if statics.is_some() {
            names.whats.push(keyed.what(&format!("data{me}")));
        }
        let (data, data_len) = statics
            .as_ref()
            .map_or((std::ptr::null_mut(), 0), |d| (d.as_ptr(), d.len()));
        let mine = Info {
            token: process_token(),
            heap_id: rand::random(),
            pid: std::process::id(),
            pid_ns: gda_os::process::pid_namespace(),
            base: seg.as_ptr() as u64,
            len: total as u64,
            data_base: data as u64,
            data_len: data_len as u64,
            data_sig: cfg.static_data.map_or(0, |r| r.fingerprint()),
            placement: seg.placement(),
            shared: seg.share()?,
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
        if let Some((j, i)) = infos
            .iter()
            .enumerate()
            .find(|(_, i)| i.placement != mine.placement)
        {
            return Err(ShmemError::Config(format!(
                "PE {j} has its symmetric heap in {} memory, PE {me} in {} memory: \
                 GDA_SHMEM_HEAP must agree",
                i.placement, mine.placement
            )));
        }
        if let Some((j, i)) = infos
            .iter()
            .enumerate()
            .find(|(_, i)| i.data_len != data_len as u64)
        {
            return Err(ShmemError::Config(format!(
                "PE {j} has {} bytes of symmetric static data, PE {me} has {data_len}: every \
                 PE must run the same executable",
                i.data_len
            )));
        }
        if let Some((j, _)) = infos
            .iter()
            .enumerate()
            .find(|(_, i)| i.data_sig != mine.data_sig)
        {
            return Err(ShmemError::Config(format!(
                "PE {j} runs another executable than PE {me} (their program headers differ, \
                 though both have {data_len} bytes of symmetric static data): every PE must \
                 run the same executable"
            )));
        }
        let same_host: Vec<bool> = infos.iter().map(|i| i.host == mine.host).collect();
        // Routes, and the segments of same-host processes mapped here. This PE's own route is
        // P2P to its own heap (`Local`); RDMA routes are filled in below, once connected.
        let mut routes: Vec<Option<Route<P>>> = Vec::with_capacity(n as usize);
        let mut peer_segs = Vec::new();
        let mut peer_statics = Vec::new();
        let mut rdma_pes = Vec::new();
        for (j, info) in infos.iter().enumerate() {
            let j32 = j as u32;
            let p2p = match cfg.transport {
                _ if j32 == me => {
                    routes.push(Some(Route::P2p(P2p::new(seg.as_ptr(), data, true))));
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
                routes.push(None);
            } else {
                // An address a peer sent is never dereferenced here: a peer heap is mapped by
                // name or handle, or (a GPU heap of a thread PE) found in this process's own
                // table; same-looking PIDs cannot confuse two processes.
                let s = seg
                    .open_peer(&keyed, j32, total, &info.shared, info.token == mine.token)
                    .map_err(|e| match e {
                        ShmemError::Io { what, source } => {
                            ShmemError::io(format!("PE {me}: {what}"), source)
                        }
                        e => e,
                    })?;
                let d = if data_len > 0 {
                    let d = StaticSeg::open_peer(&keyed, j32, data_len)?;
                    let p = d.as_ptr();
                    peer_statics.push(d);
                    p
                } else {
                    std::ptr::null_mut()
                };
                routes.push(Some(Route::P2p(P2p::new(s.as_ptr(), d, false))));
                peer_segs.push(s);
            }
        }
        // Where device-shared state lives: the queue memory the NIC was given, or else the
        // heap's (GPU memory for a GPU heap), which the queues get too.
        let device_memory = match domain.as_mut() {
            Some(d) if matches!(d.queue_memory(), QueueMemory::Caller(_)) => {
                d.queue_memory().clone()
            }
            Some(d) => {
                let m = seg.queue_memory()?;
                d.set_queue_memory(m.clone());
                m
            }
            None => seg.queue_memory()?,
        };
        // RDMA: register the whole segment once, one RC QP per RDMA peer, exchange endpoints.
        let (mut lkey, mut data_lkey) = (0, 0);
        let mut blob = Vec::new();
        let mut qp_of = Vec::new();
        let mut qpn_of = Vec::new();
        if !rdma_pes.is_empty() {
            let d = domain.as_mut().ok_or_else(|| {
                ShmemError::Config(format!(
                    "PE {me} reaches PEs {rdma_pes:?} by RDMA but no RDMA domain was given"
                ))
            })?;
            // SAFETY: the PE keeps its segment until after the domain (and so the region) is
            // dropped (`Net`'s field order, then `Pe`'s mappings).
            let (l, r) = unsafe { d.register(&seg.nic_desc()?) }?;
            lkey = l;
            blob.extend_from_slice(&r.to_le_bytes());
            let mut data_rkey = 0;
            if let Some(st) = &statics {
                // SAFETY: as the segment's: the static data stays mapped for the process's
                // life, longer than the domain.
                let (l, r) = unsafe { d.register(&st.nic_desc()) }?;
                (data_lkey, data_rkey) = (l, r);
            }
            blob.extend_from_slice(&data_rkey.to_le_bytes());
            for &j in &rdma_pes {
                let (q, ep) = d.create_qp()?;
                qp_of.push(q);
                qpn_of.push(
                    gda_hal::control::Endpoint::from_bytes(&ep)
                        .map_err(|e| ShmemError::rdma_setup(Some(j), &e))?
                        .qpn,
                );
                blob.extend_from_slice(&j.to_le_bytes());
                blob.extend_from_slice(&(ep.len() as u32).to_le_bytes());
                blob.extend_from_slice(&ep);
            }
        }
        let blobs = boot.allgather(&blob)?;
        for (k, &j) in rdma_pes.iter().enumerate() {
            let b = &blobs[j as usize];
            let (rkey, data_rkey, ep) = find_endpoint(b, me).ok_or_else(|| {
                ShmemError::Boot(format!("PE {j} published no RDMA endpoint for PE {me}"))
            })?;
            let d = domain
                .as_mut()
                .ok_or_else(|| ShmemError::Invalid("no domain".into()))?;
            d.connect(qp_of[k], ep).map_err(|e| e.for_peer(j))?;
            let (wq, cq) = d.queues(qp_of[k])?;
            let ms = u64::try_from(cfg.timeout.as_millis()).unwrap_or(u64::MAX);
            let state = device_memory
                .place(
                    QueueBuffer::SendState,
                    size_of::<gda_hal::SqShared>(),
                    align_of::<gda_hal::SqShared>(),
                )
                .map_err(|e| ShmemError::rdma_setup(Some(j), &e))?;
            // The domain owns the QP and CQ and outlives the queue (`Net`'s field order:
            // `routes` drops before `domain`); this queue is their only poster and poller on
            // the host.
            let mut sq = match &state {
                // SAFETY: as above; the placed state is zeroed, used by this queue only, and
                // outlives it (the route drops it after the queue).
                Some(b) => unsafe { SendQueue::<P>::with_state(wq, cq, ms, b.as_ptr().cast()) },
                // SAFETY: as above.
                None => unsafe { SendQueue::<P>::new(wq, cq, ms) },
            }
            .map_err(|e| ShmemError::Rdma {
                pe: j,
                op: "queue setup",
                source: e,
            })?;
            // Waits for room, doorbell turns and quiets run the NIC's host work, if any.
            sq.set_host_progress(progress.clone());
            let i = &infos[j as usize];
            routes[j as usize] = Some(Route::Rdma(Rdma::new(
                j,
                sq,
                state,
                i.base,
                rkey,
                (i.data_base, data_rkey),
                crate::transport::QueueHooks {
                    nudge: post_nudge.as_ref().and_then(|m| m(qpn_of[k])),
                    defer: defer.clone(),
                },
            )));
        }
        let routes = routes
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ShmemError::Invalid("a PE without a route".into()))?;
        // Everyone has mapped and connected: the names can go (a PE killed from now on leaves
        // nothing in /dev/shm).
        boot.barrier()?;
        seg.unlink()?;
        if let Some(st) = &statics {
            st.unlink()?;
        }
        names.whats.clear();
        boot.barrier()?;
        // Liveness by PID only for other processes of our PID namespace (a PID from another
        // namespace names some unrelated process here).
        let live = Liveness::new(
            infos.iter().map(|i| i.pid).collect(),
            infos
                .iter()
                .map(|i| {
                    i.token != mine.token
                        && i.host == mine.host
                        && i.pid_ns == mine.pid_ns
                        && mine.pid_ns != 0
                })
                .collect(),
        );
        let pe = Self {
            me,
            n,
            timeout: cfg.timeout,
            net: Net {
                routes,
                base: seg.as_ptr(),
                lkey,
                data,
                data_lkey,
                staging: Staging::new(bounce, BOUNCE - crate::device::WORK_BYTES),
                live,
                rdma_routes: rdma_pes.len(),
                _nic: domain,
                nudge,
                // Without RDMA routes the NIC has nothing to serve: a wait would run an empty
                // pass on every spin (4x slower 4-PE P2P barriers on this VM).
                progress: progress.filter(|_| !rdma_pes.is_empty()),
            },
            base: seg.as_ptr(),
            heap_size,
            data_len,
            internal,
            bounce,
            heap: RefCell::new(Allocator::new(heap_size)),
            heap_id: infos[0].heap_id,
            same_host,
            teams: RefCell::new(Teams::default()),
            boot: RefCell::new(boot),
            finalized: Cell::new(false),
            any_next: RefCell::default(),
            peer_segs: std::mem::ManuallyDrop::new(peer_segs),
            seg: std::mem::ManuallyDrop::new(seg),
            statics: std::mem::ManuallyDrop::new((peer_statics, statics)),
            unsafe_to_unmap: Cell::new(false),
            device_work: crate::device::work_offset(total),
            device_memory,
            device: crate::device::Cell::new(),
        };
        super::team::init_teams(&pe)?;
        Ok(pe)
    }
}

/// In PE `j`'s RDMA blob (heap rkey, static-data rkey, then endpoints by target PE), the keys
/// and the endpoint it made for PE `me`.
fn find_endpoint(b: &[u8], me: u32) -> Option<(u32, u32, &[u8])> {
    let rkey = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
    let data_rkey = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
    let mut at = 8;
    while at + 8 <= b.len() {
        let j = u32::from_le_bytes(b[at..at + 4].try_into().ok()?);
        let n = u32::from_le_bytes(b[at + 4..at + 8].try_into().ok()?) as usize;
        let ep = b.get(at + 8..at + 8 + n)?;
        if j == me {
            return Some((rkey, data_rkey, ep));
        }
        at += 8 + n;
    }
    None
}

/// Shared-memory names a PE created and still has to remove if its init fails.
struct Names<'a> {
    job: &'a str,
    whats: Vec<String>,
}

impl Drop for Names<'_> {
    fn drop(&mut self) {
        for w in &self.whats {
            let _ = gda_os::shm::unlink(self.job, w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(placement: HeapPlacement, shared: Vec<u8>) -> Info {
        Info {
            token: 7,
            heap_id: 9,
            pid: 1,
            pid_ns: 4026531836,
            base: 0x7f00_0000_0000,
            len: 1 << 20,
            data_base: 0x5555_0000_4000,
            data_len: 8192,
            data_sig: 11,
            placement,
            shared,
            host: "node1/boot".into(),
        }
    }

    #[test]
    fn pe_info_round_trips_with_a_heap_handle() {
        let mut cases = 0;
        for (placement, shared) in [
            (HeapPlacement::Host, Vec::new()),
            (HeapPlacement::Gpu, (0..72).collect()),
        ] {
            let i = info(placement, shared.clone());
            let d = Info::decode(&i.encode()).unwrap();
            assert_eq!(d.data_sig, 11);
            assert_eq!(
                (
                    d.token,
                    d.heap_id,
                    d.base,
                    d.len,
                    d.data_base,
                    d.data_len,
                    d.placement,
                    d.shared,
                    d.host
                ),
                (
                    7,
                    9,
                    0x7f00_0000_0000,
                    1 << 20,
                    0x5555_0000_4000,
                    8192,
                    placement,
                    shared,
                    i.host
                )
            );
            cases += 1;
        }
        assert_eq!(cases, 2);
    }

    #[test]
    fn malformed_pe_info_is_an_error() {
        let good = info(HeapPlacement::Gpu, vec![1; 72]).encode();
        // Cut inside the fixed part, inside the handle; an unknown placement; a handle length
        // beyond the message.
        let mut bad_placement = good.clone();
        bad_placement[INFO_FIXED - 5] = 9;
        let mut long_handle = good.clone();
        long_handle[INFO_FIXED - 4..INFO_FIXED].copy_from_slice(&u32::MAX.to_le_bytes());
        let cases = [
            (good[..INFO_FIXED - 1].to_vec(), "malformed PE info"),
            (bad_placement, "unknown heap placement 9"),
            (long_handle, "bytes of heap handle"),
        ];
        for (bytes, want) in &cases {
            let e = Info::decode(bytes).err().expect("refused").to_string();
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
        // Truncated inside the handle: the host name absorbs nothing it should not.
        let e = Info::decode(&good[..INFO_FIXED + 10])
            .err()
            .expect("refused");
        assert!(
            e.to_string().contains("72 bytes of heap handle, 10 left"),
            "{e}"
        );
    }

    #[test]
    fn a_failed_init_removes_its_shared_memory_names() {
        // Two PEs whose heap sizes differ: both fail after creating `heap<rank>`. The launcher
        // here is the bare thread hub, which sweeps nothing (as under mpirun or srun), so the
        // names must go with the failed init.
        let hub = crate::boot::threads::Hub::new(2, std::time::Duration::from_secs(10));
        let errors: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u32)
                .map(|r| {
                    let boot = hub.member(r);
                    s.spawn(move || {
                        let cfg = Config {
                            heap_size: (1 + r as usize) << 20,
                            ..Config::default()
                        };
                        match Pe::<gda_native::Native>::init_p2p(Box::new(boot), &cfg) {
                            Ok(_) => "initialised".to_string(),
                            Err(e) => e.to_string(),
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for e in &errors {
            assert!(e.contains("GDA_SHMEM_HEAP_SIZE must agree"), "{e}");
        }
        assert_eq!(gda_os::shm::list(hub.job()).unwrap(), Vec::<String>::new());
    }
}
