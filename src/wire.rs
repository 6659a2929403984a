//! `gda wire`: see and check what the NIC gets.
//!
//! `encode` turns one work request, written with the field names of rdma-core's
//! `struct ibv_send_wr` / `struct ibv_sge`, into the exact bytes gda's device functions put in
//! the send queue, the doorbell-record value and the 8-byte doorbell; `decode` turns WQE or CQE
//! bytes back into fields. Everything here is host-side glue around the provider's `wire` and
//! `device` modules; bad input is an [`WireError`], never a panic.

use serde::{Deserialize, Serialize};
use serde_json::Value;
#[cfg(any(feature = "mlx5", feature = "bnxt"))]
use serde_json::json;

/// What went wrong with a `gda wire` request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The input is not valid JSON for a work request.
    #[error("invalid work request JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A field has an impossible value.
    #[error("invalid work request: {0}")]
    Invalid(String),
    /// The provider refused the request (too long, too many SGEs, …).
    #[error("request cannot be posted: {0}")]
    Post(#[from] gda_hal::PostError),
    /// The bytes are not hex.
    #[error("input is not hex: {0}")]
    Hex(#[from] hex::FromHexError),
    /// The bytes are not a valid structure.
    #[error("cannot decode: {0}")]
    Decode(String),
    /// The provider is not compiled into this binary or does not exist.
    #[error("provider {0:?} is not available in this build (available: {1})")]
    Provider(String, &'static str),
    /// The chosen implementation cannot encode this (`--impl device`).
    #[error("{0}")]
    Impl(String),
}

impl gda_hal::Error for WireError {
    fn kind(&self) -> gda_hal::ErrorKind {
        use gda_hal::ErrorKind;
        match self {
            Self::Json(_) | Self::Invalid(_) | Self::Hex(_) => ErrorKind::InvalidArgument,
            Self::Post(e) => gda_hal::Error::kind(e),
            Self::Decode(_) => ErrorKind::Malformed,
            Self::Provider(..) | Self::Impl(_) => ErrorKind::Unsupported,
        }
    }
}

/// Providers `gda wire` can speak in this build.
pub const PROVIDERS: &str = match (cfg!(feature = "mlx5"), cfg!(feature = "bnxt")) {
    (true, true) => "mlx5, bnxt",
    (true, false) => "mlx5",
    (false, true) => "bnxt",
    (false, false) => "none",
};

/// `struct ibv_sge`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SgeJson {
    /// Local address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// One work request in `ibv_send_wr` terms plus the queue state it is posted on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrJson {
    /// `RDMA_WRITE`, `RDMA_WRITE_WITH_IMM`, `SEND`, `SEND_WITH_IMM`, `RDMA_READ`,
    /// `ATOMIC_CMP_AND_SWP`, `ATOMIC_FETCH_AND_ADD`, `MASKED_CMP_AND_SWP`,
    /// `MASKED_FETCH_AND_ADD`, `NOP`.
    pub opcode: String,
    /// `SIGNALED`, `FENCE`, `SOLICITED`, `INLINE`.
    #[serde(default)]
    pub send_flags: Vec<String>,
    /// QP number (24 bits).
    pub qp_num: u32,
    /// WQEBBs in the send ring (power of two).
    pub sq_wqe_cnt: u32,
    /// WQEBB producer counter before this request.
    #[serde(default)]
    pub cur_post: u32,
    /// Gather list.
    #[serde(default)]
    pub sg_list: Vec<SgeJson>,
    /// Remote address.
    #[serde(default)]
    pub remote_addr: u64,
    /// Remote key.
    #[serde(default)]
    pub rkey: u32,
    /// `ibv_send_wr.imm_data` as the integer the field holds (already network order).
    #[serde(default)]
    pub imm_data: u32,
    /// Compare value (CS) or addend (FA).
    #[serde(default)]
    pub compare_add: u64,
    /// Swap value (CS).
    #[serde(default)]
    pub swap: u64,
    /// Masked CS: compare mask (default all ones). Masked FA: unused.
    #[serde(default)]
    pub compare_mask: Option<u64>,
    /// Masked CS: swap mask (default all ones). Masked FA: field boundary (default 0).
    #[serde(default)]
    pub swap_mask: Option<u64>,
    /// Masked atomics: operand width, 4 or 8 (default 8).
    #[serde(default)]
    pub atomic_bytes: Option<u32>,
    /// Inline payload as hex (implies `INLINE`).
    #[serde(default)]
    pub inline_data: Option<String>,
    /// QP's max inline bytes (default: the format's maximum).
    #[serde(default)]
    pub max_inline_data: Option<u32>,
    /// QP's max gather entries (default 30 for mlx5, 6 for bnxt).
    #[serde(default)]
    pub max_send_sge: Option<u32>,
    /// bnxt: WQE mode, `"static"` (default; 8 slots per WQE, `sq_wqe_cnt`/`cur_post` count
    /// WQEs), `"variable"` (they count 16-byte slots) or `"fixed3"` (3 slots per WQE, they count
    /// WQEs).
    #[serde(default)]
    pub wqe_mode: Option<String>,
    /// bnxt: fill the Thor2 MSN table (default true); false fills `bnxt_re_psns` entries.
    #[serde(default)]
    pub msn_table: Option<bool>,
    /// bnxt without the MSN table: 16-byte P5/P7 `bnxt_re_psns_ext` entries (default false).
    #[serde(default)]
    pub psn_ext: Option<bool>,
    /// bnxt: the WQE's start PSN (the QP's `sq_psn` before the post; default 0).
    #[serde(default)]
    pub sq_psn: Option<u32>,
    /// bnxt: path MTU in bytes, 256..=4096 (default 1024).
    #[serde(default)]
    pub path_mtu: Option<u32>,
    /// bnxt: the message counter before the post (MSN-table index; default 0).
    #[serde(default)]
    pub msn: Option<u32>,
}

/// Opcode names `encode` accepts, for `--help`.
pub const OPCODES: &str = "RDMA_WRITE, RDMA_WRITE_WITH_IMM, SEND, SEND_WITH_IMM, RDMA_READ, \
ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD (8-byte), MASKED_CMP_AND_SWP and MASKED_FETCH_AND_ADD \
(4- or 8-byte by \"atomic_bytes\"; masked CS uses \"compare_mask\"/\"swap_mask\", masked FA uses \
\"swap_mask\" as the field boundary), NOP";

fn provider_check(provider: &str) -> Result<(), WireError> {
    match provider {
        "mlx5" if cfg!(feature = "mlx5") => Ok(()),
        "bnxt" if cfg!(feature = "bnxt") => Ok(()),
        _ => Err(WireError::Provider(provider.to_owned(), PROVIDERS)),
    }
}

/// Whose code encodes (`gda wire encode --impl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Impl {
    /// gda's Rust device functions.
    #[default]
    Rust,
    /// The GPU device API's C++ headers (`device/include/gda`), compiled for the host
    /// (`device` feature).
    Device,
}

