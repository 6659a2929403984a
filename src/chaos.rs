//! `gda chaos`: a sweep of chaos seeds over every NIC format.
//!
//! For each seed and each registered provider ([`ProviderName::all`]), two workloads run on a software
//! NIC whose engine perturbs, from that seed, everything hardware leaves unspecified (QP service
//! order, batch sizes, delays before execution and before completions):
//!
//! - [`guarantees`]: the conformance suite's chaos case (`tests/conformance/` calls this very
//!   function): four threads share one QP and post inline WRITEs and 8-byte fetch-adds, quiet,
//!   READ back what they wrote and quiet again — the data must be there after every quiet, and
//!   the counter must end at the number of adds; even seeds use a collapsed CQ;
//! - [`shmem`]: `gda shmem check`'s self-test (every routine, data checked, the signal, fence and
//!   quiet ordering checks) with 2 PEs as threads over RDMA through that provider's queues.
//!
//! A failing seed is reported with the command that replays it alone.

use std::time::Duration;

use gda_hal::{AtomicOp, Payload, Remote, SendFlags, SendQueue, Sge, WorkRequest};
use gda_sim::{Access, CqMode, Fabric, FabricConfig, Modeled, QpInit};

use crate::provider::{Dispatch, ProviderName};

/// One failed (seed, provider, workload).
#[derive(Clone, Debug)]
pub struct Failure {
    /// The chaos seed.
    pub seed: u64,
    /// The provider.
    pub provider: ProviderName,
    /// `guarantees` or `shmem`.
    pub workload: &'static str,
    /// What went wrong.
    pub error: String,
}

