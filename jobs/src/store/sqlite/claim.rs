//! The claim: in one `BEGIN IMMEDIATE` transaction, record finished runs, take back expired
//! leases, make due jobs ready, then take jobs lane by lane in round-robin order, charging each
//! run to its lane's buckets.

use super::ops::{bump_lane, current_rules};
use crate::error::Error;
use crate::job::{Job, Outcome, ns, system_now};
use crate::pace::{LanePace, StoredBucket};
use crate::rules::LaneRules;
use crate::store::state::{DEAD, DONE, READY, RUNNING, SCHEDULED};
use crate::store::{Completion, Policy, RulesCache, Take, Taken};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// The next lane to serve: ready jobs, its slot come, not paused, room under `max_in_flight`;
/// the one served longest ago first.
const CANDIDATE: &str = "SELECT lane, running, max_in_flight FROM lanes \
    WHERE ready > 0 AND next_slot <= ?1 AND paused_until <= ?1 \
    AND (max_in_flight IS NULL OR running < max_in_flight) ORDER BY served, lane LIMIT 1";

/// Whether anything could be taken or needs maintenance at `?1`.
const ANYTHING_DUE: &str = "SELECT EXISTS (SELECT 1 FROM lanes WHERE ready > 0 AND next_slot <= ?1 \
    AND paused_until <= ?1 AND (max_in_flight IS NULL OR running < max_in_flight)) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 1 AND run_at <= ?1) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 2 AND lease_until <= ?1)";

