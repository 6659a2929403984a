//! `gdarun` and `gda perf` under misuse and signals, through the real binaries: bounded `-n`,
//! validated numbers (no panics), no doubled prefixes, signals forwarded to the PEs with the
//! job's shared memory swept, and `gda perf` arguments checked before anything is printed.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn gdarun(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gdarun"))
        .args(args)
        .output()
        .unwrap()
}

fn gda(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gda"))
        .args(args)
        .output()
        .unwrap()
}

fn usage_error(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "{needle:?} not in {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.is_empty(), "printed before the argument error: {out}");
}

#[test]
fn gdarun_bounds_and_validates_its_numbers() {
    // Before: -n 1000000 spawned thousands of processes before failing.
    let t = Instant::now();
    usage_error(&gdarun(&["-n", "1000000", "true"]), "not in 1..=1024");
    assert!(t.elapsed() < Duration::from_secs(5));
    usage_error(&gdarun(&["-n", "0", "true"]), "not in 1..=1024");
    // Before: Duration::from_secs_f64 panicked on these.
    for g in ["-1", "nan", "inf", "1e400", "x"] {
        usage_error(&gdarun(&["-n", "1", "--grace", g, "true"]), "--grace");
    }
    usage_error(&gdarun(&["-n", "1", "--hosts", "0", "true"]), "--hosts");
}

