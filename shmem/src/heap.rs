//! The symmetric heap's allocator.
//!
//! Every PE runs the same sequence of collective allocations and frees on an allocator of the
//! same size, so the offsets are identical everywhere without any exchange: first fit over a
//! sorted free list, adjacent blocks merged on free. Offsets, not addresses, name symmetric
//! objects; each PE adds its own (or a peer's) base.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use crate::error::{Result, ShmemError};
use crate::types::Elem;

/// A symmetric array of `len` `T`s: the same offset on every PE. `Copy`; freed with
/// [`crate::Pe::free`].
///
/// A `Sym` belongs to the symmetric heap of the job that allocated it (a random id agreed at
/// init): the PEs of that job accept it, any other `Pe` refuses it with an error, so an offset
/// valid in one heap can never be used in a smaller one.
pub struct Sym<T> {
    pub(crate) off: usize,
    pub(crate) len: usize,
    pub(crate) heap: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Sym<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Sym<T> {}

impl<T> std::fmt::Debug for Sym<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Sym<{}>[{}] @{:#x}",
            std::any::type_name::<T>(),
            self.len,
            self.off
        )
    }
}

impl<T: Elem> Sym<T> {
    pub(crate) fn new(off: usize, len: usize, heap: u64) -> Self {
        Self {
            off,
            len,
            heap,
            _t: PhantomData,
        }
    }

    /// Elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Byte offset in the symmetric heap.
    #[must_use]
    pub fn offset(&self) -> usize {
        self.off
    }

    /// Byte offset of elements `[idx, idx + n)`, checked against the allocation
    /// (overflow-safe; the heap it belongs to is checked by the `Pe`).
    #[inline]
    pub(crate) fn range(&self, idx: usize, n: usize) -> Result<usize> {
        let at = idx
            .checked_mul(size_of::<T>())
            .and_then(|b| self.off.checked_add(b));
        match (idx.checked_add(n), at) {
            (Some(end), Some(at)) if end <= self.len => Ok(at),
            _ => Err(self.out_of_range(idx, n)),
        }
    }

    /// [`Sym::range`]'s error, built out of line (the check is on every routine's path).
    #[cold]
    #[inline(never)]
    fn out_of_range(&self, idx: usize, n: usize) -> ShmemError {
        ShmemError::Range(format!(
            "elements {idx}..{} of {self:?}",
            idx.saturating_add(n)
        ))
    }

    /// The sub-array `[idx, idx + n)`.
    pub fn slice(&self, idx: usize, n: usize) -> Result<Self> {
        Ok(Self::new(self.range(idx, n)?, n, self.heap))
    }
}

/// First-fit allocator over `[0, size)`.
#[derive(Debug)]
pub(crate) struct Allocator {
    size: usize,
    /// Free blocks: offset → length.
    free: BTreeMap<usize, usize>,
    /// Live blocks: offset → (block start, block length) (alignment may leave a head gap).
    live: BTreeMap<usize, (usize, usize)>,
}

pub use crate::types::MAX_ALIGN;

impl Allocator {
    pub(crate) fn new(size: usize) -> Self {
        let mut free = BTreeMap::new();
        if size > 0 {
            free.insert(0, size);
        }
        Self {
            size,
            free,
            live: BTreeMap::new(),
        }
    }

    /// Allocates `bytes` aligned to `align` (a power of two); zero bytes get a distinct 1-byte
    /// block so every allocation has its own offset.
    pub(crate) fn alloc(&mut self, bytes: usize, align: usize) -> Result<usize> {
        if !align.is_power_of_two() {
            return Err(ShmemError::Invalid(format!(
                "alignment {align} is not a power of two"
            )));
        }
        let oom = |free| ShmemError::OutOfMemory {
            requested: bytes,
            align,
            free,
            heap: self.size,
        };
        // Offsets are aligned, and the heap's start is aligned to MAX_ALIGN in every PE's
        // address space: up to that, an aligned offset is an aligned address everywhere.
        if align > MAX_ALIGN {
            return Err(oom(0));
        }
        let need = bytes.max(1);
        let found = self.free.iter().find_map(|(&start, &len)| {
            let at = start.checked_add(align - 1)? & !(align - 1);
            let end = at.checked_add(need)?;
            (end <= start + len).then_some((start, len, at, end))
        });
        let Some((start, len, at, end)) = found else {
            return Err(oom(self.free.values().copied().max().unwrap_or(0)));
        };
        self.free.remove(&start);
        if end < start + len {
            self.free.insert(end, start + len - end);
        }
        self.live.insert(at, (start, end - start));
        Ok(at)
    }

    pub(crate) fn free(&mut self, off: usize) -> Result<()> {
        let (mut start, mut len) = self.live.remove(&off).ok_or_else(|| {
            ShmemError::Invalid(format!(
                "free of offset {off:#x}, which is not a live allocation"
            ))
        })?;
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            if ps + pl == start {
                self.free.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(start + len)) {
            self.free.remove(&(start + len));
            len += nl;
        }
        self.free.insert(start, len);
        Ok(())
    }

    /// Usable bytes of the live allocation at `off` (`None` if there is none).
    pub(crate) fn usable(&self, off: usize) -> Option<usize> {
        self.live.get(&off).map(|&(start, len)| start + len - off)
    }

    pub(crate) fn live(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_fit_align_merge_and_errors() {
        let mut a = Allocator::new(1024);
        let x = a.alloc(100, 8).unwrap();
        let y = a.alloc(10, 256).unwrap();
        assert_eq!((x, y), (0, 256));
        assert!(matches!(
            a.alloc(2000, 8),
            Err(ShmemError::OutOfMemory { .. })
        ));
        assert!(a.alloc(8, 3).is_err());
        a.free(x).unwrap();
        assert!(a.free(x).is_err(), "double free");
        a.free(y).unwrap();
        assert_eq!(a.alloc(1024, 8).unwrap(), 0, "blocks merged back");
    }

    proptest! {
        /// Random alloc/free sequences: blocks never overlap, stay inside the heap, and two
        /// allocators fed the same sequence agree (what makes the heap symmetric).
        #[test]
        fn never_overlap_and_deterministic(ops in proptest::collection::vec((0usize..3, 0usize..300, 0u32..7), 1..200)) {
            let (mut a, mut b) = (Allocator::new(8192), Allocator::new(8192));
            let mut live: Vec<(usize, usize)> = Vec::new();
            for (kind, n, al) in ops {
                if kind == 0 && !live.is_empty() {
                    let (off, _) = live.remove(n % live.len());
                    a.free(off).unwrap();
                    b.free(off).unwrap();
                } else {
                    let ra = a.alloc(n, 1 << al);
                    let rb = b.alloc(n, 1 << al);
                    prop_assert_eq!(ra.as_ref().ok(), rb.as_ref().ok());
                    if let Ok(off) = ra {
                        prop_assert_eq!(off % (1 << al), 0);
                        prop_assert!(off + n.max(1) <= 8192);
                        for &(o, l) in &live {
                            prop_assert!(off + n.max(1) <= o || o + l <= off, "overlap");
                        }
                        live.push((off, n.max(1)));
                    }
                }
            }
        }
    }
}
