//! A ring exchange and an all-to-all across N processes, with gda-shmem.
//!
//! ```text
//! cargo run --release --example shmem_ring            # 4 processes, launches itself
//! cargo run --release --example shmem_ring -- 8       # 8 processes
//! GDA_SHMEM_TRANSPORT=rdma cargo run --release --example shmem_ring   # over the sim NIC
//! ```
//!
//! Each PE sends a message to its right neighbour with put-with-signal, waits for the one from
//! its left, passes a token all the way round the ring with atomics, then does an all-to-all
//! and a sum reduction, checking every byte. Run under `gdarun -n N`, `mpirun`, `srun` or
//! `torchrun` it uses their PEs; started alone it launches itself as N processes.

use gda_shmem::{Cmp, ReduceOp, SignalOp, launch};

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4);
    if let Err(e) = launch::relaunch_self(n) {
        eprintln!("shmem_ring: {e}");
        std::process::exit(2);
    }
    if let Err(e) = run() {
        eprintln!("shmem_ring: {e}");
        std::process::exit(1);
    }
}

fn run() -> gda_shmem::Result<()> {
    let pe = launch::init_from_env::<gda_native::Native>()?;
    let (me, n) = (pe.my_pe(), pe.n_pes());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;

    // 1. Ring: a message to the right, signalled; wait for the left one.
    let msg = pe.calloc::<u8>(64)?;
    let sig = pe.calloc::<u64>(1)?;
    let text = format!("hello from PE {me} to PE {right}");
    pe.put_signal(msg, 0, text.as_bytes(), sig, 0, 1, SignalOp::Set, right)?;
    pe.signal_wait_until(sig, 0, Cmp::Eq, 1)?;
    let mut got = vec![0u8; 64];
    pe.copy_out(msg, 0, &mut got)?;
    let got = String::from_utf8_lossy(&got)
        .trim_end_matches('\0')
        .to_string();
    assert_eq!(got, format!("hello from PE {left} to PE {me}"));

    // 2. A token goes round the ring: PE 0 starts it, everyone adds its number and passes it on.
    let token = pe.calloc::<u64>(1)?;
    let seen = pe.calloc::<u64>(1)?;
    if me == 0 {
        pe.atomic_set(token, 0, 1u64, right)?;
        pe.fence();
        pe.atomic_set(seen, 0, 1u64, right)?;
        pe.wait_until(seen, 0, Cmp::Eq, 1)?;
    } else {
        pe.wait_until(seen, 0, Cmp::Eq, 1)?;
        let t = pe.read(token, 0)?;
        pe.atomic_set(token, 0, t + u64::from(me), right)?;
        pe.fence(); // the token lands before the flag that announces it
        pe.atomic_set(seen, 0, 1u64, right)?;
    }
    let around = pe.read(token, 0)?;
    if me == 0 {
        // 1 from PE 0, then each PE k of 1..n adds k.
        assert_eq!(around, 1 + u64::from(n * (n - 1) / 2), "the token");
    }

    // 3. All-to-all: block j of my source goes to PE j; then a sum over everyone.
    let src = pe.malloc::<u32>(n as usize * 4)?;
    let dst = pe.malloc::<u32>(n as usize * 4)?;
    let mine: Vec<u32> = (0..n * 4).map(|i| me * 1000 + i).collect();
    pe.copy_in(src, 0, &mine)?;
    let world = pe.team_world();
    pe.alltoall(&world, dst, src, 4)?;
    let mut a2a = vec![0u32; n as usize * 4];
    pe.copy_out(dst, 0, &mut a2a)?;
    for j in 0..n {
        for i in 0..4 {
            assert_eq!(a2a[(j * 4 + i) as usize], j * 1000 + me * 4 + i);
        }
    }
    let one = pe.malloc::<u64>(1)?;
    pe.write(one, 0, u64::from(me))?;
    pe.reduce(&world, one, one, 1, ReduceOp::Sum)?;
    let sum = pe.read(one, 0)?;
    assert_eq!(sum, u64::from(n * (n - 1) / 2));

    println!(
        "PE {me}/{n} [{:?} to neighbours]: got {got:?}; alltoall ok; sum of ranks = {sum}{}",
        pe.transport_to(right)?,
        if me == 0 {
            // PE 0 starts it at 1; PE k (1..n) adds k.
            let terms: Vec<String> = std::iter::once(1)
                .chain(1..n)
                .map(|k| k.to_string())
                .collect();
            format!(
                "; token came back as {around} ({} = {around})",
                terms.join(" + ")
            )
        } else {
            String::new()
        }
    );
    pe.barrier_all()?;
    if me == 0 {
        println!("ring OK: {n} PEs");
    }
    pe.finalize()
}
