//! Lane rows in a transaction: locking them ([`lock_lanes`], never waiting for one another
//! session holds), their counters ([`apply`] for the changes a claim gathered, [`bump`] for an
//! operation's), and their pace buckets ([`load_pace`], [`save_pace`], [`push_back`] for
//! slow-downs and an adaptive lane's done jobs). Pace rows are only locked by a transaction that holds their lane's row.

use crate::error::Error;
use crate::pace::{LanePace, StoredBucket};
use crate::rules::LaneRules;
use crate::store::Completion;
use std::collections::{BTreeMap, HashMap, HashSet};
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

/// Changes to one lane's counters (and a slow-down's pause) from one transaction.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Delta {
    pub(super) ready: i64,
    pub(super) scheduled: i64,
    pub(super) running: i64,
    pub(super) dead: i64,
    pub(super) done: i64,
    /// Paused until (a slow-down), 0 for none.
    pub(super) pause: i64,
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

/// Applies counter changes (to lanes [`lock_lanes`] locked), and slow-downs' pauses.
pub(super) async fn apply(
    tx: &impl GenericClient,
    lanes: &BTreeMap<String, Delta>,
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
    Ok(())
}

/// Slowed-down lanes (a pause in `lanes`): an adaptive one backs off ([`LanePace::back_off`]),
/// and their buckets are pushed back so that they resume at their steady rate, without a burst
/// ([`LanePace::push_back`]); adaptive lanes with done jobs recover a step per job
/// ([`LanePace::recover`]). Unpaced lanes have none; other lanes are not read. Adaptive lanes
/// whose rows changed are added to `rates` with their rate a second.
pub(super) async fn push_back(
    tx: &impl GenericClient,
    lanes: &BTreeMap<String, Delta>,
    now: i64,
    rules: &LaneRules,
    rates: &mut Vec<(String, f64)>,
) -> Result<(), Error> {
    let touched: Vec<&str> = lanes
        .iter()
        .filter(|(lane, d)| {
            let adaptive = rules.limits(lane).adaptive_floor.is_some();
            (d.pause > 0 || (adaptive && d.done > 0)) && !rules.pace(lane).1.is_empty()
        })
        .map(|(lane, _)| lane.as_str())
        .collect();
    if touched.is_empty() {
        return Ok(());
    }
    let stored = load_pace(tx, &touched).await?;
    let mut rows = Vec::new();
    for lane in touched {
        let (floor, d) = (rules.limits(lane).adaptive_floor, lanes[lane]);
        let before = stored.get(lane).map_or(&[][..], |v| v);
        let mut pace = LanePace::load(rules.pace(lane).1, floor, before, now);
        if d.pause > 0 {
            pace.back_off(now);
            pace.push_back(d.pause);
        }
        // Done jobs recorded with the slow-down (a batch) count after it.
        pace.recover(d.done.max(0) as u64, now);
        if pace.stored() != before {
            rows.push((lane.to_string(), pace.stored()));
            if let (Some(_), Some(rate)) = (floor, pace.per_second()) {
                rates.push((lane.to_string(), rate));
            }
        }
    }
    if !rows.is_empty() {
        save_pace(tx, &rows).await?;
    }
    Ok(())
}

/// Moves `n` jobs of each lane from counter `from` to counter `to` (lanes locked in order).
pub(super) async fn bump(
    tx: &impl GenericClient,
    lanes: &BTreeMap<String, i64>,
    from: &str,
    to: &str,
) -> Result<(), Error> {
    if lanes.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = lanes.keys().map(String::as_str).collect();
    let counts: Vec<i64> = lanes.values().copied().collect();
    tx.query("SELECT lane FROM lanes WHERE lane = ANY($1) ORDER BY lane FOR UPDATE", &[&names])
        .await?;
    let sql = if from == to {
        format!(
            "UPDATE lanes l SET {from} = l.{from} - d.n FROM unnest($1::text[], $2::bigint[]) AS d(lane, n) WHERE l.lane = d.lane"
        )
    } else {
        format!(
            "UPDATE lanes l SET {from} = l.{from} - d.n, {to} = l.{to} + d.n \
             FROM unnest($1::text[], $2::bigint[]) AS d(lane, n) WHERE l.lane = d.lane"
        )
    };
    tx.execute(&sql, &[&names, &counts]).await?;
    Ok(())
}

/// The stored buckets of `lanes`, locked (the caller holds the lanes' rows).
pub(super) async fn load_pace(
    tx: &impl GenericClient,
    lanes: &[&str],
) -> Result<HashMap<String, Vec<StoredBucket>>, Error> {
    read_pace(tx, lanes, " FOR UPDATE").await
}

/// The stored buckets of `lanes`, read without locks (what `status` shows).
pub(super) async fn peek_pace(
    client: &impl GenericClient,
    lanes: &[&str],
) -> Result<HashMap<String, Vec<StoredBucket>>, Error> {
    read_pace(client, lanes, "").await
}

async fn read_pace(
    client: &impl GenericClient,
    lanes: &[&str],
    lock: &str,
) -> Result<HashMap<String, Vec<StoredBucket>>, Error> {
    let sql = format!(
        "SELECT lane, count, period_ns, burst, tat_ns, tat_frac, adapted, backoff_ns FROM pace \
         WHERE lane = ANY($1) ORDER BY lane, idx{lock}"
    );
    let rows = client.query(&sql, &[&lanes]).await?;
    let mut out: HashMap<String, Vec<StoredBucket>> = HashMap::new();
    for r in rows {
        out.entry(r.get(0)).or_default().push(StoredBucket {
            count: r.get(1),
            period_ns: r.get(2),
            burst: r.get(3),
            tat_ns: r.get(4),
            tat_frac: r.get(5),
            adapted: r.get(6),
            backoff_ns: r.get(7),
        });
    }
    Ok(out)
}

/// Stores lanes' buckets, replacing what was there.
pub(super) async fn save_pace(
    tx: &impl GenericClient,
    lanes: &[(String, Vec<StoredBucket>)],
) -> Result<(), Error> {
    let (mut lane, mut idx, mut count, mut period, mut burst, mut tat_ns, mut tat_frac) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut adapted, mut backoff) = (vec![], vec![]);
    for (name, rows) in lanes {
        for (i, b) in rows.iter().enumerate() {
            lane.push(name.as_str());
            idx.push(i as i64);
            count.push(b.count);
            period.push(b.period_ns);
            burst.push(b.burst);
            tat_ns.push(b.tat_ns);
            tat_frac.push(b.tat_frac);
            adapted.push(b.adapted);
            backoff.push(b.backoff_ns);
        }
    }
    tx.execute(
        "INSERT INTO pace (lane, idx, count, period_ns, burst, tat_ns, tat_frac, adapted, backoff_ns) \
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], \
         $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[]) ON CONFLICT (lane, idx) DO UPDATE SET \
         count = excluded.count, period_ns = excluded.period_ns, burst = excluded.burst, \
         tat_ns = excluded.tat_ns, tat_frac = excluded.tat_frac, adapted = excluded.adapted, \
         backoff_ns = excluded.backoff_ns",
        &[&lane, &idx, &count, &period, &burst, &tat_ns, &tat_frac, &adapted, &backoff],
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
