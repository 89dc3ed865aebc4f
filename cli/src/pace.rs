//! `leakgate pace RATE [--burst B] [--max-wait D] [--drop]`: stdin to stdout at a rate.
//!
//! Queue mode (the default) gives every line a place and waits for it, so lines leave evenly
//! spaced; a line that would wait longer than `--max-wait` is dropped. Meter mode (`--drop`)
//! passes a line only if it conforms when it arrives, and drops the rest.

use leakgate::{Limiter, Quota, WaitPolicy};
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: leakgate pace RATE [--burst B] [--max-wait D] [--drop]
  RATE        e.g. 1/s, 100/min, 3/1500ms (a quota; its burst defaults to 1 here)
  --burst B   let up to B lines go at once after a pause (default 1: evenly spaced)
  --max-wait D  drop a line that would wait longer than D (e.g. 30s, 500ms; default: never)
  --drop      meter mode: pass a line only if it conforms on arrival, drop the rest";

struct Options {
    quota: Quota,
    max_wait: Duration,
    meter: bool,
}

pub(crate) fn run(args: &[String]) -> ExitCode {
    let options = match parse(args) {
        Ok(options) => options,
        Err(msg) => {
            eprintln!("leakgate pace: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match pace(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leakgate pace: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut rate = None;
    let mut burst = None;
    let mut max_wait = Duration::MAX;
    let mut meter = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--burst" => {
                let b = value("--burst")?;
                burst = Some(
                    b.parse::<u64>()
                        .map_err(|_| format!("bad --burst {b:?}: expected a whole number"))?,
                );
            }
            "--max-wait" => max_wait = parse_duration(&value("--max-wait")?)?,
            "--drop" => meter = true,
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag:?}")),
            r if rate.is_none() => rate = Some(r.to_string()),
            extra => return Err(format!("unexpected argument {extra:?}")),
        }
    }
    let rate = rate.ok_or("missing RATE")?;
    // A rate alone paces evenly (burst 1) unless it names its own burst or --burst is given.
    let quota: Quota = rate.parse().map_err(|e| format!("bad RATE {rate:?}: {e}"))?;
    let burst = burst.unwrap_or(if rate.contains("burst") { quota.burst() } else { 1 });
    let quota = quota.with_burst(burst).map_err(|e| format!("bad --burst {burst}: {e}"))?;
    Ok(Options { quota, max_wait, meter })
}

/// `NUMBER UNIT` with UNIT one of ns, us, ms, s, min, h.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("bad duration {text:?}: expected e.g. 30s"))?;
    let ns_per = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(format!("bad duration {text:?}: unit must be ns, us, ms, s, min or h")),
    };
    n.checked_mul(ns_per)
        .map(Duration::from_nanos)
        .ok_or(format!("bad duration {text:?}: too long"))
}

fn pace(options: &Options) -> std::io::Result<()> {
    let limiter = Limiter::new(options.quota);
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut status = Status::new(std::io::stderr().is_terminal());
    for line in stdin.lines() {
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
    status.finish(options);
    Ok(())
}

/// Counts, a live line on a terminal, and the closing summary.
struct Status {
    live: bool,
    start: Instant,
    last_shown: Instant,
    passed: u64,
    dropped: u64,
}

impl Status {
    fn new(live: bool) -> Self {
        let now = Instant::now();
        Status { live, start: now, last_shown: now, passed: 0, dropped: 0 }
    }

    fn count(&mut self, passed: bool) {
        if passed {
            self.passed += 1;
        } else {
            self.dropped += 1;
        }
        if self.live && self.last_shown.elapsed() >= Duration::from_millis(100) {
            self.last_shown = Instant::now();
            eprint!("\r\x1b[K{}", self.line());
        }
    }

    fn line(&self) -> String {
        let secs = self.start.elapsed().as_secs_f64();
        let rate = if secs > 0.0 { self.passed as f64 / secs } else { 0.0 };
        format!("passed {}, dropped {}, {:.2} lines/s", self.passed, self.dropped, rate)
    }

    fn finish(&self, options: &Options) {
        if self.live {
            eprint!("\r\x1b[K");
        }
        let mode = if options.meter { "meter" } else { "queue" };
        eprintln!(
            "leakgate pace ({mode}, {}): {} in {:.3} s",
            options.quota,
            self.line(),
            self.start.elapsed().as_secs_f64()
        );
    }
}
