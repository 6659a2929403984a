//! bnxt_re WQE types, CQE types and completion statuses (nic-formats.md §E.3, §E.8, §F.2).
//! Every enum keeps unknown values losslessly.

use gda_hal::WcStatus;

gda_hal::raw_enum!(
    /// WQE type (`rsv_ws_fl_wt` bits 7..0).
    WqeType {
        /// SEND.
        Send = 0x00,
        /// SEND with immediate.
        SendImm = 0x01,
        /// SEND with invalidate.
        SendInval = 0x02,
        /// RDMA WRITE.
        RdmaWrite = 0x04,
        /// RDMA WRITE with immediate.
        RdmaWriteImm = 0x05,
        /// RDMA READ.
        RdmaRead = 0x06,
        /// Compare-and-swap (8 bytes).
        AtomicCs = 0x08,
        /// Fetch-and-add (8 bytes).
        AtomicFa = 0x0b,
        /// Local invalidate.
        LocInval = 0x0c,
        /// Memory-window bind.
        Bind = 0x0e,
        /// Receive WQE.
        Recv = 0x80,
        /// Invalid.
        Invalid = 0xff,
    }
);

gda_hal::raw_enum!(
    /// CQE type (`bcqe` bits 4..1).
    CqeType {
        /// Requester completion.
        Req = 0x0,
        /// RC receive.
        RecvRc = 0x1,
        /// UD receive.
        RecvUd = 0x2,
        /// Raw receive.
        RecvRaw = 0x3,
        /// Terminal (QP flushed).
        Terminal = 0xe,
        /// Cut-off (CQ resize).
        CutOff = 0xf,
    }
);

gda_hal::raw_enum!(
    /// Requester CQE status.
    ReqStatus {
        /// Success.
        Ok = 0x00,
        /// Bad response.
        BadResp = 0x01,
        /// Local length error.
        LocLen = 0x02,
        /// Local QP operation error.
        LocQpOp = 0x03,
        /// Protection error.
        Prot = 0x04,
        /// Memory operation error.
        MemOp = 0x05,
        /// Remote invalid request.
        RemInval = 0x06,
        /// Remote access error.
        RemAcc = 0x07,
        /// Remote operation error.
        RemOp = 0x08,
        /// RNR retries exceeded.
        RnrNakXced = 0x09,
        /// Transport retries exceeded.
        TrnspXced = 0x0a,
        /// Flushed.
        WrFlush = 0x0b,
    }
);

gda_hal::raw_enum!(
    /// Responder CQE status (the table differs from the requester's).
    RespStatus {
        /// Success.
        Ok = 0x00,
        /// Local access error.
        LocAcc = 0x01,
        /// Local length error.
        LocLen = 0x02,
        /// Local protection error.
        LocProt = 0x03,
        /// Local QP operation error.
        LocQpOp = 0x04,
        /// Memory operation error.
        MemOp = 0x05,
        /// Remote invalid request.
        RemInval = 0x06,
        /// Flushed.
        WrFlush = 0x07,
        /// Hardware flush (skipped by rdma-core's poll).
        HwFlush = 0x08,
    }
);

impl ReqStatus {
    /// `ibv_wc_status` for a requester CQE (`bnxt_re_to_ibv_wc_status`).
    #[must_use]
    pub const fn wc_status(self) -> WcStatus {
        match self {
            Self::Ok => WcStatus::Success,
            Self::BadResp => WcStatus::BadRespErr,
            Self::LocLen => WcStatus::LocLenErr,
            Self::LocQpOp => WcStatus::LocQpOpErr,
            Self::Prot => WcStatus::LocProtErr,
            Self::MemOp => WcStatus::MwBindErr,
            Self::RemInval => WcStatus::RemInvReqErr,
            Self::RemAcc => WcStatus::RemAccessErr,
            Self::RemOp => WcStatus::RemOpErr,
            Self::RnrNakXced => WcStatus::RnrRetryExcErr,
            Self::TrnspXced => WcStatus::RetryExcErr,
            Self::WrFlush => WcStatus::WrFlushErr,
            Self::Unknown(_) => WcStatus::GeneralErr,
        }
    }

