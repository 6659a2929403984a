//! `gda_sim::port`: the host-wide port state — a watch is called when another party takes the
//! port down or brings it up (through the directory, as another process would), once per
//! change, not for other devices, and still after the directory is removed and made again.
//! One test: it sets `XDG_RUNTIME_DIR` for the process.

use std::sync::mpsc;
use std::time::Duration;

#[test]
fn a_watch_follows_its_port_and_no_other() {
    use std::os::unix::fs::DirBuilderExt;
    let xdg = std::env::temp_dir().join(format!("gda-sim-port-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&xdg);
    std::fs::DirBuilder::new().mode(0o700).create(&xdg).unwrap();
    // SAFETY: the only test of this binary, before any thread of ours reads the environment.
    unsafe { std::env::set_var("XDG_RUNTIME_DIR", &xdg) };
    let dir = gda_sim::port::dir().unwrap();
    assert_eq!(dir, xdg.join("gda/ports"));
    // Down before the watch: the state returned says so.
    gda_sim::port::set_up("gda_mlx5_3", false).unwrap();
    let (tx, rx) = mpsc::channel();
    let mut seen = None;
    let (up, w) = gda_sim::port::watch(
        "gda_mlx5_3",
        |up| seen = Some(up),
        move |up| tx.send(up).unwrap(),
    )
    .unwrap();
    assert!(!up, "down before the watch");
    assert_eq!(seen, Some(false), "init told the state");
    let (tx2, rx2) = mpsc::channel();
    let (up2, w2) =
        gda_sim::port::watch("gda_bnxt_0", |_| (), move |up| tx2.send(up).unwrap()).unwrap();
    assert!(up2);
    let next = |rx: &mpsc::Receiver<bool>| rx.recv_timeout(Duration::from_secs(5)).ok();
    // Up, through the file another process would remove.
    std::fs::remove_file(dir.join("gda_mlx5_3.down")).unwrap();
    assert_eq!(next(&rx), Some(true));
    assert!(gda_sim::port::is_up("gda_mlx5_3").unwrap());
    // Down and up through the API; idempotent calls change nothing.
    gda_sim::port::set_up("gda_mlx5_3", false).unwrap();
    assert_eq!(next(&rx), Some(false));
    gda_sim::port::set_up("gda_mlx5_3", false).unwrap();
    gda_sim::port::set_up("gda_mlx5_3", true).unwrap();
    assert_eq!(next(&rx), Some(true));
    assert_eq!(gda_sim::port::down().unwrap(), Vec::<String>::new());
    // The other device's watch saw none of it.
    assert_eq!(rx2.recv_timeout(Duration::from_millis(200)).ok(), None);
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "one call per change"
    );
    // A dropped watch is called no more.
    drop(w);
    gda_sim::port::set_up("gda_mlx5_3", false).unwrap();
    gda_sim::port::set_up("gda_bnxt_0", false).unwrap();
    assert_eq!(next(&rx2), Some(false));
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "dropped"
    );
    assert_eq!(
        gda_sim::port::down().unwrap(),
        vec!["gda_bnxt_0".to_string(), "gda_mlx5_3".to_string()]
    );
    assert!(gda_sim::port::watch("no/such", |_| (), |_| ()).is_err());
    // The directory removed under the watch (a tmp cleaner, logind at logout): its ports are
    // up, and the watch follows the directory made again.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(next(&rx2), Some(true), "markers gone with the directory");
    gda_sim::port::set_up("gda_bnxt_0", false).unwrap();
    assert_eq!(next(&rx2), Some(false), "seen in the directory made again");
    drop(w2);
    // The port thread makes `ports/` again while it goes: retry until it is gone for good.
    for _ in 0..100 {
        if std::fs::remove_dir_all(&xdg).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!xdg.exists());
}
