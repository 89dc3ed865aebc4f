//! The claim transaction on PostgreSQL: the same steps as SQLite's (record outcomes and take
//! back expired leases, [`super::record`]; take jobs round-robin charging each run to its lane,
//! [`super::claim`]; say when to look again, [`outlook`]), in one transaction, with a fixed
//! number of round trips whatever the number of jobs (arrays). It waits for no lane: lanes
//! another session holds are left for a later claim.

use super::claim::{candidates, claim};
use super::lanes::{apply, lock_lanes, push_back};
use super::ops::rules_at;
use super::record::{complete, maintain};
use super::{CHANNEL, CLOCK_NS, Postgres, retrying, typed_one};
use crate::error::Error;
use crate::job::Outcome;
use crate::rules::LaneRules;
use crate::store::{Take, Taken};
use futures_util::future::try_join;
use std::collections::BTreeMap;
use tokio_postgres::GenericClient;
use tokio_postgres::types::Type;

/// The time (the caller's, `$1`, or the server's), whether anything could be taken or needs
/// maintenance then (a paced lane: its slot within `$2` ns, the claim's `ahead`), the rules' version, whether a schedule's tick is due, and whether
/// maintenance is (a lease run out, a delayed job due): one round trip.
const LOOK: &str = "WITH t AS (SELECT COALESCE($1::bigint, CLOCK) AS now) SELECT t.now, \
    EXISTS (SELECT 1 FROM lanes WHERE ready > 0 \
        AND next_slot <= t.now + LEAST($2::bigint, 9223372036854775807 - t.now) AND paused_until <= t.now \
        AND NOT paused AND (max_in_flight IS NULL OR running < max_in_flight)) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 1 AND run_at <= t.now) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 2 AND lease_until <= t.now) \
    OR EXISTS (SELECT 1 FROM schedules WHERE next_tick <= t.now), \
    COALESCE((SELECT version FROM rules WHERE id = 1), 0), \
    EXISTS (SELECT 1 FROM schedules WHERE next_tick <= t.now), \
    EXISTS (SELECT 1 FROM jobs WHERE state = 1 AND run_at <= t.now) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 2 AND lease_until <= t.now) FROM t";

impl Postgres {
    /// Records `take.completions`, maintains, and takes up to `take.max` jobs; run again on a
    /// deadlock or a serialisation failure.
    pub(crate) async fn take(&self, take: Take) -> Result<Taken, Error> {
        self.mark_seen();
        retrying!(super::retryable, self.try_take(&take).await)
    }

