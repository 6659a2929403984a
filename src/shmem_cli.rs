//! `gda shmem`: the SHMEM layer's end-to-end check and benchmarks, run as PEs under a launcher
//! (`gdarun`, `mpirun`, `srun`, `torchrun`) or launching themselves with `--pes N`.

use std::time::Instant;

use gda_shmem::{Pe, Result, ShmemError, launch};

use crate::provider::{Dispatch, ProviderName};

/// Runs `f` on this process's PE for the chosen provider.
pub fn with_pe<R>(p: ProviderName, f: impl FnOnce(&dyn PeOps) -> Result<R>) -> Result<R> {
    p.run(WithPe(f, std::marker::PhantomData))
}

/// [`with_pe`] for the provider chosen at run time.
struct WithPe<F, R>(F, std::marker::PhantomData<fn() -> R>);

impl<R, F: FnOnce(&dyn PeOps) -> Result<R>> Dispatch for WithPe<F, R> {
    type Output = Result<R>;
    fn run<P: gda_sim::Modeled>(self) -> Result<R> {
        run_on(&launch::init_from_env::<P>()?, self.0)
    }
}

/// Where the PEs' RDMA routes go: the software NIC in this process (`sim`, the default), or
/// NICs through rdma-core (`verbs`: real ConnectX NICs, or the verbs-compatible library).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// The software NIC (`gda_sim`), one fabric per job.
    Sim,
    /// rdma-core loaded at run time (`GDA_IBVERBS_LIB`), ConnectX devices through
    /// `gda_mlx5::host`; `GDA_SHMEM_DEVICE` names one (default: the nearest by topology).
    Verbs,
}

impl Domain {
    /// `GDA_SHMEM_DOMAIN` (`sim` when unset).
    pub fn from_env() -> Result<Self> {
        match std::env::var("GDA_SHMEM_DOMAIN")
            .ok()
            .as_deref()
            .map(str::trim)
        {
            None | Some("") | Some("sim") => Ok(Self::Sim),
            Some("verbs") => Ok(Self::Verbs),
            Some(other) => Err(ShmemError::Config(format!(
                "GDA_SHMEM_DOMAIN={other:?}: expected sim or verbs"
            ))),
        }
    }
}

/// Runs `f` on this process's PE with its RDMA routes on a NIC through rdma-core, with the
/// control path of the provider the vendor table names for it. `GDA_SHMEM_DEVICE` names it
/// (default: the NIC the topology gives this PE's local rank: `nearest_device`).
#[cfg(feature = "verbs")]
pub fn with_verbs_pe<R>(f: impl FnOnce(&dyn PeOps) -> Result<R>) -> Result<R> {
    struct On<F>(F, Option<u8>);
    impl<R, F: FnOnce(&dyn PeOps) -> Result<R>> gda_providers::host::OnDevice for On<F> {
        type Output = Result<R>;
        fn run<D>(self, d: D) -> Result<R>
        where
            D: gda_hal::control::Device + Send + Sync + 'static,
            D::Provider: gda_rdma::Host,
        {
            verbs_pe_on(d, self.1, self.0)
        }
    }
    let named = std::env::var("GDA_SHMEM_DEVICE")
        .ok()
        .filter(|s| !s.is_empty());
    let (name, port) = match named {
        Some(n) => (Some(n), None),
        None => match gda_shmem::boot::env::Launch::from_env()? {
            Some(launch) => {
                let (n, p) = nearest_device(&launch)?;
                (Some(n), p)
            }
            None => (None, None),
        },
    };
    crate::devices::open_rdma(name.as_deref(), On(f, port))
        .map_err(|e| ShmemError::Config(format!("verbs domain (GDA_SHMEM_DEVICE): {e}")))?
}

