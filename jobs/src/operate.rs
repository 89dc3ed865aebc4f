//! Operating a queue through a [`Jobs`] handle: rules, status, dead jobs, requeue, purge, runs.

use crate::error::Error;
use crate::jobs::Jobs;
use crate::pace::LanePace;
use crate::rules::LaneRules;
use crate::status::{DeadJob, LaneStatus, Requeue, Run};
use leakgate::Quota;
use std::collections::HashMap;
use std::time::Duration;

impl Jobs {
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
        self.store().set_rules(rules.text().to_string()).await?;
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
        Ok(LaneRules::clone(&*self.store().rules().await?))
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
        let mut lanes = self.store().status(self.now()).await?;
        let rules = self.store().rules().await?;
        let adaptive: Vec<String> = lanes
            .iter()
            .filter(|l| rules.limits(&l.lane).adaptive_floor.is_some())
            .map(|l| l.lane.clone())
            .collect();
        let rows = if adaptive.is_empty() {
            HashMap::new()
        } else {
            self.store().pace_rows(adaptive).await?
        };
        let per_minute = |q: &Quota| q.count() as f64 * 60e9 / q.period().as_nanos() as f64;
        for lane in &mut lanes {
            let (path, quotas) = rules.pace(&lane.lane);
            if let Some(first) = quotas.first() {
                let texts: Vec<String> = quotas.iter().map(|q| q.to_string()).collect();
                lane.rule = Some(format!("{path:?} = {}", texts.join(", ")));
                lane.rule_per_minute = Some(per_minute(first));
                let floor = rules.limits(&lane.lane).adaptive_floor;
                let stored = rows.get(&lane.lane).map_or(&[][..], |v| v);
                // The rate in force, as a claim would load it (the clock only moves levels).
                let pace = LanePace::load(quotas, floor, stored, 0);
                lane.pace_per_minute = pace.first_quota().as_ref().map(per_minute);
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
        self.store().dead(lane.map(str::to_string), limit).await
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
        let n = self.store().requeue(which, self.now()).await?;
        self.wake();
        Ok(n)
    }

    /// Removes done and cancelled jobs finished more than `older_than` ago (their keys are then forgotten),
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
        self.store().purge(older_than, self.now()).await
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
        self.store().runs(lane.to_string()).await
    }

    /// The latest `limit` runs of a lane, by start (what a dashboard charts without reading a
    /// lane's whole history).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// # let jobs = leakgate_jobs::Jobs::open(dir.path().join("q.db").to_str().unwrap()).await?;
    /// jobs.add("mail", "one").await?;
    /// jobs.add("mail", "two").await?;
    /// let taken = jobs.take(2).await?;
    /// let last = jobs.recent_runs("mail", 1).await?;
    /// assert_eq!(last.len(), 1);
    /// assert_eq!(last[0], *jobs.runs("mail").await?.last().unwrap());
    /// # let _ = taken;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn recent_runs(&self, lane: &str, limit: usize) -> Result<Vec<Run>, Error> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.store().recent_runs(lane.to_string(), limit).await
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
        self.store().kind()
    }
}
