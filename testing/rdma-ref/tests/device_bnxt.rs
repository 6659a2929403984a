//! The device API's bnxt header (`device/include/gda/bnxt.hpp`) against gda_bnxt's Rust device
//! functions and rdma-core v55's own `bnxt_re_post_send`:
//!
//! - the handle (`gda::bnxt::Sq` = `gda_bnxt::BnxtSq`) reads back field by field, same size;
//! - single posts of every request kind (WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM, inline
//!   and gather, READ, compare-swap, fetch-add, NOP, the register-value WRITE) at random ring
//!   positions (across the ring's wrap and the epoch flip), message numbers and PSNs, in every
//!   WQE mode x PSN-table form, on rings and tables pre-filled with junk: ring, PSN table,
//!   doorbell word and `Posted` equal the Rust functions' (counted per kind and per mode/form);
//! - chains of random requests posted by the header, by the Rust functions and by rdma-core
//!   (the three-way comparison of tests/bnxt_diff.rs, with the header added): the header writes
//!   exactly the bytes rdma-core writes, and the same doorbell, PSN and MSN;
//! - CQE polling and decoding (random CQE bytes of every type, every status of both tables,
//!   phase bits of both passes, 32- and 64-byte strides), the completed-unit arithmetic, receive
//!   WQEs, and the RQ and CQ doorbells.

use std::cell::RefCell;
use std::collections::BTreeMap;

use gda_bnxt::wire::Cqe32;
use gda_bnxt::{Bnxt, BnxtSq, Mode, PsnForm, WqeMode};
use gda_hal::{
    AtomicOp, CqHandle, Payload, PostError, ProdIdx, Provider, QueueHandle, Remote, SendFlags, Sge,
    SqPos, WorkRequest, WqHandle,
};
use gda_rdma_ref::bnxt::{self as bref, BrefQpCfg, BrefSge, BrefWr};
use gda_rdma_ref::device::bnxt as dev;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const MODES: [WqeMode; 3] = [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3];
const FORMS: [PsnForm; 3] = [PsnForm::Legacy, PsnForm::Ext, PsnForm::Msn];

/// Queue memory: 16-byte aligned (a real ring is page-aligned; the header stores whole slots).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Slot([u8; 16]);

struct Mem(Vec<Slot>);

impl Mem {
    fn new(bytes: usize, fill: u8) -> Self {
        Self(vec![Slot([fill; 16]); bytes.div_ceil(16)])
    }
    fn addr(&mut self) -> u64 {
        self.0.as_mut_ptr() as u64
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: `Slot` is 16 plain bytes with no padding; the slice covers the vector.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), self.0.len() * 16) }
    }
}

/// A queue over `mem`: ring of `entries` units, PSN table after it (`psn_entries`), doorbell
/// word `db`.
#[allow(clippy::too_many_arguments)]
fn queue(
    mem: &mut Mem,
    db: &mut [u64; 1],
    mode: Mode,
    entries: u32,
    psn_entries: u32,
    qpn: u32,
    mtu: u32,
    start_psn: u32,
) -> Result<BnxtSq, PostError> {
    let base = mem.addr();
    BnxtSq::new(
        WqHandle {
            buf: base,
            dbrec: 0,
            db: db.as_mut_ptr() as u64,
            entries,
            stride: 16,
            qpn,
            max_inline: 96,
            max_sge: 6,
        },
        mode,
        base + u64::from(mode.ring_slots(entries)) * 16,
        psn_entries,
        mtu,
        start_psn,
    )
}

fn table_bytes(mode: Mode, psn_entries: u32) -> usize {
    psn_entries as usize * mode.psn.entry_bytes() as usize
}

#[test]
fn layouts_match_rust() {
    let mut n = 0;
    for wqe in MODES {
        for psn in FORMS {
            let mode = Mode { wqe, psn };
            let mut mem = Mem::new(8 * 16 * 64 + 16 * 1024, 0);
            let mut db = [0u64];
            let sq = queue(&mut mem, &mut db, mode, 64, 1024, 0x0abcde, 2048, 0x12_3456).unwrap();
            let w = sq.wq();
            let rust: [u64; 16] = [
                w.buf,
                w.dbrec,
                w.db,
                u64::from(w.entries),
                u64::from(w.stride),
                u64::from(w.qpn),
                u64::from(w.max_inline),
                u64::from(w.max_sge),
                sq.psn_table(),
                u64::from(sq.psn_entries()),
                u64::from(sq.path_mtu()),
                u64::from(sq.start_psn()),
                u64::from(sq.mode().wqe as u8),
                u64::from(sq.mode().psn as u8),
                size_of::<BnxtSq>() as u64,
                // gda_bnxt const-asserts `offset_of!(BnxtSq, mode) == 68`.
                68,
            ];
            assert_eq!(
                dev::sq_fields(&sq),
                rust,
                "{mode:?}: C++ reads vs Rust fields"
            );
            n += 1;
        }
    }
    assert_eq!(n, 9);
}

