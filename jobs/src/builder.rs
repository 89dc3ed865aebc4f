//! [`JobsBuilder`]: how to open a [`Jobs`] handle (retry policy, lease, clock, connections).

use crate::error::Error;
use crate::jobs::Jobs;
use crate::retry::Policy;
use crate::store::Store;
use leakgate::ManualClock;
use std::time::Duration;

/// The defaults: 5 runs at most, 1 s backoff (doubling), 30 s leases.
const DEFAULT_POLICY: Policy =
    Policy { max_attempts: 5, backoff: Duration::from_secs(1), lease: Duration::from_secs(30) };

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
        let store = Store::open(&self.db, self.connections, self.policy.lease).await?;
        Ok(Jobs::from_parts(store, self.policy, self.clock))
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
}
