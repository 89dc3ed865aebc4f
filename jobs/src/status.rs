//! What `status`, `dead` and `runs` report.

use std::time::{Duration, SystemTime};

/// One lane's counts and pace, as [`Jobs::status`](crate::Jobs::status) reports them.
///
/// ```no_run
/// # async fn f(jobs: leakgate_jobs::Jobs) -> Result<(), leakgate_jobs::Error> {
/// for lane in jobs.status().await? {
///     println!("{}: {} waiting, {} running, {} dead", lane.lane, lane.waiting(), lane.running, lane.dead);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneStatus {
    /// The lane.
    pub lane: String,
    /// Jobs due now, waiting for their turn (pace, `max_in_flight`, a worker).
    pub ready: u64,
    /// Jobs waiting for a time: an `after` delay or a retry's backoff.
    pub scheduled: u64,
    /// Jobs taken by a worker, whose run has not finished.
    pub running: u64,
    /// Jobs that failed `max_attempts` times: kept, never run again unless requeued.
    pub dead: u64,
    /// Done jobs still kept (until purged).
    pub done: u64,
    /// Jobs cancelled (kept until purged, like done ones).
    pub cancelled: u64,
    /// Whether the lane is paused by hand ([`Jobs::pause`](crate::Jobs::pause)).
    pub paused: bool,
    /// How long the oldest waiting job has waited since it was added.
    pub oldest_waiting: Option<Duration>,
    /// How long until the lane's pace lets its next run go (`None`: now, or not paced).
    pub next_slot_in: Option<Duration>,
    /// Runs started in the last 60 seconds.
    pub runs_last_minute: u64,
    /// The rule that paces it (path and quotas, as text), if any.
    pub rule: Option<String>,
    /// What its rule allows in a minute, the burst aside (the first quota's rate), if paced.
    pub rule_per_minute: Option<f64>,
    /// The rate it runs at now, a minute (the first quota's, the burst aside), if paced: its
    /// rule's, or less while an adaptive lane is backed off after a "slow down".
    pub pace_per_minute: Option<f64>,
}

impl LaneStatus {
    /// Jobs not yet running: `ready + scheduled`.
    ///
    /// ```
    /// let s = leakgate_jobs::LaneStatus { ready: 2, scheduled: 3, ..Default::default() };
    /// assert_eq!(s.waiting(), 5);
    /// ```
    pub fn waiting(&self) -> u64 {
        self.ready + self.scheduled
    }
}

/// A dead job, as [`Jobs::dead`](crate::Jobs::dead) lists it.
///
/// ```no_run
/// # async fn f(jobs: leakgate_jobs::Jobs) -> Result<(), leakgate_jobs::Error> {
/// for job in jobs.dead(Some("refunds/bank-a"), 100).await? {
///     println!("{} after {} runs: {}", job.id, job.attempts, job.error);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadJob {
    /// The job's id.
    pub id: i64,
    /// Its lane.
    pub lane: String,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Its idempotency key.
    pub key: Option<String>,
    /// Runs started.
    pub attempts: u32,
    /// What its last failure said.
    pub error: String,
    /// When it died.
    pub died: SystemTime,
}

/// One run of a job: when it started and the slot it was charged against.
///
/// ```no_run
/// # async fn f(jobs: leakgate_jobs::Jobs) -> Result<(), leakgate_jobs::Error> {
/// for run in jobs.runs("refunds/bank-a").await? {
///     println!("job {} attempt {} late by {:?}", run.job, run.attempt, run.lateness());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// The job's id.
    pub job: i64,
    /// Which run of it (from 1).
    pub attempt: u32,
    /// When it started: ns since the Unix epoch, on the database's clock (the time it was
    /// charged at: the claim's, or its slot when claimed ahead).
    pub started_ns: i64,
    /// Its slot: the earliest time it could have started (pace and due time), same clock.
    pub slot_ns: i64,
}

impl Run {
    /// How long after its slot it started, by its recorded start: the decision time (the
    /// claim's clock reading, or its slot when claimed ahead), not the worker's wake-up, which
    /// a handler's [`Job::lateness`](crate::Job::lateness) adds.
    ///
    /// ```
    /// let run = leakgate_jobs::Run { job: 1, attempt: 1, started_ns: 1500, slot_ns: 1000 };
    /// assert_eq!(run.lateness().as_nanos(), 500);
    /// ```
    pub fn lateness(&self) -> Duration {
        Duration::from_nanos(self.started_ns.saturating_sub(self.slot_ns).max(0) as u64)
    }
}

/// Which dead jobs [`Jobs::requeue`](crate::Jobs::requeue) puts back.
///
/// ```
/// let which = leakgate_jobs::Requeue::Lane("refunds/bank-a".into());
/// # let _ = which;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// Every dead job of one lane.
    Lane(String),
    /// These jobs (those that are dead).
    Ids(Vec<i64>),
    /// Every dead job.
    All,
}
