//! The provider-generic conformance cases over QPs made by a host control path
//! (`gda_hal::control::Device`), not by the software NIC's own API. The suites come from the
//! vendor table (`gda::providers`): `sim::<provider>` runs the cases on the in-process software
//! NIC (its `SimDevice`) for every provider; with the `verbs` feature, `verbs::<provider>` runs
//! them for every hardware vendor through its rdma-core control path loaded at run time and
//! pointed at the verbs-compatible library (ConnectX: `gda_mlx5::host::Mlx5Device`, verbs +
//! `mlx5dv_init_obj`; Thor2: `gda_bnxt::host::BnxtDevice`, verbs + `bnxt_re_dv_*` with rings
//! laid out by gda), and `hardware` (ignored) on the real NIC `GDA_HW_DEVICE` names, with the
//! control path of its vendor.
//!
//! Every case posts through the provider's device functions (`Raw<P>`/`RecvQ<P>` of the
//! suite's harness) into the rings the control path handed out, and returns how many checks it
//! compared, which each test asserts.

mod common;

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Raw, RecvQ, fetched, pattern};
use gda::hal::control::{
    Access, CompletionQueue, CqAttr, Device, Endpoint, MemoryDesc, MemoryRegion, PathRequest,
    QpCaps, QueueAllocator, QueueBuffer, QueueMemory,
};
use gda::hal::{AtomicOp, Payload, Remote, SendFlags, Sge, WcOpcode, WcStatus, WorkRequest};

/// Two connected QPs of one device (A sends, B receives), their CQs, and host buffers
/// registered in the PD.
struct Bed<'d, D: Device> {
    dev: &'d D,
    pd: D::Pd,
    raw: Raw<D::Provider>,
    recv: RecvQ<D::Provider>,
    bufs: Vec<(Box<[u8]>, D::Mr)>,
    // Dropped last (field order): the QPs, then their CQs.
    _qps: (
        gda::hal::control::RcQp<D::Qp, gda::hal::control::Rts>,
        gda::hal::control::RcQp<D::Qp, gda::hal::control::Rts>,
    ),
    _cqs: (D::Cq, D::Cq),
}

