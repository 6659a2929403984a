//! Arbitrary bytes as a bnxt send WQE in each mode: the decoder never panics, and what it
//! accepts stays inside the bytes it was given.
#![no_main]

use gda_bnxt::WqeMode;
use gda_bnxt::wire::{SendWqe, WqePayload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&m, bytes)) = data.split_first() else {
        return;
    };
    let mode = [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3][usize::from(m % 3)];
    if let Ok(w) = SendWqe::parse(bytes, mode) {
        let size = usize::from(w.hdr.wqe_size) * 16;
        assert!(size <= bytes.len());
        match w.payload {
            WqePayload::Inline(d) => assert!(d.len() <= size - 32),
            WqePayload::Sges(s) => assert_eq!(s.len(), (size - 32) / 16),
        }
        let _ = w.length();
    }
});
