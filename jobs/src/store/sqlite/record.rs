//! Recording what happened, in the claim transaction: outcomes of runs ([`complete`]), and
//! leases run out and scheduled jobs come due ([`maintain`]), with the lane counters they change.

use super::lanes::{bump, push_back, recover};
use crate::error::Error;
use crate::job::{Outcome, ns};
use crate::retry::{Policy, failure};
use crate::rules::LaneRules;
use crate::store::{Completion, Taken};
use rusqlite::{Connection, OptionalExtension, params};

/// Records `completions`; a run that no longer holds its job is counted in `taken.lost`.
pub(super) fn complete(
    conn: &Connection,
    completions: &[Completion],
    now: i64,
    policy: &Policy,
    rules: &LaneRules,
    taken: &mut Taken,
) -> Result<(), Error> {
    for completion in completions {
        if !complete_one(conn, completion, now, policy, rules, taken)? {
            taken.lost.push((completion.id, completion.attempt));
        }
    }
    Ok(())
}

/// Records one outcome; `false` when the run no longer holds its job (lease lost).
fn complete_one(
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
            bump(conn, &lane, &[("running", -1), ("done", 1)])?;
            if let Some(rate) = recover(conn, &lane, rules, now)? {
                taken.rates.push((lane, rate));
            }
        }
        Outcome::Failed(_) | Outcome::RetryAfter(_) => {
            let (error, asked) = failure(&c.outcome);
            let failures = failures + 1;
            if policy.is_dead(failures) {
                conn.prepare_cached(
                    "UPDATE jobs SET state = 4, failures = ?2, finished_at = ?3, lease_until = NULL, \
                     last_error = ?4 WHERE id = ?1",
                )?
                .execute(params![c.id, failures, now, error])?;
                bump(conn, &lane, &[("running", -1), ("dead", 1)])?;
                taken.died += 1;
            } else {
                let seed = (c.id as u64) ^ ((now as u64) << 1) ^ u64::from(c.attempt);
                let delay = asked.unwrap_or_else(|| policy.retry_delay_ns(failures as u32, seed));
                let run_at = now.saturating_add(delay);
                conn.prepare_cached(
                    "UPDATE jobs SET state = 1, failures = ?2, run_at = ?3, lease_until = NULL, \
                     last_error = ?4 WHERE id = ?1",
                )?
                .execute(params![c.id, failures, run_at, error])?;
                bump(conn, &lane, &[("running", -1), ("scheduled", 1)])?;
            }
        }
        Outcome::SlowDown(pause) => {
            let until = now.saturating_add(ns(*pause));
            conn.prepare_cached("UPDATE jobs SET state = 0, lease_until = NULL WHERE id = ?1")?
                .execute([c.id])?;
            bump(conn, &lane, &[("running", -1), ("ready", 1)])?;
            conn.prepare_cached(
                "UPDATE lanes SET paused_until = MAX(paused_until, ?2), next_slot = MAX(next_slot, ?2) \
                 WHERE lane = ?1",
            )?
            .execute(params![lane, until])?;
            if let Some(rate) = push_back(conn, &lane, until, rules, now)? {
                taken.rates.push((lane, rate));
            }
        }
    }
    Ok(true)
}

/// Jobs whose lease ran out go back to their lane (or die, past `max_attempts`), and scheduled
/// jobs whose time has come become ready.
pub(super) fn maintain(
    conn: &Connection,
    now: i64,
    policy: &Policy,
    taken: &mut Taken,
) -> Result<(), Error> {
    expire(conn, now, policy, taken)?;
    promote(conn, now)
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
            bump(conn, &lane, &[("running", -1), ("dead", 1)])?;
            taken.expired_dead += 1;
        } else {
            conn.prepare_cached(
                "UPDATE jobs SET state = 0, failures = ?2, lease_until = NULL, last_error = ?3 \
                 WHERE id = ?1",
            )?
            .execute(params![id, failures, error])?;
            bump(conn, &lane, &[("running", -1), ("ready", 1)])?;
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
        bump(conn, &lane, &[("ready", n), ("scheduled", -n)])?;
    }
    Ok(())
}
