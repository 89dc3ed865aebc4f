//! [`Jobs`]: the handle on one queue database: adding jobs, taking them, reporting runs.

use crate::error::Error;
use crate::job::{Added, Job, NewJob, Outcome, ns};
use crate::retry::Policy;
use crate::store::{Completion, Store, Take, Taken};
use leakgate::{Clock, ManualClock};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long [`Jobs::done`] and the like try to record an outcome whose lane another session
/// holds: twice the longest that PostgreSQL lets a stalled session hold it (30 s).
const LANE_WAIT: Duration = Duration::from_secs(60);

/// A handle on one queue: a SQLite file or a PostgreSQL database. Cheap to clone; clones share
/// the connection(s). Every method is one transaction.
///
/// ```
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// use leakgate_jobs::{Jobs, LaneRules};
/// let dir = tempfile::tempdir()?;
/// let jobs = Jobs::open(dir.path().join("jobs.db").to_str().unwrap()).await?;
/// jobs.set_rules(&LaneRules::from_toml("refunds = \"5/s burst 1\"")?).await?;
/// let id = jobs.add("refunds/bank-a", "order 42").await?;
/// let taken = jobs.take(10).await?;
/// assert_eq!(taken[0].id(), id);
/// jobs.done(&taken[0]).await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Jobs {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    policy: Policy,
    clock: Option<ManualClock>,
    /// Bumped by adds (and requeues) through this handle, so its workers need not wait for a
    /// poll; `seen` is marked before each claim, so an add during a claim still wakes the wait
    /// after it.
    added: watch::Sender<u64>,
    seen: std::sync::Mutex<watch::Receiver<u64>>,
}

impl Jobs {
    /// A handle on an open store (the builder's one constructor).
    pub(crate) fn from_parts(store: Store, policy: Policy, clock: Option<ManualClock>) -> Jobs {
        let (added, seen) = watch::channel(0);
        let seen = std::sync::Mutex::new(seen);
        Jobs { inner: Arc::new(Inner { store, policy, clock, added, seen }) }
    }