    /// The requester status a device model reports for `s` (inverse of [`ReqStatus::wc_status`]).
    #[must_use]
    pub const fn from_wc(s: WcStatus) -> Self {
        match s {
            WcStatus::Success => Self::Ok,
            WcStatus::BadRespErr => Self::BadResp,
            WcStatus::LocLenErr => Self::LocLen,
            WcStatus::LocQpOpErr => Self::LocQpOp,
            WcStatus::LocProtErr => Self::Prot,
            WcStatus::MwBindErr => Self::MemOp,
            WcStatus::RemInvReqErr => Self::RemInval,
            WcStatus::RemAccessErr => Self::RemAcc,
            WcStatus::RemOpErr => Self::RemOp,
            WcStatus::RnrRetryExcErr => Self::RnrNakXced,
            WcStatus::RetryExcErr => Self::TrnspXced,
            WcStatus::WrFlushErr => Self::WrFlush,
            _ => Self::Unknown(0xff),
        }
    }
}

impl RespStatus {
    /// `ibv_wc_status` for a responder CQE.
    #[must_use]
    pub const fn wc_status(self) -> WcStatus {
        match self {
            Self::Ok => WcStatus::Success,
            Self::LocAcc => WcStatus::LocAccessErr,
            Self::LocLen => WcStatus::LocLenErr,
            Self::LocProt => WcStatus::LocProtErr,
            Self::LocQpOp => WcStatus::LocQpOpErr,
            Self::MemOp => WcStatus::MwBindErr,
            Self::RemInval => WcStatus::RemInvReqErr,
            Self::WrFlush => WcStatus::WrFlushErr,
            Self::HwFlush => WcStatus::FatalErr,
            Self::Unknown(_) => WcStatus::GeneralErr,
        }
    }

    /// The responder status a device model reports for `s`.
    #[must_use]
    pub const fn from_wc(s: WcStatus) -> Self {
        match s {
            WcStatus::Success => Self::Ok,
            WcStatus::LocAccessErr => Self::LocAcc,
            WcStatus::LocLenErr => Self::LocLen,
            WcStatus::LocProtErr => Self::LocProt,
            WcStatus::LocQpOpErr => Self::LocQpOp,
            WcStatus::MwBindErr => Self::MemOp,
            WcStatus::RemInvReqErr => Self::RemInval,
            WcStatus::WrFlushErr => Self::WrFlush,
            _ => Self::Unknown(0xff),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn lossless_and_tables_differ() {
        for b in 0..=255u8 {
            assert_eq!(WqeType::from_raw(b).raw(), b);
            assert_eq!(CqeType::from_raw(b).raw(), b);
            assert_eq!(ReqStatus::from_raw(b).raw(), b);
            assert_eq!(RespStatus::from_raw(b).raw(), b);
        }
        // nic-formats.md §F.2: the two tables differ at 0x03, 0x04, 0x07, 0x08.
        assert_eq!(ReqStatus::from_raw(0x03).wc_status(), WcStatus::LocQpOpErr);
        assert_eq!(RespStatus::from_raw(0x03).wc_status(), WcStatus::LocProtErr);
        assert_eq!(
            ReqStatus::from_raw(0x07).wc_status(),
            WcStatus::RemAccessErr
        );
        assert_eq!(RespStatus::from_raw(0x07).wc_status(), WcStatus::WrFlushErr);
        assert_eq!(ReqStatus::from_raw(0x0a).wc_status(), WcStatus::RetryExcErr);
        for s in gda_hal::WcStatus::ALL {
            if let ReqStatus::Unknown(_) = ReqStatus::from_wc(s) {
                continue;
            }
            assert_eq!(ReqStatus::from_wc(s).wc_status(), s);
        }
    }
}
