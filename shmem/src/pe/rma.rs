//! Remote memory access: put and get (blocking, non-blocking, single-element, strided) and
//! put-with-signal, each written once against `transport::Transport`.

use gda_hal::Provider;

use super::Pe;
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::transport::{Transport, load};
use crate::types::{Cmp, Elem, SignalOp, Width};

impl<P: Provider> Pe<P> {
    /// Writes `src` to segment offset `off` of PE `pe` (any transport; `off..off + len`
    /// range-checked by the caller).
    #[inline]
    fn put_bytes(&self, pe: u32, off: usize, src: &[u8]) -> Result<()> {
        self.route(pe)?.put(&self.net, off, src)
    }

    /// Reads segment offset `off` of PE `pe` into `out` (blocking; range-checked by the caller).
    #[inline]
    fn get_bytes(&self, pe: u32, off: usize, out: &mut [u8]) -> Result<()> {
        // SAFETY: `out` is valid for `out.len()` bytes of writes.
        unsafe {
            self.route(pe)?
                .get(&self.net, off, out.as_mut_ptr(), out.len())
        }
    }

    /// Copies `src` to elements `[idx, idx + src.len())` of `dst` on `pe`; `src` may be reused
    /// on return (delivery is complete at the next [`Pe::quiet`]).
    pub fn put<T: Elem>(&self, dst: Sym<T>, idx: usize, src: &[T], pe: u32) -> Result<()> {
        let off = self.at(dst, idx, src.len())?;
        self.put_bytes(pe, off, bytemuck::cast_slice(src))
    }

    /// Non-blocking put. Here the source is copied (or staged) before return, as by
    /// [`Pe::put`]; completion is only guaranteed by [`Pe::quiet`], so the NIC's work for
    /// small ones may be batched (the software NIC between processes runs it every few puts,
    /// or at the next quiet, wait or blocking operation, or on its own within
    /// `gda_sim::Fabric::DEFERRED_SERVICE`).
    pub fn put_nbi<T: Elem>(&self, dst: Sym<T>, idx: usize, src: &[T], pe: u32) -> Result<()> {
        let off = self.at(dst, idx, src.len())?;
        self.route(pe)?
            .put_nbi(&self.net, off, bytemuck::cast_slice(src))
    }

    /// Single-element put (`shmem_p`).
    pub fn p<T: Elem>(&self, dst: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.put(dst, idx, std::slice::from_ref(&v), pe)
    }

    /// Copies elements `[idx, idx + out.len())` of `src` on `pe` into `out` (blocking).
    pub fn get<T: Elem>(&self, out: &mut [T], src: Sym<T>, idx: usize, pe: u32) -> Result<()> {
        let off = self.at(src, idx, out.len())?;
        self.get_bytes(pe, off, bytemuck::cast_slice_mut(out))
    }

    /// Single-element get (`shmem_g`).
    pub fn g<T: Elem>(&self, src: Sym<T>, idx: usize, pe: u32) -> Result<T> {
        let mut v = [T::zeroed()];
        self.get(&mut v, src, idx, pe)?;
        Ok(v[0])
    }

    /// Non-blocking get into symmetric memory of this PE: `dst[didx..]` receives
    /// `src[sidx..sidx+n]` of `pe` by the next [`Pe::quiet`].
    pub fn get_nbi<T: Elem>(
        &self,
        dst: Sym<T>,
        didx: usize,
        src: Sym<T>,
        sidx: usize,
        n: usize,
        pe: u32,
    ) -> Result<()> {
        let doff = self.at(dst, didx, n)?;
        let soff = self.at(src, sidx, n)?;
        self.route(pe)?
            .get_nbi(&self.net, doff, soff, n * size_of::<T>())
    }