/// Encodes one JSON work request with gda's Rust device functions; returns the JSON report.
pub fn encode(provider: &str, input: &str) -> Result<Value, WireError> {
    encode_with(provider, Impl::Rust, input)
}

/// Encodes one JSON work request with `imp`'s code; returns the JSON report (the same
/// fields whoever encodes).
pub fn encode_with(provider: &str, imp: Impl, input: &str) -> Result<Value, WireError> {
    provider_check(provider)?;
    if imp == Impl::Device && !cfg!(feature = "device") {
        return Err(WireError::Impl(
            "--impl device needs a gda built with the `device` feature (cargo build --release --features device)".into(),
        ));
    }
    let wr: WrJson = serde_json::from_str(input)?;
    #[cfg(not(any(feature = "mlx5", feature = "bnxt")))]
    let _ = (&wr, imp);
    match provider {
        #[cfg(feature = "mlx5")]
        "mlx5" => mlx5::encode(&wr, imp),
        #[cfg(feature = "bnxt")]
        "bnxt" => bnxt::encode(&wr, imp),
        _ => Err(WireError::Provider(provider.to_owned(), PROVIDERS)),
    }
}

/// What `decode` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// A send WQE (ring order, unwrapped).
    Wqe,
    /// A CQE (mlx5: 64 or 128 bytes; bnxt: 32).
    Cqe,
}

