//! Work-completion status and opcode, numbered exactly as rdma-core's `ibv_wc_status` and
//! `ibv_wc_opcode` so a gda completion compares one-to-one with an `ibv_wc`.

/// Status of a work completion; discriminants equal `enum ibv_wc_status` (verbs.h, rdma-core v55).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs)] // the names are the verbs names; see `ibv_poll_cq(3)`
pub enum WcStatus {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
    TmErr = 22,
    TmRndvIncomplete = 23,
}

impl WcStatus {
    /// Every status, in numeric order.
    pub const ALL: [WcStatus; 24] = [
        Self::Success,
        Self::LocLenErr,
        Self::LocQpOpErr,
        Self::LocEecOpErr,
        Self::LocProtErr,
        Self::WrFlushErr,
        Self::MwBindErr,
        Self::BadRespErr,
        Self::LocAccessErr,
        Self::RemInvReqErr,
        Self::RemAccessErr,
        Self::RemOpErr,
        Self::RetryExcErr,
        Self::RnrRetryExcErr,
        Self::LocRddViolErr,
        Self::RemInvRdReqErr,
        Self::RemAbortErr,
        Self::InvEecnErr,
        Self::InvEecStateErr,
        Self::FatalErr,
        Self::RespTimeoutErr,
        Self::GeneralErr,
        Self::TmErr,
        Self::TmRndvIncomplete,
    ];

    /// The status with this `ibv_wc_status` number, if there is one.
    #[must_use]
    pub const fn from_raw(raw: u32) -> Option<Self> {
        if (raw as usize) < Self::ALL.len() {
            Some(Self::ALL[raw as usize])
        } else {
            None
        }
    }

    /// The `ibv_wc_status` number.
    #[must_use]
    pub const fn as_raw(self) -> u32 {
        self as u32
    }

    /// Whether this is [`WcStatus::Success`].
    #[must_use]
    pub const fn is_ok(self) -> bool {
        matches!(self, Self::Success)
    }

    /// The text `ibv_wc_status_str` prints for this status.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::LocLenErr => "local length error",
            Self::LocQpOpErr => "local QP operation error",
            Self::LocEecOpErr => "local EE context operation error",
            Self::LocProtErr => "local protection error",
            Self::WrFlushErr => "Work Request Flushed Error",
            Self::MwBindErr => "memory management operation error",
            Self::BadRespErr => "bad response error",
            Self::LocAccessErr => "local access error",
            Self::RemInvReqErr => "remote invalid request error",
            Self::RemAccessErr => "remote access error",
            Self::RemOpErr => "remote operation error",
            Self::RetryExcErr => "transport retry counter exceeded",
            Self::RnrRetryExcErr => "RNR retry counter exceeded",
            Self::LocRddViolErr => "local RDD violation error",
            Self::RemInvRdReqErr => "remote invalid RD request",
            Self::RemAbortErr => "aborted error",
            Self::InvEecnErr => "invalid EE context number",
            Self::InvEecStateErr => "invalid EE context state",
            Self::FatalErr => "fatal error",
            Self::RespTimeoutErr => "response timeout error",
            Self::GeneralErr => "general error",
            Self::TmErr => "TM error",
            Self::TmRndvIncomplete => "TM software rendezvous",
        }
    }
}

impl core::fmt::Display for WcStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Work-completion opcode; discriminants equal `enum ibv_wc_opcode` where verbs has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// A SEND (with or without immediate) completed on the send queue.
    Send = 0,
    /// An RDMA WRITE (with or without immediate) completed.
    RdmaWrite = 1,
    /// An RDMA READ completed; `byte_len` is the length read.
    RdmaRead = 2,
    /// A compare-and-swap completed (masked or not).
    CompSwap = 3,
    /// A fetch-and-add completed (masked or not).
    FetchAdd = 4,
    /// A receive WQE consumed by a SEND.
    Recv = 128,
    /// A receive WQE consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
    /// A completion whose operation the hardware record does not name (NOP, or a format gda does
    /// not decode); the caller's own bookkeeping for that slot says what it was.
    Other = u32::MAX,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip() {
        for (i, s) in WcStatus::ALL.iter().enumerate() {
            assert_eq!(s.as_raw() as usize, i);
            assert_eq!(WcStatus::from_raw(i as u32), Some(*s));
        }
        assert_eq!(WcStatus::from_raw(24), None);
        assert_eq!(WcStatus::WrFlushErr.as_raw(), 5);
        assert_eq!(WcStatus::GeneralErr.as_raw(), 21);
    }
}
