//! `gda perf`: perftest-style runs on the software NIC (`ib_write_bw`/`ib_write_lat` in one).
//!
//! For each message size it measures, on a QP pair through the control-path seam (two software
//! NICs, `SimDevice`s of the chosen provider, or a NIC through rdma-core in loopback;
//! `device::run_on`):
//! bandwidth and message rate (`iterations` back-to-back posts through the multi-producer
//! posting protocol, one quiet at the end) and latency (post one signalled request, wait for its
//! CQE; p50 and p99 over the latency iterations). `memcpy` bandwidth for the same size is
//! measured in the same run, with the same iteration count and warm-up and a pre-faulted
//! destination, as the yardstick a software NIC is held to.
//!
//! Every size is measured `repeat` times (fresh QPs each time); the result holds the median of
//! each figure and its spread ((max − min) / median), so a run disturbed by CPU contention shows
//! itself instead of passing for a measurement.

use std::time::{Duration, Instant};

use gda_hal::{SendFlags, SendQueue, WorkRequest};
use gda_sim::{CqMode, Fabric, FabricConfig, Modeled};
use serde::Serialize;

use crate::provider::{Dispatch, ProviderName};

/// Which operation to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PerfOp {
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// 8-byte fetch-and-add.
    Atomic,
    /// SEND (the responder keeps receives posted).
    Send,
}

/// Run parameters.
#[derive(Clone, Debug)]
pub struct PerfConfig {
    /// Operation.
    pub op: PerfOp,
    /// Provider: its device functions post, its sim device model executes.
    pub provider: ProviderName,
    /// Message sizes in bytes.
    pub sizes: Vec<usize>,
    /// Bandwidth iterations per size (`None`: adaptive).
    pub iterations: Option<u64>,
    /// Latency iterations per size.
    pub lat_iterations: u64,
    /// Queue depth in WQEs (send-queue size).
    pub qd: u32,
    /// Completion-queue mode.
    pub cq: CqMode,
    /// Chaos seed.
    pub chaos: Option<u64>,
    /// Measurements per size (the median is reported, with the spread).
    pub repeat: u32,
    /// Run through rdma-core on this device (feature `verbs`; a ConnectX, or the
    /// verbs-compatible library's `gda_mlx5_N`) instead of the in-process software NIC.
    pub device: Option<String>,
}

pub mod device;

/// Largest message `gda perf` measures.
pub const MAX_SIZE: usize = 1 << 30;

impl PerfConfig {
    /// Checks every parameter (before anything is printed or measured).
    pub fn validate(&self) -> Result<(), PerfError> {
        let bad = |m: String| Err(PerfError::Invalid(m));
        if self.sizes.is_empty() {
            return bad("no message sizes".into());
        }
        if let Some(&s) = self.sizes.iter().find(|&&s| s == 0 || s > MAX_SIZE) {
            return bad(format!("message size {s} is not in 1..=1 GiB"));
        }
        if !self.qd.is_power_of_two() || self.qd > 4096 {
            return bad(format!(
                "--qd {} must be a power of two up to 4096",
                self.qd
            ));
        }
        if self.iterations == Some(0) || self.lat_iterations == 0 {
            return bad("iteration counts must be at least 1".into());
        }
        if self.iterations.is_some_and(|i| i > 1 << 32) || self.lat_iterations > 10_000_000 {
            return bad("iteration counts above 2^32 (bandwidth) or 10^7 (latency)".into());
        }
        if !(1..=100).contains(&self.repeat) {
            return bad(format!("--repeat {} is not in 1..=100", self.repeat));
        }
        Ok(())
    }
}

/// One result line.
#[derive(Clone, Debug, Serialize)]
pub struct PerfResult {
    /// Operation.
    pub op: PerfOp,
    /// Provider/model name.
    pub provider: &'static str,
    /// Message size.
    pub size: usize,
    /// Bandwidth iterations.
    pub iterations: u64,
    /// Bandwidth in GB/s (10^9 bytes).
    pub bw_gbps: f64,
    /// Messages per second, in millions.
    pub msg_rate_mps: f64,
    /// Median latency, µs.
    pub lat_us_p50: f64,
    /// 99th-percentile latency, µs.
    pub lat_us_p99: f64,
    /// `memcpy` bandwidth for this size in the same run (same iterations and warm-up,
    /// destination pre-faulted), GB/s.
    pub memcpy_gbps: f64,
    /// Measurements behind each median.
    pub repeat: u32,
    /// Spread of the message rate over the repeats: (max − min) / median.
    pub msg_rate_spread: f64,
    /// Spread of the p50 latency over the repeats.
    pub lat_p50_spread: f64,
    /// Spread of the memcpy bandwidth over the repeats.
    pub memcpy_spread: f64,
    /// Queue depth.
    pub qd: u32,
    /// CQ mode.
    pub cq: &'static str,
}

