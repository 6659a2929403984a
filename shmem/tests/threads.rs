//! Every routine with PEs as threads, over P2P, RDMA through each sim device model, and mixed.

use std::time::Duration;

use gda_shmem::{Config, Transport, TransportPolicy, launch, selftest};

fn cfg(t: TransportPolicy, hosts: Option<u32>) -> Config {
    Config {
        heap_size: 16 << 20,
        transport: t,
        timeout: Duration::from_secs(20),
        hosts,
    }
}

fn check<P: gda_sim::SimModel>(n: u32, c: &Config, want: Transport) {
    let r = launch::threads::<P, _, _>(n, c, |pe| {
        let other = (pe.my_pe() + 1) % pe.n_pes();
        if other != pe.my_pe() {
            assert_eq!(pe.transport_to(other)?, want);
        }
        selftest::run(pe, 64)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.len(), n as usize);
    assert!(r[0].checks.len() >= if n > 1 { 8 } else { 5 }, "{:?}", r[0].checks);
}

#[test]
fn p2p_threads() {
    check::<gda_sim::Sim>(4, &cfg(TransportPolicy::P2p, None), Transport::P2p);
}

#[test]
fn rdma_threads_native() {
    check::<gda_sim::Sim>(3, &cfg(TransportPolicy::Rdma, None), Transport::Rdma);
}

#[test]
fn rdma_threads_mlx5() {
    check::<gda_mlx5::Mlx5>(3, &cfg(TransportPolicy::Rdma, None), Transport::Rdma);
}

#[test]
fn rdma_threads_bnxt() {
    check::<gda_bnxt::Bnxt>(3, &cfg(TransportPolicy::Rdma, None), Transport::Rdma);
}

#[test]
fn mixed_threads() {
    // Two simulated hosts: PE k and k+1 on different hosts (RDMA), k and k+2 together (P2P).
    let c = cfg(TransportPolicy::Auto, Some(2));
    launch::threads::<gda_mlx5::Mlx5, _, _>(4, &c, |pe| {
        let me = pe.my_pe();
        assert_eq!(pe.transport_to((me + 1) % 4)?, Transport::Rdma);
        assert_eq!(pe.transport_to((me + 2) % 4)?, Transport::P2p);
        assert_eq!(pe.team_shared().n_pes(), 2);
        selftest::run(pe, 32)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn single_pe() {
    check::<gda_sim::Sim>(1, &cfg(TransportPolicy::Auto, None), Transport::Local);
}
