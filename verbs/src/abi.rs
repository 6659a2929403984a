//! The C side: rdma-core's extended context (`struct verbs_context`, defined once in
//! [`gda_rdma::abi`], whose callers read it too), errno, and the guard every exported function
//! runs its body in.

use std::ffi::c_int;
use std::ffi::c_void;

pub use gda_rdma::abi::{VERBS_ABI_IS_EXTENDED, VerbsContext};

/// Sets the calling thread's `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno slot, valid for the thread's life.
    unsafe { *libc::__errno_location() = e };
}

/// Whether `GDA_VERBS_TRACE` asks for a line on stderr per refused or unsupported call.
pub fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("GDA_VERBS_TRACE").is_some_and(|v| v != "0"))
}

/// A line on stderr when tracing is on.
pub fn trace(what: std::fmt::Arguments<'_>) {
    if tracing() {
        eprintln!("gda-verbs: {what}");
    }
}

/// What a symbol this library does not implement does: `errno = EOPNOTSUPP`, return it.
pub fn unsupported(name: &str) -> c_int {
    trace(format_args!("{name}: not supported by the software NIC"));
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}

/// Runs an exported function's body; a panic (a bug here, never the caller's input) becomes
/// `on_panic` with `errno = EIO` instead of unwinding into C.
pub fn guard<T>(name: &str, on_panic: T, body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(_) => {
            eprintln!("gda-verbs: internal error in {name}; returning EIO");
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// A verbs error: the errno a kernel driver returns, and a line for `GDA_VERBS_TRACE` saying
/// which check refused the call.
#[derive(Debug)]
pub struct Errno {
    /// The errno value (positive).
    pub code: c_int,
    /// Why (for the trace).
    pub why: String,
}

impl Errno {
    /// `code` because of `why`.
    pub fn new(code: c_int, why: impl Into<String>) -> Self {
        Self {
            code,
            why: why.into(),
        }
    }

    /// `EINVAL` because of `why`.
    pub fn inval(why: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, why)
    }
}

/// Reports `r` in the style of verbs calls that return an errno (0 on success): traces the
/// reason, sets `errno` too (as rdma-core does) and returns the code.
pub fn ret_code(name: &str, r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            trace(format_args!("{name}: {} ({})", e.why, errno_name(e.code)));
            set_errno(e.code);
            e.code
        }
    }
}

/// Reports `r` in the style of verbs calls that return a pointer: NULL with `errno` set.
pub fn ret_ptr<T>(name: &str, r: Result<*mut T, Errno>) -> *mut T {
    match r {
        Ok(p) => p,
        Err(e) => {
            trace(format_args!("{name}: {} ({})", e.why, errno_name(e.code)));
            set_errno(e.code);
            std::ptr::null_mut()
        }
    }
}

fn errno_name(code: c_int) -> &'static str {
    match code {
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::EBUSY => "EBUSY",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ENOENT => "ENOENT",
        libc::EAGAIN => "EAGAIN",
        libc::EIO => "EIO",
        _ => "errno",
    }
}

/// An object this library hands to programs as a pointer to its first member (the C struct
/// they see), with a tag after that member telling a pointer of ours from anything else.
///
/// # Safety
/// Implementors are `repr(C)` with the C struct first; `tag` reads a field after it.
pub unsafe trait Handle: Sized {
    /// The tag of a live object.
    const TAG: u64;
    /// What it is, for messages ("PD", "CQ", …).
    const WHAT: &'static str;
    /// The object's tag (cleared when it is destroyed).
    fn tag(&self) -> u64;
}

/// The object of type `T` behind `p`, or `EINVAL` for a null or foreign pointer.
///
/// # Safety
/// `p` is null or points to a live object whose C struct is `T`'s first member (of this library
/// or of another, whose memory extends at least as far as `T`'s tag).
pub unsafe fn handle<'a, T: Handle>(p: *const c_void) -> Result<&'a T, Errno> {
    if p.is_null() {
        return Err(Errno::inval(format!("null {}", T::WHAT)));
    }
    // SAFETY: the caller's contract; the tag is checked before anything else is used.
    let t = unsafe { &*p.cast::<T>() };
    if t.tag() != T::TAG {
        return Err(Errno::inval(format!("not a {} of this library", T::WHAT)));
    }
    Ok(t)
}

