//! Recording what happened, in the claim transaction: outcomes of runs ([`complete`]), and
//! leases run out and scheduled jobs come due ([`maintain`]), gathered as changes to lane
//! counters ([`Delta`]) that [`super::lanes::apply`] writes, on lanes
//! [`super::lanes::lock_lanes`] locked (skipping those another session holds).

use super::lanes::Delta;
use crate::error::Error;
use crate::job::{Outcome, ns};
use crate::retry::Policy;
use crate::store::{Completion, Taken};
use std::collections::{BTreeMap, HashMap, HashSet};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

/// The jobs' rows that recording outcomes writes, one per recorded completion, as arrays.
#[derive(Debug, Default)]
pub(super) struct Outcomes {
    id: Vec<i64>,
    state: Vec<i16>,
    failures: Vec<i64>,
    run_at: Vec<Option<i64>>,
    finished: Vec<Option<i64>>,
    error: Vec<Option<String>>,
}

impl Outcomes {
    /// Writes the jobs' rows in one statement (none when there is nothing to write), so that
    /// the caller may send it in one round trip with the next (pipelined: PostgreSQL runs them
    /// in the order sent).
    pub(super) async fn write(&self, tx: &impl GenericClient) -> Result<(), Error> {
        if self.id.is_empty() {
            return Ok(());
        }
        tx.query_typed(
            "UPDATE jobs j SET state = d.state, failures = d.failures, run_at = COALESCE(d.run_at, j.run_at), \
             finished_at = d.finished, lease_until = NULL, last_error = COALESCE(d.error, j.last_error) \
             FROM unnest($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[]) \
             AS d(id, state, failures, run_at, finished, error) WHERE j.id = d.id",
            &[
                (&self.id, Type::INT8_ARRAY),
                (&self.state, Type::INT2_ARRAY),
                (&self.failures, Type::INT8_ARRAY),
                (&self.run_at, Type::INT8_ARRAY),
                (&self.finished, Type::INT8_ARRAY),
                (&self.error, Type::TEXT_ARRAY),
            ],
        )
        .await?;
        Ok(())
    }
}

/// Reads and locks the jobs of `completions` (their lanes locked by
/// [`super::lanes::lock_lanes`]) and works out their outcomes, which [`Outcomes::write`] then
/// stores; a run that no longer holds its job is counted in `taken.lost`.
pub(super) async fn complete(
    tx: &impl GenericClient,
    completions: &[Completion],
    now: i64,
    policy: &Policy,
    lanes: &mut BTreeMap<String, Delta>,
    taken: &mut Taken,
) -> Result<Outcomes, Error> {
    if completions.is_empty() {
        return Ok(Outcomes::default());
    }
    let ids: Vec<i64> = completions.iter().map(|c| c.id).collect();
    let attempts: Vec<i64> = completions.iter().map(|c| i64::from(c.attempt)).collect();
    let held: HashMap<i64, (String, i64)> = tx
        .query_typed(
            "SELECT j.id, j.lane, j.failures FROM jobs j \
             JOIN unnest($1::bigint[], $2::bigint[]) AS d(id, attempt) ON j.id = d.id AND j.attempt = d.attempt \
             WHERE j.state = 2 FOR UPDATE OF j",
            &[(&ids, Type::INT8_ARRAY), (&attempts, Type::INT8_ARRAY)],
        )
        .await?
        .into_iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let (mut id, mut state, mut failures, mut run_at, mut finished, mut error) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for c in completions {
        let Some((lane, f)) = held.get(&c.id) else {
            taken.lost.push((c.id, c.attempt));
            continue;
        };
        let delta = lanes.entry(lane.clone()).or_default();
        delta.running -= 1;
        id.push(c.id);
        match &c.outcome {
            Outcome::Done => {
                delta.done += 1;
                state.push(3i16);
                failures.push(*f);
                run_at.push(None);
                finished.push(Some(now));
                error.push(None);
            }
            Outcome::Failed(_) | Outcome::RetryAfter(_) => {
                let (message, asked) = crate::retry::failure(&c.outcome);
                let f = f + 1;
                failures.push(f);
                error.push(Some(message));
                if policy.is_dead(f) {
                    delta.dead += 1;
                    taken.died += 1;
                    state.push(4);
                    run_at.push(None);
                    finished.push(Some(now));
                } else {
                    delta.scheduled += 1;
                    let seed = (c.id as u64) ^ ((now as u64) << 1) ^ u64::from(c.attempt);
                    state.push(1);
                    let delay = asked.unwrap_or_else(|| policy.retry_delay_ns(f as u32, seed));
                    run_at.push(Some(now.saturating_add(delay)));
                    finished.push(None);
                }
            }
            Outcome::SlowDown(pause) => {
                delta.ready += 1;
                delta.pause = delta.pause.max(now.saturating_add(ns(*pause)));
                state.push(0);
                failures.push(*f);
                run_at.push(None);
                finished.push(None);
                error.push(None);
            }
        }
    }
    Ok(Outcomes { id, state, failures, run_at, finished, error })
}
/// In one statement, in the lanes `held`: jobs whose lease ran out go back to their lane (or
/// die, past `max_attempts`), and scheduled jobs whose time has come become ready.
pub(super) async fn maintain(
    tx: &impl GenericClient,
    now: i64,
    held: &HashSet<String>,
    policy: &Policy,
    lanes: &mut BTreeMap<String, Delta>,
    taken: &mut Taken,
) -> Result<(), Error> {
    if held.is_empty() {
        return Ok(());
    }
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    let max = i64::from(policy.max_attempts);
    let error = "its lease ran out: the worker died or stopped renewing it";
    let rows = tx
        .query_typed(
            "WITH exp AS (SELECT id FROM jobs WHERE state = 2 AND lease_until <= $1 AND lane = ANY($4) \
                 FOR UPDATE SKIP LOCKED), \
             expired AS (UPDATE jobs j SET failures = j.failures + 1, lease_until = NULL, last_error = $3, \
                 state = (CASE WHEN j.failures + 1 >= $2 THEN 4 ELSE 0 END)::smallint, \
                 finished_at = CASE WHEN j.failures + 1 >= $2 THEN $1 END \
                 FROM exp WHERE j.id = exp.id RETURNING j.lane, j.state), \
             due AS (SELECT id FROM jobs WHERE state = 1 AND run_at <= $1 AND lane = ANY($4) \
                 FOR UPDATE SKIP LOCKED), \
             promoted AS (UPDATE jobs j SET state = 0 FROM due WHERE j.id = due.id RETURNING j.lane) \
             SELECT lane, state FROM expired UNION ALL SELECT lane, 1::smallint FROM promoted",
            &[(&now, Type::INT8), (&max, Type::INT8), (&error, Type::TEXT), (&held, Type::TEXT_ARRAY)],
        )
        .await?;
    for row in rows {
        let delta = lanes.entry(row.get(0)).or_default();
        match row.get::<_, i16>(1) {
            1 => {
                delta.ready += 1;
                delta.scheduled -= 1;
            }
            state => {
                delta.running -= 1;
                taken.expired += 1;
                if state == 4 {
                    delta.dead += 1;
                    taken.expired_dead += 1;
                } else {
                    delta.ready += 1;
                }
            }
        }
    }
    Ok(())
}
