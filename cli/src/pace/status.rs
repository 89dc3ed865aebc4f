//! What `leakgate pace` tells the user on stderr: a live line while it runs (only when stderr is a
//! terminal and stdout is not, so the lines themselves do not run through it) and a one-line
//! summary at the end.
//!
//! Rates are lines over a span of time, where the span is never taken shorter than the quota
//! needs for that many lines (`lines * T`): a burst passed in a millisecond reads as the quota's
//! rate, not as thousands a second, and no figure is ever above the limit.

use super::schedule::Mode;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leakgate::Quota;
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::time::Duration;

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
        let elapsed_ns = now_ns.saturating_sub(self.start_ns);
        let how = match self.mode {
            Mode::Meter => "meter".to_string(),
            Mode::Queue { .. } => {
                format!("queue, one line every {:?}", Duration::from_secs_f64(self.interval_s))
            }
        };
        let trouble = trouble.map(|t| format!("; {t}")).unwrap_or_default();
        // The effective quota with its burst spelled out, in a form that parses back to it.
        let mut quota = self.quota.to_string();
        if !quota.contains("burst") {
            quota = format!("{quota} burst {}", self.quota.burst());
        }
        eprintln!(
            "leakgate pace ({how}, quota {quota}): passed {}, dropped {} in {:.3} s, \
             {:.2} lines/s{trouble}",
            self.passed,
            self.dropped,
            elapsed_ns as f64 / 1e9,
            self.rate(self.passed, elapsed_ns),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
