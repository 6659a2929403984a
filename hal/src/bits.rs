//! Named sub-word bit fields.
//!
//! Hardware words pack several fields (`opmod | wqe_index | opcode`, `qpn | ds`, …). Each field is
//! declared once as a [`BitField`] constant next to its structure, and code reads and writes it by
//! name; no inline masks. Everything is `const fn` so field math folds away in device code.

/// A `WIDTH`-bit field starting at bit `SHIFT` (bit 0 = least significant) of a 32-bit word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitField {
    /// Position of the field's least significant bit.
    pub shift: u32,
    /// Number of bits.
    pub width: u32,
}

impl BitField {
    /// Declares a field. Fails to compile (in const context) if it does not fit in 32 bits.
    #[must_use]
    pub const fn new(shift: u32, width: u32) -> Self {
        assert!(
            width > 0 && shift + width <= 32,
            "bit field outside a 32-bit word"
        );
        Self { shift, width }
    }

    /// The field's value mask, right-aligned (`(1 << width) - 1`).
    #[inline(always)]
    #[must_use]
    pub const fn max(self) -> u32 {
        if self.width == 32 {
            u32::MAX
        } else {
            (1u32 << self.width) - 1
        }
    }

    /// The mask of the field in place.
    #[inline(always)]
    #[must_use]
    pub const fn mask(self) -> u32 {
        self.max() << self.shift
    }

    /// Extracts the field from `word`.
    #[inline(always)]
    #[must_use]
    pub const fn get(self, word: u32) -> u32 {
        (word >> self.shift) & self.max()
    }

    /// Returns `word` with the field replaced by `value`, truncated to the field's width.
    #[inline(always)]
    #[must_use]
    pub const fn set(self, word: u32, value: u32) -> u32 {
        (word & !self.mask()) | ((value & self.max()) << self.shift)
    }

    /// `value` placed in the field of an otherwise zero word, truncated to the field's width.
    #[inline(always)]
    #[must_use]
    pub const fn place(self, value: u32) -> u32 {
        (value & self.max()) << self.shift
    }

    /// Whether `value` fits in the field without truncation.
    #[inline(always)]
    #[must_use]
    pub const fn fits(self, value: u32) -> bool {
        value <= self.max()
    }
}

/// A flag bit in an 8-bit field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bit8(pub u8);

impl Bit8 {
    /// Whether the bit is set in `byte`.
    #[inline(always)]
    #[must_use]
    pub const fn is_set(self, byte: u8) -> bool {
        byte & self.0 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MID: BitField = BitField::new(8, 16);

    #[test]
    fn get_set_place() {
        assert_eq!(MID.mask(), 0x00ff_ff00);
        assert_eq!(MID.get(0x12ab_cd34), 0xabcd);
        assert_eq!(MID.set(0x1200_0034, 0xbeef), 0x12be_ef34);
        assert_eq!(MID.place(0x1_0001), 0x0000_0100, "truncated to 16 bits");
        assert!(MID.fits(0xffff) && !MID.fits(0x1_0000));
        assert_eq!(BitField::new(0, 32).max(), u32::MAX);
    }

    proptest::proptest! {
        #[test]
        fn set_then_get(word: u32, v: u32, shift in 0u32..32, w in 1u32..=32) {
            proptest::prop_assume!(shift + w <= 32);
            let f = BitField::new(shift, w);
            let out = f.set(word, v);
            proptest::prop_assert_eq!(f.get(out), v & f.max());
            proptest::prop_assert_eq!(out & !f.mask(), word & !f.mask());
        }
    }
}
