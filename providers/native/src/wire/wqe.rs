//! The native send WQE as a value: [`WqeRepr`] (smoltcp `wire` style), the one description of
//! the format that both directions use — [`Native`](crate::Native)'s device functions build one
//! from a [`WorkRequest`] and emit it unit by unit into the ring ([`WqeRepr::unit`],
//! [`WqeRepr::header`]); the device model ([`crate::model`]) [`parse`](WqeRepr::parse)s the
//! bytes it fetched back into one.
//!
//! Layout (units of [`UNIT_BYTES`]): unit 0 is the [`NativeWqe`] header; extension units hold
//! the inline payload, or gather entries 2.. ([`SGES_PER_UNIT`] [`NativeSge`]s per unit), or
//! (masked compare-swap) the compare mask at bytes 0..8 and the swap mask at 8..16.

use gda_hal::{AtomicOp, ParseError, Payload, Remote, SendFlags, Sge, WorkRequest};

use super::{NativeOp, NativeSge, NativeWqe, flags};
use crate::{MAX_UNITS, UNIT_BYTES};

/// Gather entries in one extension unit.
pub const SGES_PER_UNIT: usize = 4;
/// Bytes of one [`NativeSge`].
pub const SGE_BYTES: usize = 16;
/// The field [`ParseError::Range`] names when an inline WQE's `length` does not fit its
/// `units` (the device reports `LOC_LEN_ERR`; every other parse error is `LOC_QP_OP_ERR`).
pub const INLINE_LENGTH: &str = "inline length";

const UNIT: usize = UNIT_BYTES as usize;

/// A gather (or READ scatter) list.
#[derive(Clone, Copy, Debug)]
pub enum Sges<'a> {
    /// As a request gives it; zero-length entries are skipped (they are not encoded).
    Host(&'a [Sge]),
    /// As parsed: `n` entries, the first from the header, the rest as [`NativeSge`] bytes.
    Wire {
        /// Entries.
        n: u8,
        /// The header's entry (meaningful when `n >= 1`).
        first: NativeSge,
        /// Entries 2..=n, [`SGE_BYTES`] each.
        rest: &'a [u8],
    },
}

impl<'a> Sges<'a> {
    /// The entries, in order.
    pub fn iter(&self) -> impl Iterator<Item = NativeSge> + 'a {
        let (host, wire) = match *self {
            Sges::Host(s) => (s, None),
            Sges::Wire { n, first, rest } => (&[][..], Some((n, first, rest))),
        };
        let host = host.iter().filter(|s| s.length != 0).map(|s| NativeSge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        });
        let wire = wire.into_iter().flat_map(|(n, first, rest)| {
            let rest = rest
                .chunks_exact(SGE_BYTES)
                .map(bytemuck::pod_read_unaligned::<NativeSge>);
            core::iter::once(first).chain(rest).take(usize::from(n))
        });
        host.chain(wire)
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        match *self {
            Sges::Host(s) => s.iter().filter(|s| s.length != 0).count(),
            Sges::Wire { n, .. } => usize::from(n),
        }
    }

    /// No entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for Sges<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}
impl Eq for Sges<'_> {}

/// Where a WRITE's or SEND's payload comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data<'a> {
    /// Bytes in the extension units (the header's `INLINE` flag).
    Inline(&'a [u8]),
    /// A gather list.
    Gather(Sges<'a>),
}

/// What a WQE does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeBody<'a> {
    /// No operation.
    Nop,
    /// RDMA WRITE (with immediate when `imm` is set).
    Write {
        /// Target.
        remote: Remote,
        /// Immediate.
        imm: Option<u32>,
        /// Payload.
        data: Data<'a>,
    },
    /// SEND (with immediate when `imm` is set).
    Send {
        /// Immediate.
        imm: Option<u32>,
        /// Payload.
        data: Data<'a>,
    },
    /// RDMA READ into the scatter list.
    Read {
        /// Source.
        remote: Remote,
        /// Where the data lands.
        sges: Sges<'a>,
    },
    /// An atomic; the original value lands at `local_addr`.
    Atomic {
        /// Target.
        remote: Remote,
        /// Result buffer address.
        local_addr: u64,
        /// Result buffer key.
        lkey: u32,
        /// Operand width in bytes (8; masked operations also 4).
        width: u8,
        /// The operation.
        op: AtomicOp,
    },
}

