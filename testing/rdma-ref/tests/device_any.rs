//! One kernel source for every NIC compiled in (`device/include/gda/any.hpp`): the same call
//! on a queue tagged mlx5, native or bnxt writes what each provider's own Rust device
//! functions write; unknown tags and other ABI versions are refused and write nothing (every
//! provider is compiled into these bindings: a build without one, `GDA_NO_*`, refuses its tag
//! the same way).

use gda_bnxt::{Bnxt, BnxtSq, Mode, PsnForm, WqeMode};
use gda_hal::{Payload, ProdIdx, Provider, Remote, SendFlags, SqPos, WorkRequest, WqHandle};
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
    for (tag, abi, want) in [
        (99u32, 1u32, 2),
        (0, 1, 2),
        (2, 2, 2),
        (1, 0, 2),
        (3, 2, 2),
        (4, 1, 2),
    ] {
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

/// Queue memory for bnxt: 16-byte aligned slots (the header stores whole slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(16))]
struct Slot([u8; 16]);

/// The bnxt tag: the dispatched register-value WRITE (8 and 4 bytes) writes the ring, PSN-table
/// entry, doorbell and `Posted` that gda_bnxt's `Bnxt::post` of the same inline WRITE does, at
/// positions across the ring's wrap (the epoch flip), in every WQE mode and PSN-table form.
#[test]
fn the_bnxt_tag_posts_what_the_rust_provider_posts() {
    const ENTRIES: u32 = 16;
    let mut compared = 0;
    for wqe in [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3] {
        for psn in [PsnForm::Legacy, PsnForm::Ext, PsnForm::Msn] {
            let mode = Mode { wqe, psn };
            let slots = mode.ring_slots(ENTRIES) as usize;
            let table = mode.psn_entries(ENTRIES) as usize * mode.psn.entry_bytes() as usize;
            for (i, unit) in [0u32, 1, 15, 16, 17, 0xffff, 0x1_0000, 0xdead_beef]
                .into_iter()
                .enumerate()
            {
                let pos = SqPos {
                    unit: ProdIdx(unit),
                    msg: unit.wrapping_mul(3),
                    psn: (unit.wrapping_mul(7) + i as u32) & 0xff_ffff,
                };
                let value = 0x0123_4567_89ab_cdefu64.rotate_left(i as u32 * 5);
                let remote = Remote {
                    addr: 0x7f00_0000_0000 + i as u64 * 8,
                    rkey: 0x4321 + i as u32,
                };
                for bytes in [8u32, 4] {
                    let flags = if i % 2 == 0 {
                        SendFlags::SIGNALED
                    } else {
                        SendFlags::empty()
                    };
                    let mut out = Vec::new();
                    for dev in [false, true] {
                        let mut mem = vec![Slot([0xa5; 16]); slots + table.div_ceil(16)];
                        let mut db = [0u64; 1];
                        let base = mem.as_mut_ptr() as u64;
                        let wq = WqHandle {
                            buf: base,
                            dbrec: 0,
                            db: db.as_mut_ptr() as u64,
                            entries: ENTRIES,
                            stride: 16,
                            qpn: 0x0abc,
                            max_inline: 96,
                            max_sge: 6,
                        };
                        let sq = BnxtSq::new(
                            wq,
                            mode,
                            base + slots as u64 * 16,
                            mode.psn_entries(ENTRIES),
                            1024,
                            0x12_3450 + i as u32,
                        )
                        .unwrap();
                        let v = value.to_ne_bytes();
                        // SAFETY: ring, PSN table and doorbell word are owned here; the request
                        // (an inline WRITE of 4 or 8 bytes) is one `Bnxt::check` accepts.
                        let posted = unsafe {
                            if dev {
                                let any = device::AnySq::new(3, 1, &sq);
                                let (r, p) = device::any_write_value_at(
                                    &any,
                                    pos,
                                    remote,
                                    value,
                                    bytes,
                                    flags.bits(),
                                );
                                assert_eq!(r, 0, "{mode:?}");
                                p
                            } else {
                                let wr = WorkRequest::Write {
                                    remote,
                                    payload: Payload::Inline(&v[..bytes as usize]),
                                    imm: None,
                                };
                                assert!(Bnxt::check(&sq, &wr).is_ok());
                                let p = Bnxt::post(&sq, pos, &wr, flags);
                                Bnxt::ring_sq(&sq, &p);
                                p
                            }
                        };
                        out.push((mem, db, posted));
                    }
                    assert_eq!(out[0], out[1], "{mode:?} at {pos:?}, {bytes} bytes");
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(compared, 9 * 8 * 2);
}
