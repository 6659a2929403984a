//! 64-byte CQE (`struct mlx5_cqe64`) and its error overlay (`struct mlx5_err_cqe`),
//! nic-formats.md §C.2–C.5. All multi-byte fields are big-endian.

use bytemuck::{Pod, Zeroable};
use gda_hal::{Be16, Be32, Be64, WcOpcode, WcStatus, WorkCompletion};

use super::{CqeOpcode, Opcode, ParseError, Syndrome};

/// Bytes of a CQE.
pub const CQE_BYTES: usize = 64;
/// `op_own` of a slot software has invalidated (opcode INVALID, owner 0), as rdma-core
/// initialises every CQE.
pub const OP_OWN_INVALID: u8 = 0xf0;
/// Offset of the CQE's tail word (`sop_drop_qpn`, `wqe_counter`, `signature`, `op_own`): the
/// aligned 8 bytes that identify a completion, written by the device as one unit.
pub const TAIL_OFFSET: usize = field::SOP_DROP_QPN;

/// Byte offsets of the fields the view layer reads.
pub mod field {
    /// srqn / user index (BE32; error CQE: srqn).
    pub const SRQN_UIDX: usize = 32;
    /// Immediate / invalidated rkey (BE32).
    pub const IMM_INVAL_PKEY: usize = 36;
    /// Byte count (BE32).
    pub const BYTE_CNT: usize = 44;
    /// Error CQE: vendor syndrome.
    pub const VENDOR_ERR_SYND: usize = 54;
    /// Error CQE: syndrome.
    pub const SYNDROME: usize = 55;
    /// WQE opcode (31..24) | QPN (23..0), BE32.
    pub const SOP_DROP_QPN: usize = 56;
    /// WQE counter (BE16).
    pub const WQE_COUNTER: usize = 60;
    /// Signature.
    pub const SIGNATURE: usize = 62;
    /// opcode (7..4) | format (3..2) | solicited (1) | owner (0).
    pub const OP_OWN: usize = 63;
}

/// `op_own` sub-fields.
pub mod op_own {
    /// CQE opcode shift.
    pub const OPCODE_SHIFT: u8 = 4;
    /// Format field shift (0 normal, 1/2 scatter, 3 compressed).
    pub const FORMAT_SHIFT: u8 = 2;
    /// Format mask after shifting.
    pub const FORMAT_MASK: u8 = 0x3;
    /// Solicited-event bit.
    pub const SE: u8 = 0x02;
    /// Owner bit.
    pub const OWNER: u8 = 0x01;
}

/// Layer 1: the 64-byte CQE. Ethernet-only fields are kept as raw bytes named by offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Cqe64 {
    /// Offsets 0..17: Ethernet / LRO / RSS fields (unused on RC).
    pub eth_0: [u8; 17],
    /// DLID path bits.
    pub ml_path: u8,
    /// Offsets 18..20: reserved.
    pub reserved_18: [u8; 2],
    /// Checksum (Ethernet).
    pub checksum: Be16,
    /// Source LID.
    pub slid: Be16,
    /// SL | GRH | remote QPN (UD).
    pub flags_rqpn: Be32,
    /// Checksum-ok flags (Ethernet).
    pub hds_ip_ext: u8,
    /// L3/L4 types (Ethernet).
    pub l4_hdr_type_etc: u8,
    /// VLAN (Ethernet).
    pub vlan_info: Be16,
    /// SRQ number or user index; error CQE: srqn.
    pub srqn_uidx: Be32,
    /// Immediate (bytes as sent), invalidated rkey, or P_Key index.
    pub imm_inval_pkey: Be32,
    /// Tag-matching app fields.
    pub app: [u8; 4],
    /// Bytes transferred.
    pub byte_cnt: Be32,
    /// Timestamp; in an error CQE bytes 54 and 55 are vendor syndrome and syndrome.
    pub timestamp: Be64,
    /// WQE opcode (requester) | QPN.
    pub sop_drop_qpn: Be32,
    /// WQE counter of the completed WQE.
    pub wqe_counter: Be16,
    /// Signature.
    pub signature: u8,
    /// opcode | format | SE | owner.
    pub op_own: u8,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Cqe64>() == CQE_BYTES);
    assert!(offset_of!(Cqe64, ml_path) == 17);
    assert!(offset_of!(Cqe64, checksum) == 20);
    assert!(offset_of!(Cqe64, slid) == 22);
    assert!(offset_of!(Cqe64, flags_rqpn) == 24);
    assert!(offset_of!(Cqe64, hds_ip_ext) == 28);
    assert!(offset_of!(Cqe64, l4_hdr_type_etc) == 29);
    assert!(offset_of!(Cqe64, vlan_info) == 30);
    assert!(offset_of!(Cqe64, srqn_uidx) == field::SRQN_UIDX);
    assert!(offset_of!(Cqe64, imm_inval_pkey) == field::IMM_INVAL_PKEY);
    assert!(offset_of!(Cqe64, app) == 40);
    assert!(offset_of!(Cqe64, byte_cnt) == field::BYTE_CNT);
    assert!(offset_of!(Cqe64, timestamp) == 48);
    assert!(offset_of!(Cqe64, sop_drop_qpn) == field::SOP_DROP_QPN);
    assert!(offset_of!(Cqe64, wqe_counter) == field::WQE_COUNTER);
    assert!(offset_of!(Cqe64, signature) == field::SIGNATURE);
    assert!(offset_of!(Cqe64, op_own) == field::OP_OWN);
};

