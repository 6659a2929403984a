//! Starting PEs: as threads, from a launcher's environment, or as processes (`gdarun`).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

#[cfg(feature = "sim")]
use crate::boot::env::Launch;
use crate::boot::tcp::TcpBoot;
use crate::boot::threads::Hub;
use crate::domain::RdmaNic;
use crate::error::{Result, ShmemError};
use crate::pe::{Config, Pe};
use gda_hal::control::Device;

/// Runs `f` on `n` PEs that are threads of this process, over the software NIC of `P`'s device
/// model for RDMA routes (chaos from `GDA_SIM_CHAOS`); returns each PE's result by rank, or
/// the first error (with its rank).
#[cfg(feature = "sim")]
pub fn threads<P, R, F>(n: u32, cfg: &Config, f: F) -> Result<Vec<R>>
where
    P: gda_sim::Modeled,
    R: Send,
    F: Fn(&Pe<P>) -> Result<R> + Sync,
{
    let fabric = gda_sim::Fabric::from_env().map_err(|e| ShmemError::Config(e.to_string()))?;
    threads_on::<P, R, F>(n, cfg, &fabric, f)
}

/// [`threads`] on a given in-process fabric (e.g. with a chaos seed).
#[cfg(feature = "sim")]
pub fn threads_on<P, R, F>(n: u32, cfg: &Config, fabric: &gda_sim::Fabric, f: F) -> Result<Vec<R>>
where
    P: gda_sim::Modeled,
    R: Send,
    F: Fn(&Pe<P>) -> Result<R> + Sync,
{
    threads_with(
        n,
        cfg,
        |_| Ok(sim_nic::<P>(fabric, gda_sim::SimDevice::new(fabric))),
        f,
    )
}

/// A software NIC as a PE's RDMA NIC, with its fabric's engine wake-up, and — on a process
/// fabric, whose responders are the peers' engines — the engine's pass in the PE's thread
/// while it waits (so a put's acknowledgement is reaped by the PE that waits for it, and a
/// waiting PE serves its peers' requests, with no third thread that must first get a core).
/// What the launchers give each PE; public for programs (and tests) that make their own
/// fabrics.
#[cfg(feature = "sim")]
pub fn sim_nic<P: gda_sim::Modeled>(
    fabric: &gda_sim::Fabric,
    device: gda_sim::SimDevice<P>,
) -> RdmaNic<gda_sim::SimDevice<P>> {
    let f = fabric.clone();
    let progress = fabric.is_process().then(|| {
        let g = fabric.clone();
        std::sync::Arc::new(move || g.progress()) as crate::domain::Progress
    });
    // On a process fabric the PE runs the work itself when the engine thread naps (its waits
    // run it anyway): for each QP only its own (`post_nudge`), for what else posts (the device
    // API's kick) the whole pass; elsewhere the napping engine is woken. Measured on the wire
    // engine (2 PEs, 2 cores, interleaved): put + quiet p50 1.13-1.15 us and barrier
    // 2.0-2.4 us with the whole pass, against 1.8-7.5 us and 3.3-88 us with a wake-up after
    // every post.
    let after_post: crate::domain::Nudge = if fabric.is_process() {
        std::sync::Arc::new(move || f.after_post())
    } else {
        std::sync::Arc::new(move || f.kick())
    };
    let nic = device.nic().index();
    let post_nudge = fabric.is_process().then(|| {
        let g = fabric.clone();
        std::sync::Arc::new(move |qpn| {
            g.post_hook(nic, qpn)
                .map(|h| std::sync::Arc::new(h) as crate::domain::Nudge)
        }) as crate::domain::PostNudge
    });
    // Non-blocking puts run in batches when the engine thread will serve a tail on its own.
    let defer = fabric.is_process().then(|| {
        let g = fabric.clone();
        std::sync::Arc::new(move |in_row| g.defer_doorbell(in_row)) as crate::domain::Defer
    });
    RdmaNic {
        nudge: Some(after_post),
        progress,
        post_nudge,
        defer,
        ..RdmaNic::new(device)
    }
}

/// Runs `f` on `n` PEs that are threads of this process, PE `r` reaching its RDMA peers through
/// the NIC `open(r)` returns (any control-path device); returns each PE's result by rank, or
/// the first error (with its rank).
pub fn threads_with<D, O, R, F>(n: u32, cfg: &Config, open: O, f: F) -> Result<Vec<R>>
where
    D: Device + 'static,
    O: Fn(u32) -> Result<RdmaNic<D>> + Sync,
    R: Send,
    F: Fn(&Pe<D::Provider>) -> Result<R> + Sync,
{
    if n == 0 {
        return Err(ShmemError::Config("zero PEs".into()));
    }
    let hub = Hub::new(n, cfg.timeout);
    let results: Vec<Result<R>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|r| {
                let boot = hub.member(r);
                let (f, cfg, open) = (&f, cfg, &open);
                std::thread::Builder::new()
                    .name(format!("pe{r}"))
                    .spawn_scoped(s, move || {
                        let pe = Pe::init(Box::new(boot), open(r)?, cfg)?;
                        let out = f(&pe);
                        if let Err(e) = &out {
                            pe.abort(&e.to_string());
                        }
                        let fin = pe.finalize();
                        let out = out?;
                        fin.map(|()| out)
                    })
                    .map_err(|e| ShmemError::io("spawning a PE thread", e))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.and_then(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(ShmemError::Invalid("a PE thread panicked".into())))
                })
            })
            .collect()
    });
    let _ = gda_os::shm::sweep(hub.job());
    // Report the root cause: a PE's own failure ranks above the errors it caused elsewhere
    // (timeouts, aborts seen through the hub).
    let mut first: Option<(u8, ShmemError)> = None;
    let mut out = Vec::with_capacity(results.len());
    for (r, x) in results.into_iter().enumerate() {
        match x {
            Ok(v) => out.push(v),
            Err(e) => {
                let rank = match e {
                    ShmemError::Boot(_) => 2,
                    ShmemError::Timeout { .. } => 1,
                    _ => 0,
                };
                let e = match e {
                    e @ (ShmemError::Timeout { .. } | ShmemError::PeGone { .. }) => e,
                    e => ShmemError::Invalid(format!("PE {r}: {e}")),
                };
                if first.as_ref().is_none_or(|(k, _)| rank < *k) {
                    first = Some((rank, e));
                }
            }
        }
    }
    match first {
        Some((_, e)) => Err(e),
        None => Ok(out),
    }
}