    /// Adds one job; returns its id once it is durably stored.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// let first = jobs.add("mail", "hello").await?;
    /// assert!(jobs.add("mail", "again").await? > first);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn add(&self, lane: &str, payload: impl Into<Vec<u8>>) -> Result<i64, Error> {
        Ok(self.add_job(NewJob::new(lane, payload)).await?.id)
    }

    /// Adds one job with its options (key, delay).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// use leakgate_jobs::NewJob;
    /// let a = jobs.add_job(NewJob::new("refunds/bank-a", "42").key("refund-42")).await?;
    /// let b = jobs.add_job(NewJob::new("refunds/bank-a", "42").key("refund-42")).await?;
    /// assert_eq!((a.id, a.new, b.new), (b.id, true, false));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn add_job(&self, job: NewJob) -> Result<Added, Error> {
        let added = self.add_all(vec![job]).await?;
        added.into_iter().next().ok_or_else(|| Error::Database("the add returned no id".into()))
    }

    /// Adds jobs in one transaction: all of them, or none. Answers in the same order.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// use leakgate_jobs::NewJob;
    /// let batch = (0..100).map(|i| NewJob::new("mail", format!("message {i}"))).collect();
    /// assert_eq!(jobs.add_all(batch).await?.len(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn add_all(&self, jobs: Vec<NewJob>) -> Result<Vec<Added>, Error> {
        let added = self.inner.store.add(jobs, self.now()).await?;
        self.wake();
        Ok(added)
    }

    /// Takes up to `max` jobs whose turn has come, charging each run to its lane's pace; the
    /// jobs are leased to the caller, who must report each with [`done`](Self::done),
    /// [`fail`](Self::fail) or [`slow_down`](Self::slow_down) (and [`renew`](Self::renew) the
    /// lease of a long run). Empty when nothing may run now.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("mail", "hello").await?;
    /// let taken = jobs.take(5).await?;
    /// assert_eq!((taken.len(), taken[0].attempt()), (1, 1));
    /// assert!(jobs.take(5).await?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn take(&self, max: usize) -> Result<Vec<Job>, Error> {
        Ok(self.take_raw(Vec::new(), max, true, Duration::ZERO).await?.jobs)
    }

    /// As [`take`](Self::take), and a paced lane's run may also be taken up to `ahead` before
    /// its slot: it is charged at its slot, which its [`started`](Job::started) says (on the
    /// database's clock), and the caller must not start it before then (a worker waits for it;
    /// see [`Worker::claim_ahead`](crate::Worker::claim_ahead)). Its lease starts at the take.
    /// Delayed jobs and paused lanes are not taken ahead. `Duration::ZERO` is [`take`](Self::take).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// use std::time::Duration;
    /// jobs.set_rules(&leakgate_jobs::LaneRules::from_toml("mail = \"1/s burst 1\"")?).await?;
    /// jobs.add("mail", "first").await?;
    /// jobs.add("mail", "second").await?;
    /// let taken = jobs.take_ahead(5, Duration::from_secs(2)).await?;
    /// // The second is charged at its slot, a second after the first: start it then.
    /// let gap = taken[1].started().duration_since(taken[0].started())?;
    /// assert!(gap >= Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn take_ahead(&self, max: usize, ahead: Duration) -> Result<Vec<Job>, Error> {
        Ok(self.take_raw(Vec::new(), max, true, ahead).await?.jobs)
    }

    /// Marks a taken job done.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// # jobs.add("mail", "hello").await?;
    /// let job = jobs.take(1).await?.remove(0);
    /// jobs.done(&job).await?;
    /// assert_eq!(jobs.status().await?[0].done, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn done(&self, job: &Job) -> Result<(), Error> {
        self.report(job, Outcome::Done).await
    }

    /// Marks a run failed: the job runs again after the backoff (through its lane's pace), or
    /// is dead after `max_attempts` failed runs.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// let jobs = leakgate_jobs::Jobs::builder(dir.path().join("q.db").to_str().unwrap())
    ///     .max_attempts(1)
    ///     .open()
    ///     .await?;
    /// jobs.add("mail", "hello").await?;
    /// let job = jobs.take(1).await?.remove(0);
    /// jobs.fail(&job, "SMTP 554").await?;
    /// assert_eq!(jobs.dead(None, 10).await?[0].error, "SMTP 554");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn fail(&self, job: &Job, error: &str) -> Result<(), Error> {
        self.report(job, Outcome::Failed(error.to_string())).await
    }

    /// The destination said "slow down": the job goes back to the front of its lane without
    /// counting as a failure, and the lane runs nothing for `pause`, then resumes at its pace
    /// with no burst.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("bank", "refund").await?;
    /// let job = jobs.take(1).await?.remove(0);
    /// jobs.slow_down(&job, std::time::Duration::from_secs(30)).await?;
    /// assert!(jobs.take(1).await?.is_empty(), "the lane is paused");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn slow_down(&self, job: &Job, pause: Duration) -> Result<(), Error> {
        self.report(job, Outcome::SlowDown(pause)).await
    }

    /// The job asked to be run again after `delay` (a `Retry-After` for this job): a failed
    /// attempt, counted towards `max_attempts`, retried after exactly `delay` instead of the
    /// backoff (the time is stored: every worker obeys it).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("bank", "refund").await?;
    /// let job = jobs.take(1).await?.remove(0);
    /// jobs.retry_after(&job, std::time::Duration::from_secs(60)).await?;
    /// assert!(jobs.take(1).await?.is_empty(), "not for a minute");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn retry_after(&self, job: &Job, delay: Duration) -> Result<(), Error> {
        self.report(job, Outcome::RetryAfter(delay)).await
    }

    /// Extends the leases of running jobs by the lease time; [`Error::LeaseLost`] names the
    /// first whose lease had already run out (it is back in the queue).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// # jobs.add("mail", "hello").await?;
    /// let job = jobs.take(1).await?.remove(0);
    /// jobs.renew(&[&job]).await?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn renew(&self, jobs: &[&Job]) -> Result<(), Error> {
        let leases = jobs.iter().map(|j| (j.id, j.attempt)).collect();
        let lost = self.renew_raw(leases).await?;
        lost.first().map_or(Ok(()), |&(id, _)| Err(Error::LeaseLost(id)))
    }

    /// The retry and lease policy.
    pub(crate) fn policy(&self) -> Policy {
        self.inner.policy
    }

    /// The caller's clock reading, if the handle decides on it.
    pub(crate) fn now(&self) -> Option<i64> {
        self.inner.clock.as_ref().map(|c| c.now_ns().min(i64::MAX as u64) as i64)
    }

    /// Records `completions` and takes up to `max` jobs in one transaction.
    pub(crate) async fn take_raw(
        &self,
        completions: Vec<Completion>,
        max: usize,
        look_first: bool,
        ahead: Duration,
    ) -> Result<Taken, Error> {
        let ahead = ns(ahead);
        self.inner.seen.lock().unwrap_or_else(|p| p.into_inner()).borrow_and_update();
        let take = Take {
            completions,
            max,
            policy: self.inner.policy,
            now: self.now(),
            look_first,
            ahead,
        };
        self.inner.store.take(take).await
    }

    pub(crate) async fn renew_raw(
        &self,
        leases: Vec<(i64, u32)>,
    ) -> Result<Vec<(i64, u32)>, Error> {
        self.inner.store.renew(leases, self.inner.policy.lease, self.now()).await
    }

    async fn report(&self, job: &Job, outcome: Outcome) -> Result<(), Error> {
        let completion =
            Completion { id: job.id, attempt: job.attempt, lane: job.lane.clone(), outcome };
        // A lane another session holds (PostgreSQL) leaves the outcome unrecorded: try again
        // shortly, for as long as the server lets a stalled session hold a lane, and then some.
        let give_up = tokio::time::Instant::now() + LANE_WAIT;
        let mut wait = Duration::from_millis(1);
        loop {
            let taken = self.take_raw(vec![completion.clone()], 0, false, Duration::ZERO).await?;
            if let Some(&(id, _)) = taken.lost.first() {
                return Err(Error::LeaseLost(id));
            }
            if taken.deferred.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= give_up {
                return Err(Error::LaneBusy(job.lane.clone()));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(100));
        }
    }

    /// Waits until this handle adds a job, another connection changes the database, or
    /// `timeout` passes.
    pub(crate) async fn changed(&self, timeout: Duration) {
        let mut added = self.inner.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        tokio::select! {
            _ = added.changed() => {}
            _ = self.inner.store.changed(timeout) => {}
        }
    }

    /// The store, for the operating methods.
    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Tells this handle's waiting workers that jobs may be takeable.
    pub(crate) fn wake(&self) {
        self.inner.added.send_modify(|n| *n += 1);
    }
}
