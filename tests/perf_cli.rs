//! `gda perf` as users run it.

use std::process::Command;

fn gda(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gda"))
        .args(args)
        .output()
        .expect("run gda");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const KEYS: &[&str] = &[
    "op",
    "provider",
    "size",
    "iterations",
    "bw_gbps",
    "msg_rate_mps",
    "lat_us_p50",
    "lat_us_p99",
];

#[test]
fn the_documented_command_works_as_written() {
    let (code, out, err) = gda(&["perf", "write", "--sizes", "8,1048576", "--json"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 2);
    for (l, size) in lines.iter().zip([8, 1_048_576]) {
        for k in KEYS {
            assert!(l.get(k).is_some(), "missing {k} in {l}");
        }
        assert_eq!(l["size"], size);
        assert_eq!(l["op"], "write");
        assert!(l["bw_gbps"].as_f64().unwrap() > 0.0 && l["lat_us_p50"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn every_op_and_model_runs_and_prints_a_table() {
    for op in ["write", "read", "atomic", "send"] {
        for provider in ["native", "mlx5"] {
            for cq in ["normal", "collapsed"] {
                let (code, out, err) = gda(&[
                    "perf",
                    op,
                    "--sizes",
                    "1,64,4k",
                    "--iters",
                    "3000",
                    "--lat-iters",
                    "50",
                    "--provider",
                    provider,
                    "--cq",
                    cq,
                ]);
                assert_eq!(code, 0, "{op} {provider} {cq}: {err}");
                assert!(
                    out.contains("#bytes") && out.contains("MsgRate[Mpps]"),
                    "{out}"
                );
                let rows = out
                    .lines()
                    .filter(|l| {
                        l.trim_start()
                            .chars()
                            .next()
                            .is_some_and(|c| c.is_ascii_digit())
                    })
                    .count();
                assert_eq!(rows, if op == "atomic" { 1 } else { 3 }, "{out}");
            }
        }
    }
}

#[test]
fn chaos_and_bad_arguments() {
    let (code, _, err) = gda(&[
        "perf",
        "write",
        "--sizes",
        "64",
        "--iters",
        "2000",
        "--lat-iters",
        "20",
        "--chaos",
        "7",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    for (args, want) in [
        (
            &["perf", "write", "--sizes", "8,abc"][..],
            "not a message size",
        ),
        (&["perf", "write", "--qd", "100"][..], "power of two"),
        (&["perf", "frobnicate"][..], "invalid value"),
    ] {
        let (code, _, err) = gda(args);
        assert_ne!(code, 0);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}
