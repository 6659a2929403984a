//! The verbs library as rdma-core's own tools and the dynamic loader see it: `ibv_devices`,
//! `ibv_devinfo -v`, `GDA_VERBS_DEVICES`, versioned symbols, stubs, and every Debian RDMA
//! program loading with all its symbols bound at start (`LD_BIND_NOW=1`).

mod support;

use std::time::Duration;

use support::*;

const LIMIT: Duration = Duration::from_secs(30);

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn ibv_devices_lists_the_configured_devices() {
    let Some(p) = system_program("/usr/bin/ibv_devices", "ibverbs-utils") else {
        return;
    };
    let cases = [
        (None, vec!["gda_mlx5_0", "gda_bnxt_0"]),
        (Some("mlx5:2"), vec!["gda_mlx5_0", "gda_mlx5_1"]),
        (
            Some("bnxt:3"),
            vec!["gda_bnxt_0", "gda_bnxt_1", "gda_bnxt_2"],
        ),
    ];
    let mut compared = 0;
    for (value, want) in &cases {
        let mut c = verbs_command(&p);
        match value {
            Some(v) => c.env("GDA_VERBS_DEVICES", v),
            None => c.env_remove("GDA_VERBS_DEVICES"),
        };
        let o = run_with_deadline(&mut c, LIMIT);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{value:?}: {err}");
        let names: Vec<&str> = out
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(&names, want, "{value:?}:\n{out}");
        compared += 1;
    }
    // No devices: the tool says so; a bad value: a clear error and a failing exit.
    let o = run_with_deadline(verbs_command(&p).env("GDA_VERBS_DEVICES", ""), LIMIT);
    let (out, _) = text(&o);
    assert!(!out.contains("gda_"), "{out}");
    let o = run_with_deadline(verbs_command(&p).env("GDA_VERBS_DEVICES", "mlx6"), LIMIT);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("GDA_VERBS_DEVICES: unknown device kind \"mlx6\""),
        "{err}"
    );
    assert_eq!(compared, 3);
}

#[test]
fn ibv_devinfo_describes_a_roce_v2_connectx() {
    let Some(p) = system_program("/usr/bin/ibv_devinfo", "ibverbs-utils") else {
        return;
    };
    let o = run_with_deadline(verbs_command(&p).args(["-v", "-d", "gda_mlx5_0"]), LIMIT);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let mut found = 0;
    for want in [
        "hca_id:\tgda_mlx5_0",
        "vendor_id:\t\t\t0x02c9",
        "phys_port_cnt:\t\t\t1",
        "state:\t\t\tPORT_ACTIVE (4)",
        "active_mtu:\t\t4096 (5)",
        "link_layer:\t\tEthernet",
        "atomic_cap:\t\t\tATOMIC_HCA (1)",
        ", RoCE v2",
        ", RoCE v1",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
        found += 1;
    }
    assert_eq!(found, 9);
    // An IPv4-mapped RoCE v2 GID, as a ConnectX port with an IPv4 address shows.
    assert!(
        out.lines()
            .any(|l| l.contains("GID[  3]:") && l.contains("::ffff:") && l.ends_with(", RoCE v2")),
        "{out}"
    );
    // The Thor2 shows Broadcom's vendor id.
    let o = run_with_deadline(verbs_command(&p).args(["-d", "gda_bnxt_0"]), LIMIT);
    let (out, _) = text(&o);
    assert!(out.contains("vendor_id:\t\t\t0x14e4"), "{out}");
}

#[test]
fn versioned_symbols_and_stubs() {
    let exe = compile_c("symbols");
    let o = run_with_deadline(&mut verbs_command(&exe), LIMIT);
    let (out, err) = text(&o);
    println!("{out}{err}");
    assert!(o.status.success());
    let (passed, failed) = tally(&out);
    assert_eq!((passed, failed), (19, 0));
}

