//! The typed fast path (`SendQueue::post_write_inline` and friends) against the generic
//! `SendQueue::post`, for every provider:
//!
//! - **byte identity**: two queues with identical handles over separate memory pre-filled with
//!   junk (0xA5), one posting through `post(&WorkRequest)`, the other through the typed method
//!   for the same request, after the same prefix of NOPs and with the same flags. Ring, doorbell
//!   record, doorbell register and side tables (bnxt's PSN table) must be byte-identical, the
//!   returned positions equal, and a request one path refuses the other refuses too, writing
//!   nothing;
//! - **end to end** on the software NIC: typed posts land their data, wrap the ring and recycle
//!   slots through real CQEs;
//! - **misuse** returns the documented error.

use gda_bnxt::mode::{Mode, PsnForm, WqeMode};
use gda_bnxt::{Bnxt, BnxtSq};
use gda_hal::{
    AtomicOp, Checked, CqHandle, PostError, Provider, Remote, SendFlags, SendQueue, Sge, SqError,
    W32, W64, WorkRequest, WqHandle,
};
use gda_mlx5::{Mlx5, Mlx5Sq};
use gda_native::Native;
use gda_sim::{Access, CqMode, DeviceModel, Fabric, FabricConfig, Modeled, QpInit};

const ENTRIES: u32 = 64;
const JUNK: u8 = 0xa5;

/// Device-visible memory of one queue, pre-filled with junk.
struct Mem {
    ring: Vec<u128>,
    dbrec: Vec<u128>,
    db: Vec<u128>,
    side: Vec<u128>,
    cq: Vec<u128>,
}

impl Mem {
    fn new() -> Self {
        let junk = |bytes: usize| vec![u128::from_ne_bytes([JUNK; 16]); bytes / 16];
        Self {
            ring: junk(16 << 10),
            dbrec: junk(16),
            db: junk(512),
            side: junk(16 << 10),
            // Never polled (posts stay inside the window), but a valid zeroed CQ all the same.
            cq: vec![0; 64 * 64 / 16],
        }
    }

    fn bytes(&self) -> Vec<u8> {
        [&self.ring, &self.dbrec, &self.db, &self.side]
            .iter()
            .flat_map(|v| bytemuck::cast_slice::<u128, u8>(v).to_vec())
            .collect()
    }

    fn wq(&mut self, max_inline: u32, max_sge: u32) -> WqHandle {
        WqHandle {
            buf: self.ring.as_mut_ptr() as u64,
            dbrec: self.dbrec.as_mut_ptr() as u64,
            db: self.db.as_mut_ptr() as u64,
            entries: ENTRIES,
            stride: 0,
            qpn: 0x1234,
            max_inline,
            max_sge,
        }
    }

    fn cq(&mut self) -> CqHandle {
        CqHandle {
            buf: self.cq.as_mut_ptr() as u64,
            entries: 64,
            cqe_bytes: 64,
            cqn: 7,
            ..CqHandle::default()
        }
    }
}

/// A request both paths can post: the typed method is chosen by the variant.
#[derive(Clone, Copy, Debug)]
enum Case {
    Inline(usize),
    Write(usize),
    Read(usize),
    Send(usize, Option<u32>),
    Atomic(AtomicOp, u32),
}

static DATA: [u8; 1024] = {
    let mut d = [0u8; 1024];
    let mut i = 0;
    while i < d.len() {
        d[i] = (i * 7 + 3) as u8;
        i += 1;
    }
    d
};

const REMOTE: Remote = Remote {
    addr: 0x7f00_1234_5000,
    rkey: 0xabcd_0102,
};
const LOCAL: Sge = Sge {
    addr: 0x7f00_0000_4000,
    length: 8,
    lkey: 0x5678,
};

/// Gather lists: lengths vary, and one entry is empty (mlx5 leaves empty entries out).
fn sges<const N: usize>() -> [Sge; N] {
    core::array::from_fn(|i| Sge {
        addr: 0x7f00_0000_2000 + 0x100 * i as u64,
        length: if i == 1 { 0 } else { 17 + 1000 * i as u32 },
        lkey: 0x5678 + i as u32,
    })
}

