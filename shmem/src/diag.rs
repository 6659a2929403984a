//! Diagnostics on stderr that can neither abort their writer nor interleave.
//!
//! `eprintln!` panics when stderr fails (`2>/dev/full`, a closed pipe): a launcher that
//! panics while reporting a failure leaves its PEs running as orphans and their shared memory
//! behind. And it may split one line over several `write`s, so lines of PEs sharing one
//! terminal interleave mid-line. Here each line is formatted first and written with one
//! `write_all` (one `write(2)` below `PIPE_BUF`, which the kernel keeps whole on a pipe), and a
//! failed write is dropped: a diagnostic is never worth more than the job it describes.

use std::io::Write;

/// Writes `args` and a newline to stderr as one write, ignoring failure.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut s = args.to_string();
    s.push('\n');
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

/// `eprintln!` that never panics and writes its line at once (see [`line()`]).
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::diag::line(::std::format_args!($($arg)*))
    };
}