/// Decodes hex bytes of a WQE or CQE; returns the JSON report. `wqe_mode` is bnxt's WQE mode
/// (`static`, `variable`, `fixed3`).
pub fn decode(provider: &str, kind: Kind, wqe_mode: &str, input: &str) -> Result<Value, WireError> {
    provider_check(provider)?;
    let clean: String = input
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    let clean = clean.strip_prefix("0x").unwrap_or(&clean);
    let bytes = hex::decode(clean)?;
    let _ = (wqe_mode, &bytes, kind);
    match (provider, kind) {
        #[cfg(feature = "mlx5")]
        ("mlx5", Kind::Wqe) => mlx5::decode_wqe(&bytes),
        #[cfg(feature = "mlx5")]
        ("mlx5", Kind::Cqe) => mlx5::decode_cqe(&bytes),
        #[cfg(feature = "bnxt")]
        ("bnxt", Kind::Wqe) => bnxt::decode_wqe(&bytes, wqe_mode),
        #[cfg(feature = "bnxt")]
        ("bnxt", Kind::Cqe) => bnxt::decode_cqe(&bytes),
        _ => Err(WireError::Provider(provider.to_owned(), PROVIDERS)),
    }
}

/// Request parsing shared by every provider's encoder.
#[cfg(any(feature = "mlx5", feature = "bnxt"))]
mod common {
    use super::*;
    use gda_hal::{AtomicOp, Payload, Remote, SendFlags, Sge, WorkRequest};

    pub(super) fn flags(names: &[String]) -> Result<SendFlags, WireError> {
        let mut f = SendFlags::empty();
        for n in names {
            f |= match n.trim_start_matches("IBV_SEND_") {
                "SIGNALED" => SendFlags::SIGNALED,
                "FENCE" => SendFlags::FENCE,
                "SOLICITED" => SendFlags::SOLICITED,
                "INLINE" => SendFlags::INLINE,
                other => {
                    return Err(WireError::Invalid(format!(
                        "unknown send flag {other:?} (SIGNALED, FENCE, SOLICITED, INLINE)"
                    )));
                }
            };
        }
        Ok(f)
    }

    /// Flags, inline bytes and gather list of a request.
    pub(super) struct Parsed {
        pub flags: SendFlags,
        pub inline: Option<Vec<u8>>,
        pub sges: Vec<Sge>,
    }

