//! Inline data segment (`struct mlx5_wqe_inline_seg`, nic-formats.md §A.7): a BE32 header
//! `len | 0x80000000`, then the payload bytes packed from offset 4, padded to 16 bytes. The
//! payload may continue past the end of the ring at offset 0.

use gda_hal::Be32;

use super::data_seg::INLINE_FLAG;

/// Bytes of the inline header.
pub const HEADER_BYTES: u32 = 4;

/// The inline header for `len` payload bytes.
#[inline(always)]
#[must_use]
pub const fn header(len: u32) -> Be32 {
    Be32::new(len | INLINE_FLAG)
}

/// 16-byte units an inline segment of `len` bytes occupies (0 for an empty payload: rdma-core
/// writes no segment then).
#[inline(always)]
#[must_use]
pub const fn ds_for(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        (HEADER_BYTES + len).div_ceil(16)
    }
}

/// Decodes a header word: `Some(len)` if the inline flag is set.
#[inline(always)]
#[must_use]
pub const fn parse_header(word: Be32) -> Option<u32> {
    let v = word.get();
    if v & INLINE_FLAG != 0 {
        Some(v & !INLINE_FLAG)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(header(5).to_bytes(), [0x80, 0, 0, 5]);
        assert_eq!(
            (
                ds_for(0),
                ds_for(1),
                ds_for(12),
                ds_for(13),
                ds_for(28),
                ds_for(29)
            ),
            (0, 1, 1, 2, 2, 3)
        );
        assert_eq!(parse_header(header(300)), Some(300));
        assert_eq!(parse_header(Be32::new(300)), None);
    }
}
