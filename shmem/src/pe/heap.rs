//! The symmetric heap as a PE sees it: collective allocation, and this PE's own copy.

use std::sync::atomic::{Ordering, fence};

use gda_hal::{Provider, sym};

use super::{Pe, TEAM_BYTES};
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::statics::DATA_TAG;
use crate::types::Elem;

impl<P: Provider> Pe<P> {
    /// Collective: allocates `n` elements (uninitialised contents) with identical offsets on
    /// every PE; ends with a barrier, as `shmem_malloc` does.
    pub fn malloc<T: Elem>(&self, n: usize) -> Result<Sym<T>> {
        self.align::<T>(align_of::<T>().max(8), n)
    }

    /// Collective: as [`Pe::malloc`], zero-filled.
    pub fn calloc<T: Elem>(&self, n: usize) -> Result<Sym<T>> {
        let s = self.align_nobarrier::<T>(align_of::<T>().max(8), n)?;
        // SAFETY: the block is inside the heap and nobody else uses it before the barrier.
        unsafe { sym::sym_fill(self.base.add(s.off), 0, n * size_of::<T>()) };
        self.barrier_all()?;
        Ok(s)
    }

    /// Collective: `n` elements aligned to `alignment` bytes (a power of two). PEs may ask for
    /// different sizes (the offsets stay identical as long as every PE runs the same sequence
    /// of allocations); [`Pe::align_agreed`] checks that they do not.
    pub fn align<T: Elem>(&self, alignment: usize, n: usize) -> Result<Sym<T>> {
        let s = self.align_nobarrier(alignment, n)?;
        self.barrier_all()?;
        Ok(s)
    }

    /// Collective, as OpenSHMEM's `shmem_malloc`: every PE must ask for the same size and
    /// alignment. Allocates here, then checks with every PE (an all-gather, which is also the
    /// barrier the allocation ends with) that all asked for the same and all succeeded; a
    /// mismatch (or a PE whose heap is full) is an error on every PE, naming the sizes, and
    /// allocates nothing.
    pub fn align_agreed<T: Elem>(&self, alignment: usize, n: usize) -> Result<Sym<T>> {
        let mine = self.align_nobarrier::<T>(alignment, n);
        let bytes = n.saturating_mul(size_of::<T>());
        let align = alignment.max(align_of::<T>());
        // (bytes << 6) | log2(alignment); all ones: failed here (or too large to say).
        let word = match &mine {
            Ok(_) if bytes < 1 << 57 && align.is_power_of_two() => {
                ((bytes as u64) << 6) | u64::from(align.trailing_zeros())
            }
            _ => u64::MAX,
        };
        let all = self.team_allgather_u64(&self.team_world(), word)?;
        let disagree = all.iter().position(|&w| w != word);
        let failed = all.iter().position(|&w| w == u64::MAX);
        match (mine, disagree.or(failed)) {
            (Ok(s), None) => Ok(s),
            // Not reached (a failure here is all ones, so `failed` found it), but an error.
            (Err(e), None) => Err(e),
            (mine, Some(j)) => {
                if let Ok(s) = &mine {
                    self.heap.borrow_mut().free(s.off)?;
                }
                let what = |w: u64| {
                    if w == u64::MAX {
                        "an allocation that failed".to_string()
                    } else {
                        format!("{} bytes aligned to {}", w >> 6, 1u64 << (w & 63))
                    }
                };
                Err(mine.err().unwrap_or_else(|| {
                    ShmemError::Invalid(format!(
                        "collective allocation mismatch: PE {j} asked for {}, PE {} for {} \
                         (every PE must allocate the same size)",
                        what(all[j]),
                        self.me,
                        what(word)
                    ))
                }))
            }
        }
    }

    fn align_nobarrier<T: Elem>(&self, alignment: usize, n: usize) -> Result<Sym<T>> {
        let bytes = n.checked_mul(size_of::<T>()).ok_or_else(|| {
            ShmemError::Invalid(format!(
                "{n} elements of {} overflow",
                std::any::type_name::<T>()
            ))
        })?;
        let off = self
            .heap
            .borrow_mut()
            .alloc(bytes, alignment.max(align_of::<T>()))?;
        Ok(Sym::new(off, n, self.heap_id))
    }

