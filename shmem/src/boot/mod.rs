//! Bootstrap: how PEs find each other before the symmetric heap exists.
//!
//! A [`Bootstrap`] gives a PE its rank, the job size and two collective operations over a side
//! channel (`allgather`, `barrier`), used only at init, team creation and finalize: the data path
//! never touches it. Two implementations:
//!
//! - [`threads`]: PEs as threads of one process (tests, examples);
//! - [`tcp`]: PEs as processes meeting over TCP at rank 0, every connection authenticated
//!   with the job's secret (HMAC-SHA256 challenge and response, both directions).
//!
//! [`env::Launch`] reads what `gdarun`, `mpirun` (Open MPI and PMI), Slurm `srun` and `torchrun`
//! put in the environment. Every wait has a deadline whose error names the missing ranks.

pub mod env;
pub mod secret;
pub mod tcp;
pub mod threads;

use crate::error::Result;

/// The side channel PEs use to meet.
pub trait Bootstrap: Send {
    /// This PE's rank.
    fn rank(&self) -> u32;
    /// Number of PEs.
    fn size(&self) -> u32;
    /// The job's id (names its shared-memory segments).
    fn job(&self) -> &str;
    /// The names of the job's shared-memory objects, keyed with a secret only the job's PEs
    /// share (so other users can neither guess nor squat them).
    fn names(&self) -> &gda_os::shm::JobNames;
    /// Everyone's `mine`, indexed by rank.
    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Returns once every PE has called it.
    fn barrier(&mut self) -> Result<()> {
        self.allgather(&[]).map(|_| ())
    }
    /// Tells the other PEs this one failed (`why`), where the channel can (threads).
    fn abort(&self, why: &str) {
        let _ = why;
    }
    /// Why another PE gave up, if the channel knows (polled by long waits).
    fn broken(&self) -> Option<String> {
        None
    }
}