/// Every RDMA program Debian ships loads on the library with every symbol bound at start: no
/// missing symbol or version node.
#[test]
fn debian_programs_load_with_bind_now() {
    let programs = [
        ("/usr/bin/ib_write_bw", "perftest"),
        ("/usr/bin/ib_read_bw", "perftest"),
        ("/usr/bin/ib_send_bw", "perftest"),
        ("/usr/bin/ib_atomic_bw", "perftest"),
        ("/usr/bin/ib_write_lat", "perftest"),
        ("/usr/bin/ib_read_lat", "perftest"),
        ("/usr/bin/ib_send_lat", "perftest"),
        ("/usr/bin/ibv_rc_pingpong", "ibverbs-utils"),
        ("/usr/bin/ibv_devinfo", "ibverbs-utils"),
        ("/usr/bin/ibv_devices", "ibverbs-utils"),
    ];
    let mut loaded = 0;
    for (path, pkg) in programs {
        let Some(p) = system_program(path, pkg) else {
            continue;
        };
        let o = run_with_deadline(
            verbs_command(&p).env("LD_BIND_NOW", "1").arg("--help"),
            LIMIT,
        );
        let (out, err) = text(&o);
        for bad in [
            "symbol lookup error",
            "not found (required by",
            "undefined symbol",
            "error while loading shared libraries",
        ] {
            assert!(!err.contains(bad), "{path}: {err}");
        }
        // 127: the loader gave up before main.
        assert_ne!(o.status.code(), Some(127), "{path}:\n{out}\n{err}");
        loaded += 1;
    }
    if std::env::var_os("CI").is_some() {
        assert_eq!(loaded, programs.len());
    }
}

/// Every RC operation through the verbs API in one process — WRITE (plain, inline,
/// multi-SGE), READ, SEND/RECV with immediate, WRITE_WITH_IMM, FADD, CAS, the `ibv_wr_*` batch
/// API, a completion-channel event, EBUSY on objects in use, EINVAL on bad access flags, and a
/// bad rkey (REM_ACCESS_ERR, nothing written, later WQE flushed, QP in ERR), dma-buf
/// registration of a bad fd (EBADF) and of a non-dma-buf fd (EINVAL) — on the ConnectX and the
/// Thor2 device models.
#[test]
fn loopback_every_operation_on_both_devices() {
    let exe = compile_c("loopback");
    let mut devices = 0;
    for dev in ["gda_mlx5_0", "gda_bnxt_0"] {
        let o = run_with_deadline(verbs_command(&exe).arg(dev), LIMIT);
        let (out, err) = text(&o);
        println!("{dev}:\n{out}{err}");
        assert!(o.status.success(), "{dev} failed");
        assert_eq!(tally(&out), (54, 0), "{dev}");
        devices += 1;
    }
    assert_eq!(devices, 2);
}

/// GPUDirect-Async style: rings from `mlx5dv_init_obj`, mlx5 WQEs built by the program,
/// doorbell record and BlueFlame register written by it, CQEs polled by owner bit; mixed with
/// `ibv_post_send` on the same QP; a bad rkey gives an error CQE.
#[test]
fn direct_posting_through_mlx5dv_init_obj() {
    let exe = compile_c("direct");
    let o = run_with_deadline(&mut verbs_command(&exe), LIMIT);
    let (out, err) = text(&o);
    println!("{out}{err}");
    assert!(o.status.success());
    assert_eq!(tally(&out), (24, 0));
}

/// The RC conformance cases between two processes (the test program forks; each process has
/// its own software NIC and registers plain `malloc` memory): WRITE (1 B, 4 KiB, 8 MiB, inline,
/// multi-SGE), READ (8 MiB), WRITE_WITH_IMM and SEND consuming the responder's receives, RNR
/// then success, FADD and CAS, and the errors — bad rkey, out of bounds, missing rights,
/// deregistered region, receive too small (LOC_LEN_ERR at the responder), RNR retries
/// exceeded, dead peer — each with the status hardware reports and later WQEs flushed; on the
/// ConnectX and the Thor2 device models.
#[test]
fn rc_conformance_between_two_processes() {
    let exe = compile_c("xproc");
    let mut devices = 0;
    for dev in ["gda_mlx5_0", "gda_bnxt_0"] {
        let o = run_with_deadline(verbs_command(&exe).arg(dev), Duration::from_secs(180));
        let (out, err) = text(&o);
        println!("{dev}:\n{out}{err}");
        assert!(o.status.success(), "{dev} failed");
        assert_eq!(tally(&out), (125, 0), "{dev}");
        devices += 1;
    }
    assert_eq!(devices, 2);
}