/// One request: 0 WRITE, 1 WRITE_IMM, 2 SEND, 3 SEND_IMM, 4 READ, 5 CS, 6 FA, 7 NOP,
/// 8 register-value WRITE (4 or 8 bytes).
#[derive(Clone, Debug)]
struct Req {
    kind: u8,
    inline: bool,
    data: Vec<u8>,
    sges: Vec<Sge>,
    remote: Remote,
    imm: u32,
    a: u64,
    b: u64,
    value_bytes: u32,
}

const KIND_NAMES: [&str; 9] = [
    "WRITE",
    "WRITE_IMM",
    "SEND",
    "SEND_IMM",
    "READ",
    "CS",
    "FA",
    "NOP",
    "VALUE",
];

fn arb_req() -> impl Strategy<Value = Req> {
    let sge = (
        any::<u64>(),
        prop_oneof![Just(0u32), 1u32..5000, any::<u32>()],
        any::<u32>(),
    )
        .prop_map(|(addr, length, lkey)| Sge { addr, length, lkey });
    (
        0u8..9,
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..=96),
        proptest::collection::vec(sge, 0..=6),
        (any::<u64>(), any::<u32>(), any::<u32>()),
        (any::<u64>(), any::<u64>(), prop_oneof![Just(4u32), Just(8)]),
    )
        .prop_map(
            |(kind, inline, data, sges, (addr, rkey, imm), (a, b, value_bytes))| Req {
                kind,
                inline: inline && kind < 4,
                data,
                sges,
                remote: Remote { addr, rkey },
                imm,
                a,
                b,
                value_bytes,
            },
        )
}

impl Req {
    /// Narrowed to what the fixed three-slot form carries.
    fn fit(mut self, mode: WqeMode) -> Self {
        if mode == WqeMode::Fixed3 {
            self.sges.truncate(1);
            self.data.truncate(16);
        }
        if self.kind == 8 {
            self.data.truncate(self.value_bytes as usize);
            self.data.resize(self.value_bytes as usize, 0);
        }
        self
    }

    fn value(&self) -> u64 {
        let mut v = [0u8; 8];
        v[..self.data.len().min(8)].copy_from_slice(&self.data[..self.data.len().min(8)]);
        u64::from_le_bytes(v)
    }

    fn wr(&self) -> WorkRequest<'_> {
        let payload = if self.inline {
            Payload::Inline(&self.data)
        } else {
            Payload::Sges(&self.sges)
        };
        let local = self.sges.first().copied().unwrap_or(Sge {
            addr: 0x1000,
            length: 8,
            lkey: 7,
        });
        match self.kind {
            0 | 1 => WorkRequest::Write {
                remote: self.remote,
                payload,
                imm: (self.kind == 1).then_some(self.imm),
            },
            2 | 3 => WorkRequest::Send {
                payload,
                imm: (self.kind == 3).then_some(self.imm),
            },
            4 => WorkRequest::Read {
                remote: self.remote,
                sges: &self.sges,
            },
            5 => WorkRequest::Atomic {
                remote: self.remote,
                local,
                op: AtomicOp::CompareSwap {
                    compare: self.a,
                    swap: self.b,
                },
                bytes: 8,
            },
            6 => WorkRequest::Atomic {
                remote: self.remote,
                local,
                op: AtomicOp::FetchAdd { add: self.a },
                bytes: 8,
            },
            7 => WorkRequest::Nop,
            // The register value: what Rust posts as an inline WRITE of its bytes.
            _ => WorkRequest::Write {
                remote: self.remote,
                payload: Payload::Inline(&self.data),
                imm: None,
            },
        }
    }
}

fn pos() -> impl Strategy<Value = u32> {
    prop_oneof![any::<u32>(), 0u32..64, (u32::MAX - 64)..=u32::MAX]
}

