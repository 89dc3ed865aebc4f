//! [`Worker`]: takes jobs as their lanes' pace allows, runs them with a handler, records how each
//! run ended, renews leases, and sleeps in between.

mod progress;
mod rules_file;
mod run;
mod runs;

pub use progress::{Event, Progress, Snapshot};

use crate::jobs::Jobs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

type EventSink = Arc<dyn Fn(&Event) + Send + Sync>;

/// How long a run past its [timeout](Worker::timeout) has to wind down, by default.
const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How long before its slot a paced run is claimed, by default (see [`Worker::claim_ahead`]).
const DEFAULT_CLAIM_AHEAD: Duration = Duration::from_millis(40);

/// Runs jobs from a [`Jobs`] queue, `concurrency` at a time, until stopped.
///
/// ```
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// use leakgate_jobs::{Jobs, LaneRules, Outcome};
/// let dir = tempfile::tempdir()?;
/// let jobs = Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
/// jobs.set_rules(&LaneRules::from_toml("refunds = \"50/s burst 1\"")?).await?;
/// for order in 1..=5 {
///     jobs.add("refunds/bank-a", format!("order {order}")).await?;
/// }
/// let summary = jobs
///     .worker()
///     .concurrency(2)
///     .until_empty(true)
///     .run(|job| async move {
///         println!("refunding {}", String::from_utf8_lossy(job.payload()));
///         Outcome::Done
///     })
///     .await?;
/// assert_eq!(summary.done, 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub struct Worker {
    jobs: Jobs,
    concurrency: usize,
    until_empty: bool,
    rules_file: Option<PathBuf>,
    rules_poll: Duration,
    retention: Option<Duration>,
    timeout: Option<Duration>,
    stop_grace: Duration,
    claim_ahead: Duration,
    stop: watch::Sender<bool>,
    progress: Progress,
    events: Option<EventSink>,
}

/// Stops a [`Worker`]: it takes no new job, lets running ones finish, and returns.
///
/// ```
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// # let dir = tempfile::tempdir()?;
/// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
/// let worker = jobs.worker();
/// let stop = worker.stopper();
/// stop.stop();
/// let summary = worker.run(|_| async { leakgate_jobs::Outcome::Done }).await?;
/// assert_eq!(summary.started, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Stop {
    tx: watch::Sender<bool>,
}

impl Stop {
    /// Asks the worker to stop.
    ///
    /// ```no_run
    /// # fn f(stop: leakgate_jobs::Stop) { stop.stop(); }
    /// ```
    pub fn stop(&self) {
        self.tx.send_replace(true);
    }
}

impl Jobs {
    /// A worker on this queue, with the defaults: concurrency 1, runs until stopped, done jobs
    /// kept for 7 days.
    ///
    /// ```no_run
    /// # async fn f(jobs: leakgate_jobs::Jobs) -> Result<(), leakgate_jobs::Error> {
    /// jobs.worker().concurrency(8).run(|job| async move {
    ///     // send the refund...
    ///     leakgate_jobs::Outcome::Done
    /// }).await?;
    /// # Ok(()) }
    /// ```
    pub fn worker(&self) -> Worker {
        Worker {
            jobs: self.clone(),
            concurrency: 1,
            until_empty: false,
            rules_file: None,
            rules_poll: Duration::from_secs(1),
            retention: Some(Duration::from_secs(7 * 86_400)),
            timeout: None,
            stop_grace: DEFAULT_GRACE,
            claim_ahead: DEFAULT_CLAIM_AHEAD,
            stop: watch::Sender::new(false),
            progress: Progress::default(),
            events: None,
        }
    }
}
impl Worker {
    /// Runs at once (default 1). At least 1.
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) { let w = jobs.worker().concurrency(16); }
    /// ```
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Return once no job is waiting or running in the whole database.
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) { let w = jobs.worker().until_empty(true); }
    /// ```
    pub fn until_empty(mut self, on: bool) -> Self {
        self.until_empty = on;
        self
    }

    /// Reads lane rules from this file at start (a bad file is an error then) and stores them
    /// for every worker; reads it again every `poll` (default 1 s) and stores it when it has
    /// changed and parses (a bad change is reported and the rules in force stay).
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) {
    /// let w = jobs.worker().rules_file("rules.toml", std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn rules_file(mut self, path: impl Into<PathBuf>, poll: Duration) -> Self {
        self.rules_file = Some(path.into());
        self.rules_poll = poll.max(Duration::from_millis(10));
        self
    }

    /// Remove done jobs finished longer ago than this (checked every 10 minutes); `None` keeps
    /// them. Their idempotency keys are forgotten with them.
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) {
    /// let w = jobs.worker().retention(Some(std::time::Duration::from_secs(86_400)));
    /// # }
    /// ```
    pub fn retention(mut self, keep: Option<Duration>) -> Self {
        self.retention = keep;
        self
    }

    /// A run still going this long after it started is stopped, and counts as a failed attempt
    /// ("timed out after ..."): retried after the backoff, or dead after `max_attempts`. Its
    /// handler sees the time in [`Job::deadline`](crate::Job::deadline) and has the
    /// [grace](Self::stop_grace) to return; then its future is dropped. The run keeps its lease
    /// until then. `None` (the default): no limit. A stopping worker (see [`Stop`]) waits for
    /// its runs, each until its own timeout at most.
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) {
    /// let w = jobs.worker().timeout(Some(std::time::Duration::from_secs(60)));
    /// # }
    /// ```
    pub fn timeout(mut self, limit: Option<Duration>) -> Self {
        self.timeout = limit;
        self
    }

    /// How long a run past its [timeout](Self::timeout) has to wind down before its handler is
    /// dropped (default 5 s).
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) {
    /// let w = jobs.worker().stop_grace(std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// Claims a paced lane's run up to this long before its slot (default 40 ms, see the
    /// README's numbers), charges it at its slot, and starts its handler then, never earlier:
    /// the claim's round trips and commit are then no longer lost from the lane's rate, and the
    /// run starts on its slot. The run's recorded start ([`Job::started`](crate::Job::started),
    /// [`Run::started_ns`](crate::Run::started_ns)) is its slot; its lease starts at the claim,
    /// and it takes its place in the concurrency (and in `max_in_flight`) from the claim. A run
    /// claimed ahead whose job is cancelled during the wait never runs. `Duration::ZERO`: claim
    /// only what may start at once (the claim's round trips then delay each slot).
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) {
    /// let w = jobs.worker().claim_ahead(std::time::Duration::from_millis(5));
    /// # }
    /// ```
    pub fn claim_ahead(mut self, ahead: Duration) -> Self {
        self.claim_ahead = ahead;
        self
    }

    /// Called with each [`Event`] (a run finished, rules reloaded or rejected, a lease lost, a
    /// database error being retried).
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) {
    /// let w = jobs.worker().on_event(|event| eprintln!("{event}"));
    /// # }
    /// ```
    pub fn on_event(mut self, sink: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.events = Some(Arc::new(sink));
        self
    }

    /// A handle that stops this worker.
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) { let w = jobs.worker(); let stop = w.stopper(); }
    /// ```
    pub fn stopper(&self) -> Stop {
        Stop { tx: self.stop.clone() }
    }

    /// Live counts of this worker.
    ///
    /// ```no_run
    /// # fn f(jobs: leakgate_jobs::Jobs) { let w = jobs.worker(); let p = w.progress(); }
    /// ```
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }
}
