//! Serving lanes in the claim transaction: lock the candidate lanes, read the clock, take as many
//! jobs per lane per turn as its weight (one by default) as the lanes' pace and `max_in_flight`
//! allow, charging each run to its lane's buckets, and store what changed, in a fixed number of
//! round trips. Turns carry over between claims as on SQLite (a lane's `credit`). A paced run
//! may be taken up to the claim's `ahead` before its slot, charged at its slot (see
//! [`charge_at`], where the argument that this never admits more than the quota is).

use super::CLOCK_NS;
use super::lanes::{load_pace, save_pace};
use crate::error::Error;
use crate::job::{Job, ns};
use crate::pace::{LanePace, StoredBucket};
use crate::rules::LaneRules;
use crate::store::{Take, charge_at};
use std::collections::HashMap;
use std::time::Instant;
use tokio_postgres::types::Type;
use tokio_postgres::{GenericClient, Row};

/// A lane's ready job: id, payload, attempt, key, due time.
type Head = (i64, Vec<u8>, i64, Option<String>, i64);

/// One locked candidate lane during a claim.
struct Lane {
    name: String,
    pace: LanePace,
    stored: Vec<StoredBucket>,
    heads: Vec<Head>,
    took: usize,
    served: Option<i64>,
    refused_until: Option<i64>,
    heal: bool,
    max_in_flight: Option<i64>,
    /// Jobs a turn (the lane's weight), and how many it was given of its current turn.
    turn: i64,
    credit: i64,
}

/// The candidate lanes (their slot within `$4`: the transaction's time and the claim's `ahead`),
/// locked (those another claim holds skipped), in the order they are served, each with the clock
/// read once it is locked (the caller's, if given).
const CANDIDATES: &str = "WITH c AS MATERIALIZED (SELECT lane, ready, running, max_in_flight, credit, served \
    FROM lanes WHERE ready > 0 AND next_slot <= $4 AND paused_until <= $1 AND NOT paused \
    AND (max_in_flight IS NULL OR running < max_in_flight) ORDER BY served, lane LIMIT $2 \
    FOR UPDATE SKIP LOCKED) \
    SELECT lane, ready, running, max_in_flight, credit, COALESCE($3::bigint, CLOCK) FROM c \
    ORDER BY served, lane";

/// The locked candidate lanes, and the clock read after them with the local instant its reply
/// came back (by then the server had read it: see `Taken::claim_clock`); `None`: no lane.
pub(super) type Found = (Vec<Row>, Option<(i64, Instant)>);

/// Locks the lanes a claim may serve and reads the clock after them, in one statement (one
/// round trip; the caller may pipeline it behind the counters' update).
pub(super) async fn candidates(
    tx: &impl GenericClient,
    txn_now: i64,
    take: &Take,
) -> Result<Found, Error> {
    if take.max == 0 {
        return Ok((vec![], None));
    }
    let sql = CANDIDATES.replace("CLOCK", CLOCK_NS);
    let rows = tx
        .query_typed(
            &sql,
            &[
                (&txn_now, Type::INT8),
                (&(take.max as i64), Type::INT8),
                (&take.now, Type::INT8),
                (&txn_now.saturating_add(take.ahead), Type::INT8),
            ],
        )
        .await?;
    let seen = Instant::now();
    // The clock, read after the lanes are locked: every earlier charge to them is committed.
    // Each row's reading follows its own lock; the last (the greatest) follows them all.
    let now = rows.iter().map(|r| r.get::<_, i64>(5)).max();
    Ok((rows, now.map(|now| (now, seen))))
}

