//! The copy for large symmetric transfers on x86-64 with AVX2.
//!
//! Why not `memmove`: glibc moves 4 KiB–L2-sized blocks with `rep movsb` on CPUs that
//! advertise ERMS/FSRM, and on AMD Zen that is 10–30 % slower than a plain 32-byte vector
//! loop for cache-resident data (measured on this project's EPYC CI machine with
//! `cargo bench --bench sym_copy`; the README lists the figures). Above
//! [`PREFETCH_FROM`] the data streams from L3, and software prefetch of both the source and
//! the destination a fixed distance ahead keeps the loads and the stores' ownership requests
//! in flight (another 3–7 % over `memmove` at 512 KiB–1 MiB). Non-temporal stores were
//! measured too and lose at every size here (they bypass the L3 the reader would hit), so
//! they are not used.
//!
//! Only up to [`max`]: from half the L2 cache on, `memmove`'s `rep movsb` streams faster than
//! the loop on the EPYC this project measures on (1 MiB L2: 512 KiB in 11.05 µs against
//! 11.88 µs cache-hot, and 1 MiB puts between processes 24 µs against 27 µs), so larger
//! copies go back to it.
//!
//! Only for disjoint ranges (a forward copy of overlapping ranges would read bytes it has
//! already overwritten); `sym_copy` sends everything else to `memmove`.

use core::arch::x86_64::{
    __m256i, _MM_HINT_T0, _mm_prefetch, _mm256_loadu_si256, _mm256_store_si256, _mm256_storeu_si256,
};

/// Below this `memmove`'s own vector code is as fast (it uses `rep movsb` only above).
pub const MIN: usize = 4096;
/// From here on the loop prefetches (below it the data is L1/L2 resident and the
/// prefetches only cost issue slots).
const PREFETCH_FROM: usize = 128 * 1024;
/// Prefetch distance in bytes.
const AHEAD: usize = 1024;
/// Bytes per loop iteration: four 32-byte vectors.
const STEP: usize = 128;

/// The first size the loop leaves to `memmove`: half the L2 cache of CPU 0 (from sysfs), 512
/// KiB where that is unknown, [`MAX_AVX512`] on a CPU with AVX-512, or `GDA_SYM_WIDE_MAX`
/// (bytes) when set — for measuring the crossover on another CPU
/// (`scripts/shmem-vs-openmpi.sh` with large sizes). Read once.
#[inline]
pub fn max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        if let Some(v) = std::env::var("GDA_SYM_WIDE_MAX")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            return v;
        }
        if std::is_x86_feature_detected!("avx512f") {
            return MAX_AVX512;
        }
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
            .ok()
            .and_then(|s| parse_cache_size(&s))
            .map_or(512 * 1024, |l2| (l2 / 2).max(MIN))
    })
}

/// Where the loop stops on a CPU with AVX-512, whose glibc `memmove` has a 64-byte vector
/// path: on a Zen 4 EPYC (`cargo bench --bench sym_copy -- --quick`, 2026-11-26) the loop still
/// wins at 8 KiB (49 ns against 54; the 4-KiB put rate of `scripts/shmem-vs-openmpi.sh`, 34 M/s
/// with it and 20 M/s without) but `memmove` wins from 32 KiB (202 ns against 339; 128 KiB:
/// 1.03 µs against 1.40), and Open MPI's 64-KiB get was ahead of gda's (0.57 against 0.71 µs)
/// until the loop stood aside there (0.54 µs).
pub const MAX_AVX512: usize = 16 * 1024;

/// A sysfs cache size (`1024K`, `2M`, `512`) in bytes.
fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1024),
        b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

/// Whether the CPU has AVX2 (`std` caches the answer after the first query).
#[inline]
pub fn available() -> bool {
    std::is_x86_feature_detected!("avx2")
}

/// Whether `[dst, dst+len)` and `[src, src+len)` do not overlap.
#[inline]
pub fn disjoint(dst: *mut u8, src: *const u8, len: usize) -> bool {
    let (d, s) = (dst as usize, src as usize);
    d.abs_diff(s) >= len
}

/// Copies `len >= MIN` bytes.
///
/// # Safety
/// Both ranges are valid for `len` bytes, do not overlap, and the CPU has AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    debug_assert!(len >= MIN);
    if len >= PREFETCH_FROM {
        // SAFETY: as this function's contract.
        unsafe { body::<true>(dst, src, len) }
    } else {
        // SAFETY: as this function's contract.
        unsafe { body::<false>(dst, src, len) }
    }
}

/// The loop, with or without prefetch.
///
/// # Safety
/// As [`copy`].
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn body<const PREFETCH: bool>(dst: *mut u8, src: *const u8, len: usize) {
    // The first vector with unaligned forms; then on from the destination's next
    // 32-byte boundary, so that every store of the loop is aligned (a store that
    // crosses a cache line costs two, a load that does is cheaper: loads are what is
    // left unaligned, as in glibc's own vector loop).
    // SAFETY: `len >= MIN > 32`: the first 32 bytes lie inside both ranges.
    unsafe { _mm256_storeu_si256(dst.cast(), _mm256_loadu_si256(src.cast())) };
    let mut i = 32 - (dst as usize & 31);
    while i + STEP <= len {
        // SAFETY: `i + STEP <= len`, so every access below stays inside both ranges;
        // `dst + i` is 32-byte aligned (`i` starts at the boundary and moves by
        // multiples of 32), the loads are unaligned forms. Prefetch addresses are formed
        // with `wrapping_add` (they may lie past the end) and prefetches never fault.
        unsafe {
            if PREFETCH {
                _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(i + AHEAD).cast());
                _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(i + AHEAD + 64).cast());
                _mm_prefetch::<_MM_HINT_T0>(dst.wrapping_add(i + AHEAD).cast_const().cast());
                _mm_prefetch::<_MM_HINT_T0>(dst.wrapping_add(i + AHEAD + 64).cast_const().cast());
            }
            let s = src.add(i).cast::<__m256i>();
            let d = dst.add(i).cast::<__m256i>();
            let a = _mm256_loadu_si256(s);
            let b = _mm256_loadu_si256(s.add(1));
            let c = _mm256_loadu_si256(s.add(2));
            let e = _mm256_loadu_si256(s.add(3));
            _mm256_store_si256(d, a);
            _mm256_store_si256(d.add(1), b);
            _mm256_store_si256(d.add(2), c);
            _mm256_store_si256(d.add(3), e);
        }
        i += STEP;
    }
    while i + 32 <= len {
        // SAFETY: `i + 32 <= len`: one vector inside both ranges.
        unsafe {
            let v = _mm256_loadu_si256(src.add(i).cast());
            _mm256_storeu_si256(dst.add(i).cast(), v);
        }
        i += 32;
    }
    if i < len {
        // The last 1..31 bytes: one vector ending at `len` (it rewrites some bytes
        // already copied with the same values; `len >= MIN > 32` keeps it in range, and
        // the ranges are disjoint, so the rewritten bytes are unchanged source bytes).
        // SAFETY: `len - 32 .. len` lies inside both ranges.
        unsafe {
            let v = _mm256_loadu_si256(src.add(len - 32).cast());
            _mm256_storeu_si256(dst.add(len - 32).cast(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cache_size;

    #[test]
    fn sysfs_cache_sizes_parse() {
        assert_eq!(parse_cache_size("1024K\n"), Some(1 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_cache_size("x"), None);
        assert_eq!(parse_cache_size(""), None);
    }
}