impl Case {
    fn request<'a>(&self, sg: &'a [Sge]) -> WorkRequest<'a> {
        match *self {
            Case::Inline(len) => WorkRequest::Write {
                remote: REMOTE,
                payload: gda_hal::Payload::Inline(&DATA[..len]),
                imm: None,
            },
            Case::Write(_) => WorkRequest::Write {
                remote: REMOTE,
                payload: gda_hal::Payload::Sges(sg),
                imm: None,
            },
            Case::Read(_) => WorkRequest::Read {
                remote: REMOTE,
                sges: sg,
            },
            Case::Send(_, imm) => WorkRequest::Send {
                payload: gda_hal::Payload::Sges(sg),
                imm,
            },
            Case::Atomic(op, bytes) => WorkRequest::Atomic {
                remote: REMOTE,
                local: LOCAL,
                op,
                bytes,
            },
        }
    }
}

/// Calls the typed method for a runtime size: one arm per const instance.
macro_rules! typed_inline {
    ($sq:expr, $len:expr, $flags:expr; $($n:literal)*) => {
        match $len {
            $($n => $sq.post_write_inline::<$n>(REMOTE, DATA[..$n].try_into().unwrap(), $flags),)*
            other => panic!("no typed instance for {other} inline bytes"),
        }
    };
}

macro_rules! typed_sges {
    ($sq:expr, $case:expr, $flags:expr; $($n:literal)*) => {
        match $case {
            $(Case::Write($n) => $sq.post_write::<$n>(REMOTE, &sges::<$n>(), $flags),)*
            $(Case::Read($n) => $sq.post_read::<$n>(REMOTE, &sges::<$n>(), $flags),)*
            $(Case::Send($n, imm) => $sq.post_send::<$n>(&sges::<$n>(), imm, $flags),)*
            other => panic!("no typed instance for {other:?}"),
        }
    };
}

/// A provider whose queues can be laid over plain memory, in its configurations.
trait MemQueue: Provider {
    /// Configurations (bnxt: WQE mode × PSN-table form) and their names.
    fn variants() -> Vec<&'static str>;
    /// The queue handle of configuration `v` over `m`.
    fn build(m: &mut Mem, v: usize) -> Self::Sq;
    /// Inline lengths that have typed instances (at most the format's maximum).
    const INLINE_LENS: &'static [usize];
    /// The typed inline write of `len` bytes.
    fn typed_inline(sq: &SendQueue<Self>, len: usize, f: SendFlags) -> Result<u64, SqError>;
}

const SMALL_LENS: &[usize] = &[
    0, 1, 3, 8, 12, 13, 16, 17, 28, 29, 32, 33, 44, 45, 64, 80, 96,
];
const BIG_LENS: &[usize] = &[
    0, 1, 3, 8, 12, 13, 16, 17, 28, 29, 32, 33, 44, 45, 64, 80, 96, 97, 128, 200, 252, 253, 256,
    257, 300, 500, 900,
];

macro_rules! big_inline {
    ($sq:expr, $len:expr, $f:expr) => {
        typed_inline!($sq, $len, $f; 0 1 3 8 12 13 16 17 28 29 32 33 44 45 64 80 96 97 128 200 252
            253 256 257 300 500 900)
    };
}

impl MemQueue for Mlx5 {
    fn variants() -> Vec<&'static str> {
        vec!["mlx5"]
    }
    fn build(m: &mut Mem, _: usize) -> Mlx5Sq {
        Mlx5Sq {
            wq: m.wq(256, 4),
            bf_size: 0,
        }
    }
    const INLINE_LENS: &'static [usize] = BIG_LENS;
    fn typed_inline(sq: &SendQueue<Self>, len: usize, f: SendFlags) -> Result<u64, SqError> {
        big_inline!(sq, len, f)
    }
}

impl MemQueue for Native {
    fn variants() -> Vec<&'static str> {
        vec!["native"]
    }
    fn build(m: &mut Mem, _: usize) -> WqHandle {
        m.wq(256, 6)
    }
    const INLINE_LENS: &'static [usize] = BIG_LENS;
    fn typed_inline(sq: &SendQueue<Self>, len: usize, f: SendFlags) -> Result<u64, SqError> {
        big_inline!(sq, len, f)
    }
}

const BNXT_MODES: [Mode; 9] = {
    let w = [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3];
    let p = [PsnForm::Legacy, PsnForm::Ext, PsnForm::Msn];
    let mut out = [Mode {
        wqe: WqeMode::Static,
        psn: PsnForm::Msn,
    }; 9];
    let mut i = 0;
    while i < 9 {
        out[i] = Mode {
            wqe: w[i / 3],
            psn: p[i % 3],
        };
        i += 1;
    }
    out
};

