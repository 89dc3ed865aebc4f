//! Schedules on PostgreSQL: storing, listing and removing them, and adding the jobs of the ticks
//! due in the claim transaction ([`fire`]). A schedule due is locked without waiting (another
//! claim firing it is left to it), and so is its lane; the unique index on `(schedule, tick)`
//! keeps a tick to one job whatever runs it.

use super::{Postgres, now, retrying};
use crate::error::Error;
use crate::rules::LaneRules;
use crate::schedule::{Due, Every, Missed, Schedule, ScheduleInfo, Ticks};
use std::time::Duration;
use tokio_postgres::{GenericClient, Row};

/// The columns [`from_row`] reads, in its order.
const COLUMNS: &str = "name, lane, payload, cron, zone, interval_ns, missed, next_tick";

impl Postgres {
    /// Stores a schedule (see the SQLite store's `set`).
    pub(crate) async fn set_schedule(&self, s: Schedule, caller: Option<i64>) -> Result<(), Error> {
        let ticks = Ticks::of(&s.every)?;
        retrying!(self.try_set_schedule(&s, &ticks, caller).await)
    }

    async fn try_set_schedule(
        &self,
        s: &Schedule,
        ticks: &Ticks,
        caller: Option<i64>,
    ) -> Result<(), Error> {
        let guard = self.client().await?;
        let client = guard.as_ref().expect("connected");
        let now = now(client, caller).await?;
        let next = ticks
            .after(now)
            .ok_or_else(|| Error::BadSchedule(format!("{:?} never ticks after now", s.name)))?;
        let (cron, zone, interval) = s.every.columns();
        let missed = i64::from(s.missed == Missed::Once);
        client
            .execute(
                "INSERT INTO schedules VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (name) DO UPDATE \
                 SET lane = excluded.lane, payload = excluded.payload, cron = excluded.cron, zone = excluded.zone, \
                 interval_ns = excluded.interval_ns, missed = excluded.missed, next_tick = excluded.next_tick",
                &[&s.name, &s.lane, &s.payload, &cron, &zone, &interval, &missed, &next],
            )
            .await?;
        Ok(())
    }

    /// Every stored schedule, by name.
    pub(crate) async fn schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        let guard = self.client().await?;
        let sql = format!("SELECT {COLUMNS} FROM schedules ORDER BY name");
        let rows = guard.as_ref().expect("connected").query(&sql, &[]).await?;
        Ok(rows.iter().map(from_row).collect())
    }

    /// Removes a schedule; an unknown name refuses.
    pub(crate) async fn remove_schedule(&self, name: String) -> Result<(), Error> {
        let guard = self.client().await?;
        let client = guard.as_ref().expect("connected");
        let n = client.execute("DELETE FROM schedules WHERE name = $1", &[&name]).await?;
        if n == 0 {
            return Err(Error::UnknownSchedule(name));
        }
        Ok(())
    }
}

/// A stored schedule from its row.
fn from_row(r: &Row) -> ScheduleInfo {
    let cron: Option<String> = r.get(3);
    let interval: Option<i64> = r.get(5);
    let every = match cron {
        Some(expr) => Every::Cron { expr, zone: r.get(4) },
        None => Every::Interval(Duration::from_nanos(interval.unwrap_or(0).max(0) as u64)),
    };
    let missed = if r.get::<_, i64>(6) != 0 { Missed::Once } else { Missed::Skip };
    ScheduleInfo {
        schedule: Schedule { name: r.get(0), lane: r.get(1), payload: r.get(2), every, missed },
        next_tick_ns: r.get(7),
    }
}

/// Adds the jobs of the schedules due at `now` that no other session holds (nor their lanes),
/// and moves each to its next tick; answers how many jobs were added.
pub(super) async fn fire(
    tx: &impl GenericClient,
    now: i64,
    rules: &LaneRules,
) -> Result<u64, Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM schedules WHERE next_tick <= $1 ORDER BY name FOR UPDATE SKIP LOCKED"
    );
    let due: Vec<ScheduleInfo> = tx.query(&sql, &[&now]).await?.iter().map(from_row).collect();
    let mut added = 0;
    for info in due {
        let s = &info.schedule;
        let limit = rules.limits(&s.lane).max_in_flight.map(|m| m.min(i64::MAX as u64) as i64);
        tx.execute(
            "INSERT INTO lanes (lane, max_in_flight) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&s.lane, &limit],
        )
        .await?;
        let locked = tx
            .query("SELECT lane FROM lanes WHERE lane = $1 FOR UPDATE SKIP LOCKED", &[&s.lane])
            .await?;
        if locked.is_empty() {
            continue; // its lane is busy: a later claim fires it
        }
        // See the SQLite store: one that no longer parses ticks no more.
        let due = match Ticks::of(&s.every) {
            Ok(ticks) => ticks.due(info.next_tick_ns, now, s.missed),
            Err(_) => Due { ticks: vec![], next: i64::MAX },
        };
        let n = tx
            .execute(
                "INSERT INTO jobs (lane, payload, state, run_at, added_at, schedule, tick) \
                 SELECT $1, $2, 0, $3, $3, $4, t FROM unnest($5::bigint[]) AS t ON CONFLICT DO NOTHING",
                &[&s.lane, &s.payload, &now, &s.name, &due.ticks],
            )
            .await? as i64;
        if n > 0 {
            tx.execute("UPDATE lanes SET ready = ready + $2 WHERE lane = $1", &[&s.lane, &n])
                .await?;
            added += n as u64;
        }
        tx.execute("UPDATE schedules SET next_tick = $2 WHERE name = $1", &[&s.name, &due.next])
            .await?;
    }
    Ok(added)
}
