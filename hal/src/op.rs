//! Operation descriptors shared by every provider.
//!
//! Field order and numbering follow rdma-core's `struct ibv_sge` and `IBV_SEND_*` so a gda request
//! reads like the `ibv_send_wr` it replaces. Compile-time choices (signalled or not, atomic width)
//! are marker types, so each (provider, operation) monomorphises to straight-line stores.

/// A local scatter/gather element, in `struct ibv_sge` order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Sge {
    /// Local virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the memory region holding `addr`.
    pub lkey: u32,
}

/// A remote buffer: address and remote key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Remote {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key of the memory region holding `addr`.
    pub rkey: u32,
}

bitflags::bitflags! {
    /// Per-request flags, numbered as `enum ibv_send_flags`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct SendFlags: u32 {
        /// Wait for earlier RDMA READs and atomics to complete before executing this request.
        const FENCE = 1 << 0;
        /// Generate a completion for this request.
        const SIGNALED = 1 << 1;
        /// Set the solicited-event bit on the receiver's completion.
        const SOLICITED = 1 << 2;
        /// Copy the payload into the WQE.
        const INLINE = 1 << 3;
    }
}

impl SendFlags {
    /// `SIGNALED` if `C` is [`Signaled`], else no flags.
    #[inline(always)]
    #[must_use]
    pub const fn for_completion<C: Completion>() -> Self {
        if C::SIGNALED {
            Self::SIGNALED
        } else {
            Self::empty()
        }
    }
}

/// Whether a request generates a completion — a compile-time choice for device code.
pub trait Completion: Copy + 'static {
    /// True when a CQE is generated on success.
    const SIGNALED: bool;
}

/// Marker: generate a CQE.
#[derive(Clone, Copy, Debug)]
pub struct Signaled;
/// Marker: no CQE unless the request fails (retired by a later signalled CQE).
#[derive(Clone, Copy, Debug)]
pub struct Unsignaled;

impl Completion for Signaled {
    const SIGNALED: bool = true;
}
impl Completion for Unsignaled {
    const SIGNALED: bool = false;
}

/// Operand width of an atomic — a compile-time choice, so a 4-byte operand can never be
/// read or written as 8 bytes (docs/lessons.md §4).
pub trait AtomicWidth: Copy + 'static {
    /// Operand bytes (4 or 8).
    const BYTES: u32;
}

/// Marker: 4-byte atomic operands.
#[derive(Clone, Copy, Debug)]
pub struct W32;
/// Marker: 8-byte atomic operands.
#[derive(Clone, Copy, Debug)]
pub struct W64;

impl AtomicWidth for W32 {
    const BYTES: u32 = 4;
}
impl AtomicWidth for W64 {
    const BYTES: u32 = 8;
}

/// An atomic operation. Values are truncated to the operand width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `if *remote == compare { *remote = swap }`; returns the old value.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// `*remote += add`; returns the old value.
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// Masked compare-and-swap: `if (*remote ^ compare) & compare_mask == 0 {
    /// *remote = (*remote & !swap_mask) | (swap & swap_mask) }`. With `compare_mask = 0` it
    /// always swaps the bits in `swap_mask`, which expresses SWAP, SET, AND and OR.
    MaskedCompareSwap {
        /// Expected value (bits selected by `compare_mask`).
        compare: u64,
        /// Which bits take part in the comparison.
        compare_mask: u64,
        /// New value (bits selected by `swap_mask`).
        swap: u64,
        /// Which bits are written.
        swap_mask: u64,
    },
    /// Masked fetch-and-add: the operand is split into independent fields; a set bit in
    /// `field_boundary` marks the most significant bit of a field, whose carry is dropped.
    /// With every boundary bit set it is a bitwise XOR.
    MaskedFetchAdd {
        /// Addend.
        add: u64,
        /// Field boundaries (carry stops above each set bit).
        field_boundary: u64,
    },
}

impl AtomicOp {
    /// Whether this is one of the masked (extended) forms.
    #[must_use]
    pub const fn is_masked(&self) -> bool {
        matches!(
            self,
            Self::MaskedCompareSwap { .. } | Self::MaskedFetchAdd { .. }
        )
    }

