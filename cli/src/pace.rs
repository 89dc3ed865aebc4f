//! `leakgate pace RATE [--burst B] [--max-wait D] [--drop]`: stdin to stdout at a rate.
//!
//! Queue mode (the default) gives each line a place when it is read and waits for it, so lines
//! leave evenly spaced (burst 1) and the writer upstream is slowed by the pipe; a line whose wait
//! would be longer than `--max-wait` is dropped at once. Meter mode (`--drop`) passes a line only
//! if it conforms when it is read, and drops the rest without waiting.

mod args;
mod status;

use args::Options;
use leakgate::{Limiter, WaitPolicy};
use status::Status;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

pub(crate) fn run(args: &[String]) -> ExitCode {
    let options = match args::parse(args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("leakgate pace: {msg}\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    let mut status = Status::new(std::io::stderr().is_terminal());
    let result = pace(&options, &mut status);
    status.finish(&options);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): not an error of ours.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leakgate pace: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Passes lines from stdin to stdout, flushing each, counting what passed and what was dropped.
fn pace(options: &Options, status: &mut Status) -> std::io::Result<()> {
    let limiter = Limiter::new(options.quota);
    let mut stdout = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let pass = if options.meter {
            limiter.check().is_ok()
        } else {
            match limiter.reserve(options.max_wait) {
                Ok(reservation) => {
                    reservation.wait_with(WaitPolicy::default());
                    true
                }
                Err(_) => false,
            }
        };
        if pass {
            writeln!(stdout, "{line}")?;
            stdout.flush()?;
        }
        status.count(pass);
    }
    Ok(())
}