    impl Parsed {
        pub(super) fn new(wr: &WrJson) -> Result<Self, WireError> {
            let mut fl = flags(&wr.send_flags)?;
            let inline = match &wr.inline_data {
                Some(h) => {
                    fl |= SendFlags::INLINE;
                    Some(hex::decode(h.trim_start_matches("0x"))?)
                }
                None => None,
            };
            if fl.contains(SendFlags::INLINE) && inline.is_none() {
                return Err(WireError::Invalid(
                    "INLINE needs \"inline_data\" (hex) — this tool cannot read sg_list addresses"
                        .into(),
                ));
            }
            let sges: Vec<Sge> = wr
                .sg_list
                .iter()
                .map(|s| Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                })
                .collect();
            Ok(Self {
                flags: fl,
                inline,
                sges,
            })
        }
    }

    /// Checks the fields every provider needs: ring size (a power of two up to `max`) and QP
    /// number.
    pub(super) fn check_queue(wr: &WrJson, max: u32, what: &str) -> Result<(), WireError> {
        if !wr.sq_wqe_cnt.is_power_of_two() {
            return Err(WireError::Invalid(format!(
                "sq_wqe_cnt {} is not a power of two",
                wr.sq_wqe_cnt
            )));
        }
        if wr.sq_wqe_cnt > max {
            return Err(WireError::Invalid(format!(
                "sq_wqe_cnt {} is larger than any {what} send queue",
                wr.sq_wqe_cnt
            )));
        }
        if wr.qp_num > 0x00ff_ffff {
            return Err(WireError::Invalid(format!(
                "qp_num {:#x} does not fit in 24 bits",
                wr.qp_num
            )));
        }
        Ok(())
    }

    /// Inline payload as JSON.
    pub(super) fn inline_json(d: &[u8]) -> Value {
        json!({ "inline_data": hex::encode(d), "length": d.len() })
    }

    /// A gather list as JSON (`ibv_sge` field names).
    pub(super) fn sges_json(l: impl Iterator<Item = Sge>) -> Value {
        json!(
            l.map(|s| json!({"addr": s.addr, "length": s.length, "lkey": s.lkey}))
                .collect::<Vec<_>>()
        )
    }

    /// A work completion as JSON (`ibv_wc` terms).
    pub(super) fn wc_json(wc: &gda_hal::WorkCompletion) -> Value {
        json!({
            "status": format!("{:?}", wc.status),
            "status_raw": wc.status.as_raw(),
            "status_str": wc.status.as_str(),
            "opcode": format!("{:?}", wc.opcode),
            "byte_len": wc.byte_len,
            "imm_data": wc.imm,
            "qp_num": wc.qpn,
        })
    }

    /// The work request `wr` describes.
    pub(super) fn request<'a>(wr: &WrJson, p: &'a Parsed) -> Result<WorkRequest<'a>, WireError> {
        let (inline, sges) = (&p.inline, &p.sges);
        let remote = Remote {
            addr: wr.remote_addr,
            rkey: wr.rkey,
        };
        let payload = match &inline {
            Some(d) => Payload::Inline(d),
            None => Payload::Sges(sges),
        };
        let imm = u32::from_be(wr.imm_data);
        let one_sge = || -> Result<Sge, WireError> {
            match sges.as_slice() {
                [s] => Ok(*s),
                _ => Err(WireError::Invalid(format!(
                    "{} needs exactly one sg_list entry for the result",
                    wr.opcode
                ))),
            }
        };
        let no_inline = |what: &str| -> Result<(), WireError> {
            if inline.is_some() {
                Err(WireError::Invalid(format!("{what} has no inline form")))
            } else {
                Ok(())
            }
        };
        let req = match wr.opcode.trim_start_matches("IBV_WR_") {
            "RDMA_WRITE" => WorkRequest::Write {
                remote,
                payload,
                imm: None,
            },
            "RDMA_WRITE_WITH_IMM" => WorkRequest::Write {
                remote,
                payload,
                imm: Some(imm),
            },
            "SEND" => WorkRequest::Send { payload, imm: None },
            "SEND_WITH_IMM" => WorkRequest::Send {
                payload,
                imm: Some(imm),
            },
            "RDMA_READ" => {
                no_inline("RDMA_READ")?;
                WorkRequest::Read { remote, sges }
            }
            "ATOMIC_CMP_AND_SWP" => {
                no_inline("an atomic")?;
                WorkRequest::Atomic {
                    remote,
                    local: one_sge()?,
                    op: AtomicOp::CompareSwap {
                        compare: wr.compare_add,
                        swap: wr.swap,
                    },
                    bytes: 8,
                }
            }
            "ATOMIC_FETCH_AND_ADD" => {
                no_inline("an atomic")?;
                WorkRequest::Atomic {
                    remote,
                    local: one_sge()?,
                    op: AtomicOp::FetchAdd {
                        add: wr.compare_add,
                    },
                    bytes: 8,
                }
            }
            "MASKED_CMP_AND_SWP" => {
                no_inline("an atomic")?;
                let op = AtomicOp::MaskedCompareSwap {
                    compare: wr.compare_add,
                    compare_mask: wr.compare_mask.unwrap_or(u64::MAX),
                    swap: wr.swap,
                    swap_mask: wr.swap_mask.unwrap_or(u64::MAX),
                };
                WorkRequest::Atomic {
                    remote,
                    local: one_sge()?,
                    op,
                    bytes: wr.atomic_bytes.unwrap_or(8),
                }
            }
            "MASKED_FETCH_AND_ADD" => {
                no_inline("an atomic")?;
                let op = AtomicOp::MaskedFetchAdd {
                    add: wr.compare_add,
                    field_boundary: wr.swap_mask.unwrap_or(0),
                };
                WorkRequest::Atomic {
                    remote,
                    local: one_sge()?,
                    op,
                    bytes: wr.atomic_bytes.unwrap_or(8),
                }
            }
            "NOP" => WorkRequest::Nop,
            other => {
                return Err(WireError::Invalid(format!(
                    "unknown opcode {other:?}; known: {OPCODES}"
                )));
            }
        };
        Ok(req)
    }
}

#[cfg(feature = "mlx5")]
mod mlx5 {
    use super::*;
    use gda_hal::{Provider, SqPos, WqHandle};
    use gda_mlx5::Mlx5;
    use gda_mlx5::wire::{CqeRepr, PayloadRepr, WqeRepr};

