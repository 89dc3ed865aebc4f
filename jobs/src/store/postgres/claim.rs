//! The claim on PostgreSQL: the same steps as SQLite's (record outcomes, take back expired
//! leases, promote due jobs, take jobs round-robin charging each run to its lane), in one
//! transaction, with a fixed number of round trips whatever the number of jobs (arrays).

use super::{retrying, Postgres, CHANNEL, CLOCK_NS};
use crate::error::Error;
use crate::job::{ns, Job, Outcome};
use crate::pace::{LanePace, StoredBucket};
use crate::rules::LaneRules;
use crate::store::{Completion, Policy, RulesCache, Take, Taken};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tokio_postgres::GenericClient;

/// The time (the caller's, `$1`, or the server's), whether anything could be taken or needs
/// maintenance then, and the rules' version: one round trip.
const LOOK: &str = "WITH t AS (SELECT COALESCE($1::bigint, CLOCK) AS now) SELECT t.now, \
    EXISTS (SELECT 1 FROM lanes WHERE ready > 0 AND next_slot <= t.now AND paused_until <= t.now \
        AND (max_in_flight IS NULL OR running < max_in_flight)) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 1 AND run_at <= t.now) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 2 AND lease_until <= t.now), \
    COALESCE((SELECT version FROM rules WHERE id = 1), 0) FROM t";

/// Changes to one lane's counters (and a slow-down's pause) from one transaction.
#[derive(Clone, Copy, Debug, Default)]
struct Delta {
    ready: i64,
    scheduled: i64,
    running: i64,
    dead: i64,
    done: i64,
    /// Paused until (a slow-down), 0 for none.
    pause: i64,
}

impl Postgres {
    pub(crate) async fn take(&self, take: Take) -> Result<Taken, Error> {
        self.mark_seen();
        retrying!(self.try_take(&take).await)
    }

    async fn try_take(&self, take: &Take) -> Result<Taken, Error> {
        let mut guard = self.client().await?;
        let client = guard.as_mut().expect("connected");
        let look = LOOK.replace("CLOCK", CLOCK_NS);
        if take.completions.is_empty() && take.look_first {
            // A look without locks first: nothing due, nothing to record, no transaction.
            let row = client.query_one(&look, &[&take.now]).await?;
            let (now, due, version): (i64, bool, i64) = (row.get(0), row.get(1), row.get(2));
            if !due && version == self.rules.version() {
                let (wake, remaining) = outlook(&*client, now).await?;
                return Ok(Taken { now, wake, remaining, ..Taken::default() });
            }
        }
        let tx = client.transaction().await?;
        let row = tx.query_one(&look, &[&take.now]).await?;
        let (now, version): (i64, i64) = (row.get(0), row.get(2));
        let rules = rules_at(&tx, &self.rules, version).await?;
        let mut taken = Taken { now, ..Taken::default() };
        let mut lanes = BTreeMap::new();
        complete(&tx, &take.completions, now, &take.policy, &mut lanes, &mut taken).await?;
        maintain(&tx, now, &take.policy, &mut lanes, &mut taken).await?;
        apply(&tx, &lanes, now, &rules).await?;
        claim(&tx, now, take, &rules, &mut taken.jobs).await?;
        (taken.wake, taken.remaining) = outlook(&tx, now).await?;
        // Wake other workers when a limited lane has room again, or the queue is empty.
        let freed = lanes
            .iter()
            .any(|(lane, d)| d.running < 0 && rules.limits(lane).max_in_flight.is_some());
        if freed || (taken.remaining == 0 && !take.completions.is_empty()) {
            tx.batch_execute(&format!("NOTIFY {CHANNEL}")).await?;
        }
        tx.commit().await?;
        Ok(taken)
    }
}

/// The caller's time, or the server's.
pub(crate) async fn now(client: &impl GenericClient, caller: Option<i64>) -> Result<i64, Error> {
    match caller {
        Some(t) => Ok(t),
        None => Ok(client.query_one(&format!("SELECT {CLOCK_NS}"), &[]).await?.get(0)),
    }
}

async fn version(client: &impl GenericClient) -> Result<i64, Error> {
    let row = client.query_opt("SELECT version FROM rules WHERE id = 1", &[]).await?;
    Ok(row.map_or(0, |r| r.get(0)))
}

/// The rules stored in the database (cached by version).
pub(crate) async fn current_rules(
    client: &impl GenericClient,
    cache: &RulesCache,
) -> Result<Arc<LaneRules>, Error> {
    let v = version(client).await?;
    rules_at(client, cache, v).await
}

