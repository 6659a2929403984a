//! The loader and discovery against the verbs-compatible library (`gda-verbs`, built as a
//! dev-dependency into `target/<profile>/verbs-sim/`), and the errors of a missing library
//! or symbol.

use std::path::{Path, PathBuf};

use gda_hal::control::{GidType, LinkLayer, Mtu, PortState};
use gda_rdma::{LoadError, Verbs};

fn verbs_sim() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("verbs-sim");
    let lib = dir.join("libibverbs.so.1");
    assert!(
        lib.exists(),
        "{} missing: cargo build -p gda-verbs",
        lib.display()
    );
    lib
}

#[test]
fn discovers_the_software_nics_through_rdma_core_abi() {
    let v = Verbs::load_from(&verbs_sim()).expect("load the verbs-compatible library");
    assert!(
        v.fns().query_gid_ex.is_some(),
        "_ibv_query_gid_ex@IBVERBS_1.11 resolves"
    );
    assert!(v.fns().reg_dmabuf_mr.is_some());
    let devs = v.devices().expect("discovery");
    let names: Vec<&str> = devs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["gda_mlx5_0", "gda_bnxt_0"]);
    let mut checked = 0;
    for (d, vendor) in [(&devs[0], 0x02c9), (&devs[1], 0x14e4)] {
        // gda-rdma names no provider: the vendor table claims devices by vendor id
        // (tests/provider_table.rs).
        assert_eq!(d.provider, "unknown");
        assert_eq!(d.vendor_id, vendor);
        assert!(d.max_qp_wr >= 1024 && d.max_cqe >= 1024 && d.max_sge >= 1);
        assert_eq!(d.ports.len(), 1);
        let p = &d.ports[0];
        assert_eq!(p.state, PortState::Active);
        assert_eq!(p.link_layer, LinkLayer::Ethernet);
        assert_eq!(p.active_mtu, Mtu::B4096);
        let kinds: Vec<GidType> = p.gids.iter().map(|g| g.kind).collect();
        assert_eq!(
            kinds,
            [
                GidType::RoceV1,
                GidType::RoceV2,
                GidType::RoceV1,
                GidType::RoceV2
            ]
        );
        // Index 3: IPv4-mapped RoCE v2, what path selection prefers.
        assert_eq!(
            p.gids[3].gid.0[..12],
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        );
        let chosen = gda_hal::control::select_path(d, gda_hal::control::PathRequest::default())
            .expect("a usable path");
        assert_eq!(chosen.gid.index, 3, "{chosen:?}");
        checked += 1;
    }
    assert_eq!(checked, 2);
}

#[test]
fn a_missing_library_is_a_clear_error() {
    let e = Verbs::load_from(Path::new("/nonexistent/libibverbs.so.1")).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, LoadError::Library { .. }), "{e:?}");
    assert!(msg.contains("/nonexistent/libibverbs.so.1"), "{msg}");
    assert!(msg.contains("apt-get install libibverbs1"), "{msg}");
    assert!(msg.contains("GDA_IBVERBS_LIB"), "{msg}");
}

#[test]
fn a_library_without_the_symbols_is_a_clear_error() {
    // libm is on every machine and has no ibv_* symbol.
    let e = Verbs::load_from(Path::new("libm.so.6")).unwrap_err();
    match &e {
        LoadError::Symbol {
            symbol, version, ..
        } => {
            assert_eq!(*symbol, "ibv_get_device_list");
            assert_eq!(*version, "IBVERBS_1.1");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string()
            .contains("libm.so.6 has no ibv_get_device_list"),
        "{e}"
    );
}