impl MemQueue for Bnxt {
    fn variants() -> Vec<&'static str> {
        BNXT_MODES
            .iter()
            .map(|m| &*format!("bnxt/{}/{}", m.wqe.name(), m.psn.name()).leak())
            .collect()
    }
    fn build(m: &mut Mem, v: usize) -> BnxtSq {
        let mode = BNXT_MODES[v];
        let wq = m.wq(96, 6);
        let table = m.side.as_mut_ptr() as u64;
        BnxtSq::new(wq, mode, table, mode.psn_entries(ENTRIES), 1024, 0x12_3456).unwrap()
    }
    const INLINE_LENS: &'static [usize] = SMALL_LENS;
    fn typed_inline(sq: &SendQueue<Self>, len: usize, f: SendFlags) -> Result<u64, SqError> {
        typed_inline!(sq, len, f; 0 1 3 8 12 13 16 17 28 29 32 33 44 45 64 80 96)
    }
}

fn typed<P: MemQueue>(sq: &SendQueue<P>, case: Case, f: SendFlags) -> Result<u64, SqError> {
    match case {
        Case::Inline(len) => P::typed_inline(sq, len, f),
        Case::Atomic(op, 4) => sq.post_atomic::<W32>(REMOTE, LOCAL, op, f),
        Case::Atomic(op, _) => sq.post_atomic::<W64>(REMOTE, LOCAL, op, f),
        other => typed_sges!(sq, other, f; 0 1 2 3 4 5 6 7),
    }
}

fn gather(case: Case) -> Vec<Sge> {
    let n = match case {
        Case::Write(n) | Case::Read(n) | Case::Send(n, _) => n,
        _ => 0,
    };
    (0..n)
        .map(|i| Sge {
            addr: 0x7f00_0000_2000 + 0x100 * i as u64,
            length: if i == 1 { 0 } else { 17 + 1000 * i as u32 },
            lkey: 0x5678 + i as u32,
        })
        .collect()
}

fn cases<P: MemQueue>() -> Vec<Case> {
    let mut v: Vec<Case> = P::INLINE_LENS.iter().map(|&l| Case::Inline(l)).collect();
    for n in 0..=7 {
        v.extend([Case::Write(n), Case::Read(n), Case::Send(n, None)]);
    }
    v.push(Case::Send(2, Some(0xdead_beef)));
    let ops = [
        AtomicOp::CompareSwap {
            compare: 0x1111_2222_3333_4444,
            swap: 0x5555_6666_7777_8888,
        },
        AtomicOp::FetchAdd { add: 0x0102_0304 },
        AtomicOp::MaskedCompareSwap {
            compare: 0x10,
            compare_mask: 0xf0,
            swap: 0x0f,
            swap_mask: 0xff,
        },
        AtomicOp::MaskedFetchAdd {
            add: 3,
            field_boundary: 0x8000_8000,
        },
    ];
    for op in ops {
        v.extend([Case::Atomic(op, 4), Case::Atomic(op, 8)]);
    }
    v
}

/// Compares both paths for every case, flag set and prefix; returns (identical posts,
/// requests both refused).
fn compare_provider<P: MemQueue>() -> (u32, u32) {
    let flag_sets = [
        SendFlags::empty(),
        SendFlags::SIGNALED,
        SendFlags::FENCE,
        SendFlags::SOLICITED | SendFlags::SIGNALED,
        SendFlags::INLINE,
    ];
    let (mut same, mut refused) = (0, 0);
    for (v, name) in P::variants().into_iter().enumerate() {
        for case in cases::<P>() {
            let sg = gather(case);
            let wr = case.request(&sg);
            for flags in flag_sets {
                // Prefixes put the case at different positions, so quarter-ring signalling
                // differs between them.
                for prefix in [0, 1, 15, 16] {
                    let (mut ma, mut mb) = (Mem::new(), Mem::new());
                    let (ha, hb) = (P::build(&mut ma, v), P::build(&mut mb, v));
                    let (ca, cb) = (ma.cq(), mb.cq());
                    // SAFETY: the memory outlives the queues; nothing else posts or polls.
                    let qa = unsafe { SendQueue::<P>::new(ha, ca, 1_000) }.unwrap();
                    // SAFETY: as above.
                    let qb = unsafe { SendQueue::<P>::new(hb, cb, 1_000) }.unwrap();
                    for _ in 0..prefix {
                        qa.post(&WorkRequest::Nop, SendFlags::empty()).unwrap();
                        qb.post(&WorkRequest::Nop, SendFlags::empty()).unwrap();
                    }
                    let a = qa.post(&wr, flags);
                    let b = typed(&qb, case, flags);
                    let ctx = format!("{name} {case:?} {flags:?} after {prefix} NOPs");
                    match (a, b) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(a, b, "{ctx}: positions differ");
                            same += 1;
                        }
                        (Err(_), Err(SqError::Post(_))) => refused += 1,
                        (a, b) => panic!("{ctx}: generic {a:?}, typed {b:?}"),
                    }
                    assert!(ma.bytes() == mb.bytes(), "{ctx}: queue memory differs");
                    assert_eq!(qa.counters().rung(), qb.counters().rung(), "{ctx}");
                }
            }
        }
    }
    (same, refused)
}

