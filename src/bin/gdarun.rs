//! `gdarun`: start N processes of a program as SHMEM PEs on this host.
//!
//! Each PE gets its rank, the job size, a rendezvous address on loopback, the job id and a
//! fresh random job secret in its environment (`GDA_SHMEM_*`). When a PE fails, the others get
//! a grace period to report it themselves, then are killed; the job's shared memory is removed
//! however the job ended. The exit status is the first failing PE's (128 + signal if killed).
//! SIGTERM, SIGINT and SIGHUP to `gdarun` are forwarded to the PEs; those still running after
//! the grace period are killed, the shared memory is swept, and `gdarun` exits with 128 + the
//! signal. PEs are pinned one per CPU when they fit (`--bind-to`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "gdarun",
    version,
    about = "Run N processes of a program as gda SHMEM PEs",
    after_help = "EXAMPLES:\n  gdarun -n 4 gda shmem check\n  gdarun -n 8 --hosts 2 -- ./my_kernel --size 1m"
)]
struct Args {
    /// Number of PEs (1 to 1024).
    #[arg(short = 'n', long = "np", value_parser = gda::cli::pe_count)]
    n: u32,
    /// Simulate this many hosts (GDA_SHMEM_HOSTS): same host P2P, else RDMA.
    #[arg(long, value_parser = gda::cli::pe_count)]
    hosts: Option<u32>,
    /// Job id (names shared memory; default random).
    #[arg(long)]
    job: Option<String>,
    /// Seconds the other PEs may run on after one failed, or after a SIGTERM/SIGINT/SIGHUP to
    /// gdarun was forwarded to them, before they are killed (0 to 86400; default:
    /// GDA_SHMEM_TIMEOUT_MS + 5 s).
    #[arg(long, allow_hyphen_values = true, value_parser = gda::cli::grace_seconds)]
    grace: Option<f64>,
    #[command(flatten)]
    placement: gda::cli::Placement,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true)]
    argv: Vec<String>,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let timeout = match gda::shmem::Config::from_env() {
        Ok(c) => c.timeout,
        Err(e) => {
            gda::shmem::diag!("gdarun: {e}");
            return ExitCode::from(2);
        }
    };
    let grace = a
        .grace
        .map_or(timeout + Duration::from_secs(5), Duration::from_secs_f64);
    let job = gda::shmem::launch::Job {
        n: a.n,
        argv: a.argv,
        job: a.job,
        hosts: a.hosts,
        grace,
        env: Vec::new(),
        bind: a.placement.bind,
        report_bindings: a.placement.report_bindings,
    };
    match gda::shmem::launch::run(&job) {
        Ok(o) => ExitCode::from(o.exit_code().clamp(0, 255) as u8),
        Err(e) => {
            gda::shmem::diag!("gdarun: {e}");
            ExitCode::from(2)
        }
    }
}