impl<'d, D: Device> Bed<'d, D> {
    fn new(dev: &'d D, memory: QueueMemory) -> Self {
        let path = dev
            .path(PathRequest::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let pd = dev.alloc_pd().unwrap();
        let cq = |n| {
            dev.create_cq(&CqAttr {
                memory: memory.clone(),
                ..CqAttr::new(n)
            })
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let (cq_a, cq_b) = (cq(4096), cq(4096));
        let caps = QpCaps {
            send_wr: 256,
            recv_wr: 256,
            max_sge: 4,
            max_inline: 256,
            memory,
        };
        let qa = dev
            .create_rc_qp(&pd, &cq_a, &cq_a, &caps)
            .unwrap_or_else(|e| panic!("{e}"));
        let qb = dev
            .create_rc_qp(&pd, &cq_b, &cq_b, &caps)
            .unwrap_or_else(|e| panic!("{e}"));
        // Endpoints cross as bytes, as between hosts.
        let ep_a = Endpoint::from_bytes(&qa.endpoint(&path).to_bytes()).unwrap();
        let ep_b = Endpoint::from_bytes(&qb.endpoint(&path).to_bytes()).unwrap();
        let qa = qa
            .connect(&path, &ep_b)
            .map_err(|r| r.error)
            .unwrap_or_else(|e| panic!("{e}"));
        let qb = qb
            .connect(&path, &ep_a)
            .map_err(|r| r.error)
            .unwrap_or_else(|e| panic!("{e}"));
        let raw = Raw::new(qa.sq_handle().unwrap(), cq_a.handle());
        let recv = RecvQ::new(qb.rq_handle().unwrap(), cq_b.handle());
        Self {
            dev,
            pd,
            raw,
            recv,
            bufs: Vec::new(),
            _qps: (qa, qb),
            _cqs: (cq_a, cq_b),
        }
    }

    /// A zeroed registered buffer; returns its index.
    fn buf(&mut self, len: usize, access: Access) -> usize {
        let mut b = vec![0u8; len.max(1)].into_boxed_slice();
        // SAFETY: the buffer lives in `self.bufs` next to its region, longer than any operation.
        let mr = unsafe {
            self.dev.register(
                &self.pd,
                &MemoryDesc::Host {
                    addr: b.as_mut_ptr(),
                    len: b.len(),
                },
                access,
            )
        }
        .unwrap_or_else(|e| panic!("{e}"));
        self.bufs.push((b, mr));
        self.bufs.len() - 1
    }

    fn sge(&self, i: usize, off: u64, len: u32) -> Sge {
        let mr = &self.bufs[i].1;
        Sge {
            addr: mr.addr() + off,
            length: len,
            lkey: mr.lkey(),
        }
    }

    fn remote(&self, i: usize, off: u64) -> Remote {
        let mr = &self.bufs[i].1;
        Remote {
            addr: mr.addr() + off,
            rkey: mr.rkey(),
        }
    }

    /// The buffer's bytes as the NIC left them.
    fn bytes(&self, i: usize) -> Vec<u8> {
        let b = &self.bufs[i].0;
        let mut out = vec![0u8; b.len()];
        // SAFETY: the buffer is live; the NIC's writes completed before their CQE was polled.
        unsafe { gda::hal::mmio::dma_copy(out.as_mut_ptr(), b.as_ptr(), b.len()) };
        out
    }

    fn fill(&mut self, i: usize, off: usize, data: &[u8]) {
        let b = &mut self.bufs[i].0;
        // SAFETY: inside the live buffer; no operation on it is in flight.
        unsafe { gda::hal::mmio::dma_copy(b.as_mut_ptr().add(off), data.as_ptr(), data.len()) };
    }

    fn ok(&mut self, what: &str) -> gda::hal::WorkCompletion {
        let wc = self.raw.wait(1)[0];
        assert_eq!(wc.status, WcStatus::Success, "{what}: {wc:?}");
        wc
    }
}

const SIZES: &[usize] = &[0, 1, 7, 8, 63, 64, 4095, 4096, 65536, 1 << 20];

fn write_every_size<D: Device>(dev: &D) -> usize {
    let mut t = Bed::new(dev, QueueMemory::Provider);
    let mut n_checked = 0;
    for &n in SIZES {
        let src = t.buf(n, Access::LOCAL_WRITE);
        let dst = t.buf(n + 64, Access::ALL);
        let data = pattern(n, n as u8);
        t.fill(src, 0, &data);
        let sges = [t.sge(src, 0, n as u32)];
        let wr = WorkRequest::Write {
            remote: t.remote(dst, 32),
            payload: Payload::Sges(&sges),
            imm: None,
        };
        t.raw.post(&wr, SendFlags::SIGNALED);
        let wc = t.ok("write");
        assert_eq!(wc.opcode, WcOpcode::RdmaWrite, "size {n}");
        let got = t.bytes(dst);
        assert_eq!(&got[32..32 + n], &data[..], "size {n}");
        assert!(
            got[..32].iter().chain(&got[32 + n..]).all(|&b| b == 0),
            "bytes outside the target changed (size {n})"
        );
        n_checked += 1;
    }
    n_checked
}

fn inline_write_every_size<D: Device>(dev: &D) -> usize {
    let mut t = Bed::new(dev, QueueMemory::Provider);
    let dst = t.buf(4096, Access::ALL);
    let max = gda::hal::QueueHandle::wq(&t.raw.sq).max_inline as usize;
    let mut n_checked = 0;
    for n in [1usize, 7, 8, 12, 13, 16, 17, 63, 64, 96, 100, 200, 256] {
        if n > max {
            continue;
        }
        let data = pattern(n, 3);
        let wr = WorkRequest::Write {
            remote: t.remote(dst, 100),
            payload: Payload::Inline(&data),
            imm: None,
        };
        t.raw.post(&wr, SendFlags::SIGNALED);
        t.ok("inline write");
        assert_eq!(&t.bytes(dst)[100..100 + n], &data[..], "inline size {n}");
        n_checked += 1;
    }
    assert!(
        n_checked >= 9,
        "the QP's max_inline ({max}) is below 96 bytes"
    );
    n_checked
}

fn read_every_size<D: Device>(dev: &D) -> usize {
    let mut t = Bed::new(dev, QueueMemory::Provider);
    let mut n_checked = 0;
    for &n in SIZES {
        let remote = t.buf(n + 16, Access::ALL);
        let local = t.buf(n + 16, Access::LOCAL_WRITE);
        let data = pattern(n, 7);
        t.fill(remote, 16, &data);
        let sges = [t.sge(local, 8, n as u32)];
        let wr = WorkRequest::Read {
            remote: t.remote(remote, 16),
            sges: &sges,
        };
        t.raw.post(&wr, SendFlags::SIGNALED);
        let wc = t.ok("read");
        assert_eq!(wc.opcode, WcOpcode::RdmaRead, "size {n}");
        assert_eq!(&t.bytes(local)[8..8 + n], &data[..], "size {n}");
        n_checked += 1;
    }
    n_checked
}

fn send_recv_with_immediates<D: Device>(dev: &D) -> usize {
    let mut t = Bed::new(dev, QueueMemory::Provider);
    let src = t.buf(8192, Access::LOCAL_WRITE);
    let dst = t.buf(8192, Access::LOCAL_WRITE);
    let mut n_checked = 0;
    for (i, &n) in [0usize, 1, 64, 1000, 4096].iter().enumerate() {
        let data = pattern(n, i as u8);
        t.fill(src, 0, &data);
        let s = t.sge(dst, 0, 8192);
        t.recv.post(s);
        let sges = [t.sge(src, 0, n as u32)];
        let imm = 0x1234_0000 + i as u32;
        t.raw.post(
            &WorkRequest::Send {
                payload: Payload::Sges(&sges),
                imm: Some(imm),
            },
            SendFlags::SIGNALED,
        );
        let wc = t.ok("send");
        assert_eq!(wc.opcode, WcOpcode::Send);
        let rc = t.recv.wait(1)[0];
        assert_eq!(rc.status, WcStatus::Success, "{rc:?}");
        assert!(rc.is_recv);
        assert_eq!((rc.byte_len, rc.imm), (n as u32, Some(imm)), "size {n}");
        assert_eq!(&t.bytes(dst)[..n], &data[..]);
        n_checked += 1;
    }
    n_checked
}

fn atomics<D: Device>(dev: &D) -> usize {
    let mut t = Bed::new(dev, QueueMemory::Provider);
    let target = t.buf(64, Access::ALL);
    let result = t.buf(64, Access::LOCAL_WRITE);
    t.fill(target, 8, &40u64.to_ne_bytes());
    let mut n_checked = 0;
    let ops = [
        (AtomicOp::FetchAdd { add: 2 }, 40, 42),
        (
            AtomicOp::CompareSwap {
                compare: 41,
                swap: 7,
            },
            42,
            42,
        ),
        (
            AtomicOp::CompareSwap {
                compare: 42,
                swap: 7,
            },
            42,
            7,
        ),
        (AtomicOp::FetchAdd { add: u64::MAX }, 7, 6),
    ];
    for (op, was, now) in ops {
        let wr = WorkRequest::Atomic {
            remote: t.remote(target, 8),
            local: t.sge(result, 0, 8),
            op,
            bytes: 8,
        };
        t.raw.post(&wr, SendFlags::SIGNALED);
        let wc = t.ok("atomic");
        assert!(
            matches!(wc.opcode, WcOpcode::FetchAdd | WcOpcode::CompSwap),
            "{wc:?}"
        );
        assert_eq!(fetched::<D::Provider>(&t.bytes(result)[..8]), was, "{op:?}");
        let v = u64::from_ne_bytes(t.bytes(target)[8..16].try_into().unwrap());
        assert_eq!(v, now, "{op:?}");
        n_checked += 1;
    }
    n_checked
}

/// Unsignalled WRITEs and NOPs retire with the next signalled request; the ring wraps many
/// times.
fn unsignaled_retirement_and_ring_wrap<D: Device>(dev: &D) -> usize {
    let mut t = Bed::new(dev, QueueMemory::Provider);
    let src = t.buf(64, Access::LOCAL_WRITE);
    let dst = t.buf(8 * 4096, Access::ALL);
    let ring = gda::hal::QueueHandle::wq(&t.raw.sq).entries as usize;
    let mut n_checked = 0;
    // Batches of a quarter ring: unsignalled writes and a NOP, then one signalled write.
    let batch = (ring / 4).max(2);
    for round in 0..(4 * ring / batch).max(8) {
        t.fill(src, 0, &(round as u64).to_ne_bytes());
        for k in 0..batch - 2 {
            let sges = [t.sge(src, 0, 8)];
            let wr = WorkRequest::Write {
                remote: t.remote(dst, ((k % 4096) * 8) as u64),
                payload: Payload::Sges(&sges),
                imm: None,
            };
            t.raw.post(&wr, SendFlags::empty());
        }
        t.raw.post(&WorkRequest::Nop, SendFlags::empty());
        let sges = [t.sge(src, 0, 8)];
        let last = WorkRequest::Write {
            remote: t.remote(dst, 0),
            payload: Payload::Sges(&sges),
            imm: None,
        };
        t.raw.post(&last, SendFlags::SIGNALED);
        t.ok("signalled write after unsignalled ones");
        let got = u64::from_ne_bytes(t.bytes(dst)[..8].try_into().unwrap());
        assert_eq!(got, round as u64);
        n_checked += 1;
    }
    assert!(
        t.raw.pos.unit.0 as usize > 3 * ring || n_checked * batch > 3 * ring,
        "the ring did not wrap"
    );
    n_checked
}

/// Hands out page-aligned zeroed blocks and counts them.
#[derive(Debug, Default)]
struct Counting {
    live: Mutex<Vec<(usize, usize, QueueBuffer)>>,
    allocs: AtomicUsize,
    frees: AtomicUsize,
}

impl QueueAllocator for Counting {
    fn alloc(&self, what: QueueBuffer, len: usize, align: usize) -> Option<NonNull<u8>> {
        assert!(align <= 4096, "alignment {align}");
        let layout = Layout::from_size_align(len.max(1), 4096).ok()?;
        // SAFETY: non-zero size.
        let p = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
        self.allocs.fetch_add(1, Ordering::Relaxed);
        self.live
            .lock()
            .unwrap()
            .push((p.as_ptr() as usize, len, what));
        Some(p)
    }

    unsafe fn free(&self, what: QueueBuffer, ptr: NonNull<u8>, len: usize) {
        let mut live = self.live.lock().unwrap();
        let i = live
            .iter()
            .position(|&(p, l, w)| p == ptr.as_ptr() as usize && l == len && w == what)
            .expect("freeing what was allocated");
        live.swap_remove(i);
        self.frees.fetch_add(1, Ordering::Relaxed);
        // SAFETY: allocated in `alloc` with this layout.
        unsafe {
            std::alloc::dealloc(
                ptr.as_ptr(),
                Layout::from_size_align(len.max(1), 4096).unwrap(),
            )
        };
    }
}

/// Rings and doorbell records in the caller's memory: the handles point into it, data moves,
/// and every block goes back to the allocator when the objects are dropped.
fn rings_in_caller_memory<D: Device>(dev: D) -> usize {
    let alloc = std::sync::Arc::new(Counting::default());
    let n_checked;
    {
        let mut t = Bed::new(&dev, QueueMemory::Caller(alloc.clone()));
        let inside = |addr: u64| {
            alloc
                .live
                .lock()
                .unwrap()
                .iter()
                .any(|&(p, l, _)| addr >= p as u64 && addr < (p + l) as u64)
        };
        let wq = *gda::hal::QueueHandle::wq(&t.raw.sq);
        assert!(
            inside(wq.buf),
            "the send ring is not in the caller's memory"
        );
        assert!(
            inside(t.raw.cq.buf),
            "the CQ ring is not in the caller's memory"
        );
        let kinds: Vec<QueueBuffer> = alloc.live.lock().unwrap().iter().map(|x| x.2).collect();
        assert!(
            kinds.contains(&QueueBuffer::CompletionQueue)
                && kinds.contains(&QueueBuffer::SendQueue),
            "{kinds:?}"
        );
        let dst = t.buf(64, Access::ALL);
        let wr = WorkRequest::Write {
            remote: t.remote(dst, 0),
            payload: Payload::Inline(b"caller memory"),
            imm: None,
        };
        t.raw.post(&wr, SendFlags::SIGNALED);
        t.ok("write through caller-placed rings");
        assert_eq!(&t.bytes(dst)[..13], b"caller memory");
        n_checked = 3;
    }
    drop(dev);
    let (a, f) = (
        alloc.allocs.load(Ordering::Relaxed),
        alloc.frees.load(Ordering::Relaxed),
    );
    assert!(a >= 4, "{a} allocations");
    assert_eq!(a, f, "every ring and record goes back to the allocator");
    n_checked
}

/// One `#[test]` per case for a device made by `$dev`.
/// The cases, for the suites' tests and for hardware (where the control path is picked at run
/// time, by the vendor table).
#[derive(Clone, Copy)]
enum Case {
    WriteEverySize,
    InlineWriteEverySize,
    ReadEverySize,
    SendRecvWithImmediates,
    Atomics,
    UnsignaledRetirementAndRingWrap,
    RingsInCallerMemory,
}

/// Runs `case` on `dev` and asserts how many checks it compared.
fn check<D: Device>(case: Case, dev: D) {
    match case {
        Case::WriteEverySize => assert_eq!(write_every_size(&dev), SIZES.len()),
        Case::InlineWriteEverySize => assert!(inline_write_every_size(&dev) >= 9),
        Case::ReadEverySize => assert_eq!(read_every_size(&dev), SIZES.len()),
        Case::SendRecvWithImmediates => assert_eq!(send_recv_with_immediates(&dev), 5),
        Case::Atomics => assert_eq!(atomics(&dev), 4),
        Case::UnsignaledRetirementAndRingWrap => {
            assert!(unsignaled_retirement_and_ring_wrap(&dev) >= 8)
        }
        Case::RingsInCallerMemory => assert_eq!(rings_in_caller_memory(dev), 3),
    }
}

/// A module `$name` with a test per case, each running `$run(case)`.
macro_rules! suite {
    ($name:ident, [$($attr:meta)*], $run:expr) => {
        mod $name {
            use crate::Case;
            #[test]
            $(#[$attr])*
            fn write_every_size() {
                ($run)(Case::WriteEverySize)
            }
            #[test]
            $(#[$attr])*
            fn inline_write_every_size() {
                ($run)(Case::InlineWriteEverySize)
            }
            #[test]
            $(#[$attr])*
            fn read_every_size() {
                ($run)(Case::ReadEverySize)
            }
            #[test]
            $(#[$attr])*
            fn send_recv_with_immediates() {
                ($run)(Case::SendRecvWithImmediates)
            }
            #[test]
            $(#[$attr])*
            fn atomics() {
                ($run)(Case::Atomics)
            }
            #[test]
            $(#[$attr])*
            fn unsignaled_retirement_and_ring_wrap() {
                ($run)(Case::UnsignaledRetirementAndRingWrap)
            }
            #[test]
            $(#[$attr])*
            fn rings_in_caller_memory() {
                ($run)(Case::RingsInCallerMemory)
            }
        }
    };
}

fn sim_device<P: gda::sim::Modeled>() -> gda::sim::SimDevice<P> {
    let fabric = gda::sim::Fabric::new(gda::sim::FabricConfig::default());
    gda::sim::SimDevice::<P>::new(&fabric)
}

/// `sim::<provider>`: every provider of the vendor table on the in-process software NIC.
macro_rules! sim_suites {
    ([$($name:ident => $p:ty),* $(,)?]) => {
        mod sim {
            $( suite!($name, [], |c| crate::check(c, crate::sim_device::<$p>())); )*
        }
    };
}
gda::providers::for_each_provider!(sim_suites);

#[cfg(feature = "verbs")]
fn verbs() -> std::sync::Arc<gda_rdma::Verbs> {
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("verbs-sim/libibverbs.so.1");
    std::sync::Arc::new(
        gda_rdma::Verbs::load_from(&lib).expect("load the verbs-compatible library"),
    )
}

/// The verbs-compatible library's device `gda_<name>_0`, opened with provider `P`'s control
/// path.
#[cfg(feature = "verbs")]
fn verbs_device<P: gda_rdma::Host>(name: &str) -> P::Device {
    let ctx = gda_rdma::Context::open(verbs(), &format!("gda_{name}_0"))
        .unwrap_or_else(|e| panic!("gda_{name}_0: {e}"));
    P::on(ctx).unwrap_or_else(|e| panic!("gda_{name}_0: {e}"))
}

/// `verbs::<provider>`: every hardware vendor of the table, through rdma-core's control path
/// (the vendor's `host` module) pointed at the verbs-compatible library's device of that vendor.
#[cfg(feature = "verbs")]
macro_rules! verbs_suites {
    ([$($name:ident => $p:ty),* $(,)?]) => {
        mod verbs {
            $( suite!($name, [], |c| crate::check(
                c,
                crate::verbs_device::<$p>(stringify!($name)),
            )); )*
        }
    };
}
#[cfg(feature = "verbs")]
gda::providers::for_each_host_provider!(verbs_suites);

#[cfg(feature = "verbs")]
fn hardware_device() -> (std::sync::Arc<gda_rdma::Verbs>, String) {
    let name = std::env::var("GDA_HW_DEVICE").expect("GDA_HW_DEVICE names the NIC to use");
    let verbs = gda_rdma::Verbs::load().unwrap_or_else(|e| panic!("{e}"));
    (std::sync::Arc::new(verbs), name)
}

/// Runs `case` on the NIC `GDA_HW_DEVICE` names, opened by the vendor table with the control
/// path of the vendor its PCI id belongs to.
#[cfg(feature = "verbs")]
fn on_hardware(case: Case) {
    struct On(Case);
    impl gda::providers::host::OnDevice for On {
        type Output = ();
        fn run<D>(self, d: D)
        where
            D: Device + Send + Sync + 'static,
            D::Provider: gda_rdma::Host,
        {
            check(self.0, d);
        }
    }
    let (verbs, name) = hardware_device();
    gda::providers::host::open(verbs, Some(&name), On(case)).unwrap_or_else(|e| panic!("{e}"));
}

// `hardware`: the same cases on a real NIC of any hardware vendor of the table:
// `GDA_HW_DEVICE=mlx5_0 cargo test --release --features verbs --test control_conformance
// hardware:: -- --ignored` (Thor2 needs Broadcom's `libbnxt_re` for its direct verbs).
#[cfg(feature = "verbs")]
suite!(
    hardware,
    [ignore = "needs an RDMA NIC: set GDA_HW_DEVICE"],
    crate::on_hardware
);

/// Rings in GPU memory and the doorbell mapped for the GPU, on real hardware:
/// `GDA_HW_DEVICE=mlx5_0 GDA_HW_GPU=1 cargo test --release --features verbs,hip --test
/// control_conformance hardware_gpu -- --ignored`.
#[cfg(all(feature = "verbs", feature = "hip"))]
fn gpu_rings<D: Device>(dev: &D) -> usize {
    let hip = gda_hip::Hip::load().unwrap_or_else(|e| panic!("{e}"));
    let mem = gda_hip::GpuQueueMemory::new(&hip).unwrap_or_else(|e| panic!("{e}"));
    let mut t = Bed::new(dev, QueueMemory::Caller(std::sync::Arc::new(mem)));
    let wq = *gda::hal::QueueHandle::wq(&t.raw.sq);
    // SAFETY: the QP's doorbell, alive as long as `t`, which outlives the mapping.
    let db =
        unsafe { gda_hip::DoorbellMapping::new(&hip, wq.db) }.unwrap_or_else(|e| panic!("{e}"));
    assert!(!db.device_ptr().is_null());
    let dst = t.buf(64, Access::ALL);
    let wr = WorkRequest::Write {
        remote: t.remote(dst, 0),
        payload: Payload::Inline(b"gpu rings"),
        imm: None,
    };
    t.raw.post(&wr, SendFlags::SIGNALED);
    t.ok("write through rings in GPU memory");
    assert_eq!(&t.bytes(dst)[..9], b"gpu rings");
    drop(db);
    2
}

#[cfg(all(feature = "verbs", feature = "hip"))]
#[test]
#[ignore = "needs a NIC and an AMD GPU: set GDA_HW_DEVICE and GDA_HW_GPU=1"]
fn hardware_gpu_rings() {
    let (v, n) = hardware_device();
    struct On;
    impl gda::providers::host::OnDevice for On {
        type Output = usize;
        fn run<D>(self, d: D) -> usize
        where
            D: Device + Send + Sync + 'static,
            D::Provider: gda_rdma::Host,
        {
            gpu_rings(&d)
        }
    }
    let checked =
        gda::providers::host::open(v, Some(&n), On).unwrap_or_else(|e| panic!("{n}: {e}"));
    assert_eq!(checked, 2);
}
