//! Completion channels: `ibv_create_comp_channel`, `ibv_get_cq_event`, `ibv_ack_cq_events`.
//!
//! A channel's `fd` is the read end of a pipe: one byte per event, so `poll`/`select` on it and
//! `O_NONBLOCK` behave as with a kernel channel. The software NIC writes CQEs without
//! interrupts, so one event thread per process watches the armed CQs (a CQ is armed by
//! `ibv_req_notify_cq` until its next event): when a CQE waits at an armed CQ's consumer index,
//! the CQ is disarmed and its channel gets the event. The thread sleeps while nothing is armed
//! and polls with a short back-off (50 µs to 1 ms) while something is.

use std::collections::VecDeque;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use ibverbs_sys as sys;

use crate::abi::{Errno, Handle, guard, handle, ret_code, ret_ptr, set_errno};
use crate::cq::Cq;
use crate::device::Context;

const CHANNEL_MAGIC: u64 = 0x6764_6176_5f63_6800; // "gdav_ch"

/// A completion channel: `ibv_comp_channel` first.
#[repr(C)]
pub struct Channel {
    /// What programs see (`fd` is the pipe's read end).
    pub ibv: sys::ibv_comp_channel,
    magic: u64,
    write_fd: c_int,
    /// CQs with an event not yet taken by `ibv_get_cq_event`, oldest first.
    events: Mutex<VecDeque<usize>>,
    /// CQs using the channel (destruction is refused while any does).
    pub users: AtomicU32,
    ctx: &'static Context,
}

// SAFETY: repr(C) with `ibv_comp_channel` first; `magic` follows it.
unsafe impl Handle for Channel {
    const TAG: u64 = CHANNEL_MAGIC;
    const WHAT: &'static str = "completion channel";
    fn tag(&self) -> u64 {
        self.magic
    }
}

impl Channel {
    /// The channel behind `ch`.
    ///
    /// # Safety
    /// `ch` is null or points to a live `ibv_comp_channel`.
    pub unsafe fn from_ibv<'a>(ch: *mut sys::ibv_comp_channel) -> Result<&'a Channel, Errno> {
        // SAFETY: the caller's contract.
        unsafe { handle(ch.cast()) }
    }

    fn raise(&self, cq: &Cq) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(std::ptr::from_ref(cq) as usize);
        let b = 1u8;
        // SAFETY: writing one byte from `b` to our pipe (non-blocking: a full pipe only means
        // the reader has at least that many events to take).
        unsafe { libc::write(self.write_fd, std::ptr::from_ref(&b).cast(), 1) };
    }

    /// Drops pending events of a CQ being destroyed.
    pub fn forget(&self, cq: &Cq) {
        let p = std::ptr::from_ref(cq) as usize;
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&x| x != p);
    }
}

