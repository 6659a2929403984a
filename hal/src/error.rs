//! Error classification shared by every gda crate.
//!
//! As in embedded-hal, each crate has its own detailed error type and every one of them maps to
//! one [`ErrorKind`], so generic code (shmem, tools) can decide what to do without knowing the
//! provider.

/// What kind of failure an error is. Non-exhaustive: new kinds may appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument is out of range or inconsistent (bad length, unknown opcode, size not a power
    /// of two). Fix the call.
    InvalidArgument,
    /// The request does not fit: inline data longer than the QP allows, a WQE larger than the
    /// ring, too many SGEs.
    TooLarge,
    /// Bytes read from memory or input are not a valid hardware structure.
    Malformed,
    /// The operation is not supported by this provider or device.
    Unsupported,
    /// A resource is exhausted (queue full, out of memory, no keys left).
    Exhausted,
    /// A key, address or permission check failed.
    AccessDenied,
    /// The object is in a state where the operation is not allowed (QP not in RTS, …).
    InvalidState,
    /// A wait ran out of time.
    Timeout,
    /// No device or library is available.
    NoDevice,
    /// A system call or library call failed.
    Io,
    /// A value read back from a device is inconsistent with what software did (an out-of-window
    /// completion counter, a CQ overrun).
    Device,
    /// Anything else.
    Other,
}

/// An error that can say which [`ErrorKind`] it is.
pub trait Error: core::fmt::Debug + core::fmt::Display {
    /// The kind of this error.
    fn kind(&self) -> ErrorKind;
}

/// Why bytes are not a valid hardware structure (any provider's WQE, CQE or doorbell). Every
/// variant names the field or check, so tools and the software NIC can say what is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A field holds a value out of its valid range.
    Range {
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
    },
    /// Reserved bits are set.
    Reserved {
        /// Field name.
        field: &'static str,
    },
    /// An opcode (or WQE type) gda and the RC data path do not know.
    UnknownOpcode(u8),
    /// The segments do not match the opcode's layout.
    Layout {
        /// What is wrong.
        what: &'static str,
    },
    /// A valid format gda does not decode.
    Unsupported {
        /// What it is.
        what: &'static str,
    },
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated { what, need, have } => {
                write!(f, "{what}: need {need} bytes, have {have}")
            }
            Self::Range { field, value } => write!(f, "{field}: value {value:#x} out of range"),
            Self::Reserved { field } => write!(f, "{field}: reserved bits set"),
            Self::UnknownOpcode(op) => write!(f, "unknown or unsupported WQE opcode {op:#04x}"),
            Self::Layout { what } => write!(f, "segment layout: {what}"),
            Self::Unsupported { what } => write!(f, "unsupported: {what}"),
        }
    }
}

impl Error for ParseError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Malformed
    }
}
