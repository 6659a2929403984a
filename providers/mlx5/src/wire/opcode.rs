//! mlx5 opcodes, CQE opcodes and error syndromes (nic-formats.md §A.4, §C.3, §C.7).
//!
//! Each enum has a lossless `Unknown(u8)` arm, so parsing never fails on a value gda does not
//! name and `from_raw(x).raw() == x` always holds.

use gda_hal::WcStatus;

gda_hal::raw_enum!(
    /// Send WQE opcode (`opmod_idx_opcode` bits 7..0).
    Opcode {
        /// No operation.
        Nop = 0x00,
        /// SEND with invalidate.
        SendInval = 0x01,
        /// RDMA WRITE.
        RdmaWrite = 0x08,
        /// RDMA WRITE with immediate.
        RdmaWriteImm = 0x09,
        /// SEND.
        Send = 0x0a,
        /// SEND with immediate.
        SendImm = 0x0b,
        /// RDMA READ.
        RdmaRead = 0x10,
        /// 8-byte compare-and-swap.
        AtomicCs = 0x11,
        /// 8-byte fetch-and-add.
        AtomicFa = 0x12,
        /// Masked compare-and-swap (4 or 8 bytes, by opmod).
        AtomicMaskedCs = 0x14,
        /// Masked fetch-and-add (4 or 8 bytes, by opmod).
        AtomicMaskedFa = 0x15,
        /// User-mode memory registration (also BIND_MW / LOCAL_INV in rdma-core).
        Umr = 0x25,
    }
);

gda_hal::raw_enum!(
    /// CQE opcode (`op_own` bits 7..4).
    CqeOpcode {
        /// Requester (send-queue) completion.
        Req = 0,
        /// Responder: RDMA WRITE with immediate.
        RespWrImm = 1,
        /// Responder: SEND.
        RespSend = 2,
        /// Responder: SEND with immediate.
        RespSendImm = 3,
        /// Responder: SEND with invalidate.
        RespSendInv = 4,
        /// CQ resize marker.
        Resize = 5,
        /// Tag-matching no-packet completion.
        NoPacket = 6,
        /// Signature error.
        SigErr = 12,
        /// Requester error.
        ReqErr = 13,
        /// Responder error.
        RespErr = 14,
        /// Slot never written (or invalidated by software).
        Invalid = 15,
    }
);

gda_hal::raw_enum!(
    /// Error-CQE syndrome (`mlx5_err_cqe.syndrome`).
    Syndrome {
        /// Local length error.
        LocalLengthErr = 0x01,
        /// Local QP operation error (malformed WQE).
        LocalQpOpErr = 0x02,
        /// Local protection error (bad lkey / access).
        LocalProtErr = 0x04,
        /// Flushed because the QP is in error.
        WrFlushErr = 0x05,
        /// Memory-window bind error.
        MwBindErr = 0x06,
        /// Bad response.
        BadRespErr = 0x10,
        /// Local access error.
        LocalAccessErr = 0x11,
        /// Remote invalid request.
        RemoteInvalReqErr = 0x12,
        /// Remote access error (bad rkey / bounds / permission).
        RemoteAccessErr = 0x13,
        /// Remote operational error.
        RemoteOpErr = 0x14,
        /// Transport retries exceeded.
        TransportRetryExcErr = 0x15,
        /// RNR retries exceeded.
        RnrRetryExcErr = 0x16,
        /// Remote aborted.
        RemoteAbortedErr = 0x22,
    }
);

impl Syndrome {
    /// The `ibv_wc_status` rdma-core reports for this syndrome (nic-formats.md §F.1).
    #[must_use]
    pub const fn wc_status(self) -> WcStatus {
        match self {
            Self::LocalLengthErr => WcStatus::LocLenErr,
            Self::LocalQpOpErr => WcStatus::LocQpOpErr,
            Self::LocalProtErr => WcStatus::LocProtErr,
            Self::WrFlushErr => WcStatus::WrFlushErr,
            Self::MwBindErr => WcStatus::MwBindErr,
            Self::BadRespErr => WcStatus::BadRespErr,
            Self::LocalAccessErr => WcStatus::LocAccessErr,
            Self::RemoteInvalReqErr => WcStatus::RemInvReqErr,
            Self::RemoteAccessErr => WcStatus::RemAccessErr,
            Self::RemoteOpErr => WcStatus::RemOpErr,
            Self::TransportRetryExcErr => WcStatus::RetryExcErr,
            Self::RnrRetryExcErr => WcStatus::RnrRetryExcErr,
            Self::RemoteAbortedErr => WcStatus::RemAbortErr,
            Self::Unknown(_) => WcStatus::GeneralErr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_is_lossless() {
        for b in 0..=255u8 {
            assert_eq!(Opcode::from_raw(b).raw(), b);
            assert_eq!(CqeOpcode::from_raw(b).raw(), b);
            assert_eq!(Syndrome::from_raw(b).raw(), b);
        }
        assert_eq!(Syndrome::from_raw(0x13).wc_status(), WcStatus::RemAccessErr);
        assert_eq!(Syndrome::from_raw(0x99).wc_status(), WcStatus::GeneralErr);
    }
}