/// Initialises this process's PE from a launcher's environment (`gdarun`, `mpirun`, `srun`,
/// `torchrun`; see [`crate::boot::env`]), with [`Config::from_env`], over the software NIC's
/// cross-process fabric for RDMA routes.
#[cfg(feature = "sim")]
pub fn init_from_env<P: gda_sim::Modeled>() -> Result<Pe<P>> {
    init_from_env_with::<P>(&Config::from_env()?)
}

/// [`init_from_env`] with the configuration given (e.g. [`Config::from_env`] plus
/// [`Config::static_data`]). Without any launcher's variables the program is one PE on its own
/// ([`Launch::singleton`]), as OpenSHMEM implementations run `./a.out`; half-set variables are
/// an error naming the missing one.
#[cfg(feature = "sim")]
pub fn init_from_env_with<P: gda_sim::Modeled>(cfg: &Config) -> Result<Pe<P>> {
    let launch = Launch::from_env()?.unwrap_or_else(Launch::singleton);
    init_launched::<P>(&launch, cfg)
}

/// [`init_from_env`] with explicit parameters.
#[cfg(feature = "sim")]
pub fn init_launched<P: gda_sim::Modeled>(launch: &Launch, cfg: &Config) -> Result<Pe<P>> {
    let chaos =
        gda_sim::FabricConfig::from_chaos_var(std::env::var("GDA_SIM_CHAOS").ok().as_deref())
            .map_err(|e| ShmemError::Config(e.to_string()))?;
    let boot = rendezvous(launch, cfg)?;
    // The process fabric: peers' requests come over shared-memory rings and execute here.
    let fabric = gda_sim::Fabric::process(chaos).map_err(|e| ShmemError::Config(e.to_string()))?;
    let binding = binding_from_env()?;
    if let Some((bind, cpus)) = &binding {
        // Placed before the engine thread exists: unbound from birth, PE and engine land
        // where the scheduler finds room. (Unbinding only after init left each engine born on
        // its PE's core, a placement the load balancer sees as even and keeps: half the runs
        // then measured 1.4 µs per put + quiet instead of 0.55.)
        let p = place_pe(*bind, cpus, engine_expected(cfg, launch.size))?;
        fabric
            .set_engine_cpus(&p.engine_cpus)
            .map_err(|e| ShmemError::Config(format!("GDA_SHMEM_CPUS: {e}")))?;
    }
    let nic = sim_nic::<P>(&fabric, gda_sim::SimDevice::new(&fabric));
    let pe = init_booted(launch, boot, cfg, nic)?;
    if let Some((bind, cpus)) = &binding {
        // What the configuration did not foretell (routes decided by host identities).
        place_pe(*bind, cpus, fabric.engine_cpus().is_some())?;
    }
    report_bindings(launch.rank, &fabric);
    Ok(pe)
}

/// Initialises this process's PE as rank `launch.rank` of `launch`'s job, reaching RDMA peers
/// through `nic` (any control-path device).
pub fn init_launched_with<D>(
    launch: &Launch,
    cfg: &Config,
    nic: RdmaNic<D>,
) -> Result<Pe<D::Provider>>
where
    D: Device + 'static,
{
    let boot = rendezvous(launch, cfg)?;
    init_booted(launch, boot, cfg, nic)
}

/// Raises this process's soft limit of open files to its hard limit (what `ulimit -n` may
/// reach without privilege). A PE holds a few descriptors per peer (mapped segments, the
/// rendezvous, queues), so the usual soft limit of 1024 stopped jobs near 300 PEs although
/// `gdarun -n` allows 1024. Raised rather than closing descriptors after mapping: a
/// segment's descriptor is used again to map it at a second address (static data). `gdarun`
/// raises its own, which its PEs inherit; every PE raises its own too (other launchers).
/// Best effort: a hard limit that is lower still is the administrator's choice.
pub fn raise_open_file_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if l.current < l.maximum {
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
}

/// Meets the job's other PEs at rank 0 (authenticated with the job secret).
fn rendezvous(launch: &Launch, cfg: &Config) -> Result<TcpBoot> {
    raise_open_file_limit();
    watch_launcher(&launch.job, launch.rank);
    let secret = launch.secret_source()?;
    let boot = TcpBoot::connect_with(
        launch.rank,
        launch.size,
        launch.addr,
        &launch.job,
        &secret,
        cfg.timeout,
    );
    // Everyone who will ever join has read the secret file by now (or the rendezvous failed).
    launch.forget_secret();
    boot
}

/// [`Pe::init`] after the rendezvous; on failure, removes the job's shared-memory names.
fn init_booted<D>(
    launch: &Launch,
    boot: TcpBoot,
    cfg: &Config,
    nic: RdmaNic<D>,
) -> Result<Pe<D::Provider>>
where
    D: Device + 'static,
{
    let mut cfg = cfg.clone();
    cfg.local_rank.get_or_insert(launch.local_rank);
    let pe = Pe::init(Box::new(boot), nic, &cfg);
    if pe.is_err() {
        // Leave nothing behind when init fails (peers may have died half way).
        let _ = gda_os::shm::sweep(&launch.job);
    }
    pe
}

/// Most PEs `gdarun` starts on one host (each is a process with a heap mapping and, over RDMA,
/// queues to every other PE; far more than the cores of any host).
pub const MAX_PES: u32 = 1024;