/// The RDMA device this PE takes when `GDA_SHMEM_DEVICE` names none: the first rail
/// `gda_topo::select` gives its local rank, over the devices rdma-core lists that the
/// topology (hwloc) shows — nearest to the PE's GPU, balanced over the node's PEs, with
/// `GDA_RDMA_DEVICES`, `GDA_NIC_MAP` and `GDA_RAILS` applied. Without hwloc, or when hwloc
/// shows none of rdma-core's devices, round-robin over rdma-core's devices by local rank.
/// With `GDA_SHMEM_REPORT_BINDINGS=1` the PE says what it took.
#[cfg(feature = "verbs")]
fn nearest_device(launch: &gda_shmem::boot::env::Launch) -> Result<(String, Option<u8>)> {
    let listed = crate::devices::list();
    if let Err(e) = &listed.library {
        return Err(ShmemError::Config(format!("verbs domain: {e}")));
    }
    if let Some(e) = &listed.discover_error {
        return Err(ShmemError::Config(format!("verbs domain: {e}")));
    }
    // The devices gda can drive (a provider in the vendor table), as rdma-core names them.
    let names: Vec<String> = listed
        .devices
        .iter()
        .filter(|d| gda_providers::HOST_NAMES.contains(&d.provider))
        .map(|d| d.name.clone())
        .collect();
    if names.is_empty() {
        return Err(ShmemError::Config(format!(
            "verbs domain: rdma-core lists no {} device (gda devices shows what it sees)",
            gda_providers::HOST_NAMES.join(" or ")
        )));
    }
    let (node, how) = match gda_topo::discover(&gda_topo::Source::Host) {
        Ok(mut node) => {
            node.nics.retain(|n| names.contains(&n.name));
            let placed = node.nics.len();
            // Devices hwloc does not show stay usable, with no locality.
            node.add_unplaced(&names);
            let how = if placed == 0 {
                "round-robin: the topology shows none of rdma-core's devices"
            } else {
                "nearest by topology"
            };
            (node, how.to_string())
        }
        Err(e) => (gda_topo::Node::flat(&names), format!("round-robin: {e}")),
    };
    let mut req = gda_topo::request_from_env(launch.local_size as usize)
        .map_err(|e| ShmemError::Config(e.to_string()))?;
    // The GPU runtime's order (what a GPU heap's `local rank mod GPUs` indexes, after
    // CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES), when the topology shows every GPU it sees.
    let mut how = how;
    if let Ok(gpus) = crate::gpus::list().gpus {
        let order: Vec<gda_topo::PciAddr> = gpus
            .iter()
            .filter_map(|(_, _, pci)| pci.parse().ok())
            .collect();
        if !order.is_empty() && order.len() == gpus.len() {
            if order.iter().all(|a| node.gpus.iter().any(|g| g.addr == *a)) {
                req.gpu_order = Some(order);
                how.push_str(", GPUs in the runtime's order");
            } else {
                how.push_str(", GPUs in PCI order (the runtime's are not all in the topology)");
            }
        }
    }
    let all = gda_topo::select(&node, &req).map_err(|e| ShmemError::Config(e.to_string()))?;
    let me = all
        .get(launch.local_rank as usize)
        .filter(|b| !b.rails.is_empty())
        .ok_or_else(|| ShmemError::Config("verbs domain: no RDMA device to use".into()))?;
    if std::env::var("GDA_SHMEM_REPORT_BINDINGS").as_deref() == Ok("1") {
        let rails: Vec<String> = me
            .rails
            .iter()
            .map(|r| format!("{} ({})", r.nic, r.path))
            .collect();
        gda_shmem::diag!(
            "gda shmem: PE {} bindings: local rank {}; gpu {}; nics {}; near cpus {} ({how})",
            launch.rank,
            launch.local_rank,
            me.gpu.map_or_else(|| "none".to_string(), |g| g.to_string()),
            rails.join(", "),
            if me.cpus.is_empty() {
                "unknown".to_string()
            } else {
                gda_os::cpu::format_list(&me.cpus)
            }
        );
    }
    Ok((me.rails[0].nic.clone(), me.rails[0].port))
}

