//! Recording what happened in a claim transaction: outcomes of runs, expired leases, due jobs,
//! and the lane counters they change (on lanes locked first, skipping those another session
//! holds); stored pace rows.

use crate::error::Error;
use crate::job::{Outcome, ns};
use crate::pace::{LanePace, StoredBucket};
use crate::rules::LaneRules;
use crate::store::{Completion, Policy, Taken};
use std::collections::{BTreeMap, HashMap, HashSet};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

/// Changes to one lane's counters (and a slow-down's pause) from one transaction.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Delta {
    ready: i64,
    scheduled: i64,
    pub(super) running: i64,
    dead: i64,
    done: i64,
    /// Paused until (a slow-down), 0 for none.
    pause: i64,
}
/// Locks, without waiting, the lanes a claim records and maintains: those of `completions`,
/// and those with a lease run out or a scheduled job due at `now`. A lane another session holds
/// is skipped (its outcomes wait for a later claim): a claim never waits for a lane, so a
/// session that stalls holding one holds up no other worker. Answers the lanes locked.
pub(super) async fn lock_lanes(
    tx: &impl GenericClient,
    completions: &[Completion],
    now: i64,
) -> Result<HashSet<String>, Error> {
    let mine: Vec<&str> = completions.iter().map(|c| c.lane.as_str()).collect();
    let rows = tx
        .query_typed(
            "SELECT lane FROM lanes WHERE lane IN (SELECT unnest($2::text[]) \
                 UNION SELECT lane FROM jobs WHERE state = 2 AND lease_until <= $1 \
                 UNION SELECT lane FROM jobs WHERE state = 1 AND run_at <= $1) \
             ORDER BY lane FOR UPDATE SKIP LOCKED",
            &[(&now, Type::INT8), (&mine, Type::TEXT_ARRAY)],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Records `completions` (their lanes locked by [`lock_lanes`]); a run that no longer holds its
/// job is counted in `taken.lost`.
pub(super) async fn complete(
    tx: &impl GenericClient,
    completions: &[Completion],
    now: i64,
    policy: &Policy,
    lanes: &mut BTreeMap<String, Delta>,
    taken: &mut Taken,
) -> Result<(), Error> {
    if completions.is_empty() {
        return Ok(());
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
            Outcome::Failed(message) => {
                let f = f + 1;
                failures.push(f);
                error.push(Some(message.clone()));
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
                    run_at.push(Some(now.saturating_add(policy.retry_delay_ns(f as u32, seed))));
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
    tx.query_typed(
        "UPDATE jobs j SET state = d.state, failures = d.failures, run_at = COALESCE(d.run_at, j.run_at), \
         finished_at = d.finished, lease_until = NULL, last_error = COALESCE(d.error, j.last_error) \
         FROM unnest($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[]) \
         AS d(id, state, failures, run_at, finished, error) WHERE j.id = d.id",
        &[
            (&id, Type::INT8_ARRAY),
            (&state, Type::INT2_ARRAY),
            (&failures, Type::INT8_ARRAY),
            (&run_at, Type::INT8_ARRAY),
            (&finished, Type::INT8_ARRAY),
            (&error, Type::TEXT_ARRAY),
        ],
    )
    .await?;
    Ok(())
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
/// Applies counter changes (to lanes [`lock_lanes`] locked); pushes back slowed lanes' pace.
pub(super) async fn apply(
    tx: &impl GenericClient,
    lanes: &BTreeMap<String, Delta>,
    now: i64,
    rules: &LaneRules,
) -> Result<(), Error> {
    if lanes.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = lanes.keys().map(String::as_str).collect();
    let col = |f: fn(&Delta) -> i64| lanes.values().map(f).collect::<Vec<i64>>();
    tx.query_typed(
        "UPDATE lanes l SET ready = l.ready + d.ready, scheduled = l.scheduled + d.scheduled, \
         running = l.running + d.running, dead = l.dead + d.dead, done = l.done + d.done, \
         paused_until = GREATEST(l.paused_until, d.pause), next_slot = GREATEST(l.next_slot, d.pause) \
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) \
         AS d(lane, ready, scheduled, running, dead, done, pause) WHERE l.lane = d.lane",
        &[
            (&names, Type::TEXT_ARRAY),
            (&col(|d| d.ready), Type::INT8_ARRAY),
            (&col(|d| d.scheduled), Type::INT8_ARRAY),
            (&col(|d| d.running), Type::INT8_ARRAY),
            (&col(|d| d.dead), Type::INT8_ARRAY),
            (&col(|d| d.done), Type::INT8_ARRAY),
            (&col(|d| d.pause), Type::INT8_ARRAY),
        ],
    )
    .await?;
    let slowed: Vec<&str> = lanes
        .iter()
        .filter(|(lane, d)| d.pause > 0 && !rules.pace(lane).1.is_empty())
        .map(|(lane, _)| lane.as_str())
        .collect();
    if !slowed.is_empty() {
        let stored = load_pace(tx, &slowed).await?;
        let mut rows = Vec::new();
        for lane in slowed {
            let mut pace =
                LanePace::load(rules.pace(lane).1, stored.get(lane).map_or(&[], |v| v), now);
            pace.push_back(lanes[lane].pause);
            rows.push((lane.to_string(), pace.stored()));
        }
        save_pace(tx, &rows).await?;
    }
    Ok(())
}
/// The stored buckets of `lanes`, locked (the caller holds the lanes' rows).
pub(crate) async fn load_pace(
    tx: &impl GenericClient,
    lanes: &[&str],
) -> Result<HashMap<String, Vec<StoredBucket>>, Error> {
    let rows = tx
        .query(
            "SELECT lane, count, period_ns, burst, tat_ns, tat_frac FROM pace WHERE lane = ANY($1) \
             ORDER BY lane, idx FOR UPDATE",
            &[&lanes],
        )
        .await?;
    let mut out: HashMap<String, Vec<StoredBucket>> = HashMap::new();
    for r in rows {
        out.entry(r.get(0)).or_default().push(StoredBucket {
            count: r.get(1),
            period_ns: r.get(2),
            burst: r.get(3),
            tat_ns: r.get(4),
            tat_frac: r.get(5),
        });
    }
    Ok(out)
}

/// Stores lanes' buckets, replacing what was there.
pub(crate) async fn save_pace(
    tx: &impl GenericClient,
    lanes: &[(String, Vec<StoredBucket>)],
) -> Result<(), Error> {
    let (mut lane, mut idx, mut count, mut period, mut burst, mut tat_ns, mut tat_frac) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for (name, rows) in lanes {
        for (i, b) in rows.iter().enumerate() {
            lane.push(name.as_str());
            idx.push(i as i64);
            count.push(b.count);
            period.push(b.period_ns);
            burst.push(b.burst);
            tat_ns.push(b.tat_ns);
            tat_frac.push(b.tat_frac);
        }
    }
    tx.execute(
        "INSERT INTO pace SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], \
         $5::bigint[], $6::bigint[], $7::bigint[]) ON CONFLICT (lane, idx) DO UPDATE SET count = excluded.count, \
         period_ns = excluded.period_ns, burst = excluded.burst, tat_ns = excluded.tat_ns, tat_frac = excluded.tat_frac",
        &[&lane, &idx, &count, &period, &burst, &tat_ns, &tat_frac],
    )
    .await?;
    let names: Vec<&str> = lanes.iter().map(|(n, _)| n.as_str()).collect();
    let lens: Vec<i64> = lanes.iter().map(|(_, r)| r.len() as i64).collect();
    tx.execute(
        "DELETE FROM pace p USING unnest($1::text[], $2::bigint[]) AS d(lane, len) \
         WHERE p.lane = d.lane AND p.idx >= d.len",
        &[&names, &lens],
    )
    .await?;
    Ok(())
}