    pub(super) fn encode(wr: &WrJson, imp: Impl) -> Result<Value, WireError> {
        common::check_queue(wr, 1 << 20, "mlx5")?;
        let parsed = common::Parsed::new(wr)?;
        let fl = parsed.flags;
        let req = common::request(wr, &parsed)?;
        let mut ring = vec![[0u64; 8]; wr.sq_wqe_cnt as usize];
        let mut dbrec = [0u32; 2];
        let mut db = [0u64; 1];
        let wq = gda_mlx5::Mlx5Sq {
            wq: WqHandle {
                buf: ring.as_mut_ptr() as u64,
                dbrec: dbrec.as_mut_ptr() as u64,
                db: db.as_mut_ptr() as u64,
                entries: wr.sq_wqe_cnt,
                stride: 0,
                qpn: wr.qp_num,
                max_inline: wr.max_inline_data.unwrap_or(Mlx5::MAX_INLINE_BYTES),
                max_sge: wr.max_send_sge.unwrap_or(30),
            },
            bf_size: 0,
        };
        let units = Mlx5::check(&wq, &req)?.units;
        // SAFETY: the ring, record and doorbell stand-in are owned here; `check` accepted the
        // request, so it fits the ring.
        let posted = unsafe {
            match imp {
                #[cfg(feature = "device")]
                Impl::Device => gda_device::post_ring(&wq, wr.cur_post, &req, fl.bits(), false).0,
                _ => {
                    let p = Mlx5::post(&wq, SqPos::at_unit(wr.cur_post), &req, fl);
                    Mlx5::ring_sq(&wq, &p);
                    p
                }
            }
        };
        let bytes: &[u8] = bytemuck::cast_slice(&ring);
        let mut wqe = Vec::new();
        for i in 0..units {
            let slot = (wr.cur_post.wrapping_add(i) & (wr.sq_wqe_cnt - 1)) as usize;
            wqe.extend_from_slice(&bytes[slot * 64..slot * 64 + 64]);
        }
        let ds = gda_mlx5::device::ds_for(&req);
        Ok(json!({
            "provider": "mlx5",
            "wqe": hex::encode(&wqe),
            "wqe_ds": ds,
            "wqebbs": units,
            "slot": wr.cur_post & (wr.sq_wqe_cnt - 1),
            "wqe_index": wr.cur_post & 0xffff,
            "dbrec_snd": u32::from_be(dbrec[1]),
            "dbrec_bytes": hex::encode(dbrec[1].to_ne_bytes()),
            "doorbell": hex::encode(db[0].to_ne_bytes()),
            "cur_post": posted.next.unit.0,
        }))
    }

    pub(super) fn decode_wqe(bytes: &[u8]) -> Result<Value, WireError> {
        let w = WqeRepr::parse(bytes).map_err(|e| WireError::Decode(e.to_string()))?;
        let payload = match w.payload {
            PayloadRepr::None => Value::Null,
            PayloadRepr::Inline(d) => common::inline_json(d),
            PayloadRepr::Sges(l) => common::sges_json(l.iter()),
        };
        let atomic = w
            .atomic
            .map(|a| json!({ "op": format!("{:?}", a.op), "bytes": a.bytes }));
        Ok(json!({
            "opcode": format!("{:?}", w.ctrl.opcode),
            "opcode_raw": w.ctrl.opcode.raw(),
            "opmod": w.ctrl.opmod,
            "wqe_index": w.ctrl.wqe_index,
            "qp_num": w.ctrl.qpn,
            "ds": w.ctrl.ds,
            "signaled": w.ctrl.signaled(),
            "fence": w.ctrl.fenced(),
            "solicited": w.ctrl.solicited(),
            "fm_ce_se": w.ctrl.fm_ce_se,
            "imm": w.ctrl.imm,
            "remote_addr": w.raddr.map(|r| r.addr),
            "rkey": w.raddr.map(|r| r.rkey),
            "atomic": atomic,
            "payload": payload,
            "ignored_trailing_bytes": bytes.len() - usize::from(w.ctrl.ds) * 16,
        }))
    }

