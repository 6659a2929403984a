//! Names the feature combinations once (cfg aliases), so source files say what they need
//! (`#[cfg(sim_all)]`) instead of repeating feature lists.
fn main() {
    cfg_aliases::cfg_aliases! {
        // The software NIC with every hardware format it models: chaos, SHMEM CLI.
        sim_all: { all(feature = "sim", feature = "mlx5", feature = "bnxt") },
        // The software NIC with the ConnectX model: `gda perf`.
        sim_mlx5: { all(feature = "sim", feature = "mlx5") },
        // The software NIC with the Thor2 model.
        sim_bnxt: { all(feature = "sim", feature = "bnxt") },
    }
}
