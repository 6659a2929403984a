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

use gda_hal::control::{
    Access, CompletionQueue, CqAttr, Device, MemoryDesc, MemoryRegion, PathRequest, QpCaps,
};
use gda_hal::{AtomicOp, Payload, Remote, SendFlags, SendQueue, Sge, WorkRequest};
use gda_sim::{Fabric, FabricConfig, Modeled};

use crate::perf::device::Buf;

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

/// [`guarantees`] on a given device model (e.g. a bnxt WQE mode): two software NICs of it on a
/// chaos fabric, through the control-path seam ([`guarantees_with`]).
pub fn guarantees_on<P: Modeled>(model: gda_sim::Model, seed: u64) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| format!("seed {seed}: {x}");
    let fabric = Fabric::new(FabricConfig { chaos: Some(seed) });
    let a = gda_sim::SimDevice::<P>::on(fabric.add_shared_model_nic(model.clone()))
        .map_err(|x| e(&x))?;
    let b = gda_sim::SimDevice::<P>::on(fabric.add_shared_model_nic(model)).map_err(|x| e(&x))?;
    guarantees_with(&a, &b, seed % 2 == 0).map_err(|x| e(&x))
}

/// The workload of [`guarantees`] from a QP of `a` to one of `b` (the same device twice for a
/// NIC in loopback) on any control-path device; `collapsed` gives the requester a collapsed
/// CQ.
pub fn guarantees_with<D: Device>(a: &D, b: &D, collapsed: bool) -> Result<(), String> {
    const THREADS: u64 = 4;
    const ROUNDS: u8 = 30;
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let (path_a, path_b) = (
        a.path(PathRequest::default()).map_err(|x| e(&x))?,
        b.path(PathRequest::default()).map_err(|x| e(&x))?,
    );
    let (pd_a, pd_b) = (
        a.alloc_pd().map_err(|x| e(&x))?,
        b.alloc_pd().map_err(|x| e(&x))?,
    );
    let cq_a = a
        .create_cq(&CqAttr {
            collapsed,
            ..CqAttr::new(1024)
        })
        .map_err(|x| e(&x))?;
    let cq_b = b.create_cq(&CqAttr::new(64)).map_err(|x| e(&x))?;
    // One gather entry is all the workload uses (and all that some formats, bnxt's fixed
    // three-slot WQEs, carry).
    let caps = QpCaps {
        send_wr: 32,
        recv_wr: 16,
        max_sge: 1,
        ..QpCaps::default()
    };
    let qa = a
        .create_rc_qp(&pd_a, &cq_a, &cq_a, &caps)
        .map_err(|x| e(&x))?;
    let qb = b
        .create_rc_qp(&pd_b, &cq_b, &cq_b, &caps)
        .map_err(|x| e(&x))?;
    let (ea, eb) = (qa.endpoint(&path_a), qb.endpoint(&path_b));
    let qa = qa.connect(&path_a, &eb).map_err(|r| e(&r.error))?;
    let _qb = qb.connect(&path_b, &ea).map_err(|r| e(&r.error))?;
    let (mut data, mut ctr) = (Buf::new(64 * THREADS as usize), Buf::new(8));
    let (mut back, mut res) = (
        Buf::new(64 * THREADS as usize),
        Buf::new(8 * THREADS as usize),
    );
    let reg = |d: &D, pd: &D::Pd, buf: &mut Buf, access: Access| {
        let desc = MemoryDesc::Host {
            addr: buf.as_mut_ptr(),
            len: buf.len(),
        };
        // SAFETY: the buffers outlive their regions and every operation on them (each thread
        // quiets before it returns; the regions drop before the buffers).
        unsafe { d.register(pd, &desc, access) }.map_err(|x| e(&x))
    };
    let data_mr = reg(
        b,
        &pd_b,
        &mut data,
        Access::REMOTE_WRITE | Access::REMOTE_READ | Access::LOCAL_WRITE,
    )?;
    let ctr_mr = reg(
        b,
        &pd_b,
        &mut ctr,
        Access::REMOTE_ATOMIC | Access::LOCAL_WRITE,
    )?;
    let back_mr = reg(a, &pd_a, &mut back, Access::LOCAL_WRITE)?;
    let res_mr = reg(a, &pd_a, &mut res, Access::LOCAL_WRITE)?;
    // SAFETY: the QP and CQ outlive the queue (all are dropped at the end of this function,
    // the queue first); it is their only poster and poller.
    let sq = unsafe {
        SendQueue::<D::Provider>::new(qa.sq_handle().map_err(|x| e(&x))?, cq_a.handle(), 20_000)
    }
    .map_err(|x| e(&x))?;
    let rem = |mr: &D::Mr, off: u64| Remote {
        addr: mr.addr() + off,
        rkey: mr.rkey(),
    };
    let sge = |mr: &D::Mr, off: u64, len: u32| Sge {
        addr: mr.addr() + off,
        length: len,
        lkey: mr.lkey(),
    };
    let back_at = back.as_mut_ptr() as usize;
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|me| {
                let (sq, data_mr, ctr_mr, back_mr, res_mr) =
                    (&sq, &data_mr, &ctr_mr, &back_mr, &res_mr);
                s.spawn(move || -> Result<(), String> {
                    let n = (sq.wq().max_inline as usize).min(64);
                    for round in 0..ROUNDS {
                        let payload: Vec<u8> = (0..n)
                            .map(|i| (i as u8).wrapping_mul(31) ^ round ^ me as u8)
                            .collect();
                        let wr = WorkRequest::Write {
                            remote: rem(data_mr, 64 * me),
                            payload: Payload::Inline(&payload),
                            imm: None,
                        };
                        sq.post(&wr, SendFlags::empty()).map_err(|x| e(&x))?;
                        let add = WorkRequest::Atomic {
                            remote: rem(ctr_mr, 0),
                            local: sge(res_mr, 8 * me, 8),
                            op: AtomicOp::FetchAdd { add: 1 },
                            bytes: 8,
                        };
                        sq.post(&add, SendFlags::empty()).map_err(|x| e(&x))?;
                        sq.quiet().map_err(|x| e(&x))?;
                        let s = [sge(back_mr, 64 * me, 64)];
                        let rd = WorkRequest::Read {
                            remote: rem(data_mr, 64 * me),
                            sges: &s,
                        };
                        sq.post(&rd, SendFlags::empty()).map_err(|x| e(&x))?;
                        sq.quiet().map_err(|x| e(&x))?;
                        let mut got = vec![0u8; n];
                        // SAFETY: this thread's 64 bytes of `back`, which the READ completed
                        // into before the quiet returned; no one else writes them now.
                        unsafe {
                            gda_hal::sym::sym_copy(
                                got.as_mut_ptr(),
                                (back_at + 64 * me as usize) as *const u8,
                                n,
                            );
                        }
                        ensure(got == payload, || {
                            format!(
                                "thread {me} round {round}: quiet returned before the data landed"
                            )
                        })?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    // SAFETY: every add completed (each thread quieted); `ctr` holds 8 bytes.
    let total = unsafe { gda_hal::sym::sym_read(ctr.as_mut_ptr().cast::<u64>()) };
    ensure(total == THREADS * u64::from(ROUNDS), || {
        format!(
            "the counter ended at {total}, not {}",
            THREADS * u64::from(ROUNDS)
        )
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
