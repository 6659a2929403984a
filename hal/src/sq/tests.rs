//! Unit tests of the posting protocol's arithmetic (signalling, WQE-size limits).

use super::*;

/// Simulates a queue whose device completes every WQE at once: for every ring size and
/// counter width the providers allow, and WQE sizes from 1 to the queue's maximum in a
/// pattern that ends unsignalled runs at the worst places, a producer must always find room
/// once the CQEs already requested have arrived — never wait on a completion no CQE reports.
#[test]
fn signalling_never_starves_a_producer() {
    let mut compared = 0u64;
    for log2 in 0..=16u32 {
        let entries = 1u64 << log2;
        // Full rings, and the 2^bits - 1 windows of narrow completion counters.
        for capacity in [entries, entries.saturating_sub(1).max(1)] {
            for format_max in [1u32, 2, 3, 4, 8, 16] {
                let m = max_wqe_units(capacity, format_max);
                assert!(m >= 1 && u64::from(m) <= capacity.max(1));
                let q = signal_interval(capacity, m);
                for pattern in 0..4u64 {
                    let mut pos = 0u64;
                    let mut complete_below = 0u64;
                    for i in 0..(3 * capacity + 64) {
                        let u = match pattern {
                            0 => m,
                            1 => 1,
                            2 => 1 + ((i * 7) % u64::from(m)) as u32,
                            _ => {
                                if i % 3 == 0 {
                                    m
                                } else {
                                    1
                                }
                            }
                        };
                        let end = pos + u64::from(u);
                        assert!(
                            end <= complete_below + capacity,
                            "capacity {capacity}, max {m}, q {q}: WQE [{pos}, {end}) starves \
                             (complete below {complete_below})"
                        );
                        if must_signal(pos, end, q) {
                            complete_below = pos + 1;
                        }
                        pos = end;
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 1_000_000, "only {compared} WQEs simulated");
}