#[cfg(feature = "verbs")]
fn verbs_pe_on<D, R>(dev: D, port: Option<u8>, f: impl FnOnce(&dyn PeOps) -> Result<R>) -> Result<R>
where
    D: gda_hal::control::Device + 'static,
{
    let launch = gda_shmem::boot::env::Launch::from_env()?.ok_or_else(|| {
        ShmemError::Config("not started by a launcher (gdarun, mpirun, srun, torchrun)".into())
    })?;
    let cfg = gda_shmem::Config::from_env()?;
    // A GPU heap gets its QPs' rings and doorbell records in GPU memory too (`Pe::init`
    // places the queues of a GPU heap's PE there).
    let mut nic = gda_shmem::RdmaNic::new(dev);
    // The port the device list or map named (`mlx5_0:2`); else the first active one.
    nic.path.port = port;
    // GDA_IB_GID_INDEX: the source GID (default: RoCE v2, IPv4-mapped, never link-local).
    if let Some(v) = std::env::var("GDA_IB_GID_INDEX")
        .ok()
        .filter(|v| !v.is_empty())
    {
        let i = v.trim().parse::<u32>().map_err(|_| {
            ShmemError::Config(format!("GDA_IB_GID_INDEX={v:?} is not a GID index"))
        })?;
        nic.path.gid_index = Some(i);
    }
    let pe = launch::init_launched_with(&launch, &cfg, nic)?;
    run_on(&pe, f)
}

/// Without the `verbs` feature the verbs domain is a clear error.
#[cfg(not(feature = "verbs"))]
pub fn with_verbs_pe<R>(_f: impl FnOnce(&dyn PeOps) -> Result<R>) -> Result<R> {
    Err(ShmemError::Config(
        "GDA_SHMEM_DOMAIN=verbs needs a gda built with the `verbs` feature \
         (cargo build --release --features verbs)"
            .into(),
    ))
}

fn run_on<P: gda_hal::Provider, R>(
    pe: &Pe<P>,
    f: impl FnOnce(&dyn PeOps) -> Result<R>,
) -> Result<R> {
    let out = f(pe);
    if let Err(e) = &out {
        pe.abort(&e.to_string());
    }
    out
}

/// What the CLI needs of a PE: gda-shmem's provider-erased PE ([`gda_shmem::erased::DynPe`],
/// the one the C ABI uses too) plus the CLI's benchmark, whose figures come from code
/// monomorphised per provider.
pub trait PeOps: gda_shmem::erased::DynPe {
    /// The benchmarks; PE 0 returns the figures.
    fn perf(&self, iters: u64) -> Result<Vec<serde_json::Value>>;
    /// The 8-byte message rates alone, measured [`RATE_RUNS`] times each; PE 0 returns them.
    fn rates(&self, iters: u64) -> Result<Vec<serde_json::Value>>;
    /// The routes to the other PEs (for the report): `P2p`, `Rdma`, or both joined by `+`;
    /// `Local` only for a PE alone (the route to itself is no transport to report).
    fn transport(&self) -> String {
        let me = self.me();
        let mut kinds: Vec<String> = (0..self.n())
            .filter(|&j| j != me)
            .filter_map(|j| self.transport_to(j).ok())
            .map(|t| format!("{t:?}"))
            .collect();
        kinds.sort();
        kinds.dedup();
        if kinds.is_empty() {
            "Local".into()
        } else {
            kinds.join("+")
        }
    }
}

impl<P: gda_hal::Provider> PeOps for Pe<P> {
    fn perf(&self, iters: u64) -> Result<Vec<serde_json::Value>> {
        perf(self, iters)
    }
    fn rates(&self, iters: u64) -> Result<Vec<serde_json::Value>> {
        rates(self, iters)
    }
}

/// `n` 8-byte `put_nbi`s to PE 1, back to back, then a quiet: millions per second.
fn put8_rate<P: gda_hal::Provider>(pe: &Pe<P>, words: gda_shmem::Sym<u64>, n: u64) -> Result<f64> {
    let t = Instant::now();
    for i in 0..n {
        pe.put_nbi(words, (i % 1024) as usize, &[7u64], 1)?;
    }
    pe.quiet()?;
    Ok(n as f64 / t.elapsed().as_secs_f64() / 1e6)
}

/// `n` 64-bit atomic adds on PE 1, back to back, then a quiet: millions per second.
fn atomic_add64_rate<P: gda_hal::Provider>(
    pe: &Pe<P>,
    words: gda_shmem::Sym<u64>,
    n: u64,
) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..n {
        pe.atomic_add(words, 0, 1u64, 1)?;
    }
    pe.quiet()?;
    Ok(n as f64 / t.elapsed().as_secs_f64() / 1e6)
}

/// Runs of each rate in `gda shmem rates`.
pub const RATE_RUNS: usize = 5;

