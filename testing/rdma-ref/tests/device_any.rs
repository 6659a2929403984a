//! One kernel source for every NIC compiled in (`device/include/gda/any.hpp`): the same call
//! on a queue tagged mlx5 and on one tagged native writes what each provider's own Rust device
//! functions write; unknown tags, other ABI versions and providers not in the build are
//! refused and write nothing.

use gda_hal::{Payload, Provider, Remote, SendFlags, SqPos, WorkRequest, WqHandle};
use gda_mlx5::{Mlx5, Mlx5Sq};
use gda_native::Native;
use gda_rdma_ref::device::{self, AnySq};

fn wq(ring: &mut [[u64; 8]], db: &mut [u64; 8], dbrec: &mut [u32; 2]) -> WqHandle {
    WqHandle {
        buf: ring.as_mut_ptr() as u64,
        dbrec: dbrec.as_mut_ptr() as u64,
        db: db.as_mut_ptr() as u64,
        entries: ring.len() as u32,
        stride: 64,
        qpn: 0x77,
        max_inline: 64,
        max_sge: 1,
    }
}

#[test]
fn one_call_serves_every_provider_compiled_in() {
    let mut compared = 0;
    for (i, cur) in [0u32, 1, 15, 0xffff, 0x1_0000, 0xdead_beef]
        .into_iter()
        .enumerate()
    {
        let value = 0x0123_4567_89ab_cdefu64.rotate_left(i as u32 * 7);
        let remote = Remote {
            addr: 0x7f00_0000_0000 + i as u64 * 8,
            rkey: 0x1234 + i as u32,
        };
        for tag in [1u32, 2] {
            let mut out = Vec::new();
            for dev in [false, true] {
                let mut ring = vec![[0u64; 8]; 16];
                let (mut db, mut dbrec) = ([0u64; 8], [0u32; 2]);
                let w = wq(&mut ring, &mut db, &mut dbrec);
                let bytes = value.to_ne_bytes();
                // SAFETY: ring, record and doorbell are owned here.
                let posted = unsafe {
                    match (tag, dev) {
                        (2, false) => {
                            let sq = Mlx5Sq { wq: w, bf_size: 0 };
                            let p = Mlx5::post_write_inline::<gda_hal::Signaled, 8>(
                                &sq,
                                SqPos::at_unit(cur),
                                remote,
                                &bytes,
                            );
                            Mlx5::ring_sq(&sq, &p);
                            p
                        }
                        (1, false) => {
                            let wr = WorkRequest::Write {
                                remote,
                                payload: Payload::Inline(&bytes),
                                imm: None,
                            };
                            let p = Native::post(&w, SqPos::at_unit(cur), &wr, SendFlags::SIGNALED);
                            Native::ring_sq(&w, &p);
                            p
                        }
                        (t, _) => {
                            let any = if t == 2 {
                                AnySq::new(t, 1, &Mlx5Sq { wq: w, bf_size: 0 })
                            } else {
                                AnySq::new(t, 1, &w)
                            };
                            let (r, p) = device::any_write_value(
                                &any,
                                cur,
                                remote,
                                value,
                                SendFlags::SIGNALED.bits(),
                            );
                            assert_eq!(r, 0, "tag {t}");
                            p
                        }
                    }
                };
                out.push((ring, db, dbrec, posted));
            }
            assert_eq!(out[0], out[1], "tag {tag} at {cur:#x}");
            compared += 1;
        }
    }
    assert_eq!(compared, 12);
}

#[test]
fn unknown_tags_other_abis_and_absent_providers_are_refused() {
    let mut ring = vec![[0u64; 8]; 16];
    let (mut db, mut dbrec) = ([0u64; 8], [0u32; 2]);
    let w = wq(&mut ring, &mut db, &mut dbrec);
    let remote = Remote {
        addr: 0x1000,
        rkey: 1,
    };
    for (tag, abi, want) in [(99u32, 1u32, 2), (0, 1, 2), (2, 2, 2), (1, 0, 2), (3, 1, 1)] {
        // SAFETY: the queue memory is owned here (and must stay untouched).
        let (r, _) = unsafe { device::any_write_value(&AnySq::new(tag, abi, &w), 0, remote, 7, 0) };
        assert_eq!(r, want, "tag {tag}, abi {abi}");
    }
    assert!(
        ring.iter().flatten().all(|&w| w == 0),
        "a refused post wrote to the ring"
    );
    assert_eq!((db, dbrec), ([0; 8], [0; 2]), "a refused post rang");
}
