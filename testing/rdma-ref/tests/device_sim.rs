//! The device API's posting protocol (`device/include/gda/sq.hpp`), compiled for the host, run
//! by CPU threads standing in for GPU lanes against the software NIC: many producers on one QP,
//! a ring that wraps many times, slots recycled through real CQEs, quiets in between — every
//! value must land where it was sent, with and without chaos, on the ConnectX model, the
//! Broadcom (bnxt) model — in each of its WQE modes, so the header reserves units, message
//! numbers and PSNs as gda_bnxt's costs say — and on the software NIC's native format, through
//! normal and collapsed CQs.
//!
//! The header posts to the queue a Rust `gda_hal::SendQueue` owns, through the state both share
//! (`SendQueue::device_queue`); in the mixed runs Rust producers post to the same QP at the same
//! time as header producers.

use gda_bnxt::model::BnxtModel;
use gda_bnxt::{Bnxt, Mode, PsnForm, WqeMode};
use gda_hal::{Payload, Remote, SendFlags, SendQueue, WorkRequest};
use gda_rdma_ref::device::{self, ThreadsWrite};
use gda_sim::{Access, CqMode, Fabric, FabricConfig, Modeled, QpInit};

/// The bnxt model's WQE modes (each with another PSN-table form): Thor2's default (static WQEs,
/// MSN table), variable-size WQEs (an 8-byte inline WRITE takes 3 slots), the fixed 3-slot form.
const BNXT_MODES: [Mode; 3] = [
    Mode {
        wqe: WqeMode::Static,
        psn: PsnForm::Msn,
    },
    Mode {
        wqe: WqeMode::Variable,
        psn: PsnForm::Ext,
    },
    Mode {
        wqe: WqeMode::Fixed3,
        psn: PsnForm::Legacy,
    },
];

/// One run: `threads` header threads × `per` posts, and `rust` Rust threads × `per` posts at the
/// same time, on a fresh QP pair (64-unit ring) of provider `P` on a fabric with `chaos`, the
/// sending CQ in `mode`. Returns how many slots it checked.
#[derive(Clone, Copy)]
struct Run {
    mode: CqMode,
    chaos: Option<u64>,
    threads: u32,
    rust: u32,
    per: u32,
    quiet_every: u32,
}

impl Run {
    fn new(threads: u32, per: u32, quiet_every: u32) -> Self {
        Self {
            mode: CqMode::Normal,
            chaos: None,
            threads,
            rust: 0,
            per,
            quiet_every,
        }
    }

    fn go<P: ThreadsWrite + Modeled>(&self) -> usize {
        self.go_on::<P>(&P::model())
    }

    /// The run on bnxt NICs in `mode`.
    fn go_bnxt(&self, mode: Mode) -> usize {
        self.go_on::<Bnxt>(&BnxtModel::from(mode))
    }

    /// The run on NICs of `model`, driven by provider `P`.
    fn go_on<P: ThreadsWrite + Modeled>(&self, model: &P::Model) -> usize {
        let (threads, per) = (self.threads, self.per);
        let fabric = Fabric::new(FabricConfig { chaos: self.chaos });
        let na = fabric.add_nic(model.clone());
        let nb = fabric.add_nic(model.clone());
        let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
        let cq_a = na.create_cq(256, self.mode).unwrap();
        let cq_b = nb.create_cq(256, CqMode::Normal).unwrap();
        // One gather entry (the runs post inline WRITEs only): what bnxt's fixed form allows.
        let init = QpInit {
            sq_units: 64,
            max_sge: 1,
            ..QpInit::default()
        };
        let a = pa.create_qp(init, &cq_a, &cq_a).unwrap();
        let b = pb.create_qp(init, &cq_b, &cq_b).unwrap();
        a.bring_up(&b.endpoint()).unwrap();
        b.bring_up(&a.endpoint()).unwrap();
        let slots = ((threads + self.rust) * per) as usize;
        let dst = pb.alloc_mr(slots * 8, Access::ALL);
        // SAFETY: the QP and CQ outlive the queue; only its protocol (Rust or header) posts to
        // and polls them.
        let sq = unsafe { SendQueue::<P>::new(a.sq_handle::<P>().unwrap(), cq_a.handle(), 20_000) }
            .unwrap();
        let dq = sq.device_queue();
        assert_eq!(dq.proto.provider, P::DEVICE_TAG);
        let remote = Remote {
            addr: dst.addr(),
            rkey: dst.rkey(),
        };
        let ctx = format!(
            "{} {} {:?} chaos {:?}",
            P::NAME,
            gda_sim::DeviceModel::name(model),
            self.mode,
            self.chaos
        );
        std::thread::scope(|s| {
            for r in 0..self.rust {
                let (sq, ctx) = (&sq, &ctx);
                s.spawn(move || {
                    for i in 0..per {
                        let slot = u64::from((threads + r) * per + i);
                        let v = (u64::from(threads + r) << 32 | u64::from(i)).to_ne_bytes();
                        let wr = WorkRequest::Write {
                            remote: Remote {
                                addr: remote.addr + slot * 8,
                                rkey: remote.rkey,
                            },
                            payload: Payload::Inline(&v),
                            imm: None,
                        };
                        sq.post(&wr, SendFlags::empty())
                            .unwrap_or_else(|e| panic!("Rust producer {r}: {e} ({ctx})"));
                        if self.quiet_every != 0 && (i + 1) % self.quiet_every == 0 {
                            sq.quiet().unwrap();
                        }
                    }
                    sq.quiet().unwrap();
                });
            }
            // SAFETY: the queue (its QP, CQ and shared state) outlives the call; `dst` holds
            // the header threads' `threads * per` slots first.
            let st =
                unsafe { device::threads_write::<P>(&dq, threads, per, self.quiet_every, remote) };
            assert_eq!(
                st,
                0,
                "header protocol status ({ctx}), state {:?}",
                sq.counters()
            );
        });
        sq.quiet().unwrap();
        let mut got = vec![0u8; slots * 8];
        dst.read(0, &mut got).unwrap();
        let mut checked = 0;
        for t in 0..threads + self.rust {
            for i in 0..per {
                let k = (t * per + i) as usize;
                let v = u64::from_ne_bytes(got[k * 8..k * 8 + 8].try_into().unwrap());
                assert_eq!(v, u64::from(t) << 32 | u64::from(i), "slot {k} ({ctx})");
                checked += 1;
            }
        }
        // Everything reserved was rung and is complete, with no error.
        let c = sq.counters();
        assert_eq!(c.reserved(), c.rung(), "reserved == rung ({ctx})");
        assert!(
            c.complete_below() >= c.last_rung_marker(),
            "all complete ({ctx})"
        );
        assert!(sq.first_error().is_ok(), "no error CQE ({ctx})");
        checked
    }
}

