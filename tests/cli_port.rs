//! `gda port`: the software NIC's host-wide port state by device name, in a private runtime
//! directory — set, read and listed; bad names and a runtime directory another user could
//! have prepared are clear errors.
#![cfg(feature = "sim")]

use std::path::{Path, PathBuf};
use std::process::Command;

struct Xdg(PathBuf);

impl Xdg {
    fn new(tag: &str, mode: u32) -> Self {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let d = std::env::temp_dir().join(format!("gda-cli-port-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        Self(d)
    }
}

impl Drop for Xdg {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn port(xdg: &Path, args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_gda"))
        .arg("port")
        .args(args)
        .env("XDG_RUNTIME_DIR", xdg)
        .output()
        .expect("run gda port");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).trim().to_string(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn ports_go_down_and_up_by_name() {
    let x = Xdg::new("state", 0o700);
    let d = &x.0;
    assert_eq!(port(d, &[]).1, "no port is down");
    assert_eq!(port(d, &["gda_mlx5_0"]).1, "gda_mlx5_0: up");
    for dev in ["gda_mlx5_1", "gda_bnxt_0"] {
        let (ok, out, err) = port(d, &[dev, "down"]);
        assert!(ok, "{err}");
        assert_eq!(out, format!("{dev}: down"));
    }
    // Idempotent, and another device is untouched.
    assert!(port(d, &["gda_bnxt_0", "down"]).0);
    assert_eq!(port(d, &["gda_mlx5_0"]).1, "gda_mlx5_0: up");
    assert_eq!(port(d, &["gda_mlx5_1"]).1, "gda_mlx5_1: down");
    assert_eq!(port(d, &[]).1, "gda_bnxt_0: down\ngda_mlx5_1: down");
    // The state is a private file per down port.
    let marker = d.join("gda/ports/gda_mlx5_1.down");
    {
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::symlink_metadata(&marker)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, 0o600, "{}", marker.display());
    }
    assert_eq!(port(d, &["gda_mlx5_1", "up"]).1, "gda_mlx5_1: up");
    assert!(!marker.exists());
    assert!(port(d, &["gda_mlx5_1", "up"]).0, "up twice");
    assert_eq!(port(d, &[]).1, "gda_bnxt_0: down");
}

#[test]
fn bad_names_and_unsafe_directories_are_refused() {
    let x = Xdg::new("bad", 0o700);
    let mut refused = 0;
    for name in ["../etc", "a/b", "", "x y", &"n".repeat(65)] {
        let (ok, _, err) = port(&x.0, &[name, "down"]);
        assert!(!ok, "{name:?} accepted");
        assert!(err.contains("is not a device name"), "{name:?}: {err}");
        refused += 1;
    }
    assert_eq!(refused, 5);
    assert!(std::fs::read_dir(x.0.join("gda/ports")).map_or(true, |mut r| r.next().is_none()));
    // The state without a device.
    let (ok, _, err) = port(&x.0, &["down"]);
    assert!(!ok && err.contains("is a state, not a device"), "{err}");
    // An unknown state is clap's error.
    assert!(!port(&x.0, &["gda_mlx5_0", "sideways"]).0);
    // A runtime directory anyone may write into: someone else could take our ports down.
    let open = Xdg::new("open", 0o700);
    std::fs::create_dir(open.0.join("gda")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(open.0.join("gda"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
    }
    let (ok, _, err) = port(&open.0, &["gda_mlx5_0", "down"]);
    assert!(!ok);
    assert!(err.contains("mode 777") && err.contains("/gda"), "{err}");
}