    /// Strided put (`shmem_iput`): `n` elements, `src[k * sst]` → `dst[idx + k * dst_stride]`.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn iput<T: Elem>(
        &self,
        dst: Sym<T>,
        idx: usize,
        dst_stride: usize,
        src: &[T],
        src_stride: usize,
        n: usize,
        pe: u32,
    ) -> Result<()> {
        self.mine(&dst)?;
        if !strided(
            "iput",
            "reads src",
            n,
            src_stride,
            src.len(),
            dst,
            idx,
            dst_stride,
        )? {
            return Ok(());
        }
        for k in 0..n {
            self.put(
                dst,
                idx + k * dst_stride,
                std::slice::from_ref(&src[k * src_stride]),
                pe,
            )?;
        }
        Ok(())
    }

    /// Strided get (`shmem_iget`): `n` elements, `src[idx + k * src_stride]` of `pe` →
    /// `out[k * out_stride]`.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn iget<T: Elem>(
        &self,
        out: &mut [T],
        out_stride: usize,
        src: Sym<T>,
        idx: usize,
        src_stride: usize,
        n: usize,
        pe: u32,
    ) -> Result<()> {
        self.mine(&src)?;
        if !strided(
            "iget",
            "writes out",
            n,
            out_stride,
            out.len(),
            src,
            idx,
            src_stride,
        )? {
            return Ok(());
        }
        // The whole covering range (no overflow: `strided` checked its end).
        let off = self.at(src, idx, (n - 1) * src_stride + 1)?;
        let t = size_of::<T>();
        // SAFETY: `strided` checked that `out[k * out_stride]` exists for every `k < n` and
        // that the source range lies in `src`'s allocation. RDMA reads the covering range once;
        // P2P copies element by element.
        unsafe {
            self.route(pe)?.get_strided(
                &self.net,
                off,
                t,
                src_stride * t,
                n,
                out.as_mut_ptr().cast(),
                out_stride * t,
            )
        }
    }

    /// Put with signal: writes `src` to `dst[idx..]` on `pe`, then updates `sig[sidx]` on `pe`
    /// (`Set` or `Add` `value`) so that a PE that observes the signal also observes the data.
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn put_signal<T: Elem>(
        &self,
        dst: Sym<T>,
        idx: usize,
        src: &[T],
        sig: Sym<u64>,
        sidx: usize,
        value: u64,
        op: SignalOp,
        pe: u32,
    ) -> Result<()> {
        let soff = self.at(sig, sidx, 1)?;
        self.put(dst, idx, src, pe)?;
        self.route(pe)?.signal(&self.net, soff, value, op)
    }

    /// Non-blocking put with signal (completes by [`Pe::quiet`]).
    #[allow(clippy::too_many_arguments)] // the OpenSHMEM routine's own parameter list
    pub fn put_signal_nbi<T: Elem>(
        &self,
        dst: Sym<T>,
        idx: usize,
        src: &[T],
        sig: Sym<u64>,
        sidx: usize,
        value: u64,
        op: SignalOp,
        pe: u32,
    ) -> Result<()> {
        self.put_signal(dst, idx, src, sig, sidx, value, op, pe)
    }

    /// This PE's signal word (`shmem_signal_fetch`).
    pub fn signal_fetch(&self, sig: Sym<u64>, sidx: usize) -> Result<u64> {
        let off = self.at(sig, sidx, 1)?;
        // SAFETY: an aligned u64 in this PE's heap, accessed atomically by all.
        Ok(unsafe { load(self.net.local(off), Width::W64) })
    }

    /// Waits until this PE's `sig[sidx] <cmp> value`; returns the signal's value.
    pub fn signal_wait_until(
        &self,
        sig: Sym<u64>,
        sidx: usize,
        cmp: Cmp,
        value: u64,
    ) -> Result<u64> {
        self.wait_until(sig, sidx, cmp, value)?;
        self.signal_fetch(sig, sidx)
    }
}

/// Checks a strided transfer of `n` elements: local slice stride and length, symmetric side
/// stride and range. `Ok(false)`: nothing to do.
#[allow(clippy::too_many_arguments)]
fn strided<T: Elem>(
    what: &str,
    local_does: &str,
    n: usize,
    local_stride: usize,
    local_len: usize,
    sym: Sym<T>,
    idx: usize,
    sym_stride: usize,
) -> Result<bool> {
    if n == 0 {
        return Ok(false);
    }
    if local_stride == 0 || sym_stride == 0 {
        return Err(ShmemError::Invalid(format!(
            "{what} strides must be at least 1"
        )));
    }
    let last = (n - 1).checked_mul(local_stride).filter(|&l| l < local_len);
    if last.is_none() {
        return Err(ShmemError::Range(format!(
            "{what} {local_does}[{}] of {local_len}",
            (n - 1).saturating_mul(local_stride)
        )));
    }
    let end = (n - 1)
        .checked_mul(sym_stride)
        .and_then(|d| d.checked_add(idx))
        .ok_or_else(|| ShmemError::Range(format!("{what} stride overflows")))?;
    sym.range(end, 1)?;
    Ok(true)
}