/// How `gdarun` starts a job.
#[derive(Clone, Debug)]
pub struct Job {
    /// Number of PEs (1..=[`MAX_PES`]).
    pub n: u32,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Job id (default: random).
    pub job: Option<String>,
    /// `GDA_SHMEM_HOSTS` for the PEs (simulated hosts).
    pub hosts: Option<u32>,
    /// How long the others may run on after one PE failed (or after a forwarded signal)
    /// before they are killed.
    pub grace: Duration,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Whether and how each PE is pinned to a CPU.
    pub bind: Bind,
    /// Each PE prints where it and its software-NIC engine may run
    /// (`GDA_SHMEM_REPORT_BINDINGS=1`, `gdarun --report-bindings`).
    pub report_bindings: bool,
}

/// CPU binding of a job's PEs (`gdarun --bind-to`), as `oshrun`/`mpirun` bind by default.
///
/// A PE that stays on one core keeps its caches and does not share a core with a peer it spins
/// against; unbound, the scheduler may move a spinning PE onto its peer's core for a time slice.
/// The CPUs are those `gdarun` itself may use (its affinity mask, so a container's or
/// `taskset`'s limit is kept): PE `r` gets the `r`-th of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bind {
    /// [`Bind::Core`] when there are at least as many CPUs as PEs, else [`Bind::None`].
    #[default]
    Auto,
    /// One CPU per PE; an error when there are fewer CPUs than PEs.
    Core,
    /// No binding: the scheduler places the PEs.
    None,
}

impl std::str::FromStr for Bind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "core" => Ok(Self::Core),
            "none" => Ok(Self::None),
            _ => Err(format!("{s:?} is not a binding (auto, core or none)")),
        }
    }
}

/// The CPUs this process may run on, in increasing order.
fn allowed_cpus() -> Result<Vec<usize>> {
    gda_os::cpu::allowed(None).map_err(|e| ShmemError::io("reading the CPU affinity", e))
}

/// The CPU each PE is pinned to (`None`: unbound), for `n` PEs over `cpus` (the launcher's
/// CPUs, which a pinned PE is told: `GDA_SHMEM_CPUS`, see [`pe_placement`]); `engines`: the
/// job's configuration says its PEs run software-NIC engines ([`engine_expected`]). `auto`
/// then leaves the PEs unbound from the start, as unbound jobs ran before binding existed: a
/// PE pinned at start (even if it unbinds itself before its engine starts) begins on a core of
/// its own, and the balancer sometimes keeps each engine on its PE's core (measured: one run in
/// five at 1.4 µs per put + quiet instead of 0.55; never in 23 unbound runs).
fn placement(bind: Bind, n: u32, cpus: &[usize], engines: bool) -> Result<Option<Vec<usize>>> {
    let fits = cpus.len() >= n as usize;
    match bind {
        Bind::None => Ok(None),
        Bind::Auto if !fits || engines => Ok(None),
        Bind::Core if !fits => Err(ShmemError::Config(format!(
            "--bind-to core: {n} PEs but only {} CPUs available to gdarun (use --bind-to none \
             or fewer PEs)",
            cpus.len()
        ))),
        Bind::Auto | Bind::Core => Ok(Some(cpus[..n as usize].to_vec())),
    }
}

/// Where a PE that started pinned runs once initialised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PePlacement {
    /// The CPUs of the PE's own threads (its main thread and those it starts later).
    pub pe_cpus: Vec<usize>,
    /// The CPUs of its software-NIC engine thread, when it runs one.
    pub engine_cpus: Vec<usize>,
}

/// The placement of a PE that `gdarun` pinned to `cpu` under `bind`, given the launcher's
/// CPUs and whether the PE runs a software-NIC engine (it has RDMA routes on the sim NIC).
///
/// The engine stands in for a NIC: on hardware the NIC executes a PE's WQEs while the PE spins
/// on its CQ, never on the PE's core. Pinned with its PE, the engine runs only when the
/// spinning PE is preempted and every completion waits for a time slice (2 PEs, 8-byte put +
/// quiet: 7.5–10 µs instead of 0.7 µs). So the engine always keeps every launcher CPU. And
/// since a spinning PE pinned to one core still holds that core against the engines (1.35 µs
/// measured here with only the engine unpinned), `auto` also unpins a PE that runs an engine,
/// which is what an unbound job measured before binding existed (0.7 µs); P2P-only PEs stay
/// pinned, which is what wins the P2P comparison with Open MPI. `core` is the user's explicit
/// choice: the PE stays on its core.
#[must_use]
pub fn pe_placement(bind: Bind, cpu: usize, launcher_cpus: &[usize], engine: bool) -> PePlacement {
    let pe_cpus = match (bind, engine) {
        (Bind::Auto, true) | (Bind::None, _) => launcher_cpus.to_vec(),
        _ => vec![cpu],
    };
    PePlacement {
        pe_cpus,
        engine_cpus: launcher_cpus.to_vec(),
    }
}

/// Reads a CPU list (`0-3,8,10-11`, the kernel's and `taskset -c`'s form) into sorted, distinct
/// CPU numbers; anything else is an error naming `var`.
pub fn parse_cpu_list(var: &str, s: &str) -> Result<Vec<usize>> {
    gda_os::cpu::parse_list(s)
        .map_err(|why| ShmemError::Config(format!("{var}={s:?} is not a CPU list: {why}")))
}