    pub(super) fn decode_cqe(bytes: &[u8]) -> Result<Value, WireError> {
        // A 128-byte CQE carries the cqe64 in its second half.
        let raw = match bytes.len() {
            64 => bytes,
            128 => &bytes[64..],
            n => {
                return Err(WireError::Decode(format!(
                    "a CQE is 64 or 128 bytes, got {n}"
                )));
            }
        };
        let c: gda_mlx5::wire::Cqe64 = bytemuck::pod_read_unaligned(raw);
        let r = CqeRepr::parse(&c).map_err(|e| WireError::Decode(e.to_string()))?;
        let wc = r.completion();
        Ok(json!({
            "opcode": format!("{:?}", r.opcode),
            "owner": r.owner,
            "format": r.format,
            "solicited": r.se,
            "wqe_opcode": format!("{:?}", r.wqe_opcode),
            "qp_num": r.qpn,
            "wqe_counter": r.wqe_counter,
            "byte_cnt": r.byte_cnt,
            "imm": r.imm,
            "syndrome": r.error.map(|(s, _)| format!("{s:?}")),
            "vendor_err": r.error.map(|(_, v)| v),
            "wc": common::wc_json(&wc),
        }))
    }
}

#[cfg(feature = "bnxt")]
mod bnxt {
    use super::*;
    use gda_bnxt::wire::{Cqe32, CqeRepr, SendWqe, WqePayload};
    use gda_bnxt::{Bnxt, Mode, PsnForm, WqeMode};
    use gda_hal::{ProdIdx, Provider, SqPos, WqHandle};

    fn wqe_mode(name: &str) -> Result<WqeMode, WireError> {
        match name {
            "static" => Ok(WqeMode::Static),
            "variable" => Ok(WqeMode::Variable),
            "fixed3" => Ok(WqeMode::Fixed3),
            other => Err(WireError::Invalid(format!(
                "unknown wqe_mode {other:?} (static, variable, fixed3)"
            ))),
        }
    }

    pub(super) fn encode(wr: &WrJson, imp: Impl) -> Result<Value, WireError> {
        common::check_queue(wr, 1 << 16, "bnxt")?;
        let mode = Mode {
            wqe: wqe_mode(wr.wqe_mode.as_deref().unwrap_or("static"))?,
            psn: match (wr.msn_table.unwrap_or(true), wr.psn_ext.unwrap_or(false)) {
                (true, false) => PsnForm::Msn,
                (true, true) => {
                    return Err(WireError::Invalid(
                        "psn_ext applies only without the MSN table (\"msn_table\": false)".into(),
                    ));
                }
                (false, false) => PsnForm::Legacy,
                (false, true) => PsnForm::Ext,
            },
        };
        let mtu = wr.path_mtu.unwrap_or(1024);
        if !mtu.is_power_of_two() || !(256..=4096).contains(&mtu) {
            return Err(WireError::Invalid(format!(
                "path_mtu {mtu} must be 256, 512, 1024, 2048 or 4096"
            )));
        }
        let psn = wr.sq_psn.unwrap_or(0);
        if psn > 0x00ff_ffff {
            return Err(WireError::Invalid(format!(
                "sq_psn {psn:#x} does not fit in 24 bits"
            )));
        }
        let parsed = common::Parsed::new(wr)?;
        let req = common::request(wr, &parsed)?;
        let entries = wr.sq_wqe_cnt;
        let slots = mode.ring_slots(entries) as usize;
        let table = mode.psn_entries(entries) as usize * mode.psn.entry_bytes() as usize;
        // 16-byte aligned, as a real ring is (the device API stores whole slots).
        let mut words = vec![0u128; (slots * 16 + table).div_ceil(16)];
        let base = words.as_mut_ptr() as u64;
        let mut db = [0u64; 1];
        let wq = gda_bnxt::BnxtSq::new(
            WqHandle {
                buf: base,
                db: db.as_mut_ptr() as u64,
                entries,
                qpn: wr.qp_num,
                max_inline: wr.max_inline_data.unwrap_or(Bnxt::MAX_INLINE_BYTES),
                max_sge: wr.max_send_sge.unwrap_or(gda_bnxt::device::MAX_SGE),
                ..WqHandle::default()
            },
            mode,
            base + slots as u64 * 16,
            mode.psn_entries(entries),
            mtu,
            0,
        )?;
        let cost = Bnxt::check(&wq, &req)?;
        let at = SqPos {
            unit: ProdIdx(wr.cur_post),
            msg: wr.msn.unwrap_or(0),
            psn,
        };
        // SAFETY: the ring, table and doorbell stand-in are owned here; `check` accepted the
        // request, so it fits.
        let posted = unsafe {
            match imp {
                #[cfg(feature = "device")]
                Impl::Device => gda_device::bnxt::post_ring(&wq, at, &req, parsed.flags.bits())
                    .ok_or(WireError::Post(gda_hal::PostError::Unsupported))?,
                _ => {
                    let p = Bnxt::post(&wq, at, &req, parsed.flags);
                    Bnxt::ring_sq(&wq, &p);
                    p
                }
            }
        };
        let mem: &[u8] = bytemuck::cast_slice(&words);
        let spu = mode.wqe.slots_per_unit() as usize;
        let first = (wr.cur_post & (entries - 1)) as usize * spu;
        let used = match mode.wqe {
            WqeMode::Variable => cost.units as usize,
            _ => SendWqe::size_in_slots(&mem[first * 16..]).unwrap_or(0) as usize,
        };
        let mut wqe = Vec::new();
        for k in 0..used {
            let s = (first + k) % slots;
            wqe.extend_from_slice(&mem[s * 16..s * 16 + 16]);
        }
        let (off, entry) = Bnxt::psn_entry(&wq, at, cost.packets, gda_hal::WcOpcode::Other);
        let eb = mode.psn.entry_bytes() as usize;
        let e = &mem[slots * 16 + off as usize..slots * 16 + off as usize + eb];
        let dbv = u64::from_le_bytes(posted.doorbell);
        Ok(json!({
            "provider": "bnxt",
            "wqe_mode": mode.wqe.name(),
            "psn_table": mode.psn.name(),
            "wqe": hex::encode(&wqe),
            "wqe_size": used,
            "slot": first,
            "units": cost.units,
            "packets": cost.packets,
            "psn_entry": hex::encode(e),
            "psn_index": off / eb as u64,
            "start_psn": entry.start,
            "next_psn": entry.next,
            "doorbell": hex::encode(db[0].to_ne_bytes()),
            "doorbell_value": format!("{dbv:#018x}"),
            "epoch": Bnxt::epoch(entries, posted.next.unit.0),
            "cur_post": posted.next.unit.0,
            "msn": posted.next.msg,
        }))
    }

