//! Writing to stdout and stderr without ever panicking.
//!
//! std's `println!` and `eprintln!` panic when the write fails, and Rust ignores `SIGPIPE`, so a
//! pipe whose reader has gone makes every write fail with `EPIPE`: `leakgate rules check f |
//! head -1` or a supervisor that closed stderr would end in a panic (exit 101). The CLI writes
//! through these instead (`clippy::print_stdout` and `clippy::print_stderr` are denied in
//! `main.rs`, so nothing else can creep in):
//!
//! * [`errln!`] writes a line to stderr and ignores a failure: there is nowhere left to report
//!   it, and what the command does must not depend on whether its messages are read;
//! * [`print()`] writes a command's whole output to stdout and says whether it got through: a
//!   reader that left ([`Delivery::ReaderGone`]) is not an error for a command whose output is a
//!   report (`rules`, `bench`); another failure (a full disk) is reported on stderr.

use std::io::{self, Write};

/// Writes `text` to stderr as one write (stderr is unbuffered), ignoring any failure.
pub(crate) fn stderr(text: &str) {
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// `eprintln!` that never panics: formats a line and writes it with [`stderr`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::stderr(&format!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use errln;

/// `println!` that never panics: formats a line and writes it with [`print()`]; a reader that
/// left is ignored (for output that only reports what was done, such as a job's id).
macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = $crate::out::print(&format!("{}\n", format_args!($($arg)*)));
    }};
}
pub(crate) use outln;

/// How a write to stdout went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Every byte was written.
    Written,
    /// The reader has gone (`EPIPE`): nothing more can be delivered.
    ReaderGone,
    /// Another error, already reported on stderr.
    Failed,
}

/// Writes `text` to stdout and flushes it; never panics.
pub(crate) fn print(text: &str) -> Delivery {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Delivery::Written,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Delivery::ReaderGone,
        Err(e) => {
            errln!("leakgate: cannot write to stdout: {e}");
            Delivery::Failed
        }
    }
}