/// A PE dies with its launcher: the kernel sends it SIGKILL when the launcher dies, however
/// it died (`kill -9` included), so no PE runs on as an orphan. (The signal follows the thread
/// that spawned the PE: [`run`] spawns and reaps every PE on its caller's thread, which returns
/// only once they are all gone.) A gda PE replaces it with a watch that cleans up first
/// (`watch_launcher`); a PE a wrapper started is reached by that watch only.
fn die_with_launcher(c: &mut Command, launcher: rustix::process::Pid) {
    let hook = move || {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        // The launcher died between the fork and the line above: the signal will never come.
        if rustix::process::getppid() != Some(launcher) {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the hook makes two system calls, allocates nothing and takes no lock
    // (async-signal-safe, as a hook between fork and exec must be).
    unsafe { std::os::unix::process::CommandExt::pre_exec(c, hook) };
}

/// Makes `c` start pinned to `cpu`: the child sets its own affinity between fork and exec, so
/// the program never runs elsewhere (and what it forks inherits the mask).
fn pin(c: &mut Command, cpu: usize) {
    let set = gda_os::cpu::set_of(&[cpu]);
    let hook = move || gda_os::cpu::restrict(&set);
    // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe
    // work is allowed: it makes one system call on a set built before the fork, allocates
    // nothing and takes no lock.
    unsafe { std::os::unix::process::CommandExt::pre_exec(c, hook) };
}

/// Whether the PEs `gdarun` starts for `job` will run software-NIC engines, from the
/// configuration they will read (the job's variables over `gdarun`'s own environment).
fn job_runs_engines(job: &Job) -> Result<bool> {
    let var = |k: &str| {
        job.env
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(k).ok())
    };
    let mut cfg = Config::default();
    if let Some(t) = var("GDA_SHMEM_TRANSPORT") {
        cfg.transport = t.parse()?;
    }
    cfg.hosts = job
        .hosts
        .or_else(|| var("GDA_SHMEM_HOSTS").and_then(|h| h.trim().parse().ok()));
    Ok(engine_expected(&cfg, job.n))
}

/// Whether a PE of a `size`-PE job configured by `cfg` will have RDMA routes, and so a
/// software-NIC engine, as far as the configuration tells before init: forced RDMA, or
/// several simulated hosts. (Real hosts are only known from the rendezvous; `gdarun` starts
/// every PE on its own host.)
fn engine_expected(cfg: &Config, size: u32) -> bool {
    size > 1
        && match cfg.transport {
            crate::pe::TransportPolicy::Rdma => true,
            crate::pe::TransportPolicy::Auto => cfg.hosts.is_some_and(|h| h > 1),
            crate::pe::TransportPolicy::P2p => false,
        }
}

/// Lets the child started by `c` inherit the listening socket `l` as `GDA_SHMEM_BOOT_FD` (its
/// descriptor loses close-on-exec in the child only, between fork and exec).
fn inherit(c: &mut Command, l: &std::net::TcpListener) {
    use std::os::fd::{AsRawFd, BorrowedFd};
    let fd = l.as_raw_fd();
    c.env("GDA_SHMEM_BOOT_FD", fd.to_string());
    let hook = move || {
        // SAFETY: `fd` is open in the child (fork copied it; the launcher keeps it open until
        // the spawn returns) and only used for this call.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::fcntl_setfd(b, rustix::io::FdFlags::empty()).map_err(std::io::Error::from)
    };
    // SAFETY: the hook runs in the forked child before exec: one fcntl system call, no
    // allocation, no lock.
    unsafe { std::os::unix::process::CommandExt::pre_exec(c, hook) };
}

/// The binding `gdarun` started this PE with (`GDA_SHMEM_BIND`, `GDA_SHMEM_CPUS`), if any.
#[cfg(feature = "sim")]
fn binding_from_env() -> Result<Option<(Bind, Vec<usize>)>> {
    let (Ok(bind), Ok(cpus)) = (
        std::env::var("GDA_SHMEM_BIND"),
        std::env::var("GDA_SHMEM_CPUS"),
    ) else {
        return Ok(None);
    };
    let bind = match bind.trim() {
        "" => return Ok(None),
        b => b
            .parse::<Bind>()
            .map_err(|e| ShmemError::Config(format!("GDA_SHMEM_BIND: {e}")))?,
    };
    Ok(Some((bind, parse_cpu_list("GDA_SHMEM_CPUS", &cpus)?)))
}

/// Places this PE (its calling thread, and the threads it starts later) as `pe_placement`
/// says for `bind`, the launcher's `cpus` and whether it runs an engine; returns the placement.
#[cfg(feature = "sim")]
fn place_pe(bind: Bind, cpus: &[usize], engine: bool) -> Result<PePlacement> {
    let here = allowed_cpus()?;
    let p = pe_placement(bind, here[0], cpus, engine);
    if p.pe_cpus != here {
        gda_os::cpu::restrict(&gda_os::cpu::set_of(&p.pe_cpus))
            .map_err(|e| ShmemError::io("moving the PE to the launcher's CPUs", e))?;
    }
    Ok(p)
}

/// PE `r`'s local rank and the PEs on its host, in a job of `n` PEs spread round-robin over
/// `hosts` simulated hosts (`GDA_SHMEM_HOSTS`; `None`: one host).
fn local_rank(r: u32, n: u32, hosts: Option<u32>) -> (u32, u32) {
    match hosts {
        Some(k) if k > 1 => (r / k, (n - r % k).div_ceil(k)),
        _ => (r, n),
    }
}

/// With `GDA_SHMEM_REPORT_BINDINGS=1` (`gdarun --report-bindings`), one line on stderr saying
/// where this PE and its software-NIC engine may run, read back from the kernel.
#[cfg(feature = "sim")]
fn report_bindings(rank: u32, fabric: &gda_sim::Fabric) {
    if std::env::var("GDA_SHMEM_REPORT_BINDINGS").as_deref() != Ok("1") {
        return;
    }
    let list = gda_os::cpu::format_list;
    let pe = allowed_cpus().map_or_else(|e| format!("unknown ({e})"), |c| list(&c));
    let engine = fabric
        .engine_cpus()
        .map_or_else(|| "not running (no RDMA routes)".to_string(), |c| list(&c));
    crate::diag!("gda shmem: PE {rank} bindings: pe cpus {pe}; engine cpus {engine}");
}

/// How a job ended.
#[derive(Debug)]
pub struct JobOutcome {
    /// Per PE: exit code, or `None` if killed by a signal (then `signal`).
    pub codes: Vec<(Option<i32>, Option<i32>)>,
    /// The PE whose failure was seen first (its status is the job's, as `oshrun`'s is: a PE's
    /// `shmem_global_exit(7)` ends the job with 7, not with a peer's later timeout).
    pub first_failure: Option<usize>,
    /// Shared-memory names removed after the job.
    pub swept: usize,
    /// The job id.
    pub job: String,
    /// The signal (SIGTERM, SIGINT or SIGHUP) that ended the job, if the launcher got one.
    pub interrupted: Option<i32>,
    /// The PE that called `shmem_global_exit` first, and its status: the job's status, also
    /// when it is 0 (the other PEs were ended for it).
    pub global_exit: Option<(usize, i32)>,
}

impl JobOutcome {
    /// Exit status for the launcher: 128 + the signal if the launcher was interrupted, else 0
    /// if every PE succeeded, else the first failure's code in time (128 + signal for a killed
    /// PE).
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        if let Some(s) = self.interrupted {
            return 128 + s;
        }
        if let Some((_, s)) = self.global_exit {
            // As `exit(3)` passes it on: the low 8 bits.
            return s & 0xff;
        }
        let first = self
            .first_failure
            .and_then(|r| self.codes.get(r))
            .into_iter();
        first
            .chain(self.codes.iter())
            .find_map(|&(c, s)| match (c, s) {
                (Some(0), _) => None,
                (Some(c), _) => Some(c),
                (None, Some(s)) => Some(128 + s),
                (None, None) => Some(1),
            })
            .unwrap_or(0)
    }
}