/// Records `take.completions`, maintains, and takes up to `take.max` jobs.
pub(crate) fn take(conn: &mut Connection, take: &Take, cache: &RulesCache) -> Result<Taken, Error> {
    if take.completions.is_empty() && take.look_first {
        // A look before taking the write lock: with nothing to record and nothing due, other
        // processes are not held up by a write transaction that would do nothing.
        let now = take.now.unwrap_or_else(system_now);
        let due: bool = conn.prepare_cached(ANYTHING_DUE)?.query_row([now], |r| r.get(0))?;
        let rules_moved = current_version(conn)? != cache.version();
        if !due && !rules_moved {
            let (wake, remaining) = outlook(conn, now)?;
            return Ok(Taken { now, wake, remaining, ..Taken::default() });
        }
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Read after the write lock is held: transactions are ordered as their times.
    let now = take.now.unwrap_or_else(system_now);
    let rules = current_rules(&tx, cache)?;
    let mut taken = Taken { now, ..Taken::default() };
    for completion in &take.completions {
        if !complete(&tx, completion, now, &take.policy, &rules, &mut taken)? {
            taken.lost.push((completion.id, completion.attempt));
        }
    }
    expire(&tx, now, &take.policy, &mut taken)?;
    promote(&tx, now)?;
    claim(&tx, now, take.max, &take.policy, &rules, &mut taken.jobs)?;
    (taken.wake, taken.remaining) = outlook(&tx, now)?;
    tx.commit()?;
    Ok(taken)
}

fn current_version(conn: &Connection) -> Result<i64, Error> {
    let v =
        conn.prepare_cached("SELECT version FROM rules WHERE id = 1")?.query_row([], |r| r.get(0));
    Ok(v.optional()?.unwrap_or(0))
}

/// Records one outcome; `false` when the run no longer holds its job (lease lost).
fn complete(
    conn: &Connection,
    c: &Completion,
    now: i64,
    policy: &Policy,
    rules: &LaneRules,
    taken: &mut Taken,
) -> Result<bool, Error> {
    let held: Option<(String, i64)> = conn
        .prepare_cached(
            "SELECT lane, failures FROM jobs WHERE id = ?1 AND attempt = ?2 AND state = 2",
        )?
        .query_row(params![c.id, c.attempt], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((lane, failures)) = held else { return Ok(false) };
    match &c.outcome {
        Outcome::Done => {
            conn.prepare_cached(
                "UPDATE jobs SET state = 3, finished_at = ?2, lease_until = NULL, last_error = NULL \
                 WHERE id = ?1",
            )?
            .execute(params![c.id, now])?;
            bump_lane(conn, &lane, &[("running", -1), ("done", 1)])?;
        }
        Outcome::Failed(error) => {
            let failures = failures + 1;
            if policy.is_dead(failures) {
                conn.prepare_cached(
                    "UPDATE jobs SET state = 4, failures = ?2, finished_at = ?3, lease_until = NULL, \
                     last_error = ?4 WHERE id = ?1",
                )?
                .execute(params![c.id, failures, now, error])?;
                bump_lane(conn, &lane, &[("running", -1), ("dead", 1)])?;
                taken.died += 1;
            } else {
                let seed = (c.id as u64) ^ ((now as u64) << 1) ^ u64::from(c.attempt);
                let run_at = now.saturating_add(policy.retry_delay_ns(failures as u32, seed));
                conn.prepare_cached(
                    "UPDATE jobs SET state = 1, failures = ?2, run_at = ?3, lease_until = NULL, \
                     last_error = ?4 WHERE id = ?1",
                )?
                .execute(params![c.id, failures, run_at, error])?;
                bump_lane(conn, &lane, &[("running", -1), ("scheduled", 1)])?;
            }
        }
        Outcome::SlowDown(pause) => {
            let until = now.saturating_add(ns(*pause));
            conn.prepare_cached("UPDATE jobs SET state = 0, lease_until = NULL WHERE id = ?1")?
                .execute([c.id])?;
            bump_lane(conn, &lane, &[("running", -1), ("ready", 1)])?;
            conn.prepare_cached(
                "UPDATE lanes SET paused_until = MAX(paused_until, ?2), next_slot = MAX(next_slot, ?2) \
                 WHERE lane = ?1",
            )?
            .execute(params![lane, until])?;
            let (_, quotas) = rules.pace(&lane);
            if !quotas.is_empty() {
                let mut pace = LanePace::load(quotas, &load_pace(conn, &lane)?, now);
                pace.push_back(until);
                save_pace(conn, &lane, &pace.stored())?;
            }
        }
    }
    Ok(true)
}

/// Jobs whose lease ran out go back to their lane (or die, past `max_attempts`).
fn expire(conn: &Connection, now: i64, policy: &Policy, taken: &mut Taken) -> Result<(), Error> {
    let expired: Vec<(i64, String, i64)> = conn
        .prepare_cached(
            "SELECT id, lane, failures FROM jobs WHERE state = 2 AND lease_until <= ?1",
        )?
        .query_map([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    for (id, lane, failures) in expired {
        let failures = failures + 1;
        taken.expired += 1;
        let error = "its lease ran out: the worker died or stopped renewing it";
        if policy.is_dead(failures) {
            conn.prepare_cached(
                "UPDATE jobs SET state = 4, failures = ?2, finished_at = ?3, lease_until = NULL, \
                 last_error = ?4 WHERE id = ?1",
            )?
            .execute(params![id, failures, now, error])?;
            bump_lane(conn, &lane, &[("running", -1), ("dead", 1)])?;
            taken.expired_dead += 1;
        } else {
            conn.prepare_cached(
                "UPDATE jobs SET state = 0, failures = ?2, lease_until = NULL, last_error = ?3 \
                 WHERE id = ?1",
            )?
            .execute(params![id, failures, error])?;
            bump_lane(conn, &lane, &[("running", -1), ("ready", 1)])?;
        }
    }
    Ok(())
}

/// Scheduled jobs whose time has come become ready.
fn promote(conn: &Connection, now: i64) -> Result<(), Error> {
    let due: Vec<(String, i64)> = conn
        .prepare_cached(
            "SELECT lane, COUNT(*) FROM jobs WHERE state = 1 AND run_at <= ?1 GROUP BY lane",
        )?
        .query_map([now], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    if due.is_empty() {
        return Ok(());
    }
    conn.prepare_cached("UPDATE jobs SET state = 0 WHERE state = 1 AND run_at <= ?1")?
        .execute([now])?;
    for (lane, n) in due {
        bump_lane(conn, &lane, &[("ready", n), ("scheduled", -n)])?;
    }
    Ok(())
}

/// A lane's first ready job: id, payload, attempt, key, due time.
type Head = (i64, Vec<u8>, i64, Option<String>, i64);

/// Takes up to `max` jobs, one per turn of the round robin.
fn claim(
    conn: &Connection,
    now: i64,
    max: usize,
    policy: &Policy,
    rules: &LaneRules,
    out: &mut Vec<Job>,
) -> Result<(), Error> {
    let lease_until = now.saturating_add(ns(policy.lease));
    while out.len() < max {
        let candidate: Option<(String, i64, Option<i64>)> = conn
            .prepare_cached(CANDIDATE)?
            .query_row([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some((lane, running, max_in_flight)) = candidate else { break };
        // The lane's limit as the rules now say (another process may have published new ones).
        let limit = rules.limits(&lane).max_in_flight.map(|n| n.min(i64::MAX as u64) as i64);
        if limit != max_in_flight {
            conn.prepare_cached("UPDATE lanes SET max_in_flight = ?2 WHERE lane = ?1")?
                .execute(params![lane, limit])?;
            if limit.is_some_and(|m| running >= m) {
                continue;
            }
        }
        let (_, quotas) = rules.pace(&lane);
        let stored = load_pace(conn, &lane)?;
        let mut pace = LanePace::load(quotas, &stored, now);
        let pace_slot = pace.allowed_at();
        if let Err(at) = pace.admit(now) {
            // Not yet (the cached slot was stale): remember when, and serve another lane. Levels
            // carried over from other rules are stored now, so they are carried once.
            if pace.stored() != stored {
                save_pace(conn, &lane, &pace.stored())?;
            }
            conn.prepare_cached("UPDATE lanes SET next_slot = ?2 WHERE lane = ?1")?
                .execute(params![lane, at])?;
            continue;
        }
        let head: Option<Head> = conn
            .prepare_cached(
                "SELECT id, payload, attempt, key, run_at FROM jobs WHERE lane = ?1 AND state = 0 \
                 ORDER BY id LIMIT 1",
            )?
            .query_row([&lane], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .optional()?;
        let Some((id, payload, attempt, key, run_at)) = head else {
            // The counter was off (it never should be): put it right and go on.
            conn.prepare_cached("UPDATE lanes SET ready = 0 WHERE lane = ?1")?.execute([&lane])?;
            continue;
        };
        if pace.is_paced() {
            save_pace(conn, &lane, &pace.stored())?;
        }
        let attempt = attempt + 1;
        conn.prepare_cached(
            "UPDATE jobs SET state = 2, attempt = ?2, lease_until = ?3, started_at = ?4 WHERE id = ?1",
        )?
        .execute(params![id, attempt, lease_until, now])?;
        let slot = pace_slot.max(run_at);
        conn.prepare_cached("INSERT OR REPLACE INTO runs VALUES (?1, ?2, ?3, ?4, ?5)")?
            .execute(params![id, attempt, lane, slot, now])?;
        let served: i64 = conn
            .prepare_cached(
                "UPDATE counters SET value = value + 1 WHERE name = 'served' RETURNING value",
            )?
            .query_row([], |r| r.get(0))?;
        conn.prepare_cached(
            "UPDATE lanes SET ready = ready - 1, running = running + 1, served = ?2, next_slot = ?3 \
             WHERE lane = ?1",
        )?
        .execute(params![lane, served, pace.allowed_at()])?;
        out.push(Job {
            id,
            lane,
            payload,
            attempt: attempt as u32,
            key,
            started_ns: now,
            slot_ns: slot,
            deadline: None,
        });
    }
    Ok(())
}

/// When something may next become takeable, and how many jobs are waiting or running.
fn outlook(conn: &Connection, now: i64) -> Result<(Option<i64>, i64), Error> {
    let (slot, due, lease, remaining): (Option<i64>, Option<i64>, Option<i64>, i64) = conn
        .prepare_cached(
            "SELECT (SELECT MIN(MAX(next_slot, paused_until)) FROM lanes WHERE ready > 0 \
                     AND (max_in_flight IS NULL OR running < max_in_flight)), \
                    (SELECT MIN(run_at) FROM jobs WHERE state = 1), \
                    (SELECT MIN(lease_until) FROM jobs WHERE state = 2), \
                    (SELECT COALESCE(SUM(ready + scheduled + running), 0) FROM lanes)",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    let wake = [slot, due, lease].into_iter().flatten().min().map(|t| t.max(now));
    Ok((wake, remaining))
}

/// The stored buckets of `lane`, by index.
pub(crate) fn load_pace(conn: &Connection, lane: &str) -> Result<Vec<StoredBucket>, Error> {
    let rows = conn
        .prepare_cached(
            "SELECT count, period_ns, burst, tat_ns, tat_frac FROM pace WHERE lane = ?1 ORDER BY idx",
        )?
        .query_map([lane], |r| {
            Ok(StoredBucket {
                count: r.get(0)?,
                period_ns: r.get(1)?,
                burst: r.get(2)?,
                tat_ns: r.get(3)?,
                tat_frac: r.get(4)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Stores `lane`'s buckets, replacing what was there.
pub(crate) fn save_pace(conn: &Connection, lane: &str, rows: &[StoredBucket]) -> Result<(), Error> {
    for (idx, b) in rows.iter().enumerate() {
        conn.prepare_cached("INSERT OR REPLACE INTO pace VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?
            .execute(params![
                lane,
                idx as i64,
                b.count,
                b.period_ns,
                b.burst,
                b.tat_ns,
                b.tat_frac
            ])?;
    }
    conn.prepare_cached("DELETE FROM pace WHERE lane = ?1 AND idx >= ?2")?
        .execute(params![lane, rows.len() as i64])?;
    Ok(())
}

// The states, named in SQL above by number.
const _: () = assert!(READY == 0 && SCHEDULED == 1 && RUNNING == 2 && DONE == 3 && DEAD == 4);