/// `ibv_modify_qp` refusals through the C ABI: each step of RESET→INIT→RTR→RTS with every
/// required attribute removed (14) and a forbidden one added, skipped states and RESET→ERR,
/// bad port, AV port, P_Key index, GID index, MTU, 24-bit fields, retry counts, timeouts and
/// RDMA-read depths, `IBV_QP_CUR_STATE` misuse, an alternate path on RoCE, RTS→SQD — each
/// with the kernel + mlx5 errno (EINVAL; ENODATA for an empty GID entry; EOPNOTSUPP for
/// unknown mask bits and `IBV_QP_RATE_LIMIT`) and the QP left in its state — plus refused QP
/// creation limits.
#[test]
fn modify_qp_refusals_through_the_c_abi() {
    let exe = compile_c("modify_neg");
    let o = run_with_deadline(&mut verbs_command(&exe), LIMIT);
    let (out, err) = text(&o);
    println!("{out}{err}");
    assert!(o.status.success());
    assert_eq!(tally(&out), (64, 0));
}

/// One device has one node GUID (issue 45): `ibv_devices` (twice) and `ibv_devinfo` — separate
/// processes — print the same GUID for each device, and the two devices' differ. (Before, the
/// GUID came from the process's random fabric id: every run printed another.)
#[test]
fn ibv_devices_and_ibv_devinfo_agree_on_node_guids() {
    let (Some(devices), Some(devinfo)) = (
        system_program("/usr/bin/ibv_devices", "ibverbs-utils"),
        system_program("/usr/bin/ibv_devinfo", "ibverbs-utils"),
    ) else {
        return;
    };
    let listed = || {
        let o = run_with_deadline(
            verbs_command(&devices).env_remove("GDA_VERBS_DEVICES"),
            LIMIT,
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        out.lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?.to_string(), f.next()?.to_string()))
            })
            .filter(|(n, _)| n.starts_with("gda_"))
            .collect::<Vec<_>>()
    };
    let first = listed();
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(
        listed(),
        first,
        "ibv_devices printed other GUIDs in a second run"
    );
    let mut compared = 0;
    for (name, guid) in &first {
        let o = run_with_deadline(
            verbs_command(&devinfo)
                .env_remove("GDA_VERBS_DEVICES")
                .args(["-d", name]),
            LIMIT,
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        let node = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("node_guid:"))
            .unwrap_or_else(|| panic!("no node_guid in:\n{out}"))
            .trim()
            .replace(':', "");
        assert_eq!(&node, guid, "{name}: ibv_devinfo vs ibv_devices");
        compared += 1;
    }
    assert_eq!(compared, 2);
    assert_ne!(first[0].1, first[1].1, "two devices, one GUID");
}

/// A private runtime directory for one test (what `XDG_RUNTIME_DIR` names: the software NIC's
/// host-wide port state lives in `gda/ports/` under it), removed when dropped.
struct RuntimeDir(std::path::PathBuf);