/// Copies `s` into a fixed C string field, truncated and NUL-terminated.
pub fn put_cstr(dst: &mut [std::ffi::c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as std::ffi::c_char;
    }
    if let Some(z) = dst.get_mut(n) {
        *z = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, c_char};
    use std::mem::offset_of;

    #[repr(C)]
    struct Field {
        name: *const c_char,
        value: std::ffi::c_long,
    }
    unsafe extern "C" {
        static gdav_c_layout: [Field; 40];
    }

    /// `VerbsContext` has the size and member offsets the C compiler gives
    /// `struct verbs_context` (csrc/layout.c, compiled against the system's verbs.h).
    #[test]
    fn verbs_context_matches_c() {
        let ours = [
            ("sizeof", size_of::<VerbsContext>()),
            ("query_port", offset_of!(VerbsContext, query_port)),
            ("advise_mr", offset_of!(VerbsContext, advise_mr)),
            ("alloc_null_mr", offset_of!(VerbsContext, alloc_null_mr)),
            ("read_counters", offset_of!(VerbsContext, read_counters)),
            (
                "attach_counters_point_flow",
                offset_of!(VerbsContext, attach_counters_point_flow),
            ),
            ("create_counters", offset_of!(VerbsContext, create_counters)),
            (
                "destroy_counters",
                offset_of!(VerbsContext, destroy_counters),
            ),
            ("reg_dm_mr", offset_of!(VerbsContext, reg_dm_mr)),
            ("alloc_dm", offset_of!(VerbsContext, alloc_dm)),
            ("free_dm", offset_of!(VerbsContext, free_dm)),
            (
                "modify_flow_action_esp",
                offset_of!(VerbsContext, modify_flow_action_esp),
            ),
            (
                "destroy_flow_action",
                offset_of!(VerbsContext, destroy_flow_action),
            ),
            (
                "create_flow_action_esp",
                offset_of!(VerbsContext, create_flow_action_esp),
            ),
            (
                "modify_qp_rate_limit",
                offset_of!(VerbsContext, modify_qp_rate_limit),
            ),
            (
                "alloc_parent_domain",
                offset_of!(VerbsContext, alloc_parent_domain),
            ),
            ("dealloc_td", offset_of!(VerbsContext, dealloc_td)),
            ("alloc_td", offset_of!(VerbsContext, alloc_td)),
            ("modify_cq", offset_of!(VerbsContext, modify_cq)),
            ("post_srq_ops", offset_of!(VerbsContext, post_srq_ops)),
            (
                "destroy_rwq_ind_table",
                offset_of!(VerbsContext, destroy_rwq_ind_table),
            ),
            (
                "create_rwq_ind_table",
                offset_of!(VerbsContext, create_rwq_ind_table),
            ),
            ("destroy_wq", offset_of!(VerbsContext, destroy_wq)),
            ("modify_wq", offset_of!(VerbsContext, modify_wq)),
            ("create_wq", offset_of!(VerbsContext, create_wq)),
            ("query_rt_values", offset_of!(VerbsContext, query_rt_values)),
            ("create_cq_ex", offset_of!(VerbsContext, create_cq_ex)),
            ("priv", offset_of!(VerbsContext, priv_)),
            ("query_device_ex", offset_of!(VerbsContext, query_device_ex)),
            (
                "ibv_destroy_flow",
                offset_of!(VerbsContext, ibv_destroy_flow),
            ),
            ("ibv_create_flow", offset_of!(VerbsContext, ibv_create_flow)),
            ("open_qp", offset_of!(VerbsContext, open_qp)),
            ("create_qp_ex", offset_of!(VerbsContext, create_qp_ex)),
            ("get_srq_num", offset_of!(VerbsContext, get_srq_num)),
            ("create_srq_ex", offset_of!(VerbsContext, create_srq_ex)),
            ("open_xrcd", offset_of!(VerbsContext, open_xrcd)),
            ("close_xrcd", offset_of!(VerbsContext, close_xrcd)),
            ("sz", offset_of!(VerbsContext, sz)),
            ("context", offset_of!(VerbsContext, context)),
        ];
        let mut compared = 0;
        // SAFETY: the C table is NUL-terminated by a { 0, 0 } entry with 39 entries before it.
        let c = unsafe { &gdav_c_layout };
        for (i, (name, off)) in ours.iter().enumerate() {
            // SAFETY: every entry before the terminator has a static C string name.
            let cname = unsafe { CStr::from_ptr(c[i].name) }.to_str().unwrap();
            assert_eq!(cname, *name);
            assert_eq!(c[i].value as usize, *off, "verbs_context.{name}");
            compared += 1;
        }
        assert!(c[ours.len()].name.is_null());
        assert_eq!(compared, 39);
    }
}