impl Default for Cqe64 {
    fn default() -> Self {
        let mut c = Self::zeroed();
        c.op_own = OP_OWN_INVALID;
        c
    }
}

impl Cqe64 {
    /// The CQE opcode.
    #[inline(always)]
    #[must_use]
    pub const fn opcode(&self) -> CqeOpcode {
        CqeOpcode::from_raw(self.op_own >> op_own::OPCODE_SHIFT)
    }

    /// The owner bit.
    #[inline(always)]
    #[must_use]
    pub const fn owner(&self) -> u8 {
        self.op_own & op_own::OWNER
    }

    /// Whether software owns this CQE at free-running consumer index `ci` of a ring with
    /// `log2_entries` slots: the opcode is not INVALID and the owner bit equals the pass parity.
    #[inline(always)]
    #[must_use]
    pub const fn sw_owned(op_own_byte: u8, ci: u32, log2_entries: u32) -> bool {
        (op_own_byte >> op_own::OPCODE_SHIFT) != CqeOpcode::Invalid.raw()
            && (op_own_byte & op_own::OWNER) as u32 == (ci >> log2_entries) & 1
    }

    /// Error CQE: vendor syndrome (byte 54).
    #[inline(always)]
    #[must_use]
    pub const fn vendor_err_synd(&self) -> u8 {
        self.timestamp.to_bytes()[field::VENDOR_ERR_SYND - 48]
    }

    /// Error CQE: syndrome (byte 55).
    #[inline(always)]
    #[must_use]
    pub const fn syndrome(&self) -> Syndrome {
        Syndrome::from_raw(self.timestamp.to_bytes()[field::SYNDROME - 48])
    }
}

/// Layer 2: what a CQE says, for the fields an RC data path uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqeRepr {
    /// CQE opcode.
    pub opcode: CqeOpcode,
    /// Owner bit.
    pub owner: u8,
    /// Format (0 normal, 1 32-B scatter, 2 64-B scatter, 3 compressed).
    pub format: u8,
    /// Solicited event.
    pub se: bool,
    /// Requester: the WQE opcode; error CQE: the failing WQE's opcode.
    pub wqe_opcode: Opcode,
    /// QP number.
    pub qpn: u32,
    /// WQE counter.
    pub wqe_counter: u16,
    /// Byte count (0 in error CQEs).
    pub byte_cnt: u32,
    /// Immediate / invalidated rkey (host-order value of the big-endian field).
    pub imm: u32,
    /// SRQ number / user index (24 bits).
    pub srqn: u32,
    /// Error CQEs: syndrome and vendor syndrome.
    pub error: Option<(Syndrome, u8)>,
}