/// Every configuration of the many-threads test, run by `go`.
fn many_threads(go: impl Fn(&Run) -> usize) -> usize {
    let mut checked = 0;
    for (threads, per, quiet_every) in [(1, 300, 0), (4, 500, 0), (4, 200, 7), (8, 100, 1)] {
        checked += go(&Run::new(threads, per, quiet_every));
    }
    checked
}

#[test]
fn many_threads_post_through_the_header_protocol() {
    const ALL: usize = 300 + 2000 + 800 + 800;
    assert_eq!(many_threads(Run::go::<gda_mlx5::Mlx5>), ALL);
    assert_eq!(many_threads(Run::go::<gda_native::Native>), ALL);
    for mode in BNXT_MODES {
        assert_eq!(many_threads(|r| r.go_bnxt(mode)), ALL, "bnxt {mode:?}");
    }
}

#[test]
fn rust_and_header_producers_share_one_queue() {
    let mut checked = 0;
    for (threads, rust, per, quiet_every) in [(2, 2, 400, 0), (3, 1, 200, 5), (1, 3, 300, 1)] {
        let run = Run {
            rust,
            ..Run::new(threads, per, quiet_every)
        };
        let collapsed = Run {
            mode: CqMode::Collapsed,
            ..run
        };
        for r in [run, collapsed] {
            checked += r.go::<gda_mlx5::Mlx5>();
            checked += r.go::<gda_native::Native>();
            for mode in BNXT_MODES {
                checked += r.go_bnxt(mode);
            }
        }
    }
    // 2 CQ modes x (mlx5, native, 3 bnxt modes).
    assert_eq!(checked, 10 * (1600 + 800 + 1200));
}

/// Chaos seeds (`GDA_DEVICE_CHAOS_SEEDS`, default 100) rotating over mlx5, native and bnxt
/// (bnxt's WQE modes in turn), header and Rust producers mixed on every other seed.
#[test]
fn the_header_protocol_holds_under_chaos_seeds() {
    let seeds: u64 = std::env::var("GDA_DEVICE_CHAOS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let mut checked = 0;
    for seed in 1..=seeds {
        let run = Run {
            chaos: Some(seed),
            rust: (seed % 2) as u32,
            ..Run::new(3, 40, if seed % 4 == 0 { 5 } else { 0 })
        };
        checked += match seed % 3 {
            0 => run.go::<gda_mlx5::Mlx5>(),
            1 => run.go::<gda_native::Native>(),
            _ => run.go_bnxt(BNXT_MODES[(seed / 3 % 3) as usize]),
        };
    }
    let per_seed = |s: u64| if s % 2 == 1 { 160 } else { 120 };
    assert_eq!(checked, (1..=seeds).map(per_seed).sum::<usize>());
}

#[test]
fn the_header_protocol_progresses_through_a_collapsed_cq() {
    // One CQE slot the device overwrites: progress comes from its newest WQE counter only.
    let mut checked = 0;
    for (threads, per, quiet_every) in [(4, 300, 0), (2, 200, 3)] {
        let run = Run {
            mode: CqMode::Collapsed,
            ..Run::new(threads, per, quiet_every)
        };
        checked += run.go::<gda_mlx5::Mlx5>() + run.go::<gda_native::Native>();
        for mode in BNXT_MODES {
            checked += run.go_bnxt(mode);
        }
    }
    for seed in 1..=10 {
        let run = Run {
            mode: CqMode::Collapsed,
            chaos: Some(seed),
            ..Run::new(3, 60, 0)
        };
        checked += run.go::<gda_mlx5::Mlx5>() + run.go::<gda_native::Native>();
        checked += run.go_bnxt(BNXT_MODES[(seed % 3) as usize]);
    }
    assert_eq!(checked, 5 * (1200 + 400) + 3 * 10 * 180);
}