    pub(super) fn decode_wqe(bytes: &[u8], mode: &str) -> Result<Value, WireError> {
        let w =
            SendWqe::parse(bytes, wqe_mode(mode)?).map_err(|e| WireError::Decode(e.to_string()))?;
        let payload = match w.payload {
            WqePayload::Inline(d) => common::inline_json(d),
            WqePayload::Sges(l) => common::sges_json(l.iter()),
        };
        let f = w.hdr.flags;
        use gda_bnxt::wire::sqe::flags;
        Ok(json!({
            "wqe_type": format!("{:?}", w.hdr.wqe_type),
            "wqe_type_raw": w.hdr.wqe_type.raw(),
            "wqe_size": w.hdr.wqe_size,
            "signaled": f & flags::SIGNALED != 0,
            "fence": f & (flags::UC_FENCE | flags::RD_FENCE) != 0,
            "solicited": f & flags::SE != 0,
            "inline": f & flags::INLINE != 0,
            "length": w.length(),
            "imm": w.imm,
            "remote_addr": w.remote.map(|r| r.addr),
            "rkey": w.remote.map(|r| r.rkey),
            "atomic": w.atomic.map(|a| format!("{a:?}")),
            "payload": payload,
            "ignored_trailing_bytes": bytes.len() - usize::from(w.hdr.wqe_size) * 16,
        }))
    }

    pub(super) fn decode_cqe(bytes: &[u8]) -> Result<Value, WireError> {
        if bytes.len() != 32 {
            return Err(WireError::Decode(format!(
                "a bnxt CQE is 32 bytes, got {}",
                bytes.len()
            )));
        }
        let c: Cqe32 = bytemuck::pod_read_unaligned(bytes);
        let r = CqeRepr::parse(&c);
        let wc = Bnxt::decode(&c);
        Ok(json!({
            "cqe_type": format!("{:?}", r.cqe_type),
            "phase": r.phase,
            "status_raw": r.status,
            "flags": r.flags,
            "body": format!("{:?}", r.body),
            "wc": common::wc_json(&wc),
            "con_indx": (!wc.is_recv).then_some(wc.wqe_counter),
        }))
    }
}