/// The rules of version `v` (cached; read when the version is new).
async fn rules_at(
    client: &impl GenericClient,
    cache: &RulesCache,
    v: i64,
) -> Result<Arc<LaneRules>, Error> {
    if v == cache.version() {
        return cache.get(v, || unreachable!("the cached version"));
    }
    let text: String = match client.query_opt("SELECT text FROM rules WHERE id = 1", &[]).await? {
        Some(row) => row.get(0),
        None => String::new(),
    };
    cache.get(v, || Ok(text))
}

async fn complete(
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
        .query(
            "SELECT j.id, j.lane, j.failures FROM jobs j \
             JOIN unnest($1::bigint[], $2::bigint[]) AS d(id, attempt) ON j.id = d.id AND j.attempt = d.attempt \
             WHERE j.state = 2 FOR UPDATE OF j",
            &[&ids, &attempts],
        )
        .await?
        .into_iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    let (mut id, mut state, mut failures, mut run_at, mut finished, mut error) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for c in completions {
        let Some((lane, f)) = held.get(&c.id) else {
            taken.lost.push(c.id);
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
    tx.execute(
        "UPDATE jobs j SET state = d.state, failures = d.failures, run_at = COALESCE(d.run_at, j.run_at), \
         finished_at = d.finished, lease_until = NULL, last_error = COALESCE(d.error, j.last_error) \
         FROM unnest($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[]) \
         AS d(id, state, failures, run_at, finished, error) WHERE j.id = d.id",
        &[&id, &state, &failures, &run_at, &finished, &error],
    )
    .await?;
    Ok(())
}

/// In one statement: jobs whose lease ran out go back to their lane (or die, past
/// `max_attempts`), and scheduled jobs whose time has come become ready.
async fn maintain(
    tx: &impl GenericClient,
    now: i64,
    policy: &Policy,
    lanes: &mut BTreeMap<String, Delta>,
    taken: &mut Taken,
) -> Result<(), Error> {
    let max = i64::from(policy.max_attempts);
    let error = "its lease ran out: the worker died or stopped renewing it";
    let rows = tx
        .query(
            "WITH exp AS (SELECT id FROM jobs WHERE state = 2 AND lease_until <= $1 FOR UPDATE SKIP LOCKED), \
             expired AS (UPDATE jobs j SET failures = j.failures + 1, lease_until = NULL, last_error = $3, \
                 state = (CASE WHEN j.failures + 1 >= $2 THEN 4 ELSE 0 END)::smallint, \
                 finished_at = CASE WHEN j.failures + 1 >= $2 THEN $1 END \
                 FROM exp WHERE j.id = exp.id RETURNING j.lane, j.state), \
             due AS (SELECT id FROM jobs WHERE state = 1 AND run_at <= $1 FOR UPDATE SKIP LOCKED), \
             promoted AS (UPDATE jobs j SET state = 0 FROM due WHERE j.id = due.id RETURNING j.lane) \
             SELECT lane, state FROM expired UNION ALL SELECT lane, 1::smallint FROM promoted",
            &[&now, &max, &error],
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

/// Applies counter changes, locking the lanes in order; pushes back slowed lanes' pace.
async fn apply(
    tx: &impl GenericClient,
    lanes: &BTreeMap<String, Delta>,
    now: i64,
    rules: &LaneRules,
) -> Result<(), Error> {
    if lanes.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = lanes.keys().map(String::as_str).collect();
    tx.query("SELECT lane FROM lanes WHERE lane = ANY($1) ORDER BY lane FOR UPDATE", &[&names])
        .await?;
    let col = |f: fn(&Delta) -> i64| lanes.values().map(f).collect::<Vec<i64>>();
    tx.execute(
        "UPDATE lanes l SET ready = l.ready + d.ready, scheduled = l.scheduled + d.scheduled, \
         running = l.running + d.running, dead = l.dead + d.dead, done = l.done + d.done, \
         paused_until = GREATEST(l.paused_until, d.pause), next_slot = GREATEST(l.next_slot, d.pause) \
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) \
         AS d(lane, ready, scheduled, running, dead, done, pause) WHERE l.lane = d.lane",
        &[
            &names,
            &col(|d| d.ready),
            &col(|d| d.scheduled),
            &col(|d| d.running),
            &col(|d| d.dead),
            &col(|d| d.done),
            &col(|d| d.pause),
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
}

/// Takes up to `take.max` jobs: locks the candidate lanes (skipping those another claim holds),
/// reads the clock, then serves them one job per turn as SQLite does.
async fn claim(
    tx: &impl GenericClient,
    txn_now: i64,
    take: &Take,
    rules: &LaneRules,
    out: &mut Vec<Job>,
) -> Result<(), Error> {
    let max = take.max;
    if max == 0 {
        return Ok(());
    }
    let rows = tx
        .query(
            "SELECT lane, ready, running, max_in_flight FROM lanes WHERE ready > 0 AND next_slot <= $1 \
             AND paused_until <= $1 AND (max_in_flight IS NULL OR running < max_in_flight) \
             ORDER BY served, lane LIMIT $2 FOR UPDATE SKIP LOCKED",
            &[&txn_now, &(max as i64)],
        )
        .await?;
    if rows.is_empty() {
        return Ok(());
    }
    // The clock, read after the lanes are locked: every earlier charge to them is committed.
    let now = now(tx, take.now).await?;
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
        let stored = stored.get(&name).cloned().unwrap_or_default();
        let pace = LanePace::load(rules.pace(&name).1, &stored, now);
        // How many the pace lets go now.
        let mut trial = pace.clone();
        let mut fits = 0;
        while fits < room && trial.admit(now).is_ok() {
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
        });
    }
    let heads = tx
        .query(
            "SELECT w.lane, j.id, j.payload, j.attempt, j.key, j.run_at \
             FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS w(lane, n, ord) \
             CROSS JOIN LATERAL (SELECT id, payload, attempt, key, run_at FROM jobs \
                 WHERE jobs.lane = w.lane AND state = 0 ORDER BY id LIMIT w.n) j ORDER BY w.ord, j.id",
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
    let (mut run_job, mut run_attempt, mut run_lane, mut run_slot) =
        (vec![], vec![], vec![], vec![]);
    'turns: loop {
        let mut progressed = false;
        for lane in lanes.iter_mut() {
            if out.len() == max {
                break 'turns;
            }
            if lane.took == lane.heads.len() {
                continue;
            }
            let pace_slot = lane.pace.allowed_at();
            if lane.pace.admit(now).is_err() {
                continue;
            }
            let (id, payload, attempt, key, run_at) = lane.heads[lane.took].clone();
            lane.took += 1;
            lane.served = Some(stamps[out.len()]);
            let slot = pace_slot.max(run_at);
            run_job.push(id);
            run_attempt.push(attempt + 1);
            run_lane.push(lane.name.clone());
            run_slot.push(slot);
            out.push(Job {
                id,
                lane: lane.name.clone(),
                payload,
                attempt: (attempt + 1) as u32,
                key,
                started_ns: now,
                slot_ns: slot,
            });
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    if !run_job.is_empty() {
        tx.execute(
            "UPDATE jobs SET state = 2, attempt = attempt + 1, lease_until = $2, started_at = $3 WHERE id = ANY($1)",
            &[&run_job, &lease_until, &now],
        )
        .await?;
        let starts = vec![now; run_job.len()];
        tx.execute(
            "INSERT INTO runs SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) \
             ON CONFLICT DO NOTHING",
            &[&run_job, &run_attempt, &run_lane, &run_slot, &starts],
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
    tx.execute(
        "UPDATE lanes l SET ready = CASE WHEN d.heal THEN 0 ELSE l.ready - d.n END, running = l.running + d.n, \
         served = COALESCE(d.served, l.served), next_slot = d.next, max_in_flight = d.mif \
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bool[], $6::bigint[]) \
         AS d(lane, n, served, next, heal, mif) WHERE l.lane = d.lane",
        &[&names, &took, &served, &next, &heal, &limits],
    )
    .await?;
    Ok(())
}

/// When something may next become takeable, and how many jobs are waiting or running.
pub(crate) async fn outlook(
    client: &impl GenericClient,
    now: i64,
) -> Result<(Option<i64>, i64), Error> {
    let row = client
        .query_one(
            "SELECT (SELECT MIN(GREATEST(next_slot, paused_until)) FROM lanes WHERE ready > 0 \
                     AND (max_in_flight IS NULL OR running < max_in_flight)), \
                    (SELECT MIN(run_at) FROM jobs WHERE state = 1), \
                    (SELECT MIN(lease_until) FROM jobs WHERE state = 2), \
                    (SELECT COALESCE(SUM(ready + scheduled + running), 0)::bigint FROM lanes)",
            &[],
        )
        .await?;
    let (slot, due, lease): (Option<i64>, Option<i64>, Option<i64>) =
        (row.get(0), row.get(1), row.get(2));
    let wake = [slot, due, lease].into_iter().flatten().min().map(|t| t.max(now));
    Ok((wake, row.get(3)))
}
