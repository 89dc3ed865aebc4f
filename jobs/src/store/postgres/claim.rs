//! The claim on PostgreSQL: the same steps as SQLite's (record outcomes, take back expired
//! leases, promote due jobs, take jobs round-robin charging each run to its lane), in one
//! transaction, with a fixed number of round trips whatever the number of jobs (arrays).
//! It waits for no lane: lanes another session holds are left for a later claim.

use super::record::{apply, complete, lock_lanes, maintain};
use super::serve::claim;
use super::{CHANNEL, CLOCK_NS, Postgres, retrying, typed_one};
use crate::error::Error;
use crate::rules::LaneRules;
use crate::store::{RulesCache, Take, Taken};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

/// The time (the caller's, `$1`, or the server's), whether anything could be taken or needs
/// maintenance then, and the rules' version: one round trip.
const LOOK: &str = "WITH t AS (SELECT COALESCE($1::bigint, CLOCK) AS now) SELECT t.now, \
    EXISTS (SELECT 1 FROM lanes WHERE ready > 0 AND next_slot <= t.now AND paused_until <= t.now \
        AND (max_in_flight IS NULL OR running < max_in_flight)) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 1 AND run_at <= t.now) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 2 AND lease_until <= t.now), \
    COALESCE((SELECT version FROM rules WHERE id = 1), 0) FROM t";
impl Postgres {
    pub(crate) async fn take(&self, take: Take) -> Result<Taken, Error> {
        self.mark_seen();
        retrying!(super::retryable, self.try_take(&take).await)
    }

    async fn try_take(&self, take: &Take) -> Result<Taken, Error> {
        let mut guard = self.client().await?;
        let client = guard.as_mut().expect("connected");
        let look = LOOK.replace("CLOCK", CLOCK_NS);
        if take.completions.is_empty() && take.look_first {
            // A look without locks first: nothing due, nothing to record, no transaction.
            let row = typed_one(&*client, &look, &[(&take.now, Type::INT8)]).await?;
            let (now, due, version): (i64, bool, i64) = (row.get(0), row.get(1), row.get(2));
            if !due && version == self.rules.version() {
                let (wake, remaining) = outlook(&*client, now).await?;
                return Ok(Taken { now, wake, remaining, ..Taken::default() });
            }
        }
        let tx = client.transaction().await?;
        let row = typed_one(&tx, &look, &[(&take.now, Type::INT8)]).await?;
        let (now, version): (i64, i64) = (row.get(0), row.get(2));
        let rules = rules_at(&tx, &self.rules, version).await?;
        let mut taken = Taken { now, ..Taken::default() };
        let mut lanes = BTreeMap::new();
        // The lanes to record and maintain, those another session holds left out.
        let held = lock_lanes(&tx, &take.completions, now).await?;
        let (record, deferred) =
            take.completions.iter().cloned().partition::<Vec<_>, _>(|c| held.contains(&c.lane));
        taken.deferred = deferred;
        complete(&tx, &record, now, &take.policy, &mut lanes, &mut taken).await?;
        maintain(&tx, now, &held, &take.policy, &mut lanes, &mut taken).await?;
        apply(&tx, &lanes, now, &rules).await?;
        claim(&tx, now, take, &rules, &mut taken.jobs).await?;
        (taken.wake, taken.remaining) = outlook(&tx, now).await?;
        // Wake other workers when a limited lane has room again, or the queue is empty.
        let freed = lanes
            .iter()
            .any(|(lane, d)| d.running < 0 && rules.limits(lane).max_in_flight.is_some());
        if freed || (taken.remaining == 0 && !record.is_empty()) {
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
        None => Ok(typed_one(client, &format!("SELECT {CLOCK_NS}"), &[]).await?.get(0)),
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
/// When something may next become takeable, and how many jobs are waiting or running.
pub(crate) async fn outlook(
    client: &impl GenericClient,
    now: i64,
) -> Result<(Option<i64>, i64), Error> {
    let row = typed_one(
        client,
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