/// The launcher's view of its PEs: started children, reaped as they end.
struct Pes {
    children: Vec<Option<Child>>,
    codes: Vec<(Option<i32>, Option<i32>)>,
    left: usize,
    failed_at: Option<Instant>,
    /// The PE that failed first (in the order they were reaped).
    first_failure: Option<usize>,
}

impl Pes {
    /// Reaps every PE that ended (no zombies pile up, also while others are still starting).
    fn reap(&mut self) {
        use std::os::unix::process::ExitStatusExt;
        for (r, slot) in self.children.iter_mut().enumerate() {
            let Some(ch) = slot.as_mut() else { continue };
            let st = match ch.try_wait() {
                Ok(Some(st)) => st,
                Ok(None) => continue,
                // Not our child any more (cannot happen for a `Child`): count it as gone.
                Err(_) => std::process::ExitStatus::from_raw(1 << 8),
            };
            self.codes[r] = (st.code(), st.signal());
            if !st.success() {
                match st.signal() {
                    Some(s) => {
                        crate::diag!("gdarun: PE {r} (pid {}) was killed by signal {s}", ch.id())
                    }
                    None => crate::diag!(
                        "gdarun: PE {r} (pid {}) exited with status {}",
                        ch.id(),
                        st.code().unwrap_or(-1)
                    ),
                }
                self.failed_at.get_or_insert_with(Instant::now);
                self.first_failure.get_or_insert(r);
            }
            *slot = None;
            self.left -= 1;
        }
    }

    /// Sends `sig` to every PE still running, and to whatever it started (each PE leads its
    /// own process group: a PE that is a shell script or `unshare -f` has children too).
    fn signal(&self, sig: rustix::process::Signal) {
        for ch in self.children.iter().flatten() {
            signal_group(ch, sig);
        }
    }

    fn kill_all(&mut self, why: &str) {
        for (r, slot) in self.children.iter_mut().enumerate() {
            if let Some(ch) = slot.as_mut() {
                crate::diag!("gdarun: killing PE {r} (pid {}): {why}", ch.id());
                signal_group(ch, rustix::process::Signal::KILL);
                let _ = ch.kill();
            }
        }
    }
}

/// Signals the process group a PE leads (the PE and what it started).
fn signal_group(ch: &Child, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(ch.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        if rustix::process::kill_process_group(pid, sig).is_err() {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }
}

/// Starts `job.n` processes of `job.argv` as PEs (rank, size, rendezvous address, job id and a
/// fresh random secret in their environment), waits for them, and removes the job's shared
/// memory whatever happened. When a PE fails, the others get `job.grace` to notice (their
/// waits end with an error naming it) and are then killed.
///
/// `run` is a launcher: while it runs, SIGTERM, SIGINT and SIGHUP to this process are caught
/// and forwarded to the PEs; PEs still running `job.grace` later are killed, the job's shared
/// memory is swept, and the outcome reports the signal ([`JobOutcome::exit_code`] = 128 + it).
pub fn run(job: &Job) -> Result<JobOutcome> {
    if job.n == 0 || job.n > MAX_PES {
        return Err(ShmemError::Config(format!(
            "-n {} is not in 1..={MAX_PES} (the most PEs one host runs)",
            job.n
        )));
    }
    let Some((prog, args)) = job.argv.split_first() else {
        return Err(ShmemError::Config("no program given".into()));
    };
    let id = job
        .job
        .clone()
        .unwrap_or_else(|| format!("r{}x{:08x}", std::process::id(), rand::random::<u32>()));
    gda_os::shm::segment_name(&id, "x").map_err(|e| ShmemError::Config(e.to_string()))?;
    raise_open_file_limit();
    // Bound here and handed to rank 0 (`GDA_SHMEM_BOOT_FD`): a port found free and released
    // could be taken by another user before rank 0 binds it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| ShmemError::io("binding the rendezvous port on loopback", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| ShmemError::io("binding the rendezvous port on loopback", e))?
        .port();
    let mut listener = Some(listener);
    // Caught from here on: a signal to the launcher ends the job cleanly, not the launcher
    // alone (which would leave the PEs orphaned and their shared memory behind).
    let caught = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut hooks = Vec::new();
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        let id = signal_hook::flag::register_usize(sig, caught.clone(), sig as usize)
            .map_err(|e| ShmemError::io("installing the launcher's signal handlers", e))?;
        hooks.push(id);
    }
    let out = supervise(job, &id, (port, &mut listener), prog, args, &caught);
    for h in hooks {
        signal_hook::low_level::unregister(h);
    }
    let _ = gda_os::shm::sweep(&id);
    out
}

