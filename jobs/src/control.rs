//! Controlling the queue by hand: cancelling jobs, pausing and resuming lanes, schedules.

use crate::error::Error;
use crate::jobs::Jobs;
use crate::schedule::{Schedule, ScheduleInfo};

impl Jobs {
    /// Cancels jobs by id, all in one transaction: a waiting job never runs; a running one is
    /// not retried, and its worker stops the run (with its whole process group, for `leakgate
    /// jobs work`) when it next renews its lease, within a third of the lease. Done, dead and
    /// already cancelled jobs are left as they are. Answers how many were cancelled; an id not
    /// in the database is an error, and then nothing is cancelled.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// let id = jobs.add("mail", "hello").await?;
    /// assert_eq!(jobs.cancel(&[id]).await?, 1);
    /// assert!(jobs.take(1).await?.is_empty());
    /// assert!(jobs.cancel(&[id + 1]).await.is_err(), "no such job");
    /// assert_eq!(jobs.status().await?[0].cancelled, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn cancel(&self, ids: &[i64]) -> Result<u64, Error> {
        let n = self.store().cancel(ids.to_vec(), self.now()).await?;
        metrics::counter!("leakgate_jobs_cancelled_total").increment(n);
        Ok(n)
    }

    /// Pauses a lane: its jobs are not taken until it is resumed (runs going on finish). A lane
    /// that never had a job is an error (a typo), and nothing changes.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("mail", "hello").await?;
    /// jobs.pause("mail").await?;
    /// assert!(jobs.take(1).await?.is_empty());
    /// assert!(jobs.status().await?[0].paused);
    /// jobs.resume("mail").await?;
    /// assert_eq!(jobs.take(1).await?.len(), 1);
    /// assert!(jobs.pause("mial").await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn pause(&self, lane: &str) -> Result<(), Error> {
        self.store().pause(lane.to_string(), true).await?;
        metrics::counter!("leakgate_jobs_lane_pauses_total").increment(1);
        Ok(())
    }

    /// Resumes a paused lane (a lane not paused stays as it is); a lane that never had a job is
    /// an error.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("mail", "hello").await?;
    /// jobs.resume("mail").await?;
    /// assert!(!jobs.status().await?[0].paused);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn resume(&self, lane: &str) -> Result<(), Error> {
        self.store().pause(lane.to_string(), false).await?;
        metrics::counter!("leakgate_jobs_lane_resumes_total").increment(1);
        self.wake();
        Ok(())
    }

    /// Stores a schedule (replacing one of the same name): from its first tick after now, a
    /// job of its payload is added to its lane on every tick, once per tick however many
    /// workers run (the database keeps one job per (schedule, tick)). Ticks are added by
    /// workers' claims: with no worker running, ticks are missed (see [`Missed`](crate::Missed)).
    /// A schedule that does not check out is refused and nothing is written.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// use leakgate_jobs::{Every, Schedule};
    /// jobs.every(Schedule::new("nightly", Every::cron("0 3 * * *", Some("Europe/Paris")), "reports", "full")).await?;
    /// assert_eq!(jobs.schedules().await?[0].schedule.name(), "nightly");
    /// jobs.remove_schedule("nightly").await?;
    /// assert!(jobs.remove_schedule("nightly").await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn every(&self, schedule: Schedule) -> Result<(), Error> {
        self.store().set_schedule(schedule, self.now()).await?;
        self.wake();
        Ok(())
    }

    /// Every stored schedule, by name, with its next tick.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// assert!(jobs.schedules().await?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        self.store().schedules().await
    }

    /// Removes a schedule by name (the jobs it added stay); an unknown name is an error.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// assert!(jobs.remove_schedule("nope").await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn remove_schedule(&self, name: &str) -> Result<(), Error> {
        self.store().remove_schedule(name.to_string()).await
    }
}