/// Takes up to `take.max` jobs from the `rows` [`candidates`] locked at `now`, one job per turn
/// as SQLite does, each run charged at [`charge_at`] (up to `take.ahead` after `now`); answers
/// the clock it charged against (`None`: no lane was locked).
pub(super) async fn claim(
    tx: &impl GenericClient,
    (rows, clock): Found,
    take: &Take,
    rules: &LaneRules,
    out: &mut Vec<Job>,
) -> Result<Option<(i64, Instant)>, Error> {
    let max = take.max;
    let Some((now, _)) = clock else { return Ok(None) };
    let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let stored = load_pace(tx, &name_refs).await?;
    let mut lanes = Vec::new();
    let (mut want_lane, mut want_n) = (vec![], vec![]);
    for row in &rows {
        let name: String = row.get(0);
        let (ready, running): (i64, i64) = (row.get(1), row.get(2));
        let max_in_flight =
            rules.limits(&name).max_in_flight.map(|n| n.min(i64::MAX as u64) as i64);
        let room = max_in_flight.map_or(ready, |m| (m - running).clamp(0, ready)).min(max as i64);
        let turn = rules.limits(&name).turn();
        let stored = stored.get(&name).cloned().unwrap_or_default();
        let floor = rules.limits(&name).adaptive_floor;
        let pace = LanePace::load(rules.pace(&name).1, floor, &stored, now);
        // How many the pace lets go by `now + ahead`.
        let mut trial = pace.clone();
        let mut fits = 0;
        while fits < room
            && charge_at(now, trial.allowed_at(), take.ahead)
                .is_some_and(|at| trial.admit(at).is_ok())
        {
            fits += 1;
        }
        let refused_until = (room > 0 && fits == 0).then(|| pace.allowed_at());
        want_lane.push(name.clone());
        want_n.push(fits);
        lanes.push(Lane {
            name,
            pace,
            stored,
            heads: vec![],
            took: 0,
            served: None,
            refused_until,
            heal: false,
            max_in_flight,
            turn,
            credit: row.get(4),
        });
    }
    let heads = tx
        .query(
            "SELECT w.lane, j.id, j.payload, j.attempt, j.key, j.run_at \
             FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS w(lane, n, ord) \
             CROSS JOIN LATERAL (SELECT id, payload, attempt, key, run_at, priority FROM jobs \
                 WHERE jobs.lane = w.lane AND state = 0 ORDER BY priority DESC, id LIMIT w.n) j \
             ORDER BY w.ord, j.priority DESC, j.id",
            &[&want_lane, &want_n],
        )
        .await?;
    let index: HashMap<String, usize> =
        lanes.iter().enumerate().map(|(i, l)| (l.name.clone(), i)).collect();
    for r in heads {
        let lane: String = r.get(0);
        lanes[index[&lane]].heads.push((r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)));
    }
    for (lane, &n) in lanes.iter_mut().zip(&want_n) {
        lane.heal = n > 0 && lane.heads.is_empty();
    }
    // Turns: one job from each lane in order, again and again, as long as any can give one.
    let stamps: Vec<i64> = tx
        .query(
            "SELECT nextval('leakgate_jobs_served') FROM generate_series(1, $1::bigint)",
            &[&(max as i64)],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let lease_until = now.saturating_add(ns(take.policy.lease));
    let (mut run_job, mut run_attempt, mut run_lane, mut run_slot, mut run_start) =
        (vec![], vec![], vec![], vec![], vec![]);
    'turns: loop {
        let mut progressed = false;
        for lane in lanes.iter_mut() {
            // As many jobs as are left of its turn (its weight, less what it had of it before).
            loop {
                if out.len() == max {
                    break 'turns;
                }
                if lane.took == lane.heads.len() {
                    break;
                }
                let pace_slot = lane.pace.allowed_at();
                let Some(at) = charge_at(now, pace_slot, take.ahead) else { break };
                if lane.pace.admit(at).is_err() {
                    break;
                }
                let (id, payload, attempt, key, run_at) = lane.heads[lane.took].clone();
                lane.took += 1;
                lane.credit = lane.credit.saturating_add(1);
                if lane.credit >= lane.turn {
                    // Its turn used up: to the back of the round.
                    lane.credit = 0;
                    lane.served = Some(stamps[out.len()]);
                }
                let slot = pace_slot.max(run_at);
                run_job.push(id);
                run_attempt.push(attempt + 1);
                run_lane.push(lane.name.clone());
                run_slot.push(slot);
                run_start.push(at);
                out.push(Job {
                    id,
                    lane: lane.name.clone(),
                    payload,
                    attempt: (attempt + 1) as u32,
                    key,
                    started_ns: at,
                    slot_ns: slot,
                    deadline: None,
                });
                progressed = true;
                if lane.credit == 0 {
                    break;
                }
            }
        }
        if !progressed {
            break;
        }
    }
    if !run_job.is_empty() {
        // Each run starts at its charge time; its lease from the claim.
        tx.execute(
            "UPDATE jobs SET state = 2, attempt = attempt + 1, lease_until = $2, started_at = d.at \
             FROM unnest($1::bigint[], $3::bigint[]) AS d(id, at) WHERE jobs.id = d.id",
            &[&run_job, &lease_until, &run_start],
        )
        .await?;
        tx.execute(
            "INSERT INTO runs SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) \
             ON CONFLICT DO NOTHING",
            &[&run_job, &run_attempt, &run_lane, &run_slot, &run_start],
        )
        .await?;
    }
    let paced: Vec<(String, Vec<StoredBucket>)> = lanes
        .iter()
        .filter(|l| l.pace.is_paced() && (l.took > 0 || l.pace.stored() != l.stored))
        .map(|l| (l.name.clone(), l.pace.stored()))
        .collect();
    if !paced.is_empty() {
        save_pace(tx, &paced).await?;
    }
    let names: Vec<&str> = lanes.iter().map(|l| l.name.as_str()).collect();
    let took: Vec<i64> = lanes.iter().map(|l| l.took as i64).collect();
    let served: Vec<Option<i64>> = lanes.iter().map(|l| l.served).collect();
    let next: Vec<i64> =
        lanes.iter().map(|l| l.refused_until.unwrap_or_else(|| l.pace.allowed_at())).collect();
    let heal: Vec<bool> = lanes.iter().map(|l| l.heal).collect();
    let limits: Vec<Option<i64>> = lanes.iter().map(|l| l.max_in_flight).collect();
    let credit: Vec<i64> = lanes.iter().map(|l| l.credit).collect();
    tx.execute(
        "UPDATE lanes l SET ready = CASE WHEN d.heal THEN 0 ELSE l.ready - d.n END, running = l.running + d.n, \
         served = COALESCE(d.served, l.served), next_slot = d.next, max_in_flight = d.mif, credit = d.credit \
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bool[], $6::bigint[], $7::bigint[]) \
         AS d(lane, n, served, next, heal, mif, credit) WHERE l.lane = d.lane",
        &[&names, &took, &served, &next, &heal, &limits, &credit],
    )
    .await?;
    Ok(clock)
}