/// 6,000 single posts, each by the header and by the Rust functions on copies of one junk-filled
/// ring and table: every byte, the doorbell word and `Posted` agree. Floors per kind and per
/// mode x PSN form.
#[test]
fn posts_match_the_rust_device_functions() {
    let mut runner = TestRunner::new(Config {
        cases: 6000,
        failure_persistence: None,
        ..Config::default()
    });
    let by_kind = RefCell::new(BTreeMap::<(&str, bool), u32>::new());
    let by_mode = RefCell::new(BTreeMap::<(&str, &str), u32>::new());
    let refused = RefCell::new(0u32);
    let strategy = (
        arb_req(),
        (0usize..3, 0usize..3, 1u32..9, any::<bool>()),
        (pos(), any::<u32>(), 0u32..1 << 24, 0u32..1 << 24),
        (any::<u32>(), 8u32..13, any::<u8>(), 0u32..8),
    );
    runner
        .run(
            &strategy,
            |(
                req,
                (m, f, log2, big_table),
                (unit, msg, psn, start_psn),
                (qpn, mtu_log, junk, flags),
            )| {
                let mode = Mode {
                    wqe: MODES[m],
                    psn: FORMS[f],
                };
                let req = req.fit(mode.wqe);
                let entries = 1u32 << log2;
                let psn_entries = mode.psn_entries(entries) << u32::from(big_table);
                let len = mode.ring_slots(entries) as usize * 16 + table_bytes(mode, psn_entries);
                let wr = req.wr();
                let at = SqPos {
                    unit: ProdIdx(unit),
                    msg,
                    psn,
                };
                let mut out = Vec::new();
                for header in [false, true] {
                    let mut mem = Mem::new(len, junk);
                    let mut db = [0x5a5a_5a5a_5a5a_5a5au64];
                    let sq = queue(
                        &mut mem,
                        &mut db,
                        mode,
                        entries,
                        psn_entries,
                        qpn & 0xf_ffff,
                        1 << mtu_log,
                        start_psn,
                    )
                    .map_err(|e| TestCaseError::fail(format!("{e}")))?;
                    if Bnxt::check(&sq, &wr).is_err() {
                        *refused.borrow_mut() += 1;
                        return Ok(());
                    }
                    let fl = SendFlags::from_bits_truncate(flags);
                    // SAFETY: ring, table and doorbell word are owned here; `check` accepted it.
                    let posted = unsafe {
                        if !header {
                            let p = Bnxt::post(&sq, at, &wr, fl);
                            Bnxt::ring_sq(&sq, &p);
                            p
                        } else if req.kind == 8 {
                            dev::write_value_ring(
                                &sq,
                                at,
                                req.remote,
                                req.value(),
                                req.value_bytes,
                                fl.bits(),
                            )
                        } else {
                            dev::post_ring(&sq, at, &wr, fl.bits())
                                .expect("bnxt posts every kind here")
                        }
                    };
                    out.push((mem.bytes().to_vec(), db, posted));
                }
                let diff = out[0].0.iter().zip(&out[1].0).position(|(a, b)| a != b);
                prop_assert!(
                    diff.is_none(),
                    "{:?}: byte {:?} (ring slot / table) differs: Rust {:?} header {:?} for {:?}",
                    mode,
                    diff,
                    diff.map(|d| out[0].0[d]),
                    diff.map(|d| out[1].0[d]),
                    req
                );
                prop_assert_eq!(out[0].1, out[1].1, "doorbell word, {:?} {:?}", mode, req);
                prop_assert_eq!(out[0].2, out[1].2, "Posted, {:?} {:?}", mode, req);
                *by_kind
                    .borrow_mut()
                    .entry((KIND_NAMES[req.kind as usize], req.inline))
                    .or_default() += 1;
                *by_mode
                    .borrow_mut()
                    .entry((mode.wqe.name(), mode.psn.name()))
                    .or_default() += 1;
                Ok(())
            },
        )
        .unwrap();
    let (by_kind, by_mode) = (by_kind.into_inner(), by_mode.into_inner());
    eprintln!(
        "compared by (kind, inline): {by_kind:?}\ncompared by (mode, PSN form): {by_mode:?}\nrefused by check: {}",
        refused.into_inner()
    );
    for (k, name) in KIND_NAMES.iter().enumerate() {
        for inline in [false, true] {
            if inline && k >= 4 {
                continue;
            }
            let c = by_kind.get(&(*name, inline)).copied().unwrap_or(0);
            assert!(c >= 150, "{name} inline={inline}: {c} compared");
        }
    }
    for wqe in MODES {
        for psn in FORMS {
            let c = by_mode.get(&(wqe.name(), psn.name())).copied().unwrap_or(0);
            assert!(c >= 400, "{}/{}: {c} compared", wqe.name(), psn.name());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Chains against rdma-core's bnxt_re_post_send (the harness of tests/bnxt_diff.rs).

/// One request, provider-neutral (as tests/bnxt_diff.rs): 0 WRITE, 1 WRITE_IMM, 2 SEND,
/// 3 SEND_IMM, 4 READ, 5 CS, 6 FA.
#[derive(Clone, Debug)]
struct TWr {
    op: u8,
    lens: Vec<u32>,
    inline: bool,
    flags: u32,
    imm: u32,
    raddr: u64,
    rkey: u32,
    compare: u64,
    swap: u64,
    lkey: u32,
}

impl TWr {
    fn inline_data(&self) -> Vec<Vec<u8>> {
        self.lens
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                (0..l)
                    .map(|b| (b as u8).wrapping_mul(7) ^ i as u8)
                    .collect()
            })
            .collect()
    }

    fn sges(&self) -> Vec<Sge> {
        self.lens
            .iter()
            .enumerate()
            .map(|(i, &l)| Sge {
                addr: 0x7f00_0000_0000 + (i as u64) * 0x10_0000,
                length: l,
                lkey: self.lkey.wrapping_add(i as u32),
            })
            .collect()
    }

    /// rdma-core's `ibv_send_wr` (send flags: fence 1, signalled 2, solicited 4, inline 8).
    fn to_ref(&self, data: &[Vec<u8>]) -> BrefWr {
        let inline = self.inline;
        let mut w = BrefWr {
            opcode: u32::from(self.op),
            send_flags: self.flags | if inline { 8 } else { 0 },
            imm_data: self.imm.to_be(),
            rkey: self.rkey,
            remote_addr: self.raddr,
            compare_add: if self.op == 6 {
                self.swap
            } else {
                self.compare
            },
            swap: self.swap,
            num_sge: self.lens.len() as u32,
            ..Default::default()
        };
        for (i, s) in self.sges().iter().enumerate() {
            w.sg_list[i] = BrefSge {
                addr: if inline {
                    data[i].as_ptr() as u64
                } else {
                    s.addr
                },
                length: s.length,
                lkey: s.lkey,
            };
        }
        w
    }

    fn to_gda<'a>(&self, sges: &'a [Sge], inline: &'a [u8]) -> WorkRequest<'a> {
        let remote = Remote {
            addr: self.raddr,
            rkey: self.rkey,
        };
        let payload = if self.inline {
            Payload::Inline(inline)
        } else {
            Payload::Sges(sges)
        };
        let imm = matches!(self.op, 1 | 3).then_some(self.imm);
        match self.op {
            0 | 1 => WorkRequest::Write {
                remote,
                payload,
                imm,
            },
            2 | 3 => WorkRequest::Send { payload, imm },
            4 => WorkRequest::Read { remote, sges },
            5 => WorkRequest::Atomic {
                remote,
                local: sges[0],
                op: AtomicOp::CompareSwap {
                    compare: self.compare,
                    swap: self.swap,
                },
                bytes: 8,
            },
            _ => WorkRequest::Atomic {
                remote,
                local: sges[0],
                op: AtomicOp::FetchAdd { add: self.swap },
                bytes: 8,
            },
        }
    }
}

fn twr(fixed3: bool) -> impl Strategy<Value = TWr> {
    (
        0u8..7,
        proptest::collection::vec(prop_oneof![0u32..64, 0u32..5000, 1u32..1 << 20], 0..=6),
        any::<bool>(),
        0u32..8,
        (
            any::<u32>(),
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
        ),
        any::<u32>(),
    )
        .prop_map(
            move |(op, mut lens, inline, flags, (imm, raddr, rkey, compare, swap), lkey)| {
                let atomic = op >= 5;
                let inline = inline && !atomic && op != 4;
                if atomic {
                    lens = vec![8];
                }
                if inline {
                    // Inline payloads within 96 bytes (16 in the fixed form), in pieces
                    // rdma-core gathers.
                    let cap = if fixed3 { 16 } else { 96 };
                    let mut total = 0;
                    for l in &mut lens {
                        *l = (*l % 40).min(cap - total);
                        total += *l;
                    }
                }
                if fixed3 {
                    // One SGE, or 1–16 inline bytes: rdma-core's variable mode then writes the
                    // three slots the fixed form always has.
                    lens.truncate(1);
                    if lens.is_empty() {
                        lens.push(if inline { 3 } else { 100 });
                    }
                    if inline {
                        lens[0] = lens[0].clamp(1, 16);
                    }
                }
                TWr {
                    op,
                    lens,
                    inline,
                    flags,
                    imm,
                    raddr,
                    rkey,
                    compare,
                    swap,
                    lkey,
                }
            },
        )
}

/// Runs one chain through rdma-core (over 0x00 and 0xff memory: bytes equal in both are the
/// ones it wrote), the Rust functions and the header (over 0x5a memory); the header must equal
/// Rust everywhere and rdma-core wherever rdma-core wrote, and leave the rest alone or zero.
#[allow(clippy::too_many_arguments)]
fn chain(
    mode: Mode,
    units: u32,
    start: u32,
    epoch: bool,
    psn0: u32,
    msn0: u32,
    mtu_enum: u32,
    qp_id: u32,
    wrs: &[TWr],
    counts: &mut BTreeMap<u8, u32>,
) -> Result<bool, TestCaseError> {
    let wqe = mode.wqe;
    let slots = mode.ring_slots(units);
    // The table rdma-core's harness requires: one entry per doorbell index, rounded up to a
    // power of two for the MSN form.
    let base = if wqe == WqeMode::Static { units } else { slots };
    let table_entries = if mode.psn == PsnForm::Msn {
        base.next_power_of_two()
    } else {
        base
    };
    let len = slots as usize * 16 + table_entries as usize * mode.psn.entry_bytes() as usize;
    let msn0 = msn0 % mode.psn_entries(units).max(1);
    let first = start % units;
    let (max_sge, max_inline) = if wqe == WqeMode::Fixed3 {
        (1, 16)
    } else {
        (6, 96)
    };
    let cfg = BrefQpCfg {
        qp_id,
        wqe_mode: u32::from(wqe != WqeMode::Static),
        sq_slots: slots,
        sq_tail: first * wqe.slots_per_unit(),
        sq_epoch: u32::from(epoch),
        sq_psn: psn0,
        mtu_enum,
        msn_table: u32::from(mode.psn == PsnForm::Msn),
        psn_ext: u32::from(mode.psn == PsnForm::Ext),
        msn: msn0,
        max_inline,
        max_sge,
        sq_head: first * wqe.slots_per_unit(),
        ..Default::default()
    };
    let datas: Vec<Vec<Vec<u8>>> = wrs.iter().map(TWr::inline_data).collect();
    let refs: Vec<BrefWr> = wrs.iter().zip(&datas).map(|(w, d)| w.to_ref(d)).collect();
    let mut r0 = vec![0u8; len];
    let mut r1 = vec![0xffu8; len];
    let o0 = bref::post_send_n(&cfg, &refs, &mut r0);
    let o1 = bref::post_send_n(&cfg, &refs, &mut r1);
    prop_assert_eq!(o0.ret, o1.ret);
    if o0.ret != 0 {
        // rdma-core refused a request of the chain (bnxt_diff.rs checks gda refuses the same).
        return Ok(false);
    }
    let mut results = Vec::new();
    for header in [false, true] {
        let mut mem = Mem::new(len, 0x5a);
        let mut db = [0u64];
        let base_addr = mem.addr();
        let sq = BnxtSq::new(
            WqHandle {
                buf: base_addr,
                db: db.as_mut_ptr() as u64,
                entries: units,
                qpn: qp_id,
                max_inline,
                max_sge,
                ..WqHandle::default()
            },
            mode,
            base_addr + u64::from(slots) * 16,
            mode.psn_entries(units),
            128 << mtu_enum,
            0,
        )
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut at = SqPos {
            unit: ProdIdx(first + if epoch { units } else { 0 }),
            msg: msn0,
            psn: psn0 & 0xff_ffff,
        };
        for (w, d) in wrs.iter().zip(&datas) {
            let sges = w.sges();
            let inline: Vec<u8> = d.concat();
            let wr = w.to_gda(&sges, &inline);
            if Bnxt::check(&sq, &wr).is_err() {
                return Err(TestCaseError::fail(format!(
                    "gda refused what rdma-core posted: {w:?}"
                )));
            }
            // SAFETY: ring, table and doorbell word are owned here; `check` accepted it.
            let p = unsafe {
                if header {
                    dev::post_ring(&sq, at, &wr, w.flags).expect("no masked atomics here")
                } else {
                    let p = Bnxt::post(&sq, at, &wr, SendFlags::from_bits_truncate(w.flags));
                    Bnxt::ring_sq(&sq, &p);
                    p
                }
            };
            at = p.next;
        }
        results.push((mem.bytes()[..len].to_vec(), db[0], at));
    }
    let (rust, hdr) = (&results[0], &results[1]);
    prop_assert!(rust == hdr, "header vs Rust differ ({:?})", mode);
    for k in 0..len {
        if r0[k] == r1[k] {
            prop_assert_eq!(
                hdr.0[k],
                r0[k],
                "byte {} ({}): rdma-core wrote {:#04x}, the header {:#04x}",
                k,
                if k < slots as usize * 16 {
                    "ring"
                } else {
                    "PSN table"
                },
                r0[k],
                hdr.0[k]
            );
        } else {
            prop_assert!(
                hdr.0[k] == 0x5a || hdr.0[k] == 0,
                "byte {} rdma-core leaves alone, the header wrote {:#04x}",
                k,
                hdr.0[k]
            );
        }
    }
    prop_assert_eq!(hdr.1, o0.doorbell, "doorbell word");
    prop_assert_eq!(hdr.2.psn, o0.sq_psn_after & 0xff_ffff, "next PSN");
    if mode.psn == PsnForm::Msn {
        prop_assert_eq!(
            hdr.2.msg % mode.psn_entries(units),
            o0.msn_after,
            "MSN index"
        );
    }
    for w in wrs {
        *counts.entry(w.op).or_default() += 1;
    }
    Ok(true)
}

/// 1,800 chains of 1–8 requests in each WQE mode (600 per PSN form): the header writes what
/// rdma-core's `bnxt_re_post_send` writes. Counts chains per mode/form and requests per opcode.
#[test]
fn chains_match_rdma_core() {
    let mut by_mode = BTreeMap::<(&str, &str), u32>::new();
    let mut by_op = BTreeMap::<u8, u32>::new();
    for (wqe, units) in [
        (WqeMode::Static, 512u32),
        (WqeMode::Variable, 4096),
        (WqeMode::Fixed3, 1024),
    ] {
        for psn in FORMS {
            let mode = Mode { wqe, psn };
            let mut runner = TestRunner::new(Config {
                cases: 600,
                failure_persistence: None,
                ..Config::default()
            });
            let compared = RefCell::new(0u32);
            let ops = RefCell::new(BTreeMap::new());
            let strategy = (
                proptest::collection::vec(twr(wqe == WqeMode::Fixed3), 1..8),
                (
                    prop_oneof![any::<u32>(), (units - 16)..units],
                    any::<bool>(),
                    0u32..1 << 24,
                    any::<u32>(),
                ),
                (1u32..6, 1u32..1 << 20),
            );
            runner
                .run(&strategy, |(wrs, (start, epoch, psn0, msn0), (mtu, qp))| {
                    if chain(
                        mode,
                        units,
                        start,
                        epoch,
                        psn0,
                        msn0,
                        mtu,
                        qp,
                        &wrs,
                        &mut ops.borrow_mut(),
                    )? {
                        *compared.borrow_mut() += 1;
                    }
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            let c = compared.into_inner();
            assert!(
                c >= 500,
                "{mode:?}: only {c} of 600 chains posted by rdma-core"
            );
            by_mode.insert((wqe.name(), psn.name()), c);
            for (op, n) in ops.into_inner() {
                *by_op.entry(op).or_default() += n;
            }
        }
    }
    eprintln!("chains compared with rdma-core by (mode, PSN form): {by_mode:?}");
    eprintln!(
        "requests by opcode (0 WRITE, 1 WRITE_IMM, 2 SEND, 3 SEND_IMM, 4 READ, 5 CS, 6 FA): {by_op:?}"
    );
    for op in 0..7 {
        let n = by_op.get(&op).copied().unwrap_or(0);
        assert!(n >= 1000, "opcode {op}: {n} requests compared");
    }
}

// ---------------------------------------------------------------------------------------------
// Completions, receive WQEs, RQ and CQ doorbells.

/// A random CQE whose type, status, phase and requester tail are drawn to hit every path.
fn arb_cqe() -> impl Strategy<Value = [u8; 32]> {
    (
        proptest::collection::vec(any::<u8>(), 32),
        prop_oneof![
            3 => Just(0u32),
            3 => Just(1),
            1 => prop_oneof![Just(2), Just(3), Just(0xe), Just(0xf), 0u32..16],
        ],
        prop_oneof![Just(0u32), 0u32..13, any::<u8>().prop_map(u32::from)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(raw, ty, status, phase, zero_tail)| {
            let mut c = [0u8; 32];
            c.copy_from_slice(&raw);
            let mut w = u32::from_le_bytes([c[24], c[25], c[26], c[27]]);
            w = (w & !0xff1f) | u32::from(phase) | (ty << 1) | (status << 8);
            c[24..28].copy_from_slice(&w.to_le_bytes());
            if zero_tail {
                c[12..24].fill(0);
            }
            c
        })
}

fn rust_decode(c: &[u8; 32]) -> gda_hal::WorkCompletion {
    Bnxt::decode(&bytemuck::pod_read_unaligned::<Cqe32>(c))
}

/// Every status byte of a requester and of an RC receive CQE, then 5,000 random CQEs polled at
/// random consumer positions of rings of 1–64 CQEs (32- and 64-byte strides): the header's poll
/// and decode give what `Bnxt::poll_cq` and `Bnxt::decode` give (validity, status, opcode,
/// counter, length, immediate, QP, vendor error).
#[test]
fn cqes_decode_as_the_rust_poll() {
    let mut statuses = 0;
    for ty in [0u32, 1] {
        for status in 0..=255u32 {
            let mut c = [0u8; 32];
            c[0..8].copy_from_slice(&0x0012_3456u64.to_le_bytes());
            c[8..12].copy_from_slice(&0x0001_2345u32.to_le_bytes());
            if ty == 1 {
                c[8..16].copy_from_slice(&0x0065_4321u64.to_le_bytes());
            }
            let w = 1 | (ty << 1) | (status << 8) | (0xau32 << 16);
            c[24..28].copy_from_slice(&w.to_le_bytes());
            let (wc, raw_status, _) = dev::decode(&c);
            let want = rust_decode(&c);
            assert_eq!(wc, want, "type {ty} status {status:#x}");
            assert_eq!(raw_status, want.status as u32);
            statuses += 1;
        }
    }
    assert_eq!(statuses, 512);

    let mut runner = TestRunner::new(Config {
        cases: 5000,
        failure_persistence: None,
        ..Config::default()
    });
    let counts = RefCell::new(BTreeMap::<(&str, u8), u32>::new());
    runner
        .run(
            &(
                proptest::collection::vec(arb_cqe(), 64),
                0u32..7,
                any::<bool>(),
                any::<u32>(),
            ),
            |(cqes, log2, wide, ci)| {
                let entries = 1u32 << log2;
                let stride = if wide { 64 } else { 32 };
                let mut mem = Mem::new(entries as usize * stride, 0);
                for (i, c) in cqes.iter().take(entries as usize).enumerate() {
                    // SAFETY: slot `i` of the ring lies inside `mem`.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            c.as_ptr(),
                            (mem.addr() as *mut u8).add(i * stride),
                            32,
                        );
                    }
                }
                let cq = CqHandle {
                    buf: mem.addr(),
                    dbrec: 0,
                    db: 0,
                    entries,
                    cqe_bytes: stride as u32,
                    cqn: 1,
                    collapsed: 0,
                };
                // SAFETY: the ring holds `entries` CQEs of `stride` bytes.
                let (rust, hdr) = unsafe { (Bnxt::poll_cq(&cq, ci), dev::poll_cq(&cq, ci)) };
                prop_assert_eq!(rust, hdr.map(|h| h.0), "CQE at {} of {}", ci, entries);
                if let (Some(r), Some((_, st, op))) = (rust, hdr) {
                    prop_assert_eq!(st, r.status as u32);
                    prop_assert_eq!(op, r.opcode as u32);
                }
                let c = &cqes[(ci & (entries - 1)) as usize];
                let key = match (rust.is_some(), (c[24] >> 1) & 0xf) {
                    (false, _) => ("not yet valid", 0),
                    (true, 0) => (
                        "requester",
                        u8::from(rust.is_some_and(|w| !w.status.is_ok())),
                    ),
                    (true, 1) => (
                        "RC receive",
                        u8::from(rust.is_some_and(|w| !w.status.is_ok())),
                    ),
                    (true, _) => ("other type", 0),
                };
                *counts.borrow_mut().entry(key).or_default() += 1;
                Ok(())
            },
        )
        .unwrap();
    let counts = counts.into_inner();
    eprintln!("polled (what, error): {counts:?}");
    for key in [
        ("not yet valid", 0),
        ("requester", 0),
        ("requester", 1),
        ("RC receive", 0),
        ("RC receive", 1),
        ("other type", 0),
    ] {
        let c = counts.get(&key).copied().unwrap_or(0);
        assert!(c >= 150, "{key:?}: {c} polled");
    }
}

/// The completed unit of a requester CQE's counter and the counter's valid bits, in every mode
/// and ring size, as gda_bnxt derives them.
#[test]
fn completed_units_match() {
    let mut n = 0;
    for wqe in MODES {
        for log2 in 0..=16u32 {
            let entries = 1u32 << log2;
            let mode = Mode {
                wqe,
                psn: PsnForm::Legacy,
            };
            let mut mem = Mem::new(16, 0);
            let mut db = [0u64];
            // Nothing is posted: the handle only carries the geometry.
            let sq = queue(
                &mut mem,
                &mut db,
                mode,
                entries,
                mode.psn_entries(entries),
                1,
                1024,
                0,
            )
            .unwrap();
            assert_eq!(dev::completion_bits(&sq), Bnxt::completion_bits(&sq));
            for counter in [
                0u32,
                1,
                2,
                3,
                4,
                5,
                0xffff,
                0xfffe,
                0x8000,
                entries,
                entries * 3,
            ] {
                let wc = gda_hal::WorkCompletion {
                    status: gda_hal::WcStatus::Success,
                    opcode: gda_hal::WcOpcode::Other,
                    wqe_counter: counter,
                    byte_len: 0,
                    imm: None,
                    qpn: 1,
                    vendor_err: 0,
                    is_recv: false,
                };
                assert_eq!(
                    dev::completed_unit(&sq, counter),
                    Bnxt::completed_unit(&sq, &wc),
                    "{wqe:?} {entries} {counter}"
                );
                n += 1;
            }
        }
    }
    assert_eq!(n, 3 * 17 * 11);
}

macro_rules! rust_recv {
    ($rq:expr, $at:expr, $sges:expr, $($n:literal)*) => {
        match $sges.len() {
            $($n => {
                let a: [Sge; $n] = $sges.try_into().unwrap();
                Bnxt::post_recv::<$n>($rq, ProdIdx($at), &a)
            })*
            _ => unreachable!(),
        }
    };
}

/// 2,000 receive WQEs (0–6 entries, strides of 32–128 bytes, so some entries do not fit) with
/// their RQ doorbell, and 2,000 CQ doorbells, on junk-filled rings: the same bytes and words.
#[test]
fn receives_and_doorbells_match() {
    let mut runner = TestRunner::new(Config {
        cases: 2000,
        failure_persistence: None,
        ..Config::default()
    });
    let compared = RefCell::new(BTreeMap::<usize, u32>::new());
    runner
        .run(
            &(
                proptest::collection::vec((any::<u64>(), any::<u32>(), any::<u32>()), 0..=6),
                (
                    0u32..8,
                    prop_oneof![Just(32u32), Just(48), Just(64), Just(128)],
                ),
                (pos(), any::<u32>(), any::<u8>()),
                (0u32..12, pos(), any::<bool>()),
            ),
            |(sges, (log2, stride), (at, qpn, junk), (cq_log2, ci, cq_db))| {
                let sges: Vec<Sge> = sges
                    .into_iter()
                    .map(|(addr, length, lkey)| Sge { addr, length, lkey })
                    .collect();
                let entries = 1u32 << log2;
                let mut out = Vec::new();
                for header in [false, true] {
                    let mut mem = Mem::new(entries as usize * stride as usize, junk);
                    let mut db = [0u64];
                    let mut cdb = [0u64];
                    let rq = WqHandle {
                        buf: mem.addr(),
                        dbrec: 0,
                        db: db.as_mut_ptr() as u64,
                        entries,
                        stride,
                        qpn: qpn & 0xf_ffff,
                        max_inline: 0,
                        max_sge: 6,
                    };
                    let cq = CqHandle {
                        buf: 0,
                        dbrec: 0,
                        db: if cq_db { cdb.as_mut_ptr() as u64 } else { 0 },
                        entries: 1 << cq_log2,
                        cqe_bytes: 32,
                        cqn: qpn.rotate_left(7) & 0xf_ffff,
                        collapsed: 0,
                    };
                    // SAFETY: ring and doorbell words are owned here.
                    unsafe {
                        if header {
                            dev::post_recv_ring(&rq, at, &sges);
                            dev::update_cq_ci(&cq, ci);
                        } else {
                            rust_recv!(&rq, at, sges.as_slice(), 0 1 2 3 4 5 6);
                            Bnxt::ring_rq(&rq, ProdIdx(at.wrapping_add(1)));
                            Bnxt::update_cq_ci(&cq, ci);
                        }
                    }
                    out.push((mem.bytes().to_vec(), db[0], cdb[0]));
                }
                prop_assert_eq!(
                    &out[0],
                    &out[1],
                    "{} entries, stride {}",
                    sges.len(),
                    stride
                );
                *compared.borrow_mut().entry(sges.len()).or_default() += 1;
                Ok(())
            },
        )
        .unwrap();
    let compared = compared.into_inner();
    eprintln!("receive WQEs compared by entry count: {compared:?}");
    for n in 0..=6 {
        assert!(
            compared.get(&n).copied().unwrap_or(0) >= 150,
            "{n} entries: {compared:?}"
        );
    }
}
