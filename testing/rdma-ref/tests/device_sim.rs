//! The device API's posting protocol (`device/include/gda/mlx5_sq.hpp`), compiled for the host,
//! run by CPU threads standing in for GPU lanes against the software NIC's ConnectX model: many
//! producers on one QP, a ring that wraps many times, slots recycled through real CQEs, quiets
//! in between — every value must land where it was sent, with and without chaos.

use gda_hal::Remote;
use gda_rdma_ref::device::{self, Sq2, SqState};
use gda_sim::{Access, CqMode, Fabric, FabricConfig, QpInit};

/// Runs `threads` × `per` posts on a fresh QP pair (64-WQEBB ring) on a fabric with `chaos`;
/// returns how many slots it checked.
fn run(chaos: Option<u64>, threads: u32, per: u32, quiet_every: u32) -> usize {
    run_on(CqMode::Normal, chaos, threads, per, quiet_every)
}

/// As [`run`] with the sending QP's CQ in `mode`.
fn run_on(mode: CqMode, chaos: Option<u64>, threads: u32, per: u32, quiet_every: u32) -> usize {
    let fabric = Fabric::new(FabricConfig { chaos });
    let na = fabric.add_nic_for::<gda_mlx5::Mlx5>();
    let nb = fabric.add_nic_for::<gda_mlx5::Mlx5>();
    let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
    let cq_a = na.create_cq(256, mode).unwrap();
    let cq_b = nb.create_cq(256, CqMode::Normal).unwrap();
    let init = QpInit {
        sq_units: 64,
        ..QpInit::default()
    };
    let a = pa.create_qp(init, &cq_a, &cq_a).unwrap();
    let b = pb.create_qp(init, &cq_b, &cq_b).unwrap();
    a.bring_up(&b.endpoint()).unwrap();
    b.bring_up(&a.endpoint()).unwrap();
    let slots = (threads * per) as usize;
    let dst = pb.alloc_mr(slots * 8, Access::ALL);
    let mut state = Box::new(SqState::default());
    let q = Sq2 {
        sq: a.sq_handle::<gda_mlx5::Mlx5>().unwrap(),
        cq: cq_a.handle(),
        state: &raw mut *state,
        timeout_ns: 20_000_000_000,
    };
    let remote = Remote {
        addr: dst.addr(),
        rkey: dst.rkey(),
    };
    // SAFETY: the QP, CQ and state outlive the call; the header is their only poster and
    // poller; `dst` holds `slots` 8-byte slots.
    let s = unsafe { device::threads_write(&q, threads, per, quiet_every, remote) };
    assert_eq!(
        s, 0,
        "posting protocol status (chaos {chaos:?}), state {state:?}"
    );
    let mut got = vec![0u8; slots * 8];
    dst.read(0, &mut got).unwrap();
    let mut checked = 0;
    for t in 0..threads {
        for i in 0..per {
            let k = (t * per + i) as usize;
            let v = u64::from_ne_bytes(got[k * 8..k * 8 + 8].try_into().unwrap());
            assert_eq!(
                v,
                u64::from(t) << 32 | u64::from(i),
                "slot {k} (chaos {chaos:?})"
            );
            checked += 1;
        }
    }
    // Everything reserved was rung, and complete.
    assert_eq!(state.counters[0], state.counters[1], "reserved == rung");
    assert!(
        state.counters[3] >= state.counters[4],
        "complete_below >= signalled marker"
    );
    assert_eq!(state.counters[7], 0, "no error CQE");
    if mode == CqMode::Normal {
        assert!(state.flags[1] > 0, "CQEs were consumed");
    }
    checked
}

#[test]
fn many_threads_post_through_the_header_protocol() {
    let mut checked = 0;
    for (threads, per, quiet_every) in [(1, 300, 0), (4, 500, 0), (4, 200, 7), (8, 100, 1)] {
        checked += run(None, threads, per, quiet_every);
    }
    assert_eq!(checked, 300 + 2000 + 800 + 800);
}

#[test]
fn the_header_protocol_holds_under_chaos_seeds() {
    let mut checked = 0;
    for seed in 1..=20 {
        checked += run(Some(seed), 4, 60, if seed % 2 == 0 { 5 } else { 0 });
    }
    assert_eq!(checked, 20 * 240);
}

#[test]
fn the_header_protocol_progresses_through_a_collapsed_cq() {
    // One CQE slot the device overwrites: progress comes from its newest WQE counter only.
    let mut checked = run_on(CqMode::Collapsed, None, 4, 300, 0);
    checked += run_on(CqMode::Collapsed, None, 2, 200, 3);
    for seed in 1..=10 {
        checked += run_on(CqMode::Collapsed, Some(seed), 3, 60, 0);
    }
    assert_eq!(checked, 1200 + 400 + 10 * 180);
}
