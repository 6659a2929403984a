//! Placement over hwloc XML of realistic nodes (`tests/fixtures/*.xml`, written by
//! `scripts/topology-fixtures.py`): each test asserts every local rank's whole binding.

use gda_topo::{DeviceList, NicMap, Node, Path, Request, Source, select};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The node in `name`, read from the file as hwloc wrote it.
fn node(name: &str) -> Node {
    Node::from_xml(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

/// Each rank as `(gpu, [nic:path…], cpus)`.
fn table(n: &Node, req: &Request) -> Vec<(Option<String>, Vec<String>, String)> {
    select(n, req)
        .unwrap()
        .iter()
        .map(|b| {
            (
                b.gpu.map(|g| g.to_string()),
                b.rails
                    .iter()
                    .map(|r| format!("{}:{}", r.nic, r.path))
                    .collect(),
                gda_os::cpu::format_list(&b.cpus),
            )
        })
        .collect()
}

fn row(gpu: &str, nics: &[&str], cpus: &str) -> (Option<String>, Vec<String>, String) {
    (
        (!gpu.is_empty()).then(|| gpu.to_string()),
        nics.iter().map(|s| (*s).to_string()).collect(),
        cpus.to_string(),
    )
}

const H100_BUSES: [&str; 8] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
];

#[test]
fn eight_gpus_eight_nics_one_per_switch_each_rank_gets_its_own() {
    let n = node("8gpu-8nic-switch.xml");
    assert_eq!(
        (n.packages, n.numa.len(), n.gpus.len(), n.nics.len()),
        (2, 2, 8, 8)
    );
    let want: Vec<_> = (0..8)
        .map(|r| {
            let nic = format!("mlx5_{r}:PIX");
            row(H100_BUSES[r], &[&nic], if r < 4 { "0-7" } else { "8-15" })
        })
        .collect();
    assert_eq!(table(&n, &Request::new(8)), want);
    // The matrix as nvidia-smi topo -m prints it: PIX on the diagonal, NODE on the socket,
    // SYS across.
    let mut counted = 0;
    for g in 0..8 {
        for k in 0..8 {
            let want = if g == k {
                Path::Pix
            } else if g / 4 == k / 4 {
                Path::Node
            } else {
                Path::Sys
            };
            assert_eq!(n.gpu_nic_path(g, k), want, "GPU{g} mlx5_{k}");
            counted += 1;
        }
    }
    assert_eq!(counted, 64);
    assert_eq!(n.gpus[0].name, "cuda0");
    assert_eq!(n.nics[0].netdevs, ["ibp25s0"]);
}

#[test]
fn eight_gpus_four_nics_pairs_share_the_nic_behind_their_switch() {
    let n = node("8gpu-4nic-pairs.xml");
    assert_eq!((n.gpus.len(), n.nics.len()), (8, 4));
    let want: Vec<_> = (0..8)
        .map(|r| {
            let nic = format!("mlx5_{}:PIX", r / 2);
            row(H100_BUSES[r], &[&nic], if r < 4 { "0-7" } else { "8-15" })
        })
        .collect();
    assert_eq!(table(&n, &Request::new(8)), want);
}

#[test]
fn on_two_sockets_a_rank_crosses_only_when_its_socket_has_no_nic() {
    let n = node("2socket-cross.xml");
    assert_eq!((n.gpus.len(), n.nics.len()), (8, 4));
    let t = table(&n, &Request::new(8));
    let gpus = [
        "0000:0c:00.0",
        "0000:22:00.0",
        "0000:38:00.0",
        "0000:5c:00.0",
        "0000:9f:00.0",
        "0000:af:00.0",
        "0000:bf:00.0",
        "0000:df:00.0",
    ];
    let want: Vec<_> = (0..8)
        .map(|r| {
            let nic = if r < 4 {
                format!("bnxt_re{r}:PIX")
            } else {
                // No NIC on socket 1: across, spread so each NIC serves two ranks.
                format!("bnxt_re{}:SYS", r - 4)
            };
            row(gpus[r], &[&nic], if r < 4 { "0-7" } else { "8-15" })
        })
        .collect();
    assert_eq!(t, want);
    assert_eq!(n.gpus[4].name, "rsmi4");
}

#[test]
fn a_node_without_gpus_spreads_ranks_over_its_nics() {
    let n = node("nics-no-gpu.xml");
    assert_eq!((n.gpus.len(), n.nics.len(), n.numa.len()), (0, 2, 1));
    let want: Vec<_> = (0..4)
        .map(|r| {
            let nic = format!("mlx5_{}:NODE", r % 2);
            row("", &[&nic], "0-7")
        })
        .collect();
    assert_eq!(table(&n, &Request::new(4)), want);
}

#[test]
fn two_rails_take_the_nearest_then_the_nearest_free_and_use_each_nic_twice() {
    let n = node("8gpu-8nic-switch.xml");
    let req = Request {
        rails: 2,
        ..Request::new(8)
    };
    let t = select(&n, &req).unwrap();
    let mut uses = [0; 8];
    for b in &t {
        assert_eq!(b.rails.len(), 2);
        assert_eq!(
            b.rails[0].nic,
            format!("mlx5_{}", b.rank),
            "rank {}",
            b.rank
        );
        assert_eq!(b.rails[0].path, Path::Pix);
        assert_eq!(
            b.rails[1].path,
            Path::Node,
            "rank {}: second rail on its socket",
            b.rank
        );
        assert_ne!(b.rails[0].nic, b.rails[1].nic);
        for r in &b.rails {
            uses[r.nic[5..].parse::<usize>().unwrap()] += 1;
        }
    }
    assert_eq!(uses, [2; 8], "each NIC serves exactly two rails");
    // More rails than NICs: each rank uses every NIC once.
    let all = select(
        &n,
        &Request {
            rails: 64,
            ..Request::new(2)
        },
    )
    .unwrap();
    assert!(all.iter().all(|b| b.rails.len() == 8));
}

#[test]
fn device_lists_and_maps_override_the_choice() {
    let n = node("8gpu-8nic-switch.xml");
    // Only two devices, one on another port: every rank takes the nearer of the two, and
    // no NIC serves more than four.
    let req = Request {
        devices: DeviceList::parse("mlx5_0,mlx5_4:2", "list").unwrap(),
        ..Request::new(8)
    };
    let t = select(&n, &req).unwrap();
    let got: Vec<(String, Option<u8>, Path)> = t
        .iter()
        .map(|b| (b.rails[0].nic.clone(), b.rails[0].port, b.rails[0].path))
        .collect();
    let want: Vec<(String, Option<u8>, Path)> = (0..8)
        .map(|r| match r {
            0 => ("mlx5_0".into(), None, Path::Pix),
            1..=3 => ("mlx5_0".into(), None, Path::Node),
            4 => ("mlx5_4".into(), Some(2), Path::Pix),
            _ => ("mlx5_4".into(), Some(2), Path::Node),
        })
        .collect();
    assert_eq!(got, want);
    // All but one: the rank whose NIC is left out takes a free one on its socket.
    let req = Request {
        devices: DeviceList::parse("^mlx5_2", "list").unwrap(),
        ..Request::new(8)
    };
    let t = select(&n, &req).unwrap();
    let nics: Vec<&str> = t.iter().map(|b| b.rails[0].nic.as_str()).collect();
    assert_eq!(
        nics,
        [
            "mlx5_0", "mlx5_1", "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"
        ]
    );
    assert_eq!(t[2].rails[0].path, Path::Node);
    // Leaving out a device the node does not have changes nothing (discovery may have left
    // it out already).
    let req = Request {
        devices: DeviceList::parse("^mlx5_9,mlx5_2", "list").unwrap(),
        ..Request::new(8)
    };
    assert_eq!(select(&n, &req).unwrap(), t);
    // A map: the ranks it names get exactly those; the others are placed as usual.
    let req = Request {
        map: NicMap::parse("0=mlx5_7, 3=mlx5_0+mlx5_1:1", "map").unwrap(),
        ..Request::new(8)
    };
    let t = select(&n, &req).unwrap();
    let rails: Vec<Vec<String>> = t
        .iter()
        .map(|b| {
            b.rails
                .iter()
                .map(|r| format!("{}:{}", r.nic, r.path))
                .collect()
        })
        .collect();
    assert_eq!(rails[0], ["mlx5_7:SYS"]);
    assert_eq!(rails[3], ["mlx5_0:NODE", "mlx5_1:NODE"]);
    assert_eq!(rails[5], ["mlx5_5:PIX"]);
}

#[test]
fn bad_lists_and_maps_are_clear_errors_naming_what_the_node_has() {
    let n = node("8gpu-4nic-pairs.xml");
    let have = "mlx5_0, mlx5_1, mlx5_2, mlx5_3";
    let mut checked = 0;
    for (list, want) in [
        (
            "mlx5_9",
            format!("no RDMA device mlx5_9 on this node (it has: {have})"),
        ),
        (
            "^mlx5_0,mlx5_1,mlx5_2,mlx5_3",
            format!("no RDMA device left to use (the node has: {have})"),
        ),
    ] {
        let req = Request {
            devices: DeviceList::parse(list, "GDA_RDMA_DEVICES").unwrap(),
            ..Request::new(2)
        };
        let e = select(&n, &req).unwrap_err().to_string();
        assert!(
            e.starts_with("GDA_RDMA_DEVICES: ") && e.contains(&want),
            "{list}: {e}"
        );
        checked += 1;
    }
    for (bad, want) in [
        ("mlx5_0:0", "port \"0\" is not 1..=255"),
        ("mlx5_0:x", "port \"x\" is not 1..=255"),
        ("mlx5_0,,mlx5_1", "\"\" is not a device name"),
        ("mlx5_0,mlx5_0", "mlx5_0 is listed twice"),
        ("^mlx5_0:1", "a port means nothing on a device left out"),
        ("../x", "is not a device name"),
    ] {
        let e = DeviceList::parse(bad, "GDA_RDMA_DEVICES")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{bad}: {e}");
        checked += 1;
    }
    for (bad, want) in [
        ("0:mlx5_0", "is not rank=device"),
        ("x=mlx5_0", "is not a rank"),
        ("0=mlx5_0,0=mlx5_1", "rank 0 is mapped twice"),
    ] {
        let e = NicMap::parse(bad, "GDA_NIC_MAP").unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
        checked += 1;
    }
    let e = select(
        &n,
        &Request {
            map: NicMap::parse("5=mlx5_0", "m").unwrap(),
            ..Request::new(2)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("rank 5 is not a local rank (0..2)"), "{e}");
    let e = select(
        &n,
        &Request {
            map: NicMap::parse("1=mlx5_8", "m").unwrap(),
            ..Request::new(2)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(&format!(
            "rank 1: no RDMA device mlx5_8 on this node (it has: {have})"
        )),
        "{e}"
    );
    assert_eq!(checked, 11);
}

#[test]
fn what_is_not_an_hwloc_topology_is_refused() {
    for (xml, want) in [
        ("not xml", "not XML"),
        ("<lstopo/>", "not an hwloc topology"),
        ("<topology version=\"2.0\"></topology>", "without objects"),
    ] {
        let e = Node::from_xml(xml).unwrap_err().to_string();
        assert!(e.contains(want), "{xml}: {e}");
    }
}

/// hwloc itself (loaded at run time) reads each fixture and exports it; what gda reads from
/// that is what it reads from the file. Needs `libhwloc.so.15` (`.ci/run` installs it).
#[test]
fn hwloc_reads_every_fixture_as_gda_does() {
    if let Err(e) = gda_topo::hwloc::version() {
        assert!(std::env::var_os("CI").is_none(), "CI without hwloc: {e}");
        eprintln!("SKIPPED: {e}");
        return;
    }
    let mut compared = 0;
    for f in [
        "8gpu-8nic-switch.xml",
        "8gpu-4nic-pairs.xml",
        "2socket-cross.xml",
        "nics-no-gpu.xml",
    ] {
        let via = gda_topo::discover(&Source::Xml(fixture(f))).unwrap();
        let direct = node(f);
        assert_eq!(via.gpus.len(), direct.gpus.len(), "{f}");
        assert_eq!(via.nics.len(), direct.nics.len(), "{f}");
        let req = Request::new(8);
        assert_eq!(table(&via, &req), table(&direct, &req), "{f}");
        compared += 1;
    }
    assert_eq!(compared, 4);
    // This machine, too (a VM: usually no GPU and no RDMA NIC; it must still load).
    let here = gda_topo::discover(&Source::Host).unwrap();
    assert!(!here.cpus.is_empty());
}