    async fn try_take(&self, take: &Take) -> Result<Taken, Error> {
        let mut guard = self.client().await?;
        let client = guard.as_mut().expect("connected");
        let look = LOOK.replace("CLOCK", CLOCK_NS);
        let params = [(&take.now as _, Type::INT8), (&take.ahead as _, Type::INT8)];
        if take.completions.is_empty() && take.look_first {
            // A look without locks first: nothing due, nothing to record, no transaction.
            let row = typed_one(&*client, &look, &params).await?;
            let (now, due, version): (i64, bool, i64) = (row.get(0), row.get(1), row.get(2));
            if !due && version == self.rules.version() {
                let (wake, remaining) = outlook(&*client, now, take.ahead).await?;
                return Ok(Taken { now, wake, remaining, ..Taken::default() });
            }
        }
        let tx = client.transaction().await?;
        let row = typed_one(&tx, &look, &params).await?;
        let (now, version, ticks_due): (i64, i64, bool) = (row.get(0), row.get(2), row.get(3));
        let rules = rules_at(&tx, &self.rules, version).await?;
        let mut taken = Taken { now, ..Taken::default() };
        let mut lanes = BTreeMap::new();
        // Claim first when recording can change nothing the claim reads (no tick or maintenance
        // due, no slow-down, no limit or adaptive pace in the outcomes' lanes): the clock is
        // then read one round trip after the transaction's first look, and the outcomes are
        // recorded after, in the same transaction. Otherwise, record first.
        let first = !ticks_due && !row.get::<_, bool>(4) && claim_first(take, &rules);
        if first {
            let found = candidates(&tx, now, take).await?;
            taken.claim_clock = claim(&tx, found, take, &rules, &mut taken.jobs).await?;
        }
        // The lanes to record and maintain, those another session holds left out.
        let held = lock_lanes(&tx, &take.completions, now).await?;
        let (record, deferred) =
            take.completions.iter().cloned().partition::<Vec<_>, _>(|c| held.contains(&c.lane));
        taken.deferred = deferred;
        let outcomes = complete(&tx, &record, now, &take.policy, &mut lanes, &mut taken).await?;
        // Pipelined (sent together, run in the order sent): the outcomes' rows, then
        // maintenance. A claim's round trips before its clock reading are its lateness.
        try_join(
            outcomes.write(&tx),
            maintain(&tx, now, &held, &take.policy, &mut lanes, &mut taken),
        )
        .await?;
        let candidates = if first {
            apply(&tx, &lanes).await?;
            push_back(&tx, &lanes, now, &rules, &mut taken.rates).await?;
            (vec![], None) // claimed already
        } else if ticks_due {
            apply(&tx, &lanes).await?;
            push_back(&tx, &lanes, now, &rules, &mut taken.rates).await?;
            // Only then: the ticks' jobs are claimable in this transaction.
            taken.ticked = super::schedules::fire(&tx, now, &rules).await?;
            candidates(&tx, now, take).await?
        } else {
            // Pipelined: the counters (a slow-down's pause, the runs that ended), then the lanes
            // to serve, locked, and the clock. A slow-down's buckets are pushed back after, still
            // before any is read ([`claim`] loads them).
            let ((), found) = try_join(apply(&tx, &lanes), candidates(&tx, now, take)).await?;
            push_back(&tx, &lanes, now, &rules, &mut taken.rates).await?;
            found
        };
        if !first {
            taken.claim_clock = claim(&tx, candidates, take, &rules, &mut taken.jobs).await?;
        }
        (taken.wake, taken.remaining) = outlook(&tx, now, take.ahead).await?;
        // Wake other workers when a limited lane has room again, or the queue is empty.
        let freed = lanes
            .iter()
            .any(|(lane, d)| d.running < 0 && rules.limits(lane).max_in_flight.is_some());
        if freed || taken.ticked > 0 || (taken.remaining == 0 && !record.is_empty()) {
            tx.batch_execute(&format!("NOTIFY {CHANNEL}")).await?;
        }
        tx.commit().await?;
        Ok(taken)
    }
}

/// Whether none of `take`'s outcomes changes what a claim in the same transaction reads: no
/// slow-down (a pause, pushed-back buckets), and none in a lane with `max_in_flight` (room
/// freed) or an adaptive pace (a recovery).
fn claim_first(take: &Take, rules: &LaneRules) -> bool {
    take.completions.iter().all(|c| {
        let limits = rules.limits(&c.lane);
        !matches!(c.outcome, Outcome::SlowDown(_))
            && limits.max_in_flight.is_none()
            && limits.adaptive_floor.is_none()
    })
}

/// When something may next become takeable by a claim that looks `ahead` ns ahead (a paced
/// lane: that long before its slot), and how many jobs are waiting or running.
async fn outlook(
    client: &impl GenericClient,
    now: i64,
    ahead: i64,
) -> Result<(Option<i64>, i64), Error> {
    let row = typed_one(
        client,
        "SELECT (SELECT MIN(GREATEST(next_slot - $1, paused_until)) FROM lanes WHERE ready > 0 AND NOT paused \
                     AND (max_in_flight IS NULL OR running < max_in_flight)), \
                    (SELECT MIN(run_at) FROM jobs WHERE state = 1), \
                    (SELECT MIN(lease_until) FROM jobs WHERE state = 2), \
                    (SELECT COALESCE(SUM(ready + scheduled + running), 0)::bigint FROM lanes), \
                    (SELECT MIN(next_tick) FROM schedules)",
        &[(&ahead, Type::INT8)],
    )
    .await?;
    let (slot, due, lease, tick): (Option<i64>, Option<i64>, Option<i64>, Option<i64>) =
        (row.get(0), row.get(1), row.get(2), row.get(4));
    let wake = [slot, due, lease, tick].into_iter().flatten().min().map(|t| t.max(now));
    Ok((wake, row.get(3)))
}