fn supervise(
    job: &Job,
    id: &str,
    (port, listener): (u16, &mut Option<std::net::TcpListener>),
    prog: &str,
    args: &[String],
    caught: &std::sync::atomic::AtomicUsize,
) -> Result<JobOutcome> {
    use std::sync::atomic::Ordering::Relaxed;
    // The mask is only read when binding may happen (`none` works whatever it would say).
    let (cpus, launcher_cpus) = match job.bind {
        Bind::None => (None, String::new()),
        b => {
            let all = allowed_cpus()?;
            (
                placement(b, job.n, &all, job_runs_engines(job)?)?,
                gda_os::cpu::format_list(&all),
            )
        }
    };
    let secret: [u8; 32] = rand::random();
    let launcher = rustix::process::getpid();
    // PEs report `shmem_global_exit` on this pipe (`GDA_SHMEM_EXIT_FD`: the write end, which
    // the children inherit): "<rank> <status>\n", one write each.
    let (exit_rd, exit_wr) = rustix::pipe::pipe()
        .map_err(|e| ShmemError::io("making the global-exit pipe", e.into()))?;
    rustix::io::fcntl_setfd(&exit_rd, rustix::io::FdFlags::CLOEXEC)
        .and_then(|()| rustix::fs::fcntl_setfl(&exit_rd, rustix::fs::OFlags::NONBLOCK))
        .map_err(|e| ShmemError::io("setting up the global-exit pipe", e.into()))?;
    let mut exits = GlobalExits::default();
    let mut pes = Pes {
        children: Vec::with_capacity(job.n as usize),
        codes: vec![(None, None); job.n as usize],
        left: 0,
        failed_at: None,
        first_failure: None,
    };
    for r in 0..job.n {
        pes.reap();
        if caught.load(Relaxed) != 0 || pes.failed_at.is_some() {
            // Do not start the rest of a job that is already ending.
            pes.codes.truncate(pes.children.len());
            break;
        }
        let (local, local_n) = local_rank(r, job.n, job.hosts);
        let mut c = Command::new(prog);
        // Each PE leads a process group, so signals and kills reach what it starts as well.
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        die_with_launcher(&mut c, launcher);
        c.args(args)
            .env("GDA_SHMEM_RANK", r.to_string())
            .env("GDA_SHMEM_SIZE", job.n.to_string())
            .env("GDA_SHMEM_LOCAL_RANK", local.to_string())
            .env("GDA_SHMEM_LOCAL_SIZE", local_n.to_string())
            .env("GDA_SHMEM_JOB", id)
            .env("GDA_SHMEM_BOOT", format!("127.0.0.1:{port}"))
            .env("GDA_SHMEM_SECRET", hex::encode(secret))
            .env(
                "GDA_SHMEM_EXIT_FD",
                std::os::fd::AsRawFd::as_raw_fd(&exit_wr).to_string(),
            );
        if let Some(h) = job.hosts {
            c.env("GDA_SHMEM_HOSTS", h.to_string());
        }
        for (k, v) in &job.env {
            c.env(k, v);
        }
        if let Some(&cpu) = cpus.as_ref().map(|c| &c[r as usize]) {
            pin(&mut c, cpu);
            c.env("GDA_SHMEM_CPUS", &launcher_cpus);
            c.env(
                "GDA_SHMEM_BIND",
                if job.bind == Bind::Core {
                    "core"
                } else {
                    "auto"
                },
            );
        }
        if job.report_bindings {
            c.env("GDA_SHMEM_REPORT_BINDINGS", "1");
        }
        if r == 0 {
            if let Some(l) = listener.as_ref() {
                inherit(&mut c, l);
            }
        }
        let spawned = c.spawn();
        if r == 0 {
            // Rank 0 has its own copy now (or never will): nobody else may accept on it.
            *listener = None;
        }
        match spawned {
            Ok(ch) => {
                pes.children.push(Some(ch));
                pes.left += 1;
            }
            Err(e) => {
                pes.kill_all("the job could not start");
                for ch in pes.children.iter_mut().flatten() {
                    let _ = ch.wait();
                }
                return Err(ShmemError::io(format!("starting PE {r} ({prog})"), e));
            }
        }
    }
    drop(exit_wr);
    let mut interrupted: Option<(i32, Instant)> = None;
    let mut killed = false;
    while pes.left > 0 {
        pes.reap();
        if let Some((r, s)) = exits.poll(&exit_rd, job.n) {
            if !killed {
                crate::diag!("gdarun: PE {r} called shmem_global_exit({s}): ending the job");
                killed = true;
                pes.kill_all(&format!("PE {r} called shmem_global_exit({s})"));
            }
        }
        let sig = caught.swap(0, Relaxed);
        if sig != 0 {
            let s = sig as i32;
            crate::diag!("gdarun: got signal {s}: forwarding it to the PEs");
            if let Some(rs) = rustix::process::Signal::from_named_raw(s) {
                pes.signal(rs);
            }
            interrupted.get_or_insert((s, Instant::now()));
        }
        let since = match (interrupted, pes.failed_at) {
            (Some((_, t)), _) | (None, Some(t)) => Some(t),
            (None, None) => None,
        };
        if !killed && since.is_some_and(|t| t.elapsed() > job.grace) {
            killed = true;
            let why = if interrupted.is_some() {
                format!("still running {:?} after the signal", job.grace)
            } else {
                format!("another PE failed {:?} ago", job.grace)
            };
            pes.kill_all(&why);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(JobOutcome {
        codes: pes.codes,
        first_failure: pes.first_failure,
        swept: gda_os::shm::sweep(id).unwrap_or(0),
        job: id.to_owned(),
        interrupted: interrupted.map(|(s, _)| s),
        global_exit: exits.first,
    })
}

/// What the PEs wrote on the global-exit pipe.
#[derive(Default)]
struct GlobalExits {
    pending: Vec<u8>,
    first: Option<(usize, i32)>,
}

impl GlobalExits {
    /// Reads what is there; the first well-formed report from a rank of the job, once.
    fn poll(&mut self, rd: &std::os::fd::OwnedFd, n: u32) -> Option<(usize, i32)> {
        let mut buf = [0u8; 256];
        while let Ok(k) = rustix::io::read(rd, &mut buf) {
            if k == 0 {
                break;
            }
            // A PE writes a short line; anything longer is not ours to keep.
            if self.pending.len() < 4096 {
                self.pending.extend_from_slice(&buf[..k]);
            }
        }
        let mut newest = None;
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            let mut it = text.split_whitespace();
            let parsed = (
                it.next().and_then(|r| r.parse::<u32>().ok()),
                it.next().and_then(|s| s.parse::<i32>().ok()),
            );
            if let (Some(r), Some(s)) = parsed {
                if r < n && self.first.is_none() {
                    self.first = Some((r as usize, s));
                    newest = self.first;
                }
            }
        }
        newest
    }
}

/// Ends this PE when the `gdarun` that started it is gone, however it died (`kill -9`
/// included), so no PE outlives its launcher as an orphan — also one a wrapper started
/// (`gdarun -n 2 unshare -p -f prog`, `sh -c`), which the launcher's death signal (set on its
/// direct children) does not reach.
///
/// The launcher holds the only read end of the global-exit pipe whose write end every PE
/// inherits (`GDA_SHMEM_EXIT_FD`), until it has reaped every PE; when it dies the kernel
/// closes it and the write end reports an error. A thread waits for that, then removes the
/// job's shared memory (the launcher can no longer) and ends this PE's process group (gdarun
/// makes each PE a group leader, so a wrapper's other children go too). A PE this process
/// started without gdarun (no variable, or one that names no pipe) is not watched. Once
/// watched, the death signal the launcher set on this process is cleared: this thread ends
/// the PE, after cleaning up, instead.
fn watch_launcher(job: &str, rank: u32) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    static WATCHING: std::sync::Once = std::sync::Once::new();
    let Some(path) = exit_pipe() else {
        return;
    };
    let job = job.to_string();
    WATCHING.call_once(move || {
        let gone = move || -> ! {
            crate::diag!(
                "gda shmem: PE {rank}: its launcher (gdarun) is gone; ending this PE and removing the job's shared memory"
            );
            let _ = gda_os::shm::sweep(&job);
            let _ = rustix::process::kill_current_process_group(rustix::process::Signal::KILL);
            // SAFETY: ends the process at once (no destructors racing the program's threads).
            unsafe { libc::_exit(129) }
        };
        // Reopened through /proc (a descriptor of our own, whatever the program does with the
        // inherited one); without a reader (the launcher already gone) that fails with ENXIO.
        let pipe = match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => gone(),
            Err(_) => return,
        };
        let spawned = std::thread::Builder::new()
            .name("gda-launcher-watch".into())
            .spawn(move || {
                loop {
                    let mut p = libc::pollfd {
                        fd: pipe.as_raw_fd(),
                        events: 0,
                        revents: 0,
                    };
                    // SAFETY: one pollfd of ours; no timeout (the thread only waits).
                    let n = unsafe { libc::poll(&mut p, 1, -1) };
                    if n > 0 && p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                        gone();
                    }
                    if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                        return;
                    }
                }
            });
        if spawned.is_ok() {
            let _ = rustix::process::set_parent_process_death_signal(None);
        }
    });
}