#[unsafe(no_mangle)]
/// `ibv_create_comp_channel`.
pub unsafe extern "C" fn gdav_ibv_create_comp_channel(
    ctx: *mut sys::ibv_context,
) -> *mut sys::ibv_comp_channel {
    guard("ibv_create_comp_channel", std::ptr::null_mut(), || {
        let r = (|| {
            // SAFETY: the caller's context (checked).
            let c: &'static Context = unsafe { Context::from_ibv(ctx) }?;
            let mut fds = [0 as c_int; 2];
            // SAFETY: pipe2 writes two fds into `fds`.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(Errno::new(
                    libc::EMFILE,
                    "no file descriptors for the channel",
                ));
            }
            // The write end never blocks the event thread.
            // SAFETY: fcntl on our own fd.
            unsafe { libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK) };
            let ch = Box::new(Channel {
                ibv: sys::ibv_comp_channel {
                    context: ctx,
                    fd: fds[0],
                    refcnt: 0,
                },
                magic: CHANNEL_MAGIC,
                write_fd: fds[1],
                events: Mutex::new(VecDeque::new()),
                users: AtomicU32::new(0),
                ctx: c,
            });
            c.retain();
            Ok(Box::into_raw(ch).cast::<sys::ibv_comp_channel>())
        })();
        ret_ptr("ibv_create_comp_channel", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_destroy_comp_channel`: `EBUSY` while CQs use it.
pub unsafe extern "C" fn gdav_ibv_destroy_comp_channel(ch: *mut sys::ibv_comp_channel) -> c_int {
    guard("ibv_destroy_comp_channel", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's channel (checked).
            let c = unsafe { Channel::from_ibv(ch) }?;
            let users = c.users.load(Ordering::Acquire);
            if users > 0 {
                return Err(Errno::new(
                    libc::EBUSY,
                    format!("channel used by {users} CQs"),
                ));
            }
            let ctx = c.ctx;
            // SAFETY: our fds; the Box was made by `ibv_create_comp_channel`.
            unsafe {
                libc::close(c.ibv.fd);
                libc::close(c.write_fd);
                (*ch.cast::<Channel>()).magic = 0;
                drop(Box::from_raw(ch.cast::<Channel>()));
            }
            ctx.release();
            Ok(())
        })();
        ret_code("ibv_destroy_comp_channel", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_get_cq_event`: waits (unless the fd is non-blocking) for the next event.
pub unsafe extern "C" fn gdav_ibv_get_cq_event(
    ch: *mut sys::ibv_comp_channel,
    cq_out: *mut *mut sys::ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    guard("ibv_get_cq_event", -1, || {
        // SAFETY: the caller's channel (checked).
        let Ok(c) = (unsafe { Channel::from_ibv(ch) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if cq_out.is_null() || cq_context.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        let mut b = 0u8;
        // SAFETY: reading one byte from the channel's pipe into `b`.
        let n = unsafe { libc::read(c.ibv.fd, std::ptr::from_mut(&mut b).cast(), 1) };
        if n != 1 {
            // errno is read's (EAGAIN for a non-blocking fd, EINTR, …).
            return -1;
        }
        let Some(p) = c
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
        else {
            // The CQ was destroyed after raising the event.
            set_errno(libc::EAGAIN);
            return -1;
        };
        let cq = p as *mut Cq;
        // SAFETY: the event queue holds only live CQs (destroy removes them first).
        unsafe {
            *cq_out = std::ptr::addr_of_mut!((*cq).ex).cast();
            *cq_context = (*cq).ex.cq_context;
        }
        0
    })
}

#[unsafe(no_mangle)]
/// `ibv_ack_cq_events`.
pub unsafe extern "C" fn gdav_ibv_ack_cq_events(cq: *mut sys::ibv_cq, n: c_uint) {
    // SAFETY: the caller's CQ (checked).
    if let Ok(c) = unsafe { Cq::from_ibv(cq) } {
        let p = std::ptr::addr_of!(c.ex.comp_events_completed).cast_mut();
        let _g = c.poll.lock();
        // SAFETY: a counter the program only reads; updated under the CQ's poll lock.
        unsafe { *p = (*p).wrapping_add(n) };
    }
}

struct Watch {
    armed: Mutex<Vec<usize>>,
    wake: Condvar,
}

fn watch() -> &'static Watch {
    static W: OnceLock<Watch> = OnceLock::new();
    W.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("gda-verbs-events".into())
            .spawn(event_thread);
        Watch {
            armed: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }
    })
}

/// Arms `cq`: its channel gets an event for the next completion.
pub fn arm(cq: &Cq) {
    let w = watch();
    let mut a = w.armed.lock().unwrap_or_else(|e| e.into_inner());
    let p = std::ptr::from_ref(cq) as usize;
    if !a.contains(&p) {
        a.push(p);
    }
    w.wake.notify_one();
}

/// Disarms `cq` (it is being destroyed).
pub fn disarm(cq: &Cq) {
    let p = std::ptr::from_ref(cq) as usize;
    watch()
        .armed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&x| x != p);
}

fn event_thread() {
    let w = watch();
    let mut nap = Duration::from_micros(50);
    loop {
        let mut a = w.armed.lock().unwrap_or_else(|e| e.into_inner());
        while a.is_empty() {
            a = w.wake.wait(a).unwrap_or_else(|e| e.into_inner());
            nap = Duration::from_micros(50);
        }
        let mut fired = false;
        a.retain(|&p| {
            // SAFETY: armed CQs are alive (destroy disarms under this lock first).
            let cq = unsafe { &*(p as *const Cq) };
            if cq.has_completion() {
                if let Some(ch) = cq.channel_ref() {
                    ch.raise(cq);
                }
                fired = true;
                false
            } else {
                true
            }
        });
        drop(a);
        nap = if fired {
            Duration::from_micros(50)
        } else {
            (nap * 2).min(Duration::from_millis(1))
        };
        std::thread::sleep(nap);
    }
}
