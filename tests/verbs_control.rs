//! The ConnectX control path over rdma-core loaded at run time (`gda_mlx5::host`), pointed at
//! the verbs-compatible library: a device opened by name, PD, registration, CQs and RC QPs
//! brought up through the typed transitions with byte-exchanged endpoints, and gda's own
//! `SendQueue<Mlx5>` posting into the rings `mlx5dv_init_obj` handed out — executed by the
//! software NIC behind the library.
#![cfg(feature = "verbs")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gda_hal::control::{
    Access, CompletionQueue, CqAttr, Device, Endpoint, GidType, MemoryDesc, MemoryRegion,
    PathRequest, QpCaps,
};
use gda_hal::{AtomicOp, Payload, Remote, SendFlags, SendQueue, Sge, WorkRequest};
use gda_mlx5::Mlx5;
use gda_mlx5::host::Mlx5Device;
use gda_rdma::Verbs;

fn verbs() -> Arc<Verbs> {
    let exe = std::env::current_exe().unwrap();
    let lib: PathBuf = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("verbs-sim/libibverbs.so.1");
    Arc::new(Verbs::load_from(&lib).expect("load the verbs-compatible library"))
}

#[test]
fn mlx5_control_path_brings_up_qps_and_the_device_functions_drive_them() {
    // libmlx5.so.1 comes from beside the libibverbs in use (the verbs-sim directory), not
    // from the system: a system libmlx5 would be handed objects it does not know.
    let dev = Mlx5Device::open(verbs(), "gda_mlx5_0").unwrap_or_else(|e| panic!("{e}"));
    let path = dev.path(PathRequest::default()).unwrap();
    assert_eq!(
        (path.gid.index, path.gid.kind),
        (3, GidType::RoceV2),
        "IPv4-mapped RoCE v2"
    );
    assert_eq!(loopback_ops(&dev), 4);
}

/// The same on a real ConnectX: `GDA_HW_DEVICE=mlx5_0 cargo test --release --features verbs
/// --test verbs_control -- --ignored` (rdma-core from the system, or `GDA_IBVERBS_LIB`).
#[test]
#[ignore = "needs a ConnectX NIC: set GDA_HW_DEVICE"]
fn hardware_mlx5_loopback() {
    let name = std::env::var("GDA_HW_DEVICE").expect("GDA_HW_DEVICE names the ConnectX to use");
    let verbs = Arc::new(Verbs::load().unwrap_or_else(|e| panic!("{e}")));
    let dev = Mlx5Device::open(verbs, &name).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loopback_ops(&dev), 4);
}