#[test]
fn gdarun_takes_the_count_as_mpirun_does() {
    // Issue 25: `-n2` and `-n=2` were refused (mpirun and oshrun accept them).
    for n in [
        &["-n2"][..],
        &["-n=2"],
        &["-n", "2"],
        &["--np=2"],
        &["--np", "2"],
    ] {
        let o = gdarun(&[n, &["sh", "-c", "echo $GDA_SHMEM_SIZE -x"]].concat());
        assert!(
            o.status.success(),
            "{n:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout), "2 -x\n2 -x\n", "{n:?}");
    }
}

#[test]
fn gdarun_errors_have_one_prefix() {
    let o = gdarun(&["-n", "2", "/nonexistent/prog"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("/nonexistent/prog"), "{err}");
    assert!(!err.contains("gdarun: gdarun:"), "{err}");
    assert!(!err.contains("configuration: gdarun"), "{err}");
}

/// PIDs of `parent`'s children (Linux `/proc/<pid>/task/*/children`).
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{parent}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    gda::os::process::process_alive(pid)
}

/// Starts `gdarun -n 3` of `prog`, waits until all 3 PEs run, plants a segment of the job, and
/// sends `sig` to gdarun. Returns gdarun's exit code, how long it took, and the PE pids.
fn interrupt(sig: i32, grace: &str, prog: &[&str]) -> (Option<i32>, Duration, Vec<u32>, String) {
    let job = format!("tsig{sig}g{grace}x{}", std::process::id());
    let mut args = vec!["-n", "3", "--grace", grace, "--job", &job, "--"];
    args.extend_from_slice(prog);
    let g = Command::new(env!("CARGO_BIN_EXE_gdarun"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let pes = loop {
        let c = children(g.id());
        if c.len() == 3 {
            break c;
        }
        assert!(Instant::now() < deadline, "PEs did not start: {c:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Give the PEs time to set their dispositions (the trap below).
    std::thread::sleep(Duration::from_millis(300));
    let seg = gda::os::shm::Segment::create(&job, "heap0", 4096).unwrap();
    let t = Instant::now();
    let pid = rustix::process::Pid::from_raw(g.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::from_named_raw(sig).unwrap())
        .unwrap();
    let o = g.wait_with_output_timeout();
    let took = t.elapsed();
    drop(seg);
    assert!(
        gda::os::shm::list(&job).unwrap().is_empty(),
        "the job's shared memory was not swept"
    );
    (o.0, took, pes, o.1)
}

trait WaitTimeout {
    fn wait_with_output_timeout(self) -> (Option<i32>, String);
}

impl WaitTimeout for std::process::Child {
    fn wait_with_output_timeout(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = self.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read;
                if let Some(mut e) = self.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return (st.code(), err);
            }
            if Instant::now() > deadline {
                let _ = self.kill();
                panic!("gdarun did not end after the signal");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn signals_to_gdarun_reach_the_pes_and_clean_up() {
    // Before: the PEs were left running as orphans and the shared memory stayed.
    for (sig, name) in [(15, "SIGTERM"), (2, "SIGINT"), (1, "SIGHUP")] {
        let (code, took, pes, err) = interrupt(sig, "5", &["sleep", "60"]);
        assert_eq!(code, Some(128 + sig), "{name}: {err}");
        assert!(
            took < Duration::from_secs(4),
            "{name}: took {took:?}\n{err}"
        );
        assert!(err.contains(&format!("got signal {sig}")), "{err}");
        std::thread::sleep(Duration::from_millis(100));
        assert!(pes.iter().all(|&p| !alive(p)), "{name}: PEs left: {pes:?}");
    }
}

#[test]
fn pes_that_ignore_the_signal_are_killed_after_the_grace_period() {
    let (code, took, pes, err) = interrupt(15, "1", &["sh", "-c", "trap '' TERM; sleep 60"]);
    assert_eq!(code, Some(143), "{err}");
    assert!(
        took >= Duration::from_millis(900),
        "killed before the grace: {took:?}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}\n{err}");
    assert!(err.contains("still running"), "{err}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(pes.iter().all(|&p| !alive(p)), "PEs left: {pes:?}");
}

#[test]
fn gda_perf_checks_every_argument_before_printing() {
    // Before: --seconds nan panicked, --sizes 0 was accepted, and the table header came
    // before the argument error.
    usage_error(&gda(&["perf", "idle", "--seconds", "nan"]), "--seconds");
    usage_error(&gda(&["perf", "idle", "--seconds=-2"]), "--seconds");
    usage_error(&gda(&["perf", "write", "--sizes", "0"]), "--sizes");
    usage_error(&gda(&["perf", "write", "--sizes", "8,2g"]), "--sizes");
    usage_error(&gda(&["perf", "write", "--qd", "3"]), "power of two");
    usage_error(&gda(&["perf", "write", "--iters", "0"]), "--iters");
    usage_error(&gda(&["perf", "write", "--repeat", "0"]), "--repeat");
    usage_error(&gda(&["perf", "write", "--lat-iters", "0"]), "--lat-iters");
    // A device that cannot be opened (or a build without `verbs`) is refused before the
    // header too (issue 45: the header came first).
    let o = gda(&["perf", "write", "--device", "gda_nope_0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        o.stdout.is_empty(),
        "printed before the device error: {:?}",
        o.stdout
    );
    assert!(
        err.contains("gda_nope_0") || err.contains("--device"),
        "{err}"
    );
}

#[test]
fn gda_perf_help_states_the_defaults_it_uses() {
    let o = gda(&["perf", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    // The default bandwidth iterations, as `default_iters` computes them.
    assert_eq!(gda::perf::default_iters(8), 2_000_000);
    assert_eq!(gda::perf::default_iters(1 << 20), 1024);
    assert!(help.contains("2,000,000 at 8 B, 1024 at 1 MiB"), "{help}");
    assert!(help.contains("[default: 3]"), "{help}");
    assert!(help.contains("[default: 2000]"), "{help}");
}

#[test]
fn gda_perf_reports_medians_and_spread() {
    let o = gda(&[
        "perf",
        "write",
        "--sizes",
        "8,4k",
        "--iters",
        "2000",
        "--lat-iters",
        "50",
        "--repeat",
        "3",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for v in &lines {
        assert_eq!(v["repeat"], 3);
        assert_eq!(v["iterations"], 2000);
        assert!(v["msg_rate_spread"].as_f64().unwrap() >= 0.0);
        assert!(v["memcpy_gbps"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn gda_shmem_validates_its_numbers() {
    usage_error(&gda(&["shmem", "check", "--pes", "0"]), "--pes");
    usage_error(&gda(&["shmem", "check", "--pes", "5000"]), "--pes");
    usage_error(
        &gda(&["shmem", "check", "--pes", "2", "--hosts", "0"]),
        "--hosts",
    );
    usage_error(
        &gda(&["shmem", "check", "--pes", "2", "--rounds", "0"]),
        "--rounds",
    );
    usage_error(
        &gda(&["shmem", "perf", "--pes", "2", "--iters", "0"]),
        "--iters",
    );
}

#[test]
fn chaos_sweep_runs_every_format_and_says_how_to_replay() {
    // CI's small sweep; the README reports the big one (`gda chaos --seeds 1000`).
    let o = gda(&["chaos", "--from", "100", "--seeds", "4"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("seeds 100..=103 x 3 provider(s) = 12 runs (2 workloads each), 0 failed"),
        "{out}"
    );
    let f = gda::chaos::Failure {
        seed: 4242,
        provider: gda::ProviderName::new("bnxt").unwrap(),
        workload: "shmem",
        error: String::new(),
    };
    assert_eq!(
        f.replay(),
        "gda chaos --from 4242 --seeds 1 --provider bnxt"
    );
    usage_error(&gda(&["chaos", "--seeds", "0"]), "--seeds");
    let o = gda(&["chaos", "--from", &u64::MAX.to_string(), "--seeds", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("overflows"));
}

/// Issue 25: with stderr unwritable (`2>/dev/full`, a closed pipe) gdarun panicked (exit 101)
/// while reporting a failed PE, leaving the other PE running as an orphan. Diagnostics never
/// abort the supervisor: the job ends with the failing PE's status and nothing is left.
#[test]
fn gdarun_with_an_unwritable_stderr_still_ends_the_job() {
    let marker = format!("31.{}", std::process::id());
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_gdarun"))
        .args(["-n", "2", "--grace", "1", "sh", "-c"])
        .arg(format!(
            "if [ $GDA_SHMEM_RANK = 0 ]; then exit 3; else exec sleep {marker}; fi"
        ))
        .stderr(Stdio::from(full))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "gdarun's status with stderr on /dev/full"
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    // No `sleep <marker>` left anywhere.
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect();
    assert!(left.is_empty(), "orphaned PEs: {left:?}");
}

/// Issue 25: a 1,024 open-file soft limit capped jobs near 300 PEs. gdarun raises the soft
/// limit to the hard one, and its PEs inherit it.
#[test]
fn pes_run_with_the_hard_open_file_limit() {
    let o = Command::new("sh")
        .args([
            "-c",
            "ulimit -Sn 256; exec \"$0\" -n 1 sh -c 'echo $(ulimit -Sn) $(ulimit -Hn)'",
        ])
        .arg(env!("CARGO_BIN_EXE_gdarun"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let v: Vec<&str> = out.split_whitespace().collect();
    assert!(
        o.status.success() && v.len() == 2,
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(v[0], v[1], "the PE's soft limit is not the hard limit");
    assert_ne!(v[0], "256");
}

/// Issue 25: `gda perf --plot /bad/x.svg` failed only after the whole run.
#[test]
fn an_unwritable_plot_path_is_refused_before_the_run() {
    for args in [
        &[
            "perf",
            "write",
            "--sizes",
            "1m",
            "--plot",
            "/nonexistent/dir/x.svg",
        ][..],
        &[
            "shmem",
            "perf",
            "--pes",
            "2",
            "--plot",
            "/nonexistent/dir/x.svg",
        ],
    ] {
        let t = Instant::now();
        usage_error(
            &gda(args),
            "cannot write the plot to /nonexistent/dir/x.svg",
        );
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{args:?}: {:?}",
            t.elapsed()
        );
    }
}

/// Issue 25: under `umask 0277` every job failed ("has mode 400, not 600"): modes are set
/// explicitly. Both with gdarun and with a launcher whose ranks meet through a secret file.
#[test]
fn jobs_run_under_a_restrictive_umask() {
    let dir = std::env::temp_dir().join(format!("gda-umask-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gdarun = env!("CARGO_BIN_EXE_gdarun");
    let gda = env!("CARGO_BIN_EXE_gda");
    let script = format!(
        "umask 0277; \"{gdarun}\" -n 2 \"{gda}\" shmem check --rounds 8 || exit 1; \
         for r in 0 1; do SLURM_JOB_ID=um$$ SLURM_PROCID=$r SLURM_NTASKS=2 \
         \"{gda}\" shmem check --rounds 8 & done; wait %1 && wait %2"
    );
    let o = Command::new("sh")
        .args(["-c", &script])
        .env("XDG_RUNTIME_DIR", &dir)
        .env("GDA_SHMEM_TRANSPORT", "rdma")
        .env("GDA_SHMEM_TIMEOUT_MS", "20000")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(out.matches(": ok, ").count(), 4, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 25: two PEs' error lines interleaved mid-line. Every diagnostic is one write now:
/// each line of a failed job is whole.
#[test]
fn error_lines_of_several_pes_stay_whole() {
    let o = Command::new(env!("CARGO_BIN_EXE_gdarun"))
        .args(["-n", "4", "--grace", "2", "--hosts", "2"])
        .arg(env!("CARGO_BIN_EXE_gda"))
        .args(["shmem", "check"])
        .env("GDA_SHMEM_TRANSPORT", "p2p")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    // Every PE fails at once (each has peers on the other simulated host) and says so.
    let pe_lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("GDA_SHMEM_TRANSPORT=p2p but PE"))
        .collect();
    assert!(pe_lines.len() >= 2, "{err}");
    for l in pe_lines {
        assert_eq!(l.matches("gda shmem:").count(), 1, "a line of two PEs: {l}");
    }
}

/// Processes whose environment names job `job` (PEs and whatever they started).
fn job_processes(job: &str) -> Vec<u32> {
    let needle = format!("GDA_SHMEM_JOB={job}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .filter(|&p| alive(p))
        .collect()
}

/// `kill -9` of gdarun takes every PE with it (issue 44, item 6; before, 4 of 4 runs left
/// every PE running as an orphan): PEs it started directly (`sleep`), and a gda PE a wrapper
/// started (`sh -c`, so a grandchild of gdarun) waiting in the rendezvous — which also removes
/// the job's shared memory on its way out.
#[test]
fn a_killed_gdarun_takes_its_pes_with_it() {
    let gda = env!("CARGO_BIN_EXE_gda");
    for (case, want, prog) in [
        ("direct", 2, vec!["sleep", "60"]),
        (
            "wrapped",
            3,
            vec![
                "sh",
                "-c",
                r#"if [ "$GDA_SHMEM_RANK" = 0 ]; then "$0" shmem check; sleep 60; else exec sleep 60; fi"#,
                gda,
            ],
        ),
    ] {
        let job = format!("tkill{case}{}", std::process::id());
        let mut args = vec!["-n", "2", "--job", &job, "--"];
        args.extend(prog.iter().copied());
        let mut g = Command::new(env!("CARGO_BIN_EXE_gdarun"))
            .args(&args)
            .env("GDA_SHMEM_TIMEOUT_MS", "60000")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Every process of the job up: 2 `sleep`s directly; or `sh` and its gda (in the
        // rendezvous, its watch started) for rank 0 and `sleep` for rank 1 — plus gdarun.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut pes = job_processes(&job);
        while pes.len() < want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            pes = job_processes(&job);
        }
        pes.retain(|&p| p != g.id());
        assert!(
            pes.len() >= 2,
            "{case}: the job's processes did not start: {pes:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
        let seg = gda::os::shm::Segment::create(&job, "heap1", 4096).unwrap();
        std::mem::forget(seg);
        g.kill().unwrap();
        let _ = g.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        while pes.iter().any(|&p| alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left: Vec<u32> = pes.iter().copied().filter(|&p| alive(p)).collect();
        for &p in &left {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(p as i32).unwrap(),
                rustix::process::Signal::KILL,
            );
        }
        assert!(
            left.is_empty(),
            "{case}: PEs outlived gdarun's kill -9: {left:?} of {pes:?}"
        );
        if case == "wrapped" {
            // The gda PE removed the job's shared memory on its way out.
            assert!(
                gda::os::shm::list(&job).unwrap().is_empty(),
                "{case}: the job's shared memory was left"
            );
        } else {
            let _ = gda::os::shm::sweep(&job);
        }
    }
}
