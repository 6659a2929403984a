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
