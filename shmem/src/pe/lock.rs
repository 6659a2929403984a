//! Distributed locks (`shmem_set_lock`, `shmem_test_lock`, `shmem_clear_lock`): a symmetric
//! `i64` (OpenSHMEM's `long`, zero-initialised by the program) whose copy on PE 0 holds 0 while
//! the lock is free and the holder's PE number + 1 while it is held. Taking it is one
//! compare-and-swap on PE 0; releasing it completes this PE's accesses (a quiet) first, so
//! what it did under the lock is visible to the next holder.

use gda_hal::Provider;

use super::Pe;
use crate::error::{Result, ShmemError};
use crate::heap::Sym;

/// The PE whose copy of a lock word is the lock.
const LOCK_HOME: u32 = 0;

impl<P: Provider> Pe<P> {
    /// Takes the lock `lock[idx]` if it is free: `Ok(true)` when this PE now holds it,
    /// `Ok(false)` when another PE does (`shmem_test_lock` returns the opposite).
    ///
    /// # Errors
    /// [`ShmemError::Invalid`] if this PE already holds it (locks are not recursive); the
    /// atomic's own errors.
    pub fn test_lock(&self, lock: Sym<i64>, idx: usize) -> Result<bool> {
        let me = i64::from(self.me) + 1;
        let old = self.atomic_compare_swap(lock, idx, 0, me, LOCK_HOME)?;
        if old == me {
            return Err(ShmemError::Invalid(
                "this PE already holds the lock (locks are not recursive)".into(),
            ));
        }
        Ok(old == 0)
    }

    /// Waits until this PE holds the lock `lock[idx]` (bounded by the PE's timeout).
    ///
    /// # Errors
    /// As [`Pe::test_lock`], and a timeout naming the lock's holder.
    pub fn set_lock(&self, lock: Sym<i64>, idx: usize) -> Result<()> {
        self.wait_on(&|| format!("the lock {lock:?}[{idx}]"), || {
            self.test_lock(lock, idx)
        })
    }

    /// Completes this PE's accesses (quiet), then releases the lock `lock[idx]`.
    ///
    /// # Errors
    /// [`ShmemError::Invalid`] if this PE does not hold it (naming who does, if anyone); the
    /// quiet's and the atomic's own errors.
    pub fn clear_lock(&self, lock: Sym<i64>, idx: usize) -> Result<()> {
        self.quiet()?;
        let me = i64::from(self.me) + 1;
        let old = self.atomic_compare_swap(lock, idx, me, 0, LOCK_HOME)?;
        if old != me {
            return Err(ShmemError::Invalid(format!(
                "the lock is not held by this PE ({})",
                if old == 0 {
                    "it is free".to_string()
                } else {
                    format!("PE {} holds it", old - 1)
                }
            )));
        }
        Ok(())
    }
}
