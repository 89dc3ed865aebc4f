//! `leakgate pace RATE`: stdin to stdout at a rate, lines evenly spaced, bytes unchanged.

mod clock;
mod pump;
mod schedule;
mod signals;
mod status;

use crate::duration::parse_duration;
use crate::out::errln;
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

The closing line (on stderr) says how pace ran and what it did:
  leakgate pace (queue, one line every 100ms, quota 10/s burst 10): passed 20, dropped 0 in 1.901 s
  - the interval T = period / count, to 4 significant digits, in ps when under 1 ns (the fastest
    rate, 10^11/s, is one line every 10ps);
  - the lines passed and dropped, and the time from pace's start to its end;
  - then \", N lines/s\": lines passed per second of that time, taken no shorter than the quota
    needs for them at its rate, so a burst reads as the quota's rate and the figure is never
    above it (below it when the input came slower, or pace or its reader could not keep up).
    Shown only once at least 100 lines passed in at least 1 s: over fewer lines or a shorter
    time it measures pace's start-up and the burst, not its pace.
  - then, if the run did not end as asked, why: \"; 3 lines read but not delivered: stdout was
    closed\" (or \"stopped by SIGINT\", or the I/O error).

Exit status: 0 when every line read was written or dropped as asked; 1 when lines were not
delivered (stdout closed, as with `| head -1`, or an I/O error); 2 for bad arguments; 130 or 143
after SIGINT or SIGTERM (the summary is printed first; a second signal exits at once). pace
learns that its reader has gone from what writing tells it (EPIPE, or the kernel saying so of a
pipe while pace waits); /dev/null takes every line however it was opened, and so does a stdout
closed before pace started (`>&-`), to which the Rust runtime gives /dev/null.";

/// The arguments of `leakgate pace`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    /// Lines per period: 1/s, 100/min, 10/1.5s, "5/s burst 2" (burst: the count unless given)
    // Hyphen values too, so that `pace -1/s` is judged as a rate (and refused as one) rather
    // than taken for an unknown flag.
    #[arg(value_name = "RATE", value_parser = parse_rate, allow_hyphen_values = true)]
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
            errln!("error: invalid value for '--burst <B>': {e}");
            return ExitCode::from(2);
        }
    };
    let mode = match (args.drop, args.max_wait) {
        (true, _) => Mode::Meter,
        (false, max_wait) => Mode::Queue { max_wait: max_wait.unwrap_or(Duration::MAX) },
    };
    let clock = MonotonicClock::new();
    let mut status = Status::new(quota, mode, clock.now_ns());
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            errln!("leakgate pace: cannot handle signals: {e}");
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
