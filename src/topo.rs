//! `gda topo`: the node as gda sees it — GPUs, RDMA NICs, NUMA nodes and the PCIe path between
//! each GPU and NIC, as `nvidia-smi topo -m` prints it — and which GPU, NICs and CPUs each
//! local rank takes (`gda_topo::select`).

use std::path::PathBuf;

use gda_topo::{Binding, Node, Source};

/// What `gda topo` was asked.
#[derive(Clone, Debug)]
pub struct Args {
    /// An hwloc XML file instead of this machine (else `HWLOC_XMLFILE`, which hwloc honours).
    pub topology: Option<PathBuf>,
    /// Local ranks to place (default: one per GPU, else one per NIC).
    pub ranks: Option<usize>,
    /// NICs per rank (default `GDA_RAILS`, else 1).
    pub rails: Option<usize>,
    /// JSON instead of text.
    pub json: bool,
}

/// The node and a note on how it was read (hwloc's version, or why not hwloc).
fn node(a: &Args) -> Result<(Node, String), String> {
    let source = a.topology.clone().map_or(Source::Host, Source::Xml);
    let named = a.topology.clone().or_else(|| {
        std::env::var_os("HWLOC_XMLFILE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    match gda_topo::discover(&source) {
        Ok(n) => {
            let v = gda_topo::hwloc::version().unwrap_or_default();
            let from = named.map_or_else(|| "this machine".into(), |p| p.display().to_string());
            Ok((n, format!("hwloc API {v}, {from}")))
        }
        Err(gda_topo::TopoError::Hwloc(e @ gda_topo::hwloc::HwlocError::Missing(_))) => {
            // hwloc's XML reads without hwloc; a live machine does not.
            if let Some(p) = named {
                let xml =
                    std::fs::read_to_string(&p).map_err(|err| format!("{}: {err}", p.display()))?;
                let n = Node::from_xml(&xml).map_err(|err| format!("{}: {err}", p.display()))?;
                return Ok((n, format!("{} read without hwloc ({e})", p.display())));
            }
            let names: Vec<String> = crate::devices::list()
                .devices
                .iter()
                .map(|d| d.name.clone())
                .collect();
            Ok((
                Node::flat(&names),
                format!("{e}. Placement falls back to round-robin over the RDMA devices"),
            ))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn ids(v: (u16, u16)) -> String {
    format!("{:04x}:{:04x}", v.0, v.1)
}

fn numa(n: Option<u32>) -> String {
    n.map_or_else(|| "-".into(), |i| i.to_string())
}

/// Runs `gda topo`: the text or JSON it prints.
///
/// # Errors
/// A bad topology file, a bad override (`GDA_RDMA_DEVICES`, `GDA_NIC_MAP`, `GDA_RAILS`), or
/// hwloc failing on this machine.
pub fn run(a: &Args) -> Result<String, String> {
    let (node, note) = node(a)?;
    let ranks = a
        .ranks
        .unwrap_or(if node.gpus.is_empty() {
            node.nics.len()
        } else {
            node.gpus.len()
        })
        .max(1);
    let mut req = gda_topo::request_from_env(ranks).map_err(|e| e.to_string())?;
    if let Some(r) = a.rails {
        req.rails = r;
    }
    let bindings = if node.nics.is_empty() {
        Vec::new()
    } else {
        gda_topo::select(&node, &req).map_err(|e| e.to_string())?
    };
    Ok(match (a.json, a.ranks.is_some()) {
        (true, true) => bindings
            .iter()
            .map(|b| b.to_json().to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        (true, false) => serde_json::to_string_pretty(&json(&node, &note, &bindings))
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")),
        (false, _) => text(
            &node,
            &note,
            &bindings,
            bindings.iter().map(|b| b.rails.len()).max().unwrap_or(0),
        ),
    })
}

fn json(node: &Node, note: &str, bindings: &[Binding]) -> serde_json::Value {
    serde_json::json!({
        "source": note,
        "host": node.host,
        "packages": node.packages,
        "numa": node.numa.iter().map(|n| serde_json::json!({
            "index": n.index, "cpus": gda_os::cpu::format_list(&n.cpus)})).collect::<Vec<_>>(),
        "gpus": node.gpus.iter().map(|g| serde_json::json!({
            "addr": g.addr.to_string(), "name": g.name, "ids": ids(g.ids), "numa": g.numa,
            "cpus": gda_os::cpu::format_list(&g.cpus)})).collect::<Vec<_>>(),
        "nics": node.nics.iter().map(|n| serde_json::json!({
            "name": n.name, "addr": n.addr.to_string(), "ids": ids(n.ids), "netdevs": n.netdevs,
            "numa": n.numa, "cpus": gda_os::cpu::format_list(&n.cpus)})).collect::<Vec<_>>(),
        "paths": (0..node.gpus.len()).map(|g| (0..node.nics.len())
            .map(|n| node.gpu_nic_path(g, n).name()).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "ranks": bindings.iter().map(Binding::to_json).collect::<Vec<_>>(),
    })
}

fn text(node: &Node, note: &str, bindings: &[Binding], rails: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} package(s), {} NUMA node(s), {} GPU(s), {} RDMA NIC(s) ({note})",
        node.host.as_deref().unwrap_or("node"),
        node.packages,
        node.numa.len(),
        node.gpus.len(),
        node.nics.len()
    );
    if !node.gpus.is_empty() && !node.nics.is_empty() {
        let w = node
            .nics
            .iter()
            .map(|n| n.name.len())
            .max()
            .unwrap_or(4)
            .max(4)
            + 2;
        let _ = write!(s, "\n{:8}", "");
        for n in &node.nics {
            let _ = write!(s, "{:w$}", n.name);
        }
        let _ = writeln!(s, "{:14}NUMA", "CPU affinity");
        for (g, gpu) in node.gpus.iter().enumerate() {
            let _ = write!(s, "{:8}", format!("GPU{g}"));
            for n in 0..node.nics.len() {
                let _ = write!(s, "{:w$}", node.gpu_nic_path(g, n).name());
            }
            let _ = writeln!(
                s,
                "{:14}{}",
                gda_os::cpu::format_list(&gpu.cpus),
                numa(gpu.numa)
            );
        }
        let _ = writeln!(s, "\nLegend:");
        for l in gda_topo::Path::LEGEND.lines() {
            let _ = writeln!(s, "  {}", l.trim());
        }
    }
    if !node.gpus.is_empty() {
        let _ = writeln!(s, "\nGPUs:");
        for (g, gpu) in node.gpus.iter().enumerate() {
            let _ = writeln!(
                s,
                "  GPU{g}  {}  {}  {:8} NUMA {}",
                gpu.addr,
                ids(gpu.ids),
                gpu.name,
                numa(gpu.numa)
            );
        }
    }
    if node.nics.is_empty() {
        let _ = writeln!(s, "\nno RDMA NIC: nothing to place");
        return s;
    }
    let _ = writeln!(s, "\nRDMA NICs:");
    for n in &node.nics {
        let _ = writeln!(
            s,
            "  {:10} {}  {}  NUMA {}  {}",
            n.name,
            n.addr,
            ids(n.ids),
            numa(n.numa),
            n.netdevs.join(",")
        );
    }
    let _ = writeln!(
        s,
        "\nLocal ranks ({}, {rails} rail{} each):",
        bindings.len(),
        if rails == 1 { "" } else { "s" }
    );
    let _ = writeln!(s, "  {:5} {:22} {:32} CPUs", "rank", "GPU", "NICs");
    for b in bindings {
        let gpu = b.gpu.map_or_else(
            || "-".to_string(),
            |a| format!("{a} {}", b.gpu_name).trim().to_string(),
        );
        let nics = b
            .rails
            .iter()
            .map(|r| match r.port {
                None => format!("{} ({})", r.nic, r.path),
                Some(p) => format!("{}:{p} ({})", r.nic, r.path),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            "  {:<5} {:22} {:32} {}",
            b.rank,
            gpu,
            nics,
            gda_os::cpu::format_list(&b.cpus)
        );
    }
    s
}