/// `gda shmem rates`: PE 0 posts `iters` 8-byte `put_nbi`s to PE 1 and quiets, [`RATE_RUNS`]
/// times, then as many 64-bit atomic adds; one row per run (the rates of `perf` alone, in runs
/// long enough to be steady on a noisy host). The other PEs wait in the barrier meanwhile.
fn rates<P: gda_hal::Provider>(pe: &Pe<P>, iters: u64) -> Result<Vec<serde_json::Value>> {
    use serde_json::json;
    if pe.n_pes() < 2 {
        return Err(ShmemError::Config(
            "gda shmem rates needs at least 2 PEs".into(),
        ));
    }
    let transport = format!("{:?}", pe.transport_to(1)?);
    let word = pe.calloc::<u64>(1024)?;
    pe.barrier_all()?;
    let mut out = Vec::new();
    if pe.my_pe() == 0 {
        type Rate<P> = fn(&Pe<P>, gda_shmem::Sym<u64>, u64) -> Result<f64>;
        let tests: [(&str, Rate<P>); 2] = [
            ("put8_rate", put8_rate),
            ("atomic_add64_rate", atomic_add64_rate),
        ];
        for (test, rate) in tests {
            for run in 0..RATE_RUNS {
                let mops = rate(pe, word, iters)?;
                out.push(json!({"test": test, "transport": transport, "run": run, "iters": iters, "mops": mops}));
            }
        }
    }
    pe.barrier_all()?;
    Ok(out)
}

fn memcpy_gbs(bytes: usize, iters: u64) -> f64 {
    let a = vec![1u8; bytes];
    let mut b = vec![0u8; bytes];
    let t = Instant::now();
    for i in 0..iters {
        // The source through `black_box` too: a compiler that sees it is all ones (whole-program
        // optimisation does) turns the copy into a memset, which writes only and runs about
        // twice as fast, halving every ratio measured against it.
        b.copy_from_slice(std::hint::black_box(&a));
        std::hint::black_box(&mut b);
        b[0] = i as u8;
    }
    bytes as f64 * iters as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// Message sizes of `gda shmem perf`'s sweep.
const SWEEP: [usize; 7] = [8, 64, 512, 4096, 32768, 262_144, 1 << 20];

/// The rows of `gda shmem perf` as aligned tables: the fixed benchmarks (one line each), then
/// the sweep over message sizes.
#[must_use]
pub fn perf_table(rows: &[serde_json::Value]) -> String {
    use std::fmt::Write;
    let f = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_f64);
    let mut t = String::new();
    let line = "-".repeat(78);
    // Which transport the rows measured (every row carries it).
    let over = rows
        .iter()
        .find_map(|r| r.get("transport").and_then(serde_json::Value::as_str))
        .unwrap_or("?");
    let _ = writeln!(
        t,
        "{line}\n gda shmem perf: PE 0 to PE 1 over {over}\n{line}\n {:<20} {:>10} {:>12}  {:<26}\n{line}",
        "test", "iters", "value", "unit"
    );
    for r in rows.iter().filter(|r| r["test"] != "size_sweep") {
        let test = r["test"].as_str().unwrap_or("?");
        let (value, unit) = match test {
            "put8_blocking" => (f(r, "us_per_put"), "µs per put"),
            "put8_quiet" | "device_put8_quiet" => (f(r, "us_mean"), "µs per put + quiet (mean)"),
            "put1m_bw" => (f(r, "gb_s"), "GB/s"),
            "barrier_all" => (f(r, "us"), "µs per barrier"),
            _ => (f(r, "mops"), "million per s"),
        };
        let _ = writeln!(
            t,
            " {:<20} {:>10} {:>12.4}  {:<26}",
            test,
            r["iters"].as_u64().unwrap_or(0),
            value.unwrap_or(f64::NAN),
            unit
        );
    }
    let sweep: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["test"] == "size_sweep").collect();
    if !sweep.is_empty() {
        let _ = writeln!(
            t,
            "{line}\n {:<10} {:>10} {:>10} {:>14} {:>15} {:>12}\n{line}",
            "#bytes", "iters", "BW[GB/s]", "rate[Mmsg/s]", "put+quiet[us]", "get[us]"
        );
        for r in sweep {
            let _ = writeln!(
                t,
                " {:<10} {:>10} {:>10.3} {:>14.3} {:>15.3} {:>12.3}",
                r["bytes"].as_u64().unwrap_or(0),
                r["iters"].as_u64().unwrap_or(0),
                f(r, "gb_s").unwrap_or(f64::NAN),
                f(r, "mops").unwrap_or(f64::NAN),
                f(r, "put_quiet_us").unwrap_or(f64::NAN),
                f(r, "get_us").unwrap_or(f64::NAN)
            );
        }
    }
    let _ = writeln!(t, "{line}");
    t
}