    /// Collective: frees an allocation (after a barrier, so no PE still accesses it).
    pub fn free<T: Elem>(&self, s: Sym<T>) -> Result<()> {
        self.mine(&s)?;
        self.barrier_all()?;
        self.heap.borrow_mut().free(s.off)
    }

    /// Bytes usable from the start of the live allocation `s` begins (at least what was asked
    /// for; `shmem_realloc` copies this much at most).
    pub fn allocation_bytes<T: Elem>(&self, s: Sym<T>) -> Result<usize> {
        self.mine(&s)?;
        self.heap.borrow().usable(s.off).ok_or_else(|| {
            ShmemError::Invalid(format!("{s:?} is not the start of a live allocation"))
        })
    }

    /// Live allocations (for leak checks).
    #[must_use]
    pub fn allocations(&self) -> usize {
        self.heap.borrow().live()
    }

    /// Where the symmetric heap lives (host shared memory or GPU memory).
    #[must_use]
    pub fn heap_placement(&self) -> crate::HeapPlacement {
        self.seg.placement()
    }

    /// Heap size per PE.
    #[must_use]
    pub fn heap_size(&self) -> usize {
        self.heap_size
    }

    /// This PE's copy of `s`: a raw pointer for loads and stores (others may write it at any
    /// time; use [`Pe::read`]/[`Pe::write`] or atomics unless you synchronised).
    pub fn local_ptr<T: Elem>(&self, s: Sym<T>) -> Result<*mut T> {
        let off = self.at(s, 0, s.len)?;
        // `at` checked that `s` belongs to this heap (or the static data) and lies inside it.
        Ok(self.net.local(off).cast())
    }

    /// The symmetric object of `n` elements at `addr` in this PE's heap or static data: how
    /// callers that name symmetric memory by address (the OpenSHMEM C ABI) reach the routines.
    /// The range must lie in the user heap (not the team areas or staging) or in the static
    /// data ([`Config::static_data`](crate::Config::static_data)), and `addr` be aligned for
    /// `T`; it need not be a whole allocation or variable.
    pub fn sym_at<T: Elem>(&self, addr: *const T, n: usize) -> Result<Sym<T>> {
        let a = addr as usize;
        let bytes = n.checked_mul(size_of::<T>());
        let inside = |base: *mut u8, len: usize| {
            let off = a.checked_sub(base as usize)?;
            (!base.is_null() && off.checked_add(bytes?)? <= len).then_some(off)
        };
        let aligned = a % align_of::<T>() == 0;
        let off = match (
            inside(self.base, self.heap_size),
            inside(self.net.data, self.data_len),
        ) {
            (Some(off), _) => Some(off),
            (None, Some(off)) => Some(DATA_TAG + off),
            (None, None) => None,
        };
        match off {
            Some(off) if aligned => Ok(Sym::new(off, n, self.heap_id)),
            _ => Err(ShmemError::Range(format!(
                "{addr:p}..+{} bytes is not in PE {}'s symmetric heap [{:p}, {:p}){}{}",
                n.saturating_mul(size_of::<T>()),
                self.me,
                self.base,
                self.base.wrapping_add(self.heap_size),
                if self.net.data.is_null() {
                    String::new()
                } else {
                    format!(
                        " or its static data [{:p}, {:p})",
                        self.net.data,
                        self.net.data.wrapping_add(self.data_len)
                    )
                },
                if aligned { "" } else { " or is misaligned" }
            ))),
        }
    }

    /// This PE's symmetric regions in this address space: the user heap and the static data
    /// (null and 0 without), as (first byte, bytes). Callers that name symmetric memory by
    /// address use them to find it fast ([`Pe::remote_ptr`] gives a peer's mapping).
    #[must_use]
    pub fn symmetric_regions(&self) -> [(*mut u8, usize); 2] {
        [(self.base, self.heap_size), (self.net.data, self.data_len)]
    }

    /// Bytes from the start of `s` to the end of the symmetric region holding it (the user heap
    /// or the static data): the most a destination starting there may receive.
    pub fn room<T: Elem>(&self, s: Sym<T>) -> Result<usize> {
        self.mine(&s)?;
        Ok(if s.off >= DATA_TAG {
            (DATA_TAG + self.data_len).saturating_sub(s.off)
        } else {
            self.heap_size.saturating_sub(s.off)
        })
    }