/// Errors of a perf run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// Bad parameters.
    #[error("{0}")]
    Invalid(String),
    /// The software NIC refused a setup step.
    #[error(transparent)]
    Sim(#[from] gda_sim::SimError),
    /// A device through rdma-core refused a setup step (`--device`).
    #[error("{0}")]
    Device(String),
    /// The data path failed.
    #[error(transparent)]
    Queue(#[from] gda_hal::SqError),
}

/// Adaptive iteration count: ~1 GiB or 2M messages per size, at least 200 (long enough that a
/// descheduled vCPU does not dominate).
pub fn default_iters(size: usize) -> u64 {
    ((1u64 << 30) / size.max(1) as u64).clamp(200, 2_000_000)
}

/// A run whose every argument was checked and whose device (`--device`) is open: what
/// [`prepare`] gives, so a caller prints nothing before every error that can come up front.
pub struct Prepared<'a> {
    cfg: &'a PerfConfig,
    #[cfg(feature = "verbs")]
    dev: Option<Box<dyn device::PerfDevice>>,
}

/// Checks `cfg` and opens its device, if any: every error a run can report before it measures.
pub fn prepare(cfg: &PerfConfig) -> Result<Prepared<'_>, PerfError> {
    cfg.validate()?;
    #[cfg(feature = "verbs")]
    let dev = match &cfg.device {
        Some(name) => Some(device::open(name)?),
        None => None,
    };
    #[cfg(not(feature = "verbs"))]
    if cfg.device.is_some() {
        return Err(PerfError::Invalid(
            "--device needs a gda built with the `verbs` feature (cargo build --release --features verbs)"
                .into(),
        ));
    }
    Ok(Prepared {
        cfg,
        #[cfg(feature = "verbs")]
        dev,
    })
}

/// Runs every size `cfg.repeat` times; `progress` is called after each size with the medians.
pub fn run(
    cfg: &PerfConfig,
    progress: impl FnMut(&PerfResult),
) -> Result<Vec<PerfResult>, PerfError> {
    prepare(cfg)?.run(progress)
}

impl Prepared<'_> {
    /// Runs every size `repeat` times; `progress` is called after each size with the medians.
    pub fn run(self, mut progress: impl FnMut(&PerfResult)) -> Result<Vec<PerfResult>, PerfError> {
        let cfg = self.cfg;
        #[cfg(feature = "verbs")]
        let dev = self.dev;
        let mut out = Vec::new();
        for &size in &cfg.sizes {
            let mut runs = Vec::with_capacity(cfg.repeat as usize);
            for _ in 0..cfg.repeat {
                #[cfg(feature = "verbs")]
                if let Some(d) = &dev {
                    runs.push(d.run_size(cfg, size)?);
                    continue;
                }
                runs.push(cfg.provider.run(RunSize(cfg, size))?);
            }
            let r = summarize(runs);
            progress(&r);
            out.push(r);
        }
        Ok(out)
    }
}

/// Median of each figure over the repeats, with spreads.
fn summarize(runs: Vec<PerfResult>) -> PerfResult {
    let stat = |f: &dyn Fn(&PerfResult) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        let med = v[v.len() / 2];
        let spread = if med > 0.0 {
            (v[v.len() - 1] - v[0]) / med
        } else {
            0.0
        };
        (med, spread)
    };
    let (bw, _) = stat(&|r| r.bw_gbps);
    let (rate, rate_spread) = stat(&|r| r.msg_rate_mps);
    let (p50, p50_spread) = stat(&|r| r.lat_us_p50);
    let (p99, _) = stat(&|r| r.lat_us_p99);
    let (mc, mc_spread) = stat(&|r| r.memcpy_gbps);
    let n = runs.len() as u32;
    let mut r = runs.into_iter().next().unwrap_or_else(|| unreachable!());
    r.bw_gbps = bw;
    r.msg_rate_mps = rate;
    r.lat_us_p50 = p50;
    r.lat_us_p99 = p99;
    r.memcpy_gbps = mc;
    r.repeat = n;
    r.msg_rate_spread = rate_spread;
    r.lat_p50_spread = p50_spread;
    r.memcpy_spread = mc_spread;
    r
}

