//! The two stores, SQLite and PostgreSQL, behind one set of operations.
//!
//! Both keep the same tables (see `schema` in each) and do the same thing in each operation; the
//! decisions that are not SQL (pace, retry delays, which outcome a run gets) are made by the
//! shared pure code in [`crate::pace`] and [`crate::retry`], so the stores differ only in how
//! they lock and talk to their database.

pub(crate) mod postgres;
pub(crate) mod sqlite;

use crate::error::Error;
use crate::job::{Added, Job, NewJob, Outcome};
use crate::pace::StoredBucket;
use crate::retry::Policy;
use crate::rules::LaneRules;
use crate::schedule::{Schedule, ScheduleInfo};
use crate::status::{DeadJob, LaneStatus, Requeue, Run};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Job states, as stored.
pub(crate) mod state {
    /// Due, waiting for its turn.
    pub(crate) const READY: i64 = 0;
    /// Waiting for a time (`after`, backoff).
    pub(crate) const SCHEDULED: i64 = 1;
    /// Taken by a worker, under a lease.
    pub(crate) const RUNNING: i64 = 2;
    /// Finished (kept until purged).
    pub(crate) const DONE: i64 = 3;
    /// Failed `max_attempts` times.
    pub(crate) const DEAD: i64 = 4;
    /// Cancelled: never runs (again); kept until purged, like a done job.
    pub(crate) const CANCELLED: i64 = 5;

    // Both stores' SQL (schema indexes, every query) names the states by these numbers.
    const _: () = assert!(
        READY == 0 && SCHEDULED == 1 && RUNNING == 2 && DONE == 3 && DEAD == 4 && CANCELLED == 5
    );
}

/// A run's outcome for job `id` at run `attempt` (the fence), in `lane`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) id: i64,
    pub(crate) attempt: u32,
    pub(crate) lane: String,
    pub(crate) outcome: Outcome,
}

/// What a `take` asks for.
#[derive(Clone, Debug)]
pub(crate) struct Take {
    /// Outcomes to record first, in the same transaction.
    pub(crate) completions: Vec<Completion>,
    /// At most this many jobs (0: only record, maintain and report).
    pub(crate) max: usize,
    pub(crate) policy: Policy,
    /// The caller's time (ns since the epoch) instead of the database's.
    pub(crate) now: Option<i64>,
    /// Look without locks first, and take no lock when nothing is due (a wake-up that may be
    /// for nothing); a worker woken by its slot skips the look.
    pub(crate) look_first: bool,
    /// How far ahead of its slot (ns, >= 0) a paced run may be claimed: a lane's run is charged
    /// at `at = max(now, slot)` if `at <= now + ahead` (see [`charge_at`]); 0: only at `now`.
    pub(crate) ahead: i64,
}

/// When a claim reading `now` may charge a lane whose pace next allows a run at `allowed` (see
/// `LanePace::allowed_at`), claiming up to `ahead` ns early: `max(now, allowed)` if that is
/// within `now + ahead` (saturating), else `None`.
///
/// Why this never admits more than the quota: a lane's charge times are GCRA arrivals, each
/// conforming at its own time (`at >= allowed` by construction), and they are non-decreasing, so
/// at most `burst + w/T` of them fall in any window of length `w`, as for any GCRA. Non-decreasing:
/// a lane's claims are serialised by its lock and each reads the clock after taking it, so the
/// readings `now_i` are non-decreasing (a forward clock); if `at_{i-1}` was `now_{i-1}`, then
/// `at_i >= now_i >= at_{i-1}`; if it was the pace's `allowed_{i-1}` (the binding bucket full),
/// that bucket's next allowed time is `at_{i-1} + T`, so `at_i >= at_{i-1} + T`. A clock that
/// goes back only makes a run conform later. A worker that stalls holding a run claimed ahead
/// wastes that slot (under-use), never over-uses the lane. Checked against a plain model in
/// `pace/tests.rs` (`charges_ahead_conform`).
pub(crate) fn charge_at(now: i64, allowed: i64, ahead: i64) -> Option<i64> {
    let at = now.max(allowed);
    (at <= now.saturating_add(ahead.max(0))).then_some(at)
}

