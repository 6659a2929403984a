//! The `gda` command-line tool.

use std::io::Read;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gda::wire::{self, Kind};

#[derive(Parser)]
#[command(
    name = "gda",
    version,
    about = "Device-initiated RDMA: inspect NIC formats and run the data path"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// See and check what the NIC gets: encode work requests, decode WQEs and CQEs.
    Wire {
        #[command(subcommand)]
        cmd: WireCmd,
    },
    /// perftest-style bandwidth, message-rate and latency runs on the software NIC.
    #[cfg(feature = "sim")]
    #[command(
        after_help = "EXAMPLES:\n  gda perf write --sizes 8,1048576\n  gda perf read --provider mlx5 --cq collapsed --json\n  gda perf idle --seconds 3"
    )]
    Perf(PerfArgs),
    /// The SHMEM layer across processes: `check` runs every routine, `perf` the benchmarks.
    #[cfg(feature = "sim")]
    #[command(
        after_help = "EXAMPLES:\n  gda shmem check --pes 4\n  gda shmem check --pes 4 --transport rdma --provider bnxt\n  gdarun -n 4 gda shmem check\n  gda shmem perf --pes 2 --transport p2p --json"
    )]
    Shmem(ShmemArgs),
    /// Chaos sweep: the conformance suite's chaos case and `gda shmem check` over N seeds on
    /// every NIC format; failing seeds are listed with the command that replays each.
    #[cfg(feature = "sim")]
    #[command(
        after_help = "EXAMPLES:\n  gda chaos --seeds 1000\n  gda chaos --from 4242 --seeds 1 --provider mlx5"
    )]
    Chaos(ChaosArgs),
    /// The software NIC's port state on this host, by device name: `down` takes a device's
    /// port down for every process of this user (it sends and answers nothing, its open
    /// contexts get IBV_EVENT_PORT_ERR), `up` brings it back; with no state, prints it; with
    /// no device, lists the ports that are down.
    #[cfg(feature = "sim")]
    #[command(
        after_help = "EXAMPLES:\n  gda port gda_mlx5_0 down\n  gda port gda_mlx5_0\n  gda port gda_mlx5_0 up\n  gda port\n\nThe state lives in $XDG_RUNTIME_DIR/gda/ports (else /tmp/gda-<uid>/ports), private to this user."
    )]
    Port {
        /// The device (`gda_mlx5_0`, `gda_bnxt_1`, …).
        device: Option<String>,
        /// `up` or `down`.
        #[arg(value_enum)]
        state: Option<PortState>,
    },
    /// The node as gda sees it (hwloc): GPUs, RDMA NICs, NUMA nodes, the PCIe path between
    /// each GPU and NIC as `nvidia-smi topo -m` prints it, and which GPU, NICs and CPUs each
    /// local rank takes.
    #[command(
        after_help = "EXAMPLES:\n  gda topo\n  gda topo --topology node.xml --ranks 8\n  gda topo --json --ranks 8\n  GDA_RAILS=2 gda topo\n\nENVIRONMENT:\n  HWLOC_XMLFILE     read this hwloc XML instead of the machine\n  GDA_HWLOC_LIB     path of libhwloc.so.15\n  GDA_RDMA_DEVICES  devices to use: a,b:port (only those) or ^a,b (all but those)\n  GDA_NIC_MAP       local rank -> NICs: 0=mlx5_0,1=mlx5_1+mlx5_2\n  GDA_RAILS         NICs per rank (default 1)"
    )]
    Topo {
        /// An hwloc XML file (`lstopo --of xml`) instead of this machine.
        #[arg(long)]
        topology: Option<std::path::PathBuf>,
        /// Local ranks to place (default: one per GPU, else one per NIC); with --json, one
        /// JSON object per line per rank.
        #[arg(long, value_parser = |s: &str| gda::cli::count_in(s, 1, 4096).map(|v| v as usize))]
        ranks: Option<usize>,
        /// NICs per rank (default GDA_RAILS, else 1).
        #[arg(long, value_parser = |s: &str| gda::cli::count_in(s, 1, 64).map(|v| v as usize))]
        rails: Option<usize>,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The NICs gda can drive: rdma-core's devices (real, or the verbs-compatible library's)
    /// with provider, ports, link layer, MTU, GIDs and limits, like `ibv_devinfo`, and the
    /// in-process software NIC.
    #[command(
        after_help = "EXAMPLES:\n  gda devices\n  gda devices --json\n  GDA_IBVERBS_LIB=target/release/verbs-sim/libibverbs.so.1 gda devices\n\nENVIRONMENT:\n  GDA_IBVERBS_LIB   path of libibverbs.so.1 (default: the loader's search path)\n  GDA_RDMA_DEVICES  comma-separated device names to keep"
    )]
    Devices {
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The AMD GPUs gda can put rings and buffers in (HIP loaded at run time; feature `hip`),
    /// or why there are none. Exit status 1 when there is no usable GPU.
    #[command(
        after_help = "EXAMPLES:\n  gda gpus\n  gda gpus --json\n\nENVIRONMENT:\n  GDA_HIP_LIB         path of libamdhip64.so (default: libamdhip64.so.5, .so.6, .so)\n  HIP_VISIBLE_DEVICES GPUs HIP may use"
    )]
    Gpus {
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Draws a comparison of benchmark results as an SVG: one chart per metric over message
    /// size, one line per implementation (the JSON `scripts/shmem-vs-openmpi.sh` writes).
    #[command(
        after_help = "EXAMPLES:\n  gda plot --compare results.json --out shmem-vs-openmpi.svg\n\nINPUT: a JSON array of {\"impl\", \"metric\", \"bytes\", \"value\", \"unit\"}"
    )]
    Plot {
        /// The results file.
        #[arg(long)]
        compare: std::path::PathBuf,
        /// The SVG to write.
        #[arg(long)]
        out: std::path::PathBuf,
        /// Title above the charts.
        #[arg(
            long,
            default_value = "gda vs Open MPI oshmem, 2 PEs on one host (P2P)"
        )]
        title: String,
    },
}

