//! Atomic memory operations (`shmem_atomic_*`), 32- or 64-bit by the operand type, each one
//! call of `Transport::amo`: how an operation is done (a CPU atomic, a NIC atomic, a masked
//! swap, a compare-and-swap loop) is the transport's business.

use gda_hal::Provider;

use super::Pe;
use crate::error::{Result, ShmemError};
use crate::heap::Sym;
use crate::transport::{Amo, Transport};
use crate::types::AtomicInt;

impl<P: Provider> Pe<P> {
    /// Segment offset of the atomic operand `s[idx]`, which must be naturally aligned.
    #[inline]
    pub(super) fn amo_off<T: AtomicInt>(&self, s: Sym<T>, idx: usize) -> Result<usize> {
        let off = self.at(s, idx, 1)?;
        if off % size_of::<T>() != 0 {
            return Err(ShmemError::Range(format!(
                "atomic target {s:?}[{idx}] is not aligned"
            )));
        }
        Ok(off)
    }

    /// One atomic on `s[idx]` of `pe`; the old value when `fetch`.
    #[inline]
    fn amo<T: AtomicInt>(&self, s: Sym<T>, idx: usize, pe: u32, op: Amo, fetch: bool) -> Result<T> {
        let off = self.amo_off(s, idx)?;
        self.route(pe)?
            .amo(&self.net, off, T::WIDTH, op, fetch)
            .map(T::from_bits)
    }

    /// Atomic fetch (`shmem_atomic_fetch`).
    pub fn atomic_fetch<T: AtomicInt>(&self, s: Sym<T>, idx: usize, pe: u32) -> Result<T> {
        self.amo(s, idx, pe, Amo::Fetch, true)
    }

    /// Atomic set (`shmem_atomic_set`).
    pub fn atomic_set<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.amo(s, idx, pe, Amo::Set(v.to_bits()), false)
            .map(|_| ())
    }

    /// Atomic swap (`shmem_atomic_swap`): returns the old value.
    pub fn atomic_swap<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<T> {
        self.amo(s, idx, pe, Amo::Set(v.to_bits()), true)
    }

    /// Atomic compare-and-swap (`shmem_atomic_compare_swap`): returns the old value.
    pub fn atomic_compare_swap<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        cond: T,
        v: T,
        pe: u32,
    ) -> Result<T> {
        let op = Amo::CompareSwap {
            compare: cond.to_bits(),
            swap: v.to_bits(),
        };
        self.amo(s, idx, pe, op, true)
    }

    /// Atomic fetch-and-add.
    pub fn atomic_fetch_add<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        v: T,
        pe: u32,
    ) -> Result<T> {
        self.amo(s, idx, pe, Amo::Add(v.to_bits()), true)
    }

    /// Atomic add.
    pub fn atomic_add<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.amo(s, idx, pe, Amo::Add(v.to_bits()), false)
            .map(|_| ())
    }

    /// Atomic fetch-and-increment.
    pub fn atomic_fetch_inc<T: AtomicInt>(&self, s: Sym<T>, idx: usize, pe: u32) -> Result<T> {
        self.atomic_fetch_add(s, idx, T::from_bits(1), pe)
    }

    /// Atomic increment.
    pub fn atomic_inc<T: AtomicInt>(&self, s: Sym<T>, idx: usize, pe: u32) -> Result<()> {
        self.atomic_add(s, idx, T::from_bits(1), pe)
    }

    /// Atomic fetch-and-and.
    pub fn atomic_fetch_and<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        v: T,
        pe: u32,
    ) -> Result<T> {
        self.amo(s, idx, pe, Amo::And(v.to_bits()), true)
    }

    /// Atomic fetch-and-or.
    pub fn atomic_fetch_or<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<T> {
        self.amo(s, idx, pe, Amo::Or(v.to_bits()), true)
    }

    /// Atomic fetch-and-xor.
    pub fn atomic_fetch_xor<T: AtomicInt>(
        &self,
        s: Sym<T>,
        idx: usize,
        v: T,
        pe: u32,
    ) -> Result<T> {
        self.amo(s, idx, pe, Amo::Xor(v.to_bits()), true)
    }

    /// Atomic and.
    pub fn atomic_and<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.amo(s, idx, pe, Amo::And(v.to_bits()), false)
            .map(|_| ())
    }

    /// Atomic or.
    pub fn atomic_or<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.amo(s, idx, pe, Amo::Or(v.to_bits()), false)
            .map(|_| ())
    }

    /// Atomic xor.
    pub fn atomic_xor<T: AtomicInt>(&self, s: Sym<T>, idx: usize, v: T, pe: u32) -> Result<()> {
        self.amo(s, idx, pe, Amo::Xor(v.to_bits()), false)
            .map(|_| ())
    }
}