/// Counts are exact: every (case, flags, prefix) of every configuration is compared.
/// mlx5 refuses 15 of its 60 cases (inline above 256, 5-7 SGEs, 4-byte standard atomics);
/// native 9 of 60 (its 256-byte inline limit and 6 SGEs); bnxt per mode 2-5 masked atomics
/// and widths, plus the fixed form's 16 inline bytes and one SGE.
#[test]
fn typed_path_writes_the_same_bytes_as_post() {
    let results = [
        ("mlx5", compare_provider::<Mlx5>(), (900, 300)),
        ("native", compare_provider::<Native>(), (1_020, 180)),
        ("bnxt", compare_provider::<Bnxt>(), (5_820, 3_180)),
    ];
    let mut total = 0;
    for (name, got, want) in results {
        eprintln!(
            "{name}: {} posts byte-identical, {} refused by both paths",
            got.0, got.1
        );
        assert_eq!(got, want, "{name}: (identical, refused) cases compared");
        total += got.0 + got.1;
    }
    assert_eq!(total, 11_400, "cases compared");
}

/// Misuse: a clear error, nothing reserved, the queue still usable.
#[test]
fn typed_misuse_is_an_error() {
    let mut m = Mem::new();
    let h = Mlx5Sq {
        wq: m.wq(256, 4),
        bf_size: 0,
    };
    // SAFETY: as in the comparison.
    let sq = unsafe { SendQueue::<Mlx5>::new(h, m.cq(), 1_000) }.unwrap();
    let big = [7u8; 300];
    assert_eq!(
        sq.post_write_inline::<300>(REMOTE, &big, SendFlags::empty()),
        Err(SqError::Post(PostError::InlineTooLong {
            len: 300,
            max: 256
        }))
    );
    assert_eq!(
        sq.post_write::<5>(REMOTE, &sges::<5>(), SendFlags::empty()),
        Err(SqError::Post(PostError::TooManySges { n: 5, max: 4 }))
    );
    assert_eq!(
        sq.post_read::<6>(REMOTE, &sges::<6>(), SendFlags::empty()),
        Err(SqError::Post(PostError::TooManySges { n: 6, max: 4 }))
    );
    assert_eq!(
        sq.post_atomic::<W32>(
            REMOTE,
            LOCAL,
            AtomicOp::FetchAdd { add: 1 },
            SendFlags::empty()
        ),
        Err(SqError::Post(PostError::BadAtomicWidth(4)))
    );
    assert_eq!(sq.counters().reserved(), 0, "misuse reserved slots");

    // A WQE larger than a small queue's window: 4 WQEBBs allow WQEs of 2 (8 DS: control,
    // remote address, and 6 DS of inline segment — 92 bytes).
    let mut small = Mem::new();
    let h = Mlx5Sq {
        wq: WqHandle {
            entries: 4,
            ..small.wq(256, 4)
        },
        bf_size: 0,
    };
    // SAFETY: as above.
    let sq = unsafe { SendQueue::<Mlx5>::new(h, small.cq(), 1_000) }.unwrap();
    let d = [1u8; 100];
    let wr = WorkRequest::Write {
        remote: REMOTE,
        payload: gda_hal::Payload::Inline(&d),
        imm: None,
    };
    assert_eq!(
        sq.post(&wr, SendFlags::empty()),
        Err(SqError::Post(PostError::WqeTooLarge { units: 3, max: 2 }))
    );
    assert_eq!(
        sq.post_write_inline::<100>(REMOTE, &d, SendFlags::empty()),
        Err(SqError::Post(PostError::InlineTooLong {
            len: 100,
            max: 92
        }))
    );
    assert!(
        sq.post_write_inline::<92>(REMOTE, &[1; 92], SendFlags::empty())
            .is_ok()
    );

    // bnxt has no masked atomics, and fixed three-slot WQEs carry 16 inline bytes, one SGE.
    let mut b = Mem::new();
    let mode = Mode {
        wqe: WqeMode::Fixed3,
        psn: PsnForm::Msn,
    };
    let table = b.side.as_mut_ptr() as u64;
    let h = BnxtSq::new(b.wq(96, 6), mode, table, mode.psn_entries(ENTRIES), 1024, 0).unwrap();
    // SAFETY: as above.
    let sq = unsafe { SendQueue::<Bnxt>::new(h, b.cq(), 1_000) }.unwrap();
    let masked = AtomicOp::MaskedFetchAdd {
        add: 1,
        field_boundary: 0,
    };
    assert_eq!(
        sq.post_atomic::<W64>(REMOTE, LOCAL, masked, SendFlags::empty()),
        Err(SqError::Post(PostError::Unsupported))
    );
    assert_eq!(
        sq.post_write_inline::<17>(REMOTE, &[0; 17], SendFlags::empty()),
        Err(SqError::Post(PostError::InlineTooLong { len: 17, max: 16 }))
    );
    assert_eq!(
        sq.post_write::<2>(REMOTE, &sges::<2>(), SendFlags::empty()),
        Err(SqError::Post(PostError::TooManySges { n: 2, max: 1 }))
    );
    assert_eq!(sq.counters().reserved(), 0, "misuse reserved slots");
}

