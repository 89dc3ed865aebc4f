//! Reading the queue on SQLite: lane status, dead jobs, runs.

use super::now;
use crate::error::Error;
use crate::job::{since, to_time};
use crate::status::{DeadJob, LaneStatus, Run};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::BTreeMap;

/// Every lane's counts, oldest waiting job, next slot and runs in the last minute.
pub(crate) fn status(conn: &mut Connection, caller: Option<i64>) -> Result<Vec<LaneStatus>, Error> {
    let tx = conn.transaction()?; // one snapshot for every query
    let now = now(caller);
    let mut lanes: Vec<(LaneStatus, i64)> = tx
        .prepare(
            "SELECT lane, ready, scheduled, running, dead, done, MAX(next_slot, paused_until), \
             cancelled, paused FROM lanes ORDER BY lane",
        )?
        .query_map([], |r| {
            let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
            Ok((
                LaneStatus {
                    lane: r.get(0)?,
                    ready: n(1)?,
                    scheduled: n(2)?,
                    running: n(3)?,
                    dead: n(4)?,
                    done: n(5)?,
                    cancelled: n(7)?,
                    paused: r.get::<_, i64>(8)? != 0,
                    ..LaneStatus::default()
                },
                r.get(6)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let scheduled_oldest: BTreeMap<String, i64> = tx
        .prepare("SELECT lane, MIN(added_at) FROM jobs WHERE state = 1 GROUP BY lane")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let recent: BTreeMap<String, i64> = tx
        .prepare("SELECT lane, COUNT(*) FROM runs WHERE started_at > ?1 GROUP BY lane")?
        .query_map([now - 60_000_000_000], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (lane, slot) in &mut lanes {
        let ready_oldest: Option<i64> = if lane.ready > 0 {
            tx.prepare_cached("SELECT MIN(added_at) FROM jobs WHERE lane = ?1 AND state = 0")?
                .query_row([&lane.lane], |r| r.get(0))
                .optional()?
        } else {
            None
        };
        let oldest =
            ready_oldest.into_iter().chain(scheduled_oldest.get(&lane.lane).copied()).min();
        lane.oldest_waiting = oldest.map(|t| since(now, t));
        lane.next_slot_in = (*slot > now).then(|| since(*slot, now));
        lane.runs_last_minute = recent.get(&lane.lane).map_or(0, |&n| n as u64);
    }
    Ok(lanes.into_iter().map(|(lane, _)| lane).collect())
}

/// Dead jobs (of `lane`, or all), oldest first, at most `limit`.
pub(crate) fn dead(
    conn: &mut Connection,
    lane: Option<&str>,
    limit: i64,
) -> Result<Vec<DeadJob>, Error> {
    let mut stmt = conn.prepare(
        "SELECT id, lane, payload, key, attempt, COALESCE(last_error, ''), COALESCE(finished_at, 0) \
         FROM jobs WHERE state = 4 AND (?1 IS NULL OR lane = ?1) ORDER BY id LIMIT ?2",
    )?;
    let rows = stmt
        .query_map(params![lane, limit], |r| {
            Ok(DeadJob {
                id: r.get(0)?,
                lane: r.get(1)?,
                payload: r.get(2)?,
                key: r.get(3)?,
                attempts: r.get::<_, i64>(4)? as u32,
                error: r.get(5)?,
                died: to_time(r.get(6)?),
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Every recorded run of `lane`, by start.
pub(crate) fn runs(conn: &mut Connection, lane: &str) -> Result<Vec<Run>, Error> {
    let mut stmt = conn.prepare(
        "SELECT job, attempt, started_at, slot FROM runs WHERE lane = ?1 ORDER BY started_at, job, attempt",
    )?;
    let rows = stmt.query_map([lane], run)?.collect::<Result<_, _>>()?;
    Ok(rows)
}

/// The latest `limit` runs of `lane`, by start (the index on `(lane, started_at)` finds them).
pub(crate) fn recent_runs(
    conn: &mut Connection,
    lane: &str,
    limit: i64,
) -> Result<Vec<Run>, Error> {
    let mut stmt = conn.prepare(
        "SELECT job, attempt, started_at, slot FROM runs WHERE lane = ?1 \
         ORDER BY started_at DESC, job DESC, attempt DESC LIMIT ?2",
    )?;
    let mut rows = stmt.query_map(params![lane, limit], run)?.collect::<Result<Vec<_>, _>>()?;
    rows.reverse();
    Ok(rows)
}

/// A run from a row of `SELECT job, attempt, started_at, slot FROM runs`.
fn run(r: &rusqlite::Row<'_>) -> rusqlite::Result<Run> {
    Ok(Run {
        job: r.get(0)?,
        attempt: r.get::<_, i64>(1)? as u32,
        started_ns: r.get(2)?,
        slot_ns: r.get(3)?,
    })
}
