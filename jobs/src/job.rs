//! Jobs: what is added (a [`NewJob`]), what a worker takes (a [`Job`]).

use crate::error::Error;
use std::time::{Duration, Instant, SystemTime};

/// The largest payload a job may carry: 16 MiB. A queue holds work, not files: put large
/// data elsewhere and its name in the payload.
///
/// ```
/// assert_eq!(leakgate_jobs::MAX_PAYLOAD, 16 << 20);
/// ```
pub const MAX_PAYLOAD: usize = 16 << 20;

/// The longest lane name, in bytes.
///
/// ```
/// assert_eq!(leakgate_jobs::MAX_LANE, 512);
/// ```
pub const MAX_LANE: usize = 512;

/// A job to add: a payload in a lane, with an optional idempotency key and delay.
///
/// ```
/// use leakgate_jobs::NewJob;
/// use std::time::Duration;
/// let job = NewJob::new("refunds/bank-a", "order 42: 19.99 EUR")
///     .key("refund-42")
///     .after(Duration::from_secs(60));
/// assert!(job.check().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewJob {
    pub(crate) lane: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) key: Option<String>,
    pub(crate) after: Duration,
    pub(crate) priority: u32,
}

/// The highest priority a job may have: 2^31 - 1 (a priority is stored as a signed 32-bit
/// integer in both databases).
///
/// ```
/// assert_eq!(leakgate_jobs::MAX_PRIORITY, 2_147_483_647);
/// ```
pub const MAX_PRIORITY: u32 = i32::MAX as u32;

impl NewJob {
    /// A job of `payload` in `lane`, to run as soon as its lane's pace allows.
    ///
    /// ```
    /// let job = leakgate_jobs::NewJob::new("mail", b"hello".to_vec());
    /// assert_eq!(job.lane(), "mail");
    /// ```
    pub fn new(lane: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        NewJob {
            lane: lane.into(),
            payload: payload.into(),
            key: None,
            after: Duration::ZERO,
            priority: 0,
        }
    }

    /// An idempotency key: adding a job whose key is already stored (in any lane, until the job
    /// is purged) adds nothing and answers the stored job's id.
    ///
    /// ```
    /// let job = leakgate_jobs::NewJob::new("mail", "x").key("welcome-7");
    /// # assert!(job.check().is_ok());
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Not run before `delay` has passed (from the time it is stored, on the database's clock).
    ///
    /// ```
    /// let job = leakgate_jobs::NewJob::new("mail", "x").after(std::time::Duration::from_secs(5));
    /// # assert!(job.check().is_ok());
    /// ```
    pub fn after(mut self, delay: Duration) -> Self {
        self.after = delay;
        self
    }

    /// Its priority within its lane, 0 (the default) to [`MAX_PRIORITY`]: a lane's ready job of
    /// the highest priority runs first, and jobs of equal priority in the order they were added.
    /// Priorities order jobs within a lane only: the pace and the turns between lanes are the same.
    ///
    /// ```
    /// use leakgate_jobs::{NewJob, MAX_PRIORITY};
    /// assert!(NewJob::new("mail", "x").priority(MAX_PRIORITY).check().is_ok());
    /// assert!(NewJob::new("mail", "x").priority(MAX_PRIORITY + 1).check().is_err());
    /// ```
    pub fn priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// The lane.
    ///
    /// ```
    /// assert_eq!(leakgate_jobs::NewJob::new("a/b", "").lane(), "a/b");
    /// ```
    pub fn lane(&self) -> &str {
        &self.lane
    }

    /// Whether the job can be stored: a lane of 1 to [`MAX_LANE`] bytes with no control
    /// character, a key likewise, a payload of at most [`MAX_PAYLOAD`] bytes and a priority of
    /// at most [`MAX_PRIORITY`].
    ///
    /// ```
    /// use leakgate_jobs::NewJob;
    /// assert!(NewJob::new("a\u{0}b", "").check().is_err());
    /// assert!(NewJob::new("a", vec![0; leakgate_jobs::MAX_PAYLOAD + 1]).check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        check_name(&self.lane).map_err(|why| Error::BadLane(format!("{:?}: {why}", self.lane)))?;
        if let Some(key) = &self.key {
            check_name(key).map_err(|why| Error::BadKey(format!("{key:?}: {why}")))?;
        }
        if self.payload.len() > MAX_PAYLOAD {
            return Err(Error::PayloadTooLarge { size: self.payload.len() });
        }
        if self.priority > MAX_PRIORITY {
            return Err(Error::BadPriority(u64::from(self.priority)));
        }
        Ok(())
    }
}

/// A lane or key: 1 to [`MAX_LANE`] bytes, no control characters.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > MAX_LANE {
        return Err(format!("{} bytes, longer than the limit of {MAX_LANE}", name.len()));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!("contains the control character {c:?}"));
    }
    Ok(())
}

/// What an add did: the job's id, and whether it is new (`false`: a job with the same key was
/// already stored, and nothing was added).
///
/// ```
/// let added = leakgate_jobs::Added { id: 7, new: false };
/// assert_eq!(added.id, 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Added {
    /// The job's id.
    pub id: i64,
    /// Whether this add stored it.
    pub new: bool,
}