    /// Applies the operation to `old` at `bytes` width (4 or 8) and returns the new value — the
    /// reference semantics a device model and tests use.
    #[must_use]
    pub const fn apply(&self, old: u64, bytes: u32) -> u64 {
        let mask = if bytes >= 8 {
            u64::MAX
        } else {
            (1u64 << (bytes * 8)) - 1
        };
        let old = old & mask;
        let new = match *self {
            Self::CompareSwap { compare, swap } => {
                if old == compare & mask {
                    swap
                } else {
                    old
                }
            }
            Self::FetchAdd { add } => old.wrapping_add(add),
            Self::MaskedCompareSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => {
                if (old ^ compare) & compare_mask & mask == 0 {
                    (old & !swap_mask) | (swap & swap_mask)
                } else {
                    old
                }
            }
            Self::MaskedFetchAdd {
                add,
                field_boundary,
            } => {
                // Add bit by bit, dropping the carry out of every boundary bit.
                let mut out = 0u64;
                let mut carry = 0u64;
                let mut bit = 0;
                while bit < bytes * 8 {
                    let a = (old >> bit) & 1;
                    let b = (add >> bit) & 1;
                    let s = a + b + carry;
                    out |= (s & 1) << bit;
                    carry = if (field_boundary >> bit) & 1 == 1 {
                        0
                    } else {
                        s >> 1
                    };
                    bit += 1;
                }
                out
            }
        };
        new & mask
    }
}

/// Source of a request's payload: a gather list, or bytes copied into the WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// Gather from registered memory.
    Sges(&'a [Sge]),
    /// Copied into the WQE (at most the QP's max inline length).
    Inline(&'a [u8]),
}

/// A send-queue work request, the runtime form of every operation a provider posts.
///
/// Device code calls the per-operation functions of [`crate::Provider`] instead, which take
/// sizes as const generics; this form serves host tools, software-NIC decoders and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkRequest<'a> {
    /// RDMA WRITE, with an immediate if `imm` is set.
    Write {
        /// Destination.
        remote: Remote,
        /// Source bytes.
        payload: Payload<'a>,
        /// Immediate data (host-order value; the wire carries it big-endian).
        imm: Option<u32>,
    },
    /// SEND, with an immediate if `imm` is set.
    Send {
        /// Source bytes.
        payload: Payload<'a>,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// RDMA READ into the local gather list.
    Read {
        /// Source.
        remote: Remote,
        /// Local destination.
        sges: &'a [Sge],
    },
    /// An atomic on `bytes`-wide (4 or 8) remote memory; the old value lands at `local`.
    Atomic {
        /// Target (aligned to `bytes`).
        remote: Remote,
        /// Where the old value is written (`length` is ignored; the width is `bytes`).
        local: Sge,
        /// Operation and operands.
        op: AtomicOp,
        /// Operand width, 4 or 8.
        bytes: u32,
    },
    /// No operation (occupies a slot, completes in order).
    Nop,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_reference_semantics() {
        let cs = AtomicOp::CompareSwap {
            compare: 5,
            swap: 9,
        };
        assert_eq!((cs.apply(5, 8), cs.apply(6, 8)), (9, 6));
        assert_eq!(
            AtomicOp::FetchAdd { add: 1 }.apply(0xffff_ffff, 4),
            0,
            "wraps at 4 bytes"
        );
        // AND with 0x0f via masked CS: always swap zeros into the bits outside 0x0f.
        let and = AtomicOp::MaskedCompareSwap {
            compare: 0,
            compare_mask: 0,
            swap: 0,
            swap_mask: !0x0f,
        };
        assert_eq!(and.apply(0xabcd, 8), 0xd);
        // OR 0xf0: swap ones into 0xf0.
        let or = AtomicOp::MaskedCompareSwap {
            compare: 0,
            compare_mask: 0,
            swap: 0xf0,
            swap_mask: 0xf0,
        };
        assert_eq!(or.apply(0x0f, 4), 0xff);
        // XOR via masked FA with every bit a boundary.
        let xor = AtomicOp::MaskedFetchAdd {
            add: 0b1010,
            field_boundary: u64::MAX,
        };
        assert_eq!(xor.apply(0b0110, 8), 0b1100);
        // Two 16-bit fields in a 32-bit word: no carry from the low field into the high one.
        let fa = AtomicOp::MaskedFetchAdd {
            add: 0x0001_0001,
            field_boundary: 0x8000_8000,
        };
        assert_eq!(fa.apply(0x0001_ffff, 4), 0x0002_0000);
        assert!(fa.is_masked() && !cs.is_masked());
    }
}
