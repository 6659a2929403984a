//! Pulled WRITEs and pushed READs between process fabrics: a large message's data copied once,
//! by the responder's engine, from or into the requester's memory (`process_vm_readv` /
//! `writev`), instead of twice through the rings. Two process fabrics in one test process talk
//! as two processes do; the kernel lets a process reach its own memory, so the probe succeeds
//! here as it does between processes of one user.

use std::time::Duration;

use gda_hal::{Payload, Remote, SendFlags, SendQueue, Sge, SqError, WcStatus, WorkRequest};
use gda_native::Native;
use gda_sim::{Access, Cq, CqMode, Fabric, FabricConfig, Mr, Pd, Qp, QpInit};

struct Side {
    fabric: Fabric,
    pd: Pd,
    cq: Cq,
    qp: Qp,
    mr: Mr,
}

fn side(len: usize, cross: bool) -> Side {
    let fabric = Fabric::process(FabricConfig::default()).unwrap();
    fabric.set_cross_memory(cross);
    let nic = fabric.add_nic_for::<Native>();
    let pd = nic.alloc_pd();
    let cq = nic.create_cq(256, CqMode::Normal).unwrap();
    let qp = pd.create_qp(QpInit::default(), &cq, &cq).unwrap();
    let mr = pd.alloc_mr(len, Access::ALL);
    Side {
        fabric,
        pd,
        cq,
        qp,
        mr,
    }
}

fn pair(a: &Side, b: &Side) {
    a.qp.bring_up_at(&b.qp.endpoint(), b.qp.start_psn())
        .unwrap();
    b.qp.bring_up_at(&a.qp.endpoint(), a.qp.start_psn())
        .unwrap();
}

/// Connects `a`'s QP to a new QP of `b` (which serves many requesters in turn), returned.
fn pair_new(a: &Side, b: &Side) -> Qp {
    let qb = b.pd.create_qp(QpInit::default(), &b.cq, &b.cq).unwrap();
    a.qp.bring_up_at(&qb.endpoint(), qb.start_psn()).unwrap();
    qb.bring_up_at(&a.qp.endpoint(), a.qp.start_psn()).unwrap();
    qb
}

fn sq(s: &Side) -> SendQueue<Native> {
    // SAFETY: every test keeps the QP and CQ alive longer than the queue.
    unsafe { SendQueue::new(s.qp.sq_handle::<Native>().unwrap(), s.cq.handle(), 10_000) }.unwrap()
}

/// One small WRITE from `a` to `b`'s region and back: once it completed, `b` has accepted
/// `a`'s connection and said in the segment whether it reaches `a`'s memory (it says so
/// before it serves a request), so the next large message goes as a pull or push if it can.
fn warm_up(q: &SendQueue<Native>, b: &Side) {
    q.post(
        &WorkRequest::Write {
            remote: Remote {
                addr: b.mr.addr(),
                rkey: b.mr.rkey(),
            },
            payload: Payload::Inline(b"hello"),
            imm: None,
        },
        SendFlags::SIGNALED,
    )
    .unwrap();
    q.quiet().unwrap();
}

fn status_of(r: Result<(), SqError>) -> WcStatus {
    match r {
        Ok(()) => WcStatus::Success,
        Err(SqError::Completion { status, .. }) => status,
        Err(e) => panic!("no completion: {e}"),
    }
}

/// `len` bytes at `addr` (memory a region of the test holds).
fn bytes(addr: u64, len: usize) -> Vec<u8> {
    // SAFETY: the callers pass ranges inside live regions, read with nothing in flight.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec()
}

fn fill(addr: u64, len: usize, seed: u32) {
    for i in 0..len {
        // SAFETY: as `bytes`; nothing is in flight.
        unsafe { *(addr as *mut u8).add(i) = (i as u32).wrapping_mul(31).wrapping_add(seed) as u8 };
    }
}

