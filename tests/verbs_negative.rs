//! What a user bringing gda up on a RoCE cluster trips on, on both rdma-core control paths
//! (ConnectX: verbs + `mlx5dv_init_obj`; Thor2: verbs + `bnxt_re_dv_*`), each ending in an
//! error that says what to change: a missing library or symbol, a mismatched MTU, an `EINVAL`
//! on modify (naming the transition and every attribute), an unusable GID, and objects dropped
//! in the "wrong" order (which must still destroy cleanly). Run against the verbs-compatible
//! library; the cases are generic over the control-path seam.
#![cfg(feature = "verbs")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gda::hal::control::{
    Access, CqAttr, Device, Endpoint, InitAttr, MemoryDesc, Mtu, PathRequest, QpCaps, RtrAttr,
};
use gda_bnxt::host::BnxtDevice;
use gda_mlx5::host::Mlx5Device;
use gda_rdma::Verbs;

fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("verbs-sim")
}

fn verbs() -> Arc<Verbs> {
    Arc::new(Verbs::load_from(&lib_dir().join("libibverbs.so.1")).unwrap())
}

fn mlx5() -> Mlx5Device {
    Mlx5Device::open(verbs(), "gda_mlx5_0").unwrap_or_else(|e| panic!("{e}"))
}

fn bnxt() -> BnxtDevice {
    BnxtDevice::open(verbs(), "gda_bnxt_0").unwrap_or_else(|e| panic!("{e}"))
}

/// The path MTU is the smaller end's; an RTR that claims more than the peer has is refused
/// before it reaches the NIC, naming both MTUs.
fn mismatched_mtu<D: Device>(dev: &D) -> usize {
    let path = dev.path(PathRequest::default()).unwrap();
    assert_eq!(path.mtu, Mtu::B4096);
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(&CqAttr::new(64)).unwrap();
    let qa = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let qb = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let mut peer: Endpoint = qb.endpoint(&path);
    peer.mtu = Mtu::B1024;
    let attr = RtrAttr::new(&path, &peer).unwrap();
    assert_eq!(attr.path_mtu, Mtu::B1024, "the smaller end's MTU");
    let forced = RtrAttr {
        path_mtu: Mtu::B4096,
        ..attr
    };
    let qa = qa.init(&InitAttr::new(&path)).map_err(|r| r.error).unwrap();
    let refused = qa
        .rtr(&forced)
        .err()
        .expect("a path MTU above the peer's is refused");
    let msg = refused.error.to_string();
    assert!(msg.contains("path MTU 4096 above the peer's 1024"), "{msg}");
    // The QP comes back unchanged and connects with the right MTU.
    let qa = refused.qp.rtr(&attr).map_err(|r| r.error).unwrap();
    assert_eq!(qa.state(), "RTR");
    2
}

/// The NIC's `EINVAL` on INIT→RTR (a source GID index with no GID) names the transition and
/// every attribute it was given; the QP is handed back and the right attributes still work.
fn einval_names_the_transition_and_attributes<D: Device>(dev: &D) -> usize {
    let path = dev.path(PathRequest::default()).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(&CqAttr::new(64)).unwrap();
    let qa = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let qb = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let peer = qb.endpoint(&path);
    let good = RtrAttr::new(&path, &peer).unwrap();
    let bad = RtrAttr {
        sgid_index: 9,
        ..good
    };
    let qa = qa.init(&InitAttr::new(&path)).map_err(|r| r.error).unwrap();
    let refused = qa.rtr(&bad).err().expect("an empty source GID is refused");
    let msg = refused.error.to_string();
    let mut named = 0;
    for want in [
        "INIT→RTR",
        "ibv_modify_qp failed",
        "sgid_index=9",
        "path_mtu=5 (4096)",
        &format!("dest_qp_num={:#x}", peer.qpn),
        "is_global=1",
        "hop_limit=64",
        "static_rate=0",
    ] {
        assert!(msg.contains(want), "{want:?} missing from: {msg}");
        named += 1;
    }
    let qa = refused.qp.rtr(&good).map_err(|r| r.error).unwrap();
    assert_eq!(qa.state(), "RTR");
    named
}