#[cfg(feature = "sim")]
#[derive(clap::Args)]
struct ChaosArgs {
    /// Number of seeds.
    #[arg(long, default_value_t = 100, value_parser = |s: &str| gda::cli::count_in(s, 1, 10_000_000))]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    from: u64,
    /// Only this provider (default: every provider built in).
    #[arg(long, value_enum)]
    provider: Option<gda::ProviderName>,
    /// Ordering-stress rounds of the SHMEM self-test per seed.
    #[arg(long, default_value_t = 8, value_parser = |s: &str| gda::cli::count_in(s, 1, 10_000).map(|v| v as usize))]
    rounds: usize,
}

#[cfg(feature = "sim")]
fn chaos(a: ChaosArgs) -> ExitCode {
    let Some(last) = a.from.checked_add(a.seeds - 1) else {
        gda::shmem::diag!(
            "gda chaos: --from {} + --seeds {} overflows",
            a.from,
            a.seeds
        );
        return ExitCode::from(2);
    };
    let providers: Vec<gda::ProviderName> = a
        .provider
        .map_or(gda::ProviderName::all().to_vec(), |p| vec![p]);
    let bar = indicatif::ProgressBar::new(a.seeds * providers.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} seeds [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let t = std::time::Instant::now();
    let mut failures = Vec::new();
    for seed in a.from..=last {
        for &p in &providers {
            let f = gda::chaos::seed(p, seed, a.rounds);
            for x in &f {
                bar.suspend(|| {
                    gda::shmem::diag!("FAIL seed {seed} {p} {}: {}", x.workload, x.error)
                });
            }
            failures.extend(f);
            bar.inc(1);
        }
        bar.set_message(format!("{} failed", failures.len()));
    }
    bar.finish_and_clear();
    let runs = a.seeds * providers.len() as u64;
    println!(
        "chaos sweep: seeds {}..={last} x {} provider(s) = {runs} runs (2 workloads each), {} failed, {:.1} s",
        a.from,
        providers.len(),
        failures.len(),
        t.elapsed().as_secs_f64()
    );
    for f in &failures {
        println!(
            "  seed {} {} {}: replay with: {}",
            f.seed,
            f.provider,
            f.workload,
            f.replay()
        );
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(feature = "sim")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ShmemWhat {
    /// Every routine, data checked, ordering guarantees tested.
    Check,
    /// Put latency and rate, atomics, 1 MiB bandwidth vs memcpy, barrier latency.
    Perf,
    /// The 8-byte put_nbi and atomic-add rates alone, five runs of --iters each.
    Rates,
}

#[cfg(feature = "sim")]
#[derive(clap::Args)]
struct ShmemArgs {
    /// What to run.
    #[arg(value_enum)]
    what: ShmemWhat,
    /// Start this many PEs (processes) here; without it, run as a PE of the launcher that
    /// started this process (gdarun, mpirun, srun, torchrun).
    #[arg(long, value_parser = gda::cli::pe_count)]
    pes: Option<u32>,
    /// GDA_SHMEM_TRANSPORT for the PEs started with --pes (auto, rdma, p2p).
    #[arg(long)]
    transport: Option<String>,
    /// Simulate this many hosts (PEs round-robin; same host: P2P, else RDMA).
    #[arg(long, value_parser = gda::cli::pe_count)]
    hosts: Option<u32>,
    /// Provider whose queue formats the RDMA routes use (the software NIC executes them).
    #[arg(long, value_enum, default_value = "native")]
    provider: gda::ProviderName,
    /// Where RDMA routes go: `sim` (the software NIC, default) or `verbs` (ConnectX NICs
    /// through rdma-core, or the verbs-compatible library); sets GDA_SHMEM_DOMAIN for the PEs.
    #[arg(long)]
    domain: Option<String>,
    /// Where the symmetric heap lives: `host` (shared memory, default) or `gpu` (GPU memory
    /// through HIP: the `hip` feature); sets GDA_SHMEM_HEAP for the PEs.
    #[arg(long)]
    heap: Option<String>,
    /// Placement of the PE processes (with --pes).
    #[command(flatten)]
    placement: gda::cli::Placement,
    /// Ordering stress rounds (check).
    #[arg(long, default_value_t = 64, value_parser = |s: &str| gda::cli::count_in(s, 1, 1_000_000).map(|v| v as usize))]
    rounds: usize,
    /// Iterations (perf).
    #[arg(long, default_value_t = 2_000_000, value_parser = |s: &str| gda::cli::count_in(s, 1, 1 << 32))]
    iters: u64,
    /// Fault injection (check): this PE aborts its process after init.
    #[arg(long)]
    crash_pe: Option<u32>,
    /// JSON lines instead of the tables (perf).
    #[arg(long)]
    json: bool,
    /// Also draw put bandwidth, message rate and put/get latency over message size into this
    /// SVG file (perf).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
}

#[cfg(feature = "sim")]
fn shmem(a: ShmemArgs) -> ExitCode {
    use gda::shmem::launch;
    if let Some(Err(e)) = a.plot.as_deref().map(gda::plot::check_writable) {
        gda::shmem::diag!("gda shmem: --plot: {e}");
        return ExitCode::from(2);
    }
    let launched = match gda::shmem::boot::env::Launch::from_env() {
        Ok(l) => l.is_some(),
        Err(e) => {
            gda::shmem::diag!("gda shmem: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Err(e)) = a
        .heap
        .as_deref()
        .map(str::parse::<gda::shmem::HeapPlacement>)
    {
        gda::shmem::diag!("gda shmem: {e}");
        return ExitCode::from(2);
    }
    if !launched {
        let Some(n) = a.pes else {
            gda::shmem::diag!(
                "gda shmem: not started by a launcher; give --pes N or run under gdarun -n N"
            );
            return ExitCode::from(2);
        };
        let mut argv: Vec<String> = std::env::args().collect();
        if let Ok(exe) = std::env::current_exe() {
            argv[0] = exe.to_string_lossy().into_owned();
        }
        let timeout = gda::shmem::Config::from_env()
            .map(|c| c.timeout)
            .unwrap_or_default();
        let job = launch::Job {
            n,
            argv,
            job: None,
            hosts: a.hosts,
            grace: timeout + std::time::Duration::from_secs(5),
            env: a
                .transport
                .iter()
                .map(|t| ("GDA_SHMEM_TRANSPORT".to_string(), t.clone()))
                .chain(
                    a.domain
                        .iter()
                        .map(|d| ("GDA_SHMEM_DOMAIN".to_string(), d.clone())),
                )
                .chain(
                    a.heap
                        .iter()
                        .map(|h| ("GDA_SHMEM_HEAP".to_string(), h.clone())),
                )
                .collect(),
            bind: a.placement.bind,
            report_bindings: a.placement.report_bindings,
        };
        return match launch::run(&job) {
            Ok(o) => ExitCode::from(o.exit_code().clamp(0, 255) as u8),
            Err(e) => {
                gda::shmem::diag!("gda shmem: {e}");
                ExitCode::from(1)
            }
        };
    }
    // A PE started by a launcher (`gdarun -n 4 gda shmem check --domain verbs`): its own
    // flags win over the variables it inherited, as they do for the PEs `--pes` starts.
    for (flag, var) in [
        (&a.transport, "GDA_SHMEM_TRANSPORT"),
        (&a.domain, "GDA_SHMEM_DOMAIN"),
        (&a.heap, "GDA_SHMEM_HEAP"),
    ] {
        if let Some(v) = flag {
            // SAFETY: single-threaded here: nothing has started a thread yet (the PE, its
            // rendezvous and its NIC start theirs below).
            unsafe { std::env::set_var(var, v) };
        }
    }
    let domain = match gda::shmem_cli::Domain::from_env() {
        Ok(d) => d,
        Err(e) => {
            gda::shmem::diag!("gda shmem: {e}");
            return ExitCode::from(2);
        }
    };
    let body = |pe: &dyn gda::shmem_cli::PeOps| -> gda::shmem::Result<()> {
        if a.crash_pe == Some(pe.me()) {
            gda::shmem::diag!("gda shmem: PE {} aborting on purpose (--crash-pe)", pe.me());
            std::process::abort();
        }
        match a.what {
            ShmemWhat::Check => {
                let t = std::time::Instant::now();
                let rep = pe.selftest(a.rounds)?;
                println!(
                    "PE {}/{}: ok, {} checks over {} (provider {}) in {:.2} s, {} heap",
                    pe.me(),
                    pe.n(),
                    rep.checks.len(),
                    pe.transport(),
                    if domain == gda::shmem_cli::Domain::Verbs {
                        format!("{} through rdma-core", pe.provider())
                    } else {
                        format!("{:?}", a.provider)
                    },
                    t.elapsed().as_secs_f64(),
                    pe.heap_placement()
                );
            }
            ShmemWhat::Rates => {
                for v in pe.rates(a.iters)? {
                    if a.json {
                        println!("{v}");
                    } else {
                        println!(
                            "{:<18} run {}  {:>8.2} M/s  ({} ops)",
                            v["test"].as_str().unwrap_or("?"),
                            v["run"],
                            v["mops"].as_f64().unwrap_or(f64::NAN),
                            v["iters"]
                        );
                    }
                }
            }
            ShmemWhat::Perf => {
                let rows = pe.perf(a.iters)?;
                if a.json {
                    for v in &rows {
                        println!("{v}");
                    }
                } else if !rows.is_empty() {
                    print!("{}", gda::shmem_cli::perf_table(&rows));
                }
                if let (Some(path), false) = (&a.plot, rows.is_empty()) {
                    let title = format!("gda shmem perf, 2 PEs, {}", pe.transport());
                    gda::plot::write_svg(path, &title, &gda::shmem_cli::perf_panels(&rows))
                        .map_err(|e| gda::shmem::ShmemError::Config(e.to_string()))?;
                }
            }
        }
        Ok(())
    };
    let r = match domain {
        gda::shmem_cli::Domain::Sim => gda::shmem_cli::with_pe(a.provider, body),
        gda::shmem_cli::Domain::Verbs => gda::shmem_cli::with_verbs_pe(body),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            gda::shmem::diag!("gda shmem: PE error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(feature = "sim")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PerfWhat {
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// 8-byte fetch-and-add.
    Atomic,
    /// SEND/RECV.
    Send,
    /// CPU used by an idle software NIC.
    Idle,
}

#[cfg(feature = "sim")]
#[derive(clap::Args)]
struct PerfArgs {
    /// What to measure.
    #[arg(value_enum)]
    what: PerfWhat,
    /// Message sizes, comma-separated (suffixes k, m allowed).
    #[arg(long, default_value = "8,64,4096,65536,1048576", value_parser = parse_sizes)]
    sizes: Sizes,
    /// Bandwidth iterations per size (default: 1 GiB of messages, between 200 and 2,000,000
    /// messages: 2,000,000 at 8 B, 1024 at 1 MiB).
    #[arg(long, value_parser = |s: &str| gda::cli::count_in(s, 1, 1 << 32))]
    iters: Option<u64>,
    /// Latency iterations per size.
    #[arg(long, default_value_t = 2000, value_parser = |s: &str| gda::cli::count_in(s, 1, 10_000_000))]
    lat_iters: u64,
    /// Measurements per size: the median is reported with the spread, and a spread above 25 %
    /// is warned about (CPU contention).
    #[arg(long, default_value_t = 3, value_parser = |s: &str| gda::cli::count_in(s, 1, 100).map(|v| v as u32))]
    repeat: u32,
    /// Queue depth (send-queue WQEs, power of two).
    #[arg(long, default_value_t = 128)]
    qd: u32,
    /// Device model / provider.
    #[arg(long, value_enum, default_value = "native")]
    provider: gda::ProviderName,
    /// Completion-queue mode.
    #[arg(long, value_enum, default_value = "normal")]
    cq: CqArg,
    /// Chaos seed for the software NIC.
    #[arg(long)]
    chaos: Option<u64>,
    /// Run through rdma-core on this ConnectX (`gda devices` lists them; the verbs-compatible
    /// library's is gda_mlx5_0) instead of the in-process software NIC (`verbs` feature).
    #[arg(long)]
    device: Option<String>,
    /// One JSON object per line and size instead of the table.
    #[arg(long)]
    json: bool,
    /// Also draw bandwidth, message rate and latency over message size into this SVG file.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Seconds to measure (idle; 0.01 to 3600).
    #[arg(long, default_value_t = 3.0, value_parser = gda::cli::measure_seconds)]
    seconds: f64,
}

#[cfg(feature = "sim")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CqArg {
    Normal,
    Collapsed,
}

#[derive(Clone, Debug)]
struct Sizes(Vec<usize>);

const fn gda_max_size() -> usize {
    1 << 30
}

fn parse_sizes(s: &str) -> Result<Sizes, String> {
    s.split(',')
        .map(|p| {
            let p = p.trim().to_ascii_lowercase();
            let (num, mult) = match p.strip_suffix('k') {
                Some(n) => (n.to_string(), 1024),
                None => match p.strip_suffix('m') {
                    Some(n) => (n.to_string(), 1 << 20),
                    None => (p.clone(), 1),
                },
            };
            num.parse::<usize>()
                .ok()
                .and_then(|n| n.checked_mul(mult))
                .filter(|&n| (1..=gda_max_size()).contains(&n))
                .ok_or_else(|| {
                    format!("{p:?} is not a message size from 1 byte to 1 GiB (e.g. 8, 4k, 1m)")
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Sizes)
}

#[cfg(feature = "sim")]
fn perf(a: PerfArgs) -> ExitCode {
    if let Some(Err(e)) = a.plot.as_deref().map(gda::plot::check_writable) {
        gda::shmem::diag!("gda perf: --plot: {e}");
        return ExitCode::from(2);
    }
    use gda::perf::{PerfConfig, PerfOp};
    if a.what == PerfWhat::Idle {
        return match gda::perf::idle(a.seconds) {
            Ok(share) => {
                if a.json {
                    println!(
                        "{}",
                        serde_json::json!({"op": "idle", "seconds": a.seconds, "engine_cpu_share": share})
                    );
                } else {
                    println!(
                        "idle software NIC: engine used {:.3}% of a core over {} s",
                        share * 100.0,
                        a.seconds
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                gda::shmem::diag!("gda: {e}");
                ExitCode::from(1)
            }
        };
    }
    let op = match a.what {
        PerfWhat::Write => PerfOp::Write,
        PerfWhat::Read => PerfOp::Read,
        PerfWhat::Atomic => PerfOp::Atomic,
        _ => PerfOp::Send,
    };
    let sizes = if op == PerfOp::Atomic {
        vec![8]
    } else {
        a.sizes.0.clone()
    };
    let cfg = PerfConfig {
        op,
        provider: a.provider,
        sizes: sizes.clone(),
        iterations: a.iters,
        lat_iterations: a.lat_iters,
        qd: a.qd,
        cq: if a.cq == CqArg::Collapsed {
            gda::sim::CqMode::Collapsed
        } else {
            gda::sim::CqMode::Normal
        },
        chaos: a.chaos,
        repeat: a.repeat,
        device: a.device.clone(),
    };
    // Every argument is checked, and the device opened, before the table header is printed.
    let prepared = match gda::perf::prepare(&cfg) {
        Ok(p) => p,
        Err(e) => {
            gda::shmem::diag!("gda: {e}");
            return ExitCode::from(2);
        }
    };
    let bar = indicatif::ProgressBar::new(sizes.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} sizes")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{op:?}"));
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let line = "-".repeat(104);
    if !a.json {
        println!("{line}");
        let on = match &a.device {
            // The provider follows from the device's PCI vendor (the vendor table).
            Some(d) => format!("{d} through rdma-core"),
            None => format!("software NIC, provider {:?}", a.provider),
        };
        println!(
            " {:?} BW / message rate / latency — {on}, CQ {:?}, qd {}, median of {}",
            op, a.cq, a.qd, a.repeat
        );
        println!("{line}");
        println!(
            " {:<10} {:>12} {:>12} {:>15} {:>9} {:>13} {:>13} {:>14}",
            "#bytes",
            "#iterations",
            "BW[GB/s]",
            "MsgRate[Mpps]",
            "rate±",
            "t_p50[usec]",
            "t_p99[usec]",
            "memcpy[GB/s]"
        );
    }
    let json = a.json;
    let mut rows = Vec::new();
    let res = prepared.run(|r| {
        rows.push(r.clone());
        bar.suspend(|| {
            let worst = r.msg_rate_spread.max(r.lat_p50_spread).max(r.memcpy_spread);
            if r.repeat > 1 && worst > 0.25 {
                gda::shmem::diag!(
                    "gda perf: warning: {} B results vary by {:.0} % over {} repeats (rate {:.0} %, \
                     p50 {:.0} %, memcpy {:.0} %): the CPU is contended; figures are unreliable",
                    r.size,
                    worst * 100.0,
                    r.repeat,
                    r.msg_rate_spread * 100.0,
                    r.lat_p50_spread * 100.0,
                    r.memcpy_spread * 100.0
                );
            }
            if json {
                println!("{}", serde_json::to_string(r).unwrap_or_default());
            } else {
                println!(
                    " {:<10} {:>12} {:>12.3} {:>15.3} {:>8.0}% {:>13.2} {:>13.2} {:>14.2}",
                    r.size,
                    r.iterations,
                    r.bw_gbps,
                    r.msg_rate_mps,
                    r.msg_rate_spread * 100.0,
                    r.lat_us_p50,
                    r.lat_us_p99,
                    r.memcpy_gbps
                );
            }
        });
        bar.inc(1);
    });
    bar.finish_and_clear();
    if !json {
        println!("{line}");
        println!(
            " GB/s: 10^9 bytes per second. rate±: the message rate's spread over the {} \
             repeats, (max - min) / median.",
            a.repeat
        );
    }
    if let (Ok(_), Some(path)) = (&res, &a.plot) {
        let title = format!("gda perf {op:?}, provider {:?}", a.provider);
        if let Err(e) = gda::plot::write_svg(path, &title, &gda::perf::panels(&rows)) {
            gda::shmem::diag!("gda: {e}");
            return ExitCode::from(1);
        }
    }
    match res {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            gda::shmem::diag!("gda: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(feature = "sim")]
#[derive(Clone, Copy, clap::ValueEnum)]
enum PortState {
    Up,
    Down,
}

#[cfg(feature = "sim")]
fn port(device: Option<String>, state: Option<PortState>) -> Result<String, String> {
    use gda::sim::port;
    let e = |e: port::PortError| e.to_string();
    Ok(match (device, state) {
        (None, _) => {
            let down = port::down().map_err(e)?;
            if down.is_empty() {
                "no port is down".to_string()
            } else {
                down.iter()
                    .map(|d| format!("{d}: down"))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
        (Some(d), None) if d == "up" || d == "down" => {
            return Err(format!(
                "{d:?} is a state, not a device: gda port <device> {d} (e.g. gda port gda_mlx5_0 {d})"
            ));
        }
        (Some(d), None) => format!(
            "{d}: {}",
            if port::is_up(&d).map_err(e)? {
                "up"
            } else {
                "down"
            }
        ),
        (Some(d), Some(st)) => {
            let up = matches!(st, PortState::Up);
            port::set_up(&d, up).map_err(e)?;
            format!("{d}: {}", if up { "up" } else { "down" })
        }
    })
}

#[derive(Subcommand)]
enum WireCmd {
    /// Read one JSON work request (ibv_send_wr field names) on stdin; print the WQE bytes,
    /// doorbell record and doorbell as JSON.
    #[command(after_help = concat!(
        "INPUT (JSON on stdin):\n",
        "  {\"opcode\": OPCODE, \"send_flags\": [\"SIGNALED\"|\"FENCE\"|\"SOLICITED\"|\"INLINE\"],\n",
        "   \"qp_num\": N, \"sq_wqe_cnt\": N (WQEBBs, power of two), \"cur_post\": N (WQEBB counter before),\n",
        "   \"sg_list\": [{\"addr\": N, \"length\": N, \"lkey\": N}], \"remote_addr\": N, \"rkey\": N,\n",
        "   \"imm_data\": N (as ibv_send_wr holds it, network order), \"compare_add\": N, \"swap\": N,\n",
        "   \"inline_data\": \"hex\", \"compare_mask\": N, \"swap_mask\": N, \"atomic_bytes\": 4|8,\n",
        "   \"max_inline_data\": N, \"max_send_sge\": N}\n\n",
        "OPCODES:\n  RDMA_WRITE, RDMA_WRITE_WITH_IMM, SEND, SEND_WITH_IMM, RDMA_READ,\n",
        "  ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD (8-byte, as verbs),\n",
        "  MASKED_CMP_AND_SWP   masked compare-swap, 4 or 8 bytes (\"atomic_bytes\"): swaps the bits in\n",
        "                       \"swap_mask\" (default all) if the bits in \"compare_mask\" (default all) match\n",
        "                       \"compare_add\"; with compare_mask 0 it expresses SWAP/SET/AND/OR\n",
        "  MASKED_FETCH_AND_ADD masked fetch-add, 4 or 8 bytes: adds \"compare_add\" with carries cut above\n",
        "                       each bit set in \"swap_mask\" (field boundary); all bits set = XOR\n",
        "  NOP\n\n",
        "OUTPUT: {\"wqe\": hex (ring order, unwrapped), \"dbrec_snd\": N, \"doorbell\": hex (8 bytes),\n",
        "         \"cur_post\": N (after), \"wqe_ds\", \"wqebbs\", \"slot\", \"wqe_index\", \"dbrec_bytes\"}\n\n",
        "EXAMPLE:\n  echo '{\"opcode\":\"RDMA_WRITE\",\"send_flags\":[\"SIGNALED\"],\"qp_num\":4660,\"sq_wqe_cnt\":64,\n",
        "         \"cur_post\":65534,\"sg_list\":[{\"addr\":139637976735744,\"length\":4096,\"lkey\":22136}],\n",
        "         \"remote_addr\":139637976731648,\"rkey\":43981}' | gda wire encode --provider mlx5\n\n",
        "BNXT (--provider bnxt): sq_wqe_cnt and cur_post count the mode's units (WQEs, or slots in\n",
        "variable mode); extra fields: \"wqe_mode\": \"static\"|\"variable\"|\"fixed3\" (default static),\n",
        "  \"msn_table\": bool (default true), \"psn_ext\": bool (16-byte entries without the MSN table),\n",
        "  \"sq_psn\": N (start PSN), \"path_mtu\": 256..4096 (default 1024), \"msn\": N (message counter).\n",
        "  Output: wqe, wqe_size, slot, psn_entry, psn_index, start_psn, next_psn, doorbell,\n",
        "  doorbell_value, epoch, cur_post, msn. bnxt has no masked atomics and no NOP type (a NOP is\n",
        "  a zero-length RDMA WRITE)."
    ))]
    Encode {
        /// NIC format.
        #[arg(long, default_value = "mlx5")]
        provider: String,
        /// Whose code encodes: gda's Rust device functions, or the GPU device API's C++ headers
        /// compiled for the host (`device` feature; mlx5 and bnxt).
        #[arg(long = "impl", value_enum, default_value = "rust")]
        imp: wire::Impl,
    },
    /// Read hex bytes on stdin (spaces allowed); print the decoded fields as JSON.
    Decode {
        /// NIC format.
        #[arg(long, default_value = "mlx5")]
        provider: String,
        /// What the bytes are.
        #[arg(long, value_enum)]
        kind: Kind,
        /// bnxt: the WQE mode the bytes were written in (static, variable, fixed3).
        #[arg(long, default_value = "static")]
        wqe_mode: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        #[cfg(feature = "sim")]
        Cmd::Perf(a) => return perf(a),
        #[cfg(feature = "sim")]
        Cmd::Shmem(a) => return shmem(a),
        #[cfg(feature = "sim")]
        Cmd::Chaos(a) => return chaos(a),
        #[cfg(feature = "sim")]
        Cmd::Port { device, state } => {
            return match port(device, state) {
                Ok(t) => {
                    println!("{t}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    gda::shmem::diag!("gda port: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Cmd::Plot {
            compare,
            out,
            title,
        } => {
            let panels = std::fs::read_to_string(&compare)
                .map_err(|e| format!("{}: {e}", compare.display()))
                .and_then(|t| {
                    serde_json::from_str::<serde_json::Value>(&t)
                        .map_err(|e| format!("{}: not JSON: {e}", compare.display()))
                })
                .and_then(|j| {
                    gda::plot::comparison_panels(&j)
                        .map_err(|e| format!("{}: {e}", compare.display()))
                });
            let r = panels
                .and_then(|p| gda::plot::write_svg(&out, &title, &p).map_err(|e| e.to_string()));
            return match r {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    gda::shmem::diag!("gda plot: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Cmd::Gpus { json } => {
            let l = gda::gpus::list();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&l.to_json())
                        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
                );
            } else {
                print!("{}", l.to_text());
            }
            return if l.usable() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            };
        }
        Cmd::Topo {
            topology,
            ranks,
            rails,
            json,
        } => {
            let args = gda::topo::Args {
                topology,
                ranks,
                rails,
                json,
            };
            return match gda::topo::run(&args) {
                Ok(t) => {
                    println!("{}", t.trim_end());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    gda::shmem::diag!("gda topo: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Cmd::Devices { json } => {
            let l = gda::devices::list();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&gda::devices::to_json(&l))
                        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
                );
            } else {
                print!("{}", gda::devices::to_text(&l));
            }
            // No rdma-core is not an error: the software NIC is still there.
            return if l.discover_error.is_some() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
        Cmd::Wire { cmd } => {
            let mut input = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut input) {
                gda::shmem::diag!("gda: cannot read stdin: {e}");
                return ExitCode::from(2);
            }
            match cmd {
                WireCmd::Encode { provider, imp } => wire::encode_with(&provider, imp, &input),
                WireCmd::Decode {
                    provider,
                    kind,
                    wqe_mode,
                } => wire::decode(&provider, kind, &wqe_mode, &input),
            }
        }
    };
    match result {
        Ok(v) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            gda::shmem::diag!("gda: {e}");
            ExitCode::from(1)
        }
    }
}
