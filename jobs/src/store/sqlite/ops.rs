//! Adding jobs, renewing leases, rules, requeue and purge on SQLite.

use super::lanes::bump;
use super::now;
use crate::error::Error;
use crate::job::{Added, NewJob, ns};
use crate::pace::StoredBucket;
use crate::rules::LaneRules;
use crate::status::Requeue;
use crate::store::RulesCache;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Adds `jobs` in one transaction: all of them, or none (a full lane, a bad job).
pub(crate) fn add(
    conn: &mut Connection,
    jobs: &[NewJob],
    caller: Option<i64>,
    cache: &RulesCache,
) -> Result<Vec<Added>, Error> {
    for job in jobs {
        job.check()?;
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now(caller);
    let rules = current_rules(&tx, cache)?;
    let mut added = Vec::with_capacity(jobs.len());
    // Per lane: (ready, scheduled) added.
    let mut lanes: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for job in jobs {
        if let Some(key) = &job.key {
            let id: Option<i64> = tx
                .prepare_cached("SELECT id FROM jobs WHERE key = ?1")?
                .query_row([key], |r| r.get(0))
                .optional()?;
            if let Some(id) = id {
                added.push(Added { id, new: false });
                continue;
            }
        }
        let scheduled = !job.after.is_zero();
        let run_at = now.saturating_add(ns(job.after));
        let id: i64 = tx
            .prepare_cached(
                "INSERT INTO jobs (lane, payload, key, state, run_at, added_at, priority) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
            )?
            .query_row(
                params![
                    job.lane,
                    job.payload,
                    job.key,
                    i64::from(scheduled),
                    run_at,
                    now,
                    job.priority
                ],
                |r| r.get(0),
            )?;
        added.push(Added { id, new: true });
        let counts = lanes.entry(&job.lane).or_default();
        if scheduled {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }
    for (lane, (ready, scheduled)) in lanes {
        let limits = rules.limits(lane);
        let max_in_flight = limits.max_in_flight.map(|n| n.min(i64::MAX as u64) as i64);
        tx.prepare_cached(
            "INSERT INTO lanes (lane, max_in_flight) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        )?
        .execute(params![lane, max_in_flight])?;
        let waiting: i64 = tx
            .prepare_cached(
                "UPDATE lanes SET ready = ready + ?2, scheduled = scheduled + ?3 WHERE lane = ?1 \
                 RETURNING ready + scheduled",
            )?
            .query_row(params![lane, ready, scheduled], |r| r.get(0))?;
        if let Some(max_waiting) = limits.max_waiting
            && waiting as u64 > max_waiting
        {
            let adding = (ready + scheduled) as u64;
            let lane = lane.to_string();
            return Err(Error::LaneFull {
                lane,
                max_waiting,
                waiting: waiting as u64 - adding,
                adding,
            });
        }
    }
    tx.commit()?;
    Ok(added)
}

/// The rules stored in the database (cached by version).
pub(super) fn current_rules(
    conn: &Connection,
    cache: &RulesCache,
) -> Result<Arc<LaneRules>, Error> {
    cache.get(version(conn)?, || {
        Ok(conn.query_row("SELECT text FROM rules WHERE id = 1", [], |r| r.get(0))?)
    })
}

/// The version of the rules stored in the database (0: none ever stored).
pub(super) fn version(conn: &Connection) -> Result<i64, Error> {
    let v =
        conn.prepare_cached("SELECT version FROM rules WHERE id = 1")?.query_row([], |r| r.get(0));
    Ok(v.optional()?.unwrap_or(0))
}

/// [`current_rules`] for a caller with only the connection.
pub(crate) fn rules(conn: &mut Connection, cache: &RulesCache) -> Result<Arc<LaneRules>, Error> {
    current_rules(conn, cache)
}

/// Stores new rules: every worker picks them up at its next claim. Cached slots are cleared
/// (the new rules may let lanes go sooner) and each lane's `max_in_flight` is set anew.
pub(crate) fn set_rules(
    conn: &mut Connection,
    text: &str,
    rules: &LaneRules,
) -> Result<i64, Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 =
        tx.query_row("SELECT COALESCE(MAX(version), 0) + 1 FROM rules", [], |r| r.get(0))?;
    tx.execute(
        "INSERT OR REPLACE INTO rules (id, version, text) VALUES (1, ?1, ?2)",
        params![version, text],
    )?;
    tx.execute("UPDATE lanes SET next_slot = 0", [])?;
    let lanes: Vec<String> = tx
        .prepare("SELECT lane FROM lanes")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for lane in lanes {
        let limit = rules.limits(&lane).max_in_flight.map(|n| n.min(i64::MAX as u64) as i64);
        tx.prepare_cached("UPDATE lanes SET max_in_flight = ?2 WHERE lane = ?1")?
            .execute(params![lane, limit])?;
    }
    tx.commit()?;
    Ok(version)
}

/// Extends the leases of running jobs `(id, attempt)`; answers those no longer held.
pub(crate) fn renew(
    conn: &mut Connection,
    leases: &[(i64, u32)],
    lease: Duration,
    caller: Option<i64>,
) -> Result<Vec<(i64, u32)>, Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let until = now(caller).saturating_add(ns(lease));
    let mut lost = Vec::new();
    for &(id, attempt) in leases {
        let n = tx
            .prepare_cached(
                "UPDATE jobs SET lease_until = ?3 WHERE id = ?1 AND attempt = ?2 AND state = 2",
            )?
            .execute(params![id, attempt, until])?;
        if n == 0 {
            lost.push((id, attempt));
        }
    }
    tx.commit()?;
    Ok(lost)
}

/// Dead jobs back to ready, their failures forgotten.
pub(crate) fn requeue(
    conn: &mut Connection,
    which: &Requeue,
    caller: Option<i64>,
) -> Result<u64, Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now(caller);
    let ids: Vec<(i64, String)> = match which {
        Requeue::All => tx
            .prepare("SELECT id, lane FROM jobs WHERE state = 4")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?,
        Requeue::Lane(lane) => tx
            .prepare("SELECT id, lane FROM jobs WHERE state = 4 AND lane = ?1")?
            .query_map([lane], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?,
        Requeue::Ids(ids) => {
            let mut found = Vec::new();
            for id in ids {
                let row: Option<(i64, String)> = tx
                    .prepare_cached("SELECT id, lane FROM jobs WHERE state = 4 AND id = ?1")?
                    .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                found.extend(row);
            }
            found
        }
    };
    for (id, lane) in &ids {
        tx.prepare_cached(
            "UPDATE jobs SET state = 0, failures = 0, finished_at = NULL, run_at = ?2 WHERE id = ?1",
        )?
        .execute(params![id, now])?;
        bump(&tx, lane, &[("dead", -1), ("ready", 1)])?;
    }
    tx.commit()?;
    Ok(ids.len() as u64)
}

/// Removes done and cancelled jobs finished more than `older_than` ago, and runs started
/// before that.
pub(crate) fn purge(
    conn: &mut Connection,
    older_than: Duration,
    caller: Option<i64>,
) -> Result<u64, Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let cutoff = now(caller).saturating_sub(ns(older_than));
    let gone: Vec<(String, i64, i64)> = tx
        .prepare(
            "SELECT lane, state, COUNT(*) FROM jobs WHERE state IN (3, 5) AND finished_at < ?1 \
             GROUP BY lane, state",
        )?
        .query_map([cutoff], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let n = tx.execute("DELETE FROM jobs WHERE state IN (3, 5) AND finished_at < ?1", [cutoff])?;
    for (lane, state, count) in gone {
        bump(&tx, &lane, &[(if state == 3 { "done" } else { "cancelled" }, -count)])?;
    }
    tx.execute("DELETE FROM runs WHERE started_at < ?1", [cutoff])?;
    tx.commit()?;
    Ok(n as u64)
}

/// The stored pace buckets of `lanes`.
pub(crate) fn pace_rows(
    conn: &mut Connection,
    lanes: &[String],
) -> Result<HashMap<String, Vec<StoredBucket>>, Error> {
    let tx = conn.transaction()?; // one snapshot
    let mut out = HashMap::new();
    for lane in lanes {
        out.insert(lane.clone(), super::lanes::load_pace(&tx, lane)?);
    }
    Ok(out)
}
