//! Byte-order wrapper types for hardware structures.
//!
//! NIC formats fix the byte order of every field: mlx5 is big-endian, bnxt little-endian.
//! A field typed [`Be32`] cannot be stored without saying so, which is how a forgotten swap
//! becomes a type error instead of a corrupted WQE. The wrappers keep the native alignment of
//! the integer they hold (as rust-vmm's `vm-memory` does), so `#[repr(C)]` hardware structs
//! built from them have the same layout as the C structs, and they are [`bytemuck::Pod`], so a
//! struct of them can be viewed as its bytes with no copy.

use bytemuck::{Pod, Zeroable};

macro_rules! endian_type {
    ($(#[$doc:meta])* $name:ident, $int:ty, $to:ident, $from:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        #[repr(transparent)]
        pub struct $name($int);

        impl $name {
            /// The all-zero value.
            pub const ZERO: Self = Self(0);

            /// Wraps a host-order value, storing it in this type's byte order.
            #[inline(always)]
            #[must_use]
            pub const fn new(value: $int) -> Self {
                Self(value.$to())
            }

            /// The host-order value.
            #[inline(always)]
            #[must_use]
            pub const fn get(self) -> $int {
                <$int>::$from(self.0)
            }

            /// Reinterprets bytes already in this type's order (as they sit in memory).
            #[inline(always)]
            #[must_use]
            pub const fn from_bytes(bytes: [u8; core::mem::size_of::<$int>()]) -> Self {
                Self(<$int>::from_ne_bytes(bytes))
            }

            /// The bytes as they sit in memory.
            #[inline(always)]
            #[must_use]
            pub const fn to_bytes(self) -> [u8; core::mem::size_of::<$int>()] {
                self.0.to_ne_bytes()
            }
        }

        impl From<$int> for $name {
            #[inline(always)]
            fn from(value: $int) -> Self {
                Self::new(value)
            }
        }

        impl From<$name> for $int {
            #[inline(always)]
            fn from(value: $name) -> Self {
                value.get()
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.get())
            }
        }
    };
}

endian_type!(
    /// A big-endian (network order) 16-bit field.
    Be16, u16, to_be, from_be
);
endian_type!(
    /// A big-endian (network order) 32-bit field.
    Be32, u32, to_be, from_be
);
endian_type!(
    /// A big-endian (network order) 64-bit field.
    Be64, u64, to_be, from_be
);
endian_type!(
    /// A little-endian 16-bit field.
    Le16, u16, to_le, from_le
);
endian_type!(
    /// A little-endian 32-bit field.
    Le32, u32, to_le, from_le
);
endian_type!(
    /// A little-endian 64-bit field.
    Le64, u64, to_le, from_le
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_in_memory() {
        assert_eq!(Be32::new(0x0102_0304).to_bytes(), [1, 2, 3, 4]);
        assert_eq!(Le32::new(0x0102_0304).to_bytes(), [4, 3, 2, 1]);
        assert_eq!(
            Be64::new(0x0102_0304_0506_0708).to_bytes(),
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(Be16::from_bytes([0xab, 0xcd]).get(), 0xabcd);
        assert_eq!(core::mem::align_of::<Be64>(), core::mem::align_of::<u64>());
    }

    proptest::proptest! {
        #[test]
        fn round_trip(v: u64) {
            proptest::prop_assert_eq!(Be64::new(v).get(), v);
            proptest::prop_assert_eq!(Le64::new(v).get(), v);
            proptest::prop_assert_eq!(Be64::from_bytes(v.to_be_bytes()).get(), v);
            proptest::prop_assert_eq!(Le32::from_bytes((v as u32).to_le_bytes()).get(), v as u32);
        }
    }
}