/// The charts of `gda shmem perf --plot`, from the sweep rows.
#[must_use]
pub fn perf_panels(rows: &[serde_json::Value]) -> Vec<crate::plot::Panel> {
    use crate::plot::{Panel, Series};
    let sweep: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["test"] == "size_sweep").collect();
    let series = |name: &str, k: &str| Series {
        name: name.to_owned(),
        points: sweep
            .iter()
            .filter_map(|r| Some((r["bytes"].as_f64()?, r[k].as_f64()?)))
            .collect(),
    };
    vec![
        Panel {
            title: "put bandwidth".into(),
            y_label: "GB/s".into(),
            log_y: true,
            series: vec![series("put", "gb_s")],
        },
        Panel {
            title: "put message rate".into(),
            y_label: "million messages/s".into(),
            log_y: true,
            series: vec![series("put", "mops")],
        },
        Panel {
            title: "latency".into(),
            y_label: "µs".into(),
            log_y: true,
            series: vec![
                series("put + quiet", "put_quiet_us"),
                series("get", "get_us"),
            ],
        },
    ]
}

/// PE 0 measures against PE 1; every PE joins the barrier timing.
/// The same 8-byte put rate and put + quiet latency, posted through the SHMEM device API's
/// header (compiled for the host, called from this thread) on the queues the Rust rows used.
#[cfg(feature = "device")]
fn device_rows<P: gda_hal::Provider>(
    pe: &Pe<P>,
    small: gda_shmem::Sym<u64>,
    transport: &str,
    k: u64,
    kq: u64,
    out: &mut Vec<serde_json::Value>,
) -> Result<()> {
    use serde_json::json;
    let ctx = std::ptr::from_ref(pe.device_context()?).cast::<u8>();
    let dst = pe.local_ptr(small)?;
    let bad = |what: &str, s: gda_device::shmem::Status| {
        ShmemError::Invalid(format!("device API {what}: {s}"))
    };
    // SAFETY: the context is this PE's, used by this thread only; `small` holds 1024 u64s.
    let secs =
        unsafe { gda_device::shmem::put8_rate(ctx, dst, 1, k) }.map_err(|s| bad("put", s))?;
    out.push(json!({"test": "device_put8_rate", "transport": transport, "iters": k, "mops": k as f64 / secs / 1e6}));
    // SAFETY: as above.
    let mut lat = unsafe { gda_device::shmem::put8_quiet(ctx, dst, 1, kq) }
        .map_err(|s| bad("put + quiet", s))?;
    lat.sort_by(f64::total_cmp);
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
    out.push(json!({"test": "device_put8_quiet", "transport": transport, "iters": kq, "us_mean": mean, "us_p50": lat[lat.len() / 2], "us_p99": lat[lat.len() * 99 / 100]}));
    Ok(())
}