/// How a run ended.
///
/// ```
/// use leakgate_jobs::Outcome;
/// use std::time::Duration;
/// let outcomes = [
///     Outcome::Done,                                   // the job is done
///     Outcome::Failed("bank said 500".into()),         // retried after a backoff, or dead
///     Outcome::SlowDown(Duration::from_secs(30)),      // "429": pause the lane, run it again
///     Outcome::RetryAfter(Duration::from_secs(60)),    // this job again in a minute
/// ];
/// # let _ = outcomes;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The job is done.
    Done,
    /// The run failed (with this message): the job runs again after the backoff, through its
    /// lane's pace, or is dead after `max_attempts` failed runs.
    Failed(String),
    /// The destination asked to slow down: the job goes back to the front of its lane without
    /// counting as a failure, and the lane runs nothing for this long, then resumes at its pace
    /// with no burst.
    SlowDown(Duration),
    /// The job asked to be run again after this long (a `Retry-After` for this job only): a
    /// failed run like [`Failed`](Self::Failed) (it counts towards `max_attempts`), retried after
    /// exactly this delay instead of the backoff, stored in the database for every worker.
    RetryAfter(Duration),
}

/// A job taken by a worker: it holds a lease until it is marked done, failed or slowed down.
///
/// ```no_run
/// # async fn f(jobs: leakgate_jobs::Jobs) -> Result<(), leakgate_jobs::Error> {
/// for job in jobs.take(1).await? {
///     println!("{} in {} (attempt {})", job.id(), job.lane(), job.attempt());
///     jobs.done(&job).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub(crate) id: i64,
    pub(crate) lane: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) attempt: u32,
    pub(crate) key: Option<String>,
    /// When this run starts, ns since the epoch on the database's clock: the time it was charged
    /// at (the claim's, or its slot when claimed ahead); a worker moves it, as it calls the
    /// handler, by how late it woke for it.
    pub(crate) started_ns: i64,
    /// The slot it was charged against: the earliest time it could have started.
    pub(crate) slot_ns: i64,
    /// When the worker stops this run (its timeout), if it has one.
    pub(crate) deadline: Option<Instant>,
}

impl Job {
    /// The job's id (unique in its database, never reused).
    ///
    /// ```no_run
    /// # fn f(job: leakgate_jobs::Job) { println!("{}", job.id()); }
    /// ```
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Its lane.
    ///
    /// ```no_run
    /// # fn f(job: leakgate_jobs::Job) { println!("{}", job.lane()); }
    /// ```
    pub fn lane(&self) -> &str {
        &self.lane
    }

    /// Its payload.
    ///
    /// ```no_run
    /// # fn f(job: leakgate_jobs::Job) { println!("{}", String::from_utf8_lossy(job.payload())); }
    /// ```
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Which run this is, from 1. It rises with every run, also when a run's worker died, so it
    /// works as a fencing token: pass `(id, attempt)` on as an idempotency key.
    ///
    /// ```no_run
    /// # fn f(job: leakgate_jobs::Job) { let fence = format!("{}-{}", job.id(), job.attempt()); }
    /// ```
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The idempotency key it was added with.
    ///
    /// ```no_run
    /// # fn f(job: leakgate_jobs::Job) { println!("{:?}", job.key()); }
    /// ```
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// When this run started, on the database's clock: the time its run was charged at (the
    /// take's, or its slot when [taken ahead](crate::Jobs::take_ahead), not to be started
    /// before); in a [worker](crate::Worker)'s handler, that moved by how late the worker
    /// really called it.
    ///
    /// ```no_run
    /// # fn f(job: leakgate_jobs::Job) { println!("{:?}", job.started()); }
    /// ```
    pub fn started(&self) -> SystemTime {
        to_time(self.started_ns)
    }

    /// When this run is stopped, if its worker has a [timeout](crate::Worker::timeout): a
    /// handler that may run long can watch it (`tokio::time::timeout_at`) and wind down. Past
    /// it, the handler has the worker's [grace](crate::Worker::stop_grace) to return, and is then
    /// dropped; either way the run counts as a failed attempt ("timed out after ...").
    ///
    /// ```no_run
    /// # async fn f(job: leakgate_jobs::Job) -> leakgate_jobs::Outcome {
    /// let send = async { /* call the bank */ leakgate_jobs::Outcome::Done };
    /// match job.deadline() {
    ///     Some(at) => tokio::time::timeout_at(at.into(), send)
    ///         .await
    ///         .unwrap_or_else(|_| leakgate_jobs::Outcome::Failed("the bank was too slow".into())),
    ///     None => send.await,
    /// }
    /// # }
    /// ```
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// How long after its slot this run started ([`started`](Self::started) less its slot): the
    /// slot is the later of the time its lane's pace let it go and the time it became due. In a
    /// [worker](crate::Worker)'s handler it is the real lateness: the claim's (0 when claimed
    /// ahead in time, see [`Worker::claim_ahead`](crate::Worker::claim_ahead)) and the worker's
    /// own wake-up's, as the `leakgate_jobs_lateness_seconds` metric records it.
    ///
    /// ```no_run
    /// # fn f(job: leakgate_jobs::Job) { println!("late by {:?}", job.lateness()); }
    /// ```
    pub fn lateness(&self) -> Duration {
        Duration::from_nanos(self.started_ns.saturating_sub(self.slot_ns).max(0) as u64)
    }
}

/// Nanoseconds since the Unix epoch as a `SystemTime`.
pub(crate) fn to_time(ns: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_nanos(ns.max(0) as u64)
}

/// `later - earlier` (nanoseconds) as a duration, 0 if negative.
pub(crate) fn since(later: i64, earlier: i64) -> Duration {
    Duration::from_nanos(later.saturating_sub(earlier).max(0) as u64)
}

/// A duration in nanoseconds, saturating at `i64::MAX`.
pub(crate) fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The system's real-time clock in nanoseconds since the Unix epoch.
pub(crate) fn system_now() -> i64 {
    match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => ns(d),
        Err(_) => 0,
    }
}
