//! `gda devices`: the NICs gda can drive — real ones (and the verbs-compatible library's) found
//! through rdma-core, and the in-process software NIC — as `ibv_devinfo` shows them, or JSON.

use serde_json::{Value, json};

/// What `gda devices` found.
pub struct Listing {
    /// The rdma-core library opened, or why none could be.
    pub library: Result<String, String>,
    /// Its devices (empty when it could not be opened or lists none).
    pub devices: Vec<gda_hal::control::DeviceInfo>,
    /// Discovery failed after the library loaded.
    pub discover_error: Option<String>,
    /// The in-process software NIC's device models (always available).
    pub sim_models: Vec<&'static str>,
}

/// Looks for NICs: rdma-core through `GDA_IBVERBS_LIB` or the loader's search path.
pub fn list() -> Listing {
    #[cfg(feature = "sim")]
    let sim_models = gda_providers::NAMES.to_vec();
    #[cfg(not(feature = "sim"))]
    let sim_models = Vec::new();
    #[cfg(feature = "verbs")]
    {
        match gda_rdma::Verbs::load() {
            Ok(v) => {
                let (devices, discover_error) = match gda_providers::host::devices(&v) {
                    Ok(d) => (d, None),
                    Err(e) => (Vec::new(), Some(e.to_string())),
                };
                Listing {
                    library: Ok(v.path().to_owned()),
                    devices,
                    discover_error,
                    sim_models,
                }
            }
            Err(e) => Listing {
                library: Err(e.to_string()),
                devices: Vec::new(),
                discover_error: None,
                sim_models,
            },
        }
    }
    #[cfg(not(feature = "verbs"))]
    Listing {
        library: Err(
            "this gda was built without the `verbs` feature, which loads rdma-core \
             (cargo build --release --features verbs)"
                .into(),
        ),
        devices: Vec::new(),
        discover_error: None,
        sim_models,
    }
}

fn gid_text(g: &[u8; 16]) -> String {
    if g[..10] == [0; 10] && g[10..12] == [0xff, 0xff] {
        return format!("::ffff:{}.{}.{}.{}", g[12], g[13], g[14], g[15]);
    }
    g.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

fn kind_text(k: gda_hal::control::GidType) -> &'static str {
    match k {
        gda_hal::control::GidType::Ib => "IB",
        gda_hal::control::GidType::RoceV1 => "RoCE v1",
        gda_hal::control::GidType::RoceV2 => "RoCE v2",
    }
}

/// The listing as JSON (for scripts).
pub fn to_json(l: &Listing) -> Value {
    let devices: Vec<Value> = l
        .devices
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "provider": d.provider,
                "vendor_id": d.vendor_id,
                "vendor_part_id": d.vendor_part_id,
                "fw_ver": d.fw_ver,
                "max_qp_wr": d.max_qp_wr,
                "max_cqe": d.max_cqe,
                "max_sge": d.max_sge,
                "max_rd_atomic": d.max_rd_atomic,
                "ports": d.ports.iter().map(|p| json!({
                    "port": p.port,
                    "state": format!("{:?}", p.state),
                    "link_layer": format!("{:?}", p.link_layer),
                    "active_mtu": p.active_mtu.bytes(),
                    "max_mtu": p.max_mtu.bytes(),
                    "lid": p.lid,
                    "pkeys": p.pkeys,
                    "gids": p.gids.iter().map(|g| json!({
                        "index": g.index,
                        "type": kind_text(g.kind),
                        "gid": gid_text(&g.gid.0),
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "library": l.library.as_ref().ok(),
        "library_error": l.library.as_ref().err(),
        "discover_error": l.discover_error,
        "devices": devices,
        "software_nic": { "in_process": true, "models": l.sim_models },
    })
}

/// The listing as text, like `ibv_devinfo`.
pub fn to_text(l: &Listing) -> String {
    let mut s = String::new();
    match &l.library {
        Ok(p) => s += &format!("rdma-core: {p}\n"),
        Err(e) => s += &format!("rdma-core: not available: {e}\n"),
    }
    if let Some(e) = &l.discover_error {
        s += &format!("discovery failed: {e}\n");
    }
    if l.library.is_ok() && l.devices.is_empty() && l.discover_error.is_none() {
        s += "no RDMA devices (none in the kernel, or none matching GDA_RDMA_DEVICES)\n";
    }
    for d in &l.devices {
        s += &format!(
            "\n{}\n  provider {}  vendor {:#06x} part {}  fw {}\n  max_qp_wr {}  max_cqe {}  max_sge {}  max_rd_atomic {}\n",
            d.name,
            d.provider,
            d.vendor_id,
            d.vendor_part_id,
            d.fw_ver,
            d.max_qp_wr,
            d.max_cqe,
            d.max_sge,
            d.max_rd_atomic
        );
        for p in &d.ports {
            s += &format!(
                "  port {}: {:?}  {:?}  MTU {} (max {})  lid {}  pkeys {}\n",
                p.port,
                p.state,
                p.link_layer,
                p.active_mtu.bytes(),
                p.max_mtu.bytes(),
                p.lid,
                p.pkeys
            );
            for g in &p.gids {
                s += &format!(
                    "    GID[{:>3}] {:<8} {}\n",
                    g.index,
                    kind_text(g.kind),
                    gid_text(&g.gid.0)
                );
            }
        }
    }
    s += &format!(
        "\nsoftware NIC (in-process, always available): models {}\n",
        l.sim_models.join(", ")
    );
    s
}

/// Opens the NIC `name` (default: the first NIC of the first hardware vendor of the table
/// that has one: a ConnectX, else a Thor2) through rdma-core (`GDA_IBVERBS_LIB` or the loader's
/// search path), with the control path of the provider that drives its PCI vendor, and runs
/// `on` with it.
#[cfg(feature = "verbs")]
pub fn open_rdma<V: gda_providers::host::OnDevice>(
    name: Option<&str>,
    on: V,
) -> Result<V::Output, String> {
    let verbs = std::sync::Arc::new(gda_rdma::Verbs::load().map_err(|e| e.to_string())?);
    gda_providers::host::open(verbs, name, on)
}