    /// Where PE `pe`'s copy of `s` is mapped in this address space, when `pe` is reached by
    /// load/store (itself or a P2P peer); `None` for a PE reached by RDMA (`shmem_ptr`).
    pub fn remote_ptr<T: Elem>(&self, s: Sym<T>, pe: u32) -> Result<Option<*mut T>> {
        let off = self.at(s, 0, s.len)?;
        Ok(match self.route(pe)? {
            crate::transport::Route::P2p(p) => Some(p.mapped(off).cast()),
            crate::transport::Route::Rdma(_) => None,
        })
    }

    /// Refuses a `Sym` of another job's heap.
    #[inline]
    pub(super) fn mine<T: Elem>(&self, s: &Sym<T>) -> Result<()> {
        if s.heap == self.heap_id {
            Ok(())
        } else {
            Err(foreign(s, self.me))
        }
    }

    /// Byte offset of elements `[idx, idx + n)` of `s` in this PE's segment: `s` must belong
    /// to this job's heap and the range must lie in the allocation and in the symmetric part of
    /// the segment (overflow-checked).
    #[inline]
    pub(crate) fn at<T: Elem>(&self, s: Sym<T>, idx: usize, n: usize) -> Result<usize> {
        self.mine(&s)?;
        let off = s.range(idx, n)?;
        let end = n
            .checked_mul(size_of::<T>())
            .and_then(|b| off.checked_add(b));
        let limit = if off >= DATA_TAG {
            // Static data: `DATA_TAG + data_len` (0 without static data: nothing passes).
            DATA_TAG + self.data_len
        } else {
            self.bounce
        };
        match end {
            Some(e) if e <= limit => Ok(off),
            _ => Err(outside(&s, idx, n, self.me)),
        }
    }

    /// Reads element `idx` of this PE's copy (a volatile load).
    pub fn read<T: Elem>(&self, s: Sym<T>, idx: usize) -> Result<T> {
        let off = self.at(s, idx, 1)?;
        // SAFETY: in range and aligned (allocations are aligned for `T`); volatile because peers
        // write it behind the compiler's back.
        Ok(unsafe { sym::sym_read(self.net.local(off).cast::<T>()) })
    }

    /// Writes element `idx` of this PE's copy (a volatile store).
    pub fn write<T: Elem>(&self, s: Sym<T>, idx: usize, v: T) -> Result<()> {
        let off = self.at(s, idx, 1)?;
        // SAFETY: in range and aligned.
        unsafe { sym::sym_write(self.net.local(off).cast::<T>(), v) };
        Ok(())
    }

    /// Copies this PE's elements `[idx, idx + out.len())` out.
    pub fn copy_out<T: Elem>(&self, s: Sym<T>, idx: usize, out: &mut [T]) -> Result<()> {
        let off = self.at(s, idx, out.len())?;
        fence(Ordering::Acquire);
        // SAFETY: in range; `out` is a Rust slice of the same byte length.
        unsafe {
            sym::sym_copy(
                out.as_mut_ptr().cast(),
                self.net.local(off),
                size_of_val(out),
            );
        }
        Ok(())
    }

    /// Copies `src` into this PE's elements from `idx`.
    pub fn copy_in<T: Elem>(&self, s: Sym<T>, idx: usize, src: &[T]) -> Result<()> {
        let off = self.at(s, idx, src.len())?;
        // SAFETY: in range; `src` is a Rust slice of the same byte length.
        unsafe { sym::sym_copy(self.net.local(off), src.as_ptr().cast(), size_of_val(src)) };
        fence(Ordering::Release);
        Ok(())
    }

    /// Internal symmetric area of team slot `slot` (psync words, then scratch).
    pub(crate) fn team_area(&self, slot: usize) -> usize {
        self.internal + slot * TEAM_BYTES
    }
}

// The errors of `Pe::at` and `Pe::mine`, built out of line: the checks are on every put, get
// and atomic, and with the formatting inline they grew too large to inline themselves.
#[cold]
#[inline(never)]
fn outside<T: Elem>(s: &Sym<T>, idx: usize, n: usize, me: u32) -> ShmemError {
    ShmemError::Range(format!(
        "{s:?} elements {idx}..+{n} leave PE {me}'s symmetric memory"
    ))
}

#[cold]
#[inline(never)]
fn foreign<T: Elem>(s: &Sym<T>, me: u32) -> ShmemError {
    ShmemError::Invalid(format!(
        "{s:?} was allocated in another symmetric heap (another job or init) than PE {me}'s"
    ))
}