/// Two QPs of `dev` connected to each other; inline and gathered WRITE, READ and FADD through
/// `SendQueue<Mlx5>`; returns the checks that passed.
fn loopback_ops(dev: &Mlx5Device) -> usize {
    let path = dev.path(PathRequest::default()).unwrap();
    let pd = dev.alloc_pd().unwrap();
    // SendQueue needs a CQ that holds the whole send window (the ring is sized in 64-byte units).
    let cq_a = dev.create_cq(&CqAttr::new(4096)).unwrap();
    let cq_b = dev.create_cq(&CqAttr::new(4096)).unwrap();
    let caps = QpCaps::default();
    let qa = dev.create_rc_qp(&pd, &cq_a, &cq_a, &caps).unwrap();
    let qb = dev.create_rc_qp(&pd, &cq_b, &cq_b, &caps).unwrap();
    let ep_a = Endpoint::from_bytes(&qa.endpoint(&path).to_bytes()).unwrap();
    let ep_b = Endpoint::from_bytes(&qb.endpoint(&path).to_bytes()).unwrap();
    let qa = qa.connect(&path, &ep_b).map_err(|r| r.error).unwrap();
    let _qb = qb.connect(&path, &ep_a).map_err(|r| r.error).unwrap();

    let mut src = vec![0u8; 4096];
    let mut dst = vec![0u8; 4096];
    // SAFETY: both buffers outlive their regions and every operation (quiet below).
    let (smr, dmr) = unsafe {
        (
            dev.register(
                &pd,
                &MemoryDesc::Host {
                    addr: src.as_mut_ptr(),
                    len: src.len(),
                },
                Access::ALL,
            )
            .unwrap(),
            dev.register(
                &pd,
                &MemoryDesc::Host {
                    addr: dst.as_mut_ptr(),
                    len: dst.len(),
                },
                Access::ALL,
            )
            .unwrap(),
        )
    };
    // SAFETY: the QP and CQ outlive the queue, its only poster and poller.
    let sq =
        unsafe { SendQueue::<Mlx5>::new(qa.sq_handle().unwrap(), cq_a.handle(), 10_000) }.unwrap();
    let mut checks = 0;
    // Inline WRITE.
    sq.post(
        &WorkRequest::Write {
            remote: Remote {
                addr: dmr.addr(),
                rkey: dmr.rkey(),
            },
            payload: Payload::Inline(b"through rdma-core"),
            imm: None,
        },
        SendFlags::empty(),
    )
    .unwrap();
    sq.quiet().unwrap();
    assert_eq!(&dst[..17], b"through rdma-core");
    checks += 1;
    // Gathered WRITE of 2 KiB.
    for (i, b) in src.iter_mut().enumerate() {
        *b = (i * 7) as u8;
    }
    let sge = [Sge {
        addr: smr.addr(),
        length: 2048,
        lkey: smr.lkey(),
    }];
    sq.post(
        &WorkRequest::Write {
            remote: Remote {
                addr: dmr.addr() + 1024,
                rkey: dmr.rkey(),
            },
            payload: Payload::Sges(&sge),
            imm: None,
        },
        SendFlags::empty(),
    )
    .unwrap();
    sq.quiet().unwrap();
    assert_eq!(&dst[1024..3072], &src[..2048]);
    checks += 1;
    // READ back into src.
    let back = [Sge {
        addr: smr.addr() + 3000,
        length: 17,
        lkey: smr.lkey(),
    }];
    sq.post(
        &WorkRequest::Read {
            remote: Remote {
                addr: dmr.addr(),
                rkey: dmr.rkey(),
            },
            sges: &back,
        },
        SendFlags::empty(),
    )
    .unwrap();
    sq.quiet().unwrap();
    assert_eq!(&src[3000..3017], b"through rdma-core");
    checks += 1;
    // FADD on an 8-byte word.
    dst[4000..4008].copy_from_slice(&40u64.to_ne_bytes());
    sq.post(
        &WorkRequest::Atomic {
            remote: Remote {
                addr: dmr.addr() + 4000,
                rkey: dmr.rkey(),
            },
            local: Sge {
                addr: smr.addr() + 4000,
                length: 8,
                lkey: smr.lkey(),
            },
            op: AtomicOp::FetchAdd { add: 2 },
            bytes: 8,
        },
        SendFlags::empty(),
    )
    .unwrap();
    sq.quiet().unwrap();
    assert_eq!(u64::from_ne_bytes(dst[4000..4008].try_into().unwrap()), 42);
    checks += 1;
    // Objects may be dropped in any order: each keeps what it depends on.
    drop(pd);
    drop(cq_a);
    drop(qa);
    drop((smr, dmr));
    checks
}

#[test]
fn a_bnxt_device_is_not_opened_as_connectx() {
    let e = Mlx5Device::open(verbs(), "gda_bnxt_0").unwrap_err();
    assert!(e.to_string().contains("not a ConnectX"), "{e}");
    let e = Mlx5Device::open(verbs(), "gda_nope_0").unwrap_err();
    assert!(
        e.to_string().contains("no RDMA device \"gda_nope_0\""),
        "{e}"
    );
}

#[test]
fn an_unusable_gid_is_a_clear_error() {
    let dev = Mlx5Device::open(verbs(), "gda_mlx5_0").unwrap_or_else(|e| panic!("{e}"));
    let mut refused = 0;
    for (index, want) in [(9, "GID index 9 is not populated"), (300, "GID index 300")] {
        let e = dev
            .path(PathRequest {
                port: None,
                gid_index: Some(index),
            })
            .unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
        refused += 1;
    }
    let e = dev
        .path(PathRequest {
            port: Some(2),
            gid_index: None,
        })
        .unwrap_err();
    assert!(e.to_string().contains("port 2"), "{e}");
    assert_eq!(refused, 2);
}
