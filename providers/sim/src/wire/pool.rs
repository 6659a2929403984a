//! Payload buffers, used again: a payload that cannot go straight between registered memory and
//! a ring (a large WRITE or SEND staged while the ring is full, a READ response or a request
//! that has not arrived whole, a SEND held for its receive) is a buffer, and allocating and
//! freeing one per message made glibc give the memory back to the kernel and fault it in again
//! every time (`wire_rate`: a 64-KiB READ cost 27–40 µs with 16 outstanding,
//! 6.5 µs once the heap was kept). A few buffers of at most [`KEEP_BYTES`] in all stay here
//! between messages.

use std::sync::Mutex;

/// Bytes of buffers kept, at most.
const KEEP_BYTES: usize = 8 << 20;
/// Buffers kept, at most.
const KEEP_MAX: usize = 16;
/// Smaller buffers are not worth keeping (malloc reuses them cheaply).
const SMALLEST: usize = 4096;

struct Pool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    bufs: Vec::new(),
    bytes: 0,
});

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An empty buffer with room for `len` bytes: a kept one when one is large enough.
pub(crate) fn take(len: usize) -> Vec<u8> {
    if len >= SMALLEST {
        let mut p = pool();
        if let Some(i) = p.bufs.iter().position(|b| b.capacity() >= len) {
            let b = p.bufs.swap_remove(i);
            p.bytes -= b.capacity();
            return b;
        }
    }
    Vec::with_capacity(len)
}

/// Keeps `buf` for a later [`take`] (when it is worth keeping and there is room).
pub(crate) fn recycle(mut buf: Vec<u8>) {
    let cap = buf.capacity();
    if !(SMALLEST..=KEEP_BYTES / 2).contains(&cap) {
        return;
    }
    let mut p = pool();
    if p.bufs.len() < KEEP_MAX && p.bytes + cap <= KEEP_BYTES {
        buf.clear();
        p.bytes += cap;
        p.bufs.push(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_and_the_pool_stays_bounded() {
        let mut b = take(64 << 10);
        b.extend_from_slice(&[7; 100]);
        let at = b.as_ptr();
        recycle(b);
        let again = take(32 << 10);
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), at, "the kept buffer is used again");
        // Too large or too small to keep: dropped.
        recycle(Vec::with_capacity(KEEP_BYTES));
        recycle(Vec::with_capacity(16));
        for _ in 0..4 * KEEP_MAX {
            recycle(Vec::with_capacity(1 << 20));
        }
        let p = pool();
        assert!(p.bufs.len() <= KEEP_MAX && p.bytes <= KEEP_BYTES);
        assert!(
            p.bufs
                .iter()
                .all(|b| b.capacity() < KEEP_BYTES && b.is_empty())
        );
    }
}