/// memcpy bandwidth for `size`-byte copies, measured like the NIC: `warmup` copies, then
/// `iters` timed ones, into a destination whose pages are already faulted in.
fn memcpy_gbps(size: usize, warmup: u64, iters: u64) -> f64 {
    let size = size.max(8);
    let src = vec![0x5au8; size];
    // Written before timing: a fresh zeroed allocation is mapped lazily, and its page faults
    // would be timed as copy time.
    let mut dst = vec![0xa5u8; size];
    for _ in 0..warmup {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    let t = Instant::now();
    for _ in 0..iters {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    (iters * size as u64) as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// Posts before the timed part of each run (and copies before the memcpy yardstick's).
const WARMUP: u64 = 64;

/// [`run_size`] for the provider chosen at run time.
struct RunSize<'a>(&'a PerfConfig, usize);

impl Dispatch for RunSize<'_> {
    type Output = Result<PerfResult, PerfError>;
    fn run<P: Modeled>(self) -> Self::Output {
        run_size::<P>(self.0, self.1)
    }
}

fn run_size<P: Modeled>(cfg: &PerfConfig, size: usize) -> Result<PerfResult, PerfError> {
    // The software NIC through the same control-path seam as hardware (`device::run_on`).
    let fabric = Fabric::new(FabricConfig { chaos: cfg.chaos });
    let (a, b) = (
        gda_sim::SimDevice::<P>::new(&fabric),
        gda_sim::SimDevice::<P>::new(&fabric),
    );
    device::run_on(&a, &b, cfg, size, P::NAME, &|| fabric.kick())
}

/// The timed part of a run, on any queue: warm-up, bandwidth (`iters` posts, then quiet), and
/// latency (one signalled post and its completion at a time). `top_up` keeps receives posted
/// for SEND.
pub(crate) fn measure<P: gda_hal::Provider>(
    cfg: &PerfConfig,
    size: usize,
    wr: &WorkRequest<'_>,
    sq: &SendQueue<P>,
    provider: &'static str,
    top_up: &mut dyn FnMut(),
) -> Result<PerfResult, PerfError> {
    // Warm-up, then bandwidth.
    for _ in 0..WARMUP {
        top_up();
        sq.post(wr, SendFlags::empty())?;
    }
    sq.quiet()?;
    let iters = cfg.iterations.unwrap_or_else(|| default_iters(size));
    let t = Instant::now();
    for i in 0..iters {
        if cfg.op == PerfOp::Send && i % 256 == 0 {
            top_up();
        }
        sq.post(wr, SendFlags::empty())?;
    }
    sq.quiet()?;
    let secs = t.elapsed().as_secs_f64();
    // Latency: one request at a time, doorbell to CQE.
    let mut lat = Vec::with_capacity(cfg.lat_iterations as usize);
    for _ in 0..cfg.lat_iterations {
        top_up();
        let t = Instant::now();
        sq.post(wr, SendFlags::SIGNALED)?;
        sq.quiet()?;
        lat.push(t.elapsed());
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
            * 1e6
    };
    Ok(PerfResult {
        op: cfg.op,
        provider,
        size,
        iterations: iters,
        bw_gbps: (iters * size as u64) as f64 / secs / 1e9,
        msg_rate_mps: iters as f64 / secs / 1e6,
        lat_us_p50: pct(0.5),
        lat_us_p99: pct(0.99),
        memcpy_gbps: memcpy_gbps(size, WARMUP, iters),
        repeat: 1,
        msg_rate_spread: 0.0,
        lat_p50_spread: 0.0,
        memcpy_spread: 0.0,
        qd: cfg.qd,
        cq: if cfg.cq == CqMode::Collapsed {
            "collapsed"
        } else {
            "normal"
        },
    })
}

/// Measures an idle fabric's engine CPU share over `seconds`.
pub fn idle(seconds: f64) -> Result<f64, PerfError> {
    if !seconds.is_finite() || !(0.01..=3600.0).contains(&seconds) {
        return Err(PerfError::Invalid(format!(
            "{seconds} seconds: expected 0.01 to 3600"
        )));
    }
    use gda_hal::control::{CqAttr, Device, PathRequest, QpCaps};
    let fabric = Fabric::new(FabricConfig::default());
    // One QP connected to itself, made through the control path like any device's.
    let dev = gda_sim::SimDevice::<gda_native::Native>::new(&fabric);
    let path = dev.path(PathRequest::default())?;
    let pd = dev.alloc_pd()?;
    let cq = dev.create_cq(&CqAttr::new(64))?;
    let qp = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default())?;
    let me = qp.endpoint(&path);
    let _qp = qp.connect(&path, &me).map_err(|r| r.error)?;
    std::thread::sleep(Duration::from_millis(300));
    let c0 = fabric.engine_cpu_time().ok_or_else(|| {
        PerfError::Invalid("engine CPU time is not available on this platform".into())
    })?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let c1 = fabric.engine_cpu_time().unwrap_or(c0);
    Ok((c1 - c0).as_secs_f64() / t0.elapsed().as_secs_f64())
}

/// The charts of `gda perf --plot`: bandwidth (with `memcpy`'s), message rate, and p50/p99
/// latency over message size.
#[must_use]
pub fn panels(rows: &[PerfResult]) -> Vec<crate::plot::Panel> {
    use crate::plot::{Panel, Series};
    let series = |name: &str, f: &dyn Fn(&PerfResult) -> f64| Series {
        name: name.to_owned(),
        points: rows.iter().map(|r| (r.size as f64, f(r))).collect(),
    };
    vec![
        Panel {
            title: "bandwidth".into(),
            y_label: "GB/s".into(),
            log_y: true,
            series: vec![
                series("software NIC", &|r| r.bw_gbps),
                series("memcpy", &|r| r.memcpy_gbps),
            ],
        },
        Panel {
            title: "message rate".into(),
            y_label: "million messages/s".into(),
            log_y: true,
            series: vec![series("software NIC", &|r| r.msg_rate_mps)],
        },
        Panel {
            title: "latency".into(),
            y_label: "µs".into(),
            log_y: true,
            series: vec![
                series("p50", &|r| r.lat_us_p50),
                series("p99", &|r| r.lat_us_p99),
            ],
        },
    ]
}