/// Handles dropped in the order a careless user drops them — PD first, then the CQ its QP
/// uses, the device, the memory region, the QP last — destroy in verbs' order: no destroy
/// fails (`gda_rdma::destroy_failures`), and nothing of the device is left behind.
fn drop_in_any_order<D: Device>(dev: D) -> usize {
    let before = gda_rdma::destroy_failures();
    let path = dev.path(PathRequest::default()).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let cq = dev.create_cq(&CqAttr::new(64)).unwrap();
    let qa = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let qb = dev.create_rc_qp(&pd, &cq, &cq, &QpCaps::default()).unwrap();
    let ea = qa.endpoint(&path);
    let qa = qa
        .connect(&path, &qb.endpoint(&path))
        .map_err(|r| r.error)
        .unwrap();
    let qb = qb.connect(&path, &ea).map_err(|r| r.error).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the region (dropped below, before `buf`).
    let mr = unsafe {
        dev.register(
            &pd,
            &MemoryDesc::Host {
                addr: buf.as_mut_ptr(),
                len: buf.len(),
            },
            Access::ALL,
        )
    }
    .unwrap();
    drop(pd);
    drop(cq);
    drop(dev);
    drop(mr);
    drop(qb);
    drop(qa);
    drop(buf);
    assert_eq!(
        gda_rdma::destroy_failures(),
        before,
        "a destroy failed (see stderr)"
    );
    1
}

#[test]
fn mismatched_mtu_is_refused_with_both_mtus() {
    assert_eq!(mismatched_mtu(&mlx5()) + mismatched_mtu(&bnxt()), 4);
}

#[test]
fn einval_on_modify_names_transition_and_attributes() {
    assert_eq!(
        einval_names_the_transition_and_attributes(&mlx5())
            + einval_names_the_transition_and_attributes(&bnxt()),
        16
    );
}

#[test]
fn objects_dropped_in_any_order_destroy_cleanly() {
    assert_eq!(drop_in_any_order(mlx5()) + drop_in_any_order(bnxt()), 2);
}

#[test]
fn an_unusable_gid_is_a_clear_error_on_bnxt() {
    let e = bnxt()
        .path(PathRequest {
            port: None,
            gid_index: Some(9),
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("GID index 9 is not populated"),
        "{e}"
    );
}

#[test]
fn a_connectx_is_not_opened_as_a_thor2() {
    let e = BnxtDevice::open(verbs(), "gda_mlx5_0").unwrap_err();
    assert!(
        e.to_string().contains("not a Broadcom NetXtreme-E/Thor2"),
        "{e}"
    );
}

/// The provider libraries chosen by environment variable: a missing file and a library
/// without the entry points are clear errors naming the path, the symbol and what to install.
/// Each case runs in a child process of this test binary (the variables are process-wide).
#[test]
fn missing_provider_library_or_symbol_is_a_clear_error() {
    let mut cases = 0;
    for (var, value, which, want) in [
        (
            "GDA_BNXT_LIB",
            "/nonexistent/libbnxt_re.so",
            "bnxt",
            vec![
                "/nonexistent/libbnxt_re.so",
                "Broadcom's libbnxt_re with direct verbs",
            ],
        ),
        (
            "GDA_BNXT_LIB",
            "libc.so.6",
            "bnxt",
            vec![
                "libc.so.6 has no bnxt_re_dv_get_default_db_region",
                "GDA_BNXT_LIB",
            ],
        ),
        (
            "GDA_MLX5_LIB",
            "/nonexistent/libmlx5.so.1",
            "mlx5",
            vec!["/nonexistent/libmlx5.so.1"],
        ),
        ("GDA_MLX5_LIB", "libc.so.6", "mlx5", vec!["mlx5dv_init_obj"]),
    ] {
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "open_probe", "--ignored", "--nocapture"])
            .env(var, value)
            .env("GDA_TEST_OPEN_PROBE", which)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let line = out
            .lines()
            .find(|l| l.starts_with("probe: "))
            .unwrap_or_else(|| panic!("{var}={value}: no probe line in {out}"));
        for w in want {
            assert!(
                line.contains(w),
                "{var}={value}: {w:?} missing from: {line}"
            );
        }
        cases += 1;
    }
    assert_eq!(cases, 4);
}

/// Run by `missing_provider_library_or_symbol_is_a_clear_error` in a child process with
/// `GDA_TEST_OPEN_PROBE` set (`mlx5` or `bnxt`): opens that device and prints the outcome.
/// Without the variable it does nothing.
#[test]
#[ignore = "a helper the missing-library test runs in a child process"]
fn open_probe() {
    let msg = match std::env::var("GDA_TEST_OPEN_PROBE").as_deref() {
        Ok("bnxt") => BnxtDevice::open(verbs(), "gda_bnxt_0").map(|_| ()),
        Ok("mlx5") => Mlx5Device::open(verbs(), "gda_mlx5_0")
            .map(|_| ())
            .map_err(|e| gda_bnxt::host::BnxtHostError::Provider(e.to_string())),
        _ => return,
    };
    match msg {
        Ok(()) => println!("probe: opened"),
        Err(e) => println!("probe: {e}"),
    }
}
