//! What `leakgate pace` tells the user on stderr: a live line while it runs (only when stderr is a
//! terminal and stdout is not, so the lines themselves do not run through it) and a one-line
//! summary at the end.
//!
//! Rates are lines over a span of time, where the span is never taken shorter than the quota
//! needs for that many lines (`lines * T`): a burst passed in a millisecond reads as the quota's
//! rate, not as thousands a second, and no figure is ever above the limit. The summary gives a
//! rate only over enough lines and time to measure pacing rather than start-up; it is written
//! with [`errln!`], so a stderr nobody reads does not stop pace.

use super::schedule::Mode;
use crate::out::errln;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leakgate::Quota;
use std::collections::VecDeque;
use std::io::IsTerminal;

/// How often the live line is redrawn, at most.
const REDRAW_NS: u64 = 100_000_000;
/// The span the live line's "now" rate is measured over.
const WINDOW_NS: u64 = 2_000_000_000;

/// Counts, and the recent history the live rate is computed from.
pub(crate) struct Status {
    quota: Quota,
    mode: Mode,
    /// The quota's emission interval `T`, in seconds.
    interval_s: f64,
    bar: ProgressBar,
    start_ns: u64,
    last_drawn_ns: u64,
    passed: u64,
    dropped: u64,
    /// `(clock ns, passed)` at each redraw within the last window, oldest first.
    recent: VecDeque<(u64, u64)>,
}

impl Status {
    /// Starts counting at clock time `now_ns`.
    pub(crate) fn new(quota: Quota, mode: Mode, now_ns: u64) -> Self {
        let target = if std::io::stderr().is_terminal() && !std::io::stdout().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
        Status {
            quota,
            mode,
            interval_s: quota.period().as_secs_f64() / quota.count() as f64,
            bar,
            start_ns: now_ns,
            last_drawn_ns: now_ns,
            passed: 0,
            dropped: 0,
            recent: VecDeque::from([(now_ns, 0)]),
        }
    }

    /// Counts lines written.
    pub(crate) fn passed(&mut self, lines: u64) {
        self.passed += lines;
    }

    /// Counts lines dropped.
    pub(crate) fn dropped(&mut self, lines: u64) {
        self.dropped += lines;
    }

    /// Redraws the live line if it is due.
    pub(crate) fn tick(&mut self, now_ns: u64, queued: usize) {
        if self.bar.is_hidden() || now_ns.saturating_sub(self.last_drawn_ns) < REDRAW_NS {
            return;
        }
        self.last_drawn_ns = now_ns;
        self.recent.push_back((now_ns, self.passed));
        while self.recent.len() > 2 && now_ns - self.recent[1].0 >= WINDOW_NS {
            self.recent.pop_front();
        }
        let (since, passed_then) = self.recent[0];
        let rate = self.rate(self.passed - passed_then, now_ns - since);
        self.bar.set_message(format!(
            "passed {}, dropped {}, queued {queued}, {rate:.2} lines/s now",
            self.passed, self.dropped
        ));
        self.bar.tick();
    }

    /// Lines per second over `span_ns`, the span taken at least as long as the quota needs.
    fn rate(&self, lines: u64, span_ns: u64) -> f64 {
        let span = (span_ns as f64 / 1e9).max(lines as f64 * self.interval_s);
        if span > 0.0 {
            lines as f64 / span
        } else {
            0.0
        }
    }

    /// Clears the live line and prints the summary, ending with `trouble` if there was any.
    pub(crate) fn finish(&self, now_ns: u64, trouble: Option<String>) {
        self.bar.finish_and_clear();
        errln!("{}", self.summary(now_ns, trouble));
    }

    /// The closing line (documented in `pace --help`).
    fn summary(&self, now_ns: u64, trouble: Option<String>) -> String {
        let elapsed_ns = now_ns.saturating_sub(self.start_ns);
        let how = match self.mode {
            Mode::Meter => "meter".to_string(),
            Mode::Queue { .. } => format!("queue, one line every {}", interval(self.quota)),
        };
        // The effective quota with its burst spelled out, in a form that parses back to it.
        let mut quota = self.quota.to_string();
        if !quota.contains("burst") {
            quota = format!("{quota} burst {}", self.quota.burst());
        }
        let rate = if self.passed >= RATE_MIN_LINES && elapsed_ns >= RATE_MIN_NS {
            format!(", {:.2} lines/s", self.rate(self.passed, elapsed_ns))
        } else {
            String::new()
        };
        let trouble = trouble.map(|t| format!("; {t}")).unwrap_or_default();
        format!(
            "leakgate pace ({how}, quota {quota}): passed {}, dropped {} in {:.3} s{rate}{trouble}",
            self.passed,
            self.dropped,
            elapsed_ns as f64 / 1e9,
        )
    }
}

