//! What a running worker tells its owner: live counts ([`Progress`]) and events ([`Event`]).

use crate::error::Error;
use crate::job::Outcome;
use crate::rules::RulesError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Live counts of a running [`Worker`](crate::Worker), for a progress line. Clones share the
/// counts.
///
/// Every counter is a plain event count read for display: `Relaxed` loads and adds are enough,
/// since no other memory is published through them and a reader may see them a moment apart.
///
/// ```
/// let progress = leakgate_jobs::Progress::default();
/// assert_eq!(progress.snapshot().done, 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Progress {
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    started: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
    slowed: AtomicU64,
    lost: AtomicU64,
    cancelled: AtomicU64,
    running: AtomicU64,
    remaining: AtomicU64,
}

/// The counts at one moment.
///
/// ```
/// let s = leakgate_jobs::Progress::default().snapshot();
/// assert_eq!(s.started + s.done + s.failed + s.remaining, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Runs this worker started.
    pub started: u64,
    /// Runs that ended done.
    pub done: u64,
    /// Runs that failed (retried later, or dead).
    pub failed: u64,
    /// Jobs that died after their last failed run here, or whose lease ran out once too often.
    pub dead: u64,
    /// Runs that ended in "slow down".
    pub slowed: u64,
    /// Runs whose lease was lost before they ended (their outcome was not recorded).
    pub lost: u64,
    /// Runs stopped because their job was cancelled.
    pub cancelled: u64,
    /// Runs going on now.
    pub running: u64,
    /// Jobs waiting or running in the whole database, at the last claim.
    pub remaining: u64,
}

impl Progress {
    /// The counts now.
    ///
    /// ```
    /// let snapshot = leakgate_jobs::Progress::default().snapshot();
    /// assert_eq!(snapshot.running, 0);
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        let c = &*self.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            started: get(&c.started),
            done: get(&c.done),
            failed: get(&c.failed),
            dead: get(&c.dead),
            slowed: get(&c.slowed),
            lost: get(&c.lost),
            cancelled: get(&c.cancelled),
            running: get(&c.running),
            remaining: get(&c.remaining),
        }
    }

    pub(crate) fn add(&self, which: Counter, n: u64) {
        self.counter(which).fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn set(&self, which: Counter, n: u64) {
        self.counter(which).store(n, Ordering::Relaxed);
    }

    fn counter(&self, which: Counter) -> &AtomicU64 {
        let c = &*self.counts;
        match which {
            Counter::Started => &c.started,
            Counter::Done => &c.done,
            Counter::Failed => &c.failed,
            Counter::Dead => &c.dead,
            Counter::Slowed => &c.slowed,
            Counter::Lost => &c.lost,
            Counter::Cancelled => &c.cancelled,
            Counter::Running => &c.running,
            Counter::Remaining => &c.remaining,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Counter {
    Started,
    Done,
    Failed,
    Dead,
    Slowed,
    Lost,
    Cancelled,
    Running,
    Remaining,
}

/// Something a worker noticed that its owner may want to show.
///
/// ```
/// let event = leakgate_jobs::Event::RulesLoaded { rules: 3 };
/// assert!(event.to_string().contains("3 rules"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// A run ended (its outcome is recorded with the next claim).
    Finished {
        /// The job.
        job: i64,
        /// Its lane.
        lane: String,
        /// Which run of the job it was, from 1.
        attempt: u32,
        /// How it ended.
        outcome: Outcome,
        /// How long it ran.
        took: Duration,
    },
    /// The rules file was read and its rules stored for every worker.
    RulesLoaded {
        /// How many rules.
        rules: usize,
    },
    /// The rules file changed but does not parse: the rules in force stay.
    RulesRejected(RulesError),
    /// A run's lease ran out before it ended: the job went back to the queue.
    LeaseLost {
        /// The job.
        job: i64,
    },
    /// A run was stopped because its job was cancelled ([`Jobs::cancel`](crate::Jobs::cancel)).
    Cancelled {
        /// The job.
        job: i64,
    },
    /// A database operation failed; the worker retries it.
    Retrying(Error),
    /// Done jobs past the retention were removed.
    Purged {
        /// How many.
        jobs: u64,
    },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Finished { job, lane, attempt, outcome, took } => {
                let took = Seconds(*took);
                write!(f, "job {job} ({lane}, attempt {attempt}) ")?;
                match outcome {
                    Outcome::Done => write!(f, "done in {took}"),
                    Outcome::Failed(why) => write!(f, "failed in {took}: {why}"),
                    Outcome::RetryAfter(after) => {
                        write!(f, "failed in {took}: asked to be retried after {after:?}")
                    }
                    Outcome::SlowDown(pause) => {
                        write!(f, "asked to slow down in {took}: the lane pauses {pause:?}")
                    }
                }
            }
            Event::RulesLoaded { rules } => write!(f, "rules loaded: {rules} rules"),
            Event::RulesRejected(e) => {
                write!(f, "rules file not reloaded (the rules in force stay): {e}")
            }
            Event::LeaseLost { job } => {
                write!(f, "job {job}: lease lost, the job went back to the queue")
            }
            Event::Cancelled { job } => write!(f, "job {job}: cancelled, its run was stopped"),
            Event::Retrying(e) => write!(f, "{e} (retrying)"),
            Event::Purged { jobs } => write!(f, "purged {jobs} done jobs past the retention"),
        }
    }
}

/// A run's length for a person: milliseconds under a second, else seconds with two decimals.
struct Seconds(Duration);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 < Duration::from_secs(1) {
            write!(f, "{} ms", self.0.as_millis())
        } else {
            write!(f, "{:.2} s", self.0.as_secs_f64())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_run_says_what_ran_and_how_it_ended() {
        let event = |outcome, ms| Event::Finished {
            job: 42,
            lane: "refunds/bank-a".into(),
            attempt: 2,
            outcome,
            took: Duration::from_millis(ms),
        };
        assert_eq!(
            event(Outcome::Done, 1234).to_string(),
            "job 42 (refunds/bank-a, attempt 2) done in 1.23 s"
        );
        assert_eq!(
            event(Outcome::Failed("timed out after 5s".into()), 5003).to_string(),
            "job 42 (refunds/bank-a, attempt 2) failed in 5.00 s: timed out after 5s"
        );
        assert_eq!(
            event(Outcome::SlowDown(Duration::from_secs(5)), 7).to_string(),
            "job 42 (refunds/bank-a, attempt 2) asked to slow down in 7 ms: the lane pauses 5s"
        );
    }
}
