//! `leakgate demo`: `leakgate pace` on a built-in example, for a first look without any set-up.
//!
//! Feeds 20 built-in refund requests, all at once, to `leakgate pace RATE` (this same binary)
//! and prints each line as it comes out with the time since the start, so the even spacing
//! shows; pace's own summary follows on stderr, once every line is out.

use crate::out::{self, errln};
use leakgate::Quota;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// The arguments of `leakgate demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The rate to pace the example at (a quota, as for `leakgate pace`)
    #[arg(value_name = "RATE", default_value = "5/s", value_parser = crate::pace::parse_rate)]
    rate: Quota,
}

/// The built-in input: refund requests to two banks.
fn example() -> String {
    (1..=20)
        .map(|i| {
            let bank = if i % 3 == 0 { "bank-b" } else { "bank-a" };
            format!("refund #{i:02} to {bank}: {}.{:02} EUR\n", 10 + i * 7, i * 13 % 100)
        })
        .collect()
}

/// Runs `leakgate pace RATE` on the example, timing each line out. A closed stdout (`| head -1`)
/// ends the demo at once: pace's output is closed behind it, pace stops with its summary, and
/// the demo exits 1 as pace does when its lines cannot be delivered.
pub(crate) fn run(args: Args) -> ExitCode {
    let rate = args.rate.to_string();
    errln!(
        "leakgate demo: 20 refund requests arrive at once; `leakgate pace {rate}` lets them out \
         evenly spaced.\nThe same from a shell: <your input> | leakgate pace {rate:?}\n"
    );
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            errln!("leakgate demo: cannot find this program to run `pace`: {e}");
            return ExitCode::FAILURE;
        }
    };
    let child = Command::new(exe)
        .args(["pace", &rate])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // Piped too, and shown once every line is out: pace writes its summary as soon as the
        // last line is in the pipe, before this process has printed that line.
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            errln!("leakgate demo: cannot start `leakgate pace`: {e}");
            return ExitCode::FAILURE;
        }
    };
    let start = Instant::now();
    let fed = child.stdin.take().map(|mut stdin| stdin.write_all(example().as_bytes()));
    let mut shown = 0u32;
    let mut stopped = None;
    if let Some(paced) = child.stdout.take() {
        let mut out = std::io::stdout().lock();
        for line in BufReader::new(paced).lines().map_while(Result::ok) {
            let elapsed = start.elapsed().as_secs_f64();
            // Flushed line by line, so a reader that left is noticed at the next line.
            match writeln!(out, "{elapsed:>8.3} s  {line}").and_then(|()| out.flush()) {
                Ok(()) => shown += 1,
                Err(e) => {
                    stopped = Some(e);
                    break;
                }
            }
        }
        // Dropping the reader here closes pace's stdout: a pace still waiting sees its reader
        // gone and ends at once with its summary.
    }
    let mut summary = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut summary);
    }
    out::stderr(&summary);
    let status = child.wait();
    if let Some(e) = stopped {
        let why = if e.kind() == ErrorKind::BrokenPipe {
            "stdout was closed".to_owned()
        } else {
            format!("cannot write to stdout: {e}")
        };
        let lines = if shown == 1 { "line" } else { "lines" };
        errln!("leakgate demo: {why} after {shown} {lines}; stopped");
        return ExitCode::FAILURE;
    }
    match (fed, status) {
        (Some(Ok(())), Ok(status)) if status.success() => ExitCode::SUCCESS,
        (_, Ok(status)) => ExitCode::from(status.code().map_or(1, |c| c as u8)),
        (_, Err(e)) => {
            errln!("leakgate demo: {e}");
            ExitCode::FAILURE
        }
    }
}
