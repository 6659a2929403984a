//! `gda gpus`: the AMD GPUs gda can put rings, buffers and the symmetric heap's RDMA targets
//! in (through HIP loaded at run time, feature `hip`), or why there are none.

use serde_json::{Value, json};

/// What `gda gpus` found.
pub struct GpuListing {
    /// The HIP library opened and its runtime version, or why none could be.
    pub runtime: Result<(String, i32), String>,
    /// The GPUs, or why there are none.
    pub gpus: Result<Vec<(u32, String, String)>, String>,
    /// Whether this ROCm exports device memory as a dma-buf (registration without peer memory).
    pub dmabuf_export: bool,
}

/// Looks for GPUs.
pub fn list() -> GpuListing {
    #[cfg(feature = "hip")]
    {
        match gda_hip::Hip::load() {
            Ok(h) => GpuListing {
                runtime: Ok((h.path().to_owned(), h.version().unwrap_or(0))),
                gpus: h
                    .gpus()
                    .map(|v| v.into_iter().map(|g| (g.index, g.name, g.pci)).collect())
                    .map_err(|e| e.to_string()),
                dmabuf_export: h.has_dmabuf_export(),
            },
            Err(e) => GpuListing {
                runtime: Err(e.to_string()),
                gpus: Err("no HIP runtime".into()),
                dmabuf_export: false,
            },
        }
    }
    #[cfg(not(feature = "hip"))]
    GpuListing {
        runtime: Err(
            "this gda was built without the `hip` feature (cargo build --release --features hip)"
                .into(),
        ),
        gpus: Err("no HIP runtime".into()),
        dmabuf_export: false,
    }
}

impl GpuListing {
    /// Whether there is a GPU to use.
    pub fn usable(&self) -> bool {
        self.gpus.as_ref().is_ok_and(|g| !g.is_empty())
    }

    /// Text for people.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        match &self.runtime {
            Ok((p, v)) => s.push_str(&format!("HIP runtime: {p} (version {v})\n")),
            Err(e) => s.push_str(&format!("HIP runtime: none: {e}\n")),
        }
        match &self.gpus {
            Ok(g) => {
                for (i, name, pci) in g {
                    s.push_str(&format!("gpu {i}: {name} (PCI {pci})\n"));
                }
                s.push_str(&format!(
                    "NIC registration of device memory: {}\n",
                    if self.dmabuf_export {
                        "dma-buf (ibv_reg_dmabuf_mr)"
                    } else {
                        "peer memory (ibv_reg_mr on the device address; needs amdgpu peer-memory support, ROCm 5.6+ adds dma-buf)"
                    }
                ));
            }
            Err(e) if self.runtime.is_ok() => s.push_str(&format!("GPUs: none: {e}\n")),
            Err(_) => {}
        }
        s
    }

    /// JSON for scripts.
    pub fn to_json(&self) -> Value {
        json!({
            "runtime": match &self.runtime {
                Ok((p, v)) => json!({"path": p, "version": v}),
                Err(e) => json!({"error": e}),
            },
            "gpus": match &self.gpus {
                Ok(g) => g.iter().map(|(i, n, p)| json!({"index": i, "name": n, "pci": p})).collect::<Vec<_>>(),
                Err(_) => Vec::new(),
            },
            "error": self.gpus.as_ref().err(),
            "dmabuf_export": self.dmabuf_export,
        })
    }
}
