//! What `leakgate pace` tells the user on stderr: a live line on a terminal, a summary at the end.

use super::args::Options;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How often the live line is redrawn, at most.
const REDRAW: Duration = Duration::from_millis(100);
/// The window the live line's "current rate" is measured over.
const WINDOW: Duration = Duration::from_secs(2);

/// Counts, and the recent history the current rate is computed from.
pub(super) struct Status {
    live: bool,
    start: Instant,
    last_drawn: Instant,
    passed: u64,
    dropped: u64,
    /// `(when, passed)` at each redraw within the last `WINDOW`, oldest first.
    recent: VecDeque<(Instant, u64)>,
}

impl Status {
    /// `live`: draw a status line (stderr is a terminal).
    pub(super) fn new(live: bool) -> Self {
        let now = Instant::now();
        Status {
            live,
            start: now,
            last_drawn: now,
            passed: 0,
            dropped: 0,
            recent: VecDeque::from([(now, 0)]),
        }
    }

    /// Counts one line, and redraws the live line if it is due.
    pub(super) fn count(&mut self, passed: bool) {
        if passed {
            self.passed += 1;
        } else {
            self.dropped += 1;
        }
        let now = Instant::now();
        if self.live && now - self.last_drawn >= REDRAW {
            self.last_drawn = now;
            self.recent.push_back((now, self.passed));
            while self.recent.len() > 2 && now - self.recent[1].0 >= WINDOW {
                self.recent.pop_front();
            }
            let (since, passed_then) = self.recent[0];
            let rate = per_second(self.passed - passed_then, now - since);
            eprint!(
                "\r\x1b[Kpassed {}, dropped {}, {rate:.2} lines/s now",
                self.passed, self.dropped
            );
        }
    }

    /// Clears the live line and prints the summary.
    pub(super) fn finish(&self, options: &Options) {
        if self.live {
            eprint!("\r\x1b[K");
        }
        let mode = if options.meter { "meter" } else { "queue" };
        let elapsed = self.start.elapsed();
        eprintln!(
            "leakgate pace ({mode}, {}): passed {}, dropped {}, {:.2} lines/s over {:.3} s",
            options.quota,
            self.passed,
            self.dropped,
            per_second(self.passed, elapsed),
            elapsed.as_secs_f64()
        );
    }
}

fn per_second(count: u64, over: Duration) -> f64 {
    if over.is_zero() {
        0.0
    } else {
        count as f64 / over.as_secs_f64()
    }
}
