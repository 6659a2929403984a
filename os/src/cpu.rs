//! CPU affinity: the CPU sets of threads as lists of CPU numbers, and the kernel's list form
//! (`0-3,8,10-11`, as `taskset -c` and `/proc/*/status` write it). Used by `gdarun`'s binding
//! and the software NIC's engine placement.

use std::io;

pub use rustix::process::Pid;
use rustix::thread::CpuSet;

/// CPU numbers the kernel interface can name (`0..MAX`).
pub const MAX: usize = CpuSet::MAX_CPU;

/// The set holding `cpus` (numbers at or above [`MAX`] are left out).
#[must_use]
pub fn set_of(cpus: &[usize]) -> CpuSet {
    let mut set = CpuSet::new();
    cpus.iter().filter(|&&c| c < MAX).for_each(|&c| set.set(c));
    set
}

/// The CPUs a thread may run on, in increasing order (`None`: the calling thread).
pub fn allowed(thread: Option<Pid>) -> io::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(thread)?;
    Ok((0..MAX).filter(|&c| set.is_set(c)).collect())
}

/// Restricts the calling thread (and the threads it starts later) to `cpus`. Makes one system
/// call on a set built before it, allocates nothing: usable between fork and exec.
pub fn restrict(set: &CpuSet) -> io::Result<()> {
    rustix::thread::sched_setaffinity(None, set).map_err(io::Error::from)
}

/// Writes a CPU list as the kernel does (`0-3,8,10-11`); `cpus` sorted.
#[must_use]
pub fn format_list(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j == i {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Reads a CPU list (`0-3,8,10-11`) into sorted, distinct CPU numbers below [`MAX`]; the
/// error says what is wrong with it.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut set = std::collections::BTreeSet::new();
    for part in s.trim().split(',') {
        let num = |t: &str| -> Result<usize, String> {
            let c: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("{t:?} is not a CPU number"))?;
            if c >= MAX {
                return Err(format!("CPU {c} is not below {MAX}"));
            }
            Ok(c)
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if a > b {
            return Err(format!("range {a}-{b} runs backwards"));
        }
        set.extend(a..=b);
    }
    Ok(set.into_iter().collect())
}

/// Asks the scheduler for a short time slice (`slice`, which Linux clamps to 0.1–100 ms) for
/// the calling thread, keeping its policy and priority: with the EEVDF scheduler (Linux 6.12
/// and later) a woken thread with a shorter slice gets an earlier deadline, so it runs soon
/// after its wake-up instead of after the running thread's slice — what a thread standing in
/// for a device (the software NIC's engine) needs on a host where every core is busy. Needs no
/// privilege; an older kernel ignores the field (`Ok`) or refuses the call (the error).
pub fn request_short_slice(slice: std::time::Duration) -> io::Result<()> {
    // `struct sched_attr` (include/uapi/linux/sched/types.h), version 1 (56 bytes).
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        sched_policy: u32,
        sched_flags: u64,
        sched_nice: i32,
        sched_priority: u32,
        sched_runtime: u64,
        sched_deadline: u64,
        sched_period: u64,
        sched_util_min: u32,
        sched_util_max: u32,
    }
    let nice = rustix::process::getpriority_process(None).unwrap_or(0);
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: 0, // SCHED_OTHER
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: slice.as_nanos().min(u128::from(u64::MAX)) as u64,
        sched_deadline: 0,
        sched_period: 0,
        sched_util_min: 0,
        sched_util_max: 0,
    };
    // SAFETY: sched_setattr(2) on the calling thread (pid 0) with a valid, fully initialised
    // attribute block of the size it names; the kernel only reads it.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &raw const attr, 0u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
