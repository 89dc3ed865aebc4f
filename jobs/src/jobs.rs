//! [`Jobs`]: the handle on one queue database, and its builder.

use crate::error::Error;
use crate::job::{Added, Job, NewJob, Outcome};
use crate::rules::LaneRules;
use crate::status::{DeadJob, LaneStatus, Requeue, Run};
use crate::store::{Completion, Policy, Store, Take, Taken};
use leakgate::{Clock, ManualClock};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The defaults: 5 runs at most, 1 s backoff (doubling), 30 s leases.
const DEFAULT_POLICY: Policy =
    Policy { max_attempts: 5, backoff: Duration::from_secs(1), lease: Duration::from_secs(30) };

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

/// How to open a [`Jobs`] handle: retry policy, lease, clock.
///
/// ```
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// use std::time::Duration;
/// let dir = tempfile::tempdir()?;
/// let jobs = leakgate_jobs::Jobs::builder(dir.path().join("q.db").to_str().unwrap())
///     .max_attempts(10)
///     .backoff(Duration::from_millis(500))
///     .lease(Duration::from_secs(60))
///     .open()
///     .await?;
/// # let _ = jobs;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct JobsBuilder {
    db: String,
    policy: Policy,
    clock: Option<ManualClock>,
    connections: usize,
}

impl JobsBuilder {
    /// Runs before a job is dead (default 5). At least 1.
    ///
    /// ```
    /// let b = leakgate_jobs::Jobs::builder("q.db").max_attempts(3);
    /// # let _ = b;
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.policy.max_attempts = n.max(1);
        self
    }

    /// The wait after a first failed run (default 1 s); it doubles with each further failure,
    /// plus up to a quarter of it at random.
    ///
    /// ```
    /// let b = leakgate_jobs::Jobs::builder("q.db").backoff(std::time::Duration::from_secs(2));
    /// # let _ = b;
    /// ```
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.policy.backoff = backoff;
        self
    }

    /// How long a taken job is held without renewal (default 30 s); a worker renews its jobs'
    /// leases every third of it. A job whose lease runs out is taken again.
    ///
    /// ```
    /// let b = leakgate_jobs::Jobs::builder("q.db").lease(std::time::Duration::from_secs(10));
    /// # let _ = b;
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.policy.lease = lease.max(Duration::from_millis(1));
        self
    }

    /// Decide on the caller's clock instead of the database's: `clock`'s reading is taken as
    /// nanoseconds since the Unix epoch. For tests (time moves only when told to).
    ///
    /// ```
    /// let clock = leakgate::ManualClock::new();
    /// clock.set(std::time::Duration::from_secs(1_700_000_000));
    /// let b = leakgate_jobs::Jobs::builder("q.db").caller_clock(clock);
    /// # let _ = b;
    /// ```
    pub fn caller_clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Connections to PostgreSQL (default 2, besides the one that listens); SQLite uses one.
    ///
    /// ```
    /// let b = leakgate_jobs::Jobs::builder("postgres://localhost/jobs").connections(4);
    /// # let _ = b;
    /// ```
    pub fn connections(mut self, n: usize) -> Self {
        self.connections = n.max(1);
        self
    }

    /// Opens the database, creating it (SQLite) and its schema as needed.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// let e = leakgate_jobs::Jobs::builder("/nonexistent/dir/q.db").open().await.unwrap_err();
    /// assert!(e.to_string().contains("/nonexistent/dir/q.db"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn open(self) -> Result<Jobs, Error> {
        let store = Store::open(&self.db, self.connections).await?;
        let (added, seen) = watch::channel(0);
        let seen = std::sync::Mutex::new(seen);
        let inner = Inner { store, policy: self.policy, clock: self.clock, added, seen };
        Ok(Jobs { inner: Arc::new(inner) })
    }
}

