//! A lane's rows: its counters ([`bump`]) and its pace buckets ([`load_pace`], [`save_pace`],
//! [`push_back`] for a slow-down, [`recover`] for an adaptive lane's done job). The file's write
//! lock, held by the transaction, covers them.

use crate::error::Error;
use crate::pace::{LanePace, StoredBucket};
use crate::rules::LaneRules;
use rusqlite::{Connection, params};

/// Adds `deltas` to the counters of `lane` (column names are this crate's constants).
pub(super) fn bump(conn: &Connection, lane: &str, deltas: &[(&str, i64)]) -> Result<(), Error> {
    let sets: Vec<String> = deltas
        .iter()
        .enumerate()
        .map(|(i, (col, _))| format!("{col} = {col} + ?{}", i + 2))
        .collect();
    let sql = format!("UPDATE lanes SET {} WHERE lane = ?1", sets.join(", "));
    let mut stmt = conn.prepare_cached(&sql)?;
    stmt.raw_bind_parameter(1, lane)?;
    for (i, (_, delta)) in deltas.iter().enumerate() {
        stmt.raw_bind_parameter(i + 2, delta)?;
    }
    stmt.raw_execute()?;
    Ok(())
}

/// The stored buckets of `lane`, by index.
pub(super) fn load_pace(conn: &Connection, lane: &str) -> Result<Vec<StoredBucket>, Error> {
    let rows = conn
        .prepare_cached(
            "SELECT count, period_ns, burst, tat_ns, tat_frac, adapted, backoff_ns FROM pace \
             WHERE lane = ?1 ORDER BY idx",
        )?
        .query_map([lane], |r| {
            Ok(StoredBucket {
                count: r.get(0)?,
                period_ns: r.get(1)?,
                burst: r.get(2)?,
                tat_ns: r.get(3)?,
                tat_frac: r.get(4)?,
                adapted: r.get(5)?,
                backoff_ns: r.get(6)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Stores `lane`'s buckets, replacing what was there.
pub(super) fn save_pace(conn: &Connection, lane: &str, rows: &[StoredBucket]) -> Result<(), Error> {
    for (idx, b) in rows.iter().enumerate() {
        conn.prepare_cached(
            "INSERT OR REPLACE INTO pace VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            lane,
            idx as i64,
            b.count,
            b.period_ns,
            b.burst,
            b.tat_ns,
            b.tat_frac,
            b.adapted,
            b.backoff_ns
        ])?;
    }
    conn.prepare_cached("DELETE FROM pace WHERE lane = ?1 AND idx >= ?2")?
        .execute(params![lane, rows.len() as i64])?;
    Ok(())
}

/// A slow-down of `lane` at `now` until `until`: an adaptive lane backs off
/// ([`LanePace::back_off`]), and its buckets are pushed back so that it resumes at its steady
/// rate, without a burst ([`LanePace::push_back`]). An unpaced lane has none. Answers an
/// adaptive lane's rate a second.
pub(super) fn push_back(
    conn: &Connection,
    lane: &str,
    until: i64,
    rules: &LaneRules,
    now: i64,
) -> Result<Option<f64>, Error> {
    let (_, quotas) = rules.pace(lane);
    if quotas.is_empty() {
        return Ok(None);
    }
    let floor = rules.limits(lane).adaptive_floor;
    let mut pace = LanePace::load(quotas, floor, &load_pace(conn, lane)?, now);
    pace.back_off(now);
    pace.push_back(until);
    save_pace(conn, lane, &pace.stored())?;
    Ok(floor.and_then(|_| pace.per_second()))
}

/// A job of `lane` done at `now`: an adaptive lane running below its quota recovers a step
/// ([`LanePace::recover`]). Other lanes are not read. Answers its new rate a second, if moved.
pub(super) fn recover(
    conn: &Connection,
    lane: &str,
    rules: &LaneRules,
    now: i64,
) -> Result<Option<f64>, Error> {
    let (_, quotas) = rules.pace(lane);
    let floor = rules.limits(lane).adaptive_floor;
    if quotas.is_empty() || floor.is_none() {
        return Ok(None);
    }
    let mut pace = LanePace::load(quotas, floor, &load_pace(conn, lane)?, now);
    if !pace.recover(1, now) {
        return Ok(None);
    }
    save_pace(conn, lane, &pace.stored())?;
    Ok(pace.per_second())
}
