//! Adding jobs, renewing leases, rules, requeue and purge on PostgreSQL.

use super::lanes::bump;
use super::{CHANNEL, Postgres, now, retrying};
use crate::error::Error;
use crate::job::{Added, NewJob, ns};
use crate::pace::StoredBucket;
use crate::rules::LaneRules;
use crate::status::Requeue;
use crate::store::RulesCache;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::GenericClient;

/// Rows per `INSERT` of a batch.
const CHUNK: usize = 1000;

impl Postgres {
    /// Adds `jobs` in one transaction: all of them, or none.
    pub(crate) async fn add(
        &self,
        jobs: Vec<NewJob>,
        caller: Option<i64>,
    ) -> Result<Vec<Added>, Error> {
        for job in &jobs {
            job.check()?;
        }
        retrying!(self.try_add(&jobs, caller).await)
    }

    async fn try_add(&self, jobs: &[NewJob], caller: Option<i64>) -> Result<Vec<Added>, Error> {
        let mut guard = self.client().await?;
        let tx = guard.as_mut().expect("connected").transaction().await?;
        let now = now(&tx, caller).await?;
        let rules = current_rules(&tx, &self.rules).await?;
        let mut added = Vec::with_capacity(jobs.len());
        let mut lanes: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        let mut plain: Vec<&NewJob> = Vec::new();
        for job in jobs {
            if let Some(key) = &job.key {
                // Jobs before a keyed one are inserted first: ids follow the order given.
                insert_plain(&tx, &plain, now, &mut added).await?;
                plain.clear();
                let state = i16::from(!job.after.is_zero());
                let run_at = now.saturating_add(ns(job.after));
                let row = tx
                    .query_opt(
                        "INSERT INTO jobs (lane, payload, key, state, run_at, added_at, priority) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key) DO NOTHING RETURNING id",
                        &[&job.lane, &job.payload, key, &state, &run_at, &now, &(job.priority as i32)],
                    )
                    .await?;
                match row {
                    Some(row) => added.push(Added { id: row.get(0), new: true }),
                    None => {
                        let id = tx
                            .query_one("SELECT id FROM jobs WHERE key = $1", &[key])
                            .await?
                            .get(0);
                        added.push(Added { id, new: false });
                        continue;
                    }
                }
            } else {
                plain.push(job);
            }
            let counts = lanes.entry(&job.lane).or_default();
            if job.after.is_zero() {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
        insert_plain(&tx, &plain, now, &mut added).await?;
        if !lanes.is_empty() {
            let names: Vec<&str> = lanes.keys().copied().collect();
            let limits: Vec<Option<i64>> = names
                .iter()
                .map(|l| rules.limits(l).max_in_flight.map(|n| n.min(i64::MAX as u64) as i64))
                .collect();
            tx.execute(
                "INSERT INTO lanes (lane, max_in_flight) SELECT * FROM unnest($1::text[], $2::bigint[]) \
                 ON CONFLICT DO NOTHING",
                &[&names, &limits],
            )
            .await?;
            tx.query(
                "SELECT lane FROM lanes WHERE lane = ANY($1) ORDER BY lane FOR UPDATE",
                &[&names],
            )
            .await?;
            let ready: Vec<i64> = lanes.values().map(|c| c.0).collect();
            let scheduled: Vec<i64> = lanes.values().map(|c| c.1).collect();
            let rows = tx
                .query(
                    "UPDATE lanes l SET ready = l.ready + d.r, scheduled = l.scheduled + d.s \
                     FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS d(lane, r, s) \
                     WHERE l.lane = d.lane RETURNING l.lane, l.ready + l.scheduled",
                    &[&names, &ready, &scheduled],
                )
                .await?;
            for row in rows {
                let lane: String = row.get(0);
                let waiting: i64 = row.get(1);
                let (r, s) = lanes[lane.as_str()];
                if let Some(max_waiting) = rules.limits(&lane).max_waiting
                    && waiting as u64 > max_waiting
                {
                    let adding = (r + s) as u64;
                    return Err(Error::LaneFull {
                        lane,
                        max_waiting,
                        waiting: waiting as u64 - adding,
                        adding,
                    });
                }
            }
            tx.batch_execute(&format!("NOTIFY {CHANNEL}")).await?;
        }
        tx.commit().await?;
        Ok(added)
    }

    /// Extends the leases of running jobs `(id, attempt)`; answers those no longer held.
    pub(crate) async fn renew(
        &self,
        leases: Vec<(i64, u32)>,
        lease: Duration,
        caller: Option<i64>,
    ) -> Result<Vec<(i64, u32)>, Error> {
        let mut guard = self.client().await?;
        let client = guard.as_mut().expect("connected");
        let until = now(&*client, caller).await?.saturating_add(ns(lease));
        let ids: Vec<i64> = leases.iter().map(|l| l.0).collect();
        let attempts: Vec<i64> = leases.iter().map(|l| i64::from(l.1)).collect();
        let held: HashSet<(i64, i64)> = client
            .query(
                "UPDATE jobs j SET lease_until = $3 FROM unnest($1::bigint[], $2::bigint[]) AS d(id, attempt) \
                 WHERE j.id = d.id AND j.attempt = d.attempt AND j.state = 2 RETURNING j.id, j.attempt",
                &[&ids, &attempts, &until],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        Ok(leases.into_iter().filter(|&(id, a)| !held.contains(&(id, i64::from(a)))).collect())
    }

    /// Stores new rules (see the SQLite store's `set_rules`).
    pub(crate) async fn set_rules(&self, text: String, rules: LaneRules) -> Result<i64, Error> {
        retrying!(self.try_set_rules(&text, &rules).await)
    }

    async fn try_set_rules(&self, text: &str, rules: &LaneRules) -> Result<i64, Error> {
        let mut guard = self.client().await?;
        let tx = guard.as_mut().expect("connected").transaction().await?;
        let version: i64 = tx
            .query_one(
                "INSERT INTO rules (id, version, text) VALUES (1, 1, $1) ON CONFLICT (id) \
                 DO UPDATE SET version = rules.version + 1, text = excluded.text RETURNING version",
                &[&text],
            )
            .await?
            .get(0);
        let lanes: Vec<String> = tx
            .query("SELECT lane FROM lanes ORDER BY lane FOR UPDATE", &[])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let limits: Vec<Option<i64>> = lanes
            .iter()
            .map(|l| rules.limits(l).max_in_flight.map(|n| n.min(i64::MAX as u64) as i64))
            .collect();
        tx.execute(
            "UPDATE lanes l SET next_slot = 0, max_in_flight = d.mif \
             FROM unnest($1::text[], $2::bigint[]) AS d(lane, mif) WHERE l.lane = d.lane",
            &[&lanes, &limits],
        )
        .await?;
        tx.batch_execute(&format!("NOTIFY {CHANNEL}")).await?;
        tx.commit().await?;
        Ok(version)
    }

    /// The rules stored in the database.
    pub(crate) async fn rules(&self) -> Result<Arc<LaneRules>, Error> {
        let guard = self.client().await?;
        current_rules(guard.as_ref().expect("connected"), &self.rules).await
    }

    /// The stored pace buckets of `lanes` (read without locks).
    pub(crate) async fn pace_rows(
        &self,
        lanes: Vec<String>,
    ) -> Result<HashMap<String, Vec<StoredBucket>>, Error> {
        let guard = self.client().await?;
        let names: Vec<&str> = lanes.iter().map(String::as_str).collect();
        super::lanes::peek_pace(guard.as_ref().expect("connected"), &names).await
    }

    /// Dead jobs back to ready, their failures forgotten.
    pub(crate) async fn requeue(&self, which: Requeue, caller: Option<i64>) -> Result<u64, Error> {
        retrying!(self.try_requeue(&which, caller).await)
    }

    async fn try_requeue(&self, which: &Requeue, caller: Option<i64>) -> Result<u64, Error> {
        let mut guard = self.client().await?;
        let tx = guard.as_mut().expect("connected").transaction().await?;
        let now = now(&tx, caller).await?;
        let (lane, ids, all): (Option<&str>, Vec<i64>, bool) = match which {
            Requeue::All => (None, vec![], true),
            Requeue::Lane(lane) => (Some(lane), vec![], false),
            Requeue::Ids(ids) => (None, ids.clone(), false),
        };
        let rows = tx
            .query(
                "UPDATE jobs SET state = 0, failures = 0, finished_at = NULL, run_at = $4 \
                 WHERE state = 4 AND ($3 OR lane = $1 OR id = ANY($2)) RETURNING lane",
                &[&lane, &ids, &all, &now],
            )
            .await?;
        let mut lanes: BTreeMap<String, i64> = BTreeMap::new();
        for row in &rows {
            *lanes.entry(row.get(0)).or_default() += 1;
        }
        bump(&tx, &lanes, "dead", "ready").await?;
        tx.batch_execute(&format!("NOTIFY {CHANNEL}")).await?;
        tx.commit().await?;
        Ok(rows.len() as u64)
    }

    /// Removes done and cancelled jobs finished more than `older_than` ago, and runs started
    /// before that.
    pub(crate) async fn purge(
        &self,
        older_than: Duration,
        caller: Option<i64>,
    ) -> Result<u64, Error> {
        retrying!(self.try_purge(older_than, caller).await)
    }

    async fn try_purge(&self, older_than: Duration, caller: Option<i64>) -> Result<u64, Error> {
        let mut guard = self.client().await?;
        let tx = guard.as_mut().expect("connected").transaction().await?;
        let cutoff = now(&tx, caller).await?.saturating_sub(ns(older_than));
        let rows = tx
            .query(
                "DELETE FROM jobs WHERE state IN (3, 5) AND finished_at < $1 RETURNING lane, state",
                &[&cutoff],
            )
            .await?;
        let (mut done, mut cancelled): (BTreeMap<String, i64>, BTreeMap<String, i64>) =
            Default::default();
        for row in &rows {
            let by = if row.get::<_, i16>(1) == 3 { &mut done } else { &mut cancelled };
            *by.entry(row.get(0)).or_default() += 1;
        }
        bump(&tx, &done, "done", "done").await?;
        bump(&tx, &cancelled, "cancelled", "cancelled").await?;
        tx.execute("DELETE FROM runs WHERE started_at < $1", &[&cutoff]).await?;
        tx.commit().await?;
        Ok(rows.len() as u64)
    }
}

/// Inserts jobs without keys in chunks, ids in the order given.
async fn insert_plain(
    tx: &impl GenericClient,
    jobs: &[&NewJob],
    now: i64,
    added: &mut Vec<Added>,
) -> Result<(), Error> {
    for chunk in jobs.chunks(CHUNK) {
        let lanes: Vec<&str> = chunk.iter().map(|j| j.lane.as_str()).collect();
        let payloads: Vec<&[u8]> = chunk.iter().map(|j| j.payload.as_slice()).collect();
        let states: Vec<i16> = chunk.iter().map(|j| i16::from(!j.after.is_zero())).collect();
        let run_at: Vec<i64> = chunk.iter().map(|j| now.saturating_add(ns(j.after))).collect();
        let priorities: Vec<i32> = chunk.iter().map(|j| j.priority as i32).collect();
        let rows = tx
            .query(
                "INSERT INTO jobs (lane, payload, state, run_at, added_at, priority) \
                 SELECT lane, payload, state, run_at, $5, priority FROM unnest($1::text[], $2::bytea[], \
                 $3::smallint[], $4::bigint[], $6::int[]) WITH ORDINALITY AS d(lane, payload, state, run_at, \
                 priority, ord) ORDER BY ord RETURNING id",
                &[&lanes, &payloads, &states, &run_at, &now, &priorities],
            )
            .await?;
        let mut ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        ids.sort_unstable(); // identities follow the insertion order; RETURNING's order is not promised
        added.extend(ids.into_iter().map(|id| Added { id, new: true }));
    }
    Ok(())
}

/// The version of the rules stored in the database (0: none ever stored).
async fn version(client: &impl GenericClient) -> Result<i64, Error> {
    let row = client.query_opt("SELECT version FROM rules WHERE id = 1", &[]).await?;
    Ok(row.map_or(0, |r| r.get(0)))
}

/// The rules stored in the database (cached by version).
async fn current_rules(
    client: &impl GenericClient,
    cache: &RulesCache,
) -> Result<Arc<LaneRules>, Error> {
    let v = version(client).await?;
    rules_at(client, cache, v).await
}

/// The rules of version `v` (cached; read when the version is new).
pub(super) async fn rules_at(
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