impl Jobs {
    /// Opens `db` with the defaults: a `postgres://` URL, or a SQLite file path (created if
    /// missing).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// # let _ = jobs;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn open(db: &str) -> Result<Jobs, Error> {
        Jobs::builder(db).open().await
    }

    /// A builder for `db`.
    ///
    /// ```
    /// let builder = leakgate_jobs::Jobs::builder("jobs.db");
    /// # let _ = builder;
    /// ```
    pub fn builder(db: &str) -> JobsBuilder {
        JobsBuilder { db: db.to_string(), policy: DEFAULT_POLICY, clock: None, connections: 2 }
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
        self.inner.added.send_modify(|n| *n += 1);
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
        Ok(self.take_raw(Vec::new(), max, true).await?.jobs)
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
        lost.first().map_or(Ok(()), |&id| Err(Error::LeaseLost(id)))
    }

    /// Stores the rules every worker on this database paces by; running workers pick them up at
    /// their next claim, each lane keeping its level.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// use leakgate_jobs::LaneRules;
    /// jobs.set_rules(&LaneRules::from_toml("bank = \"1/s\"")?).await?;
    /// assert_eq!(jobs.rules().await?.pace("bank/a").0, "bank");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn set_rules(&self, rules: &LaneRules) -> Result<(), Error> {
        self.inner.store.set_rules(rules.text().to_string()).await?;
        Ok(())
    }

    /// The rules stored in the database (none: nothing is paced).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// assert!(jobs.rules().await?.pace("any").1.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn rules(&self) -> Result<LaneRules, Error> {
        Ok(LaneRules::clone(&*self.inner.store.rules().await?))
    }

    /// Every lane's counts and pace, by lane name.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("mail", "hello").await?;
    /// let status = jobs.status().await?;
    /// assert_eq!((status[0].lane.as_str(), status[0].waiting()), ("mail", 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn status(&self) -> Result<Vec<LaneStatus>, Error> {
        let mut lanes = self.inner.store.status(self.now()).await?;
        let rules = self.inner.store.rules().await?;
        for lane in &mut lanes {
            let (path, quotas) = rules.pace(&lane.lane);
            if let Some(first) = quotas.first() {
                let texts: Vec<String> = quotas.iter().map(|q| q.to_string()).collect();
                lane.rule = Some(format!("{path:?} = {}", texts.join(", ")));
                let per_minute = first.count() as f64 * 60e9 / first.period().as_nanos() as f64;
                lane.rule_per_minute = Some(per_minute);
            }
        }
        Ok(lanes)
    }

    /// Dead jobs, of one lane or all, oldest first, at most `limit`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// assert!(jobs.dead(Some("mail"), 100).await?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn dead(&self, lane: Option<&str>, limit: usize) -> Result<Vec<DeadJob>, Error> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.inner.store.dead(lane.map(str::to_string), limit).await
    }

    /// Puts dead jobs back in their lanes, their failures forgotten; answers how many.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// use leakgate_jobs::Requeue;
    /// assert_eq!(jobs.requeue(Requeue::All).await?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn requeue(&self, which: Requeue) -> Result<u64, Error> {
        let n = self.inner.store.requeue(which, self.now()).await?;
        self.inner.added.send_modify(|n| *n += 1);
        Ok(n)
    }

    /// Removes done jobs finished more than `older_than` ago (their keys are then forgotten),
    /// and the record of runs started before that; answers how many jobs.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// assert_eq!(jobs.purge(std::time::Duration::from_secs(86_400)).await?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn purge(&self, older_than: Duration) -> Result<u64, Error> {
        self.inner.store.purge(older_than, self.now()).await
    }

    /// Every recorded run of a lane (until purged), by start: when each started and the slot it
    /// was charged against.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("mail", "hello").await?;
    /// let job = jobs.take(1).await?.remove(0);
    /// assert_eq!(jobs.runs("mail").await?[0].job, job.id());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn runs(&self, lane: &str) -> Result<Vec<Run>, Error> {
        self.inner.store.runs(lane.to_string()).await
    }

    /// Which backend this handle uses: `"SQLite"` or `"PostgreSQL"`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// assert_eq!(jobs.backend(), "SQLite");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn backend(&self) -> &'static str {
        self.inner.store.kind()
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
    ) -> Result<Taken, Error> {
        self.inner.seen.lock().unwrap_or_else(|p| p.into_inner()).borrow_and_update();
        let take =
            Take { completions, max, policy: self.inner.policy, now: self.now(), look_first };
        self.inner.store.take(take).await
    }

    pub(crate) async fn renew_raw(&self, leases: Vec<(i64, u32)>) -> Result<Vec<i64>, Error> {
        self.inner.store.renew(leases, self.inner.policy.lease, self.now()).await
    }

    async fn report(&self, job: &Job, outcome: Outcome) -> Result<(), Error> {
        let completion = Completion { id: job.id, attempt: job.attempt, outcome };
        let taken = self.take_raw(vec![completion], 0, false).await?;
        match taken.lost.first() {
            Some(&id) => Err(Error::LeaseLost(id)),
            None => Ok(()),
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
}
