//! Schedules on SQLite: storing, listing and removing them, and adding the jobs of the ticks
//! due in the claim transaction ([`fire`]); the unique index on `(schedule, tick)` keeps a tick
//! to one job whatever runs it.

use super::lanes::bump;
use super::now;
use crate::error::Error;
use crate::rules::LaneRules;
use crate::schedule::{Every, Missed, Schedule, ScheduleInfo, Ticks};
use rusqlite::{Connection, Row, TransactionBehavior, params};
use std::time::Duration;

/// The columns [`from_row`] reads, in its order.
const COLUMNS: &str = "name, lane, payload, cron, zone, interval_ns, missed, next_tick";

/// Stores `schedule` (replacing one of the same name); its first tick is the first after now.
pub(crate) fn set(conn: &mut Connection, s: &Schedule, caller: Option<i64>) -> Result<(), Error> {
    let ticks = Ticks::of(&s.every)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now(caller);
    let next = ticks
        .after(now)
        .ok_or_else(|| Error::BadSchedule(format!("{:?} never ticks after now", s.name)))?;
    let (cron, zone, interval) = s.every.columns();
    tx.execute(
        "INSERT OR REPLACE INTO schedules VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![s.name, s.lane, s.payload, cron, zone, interval, s.missed == Missed::Once, next],
    )?;
    tx.commit()?;
    Ok(())
}

/// A stored schedule from its row.
fn from_row(r: &Row<'_>) -> rusqlite::Result<ScheduleInfo> {
    let cron: Option<String> = r.get(3)?;
    let interval: Option<i64> = r.get(5)?;
    let every = match cron {
        Some(expr) => Every::Cron { expr, zone: r.get(4)? },
        None => Every::Interval(Duration::from_nanos(interval.unwrap_or(0).max(0) as u64)),
    };
    let missed = if r.get::<_, i64>(6)? != 0 { Missed::Once } else { Missed::Skip };
    Ok(ScheduleInfo {
        schedule: Schedule { name: r.get(0)?, lane: r.get(1)?, payload: r.get(2)?, every, missed },
        next_tick_ns: r.get(7)?,
    })
}

/// Every stored schedule, by name.
pub(crate) fn list(conn: &mut Connection) -> Result<Vec<ScheduleInfo>, Error> {
    let sql = format!("SELECT {COLUMNS} FROM schedules ORDER BY name");
    let rows = conn.prepare(&sql)?.query_map([], from_row)?.collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Removes a schedule (its jobs already added stay); an unknown name refuses.
pub(crate) fn remove(conn: &mut Connection, name: &str) -> Result<(), Error> {
    let n = conn.execute("DELETE FROM schedules WHERE name = ?1", [name])?;
    if n == 0 {
        return Err(Error::UnknownSchedule(name.to_string()));
    }
    Ok(())
}

/// Adds the jobs of the schedules due at `now` (in the caller's write transaction) and moves
/// each to its next tick; answers how many jobs were added.
pub(super) fn fire(conn: &Connection, now: i64, rules: &LaneRules) -> Result<u64, Error> {
    let sql = format!("SELECT {COLUMNS} FROM schedules WHERE next_tick <= ?1");
    let due: Vec<ScheduleInfo> =
        conn.prepare_cached(&sql)?.query_map([now], from_row)?.collect::<Result<_, _>>()?;
    let mut added = 0;
    for info in due {
        let s = &info.schedule;
        // Stored schedules were checked; one that no longer parses (a zone gone from the
        // database of zones) ticks no more rather than holding up every claim.
        let due = match Ticks::of(&s.every) {
            Ok(ticks) => ticks.due(info.next_tick_ns, now, s.missed),
            Err(_) => crate::schedule::Due { ticks: vec![], next: i64::MAX },
        };
        let mut n = 0;
        for tick in &due.ticks {
            n += conn
                .prepare_cached(
                    "INSERT INTO jobs (lane, payload, state, run_at, added_at, schedule, tick) \
                     VALUES (?1, ?2, 0, ?3, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                )?
                .execute(params![s.lane, s.payload, now, s.name, tick])? as i64;
        }
        if n > 0 {
            let limit = rules.limits(&s.lane).max_in_flight.map(|m| m.min(i64::MAX as u64) as i64);
            conn.prepare_cached(
                "INSERT INTO lanes (lane, max_in_flight) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            )?
            .execute(params![s.lane, limit])?;
            bump(conn, &s.lane, &[("ready", n)])?;
            added += n as u64;
        }
        conn.prepare_cached("UPDATE schedules SET next_tick = ?2 WHERE name = ?1")?
            .execute(params![s.name, due.next])?;
    }
    Ok(added)
}
