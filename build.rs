//! Names the feature combinations once (cfg aliases), so source files say what they need
//! (`#[cfg(sim_bnxt)]`) instead of repeating feature lists.
fn main() {
    cfg_aliases::cfg_aliases! {
        // The software NIC with the Thor2 provider re-exported (`gda::bnxt`): bnxt-only tests.
        sim_bnxt: { all(feature = "sim", feature = "bnxt") },
    }
}