/// A WRITE gathered from three local entries and a READ scattered into two land byte for
/// byte, each counted as one copy by the responder; a message below the threshold, and every
/// message once either side turns cross-memory copies off, goes through the rings (same bytes,
/// no count) — so the data path is compared both ways on the same messages.
#[test]
fn large_writes_and_reads_are_copied_once_by_the_responder() {
    const LEN: usize = 1 << 20;
    let mut compared = 0;
    for (cross_a, cross_b, want) in [(true, true, 2), (false, true, 0), (true, false, 0)] {
        let a = side(2 * LEN, cross_a);
        let b = side(2 * LEN, cross_b);
        pair(&a, &b);
        let q = sq(&a);
        warm_up(&q, &b);
        // WRITE: a's bytes [0, 96 KiB) from three entries → b at offset 4096.
        let (x, y, z) = (10_000u32, 50_000u32, 38_304u32);
        let src = a.mr.addr();
        fill(src, LEN, 7);
        let sges = [
            Sge {
                addr: src + 1000,
                length: x,
                lkey: a.mr.lkey(),
            },
            Sge {
                addr: src + 300_000,
                length: y,
                lkey: a.mr.lkey(),
            },
            Sge {
                addr: src + 700_001,
                length: z,
                lkey: a.mr.lkey(),
            },
        ];
        q.post(
            &WorkRequest::Write {
                remote: Remote {
                    addr: b.mr.addr() + 4096,
                    rkey: b.mr.rkey(),
                },
                payload: Payload::Sges(&sges),
                imm: None,
            },
            SendFlags::SIGNALED,
        )
        .unwrap();
        q.quiet().unwrap();
        let mut want_w = bytes(src + 1000, x as usize);
        want_w.extend(bytes(src + 300_000, y as usize));
        want_w.extend(bytes(src + 700_001, z as usize));
        assert!(
            bytes(b.mr.addr() + 4096, want_w.len()) == want_w,
            "WRITE landed wrong"
        );
        // READ: b's bytes [LEN, LEN + 200 KiB) → two entries of a's second half.
        fill(b.mr.addr() + LEN as u64, LEN, 99);
        let (p, r) = (123_457u32, 81_343u32);
        let dst = a.mr.addr() + LEN as u64;
        let into = [
            Sge {
                addr: dst + 5,
                length: p,
                lkey: a.mr.lkey(),
            },
            Sge {
                addr: dst + 400_000,
                length: r,
                lkey: a.mr.lkey(),
            },
        ];
        q.post(
            &WorkRequest::Read {
                remote: Remote {
                    addr: b.mr.addr() + LEN as u64,
                    rkey: b.mr.rkey(),
                },
                sges: &into,
            },
            SendFlags::SIGNALED,
        )
        .unwrap();
        q.quiet().unwrap();
        let want_r = bytes(b.mr.addr() + LEN as u64, (p + r) as usize);
        let mut got = bytes(dst + 5, p as usize);
        got.extend(bytes(dst + 400_000, r as usize));
        assert!(got == want_r, "READ landed wrong");
        // Below the threshold: through the rings.
        q.post(
            &WorkRequest::Write {
                remote: Remote {
                    addr: b.mr.addr(),
                    rkey: b.mr.rkey(),
                },
                payload: Payload::Sges(&[Sge {
                    addr: src,
                    length: 4096,
                    lkey: a.mr.lkey(),
                }]),
                imm: None,
            },
            SendFlags::SIGNALED,
        )
        .unwrap();
        q.quiet().unwrap();
        assert!(bytes(b.mr.addr(), 4096) == bytes(src, 4096));
        assert_eq!(
            b.fabric.stats().cross_copies,
            want,
            "cross-memory a {cross_a}, b {cross_b}"
        );
        compared += 1;
    }
    assert_eq!(compared, 3);
}