/// The fewest lines, and the shortest run, over which the closing line gives a rate: fewer lines
/// or a shorter run measure pace's start-up (a few milliseconds) and the burst, not its pace.
const RATE_MIN_LINES: u64 = 100;
const RATE_MIN_NS: u64 = 1_000_000_000;

/// The quota's interval `T = period / count`, to 4 significant digits, in the largest unit that
/// keeps it at least 1 (picoseconds below a nanosecond: the fastest quota, 10^11/s, is 10ps).
fn interval(quota: Quota) -> String {
    const UNITS: [(&str, f64); 7] = [
        ("h", 3.6e15),
        ("min", 6e13),
        ("s", 1e12),
        ("ms", 1e9),
        ("us", 1e6),
        ("ns", 1e3),
        ("ps", 1.0),
    ];
    // In picoseconds; period_ns < 2^64, so the f64 keeps 4 significant digits and more.
    let ps = quota.period().as_nanos() as f64 * 1e3 / quota.count() as f64;
    let (unit, size) = UNITS.iter().copied().find(|&(_, size)| ps >= size).unwrap_or(UNITS[6]);
    let value = ps / size;
    let decimals = (3 - value.log10().floor() as i32).clamp(0, 3) as usize;
    let text = format!("{value:.decimals$}");
    let text =
        if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    format!("{text}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn q(text: &str) -> Quota {
        text.parse().unwrap()
    }

    #[test]
    fn intervals_read_in_their_own_unit_down_to_picoseconds() {
        for (quota, says) in [
            ("10/s", "100ms"),
            ("1/h", "1h"),
            ("1/d", "24h"),
            ("2/3min", "1.5min"),
            ("3/s", "333.3ms"),
            ("50/s", "20ms"),
            ("1/1.5s", "1.5s"),
            ("10/us", "100ns"),
            ("3/10ns", "3.333ns"),
            ("1000/us", "1ns"),
            ("100000000000/s", "10ps"),
            ("30000000000/s", "33.33ps"),
        ] {
            assert_eq!(interval(q(quota)), says, "{quota}");
        }
    }

    #[test]
    fn the_summary_gives_a_rate_only_over_enough_lines_and_time() {
        let mut status = Status::new(q("1000/s"), Mode::Queue { max_wait: Duration::MAX }, 0);
        // The case: 2 lines at 1000/s, pace's start-up dominating: no rate.
        status.passed(2);
        let line = status.summary(9_660_000, None);
        assert!(!line.contains("lines/s"), "{line}");
        assert!(
            line.starts_with("leakgate pace (queue, one line every 1ms, quota 1000/s burst 1000)")
        );
        // 100 lines in 0.5 s: still no rate (too short); in 1.5 s: one.
        status.passed(98);
        assert!(!status.summary(500_000_000, None).contains("lines/s"));
        let line = status.summary(1_500_000_000, None);
        assert!(line.ends_with("passed 100, dropped 0 in 1.500 s, 66.67 lines/s"), "{line}");
        // A burst of 2,000 lines in 1.2 s at 1000/s reads as the quota's rate, never above it.
        status.passed(1900);
        assert!(status.summary(1_200_000_000, None).ends_with(", 1000.00 lines/s"));
        let line = status.summary(1_200_000_000, Some("stopped by SIGINT".into()));
        assert!(line.ends_with("1000.00 lines/s; stopped by SIGINT"), "{line}");
    }

    #[test]
    fn rates_never_exceed_the_limit() {
        let status = Status::new("5/s".parse().unwrap(), Mode::Meter, 0);
        // The case: 5 lines (the burst) in a millisecond read as 5/s, not 5000/s.
        assert_eq!(status.rate(5, 1_000_000), 5.0);
        assert_eq!(status.rate(10, 4_000_000_000), 2.5);
        assert_eq!(status.rate(0, 0), 0.0);
        // Two lines one interval apart: 2 lines over 0.2 s would read 10/s; the quota's span is
        // 0.4 s.
        assert_eq!(status.rate(2, 200_000_000), 5.0);
    }
}