/// A native send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WqeRepr<'a> {
    /// The operation.
    pub body: WqeBody<'a>,
    /// `SIGNALED`, `FENCE`, `SOLICITED` (other bits are not encoded).
    pub flags: SendFlags,
    /// Units the WQE occupies (1..=[`MAX_UNITS`]).
    pub units: u8,
    /// Producer position of the WQE (reported back in its CQE).
    pub counter: u32,
}

#[inline]
fn sge_units(n: usize) -> u32 {
    (n.saturating_sub(1) as u32).div_ceil(SGES_PER_UNIT as u32)
}

/// The header's gather fields: the first entry, the count and the total length (wrapping).
fn set_sges(h: &mut NativeWqe, s: &Sges<'_>) {
    for (i, e) in s.iter().enumerate() {
        if i == 0 {
            h.local = e;
        }
        h.nsge = h.nsge.wrapping_add(1);
        h.length = h.length.wrapping_add(e.length);
    }
}

fn range(field: &'static str, value: impl Into<u64>) -> ParseError {
    ParseError::Range {
        field,
        value: value.into(),
    }
}

impl<'a> WqeRepr<'a> {
    /// The WQE [`Native`](crate::Native) posts for `wr` at producer position `counter`.
    /// Preconditions as [`Provider::post`](gda_hal::Provider::post) (checked by
    /// [`Provider::check`](gda_hal::Provider::check)): otherwise the bytes are wrong, never
    /// out of the WQE's units.
    #[inline(always)]
    #[must_use]
    pub fn from_request(wr: &WorkRequest<'a>, fl: SendFlags, counter: u32) -> Self {
        let data = |p: Payload<'a>| match p {
            Payload::Inline(d) => Data::Inline(d),
            Payload::Sges(s) => Data::Gather(Sges::Host(s)),
        };
        let body = match *wr {
            WorkRequest::Write {
                remote,
                payload,
                imm,
            } => WqeBody::Write {
                remote,
                imm,
                data: data(payload),
            },
            WorkRequest::Send { payload, imm } => WqeBody::Send {
                imm,
                data: data(payload),
            },
            WorkRequest::Read { remote, sges } => WqeBody::Read {
                remote,
                sges: Sges::Host(sges),
            },
            WorkRequest::Atomic {
                remote,
                local,
                op,
                bytes,
            } => WqeBody::Atomic {
                remote,
                local_addr: local.addr,
                lkey: local.lkey,
                width: bytes as u8,
                op,
            },
            WorkRequest::Nop => WqeBody::Nop,
        };
        let mut r = Self {
            body,
            flags: fl & (SendFlags::SIGNALED | SendFlags::FENCE | SendFlags::SOLICITED),
            units: 1,
            counter,
        };
        r.units = r.needed_units() as u8;
        r
    }

    /// Units the body needs (header included).
    // Inline: the post path (`from_request`, inlined into the caller's crate) calls it; out
    // of line, it was a call through the GOT and a store-forwarding stall per post.
    #[must_use]
    #[inline]
    pub fn needed_units(&self) -> u32 {
        let data = |d: &Data<'_>| match d {
            Data::Inline(b) => (b.len() as u32).div_ceil(UNIT_BYTES),
            Data::Gather(s) => sge_units(s.len()),
        };
        1 + match &self.body {
            WqeBody::Write { data: d, .. } | WqeBody::Send { data: d, .. } => data(d),
            WqeBody::Read { sges, .. } => sge_units(sges.len()),
            WqeBody::Atomic {
                op: AtomicOp::MaskedCompareSwap { .. },
                ..
            } => 1,
            WqeBody::Atomic { .. } | WqeBody::Nop => 0,
        }
    }

    /// Unit 0, the header.
    #[inline(always)]
    #[must_use]
    pub fn header(&self) -> NativeWqe {
        let mut h = NativeWqe {
            units: self.units,
            counter: self.counter,
            ..NativeWqe::default()
        };
        for (bit, f) in [
            (SendFlags::SIGNALED, flags::SIGNALED),
            (SendFlags::FENCE, flags::FENCE),
            (SendFlags::SOLICITED, flags::SOLICITED),
        ] {
            if self.flags.contains(bit) {
                h.flags |= f;
            }
        }
        let set_remote = |h: &mut NativeWqe, r: Remote| {
            h.remote_addr = r.addr;
            h.rkey = r.rkey;
        };
        let set_data = |h: &mut NativeWqe, d: &Data<'_>| match d {
            Data::Inline(b) => {
                h.flags |= flags::INLINE;
                h.length = b.len() as u32;
            }
            Data::Gather(s) => set_sges(h, s),
        };
        match &self.body {
            WqeBody::Nop => h.opcode = NativeOp::Nop as u8,
            WqeBody::Write { remote, imm, data } => {
                h.opcode = if imm.is_some() {
                    NativeOp::WriteImm
                } else {
                    NativeOp::Write
                } as u8;
                set_remote(&mut h, *remote);
                h.imm = imm.unwrap_or(0);
                set_data(&mut h, data);
            }
            WqeBody::Send { imm, data } => {
                h.opcode = if imm.is_some() {
                    NativeOp::SendImm
                } else {
                    NativeOp::Send
                } as u8;
                h.imm = imm.unwrap_or(0);
                set_data(&mut h, data);
            }
            WqeBody::Read { remote, sges } => {
                h.opcode = NativeOp::Read as u8;
                set_remote(&mut h, *remote);
                set_sges(&mut h, sges);
            }
            WqeBody::Atomic {
                remote,
                local_addr,
                lkey,
                width,
                op,
            } => {
                set_remote(&mut h, *remote);
                h.width = *width;
                h.local = NativeSge {
                    addr: *local_addr,
                    length: u32::from(*width),
                    lkey: *lkey,
                };
                h.nsge = 1;
                (h.opcode, h.op0, h.op1) = match *op {
                    AtomicOp::CompareSwap { compare, swap } => {
                        (NativeOp::CompSwap as u8, compare, swap)
                    }
                    AtomicOp::FetchAdd { add } => (NativeOp::FetchAdd as u8, add, 0),
                    AtomicOp::MaskedCompareSwap { compare, swap, .. } => {
                        (NativeOp::MaskedCompSwap as u8, compare, swap)
                    }
                    AtomicOp::MaskedFetchAdd {
                        add,
                        field_boundary,
                    } => (NativeOp::MaskedFetchAdd as u8, add, field_boundary),
                };
            }
        }
        h
    }

    /// Extension unit `k` (1..units): the bytes to store at the unit's start, built in `out`
    /// or borrowed from the inline payload. Bytes past the returned slice are not the
    /// WQE's (an inline tail, gather units past the last entry) and are left as they are.
    #[inline(always)]
    pub fn unit<'s>(&'s self, k: u32, out: &'s mut [u8; UNIT]) -> &'s [u8] {
        let Some(i) = (k as usize).checked_sub(1) else {
            return &[];
        };
        let gather = |s: &Sges<'_>, out: &'s mut [u8; UNIT]| -> &'s [u8] {
            *out = [0; UNIT];
            let mut any = false;
            for (j, e) in s
                .iter()
                .skip(1 + i * SGES_PER_UNIT)
                .take(SGES_PER_UNIT)
                .enumerate()
            {
                if let Some(dst) = out.get_mut(j * SGE_BYTES..(j + 1) * SGE_BYTES) {
                    dst.copy_from_slice(bytemuck::bytes_of(&e));
                    any = true;
                }
            }
            if any { &out[..] } else { &[] }
        };
        match &self.body {
            WqeBody::Write {
                data: Data::Inline(b),
                ..
            }
            | WqeBody::Send {
                data: Data::Inline(b),
                ..
            } => b.chunks(UNIT).nth(i).unwrap_or_default(),
            WqeBody::Write {
                data: Data::Gather(s),
                ..
            }
            | WqeBody::Send {
                data: Data::Gather(s),
                ..
            }
            | WqeBody::Read { sges: s, .. } => gather(s, out),
            WqeBody::Atomic {
                op:
                    AtomicOp::MaskedCompareSwap {
                        compare_mask,
                        swap_mask,
                        ..
                    },
                ..
            } if i == 0 => {
                *out = [0; UNIT];
                out[..8].copy_from_slice(&compare_mask.to_le_bytes());
                out[8..16].copy_from_slice(&swap_mask.to_le_bytes());
                &out[..]
            }
            _ => &[],
        }
    }

    /// Writes the whole WQE (`units` × 64 bytes, ring order, unwrapped) into `buf`; returns the
    /// bytes it spans. Bytes [`unit`](Self::unit) leaves alone are left as they were.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ParseError> {
        let len = usize::from(self.units) * UNIT;
        let Some(buf) = buf.get_mut(..len).filter(|_| self.units >= 1) else {
            return Err(ParseError::Truncated {
                what: "native WQE buffer",
                need: len.max(UNIT),
                have: buf.len(),
            });
        };
        let mut out = [0u8; UNIT];
        for (k, dst) in buf.chunks_exact_mut(UNIT).enumerate() {
            if k == 0 {
                dst.copy_from_slice(bytemuck::bytes_of(&self.header()));
            } else {
                let src = self.unit(k as u32, &mut out);
                dst[..src.len()].copy_from_slice(src);
            }
        }
        Ok(len)
    }

    /// Parses a WQE from its bytes (ring order, unwrapped; at least the `units` its header
    /// declares). Never panics; the error names the field that failed. Checks that need the
    /// QP (its ring size, its gather limit) are the model's.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ParseError> {
        let truncated = |need: usize| ParseError::Truncated {
            what: "native WQE",
            need,
            have: bytes.len(),
        };
        let head = bytes.get(..UNIT).ok_or(truncated(UNIT))?;
        let h: NativeWqe = bytemuck::pod_read_unaligned(head);
        let units = u32::from(h.units);
        if units == 0 || units > MAX_UNITS {
            return Err(range("units", h.units));
        }
        let need = units as usize * UNIT;
        let ext = bytes.get(UNIT..need).ok_or(truncated(need))?;
        let kind = NativeOp::from_raw(h.opcode).ok_or(ParseError::UnknownOpcode(h.opcode))?;
        let mut fl = SendFlags::empty();
        for (f, bit) in [
            (flags::SIGNALED, SendFlags::SIGNALED),
            (flags::FENCE, SendFlags::FENCE),
            (flags::SOLICITED, SendFlags::SOLICITED),
        ] {
            if h.flags & f != 0 {
                fl |= bit;
            }
        }
        let sges = || -> Result<Sges<'a>, ParseError> {
            let n = u32::from(h.nsge);
            if n > 1 && (n - 1).div_ceil(SGES_PER_UNIT as u32) + 1 > units {
                return Err(range("nsge", h.nsge));
            }
            let rest = ext
                .get(..(n as usize).saturating_sub(1) * SGE_BYTES)
                .unwrap_or_default();
            Ok(Sges::Wire {
                n: h.nsge,
                first: h.local,
                rest,
            })
        };
        let data = || -> Result<Data<'a>, ParseError> {
            if h.flags & flags::INLINE == 0 {
                return sges().map(Data::Gather);
            }
            let len = h.length as usize;
            if len.div_ceil(UNIT) as u32 + 1 != units && !(len == 0 && units == 1) {
                return Err(range(INLINE_LENGTH, h.length));
            }
            Ok(Data::Inline(ext.get(..len).unwrap_or_default()))
        };
        let remote = Remote {
            addr: h.remote_addr,
            rkey: h.rkey,
        };
        let body = match kind {
            NativeOp::Nop => WqeBody::Nop,
            NativeOp::Write | NativeOp::WriteImm => WqeBody::Write {
                remote,
                imm: (kind == NativeOp::WriteImm).then_some(h.imm),
                data: data()?,
            },
            NativeOp::Send | NativeOp::SendImm => WqeBody::Send {
                imm: (kind == NativeOp::SendImm).then_some(h.imm),
                data: data()?,
            },
            NativeOp::Read => WqeBody::Read {
                remote,
                sges: sges()?,
            },
            NativeOp::CompSwap
            | NativeOp::FetchAdd
            | NativeOp::MaskedCompSwap
            | NativeOp::MaskedFetchAdd => {
                let masked = matches!(kind, NativeOp::MaskedCompSwap | NativeOp::MaskedFetchAdd);
                if !(h.width == 8 || (masked && h.width == 4)) {
                    return Err(range("width", h.width));
                }
                if h.nsge != 1 {
                    return Err(range("nsge", h.nsge));
                }
                let op = match kind {
                    NativeOp::CompSwap => AtomicOp::CompareSwap {
                        compare: h.op0,
                        swap: h.op1,
                    },
                    NativeOp::FetchAdd => AtomicOp::FetchAdd { add: h.op0 },
                    NativeOp::MaskedCompSwap => {
                        let mask = |r: core::ops::Range<usize>| {
                            ext.get(r)
                                .and_then(|b| b.try_into().ok())
                                .map(u64::from_le_bytes)
                        };
                        let (Some(compare_mask), Some(swap_mask)) = (mask(0..8), mask(8..16))
                        else {
                            return Err(ParseError::Layout {
                                what: "masked compare-swap without its mask unit",
                            });
                        };
                        AtomicOp::MaskedCompareSwap {
                            compare: h.op0,
                            compare_mask,
                            swap: h.op1,
                            swap_mask,
                        }
                    }
                    _ => AtomicOp::MaskedFetchAdd {
                        add: h.op0,
                        field_boundary: h.op1,
                    },
                };
                WqeBody::Atomic {
                    remote,
                    local_addr: h.local.addr,
                    lkey: h.local.lkey,
                    width: h.width,
                    op,
                }
            }
        };
        Ok(Self {
            body,
            flags: fl,
            units: h.units,
            counter: h.counter,
        })
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::Native;
    use core::cell::Cell;
    use gda_hal::{Provider, SqPos, WqHandle};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    use std::string::ToString;
    use std::vec;
    use std::vec::Vec;

    const CASES: u32 = 4096;

    /// An owned request: kind, remote, imm, inline bytes, gather list, atomic operands.
    type Owned = (u8, Remote, Option<u32>, Vec<u8>, Vec<Sge>, [u64; 4], bool);

    fn owned() -> impl Strategy<Value = Owned> {
        let sge = (
            any::<u64>(),
            prop_oneof![Just(0u32), any::<u32>()],
            any::<u32>(),
        )
            .prop_map(|(addr, length, lkey)| Sge { addr, length, lkey });
        (
            0u8..9,
            (any::<u64>(), any::<u32>()).prop_map(|(addr, rkey)| Remote { addr, rkey }),
            any::<Option<u32>>(),
            proptest::collection::vec(any::<u8>(), 0..=960),
            proptest::collection::vec(sge, 0..=20),
            any::<[u64; 4]>(),
            any::<bool>(),
        )
    }

    fn request(o: &Owned) -> WorkRequest<'_> {
        let (kind, remote, imm, inline, sges, [a, b, c, d], narrow) = o;
        let (remote, imm) = (*remote, *imm);
        let local = Sge {
            addr: *a ^ *d,
            length: 8,
            lkey: *c as u32,
        };
        let payload = |i: bool| {
            if i {
                Payload::Inline(inline)
            } else {
                Payload::Sges(sges)
            }
        };
        let (a, b, c, d) = (*a, *b, *c, *d);
        let masked = if *narrow { 4 } else { 8 };
        match kind {
            0 | 1 => WorkRequest::Write {
                remote,
                payload: payload(*kind == 0),
                imm,
            },
            2 | 3 => WorkRequest::Send {
                payload: payload(*kind == 2),
                imm,
            },
            4 => WorkRequest::Read { remote, sges },
            5 => WorkRequest::Atomic {
                remote,
                local,
                op: AtomicOp::CompareSwap {
                    compare: a,
                    swap: b,
                },
                bytes: 8,
            },
            6 => WorkRequest::Atomic {
                remote,
                local,
                op: AtomicOp::FetchAdd { add: a },
                bytes: 8,
            },
            7 => WorkRequest::Atomic {
                remote,
                local,
                op: AtomicOp::MaskedCompareSwap {
                    compare: a,
                    compare_mask: b,
                    swap: c,
                    swap_mask: d,
                },
                bytes: masked,
            },
            _ => WorkRequest::Atomic {
                remote,
                local,
                op: AtomicOp::MaskedFetchAdd {
                    add: a,
                    field_boundary: b,
                },
                bytes: masked,
            },
        }
    }

    fn runner() -> TestRunner {
        TestRunner::new(Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        })
    }

    /// `parse(emit(x)) == x` for every request the device functions accept, with the buffer
    /// pre-filled with junk (0xA5) so a byte `emit` leaves unwritten but `parse` reads shows.
    #[test]
    fn emit_then_parse_gives_the_same_repr() {
        let cases = Cell::new(0u32);
        runner()
            .run(
                &(owned(), any::<u32>(), any::<u32>()),
                |(o, fl, counter)| {
                    let wr = request(&o);
                    let repr =
                        WqeRepr::from_request(&wr, SendFlags::from_bits_truncate(fl), counter);
                    prop_assume!(repr.needed_units() <= MAX_UNITS);
                    let mut buf = vec![0xA5u8; MAX_UNITS as usize * UNIT];
                    let n = repr
                        .emit(&mut buf)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(n, usize::from(repr.units) * UNIT);
                    prop_assert_eq!(WqeRepr::parse(&buf[..n]), Ok(repr));
                    cases.set(cases.get() + 1);
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(cases.get(), CASES);
    }

    /// The two layers write the same bytes: `Native::post` into ring memory and
    /// [`WqeRepr::emit`] into a buffer, both pre-filled with junk.
    #[test]
    fn post_and_emit_write_the_same_bytes() {
        let cases = Cell::new(0u32);
        runner()
            .run(&(owned(), any::<u32>()), |(o, counter)| {
                let wr = request(&o);
                let mut ring = vec![[0xA5u8; UNIT]; MAX_UNITS as usize];
                let wq = WqHandle {
                    buf: ring.as_mut_ptr() as u64,
                    entries: MAX_UNITS,
                    max_inline: 960,
                    max_sge: 61,
                    ..WqHandle::default()
                };
                prop_assume!(Native::check(&wq, &wr).is_ok());
                // Position 0 of the ring (the counter only lands in the header).
                let at = SqPos {
                    unit: gda_hal::ProdIdx(counter & !(MAX_UNITS - 1)),
                    ..SqPos::ZERO
                };
                // SAFETY: the ring is ordinary memory of MAX_UNITS units owned here, and
                // `check` accepted the request.
                unsafe { Native::post(&wq, at, &wr, SendFlags::SIGNALED) };
                let repr = WqeRepr::from_request(&wr, SendFlags::SIGNALED, at.unit.0);
                let mut buf = vec![0xA5u8; MAX_UNITS as usize * UNIT];
                let n = repr
                    .emit(&mut buf)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&ring.as_flattened()[..n], &buf[..n]);
                cases.set(cases.get() + 1);
                Ok(())
            })
            .unwrap();
        assert_eq!(cases.get(), CASES);
    }

    /// Arbitrary bytes never make `parse` panic, and whatever it accepts survives a second
    /// round (`parse(emit(parse(b))) == parse(b)`).
    #[test]
    fn parse_of_arbitrary_bytes_never_panics() {
        let cases = Cell::new(0u32);
        let accepted = Cell::new(0u32);
        let bytes = proptest::collection::vec(any::<u8>(), 0..=MAX_UNITS as usize * UNIT + 8);
        // Headers that get past the first checks often: a valid opcode and unit count.
        let shaped = (bytes.clone(), 0u8..10, 1u8..=16, 0u8..16).prop_map(|(mut b, op, u, n)| {
            if b.len() >= UNIT {
                b[0] = op;
                b[3] = u;
                b[12] = n;
            }
            b
        });
        runner()
            .run(&prop_oneof![bytes, shaped], |b| {
                if let Ok(repr) = WqeRepr::parse(&b) {
                    accepted.set(accepted.get() + 1);
                    let mut again = vec![0xA5u8; MAX_UNITS as usize * UNIT];
                    let n = repr
                        .emit(&mut again)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(WqeRepr::parse(&again[..n]), Ok(repr));
                }
                cases.set(cases.get() + 1);
                Ok(())
            })
            .unwrap();
        assert_eq!(cases.get(), CASES);
        let accepted = accepted.get();
        assert!(accepted > CASES / 20, "only {accepted} inputs parsed");
    }

    #[test]
    fn errors_name_the_field() {
        let mut b = [0u8; 2 * UNIT];
        assert!(matches!(
            WqeRepr::parse(&b[..10]),
            Err(ParseError::Truncated { need: 64, .. })
        ));
        assert_eq!(
            WqeRepr::parse(&b),
            Err(ParseError::Range {
                field: "units",
                value: 0
            })
        );
        b[3] = 2;
        assert!(matches!(
            WqeRepr::parse(&b[..UNIT]),
            Err(ParseError::Truncated { need: 128, .. })
        ));
        b[0] = 0xee;
        assert_eq!(WqeRepr::parse(&b), Err(ParseError::UnknownOpcode(0xee)));
        b[0] = NativeOp::Write as u8;
        b[1] = flags::INLINE;
        b[8] = 65;
        assert_eq!(
            WqeRepr::parse(&b),
            Err(ParseError::Range {
                field: INLINE_LENGTH,
                value: 65
            })
        );
    }
}