/// A pulled WRITE from memory the requester no longer maps, and a pushed READ into it, are
/// local protection errors at the requester (the responder's copy gets `EFAULT`, nothing
/// faults in either engine); the responder serves the next QP as before.
#[test]
fn a_pull_or_push_on_unmapped_memory_is_a_local_error_not_a_crash() {
    use rustix::mm::{MapFlags, ProtFlags};
    const LEN: usize = 256 << 10;
    let b = side(LEN, true);
    let mut seen = 0;
    for read in [false, true] {
        let a = side(4096, true);
        let _qb = pair_new(&a, &b);
        // SAFETY: a fresh anonymous mapping, unmapped below while still registered (the
        // misuse under test: the region's memory vanishes behind the NIC's back).
        let gone = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                LEN,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .unwrap() as u64;
        // SAFETY: the region is dropped before the test ends; the memory is unmapped on
        // purpose, and only the responder's system call touches it afterwards.
        let mr = unsafe { a.pd.register(gone, LEN, Access::ALL) };
        // SAFETY: the mapping made above.
        unsafe { rustix::mm::munmap(gone as *mut _, LEN) }.unwrap();
        let q = sq(&a);
        warm_up(&q, &b);
        let sge = [Sge {
            addr: gone,
            length: LEN as u32,
            lkey: mr.lkey(),
        }];
        let remote = Remote {
            addr: b.mr.addr(),
            rkey: b.mr.rkey(),
        };
        let wr = if read {
            WorkRequest::Read { remote, sges: &sge }
        } else {
            WorkRequest::Write {
                remote,
                payload: Payload::Sges(&sge),
                imm: None,
            }
        };
        q.post(&wr, SendFlags::SIGNALED).unwrap();
        assert_eq!(status_of(q.quiet()), WcStatus::LocProtErr, "read {read}");
        drop(q);
        drop(mr);
        seen += 1;
    }
    // B still serves a new peer.
    let a = side(LEN, true);
    let _qb = pair_new(&a, &b);
    let q = sq(&a);
    q.post(
        &WorkRequest::Write {
            remote: Remote {
                addr: b.mr.addr(),
                rkey: b.mr.rkey(),
            },
            payload: Payload::Sges(&[Sge {
                addr: a.mr.addr(),
                length: LEN as u32,
                lkey: a.mr.lkey(),
            }]),
            imm: None,
        },
        SendFlags::SIGNALED,
    )
    .unwrap();
    q.quiet().unwrap();
    assert_eq!(seen, 2);
    assert_eq!(b.fabric.stats().cross_copies, 1);
}

/// Deregistering the local region of a pulled WRITE waits until the responder has copied it
/// (the region is pinned until the response): swept across the transfer, the WRITE either
/// succeeds or never started, and the memory freed right after deregistration is never read.
#[test]
fn deregistering_a_pulled_writes_source_waits_for_the_copy() {
    const LEN: usize = 16 << 20;
    let b = side(LEN, true);
    let mut done = 0;
    for i in 0..8u64 {
        let a = side(4096, true);
        let _qb = pair_new(&a, &b);
        let buf = gda_sim::DmaBuf::new(LEN, 4096);
        fill(buf.addr(), 4096, i as u32);
        // SAFETY: `buf` outlives the region (dropped right after it).
        let src = unsafe { a.pd.register(buf.addr(), LEN, Access::empty()) };
        let q = sq(&a);
        warm_up(&q, &b);
        q.post(
            &WorkRequest::Write {
                remote: Remote {
                    addr: b.mr.addr(),
                    rkey: b.mr.rkey(),
                },
                payload: Payload::Sges(&[Sge {
                    addr: src.addr(),
                    length: LEN as u32,
                    lkey: src.lkey(),
                }]),
                imm: None,
            },
            SendFlags::SIGNALED,
        )
        .unwrap();
        std::thread::sleep(Duration::from_micros(i * i * 100));
        drop(src);
        drop(buf);
        match status_of(q.quiet()) {
            WcStatus::Success => {
                assert_eq!(bytes(b.mr.addr(), 16), {
                    let v: Vec<u8> = (0..16u32)
                        .map(|k| k.wrapping_mul(31).wrapping_add(i as u32) as u8)
                        .collect();
                    v
                });
            }
            // Deregistered before the post's local check ran.
            WcStatus::LocProtErr => {}
            s => panic!("WRITE {i}: {s:?}"),
        }
        done += 1;
    }
    assert_eq!(done, 8);
    assert!(b.fabric.stats().cross_copies > 0, "no WRITE was pulled");
}
