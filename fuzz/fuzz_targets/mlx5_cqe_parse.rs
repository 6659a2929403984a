//! Arbitrary 64 bytes as an mlx5 CQE: parsing never panics, and anything accepted round-trips
//! (`parse(emit(parse(x))) == parse(x)`) and yields a work completion.
#![no_main]

use gda_mlx5::wire::{Cqe64, CqeRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 64 {
        return;
    }
    let cqe: Cqe64 = bytemuck::pod_read_unaligned(&data[..64]);
    if let Ok(r) = CqeRepr::parse(&cqe) {
        let again = CqeRepr::parse(&r.emit()).expect("re-encoded CQE must parse");
        assert_eq!(again, r);
        let _ = r.completion();
    }
});