impl RuntimeDir {
    fn new(tag: &str) -> Self {
        use std::os::unix::fs::DirBuilderExt;
        let d = std::env::temp_dir().join(format!("gda-verbs-xdg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        Self(d)
    }

    /// The file that says `device`'s port is down (what `gda port <device> down` writes).
    fn down_marker(&self, device: &str) -> std::path::PathBuf {
        self.0.join("gda/ports").join(format!("{device}.down"))
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads `child`'s stdout line by line on a thread, so a test can wait for a line with a
/// deadline.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

fn wait_for(rx: &std::sync::mpsc::Receiver<String>, want: &str, seen: &mut Vec<String>) -> bool {
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                let hit = l.contains(want);
                seen.push(l);
                if hit {
                    return true;
                }
            }
            Err(_) => return false,
        }
    }
    false
}

/// Debian's `ibv_asyncwatch`, unmodified, blocks until an event and one is delivered (issue
/// 45): it opens `gda_mlx5_0` and waits (before, the async fd was non-blocking and it exited at
/// once with status 1); taking the device's port down host-wide — from this process, as
/// `gda port gda_mlx5_0 down` does — delivers `IBV_EVENT_PORT_ERR` to it, and `ibv_devinfo`
/// (a third process) reads `PORT_DOWN`; bringing it up delivers `IBV_EVENT_PORT_ACTIVE`.
#[test]
fn ibv_asyncwatch_receives_port_events() {
    let (Some(p), Some(devinfo)) = (
        system_program("/usr/bin/ibv_asyncwatch", "ibverbs-utils"),
        system_program("/usr/bin/ibv_devinfo", "ibverbs-utils"),
    ) else {
        return;
    };
    let rt = RuntimeDir::new("watch");
    let mut c = verbs_command(&p);
    c.args(["-d", "gda_mlx5_0"])
        .env("XDG_RUNTIME_DIR", &rt.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let rx = lines_of(&mut child);
    let mut seen = Vec::new();
    let opened = wait_for(&rx, "gda_mlx5_0: async event FD", &mut seen);
    std::thread::sleep(Duration::from_millis(300));
    let waiting = child.try_wait().unwrap().is_none();
    let state = || {
        let o = run_with_deadline(
            verbs_command(&devinfo)
                .args(["-d", "gda_mlx5_0"])
                .env("XDG_RUNTIME_DIR", &rt.0),
            LIMIT,
        );
        text(&o).0
    };
    std::fs::write(rt.down_marker("gda_mlx5_0"), b"").unwrap();
    let down = wait_for(&rx, "event_type IBV_EVENT_PORT_ERR (10), port 1", &mut seen);
    let down_state = state();
    std::fs::remove_file(rt.down_marker("gda_mlx5_0")).unwrap();
    let up = wait_for(
        &rx,
        "event_type IBV_EVENT_PORT_ACTIVE (9), port 1",
        &mut seen,
    );
    let up_state = state();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        opened && waiting,
        "ibv_asyncwatch did not open and wait: {seen:?}"
    );
    assert!(down, "no IBV_EVENT_PORT_ERR: {seen:?}");
    assert!(down_state.contains("PORT_DOWN (1)"), "{down_state}");
    assert!(up, "no IBV_EVENT_PORT_ACTIVE: {seen:?}");
    assert!(up_state.contains("PORT_ACTIVE (4)"), "{up_state}");
}

/// Asynchronous events (issue 45): a CQ that overruns raises one `IBV_EVENT_CQ_ERR` naming it,
/// delivered to a thread already blocked in `ibv_get_async_event` and waking `poll` on the
/// async fd; `O_NONBLOCK` gives `EAGAIN` on an empty queue; a CQ destroyed before its event was
/// taken leaves none behind; the port taken down host-wide raises `IBV_EVENT_PORT_ERR`, reads
/// `PORT_DOWN` and fails a WRITE with `RETRY_EXC_ERR`, and brought up raises
/// `IBV_EVENT_PORT_ACTIVE` and carries a fresh pair's WRITE — on both device families.
/// (Before, the software NIC raised no event: a waiter blocked forever, and a NULL event
/// pointer was not refused.)
#[test]
fn a_cq_overrun_raises_ibv_event_cq_err() {
    let exe = compile_c("async_event");
    let mut devices = 0;
    for dev in ["gda_mlx5_0", "gda_bnxt_0"] {
        let rt = RuntimeDir::new(dev);
        let o = run_with_deadline(
            verbs_command(&exe).arg(dev).env("XDG_RUNTIME_DIR", &rt.0),
            LIMIT,
        );
        let (out, err) = text(&o);
        println!("{dev}:\n{out}{err}");
        assert!(o.status.success(), "{dev} failed");
        assert_eq!(tally(&out), (28, 0), "{dev}");
        devices += 1;
    }
    assert_eq!(devices, 2);
}
