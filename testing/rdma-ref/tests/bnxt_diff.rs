//! gda-bnxt's device functions against rdma-core v55's own `bnxt_re_post_send` (compiled from
//! the source vendored in ibverbs-sys, `csrc/bnxt`): random chains of work requests posted by
//! both at random ring positions, in static mode, variable mode and the fixed three-slot form
//! (which is variable mode with every WQE three slots), with every PSN-table form.
//!
//! For each chain rdma-core runs twice, over a ring filled with 0x00 and with 0xff: the bytes
//! equal in both runs are the ones rdma-core wrote. gda runs once over a ring filled with 0x5a
//! and must (1) write exactly those bytes with the same values, (2) leave every other byte
//! untouched or zero (rdma-core leaves some fields stale — `key_immd` of a WRITE, reserved
//! words, inline padding — gda zeroes them), and (3) produce the same doorbell word, final PSN
//! and MSN index. Each mode's test asserts how many chains were compared in every PSN form, so none
//! can pass vacuously.

use std::sync::atomic::{AtomicU32, Ordering};

use gda_bnxt::{Bnxt, Mode, PsnForm, WqeMode};
use gda_hal::{
    AtomicOp, Payload, PostError, Provider, Remote, SendFlags, Sge, SqPos, WorkRequest, WqHandle,
};
use gda_rdma_ref::bnxt::{self, BrefQpCfg, BrefSge, BrefWr};
use proptest::prelude::*;

/// One request, provider-neutral.
#[derive(Clone, Debug)]
struct TWr {
    /// 0 WRITE, 1 WRITE_IMM, 2 SEND, 3 SEND_IMM, 4 READ, 5 CS, 6 FA.
    op: u8,
    lens: Vec<u32>,
    inline: bool,
    fence: bool,
    signaled: bool,
    solicited: bool,
    imm: u32,
    raddr: u64,
    rkey: u32,
    compare: u64,
    swap: u64,
    lkey: u32,
}

impl TWr {
    fn is_atomic(&self) -> bool {
        self.op >= 5
    }

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

