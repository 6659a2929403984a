//! Unmodified rdma-core programs between two processes on the verbs-compatible library:
//! Debian's perftest (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`, `ib_atomic_bw`, `ib_write_lat`,
//! `ib_read_lat`, `ib_send_lat`) and `ibv_rc_pingpong`, server and client as separate processes
//! on `gda_mlx5_0`, exchanging QPN/GID over TCP on 127.0.0.1 as they do between hosts.

mod support;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const LIMIT: Duration = Duration::from_secs(120);

/// A TCP port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free TCP port")
}

/// Runs `program args` as server and client; returns the client's output.
fn pair(program: &std::path::Path, args: &[&str]) -> String {
    let port = free_port().to_string();
    let server = KillOnDrop(Some(
        verbs_command(program)
            .args(args)
            .args(["-p", &port])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server"),
    ));
    // The client retries until the server listens (it exits at once when it cannot connect).
    let start = Instant::now();
    let client = loop {
        let mut c = verbs_command(program);
        c.args(args).args(["-p", &port, "127.0.0.1"]);
        let out = run_with_deadline(&mut c, LIMIT);
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        let refused = text.contains("Couldn't connect") || text.contains("Unable to connect");
        if !refused || start.elapsed() > Duration::from_secs(20) {
            assert!(
                out.status.success(),
                "{} {args:?} client failed:\n{text}",
                program.display()
            );
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let s = wait_with_deadline(server.take(), LIMIT, "server");
    let stext =
        String::from_utf8_lossy(&s.stdout).into_owned() + &String::from_utf8_lossy(&s.stderr);
    assert!(
        s.status.success(),
        "{} server failed:\n{stext}",
        program.display()
    );
    client
}

/// The figures of perftest's result line (the one after the `#bytes` header).
fn figures(out: &str) -> Vec<f64> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    let line = lines
        .next()
        .unwrap_or_else(|| panic!("no result line in:\n{out}"));
    line.split_whitespace()
        .map(|w| {
            w.parse::<f64>()
                .unwrap_or_else(|_| panic!("{w:?} in {line:?}"))
        })
        .collect()
}

#[test]
fn perftest_runs_unmodified_between_two_processes() {
    let tests = [
        ("ib_write_bw", "65536", true),
        ("ib_read_bw", "65536", true),
        ("ib_send_bw", "65536", true),
        ("ib_atomic_bw", "8", true),
        ("ib_write_lat", "8", false),
        ("ib_read_lat", "8", false),
        ("ib_send_lat", "8", false),
    ];
    let mut ran = 0;
    for (name, size, bw) in tests {
        let Some(p) = system_program(&format!("/usr/bin/{name}"), "perftest") else {
            continue;
        };
        let mut args = vec!["-d", "gda_mlx5_0", "-n", "200", "-F"];
        if name != "ib_atomic_bw" {
            args.extend(["-s", size]);
        }
        let out = pair(&p, &args);
        let f = figures(&out);
        println!("{name}: {f:?}");
        assert_eq!(f[0], size.parse::<f64>().unwrap(), "{name}: message size");
        assert_eq!(f[1], 200.0, "{name}: iterations");
        if bw {
            // bytes, iterations, peak MB/s, average MB/s, Mpps
            assert!(
                f[3] > 0.0 && f[3].is_finite() && f[4] > 0.0,
                "{name}: {f:?}"
            );
        } else {
            // bytes, iterations, min, max, typical, average, stdev, 99%, 99.9% (usec)
            assert!(
                f[2] > 0.0 && f[2] <= f[4] && f[4] <= f[3] && f[5].is_finite(),
                "{name}: {f:?}"
            );
        }
        ran += 1;
    }
    if std::env::var_os("CI").is_some() {
        assert_eq!(ran, tests.len());
    }
}

#[test]
fn ibv_rc_pingpong_between_two_processes() {
    let Some(p) = system_program("/usr/bin/ibv_rc_pingpong", "ibverbs-utils") else {
        return;
    };
    let out = pair(&p, &["-d", "gda_mlx5_0", "-g", "1", "-n", "200"]);
    println!("{out}");
    assert!(out.contains("200 iters in"), "{out}");
    // The peer's GID is the other process's (a different fabric), not ours.
    let gids: Vec<&str> = out.lines().filter_map(|l| l.split("GID ").nth(1)).collect();
    assert_eq!(gids.len(), 2, "{out}");
    assert_ne!(gids[0], gids[1]);
}

#[test]
fn a_missing_server_is_a_clear_error_not_a_hang() {
    let Some(p) = system_program("/usr/bin/ib_write_bw", "perftest") else {
        return;
    };
    let port = free_port().to_string();
    let out = run_with_deadline(
        Command::new(&p).env("LD_LIBRARY_PATH", verbs_dir()).args([
            "-d",
            "gda_mlx5_0",
            "-p",
            &port,
            "127.0.0.1",
        ]),
        LIMIT,
    );
    assert!(!out.status.success());
}
