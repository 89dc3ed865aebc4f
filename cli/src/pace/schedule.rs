//! When each line may leave: the pacing decisions of `leakgate pace`, without any I/O.
//!
//! Queue mode uses two limiters on one clock:
//!
//! * the **spacing**, the quota's rate with burst 1: a line takes its place there *when it
//!   arrives* (read from stdin), so places follow one another exactly one `T = period / count`
//!   apart whenever lines are waiting, and a line whose place is more than `--max-wait` after its
//!   arrival is dropped at once, without taking a place;
//! * the **quota** itself (burst = count unless given): when a line's place has come, it also
//!   takes one unit of the quota at the moment it is handed to stdout. Writing late (a busy
//!   machine, a slow reader) does not shift later places, so the long-run rate stays exact and
//!   later lines catch up; the quota bounds how many may go at once while catching up.
//!
//! Meter mode (`--drop`) asks only the quota, when the line arrives: it passes at once or is
//! dropped.

use leakgate::{Clock, Limiter, Quota};
use std::collections::VecDeque;
use std::time::Duration;

/// How a line is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Queue: even spacing, dropping a line whose place is more than `max_wait` after it arrived.
    Queue {
        /// The longest a line may wait for its place, from its arrival.
        max_wait: Duration,
    },
    /// Meter: a line passes if the quota admits it when it arrives, and is dropped otherwise.
    Meter,
}

/// What became of an arriving line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Queued, to be written when its time comes.
    Queued,
    /// Dropped: it would have waited too long (queue) or did not conform (meter).
    Dropped,
}

/// A line waiting to be written: its bytes exactly as read, newline (if any) included.
#[derive(Debug)]
pub(crate) struct Line {
    pub(crate) bytes: Vec<u8>,
    /// Clock time (ns) before which it may not be written.
    ready_ns: u64,
    /// Whether the quota has been asked for it (queue mode asks when its place comes).
    charged: bool,
}

/// The queue of lines and the limiters that say when each may leave.
pub(crate) struct Schedule<C: Clock> {
    mode: Mode,
    spacing: Limiter<C>,
    quota: Limiter<C>,
    queue: VecDeque<Line>,
    queued_bytes: usize,
    max_lines: usize,
    max_bytes: usize,
}

/// The most bytes the queue holds; at least one line is always accepted.
pub(crate) const MAX_QUEUED_BYTES: usize = 16 << 20;
/// The fewest lines the queue holds (the most without `--max-wait`).
const MIN_QUEUED_LINES: usize = 1 << 16;
/// The most lines the queue holds, however long `--max-wait` is.
const MAX_QUEUED_LINES: usize = 1 << 22;

impl<C: Clock + Clone> Schedule<C> {
    /// A schedule for `quota` in `mode`, on `clock`.
    pub(crate) fn new(quota: Quota, mode: Mode, clock: C) -> Self {
        let spacing = quota.with_burst(1).expect("burst 1 is valid for any valid quota's rate");
        // With --max-wait a queued line waits at most max_wait, so the queue never holds more
        // than max_wait / T + 1 lines: room for that many makes every wait count from arrival.
        let max_lines = match mode {
            Mode::Queue { max_wait } if max_wait < Duration::MAX => {
                let interval_ns = (quota.period().as_nanos() / u128::from(quota.count())).max(1);
                let lines = max_wait.as_nanos() / interval_ns + 2;
                usize::try_from(lines)
                    .unwrap_or(usize::MAX)
                    .clamp(MIN_QUEUED_LINES, MAX_QUEUED_LINES)
            }
            _ => MIN_QUEUED_LINES,
        };
        Schedule {
            mode,
            spacing: Limiter::with_clock(spacing, clock.clone()),
            quota: Limiter::with_clock(quota, clock),
            queue: VecDeque::new(),
            queued_bytes: 0,
            max_lines,
            max_bytes: MAX_QUEUED_BYTES,
        }
    }

    /// Whether another line may be read now (the queue is bounded in lines and bytes).
    pub(crate) fn has_room(&self) -> bool {
        self.queue.len() < self.max_lines && self.queued_bytes < self.max_bytes
    }

    /// How many lines are waiting.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// The most lines the queue holds.
    #[cfg(test)]
    pub(crate) fn max_lines(&self) -> usize {
        self.max_lines
    }

    /// Judges a line that has just arrived: queues it with its place, or drops it.
    pub(crate) fn arrive(&mut self, bytes: Vec<u8>) -> Arrival {
        let line = match self.mode {
            Mode::Queue { max_wait } => match self.spacing.reserve(max_wait) {
                Ok(place) => Line { bytes, ready_ns: nanos(place.ready_at()), charged: false },
                Err(_) => return Arrival::Dropped,
            },
            Mode::Meter => match self.quota.check() {
                Ok(_) => Line { bytes, ready_ns: 0, charged: true },
                Err(_) => return Arrival::Dropped,
            },
        };
        self.queued_bytes += line.bytes.len();
        self.queue.push_back(line);
        Arrival::Queued
    }

    /// When the first waiting line may be written (clock ns; at most now if it may go now), or
    /// `None` when no line waits.
    pub(crate) fn next_ready(&mut self) -> Option<u64> {
        let now = self.quota.clock().now_ns();
        let front = self.queue.front_mut()?;
        if !front.charged && front.ready_ns <= now {
            // Its place has come: take its unit of the quota now; the quota may hold it back
            // when earlier lines are catching up faster than the burst allows.
            match self.quota.reserve(Duration::MAX) {
                Ok(unit) => {
                    front.ready_ns = nanos(unit.ready_at());
                    front.charged = true;
                }
                // Not expected (one unit always fits a quota and the wait is unbounded); ask
                // again after the wait the limiter reports.
                Err(denied) => {
                    let wait = denied.retry_after().unwrap_or(Duration::from_millis(1));
                    front.ready_ns = now.saturating_add(nanos(wait));
                }
            }
        }
        Some(front.ready_ns)
    }

    /// The first waiting line, if it may be written now.
    pub(crate) fn pop_due(&mut self) -> Option<Line> {
        let ready = self.next_ready()?;
        let front = &self.queue[0];
        if !front.charged || ready > self.quota.clock().now_ns() {
            return None;
        }
        let line = self.queue.pop_front()?;
        self.queued_bytes -= line.bytes.len();
        Some(line)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