impl CqeRepr {
    /// Decodes. Fails only for a compressed session header, which gda does not enable.
    pub fn parse(c: &Cqe64) -> Result<Self, ParseError> {
        let opcode = c.opcode();
        let format = (c.op_own >> op_own::FORMAT_SHIFT) & op_own::FORMAT_MASK;
        if format == 3 {
            return Err(ParseError::Unsupported {
                what: "compressed CQE session (mini-CQEs)",
            });
        }
        let sop = c.sop_drop_qpn.get();
        let is_err = matches!(opcode, CqeOpcode::ReqErr | CqeOpcode::RespErr);
        Ok(Self {
            opcode,
            owner: c.owner(),
            format,
            se: c.op_own & op_own::SE != 0,
            wqe_opcode: Opcode::from_raw((sop >> 24) as u8),
            qpn: sop & 0x00ff_ffff,
            wqe_counter: c.wqe_counter.get(),
            byte_cnt: if is_err { 0 } else { c.byte_cnt.get() },
            imm: c.imm_inval_pkey.get(),
            srqn: c.srqn_uidx.get() & 0x00ff_ffff,
            error: if is_err {
                Some((c.syndrome(), c.vendor_err_synd()))
            } else {
                None
            },
        })
    }

    /// Encodes (all other bytes zero) — what a device model writes.
    #[must_use]
    pub fn emit(&self) -> Cqe64 {
        let mut c = Cqe64::zeroed();
        c.op_own = (self.opcode.raw() << op_own::OPCODE_SHIFT)
            | ((self.format & op_own::FORMAT_MASK) << op_own::FORMAT_SHIFT)
            | if self.se { op_own::SE } else { 0 }
            | (self.owner & op_own::OWNER);
        c.sop_drop_qpn =
            Be32::new((u32::from(self.wqe_opcode.raw()) << 24) | (self.qpn & 0x00ff_ffff));
        c.wqe_counter = Be16::new(self.wqe_counter);
        c.imm_inval_pkey = Be32::new(self.imm);
        c.srqn_uidx = Be32::new(self.srqn & 0x00ff_ffff);
        match self.error {
            Some((syn, vendor)) => {
                let mut ts = [0u8; 8];
                ts[field::VENDOR_ERR_SYND - 48] = vendor;
                ts[field::SYNDROME - 48] = syn.raw();
                c.timestamp = Be64::from_bytes(ts);
            }
            None => c.byte_cnt = Be32::new(self.byte_cnt),
        }
        c
    }