impl Failure {
    /// The command that replays this failure alone.
    #[must_use]
    pub fn replay(&self) -> String {
        format!(
            "gda chaos --from {} --seeds 1 --provider {}",
            self.seed, self.provider
        )
    }
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

/// The conformance suite's chaos case for one seed (see the module documentation).
pub fn guarantees<P: Modeled>(seed: u64) -> Result<(), String> {
    guarantees_on::<P>(std::sync::Arc::new(P::model()), seed)
}

/// [`guarantees`] on a given device model (e.g. a bnxt WQE mode).
pub fn guarantees_on<P: Modeled>(model: gda_sim::Model, seed: u64) -> Result<(), String> {
    const THREADS: u64 = 4;
    const ROUNDS: u8 = 30;
    let e = |x: &dyn std::fmt::Display| format!("seed {seed}: {x}");
    let fabric = Fabric::new(FabricConfig { chaos: Some(seed) });
    let (na, nb) = (
        fabric.add_shared_model_nic(model.clone()),
        fabric.add_shared_model_nic(model.clone()),
    );
    let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
    let mode = if seed % 2 == 0 {
        CqMode::Collapsed
    } else {
        CqMode::Normal
    };
    let cq_a = na.create_cq(1024, mode).map_err(|x| e(&x))?;
    let rcq_a = na.create_cq(64, CqMode::Normal).map_err(|x| e(&x))?;
    let scq_b = nb.create_cq(64, CqMode::Normal).map_err(|x| e(&x))?;
    let rcq_b = nb.create_cq(64, CqMode::Normal).map_err(|x| e(&x))?;
    let mut init = QpInit {
        sq_units: 32,
        ..QpInit::default()
    };
    // One gather entry is all the workload uses; some formats (bnxt's fixed-3 WQEs) allow no
    // more, so ask the model rather than name a vendor.
    if model.layout(&init.geometry()).is_err() {
        init.max_sge = 1;
    }
    let a = pa.create_qp(init, &cq_a, &rcq_a).map_err(|x| e(&x))?;
    let b = pb.create_qp(init, &scq_b, &rcq_b).map_err(|x| e(&x))?;
    a.bring_up(&b.endpoint()).map_err(|x| e(&x))?;
    b.bring_up(&a.endpoint()).map_err(|x| e(&x))?;
    let data = pb.alloc_mr(
        64 * THREADS as usize,
        Access::REMOTE_WRITE | Access::REMOTE_READ,
    );
    let ctr = pb.alloc_mr(8, Access::REMOTE_ATOMIC);
    let back = pa.alloc_mr(64 * THREADS as usize, Access::LOCAL_WRITE);
    let res = pa.alloc_mr(8 * THREADS as usize, Access::LOCAL_WRITE);
    // SAFETY: the QP and CQ outlive the queue (all are dropped at the end of this function,
    // the queue first); it is their only poster and poller.
    let sq = unsafe { SendQueue::<P>::new(a.sq_handle::<P>().unwrap(), cq_a.handle(), 20_000) }
        .map_err(|x| e(&x))?;
    let rem = |mr: &gda_sim::Mr, off: u64| Remote {
        addr: mr.addr() + off,
        rkey: mr.rkey(),
    };
    let sge = |mr: &gda_sim::Mr, off: u64, len: u32| Sge {
        addr: mr.addr() + off,
        length: len,
        lkey: mr.lkey(),
    };
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|me| {
                let (sq, data, ctr, back, res) = (&sq, &data, &ctr, &back, &res);
                s.spawn(move || -> Result<(), String> {
                    let n = (sq.wq().max_inline as usize).min(64);
                    for round in 0..ROUNDS {
                        let payload: Vec<u8> = (0..n)
                            .map(|i| (i as u8).wrapping_mul(31) ^ round ^ me as u8)
                            .collect();
                        let wr = WorkRequest::Write {
                            remote: rem(data, 64 * me),
                            payload: Payload::Inline(&payload),
                            imm: None,
                        };
                        sq.post(&wr, SendFlags::empty()).map_err(|x| e(&x))?;
                        let add = WorkRequest::Atomic {
                            remote: rem(ctr, 0),
                            local: sge(res, 8 * me, 8),
                            op: AtomicOp::FetchAdd { add: 1 },
                            bytes: 8,
                        };
                        sq.post(&add, SendFlags::empty()).map_err(|x| e(&x))?;
                        sq.quiet().map_err(|x| e(&x))?;
                        let s = [sge(back, 64 * me, 64)];
                        let rd = WorkRequest::Read {
                            remote: rem(data, 64 * me),
                            sges: &s,
                        };
                        sq.post(&rd, SendFlags::empty()).map_err(|x| e(&x))?;
                        sq.quiet().map_err(|x| e(&x))?;
                        let mut got = vec![0u8; n];
                        back.read(64 * me as usize, &mut got).map_err(|x| e(&x))?;
                        ensure(got == payload, || {
                            e(&format!(
                                "thread {me} round {round}: quiet returned before the data landed"
                            ))
                        })?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(e(&"a thread panicked"))))
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    let mut c = [0u8; 8];
    ctr.read(0, &mut c).map_err(|x| e(&x))?;
    let total = u64::from_le_bytes(c);
    ensure(total == THREADS * u64::from(ROUNDS), || {
        e(&format!(
            "the counter ended at {total}, not {}",
            THREADS * u64::from(ROUNDS)
        ))
    })
}

/// `gda shmem check`'s self-test with 2 thread PEs over RDMA through `P`'s queues on a chaos
/// fabric.
pub fn shmem<P: Modeled>(seed: u64, rounds: usize) -> Result<(), String> {
    let fabric = Fabric::new(FabricConfig { chaos: Some(seed) });
    let cfg = gda_shmem::Config {
        heap_size: 8 << 20,
        transport: gda_shmem::TransportPolicy::Rdma,
        timeout: Duration::from_secs(30),
        hosts: None,
        ..gda_shmem::Config::default()
    };
    gda_shmem::launch::threads_on::<P, _, _>(2, &cfg, &fabric, |pe| {
        gda_shmem::selftest::run(pe, rounds)
    })
    .map(|_| ())
    .map_err(|x| format!("seed {seed}: {x}"))
}

/// Both workloads of one seed, for the provider chosen at run time.
struct Workloads {
    seed: u64,
    rounds: usize,
}

impl Dispatch for Workloads {
    type Output = (Result<(), String>, Result<(), String>);
    fn run<P: Modeled>(self) -> Self::Output {
        (
            guarantees::<P>(self.seed),
            shmem::<P>(self.seed, self.rounds),
        )
    }
}

/// Runs both workloads for one seed on one provider.
pub fn seed(p: ProviderName, seed: u64, rounds: usize) -> Vec<Failure> {
    let (g, s) = p.run(Workloads { seed, rounds });
    [("guarantees", g), ("shmem", s)]
        .into_iter()
        .filter_map(|(workload, r)| {
            r.err().map(|error| Failure {
                seed,
                provider: p,
                workload,
                error,
            })
        })
        .collect()
}
