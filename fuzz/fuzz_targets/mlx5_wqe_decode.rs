//! Arbitrary bytes as an mlx5 send WQE: decoding never panics or reads past the input, and
//! anything accepted re-encodes to bytes that decode to the same WQE.
#![no_main]

use gda_mlx5::wire::WqeRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(w) = WqeRepr::parse(data) {
        let mut out = vec![0u8; usize::from(w.ctrl.ds) * 16];
        let n = w.emit(&mut out).expect("accepted WQE must re-encode");
        assert_eq!(WqeRepr::parse(&out[..n]).expect("re-encoded WQE must parse"), w);
    }
});