fn perf<P: gda_hal::Provider>(pe: &Pe<P>, iters: u64) -> Result<Vec<serde_json::Value>> {
    use serde_json::json;
    let (me, n) = (pe.my_pe(), pe.n_pes());
    if n < 2 {
        return Err(ShmemError::Config(
            "gda shmem perf needs at least 2 PEs".into(),
        ));
    }
    let transport = format!("{:?}", pe.transport_to(1)?);
    let small = pe.calloc::<u64>(1024)?;
    let big = pe.calloc::<u8>(1 << 20)?;
    let mut out = Vec::new();
    let rdma = transport == "Rdma";
    if me == 0 {
        let v = [7u64];
        // Blocking 8-byte put: P2P returns when stored; RDMA when the source is reusable.
        let k = if rdma { iters / 20 } else { iters };
        let t = Instant::now();
        for i in 0..k {
            pe.put(small, (i % 1024) as usize, &v, 1)?;
        }
        pe.quiet()?;
        let put_us = t.elapsed().as_secs_f64() * 1e6 / k as f64;
        out.push(json!({"test": "put8_blocking", "transport": transport, "iters": k, "us_per_put": put_us, "mops": 1.0 / put_us}));
        // Non-blocking puts back to back (message rate).
        let mops = put8_rate(pe, small, k)?;
        out.push(json!({"test": "put8_rate", "transport": transport, "iters": k, "mops": mops}));
        // 8-byte put + quiet: the round trip of a put's completion.
        let kq = if rdma {
            (iters / 100).max(1000)
        } else {
            iters / 10
        };
        let mut lat = Vec::with_capacity(kq as usize);
        for i in 0..kq {
            let t = Instant::now();
            pe.put(small, (i % 1024) as usize, &v, 1)?;
            pe.quiet()?;
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
        lat.sort_by(f64::total_cmp);
        let mean = lat.iter().sum::<f64>() / lat.len() as f64;
        out.push(json!({"test": "put8_quiet", "transport": transport, "iters": kq, "us_mean": mean, "us_p50": lat[lat.len() / 2], "us_p99": lat[lat.len() * 99 / 100]}));
        #[cfg(feature = "device")]
        device_rows(pe, small, &transport, k, kq, &mut out)?;
        // Atomic adds.
        let mops = atomic_add64_rate(pe, small, k)?;
        out.push(
            json!({"test": "atomic_add64_rate", "transport": transport, "iters": k, "mops": mops}),
        );
        // 1 MiB puts vs memcpy in the same run.
        let data = vec![3u8; 1 << 20];
        let kb = if rdma { 200 } else { 1000 };
        let t = Instant::now();
        for _ in 0..kb {
            pe.put(big, 0, &data, 1)?;
        }
        pe.quiet()?;
        let gbs = (1u64 << 20) as f64 * kb as f64 / t.elapsed().as_secs_f64() / 1e9;
        let mc = memcpy_gbs(1 << 20, kb);
        out.push(json!({"test": "put1m_bw", "transport": transport, "iters": kb, "gb_s": gbs, "memcpy_gb_s": mc, "ratio": gbs / mc}));
        // Over message sizes: put bandwidth and message rate (back to back, one quiet), put +
        // quiet latency, blocking get latency. About 64 MiB moved per size (fewer over RDMA).
        let budget: usize = if rdma { 8 << 20 } else { 64 << 20 };
        for size in SWEEP {
            let src = vec![5u8; size];
            let k = (budget / size).clamp(50, iters as usize) as u64;
            let t = Instant::now();
            for _ in 0..k {
                pe.put_nbi(big, 0, &src, 1)?;
            }
            pe.quiet()?;
            let s = t.elapsed().as_secs_f64();
            let kl = (k / 4).max(20);
            let t = Instant::now();
            for _ in 0..kl {
                pe.put(big, 0, &src, 1)?;
                pe.quiet()?;
            }
            let put_us = t.elapsed().as_secs_f64() * 1e6 / kl as f64;
            let mut dst = vec![0u8; size];
            let t = Instant::now();
            for _ in 0..kl {
                pe.get(&mut dst, big, 0, 1)?;
            }
            let get_us = t.elapsed().as_secs_f64() * 1e6 / kl as f64;
            out.push(
                json!({"test": "size_sweep", "transport": transport, "bytes": size, "iters": k,
                "gb_s": (size as f64 * k as f64) / s / 1e9, "mops": k as f64 / s / 1e6,
                "put_quiet_us": put_us, "get_us": get_us}),
            );
        }
    }
    pe.barrier_all()?;
    let kb = (iters / 1000).clamp(100, 20_000);
    let t = Instant::now();
    for _ in 0..kb {
        pe.barrier_all()?;
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / kb as f64;
    if me == 0 {
        out.push(
            json!({"test": "barrier_all", "transport": transport, "pes": n, "iters": kb, "us": us}),
        );
    }
    pe.free(big)?;
    pe.free(small)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// The perf table says which transport its rows measured (issue 45: it did not).
    #[test]
    fn the_perf_table_names_its_transport() {
        let rows = [serde_json::json!({
            "test": "put8_rate", "transport": "Rdma", "iters": 1, "mops": 2.0
        })];
        let t = super::perf_table(&rows);
        assert!(t.contains("PE 0 to PE 1 over Rdma"), "{t}");
        assert!(t.contains("put8_rate"), "{t}");
    }
}
