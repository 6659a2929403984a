//! Completion channels: `ibv_create_comp_channel`, `ibv_get_cq_event`, `ibv_ack_cq_events`.
//!
//! A channel's `fd` is the read end of a pipe: one byte per event, so `poll`/`select` on it and
//! `O_NONBLOCK` behave as with a kernel channel. The CQ module raises the events (it watches
//! the CQs armed by `ibv_req_notify_cq`); a channel knows a CQ only as the `ibv_cq` pointer
//! `ibv_get_cq_event` hands back.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use ibverbs_sys as sys;

use crate::abi::{Errno, Handle, guard, handle, ret_code, ret_ptr, set_errno};
use crate::device::Context;

const CHANNEL_MAGIC: u64 = 0x6764_6176_5f63_6800; // "gdav_ch"

/// A completion channel: `ibv_comp_channel` first.
#[repr(C)]
pub(crate) struct Channel {
    /// What programs see (`fd` is the pipe's read end).
    ibv: sys::ibv_comp_channel,
    magic: u64,
    write_fd: c_int,
    /// The `ibv_cq`s with an event not yet taken by `ibv_get_cq_event`, oldest first.
    events: Mutex<VecDeque<usize>>,
    /// CQs using the channel (destruction is refused while any does).
    pub(crate) users: AtomicU32,
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
    pub(crate) unsafe fn from_ibv<'a>(
        ch: *mut sys::ibv_comp_channel,
    ) -> Result<&'a Channel, Errno> {
        // SAFETY: the caller's contract.
        unsafe { handle(ch.cast()) }
    }

    /// The context it belongs to.
    pub(crate) fn context(&self) -> *mut sys::ibv_context {
        self.ibv.context
    }

    /// Gives the program an event for `cq` (a live CQ of this library, until [`Channel::forget`]
    /// of it).
    pub(crate) fn raise(&self, cq: *mut sys::ibv_cq) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(cq as usize);
        let b = 1u8;
        // SAFETY: writing one byte from `b` to our pipe (non-blocking: a full pipe only means
        // the reader has at least that many events to take).
        unsafe { libc::write(self.write_fd, std::ptr::from_ref(&b).cast(), 1) };
    }

    /// Drops pending events of a CQ being destroyed.
    pub(crate) fn forget(&self, cq: *mut sys::ibv_cq) {
        let p = cq as usize;
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
        let cq = p as *mut sys::ibv_cq;
        // SAFETY: the event queue holds only live CQs (destroy removes them first); the
        // program's out pointers (checked non-null).
        unsafe {
            *cq_out = cq;
            *cq_context = (*cq).cq_context;
        }
        0
    })
}
