//! `leakgate pace RATE`: stdin to stdout at a rate, lines evenly spaced, bytes unchanged.

mod clock;
mod pump;
mod schedule;
mod signals;
mod status;

use crate::duration::parse_duration;
use clock::MonotonicClock;
use leakgate::{Clock, Quota};
use pump::End;
use schedule::{Mode, Schedule};
use signals::Signals;
use status::Status;
use std::process::ExitCode;
use std::time::Duration;

const LONG_HELP: &str = "\
How lines leave (queue mode, the default):
  Each line takes its place when it arrives: places are one interval (period / count) apart, so
  a backlog leaves evenly spaced and the long-run rate is exact. If pace or its reader is slow
  for a moment, later lines catch up, never faster than the quota allows: the burst (by
  leakgate's rule, the count when the rate names none: 10/s is '10/s burst 10') is how many may
  leave at once while catching up. --burst 1 forbids catching up (a late write is then never
  made up). Times are read from the system's monotonic clock, and rates are exact against it.

Input:
  stdin is read as it arrives into a queue (at least 65,536 lines, 16 MiB), so a line's wait,
  and --max-wait, count from when it arrived, not from when pace got to it. When the queue is
  full, pace stops reading and the writer upstream waits. Lines are bytes, passed on unchanged:
  any encoding, CRLF kept, a last line without a newline stays without one.

Durations (RATE's period and --max-wait) share one grammar: 30s, 1.5s, 250ms, 2min, 1m, 1h,
3 days, 100us (also µs, μs); a rate's amount may be fractional too: 100/0.5s, 1/1.5s.

Exit status: 0 when every line read was written or dropped as asked; 1 when lines were not
delivered (stdout closed, as with `| head -1`, or an I/O error); 2 for bad arguments; 130 or 143
after SIGINT or SIGTERM (the summary is printed first; a second signal exits at once).";

/// The arguments of `leakgate pace`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    /// Lines per period: 1/s, 100/min, 10/1.5s, "5/s burst 2" (burst: the count unless given)
    #[arg(value_name = "RATE", value_parser = parse_rate)]
    rate: Quota,

    /// How many lines may leave at once while catching up (overrides the rate's burst)
    #[arg(long, value_name = "B", value_parser = clap::value_parser!(u64).range(1..))]
    burst: Option<u64>,

    /// Drop a line whose turn would come more than D after it arrived (e.g. 30s, 1.5s, 250ms)
    #[arg(long, value_name = "D", value_parser = parse_duration, conflicts_with = "drop")]
    max_wait: Option<Duration>,

    /// Meter mode: pass a line only if it conforms when it arrives; drop the rest at once
    #[arg(long)]
    drop: bool,
}

/// Reads RATE for clap.
pub(crate) fn parse_rate(text: &str) -> Result<Quota, String> {
    text.parse::<Quota>().map_err(|e| e.to_string())
}

/// Runs `leakgate pace` and says how it ended.
pub(crate) fn run(args: Args) -> ExitCode {
    let quota = match args.burst.map(|b| args.rate.with_burst(b)) {
        None => args.rate,
        Some(Ok(quota)) => quota,
        Some(Err(e)) => {
            eprintln!("error: invalid value for '--burst <B>': {e}");
            return ExitCode::from(2);
        }
    };
    let mode = match (args.drop, args.max_wait) {
        (true, _) => Mode::Meter,
        (false, max_wait) => Mode::Queue { max_wait: max_wait.unwrap_or(Duration::MAX) },
    };
    let clock = MonotonicClock::new();
    let mut status = Status::new(quota, mode, clock.now_ns());
    if stdout_was_closed() {
        status.finish(clock.now_ns(), Some("stdout is closed: nothing can be delivered".into()));
        return ExitCode::FAILURE;
    }
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("leakgate pace: cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut schedule = Schedule::new(quota, mode, clock);
    let outcome = pump::pump(&mut schedule, &clock, &signals, &mut status);
    let undelivered = match outcome.undelivered {
        0 => String::new(),
        1 => "1 line read but not delivered: ".into(),
        n => format!("{n} lines read but not delivered: "),
    };
    let (trouble, code) = match outcome.end {
        End::Done => (None, 0),
        End::StdoutClosed => (Some(format!("{undelivered}stdout was closed")), 1),
        End::Signal(signal) => {
            (Some(format!("{undelivered}stopped by {}", signal.name())), signal.exit_status())
        }
        End::Failed(e) => (Some(format!("{undelivered}{e}")), 1),
    };
    status.finish(clock.now_ns(), trouble);
    ExitCode::from(code)
}

/// Whether fd 1 was closed when the process started (`leakgate pace ... >&-`).
///
/// Rust's runtime opens `/dev/null` read-write on any of fds 0 to 2 found closed at start, so
/// writes would vanish and look delivered. A shell's `>/dev/null` opens it write-only, so a
/// read-write `/dev/null` on fd 1 is taken as "stdout was closed".
fn stdout_was_closed() -> bool {
    use rustix::fs::{fcntl_getfl, fstat, major, minor, FileType, OFlags};
    let stdout = rustix::stdio::stdout();
    let Ok(stat) = fstat(stdout) else { return true };
    let null = FileType::from_raw_mode(stat.st_mode) == FileType::CharacterDevice
        && (major(stat.st_rdev), minor(stat.st_rdev)) == (1, 3);
    null && fcntl_getfl(stdout).is_ok_and(|flags| flags & OFlags::RWMODE == OFlags::RDWR)
}