    /// The work completion rdma-core's `mlx5_poll_cq` would report for this CQE (the fields
    /// gda keeps). Requester opcodes come from the WQE opcode in `sop_drop_qpn`.
    #[must_use]
    pub fn completion(&self) -> WorkCompletion {
        let mut wc = WorkCompletion {
            status: WcStatus::Success,
            opcode: WcOpcode::Other,
            wqe_counter: u32::from(self.wqe_counter),
            byte_len: 0,
            imm: None,
            qpn: self.qpn,
            vendor_err: 0,
            is_recv: false,
        };
        match self.opcode {
            CqeOpcode::Req => {
                wc.opcode = match self.wqe_opcode {
                    Opcode::RdmaWrite | Opcode::RdmaWriteImm => WcOpcode::RdmaWrite,
                    Opcode::Send | Opcode::SendImm | Opcode::SendInval => WcOpcode::Send,
                    Opcode::RdmaRead => WcOpcode::RdmaRead,
                    Opcode::AtomicCs | Opcode::AtomicMaskedCs => WcOpcode::CompSwap,
                    Opcode::AtomicFa | Opcode::AtomicMaskedFa => WcOpcode::FetchAdd,
                    _ => WcOpcode::Other,
                };
                wc.byte_len = match self.wqe_opcode {
                    Opcode::RdmaRead | Opcode::AtomicMaskedCs | Opcode::AtomicMaskedFa => {
                        self.byte_cnt
                    }
                    Opcode::AtomicCs | Opcode::AtomicFa => 8,
                    _ => 0,
                };
            }
            CqeOpcode::RespWrImm => {
                wc.opcode = WcOpcode::RecvRdmaWithImm;
                wc.is_recv = true;
                wc.byte_len = self.byte_cnt;
                wc.imm = Some(self.imm);
            }
            CqeOpcode::RespSend | CqeOpcode::RespSendInv => {
                wc.opcode = WcOpcode::Recv;
                wc.is_recv = true;
                wc.byte_len = self.byte_cnt;
            }
            CqeOpcode::RespSendImm => {
                wc.opcode = WcOpcode::Recv;
                wc.is_recv = true;
                wc.byte_len = self.byte_cnt;
                wc.imm = Some(self.imm);
            }
            CqeOpcode::ReqErr | CqeOpcode::RespErr => {
                let (syn, vendor) = self.error.unwrap_or((Syndrome::Unknown(0), 0));
                wc.status = syn.wc_status();
                wc.vendor_err = vendor;
                wc.is_recv = self.opcode == CqeOpcode::RespErr;
            }
            _ => wc.status = WcStatus::GeneralErr,
        }
        wc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ownership_rule() {
        // First pass over an 8-entry ring expects owner 0, second pass owner 1.
        assert!(Cqe64::sw_owned(0x00, 3, 3));
        assert!(!Cqe64::sw_owned(0x01, 3, 3));
        assert!(Cqe64::sw_owned(0x01, 8 + 3, 3));
        assert!(
            !Cqe64::sw_owned(OP_OWN_INVALID, 0, 3),
            "INVALID opcode is never owned"
        );
        assert!(!Cqe64::sw_owned(0xf1, 8, 3));
    }

    #[test]
    fn every_opcode_and_syndrome() {
        for op in 0..16u8 {
            let c = CqeRepr {
                opcode: CqeOpcode::from_raw(op),
                owner: 1,
                format: 0,
                se: false,
                wqe_opcode: Opcode::RdmaRead,
                qpn: 0x1234,
                wqe_counter: 7,
                byte_cnt: 4096,
                imm: 0xdead_beef,
                srqn: 0,
                error: matches!(op, 13 | 14).then_some((Syndrome::RemoteAccessErr, 0x88)),
            };
            let wc = CqeRepr::parse(&c.emit()).unwrap().completion();
            let want = match op {
                0 => (WcStatus::Success, WcOpcode::RdmaRead, 4096, None),
                1 => (
                    WcStatus::Success,
                    WcOpcode::RecvRdmaWithImm,
                    4096,
                    Some(0xdead_beef),
                ),
                2 | 4 => (WcStatus::Success, WcOpcode::Recv, 4096, None),
                3 => (WcStatus::Success, WcOpcode::Recv, 4096, Some(0xdead_beef)),
                13 | 14 => (WcStatus::RemAccessErr, WcOpcode::Other, 0, None),
                _ => (WcStatus::GeneralErr, WcOpcode::Other, 0, None),
            };
            assert_eq!(
                (wc.status, wc.opcode, wc.byte_len, wc.imm),
                want,
                "cqe opcode {op}"
            );
            assert_eq!(wc.wqe_counter, 7);
        }
        for s in 0..=255u8 {
            let c = CqeRepr {
                opcode: CqeOpcode::ReqErr,
                owner: 0,
                format: 0,
                se: false,
                wqe_opcode: Opcode::RdmaWrite,
                qpn: 1,
                wqe_counter: 0,
                byte_cnt: 0,
                imm: 0,
                srqn: 0,
                error: Some((Syndrome::from_raw(s), s ^ 0xff)),
            };
            let wc = CqeRepr::parse(&c.emit()).unwrap().completion();
            assert_eq!(wc.status, Syndrome::from_raw(s).wc_status());
            assert_eq!(wc.vendor_err, s ^ 0xff);
        }
    }

    #[test]
    fn golden_error_cqe_offsets() {
        let mut raw = [0u8; 64];
        raw[54] = 0x42;
        raw[55] = 0x05;
        raw[56..60].copy_from_slice(&[0x08, 0x00, 0x12, 0x34]);
        raw[60..62].copy_from_slice(&[0xff, 0xfe]);
        raw[63] = 0xd1; // REQ_ERR, owner 1
        let c: Cqe64 = bytemuck::cast(raw);
        let r = CqeRepr::parse(&c).unwrap();
        assert_eq!(
            (r.opcode, r.owner, r.qpn, r.wqe_counter),
            (CqeOpcode::ReqErr, 1, 0x1234, 0xfffe)
        );
        assert_eq!(r.error, Some((Syndrome::WrFlushErr, 0x42)));
        assert_eq!(r.completion().status, WcStatus::WrFlushErr);
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(raw in proptest::collection::vec(any::<u8>(), 64)) {
            let c: Cqe64 = bytemuck::pod_read_unaligned(&raw);
            if let Ok(r) = CqeRepr::parse(&c) {
                let again = CqeRepr::parse(&r.emit()).unwrap();
                prop_assert_eq!(again, r);
                let _ = r.completion();
            }
        }
    }
}