/// What a `take` did.
#[derive(Clone, Debug, Default)]
pub(crate) struct Taken {
    pub(crate) jobs: Vec<Job>,
    /// Completions (job id, attempt) whose lease was lost (their outcome was not recorded).
    pub(crate) lost: Vec<(i64, u32)>,
    /// Completions not recorded because another transaction holds their lane (PostgreSQL: a
    /// claim never waits for a lane); to be given again to a later `take`.
    pub(crate) deferred: Vec<Completion>,
    /// The database's time of the transaction.
    pub(crate) now: i64,
    /// The clock reading the taken jobs were charged against (read after their lanes were
    /// locked: on PostgreSQL later than `now`), and a local instant by which the database had
    /// read it (the moment its reply came back, or SQLite's own reading); `None` when no lane
    /// was served. A time `d` after that reading is at most `d` after the instant: a run charged
    /// at `at` started at `instant + (at - reading)` is never early, and late only by the
    /// reply's way back.
    pub(crate) claim_clock: Option<(i64, std::time::Instant)>,
    /// The earliest time (database clock) something may become takeable: a lane's next slot, a
    /// scheduled job's time, a lease's end. `None`: nothing is waiting or running.
    pub(crate) wake: Option<i64>,
    /// Jobs waiting or running in the whole database after the transaction.
    pub(crate) remaining: i64,
    /// Leases that had run out and were taken back, and jobs that died of it.
    pub(crate) expired: u64,
    pub(crate) expired_dead: u64,
    /// Failed runs that went dead.
    pub(crate) died: u64,
    /// Jobs added by schedules' ticks.
    pub(crate) ticked: u64,
    /// Adaptive lanes whose rate this transaction moved, with their first quota's new rate a
    /// second (for the `leakgate_jobs_lane_rate_per_second` gauge).
    pub(crate) rates: Vec<(String, f64)>,
}

/// The parsed rules of a database, cached by the version stored beside them.
#[derive(Debug, Default)]
pub(crate) struct RulesCache {
    inner: Mutex<(i64, Arc<LaneRules>)>,
}

impl RulesCache {
    /// The rules for `version`, parsing `text` (asked for only when the version changed).
    pub(crate) fn get(
        &self,
        version: i64,
        text: impl FnOnce() -> Result<String, Error>,
    ) -> Result<Arc<LaneRules>, Error> {
        let mut cached = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if cached.0 != version {
            let rules =
                if version == 0 { LaneRules::new() } else { LaneRules::from_toml(&text()?)? };
            *cached = (version, Arc::new(rules));
        }
        Ok(cached.1.clone())
    }

    /// The version cached.
    pub(crate) fn version(&self) -> i64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0
    }
}

/// A database: SQLite or PostgreSQL.
#[derive(Debug)]
pub(crate) enum Store {
    Sqlite(sqlite::Sqlite),
    Postgres(Box<postgres::Postgres>),
}