/// The `/proc/self/fd` path of the global-exit pipe gdarun handed this PE
/// (`GDA_SHMEM_EXIT_FD`), when the variable names a pipe this process holds: reopened through
/// it, no raw descriptor number is borrowed (it may not be open, or be some other file).
fn exit_pipe() -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    let fd = std::env::var("GDA_SHMEM_EXIT_FD")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())?;
    let path = format!("/proc/self/fd/{fd}");
    std::fs::metadata(&path)
        .is_ok_and(|m| m.file_type().is_fifo())
        .then_some(path)
}

/// Tells the launcher (`gdarun`, through `GDA_SHMEM_EXIT_FD`) that PE `rank` called
/// `shmem_global_exit(status)`, so it ends the other PEs now and exits with `status` (also 0).
/// Does nothing when the variable is unset (another launcher) or does not name a pipe this
/// process holds: a stray value must not make it write into some other file.
pub fn notify_global_exit(rank: u32, status: i32) {
    use std::io::Write;
    let Some(path) = exit_pipe() else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&path) {
        let _ = f.write_all(format!("{rank} {status}\n").as_bytes());
    }
}

/// For programs that launch themselves: if this process is not a PE yet (no launcher
/// variables), runs `n` copies of the current executable with the same arguments under
/// [`run`] and exits with the job's status; otherwise returns and the caller initialises.
pub fn relaunch_self(n: u32) -> Result<()> {
    if Launch::from_env()?.is_some() {
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| ShmemError::io("finding this program", e))?;
    let mut argv = vec![exe.to_string_lossy().into_owned()];
    argv.extend(std::env::args().skip(1));
    let timeout = Config::from_env()?.timeout;
    let out = run(&Job {
        n,
        argv,
        job: None,
        hosts: None,
        grace: timeout + Duration::from_secs(5),
        env: Vec::new(),
        bind: Bind::Auto,
        report_bindings: false,
    })?;
    std::process::exit(out.exit_code());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gdarun's local ranks: one host, or PEs round-robin over simulated hosts (5 PEs on 2
    /// hosts: PEs 0, 2, 4 on host 0, PEs 1, 3 on host 1).
    #[test]
    fn local_ranks_follow_the_simulated_hosts() {
        let one: Vec<_> = (0..3).map(|r| local_rank(r, 3, None)).collect();
        assert_eq!(one, [(0, 3), (1, 3), (2, 3)]);
        let two: Vec<_> = (0..5).map(|r| local_rank(r, 5, Some(2))).collect();
        assert_eq!(two, [(0, 3), (0, 2), (1, 3), (1, 2), (2, 3)]);
    }

    #[test]
    fn binding_places_pes_on_the_allowed_cpus() {
        let cpus = [2, 3, 5];
        assert_eq!(
            placement(Bind::Auto, 2, &cpus, false).unwrap(),
            Some(vec![2, 3])
        );
        // Issue 24: a job whose PEs run software-NIC engines is not bound under `auto`;
        // `core` binds it all the same (the engines stay free, see `pe_placement`).
        assert_eq!(placement(Bind::Auto, 2, &cpus, true).unwrap(), None);
        assert_eq!(
            placement(Bind::Core, 2, &cpus, true).unwrap(),
            Some(vec![2, 3])
        );
        assert_eq!(
            placement(Bind::Core, 3, &cpus, false).unwrap(),
            Some(vec![2, 3, 5])
        );
        // More PEs than CPUs: auto leaves them unbound, core is an error naming both counts.
        assert_eq!(placement(Bind::Auto, 4, &cpus, false).unwrap(), None);
        let e = placement(Bind::Core, 4, &cpus, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("4 PEs but only 3 CPUs"), "{e}");
        assert_eq!(placement(Bind::None, 1, &cpus, false).unwrap(), None);
        assert_eq!("core".parse::<Bind>(), Ok(Bind::Core));
        assert!(
            "socket"
                .parse::<Bind>()
                .unwrap_err()
                .contains("auto, core or none")
        );
        // This process may run somewhere.
        assert!(!allowed_cpus().unwrap().is_empty());
    }

    #[test]
    fn a_pe_that_runs_an_engine_never_shares_one_core_with_it() {
        // Issue 24: pinned with its PE, the engine only ran when the spinning PE was
        // preempted (10x slower RDMA). Whatever the binding, the engine keeps every launcher
        // CPU; under `auto` a PE with an engine is unbound as well, a P2P-only PE stays put.
        let cpus = [0, 1, 4, 5];
        for bind in [Bind::Auto, Bind::Core, Bind::None] {
            for engine in [false, true] {
                let p = pe_placement(bind, 4, &cpus, engine);
                assert_eq!(p.engine_cpus, cpus, "{bind:?} engine={engine}");
                if engine {
                    assert_ne!(p.engine_cpus, p.pe_cpus[..1], "{bind:?}: engine confined");
                }
            }
        }
        assert_eq!(pe_placement(Bind::Auto, 4, &cpus, true).pe_cpus, cpus);
        assert_eq!(pe_placement(Bind::Auto, 4, &cpus, false).pe_cpus, [4]);
        assert_eq!(pe_placement(Bind::Core, 4, &cpus, true).pe_cpus, [4]);
        assert_eq!(pe_placement(Bind::Core, 4, &cpus, false).pe_cpus, [4]);
        // One CPU: nowhere else to go, and nothing breaks.
        assert_eq!(pe_placement(Bind::Auto, 0, &[0], true).engine_cpus, [0]);
    }

    #[test]
    fn a_job_that_runs_engines_is_told_from_its_configuration() {
        let job = |env: &[(&str, &str)], hosts: Option<u32>, n: u32| Job {
            n,
            argv: vec!["x".into()],
            job: None,
            hosts,
            grace: Duration::from_secs(1),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            bind: Bind::Auto,
            report_bindings: false,
        };
        let t = |v| [("GDA_SHMEM_TRANSPORT", v)];
        assert!(job_runs_engines(&job(&t("rdma"), None, 2)).unwrap());
        assert!(job_runs_engines(&job(&t("auto"), Some(2), 4)).unwrap());
        assert!(!job_runs_engines(&job(&t("auto"), Some(1), 4)).unwrap());
        assert!(!job_runs_engines(&job(&t("p2p"), Some(2), 4)).unwrap());
        assert!(
            !job_runs_engines(&job(&t("rdma"), None, 1)).unwrap(),
            "one PE: no peers"
        );
        assert!(job_runs_engines(&job(&t("warp"), None, 2)).is_err());
    }

    #[test]
    fn cpu_lists_read_and_write_the_kernel_form() {
        for (text, cpus) in [
            ("0", vec![0]),
            ("0-3", vec![0, 1, 2, 3]),
            ("0-1,4,6-7", vec![0, 1, 4, 6, 7]),
        ] {
            assert_eq!(parse_cpu_list("V", text).unwrap(), cpus);
            assert_eq!(gda_os::cpu::format_list(&cpus), text);
        }
        // Unsorted, repeated, spaced: read as a set.
        assert_eq!(parse_cpu_list("V", " 3,1-2,2 ").unwrap(), [1, 2, 3]);
        for (bad, why) in [
            ("", "is not a CPU number"),
            ("x", "is not a CPU number"),
            ("3-1", "runs backwards"),
            ("0-99999999", "is not below"),
            ("-1", "is not a CPU number"),
        ] {
            let e = parse_cpu_list("GDA_SHMEM_CPUS", bad)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("GDA_SHMEM_CPUS") && e.contains(why),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn a_bound_pe_runs_on_its_cpu() {
        // One PE bound to the first CPU this process may use: the child reads its own mask.
        let first = allowed_cpus().unwrap()[0];
        let out = run(&Job {
            n: 1,
            argv: [
                "sh",
                "-c",
                "grep -q \"^Cpus_allowed_list:[[:space:]]*$0$\" /proc/self/status",
            ]
            .iter()
            .map(ToString::to_string)
            .chain([first.to_string()])
            .collect(),
            job: None,
            hosts: None,
            grace: Duration::from_secs(5),
            env: Vec::new(),
            bind: Bind::Core,
            report_bindings: false,
        })
        .unwrap();
        assert_eq!(out.exit_code(), 0, "PE 0 is not bound to CPU {first} alone");
    }
}