/// A request checked once posts many times; one checked on another queue is refused.
#[test]
fn checked_requests_post_repeatedly_and_only_on_their_queue() {
    let (mut ma, mut mb, mut mc) = (Mem::new(), Mem::new(), Mem::new());
    let (ha, hb, hc) = (ma.wq(256, 6), mb.wq(256, 6), mc.wq(256, 6));
    let (ca, cb, cc) = (ma.cq(), mb.cq(), mc.cq());
    // SAFETY: as in the comparison.
    let (qa, qb, qc) = unsafe {
        (
            SendQueue::<Native>::new(ha, ca, 1_000).unwrap(),
            SendQueue::<Native>::new(hb, cb, 1_000).unwrap(),
            SendQueue::<Native>::new(hc, cc, 1_000).unwrap(),
        )
    };
    let wr = WorkRequest::Write {
        remote: REMOTE,
        payload: gda_hal::Payload::Inline(&DATA[..100]),
        imm: None,
    };
    let req = qa.check(&wr).unwrap();
    assert_eq!(req.cost().units, 3);
    for i in 0..10 {
        assert_eq!(qa.post_checked(&req, SendFlags::empty()), Ok(3 * i));
        assert_eq!(qc.post(&wr, SendFlags::empty()), Ok(3 * i));
    }
    assert!(ma.bytes() == mc.bytes(), "checked and generic posts differ");
    assert_eq!(
        qb.post_checked(&req, SendFlags::empty()),
        Err(SqError::Post(PostError::OtherQueue))
    );
    // Checked against the same provider's limits through the handle, not the queue: accepted
    // by its own queue, which still applies its window.
    let raw = Checked::<Native>::new(qb.handle(), &wr).unwrap();
    assert_eq!(qb.post_checked(&raw, SendFlags::empty()), Ok(0));
    assert_eq!(
        qa.post_checked(&raw, SendFlags::empty()),
        Err(SqError::Post(PostError::OtherQueue))
    );
}

/// `init` with as many gather entries as `model` accepts (bnxt's fixed form carries one).
fn fit(model: &dyn DeviceModel, mut init: QpInit) -> QpInit {
    while init.max_sge > 1 && model.layout(&init.geometry()).is_err() {
        init.max_sge -= 1;
    }
    init
}