impl Store {
    /// Opens (and creates or migrates) the database named by `db`: a `postgres://` or
    /// `postgresql://` URL, or a file path for SQLite.
    /// PostgreSQL sessions get timeouts derived from `lease` (see [`postgres::Timeouts`]).
    pub(crate) async fn open(
        db: &str,
        connections: usize,
        lease: Duration,
    ) -> Result<Store, Error> {
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            let timeouts = postgres::Timeouts::for_lease(lease);
            Ok(Store::Postgres(Box::new(
                postgres::Postgres::open(db, connections, timeouts).await?,
            )))
        } else {
            let path = db.to_string();
            let store = tokio::task::spawn_blocking(move || sqlite::Sqlite::open(&path))
                .await
                .map_err(|e| Error::Database(format!("the SQLite thread failed: {e}")))??;
            Ok(Store::Sqlite(store))
        }
    }

    pub(crate) async fn add(
        &self,
        jobs: Vec<NewJob>,
        now: Option<i64>,
    ) -> Result<Vec<Added>, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, r| sqlite::ops::add(c, &jobs, now, r)).await,
            Store::Postgres(p) => p.add(jobs, now).await,
        }
    }

    pub(crate) async fn take(&self, take: Take) -> Result<Taken, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, r| sqlite::take::take(c, &take, r)).await,
            Store::Postgres(p) => p.take(take).await,
        }
    }

    pub(crate) async fn renew(
        &self,
        leases: Vec<(i64, u32)>,
        lease: Duration,
        now: Option<i64>,
    ) -> Result<Vec<(i64, u32)>, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::ops::renew(c, &leases, lease, now)).await,
            Store::Postgres(p) => p.renew(leases, lease, now).await,
        }
    }

    pub(crate) async fn set_rules(&self, text: String) -> Result<i64, Error> {
        let rules = LaneRules::from_toml(&text)?;
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::ops::set_rules(c, &text, &rules)).await,
            Store::Postgres(p) => p.set_rules(text, rules).await,
        }
    }

    pub(crate) async fn rules(&self) -> Result<Arc<LaneRules>, Error> {
        match self {
            Store::Sqlite(s) => s.run(sqlite::ops::rules).await,
            Store::Postgres(p) => p.rules().await,
        }
    }

    pub(crate) async fn status(&self, now: Option<i64>) -> Result<Vec<LaneStatus>, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::report::status(c, now)).await,
            Store::Postgres(p) => p.status(now).await,
        }
    }

    /// The stored pace buckets of `lanes` (what `status` shows of adaptive lanes).
    pub(crate) async fn pace_rows(
        &self,
        lanes: Vec<String>,
    ) -> Result<HashMap<String, Vec<StoredBucket>>, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::ops::pace_rows(c, &lanes)).await,
            Store::Postgres(p) => p.pace_rows(lanes).await,
        }
    }

    pub(crate) async fn dead(
        &self,
        lane: Option<String>,
        limit: i64,
    ) -> Result<Vec<DeadJob>, Error> {
        match self {
            Store::Sqlite(s) => {
                s.run(move |c, _| sqlite::report::dead(c, lane.as_deref(), limit)).await
            }
            Store::Postgres(p) => p.dead(lane, limit).await,
        }
    }

    pub(crate) async fn runs(&self, lane: String) -> Result<Vec<Run>, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::report::runs(c, &lane)).await,
            Store::Postgres(p) => p.runs(lane).await,
        }
    }

    pub(crate) async fn recent_runs(&self, lane: String, limit: i64) -> Result<Vec<Run>, Error> {
        match self {
            Store::Sqlite(s) => {
                s.run(move |c, _| sqlite::report::recent_runs(c, &lane, limit)).await
            }
            Store::Postgres(p) => p.recent_runs(lane, limit).await,
        }
    }

    pub(crate) async fn requeue(&self, which: Requeue, now: Option<i64>) -> Result<u64, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::ops::requeue(c, &which, now)).await,
            Store::Postgres(p) => p.requeue(which, now).await,
        }
    }

    pub(crate) async fn purge(&self, older_than: Duration, now: Option<i64>) -> Result<u64, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::ops::purge(c, older_than, now)).await,
            Store::Postgres(p) => p.purge(older_than, now).await,
        }
    }

    pub(crate) async fn cancel(&self, ids: Vec<i64>, now: Option<i64>) -> Result<u64, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::control::cancel(c, &ids, now)).await,
            Store::Postgres(p) => p.cancel(ids, now).await,
        }
    }

    pub(crate) async fn pause(&self, lane: String, paused: bool) -> Result<(), Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::control::pause(c, &lane, paused)).await,
            Store::Postgres(p) => p.pause(lane, paused).await,
        }
    }

    pub(crate) async fn cancelled_among(&self, ids: Vec<i64>) -> Result<Vec<i64>, Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::control::cancelled_among(c, &ids)).await,
            Store::Postgres(p) => p.cancelled_among(ids).await,
        }
    }

    pub(crate) async fn set_schedule(&self, s: Schedule, now: Option<i64>) -> Result<(), Error> {
        s.check()?;
        match self {
            Store::Sqlite(st) => st.run(move |c, _| sqlite::schedules::set(c, &s, now)).await,
            Store::Postgres(p) => p.set_schedule(s, now).await,
        }
    }

    pub(crate) async fn schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        match self {
            Store::Sqlite(s) => s.run(|c, _| sqlite::schedules::list(c)).await,
            Store::Postgres(p) => p.schedules().await,
        }
    }

    pub(crate) async fn remove_schedule(&self, name: String) -> Result<(), Error> {
        match self {
            Store::Sqlite(s) => s.run(move |c, _| sqlite::schedules::remove(c, &name)).await,
            Store::Postgres(p) => p.remove_schedule(name).await,
        }
    }

    /// Waits until another connection changes the database or `timeout` passes, whichever is
    /// first. SQLite: polls `PRAGMA data_version` every [`sqlite::POLL`]; PostgreSQL: `LISTEN`.
    pub(crate) async fn changed(&self, timeout: Duration) {
        match self {
            Store::Sqlite(s) => s.changed(timeout).await,
            Store::Postgres(p) => p.changed(timeout).await,
        }
    }

    /// Which backend, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "SQLite",
            Store::Postgres(_) => "PostgreSQL",
        }
    }
}