    fn to_ref(&self, data: &[Vec<u8>]) -> BrefWr {
        let opcode = [0u32, 1, 2, 3, 4, 5, 6][self.op as usize];
        let mut flags = 0;
        if self.fence {
            flags |= 1;
        }
        if self.signaled {
            flags |= 2;
        }
        if self.solicited {
            flags |= 4;
        }
        if self.inline && !self.is_atomic() && self.op != 4 {
            flags |= 8;
        }
        let mut w = BrefWr {
            opcode,
            send_flags: flags,
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
        for (i, &l) in self.lens.iter().enumerate() {
            w.sg_list[i] = BrefSge {
                addr: if flags & 8 != 0 {
                    data[i].as_ptr() as u64
                } else {
                    0x7f00_0000_0000 + (i as u64) * 0x10_0000
                },
                length: l,
                lkey: self.lkey.wrapping_add(i as u32),
            };
        }
        w
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

    fn flags(&self) -> SendFlags {
        let mut f = SendFlags::empty();
        if self.fence {
            f |= SendFlags::FENCE;
        }
        if self.signaled {
            f |= SendFlags::SIGNALED;
        }
        if self.solicited {
            f |= SendFlags::SOLICITED;
        }
        f
    }
}

fn twr() -> impl Strategy<Value = TWr> {
    (
        0u8..7,
        proptest::collection::vec(
            prop_oneof![0u32..64, 0u32..5000, Just(0u32), 1u32..1 << 20],
            0..=7,
        ),
        any::<bool>(),
        (any::<bool>(), any::<bool>(), any::<bool>()),
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
            |(
                op,
                mut lens,
                inline,
                (fence, signaled, solicited),
                (imm, raddr, rkey, compare, swap),
                lkey,
            )| {
                let atomic = op >= 5;
                if atomic {
                    lens = vec![8];
                }
                let inline = inline && !atomic && op != 4;
                if inline {
                    // Inline payloads stay small (≤ 96 bytes in total, usually).
                    for l in &mut lens {
                        *l %= 40;
                    }
                }
                TWr {
                    op,
                    lens,
                    inline,
                    fence,
                    signaled,
                    solicited,
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

fn to_gda<'a>(w: &TWr, sges: &'a [Sge], inline: &'a [u8]) -> WorkRequest<'a> {
    let remote = Remote {
        addr: w.raddr,
        rkey: w.rkey,
    };
    let payload = if w.inline {
        Payload::Inline(inline)
    } else {
        Payload::Sges(sges)
    };
    match w.op {
        0 => WorkRequest::Write {
            remote,
            payload,
            imm: None,
        },
        1 => WorkRequest::Write {
            remote,
            payload,
            imm: Some(w.imm),
        },
        2 => WorkRequest::Send { payload, imm: None },
        3 => WorkRequest::Send {
            payload,
            imm: Some(w.imm),
        },
        4 => WorkRequest::Read { remote, sges },
        5 => WorkRequest::Atomic {
            remote,
            local: sges[0],
            op: AtomicOp::CompareSwap {
                compare: w.compare,
                swap: w.swap,
            },
            bytes: 8,
        },
        _ => WorkRequest::Atomic {
            remote,
            local: sges[0],
            op: AtomicOp::FetchAdd { add: w.swap },
            bytes: 8,
        },
    }
}

/// Ring geometry for a mode: (units, slots).
fn geometry(mode: WqeMode, units: u32) -> u32 {
    mode.slots_per_unit() * units
}

thread_local! {
    /// Chains compared byte for byte on this thread, by PSN form (legacy, ext, MSN). Each mode's
    /// test runs on one thread, so its own counts are exact under any harness.
    static COMPARED: std::cell::Cell<[u32; 3]> = const { std::cell::Cell::new([0; 3]) };
}
static REFUSED: AtomicU32 = AtomicU32::new(0);

fn form_index(f: PsnForm) -> usize {
    match f {
        PsnForm::Legacy => 0,
        PsnForm::Ext => 1,
        PsnForm::Msn => 2,
    }
}

#[allow(clippy::too_many_arguments)]
fn run_case(
    wqe: WqeMode,
    psn_form: PsnForm,
    units: u32,
    start_unit: u32,
    epoch: bool,
    psn0: u32,
    msn0: u32,
    mtu_enum: u32,
    max_sge: u32,
    max_inline: u32,
    qp_id: u32,
    wrs: &[TWr],
) -> Result<(), TestCaseError> {
    let mode = Mode { wqe, psn: psn_form };
    let slots = geometry(wqe, units);
    let entry_bytes = psn_form.entry_bytes() as usize;
    // The table rdma-core's harness requires: one entry per doorbell index (WQE in static
    // mode, slot otherwise), rounded up to a power of two for the MSN form.
    let base = if wqe == WqeMode::Static { units } else { slots };
    let table_entries = if psn_form == PsnForm::Msn {
        base.next_power_of_two()
    } else {
        base
    };
    let len = slots as usize * 16 + table_entries as usize * entry_bytes;
    let msn0 = msn0 % mode.psn_entries(units).max(1);
    let first = start_unit % units;
    let cfg = BrefQpCfg {
        qp_id,
        wqe_mode: u32::from(wqe != WqeMode::Static),
        sq_slots: slots,
        sq_tail: first * wqe.slots_per_unit(),
        sq_epoch: u32::from(epoch),
        sq_psn: psn0,
        mtu_enum,
        msn_table: u32::from(psn_form == PsnForm::Msn),
        psn_ext: u32::from(psn_form == PsnForm::Ext),
        msn: msn0,
        max_inline,
        max_sge,
        sq_head: first * wqe.slots_per_unit(),
        ..Default::default()
    };
    // gda's inline payload is one buffer, not a gather list; rdma-core counts an inline WR's
    // pieces against max_sge, so keep that count legal.
    let wrs: Vec<TWr> = wrs
        .iter()
        .cloned()
        .map(|mut w| {
            if w.inline {
                w.lens.truncate(max_sge as usize);
            }
            w
        })
        .collect();
    let wrs = &wrs[..];
    let datas: Vec<Vec<Vec<u8>>> = wrs.iter().map(TWr::inline_data).collect();
    let refs: Vec<BrefWr> = wrs.iter().zip(&datas).map(|(w, d)| w.to_ref(d)).collect();
    let mut r0 = vec![0u8; len];
    let mut r1 = vec![0xffu8; len];
    let o0 = bnxt::post_send_n(&cfg, &refs, &mut r0);
    let o1 = bnxt::post_send_n(&cfg, &refs, &mut r1);
    prop_assert_eq!(o0.ret, o1.ret);
    prop_assert!(o0.ret != -1000, "harness refused the geometry");

    // gda over a 0x5a ring.
    let mut g = vec![0x5au8; len];
    let wq = gda_bnxt::BnxtSq::new(
        WqHandle {
            buf: g.as_mut_ptr() as u64,
            db: 0,
            entries: units,
            qpn: qp_id,
            max_inline,
            max_sge,
            ..WqHandle::default()
        },
        mode,
        g.as_mut_ptr() as u64 + u64::from(slots) * 16,
        mode.psn_entries(units),
        128 << mtu_enum,
        0,
    )
    .expect("a geometry rdma-core accepted");
    let mut at = SqPos {
        unit: gda_hal::ProdIdx(first + if epoch { units } else { 0 }),
        msg: msn0,
        psn: psn0 & 0xff_ffff,
    };
    let mut last_db = None;
    let mut refused = None;
    // Slots of a refused WQE: rdma-core has already written part of it before it refuses (not
    // rung, so harmless); gda writes nothing. Those bytes are not compared.
    let mut skip = 0..0;
    for (i, (w, d)) in wrs.iter().zip(&datas).enumerate() {
        let sges = w.sges();
        let inline: Vec<u8> = d.concat();
        let wr = to_gda(w, &sges, &inline);
        match Bnxt::check(&wq, &wr) {
            Ok(_) => {
                // SAFETY: the ring and table are owned here and sized for the queue.
                let p = unsafe { Bnxt::post(&wq, at, &wr, w.flags()) };
                at = p.next;
                last_db = Some(u64::from_le_bytes(p.doorbell));
            }
            Err(e) => {
                refused = Some((i, e));
                let spu = wqe.slots_per_unit() as usize;
                let first_slot = (at.unit.0 % units) as usize * spu;
                let n = if wqe == WqeMode::Variable { 16 } else { spu };
                skip = first_slot * 16..(first_slot + n) * 16;
                break;
            }
        }
    }
    if let Some((i, e)) = refused {
        // rdma-core refuses the same request (it posts — and rings for — the ones before it).
        prop_assert!(
            o0.ret != 0,
            "gda refused WR {} ({:?}) that rdma-core posted",
            i,
            e
        );
        prop_assert_eq!(
            o0.bad_index,
            i as i32,
            "refused at a different WR ({:?})",
            e
        );
        prop_assert!(
            matches!(
                e,
                PostError::TooManySges { .. } | PostError::InlineTooLong { .. }
            ),
            "{:?}",
            e
        );
        REFUSED.fetch_add(1, Ordering::Relaxed);
        if i == 0 {
            return Ok(());
        }
    } else {
        prop_assert_eq!(o0.ret, 0, "rdma-core refused a chain gda posted: {:?}", wrs);
    }
    for k in 0..len {
        if skip.contains(&k) || skip.contains(&(k + slots as usize * 16)) {
            continue;
        }
        let written = r0[k] == r1[k];
        if written {
            prop_assert_eq!(
                g[k],
                r0[k],
                "byte {} ({} {}): rdma-core wrote {:#04x}, gda {:#04x}",
                k,
                if k < slots as usize * 16 {
                    "ring slot"
                } else {
                    "PSN table entry"
                },
                if k < slots as usize * 16 {
                    k / 16
                } else {
                    (k - slots as usize * 16) / entry_bytes
                },
                r0[k],
                g[k]
            );
        } else {
            prop_assert!(
                g[k] == 0x5a || g[k] == 0,
                "byte {} rdma-core leaves alone, gda wrote {:#04x}",
                k,
                g[k]
            );
        }
    }
    prop_assert_eq!(last_db, Some(o0.doorbell), "doorbell word");
    prop_assert_eq!(at.psn, o0.sq_psn_after & 0xff_ffff, "next PSN");
    if psn_form == PsnForm::Msn {
        prop_assert_eq!(at.msg % mode.psn_entries(units), o0.msn_after, "MSN index");
    }
    COMPARED.with(|c| {
        let mut a = c.get();
        a[form_index(psn_form)] += 1;
        c.set(a);
    });
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500)
}

/// Runs `cases()` random chains of one mode and asserts that at least a third of them, in
/// every PSN form, were really posted and compared byte for byte (not refused or skipped).
fn run_mode<S: Strategy>(
    name: &str,
    strat: S,
    case: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let before = COMPARED.with(std::cell::Cell::get);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    });
    if let Err(e) = runner.run(&strat, case) {
        panic!("{name}: {e}");
    }
    let after = COMPARED.with(std::cell::Cell::get);
    let total: u32 = (0..3).map(|f| after[f] - before[f]).sum();
    for (f, form) in ["legacy", "ext", "MSN"].iter().enumerate() {
        let n = after[f] - before[f];
        // About a third of the cases use each form; most chains are posted whole.
        assert!(
            n * 9 >= cases(),
            "{name}, {form} PSN entries: only {n} of {} chains compared ({total} in all)",
            cases()
        );
    }
    eprintln!("{name}: {total} chains compared ({:?} by PSN form)", {
        let mut d = [0; 3];
        for f in 0..3 {
            d[f] = after[f] - before[f];
        }
        d
    });
}

fn forms() -> impl Strategy<Value = PsnForm> {
    proptest::sample::select(vec![PsnForm::Legacy, PsnForm::Ext, PsnForm::Msn])
}

fn inline_caps() -> impl Strategy<Value = u32> {
    // `max_inline` is a multiple of 16: rdma-core v55 compares the 16-aligned inline length with
    // it, and when that alone exceeds it (e.g. 33 bytes against 33) `bnxt_re_required_slots`
    // returns -EINVAL into an unsigned slot count and the WQE is posted with a garbage size and
    // tail advance (csrc/bnxt/NOTES.md). gda accepts up to `max_inline` bytes exactly.
    prop_oneof![Just(96u32), (0u32..=6).prop_map(|k| k * 16)]
}

/// A mode whose WQEs take any number of SGEs or inline bytes: random chains on a ring of
/// `units`, starting at a position drawn from `start`.
fn sge_mode(name: &str, mode: WqeMode, units: u32, start: impl Strategy<Value = u32>) {
    let strat = (
        proptest::collection::vec(twr(), 1..12),
        (start, any::<bool>(), 0u32..1 << 24, any::<u32>()),
        (1u32..6, forms(), 1u32..1 << 20, 1u32..=6, inline_caps()),
    );
    run_mode(
        name,
        strat,
        |(wrs, (start, epoch, psn0, msn0), (mtu, form, qp, sge, inl))| {
            run_case(
                mode, form, units, start, epoch, psn0, msn0, mtu, sge, inl, qp, &wrs,
            )
        },
    );
}

/// Static mode: 8 slots per WQE, doorbell index = WQE index, every PSN form. rdma-core keeps
/// 1024 slots spare (its `diff`): 512 WQEs never look full.
#[test]
fn static_mode() {
    sge_mode("static", WqeMode::Static, 512, any::<u32>());
}

/// Variable mode: a WQE takes the slots it uses and wraps the ring slot by slot.
#[test]
fn variable_mode() {
    sge_mode(
        "variable",
        WqeMode::Variable,
        4096,
        prop_oneof![any::<u32>(), 4080u32..4096],
    );
}

/// The fixed three-slot form is variable mode in which every WQE is three slots: one SGE or
/// up to 16 inline bytes. rdma-core's variable mode must produce the same bytes.
#[test]
fn fixed3_form() {
    let strat = (
        proptest::collection::vec(twr(), 1..12),
        (any::<u32>(), any::<bool>(), 0u32..1 << 24, any::<u32>()),
        (1u32..6, forms(), 1u32..1 << 20),
    );
    run_mode(
        "fixed3",
        strat,
        |(wrs, (start, epoch, psn0, msn0), (mtu, form, qp))| {
            let wrs: Vec<TWr> = wrs
                .into_iter()
                .map(|mut w| {
                    w.lens.truncate(1);
                    if w.lens.is_empty() {
                        w.lens.push(if w.inline { 3 } else { 100 });
                    }
                    if w.inline {
                        w.lens[0] = w.lens[0].clamp(1, 16);
                    }
                    w
                })
                .collect();
            run_case(
                WqeMode::Fixed3,
                form,
                1024,
                start,
                epoch,
                psn0,
                msn0,
                mtu,
                1,
                16,
                qp,
                &wrs,
            )
        },
    );
}

#[test]
fn reference_vectors_from_the_fact_sheet() {
    // nic-formats.md §E.4: static mode, QP 0x21, MTU 1024, SQ PSN 0x100, legacy PSN entries.
    let mut g = vec![0u8; 8 * 16 * 16 + 16 * 8];
    let mode = Mode {
        wqe: WqeMode::Static,
        psn: PsnForm::Legacy,
    };
    let wq = gda_bnxt::BnxtSq::new(
        WqHandle {
            buf: g.as_mut_ptr() as u64,
            entries: 16,
            qpn: 0x21,
            max_inline: 96,
            max_sge: 6,
            ..WqHandle::default()
        },
        mode,
        g.as_mut_ptr() as u64 + 8 * 16 * 16,
        16,
        1024,
        0x100,
    )
    .unwrap();
    let sge = [Sge {
        addr: 0x7f00_0000_2000,
        length: 4096,
        lkey: 0x5678,
    }];
    let wr = WorkRequest::Write {
        remote: Remote {
            addr: 0x7f00_0000_1000,
            rkey: 0xabcd,
        },
        payload: Payload::Sges(&sge),
        imm: None,
    };
    // SAFETY: the ring and table are owned here.
    let p = unsafe { Bnxt::post(&wq, SqPos::ZERO, &wr, SendFlags::SIGNALED) };
    assert_eq!(
        &g[..48],
        &[
            0x04, 0x01, 0x03, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, //
            0, 0x10, 0, 0, 0, 0x7f, 0, 0, 0xcd, 0xab, 0, 0, 0, 0, 0, 0, //
            0, 0x20, 0, 0, 0, 0x7f, 0, 0, 0x78, 0x56, 0, 0, 0, 0x10, 0, 0
        ]
    );
    let t = 8 * 16 * 16;
    assert_eq!(
        &g[t..t + 8],
        &[0x00, 0x01, 0x00, 0x01, 0x04, 0x01, 0x00, 0x00]
    );
    assert_eq!(u64::from_le_bytes(p.doorbell), 0x0400_0021_0000_0001);
    assert_eq!((p.next.unit.0, p.next.msg, p.next.psn), (1, 1, 4));
}