/// Typed posts on the software NIC: inline and gathered writes, a read and a fetch-add land,
/// and 300 more typed writes wrap a 64-unit ring, recycling slots through real CQEs.
fn end_to_end<P: Modeled>(model: gda_sim::Model) -> u32 {
    let init = fit(
        &*model,
        QpInit {
            sq_units: ENTRIES,
            ..QpInit::default()
        },
    );
    let fabric = Fabric::new(FabricConfig::default());
    let (na, nb) = (
        fabric.add_shared_model_nic(model.clone()),
        fabric.add_shared_model_nic(model),
    );
    let (pa, pb) = (na.alloc_pd(), nb.alloc_pd());
    let cq_a = na.create_cq(256, CqMode::Normal).unwrap();
    let cq_b = nb.create_cq(256, CqMode::Normal).unwrap();
    let a = pa.create_qp(init, &cq_a, &cq_a).unwrap();
    let b = pb.create_qp(init, &cq_b, &cq_b).unwrap();
    a.bring_up(&b.endpoint()).unwrap();
    b.bring_up(&a.endpoint()).unwrap();
    let src = pa.alloc_mr(4096, Access::ALL);
    let dst = pb.alloc_mr(8192, Access::ALL);
    let remote = |off: u64| Remote {
        addr: dst.addr() + off,
        rkey: dst.rkey(),
    };
    let local = |off: u64, len: u32| Sge {
        addr: src.addr() + off,
        length: len,
        lkey: src.lkey(),
    };
    src.write(0, &DATA[..4096.min(DATA.len())]).unwrap();
    dst.write(4096, &10u64.to_ne_bytes()).unwrap();
    // SAFETY: the QP and CQ outlive the queue, which is the only poster and poller.
    let sq =
        unsafe { SendQueue::<P>::new(a.sq_handle::<P>().unwrap(), cq_a.handle(), 20_000) }.unwrap();
    let mut checked = 0;

    sq.post_write_inline::<8>(remote(0), b"typed-8!", SendFlags::empty())
        .unwrap();
    let two = [local(100, 16), local(200, 16)];
    let gathered = if init.max_sge >= 2 {
        sq.post_write::<2>(remote(64), &two, SendFlags::empty())
            .unwrap();
        true
    } else {
        sq.post_write::<1>(remote(64), &[two[0]], SendFlags::empty())
            .unwrap();
        false
    };
    sq.post_atomic::<W64>(
        remote(4096),
        local(1024, 8),
        AtomicOp::FetchAdd { add: 5 },
        SendFlags::empty(),
    )
    .unwrap();
    sq.quiet().unwrap();
    sq.post_read::<1>(remote(64), &[local(2048, 16)], SendFlags::empty())
        .unwrap();
    sq.quiet().unwrap();

    let mut got = [0u8; 8];
    dst.read(0, &mut got).unwrap();
    assert_eq!(&got, b"typed-8!");
    checked += 1;
    let mut got = [0u8; 32];
    dst.read(64, &mut got).unwrap();
    assert_eq!(&got[..16], &DATA[100..116]);
    if gathered {
        assert_eq!(&got[16..], &DATA[200..216]);
    }
    checked += 1;
    let mut old = [0u8; 8];
    src.read(1024, &mut old).unwrap();
    let old = if P::ATOMIC_RESULT_BIG_ENDIAN {
        u64::from_be_bytes(old)
    } else {
        u64::from_ne_bytes(old)
    };
    assert_eq!(old, 10, "fetch-add returned the old value");
    let mut now = [0u8; 8];
    dst.read(4096, &mut now).unwrap();
    assert_eq!(u64::from_ne_bytes(now), 15);
    checked += 1;
    let mut back = [0u8; 16];
    src.read(2048, &mut back).unwrap();
    assert_eq!(
        &back,
        &DATA[100..116],
        "read brought the written bytes back"
    );
    checked += 1;

    // Wrap the ring many times; each write lands at its own offset.
    for i in 0..300u64 {
        sq.post_write_inline::<16>(remote(i * 16), &[i as u8; 16], SendFlags::empty())
            .unwrap();
    }
    sq.quiet().unwrap();
    assert!(sq.counters().reserved() > 4 * u64::from(ENTRIES));
    let mut all = vec![0u8; 300 * 16];
    dst.read(0, &mut all).unwrap();
    for (i, chunk) in all.chunks(16).enumerate() {
        assert_eq!(chunk, &[i as u8; 16], "write {i}");
        checked += 1;
    }
    checked
}

#[test]
fn typed_posts_land_on_the_software_nic() {
    let mut total = 0;
    total += end_to_end::<Native>(std::sync::Arc::new(Native::model()));
    total += end_to_end::<Mlx5>(std::sync::Arc::new(Mlx5::model()));
    for mode in BNXT_MODES {
        total += end_to_end::<Bnxt>(std::sync::Arc::new(gda_bnxt::model::BnxtModel::from(mode)));
    }
    assert_eq!(total, 11 * 304, "checks made");
}
