//! Reading the queue on PostgreSQL: lane status, dead jobs, runs.

use super::Postgres;
use super::now;
use crate::error::Error;
use crate::job::{since, to_time};
use crate::status::{DeadJob, LaneStatus, Run};

impl Postgres {
    /// Every lane's counts, oldest waiting job, next slot and runs in the last minute.
    pub(crate) async fn status(&self, caller: Option<i64>) -> Result<Vec<LaneStatus>, Error> {
        let mut guard = self.client().await?;
        let tx =
            guard.as_mut().expect("connected").build_transaction().read_only(true).start().await?;
        let now = now(&tx, caller).await?;
        let rows = tx
            .query(
                "SELECT l.lane, l.ready, l.scheduled, l.running, l.dead, l.done, \
                        GREATEST(l.next_slot, l.paused_until), \
                        (SELECT MIN(added_at) FROM jobs j WHERE j.lane = l.lane AND j.state IN (0, 1)), \
                        (SELECT COUNT(*) FROM runs r WHERE r.lane = l.lane AND r.started_at > $1), \
                        l.cancelled, l.paused \
                 FROM lanes l ORDER BY l.lane",
                &[&(now - 60_000_000_000)],
            )
            .await?;
        tx.commit().await?;
        Ok(rows
            .iter()
            .map(|r| {
                let n = |i: usize| r.get::<_, i64>(i).max(0) as u64;
                let slot: i64 = r.get(6);
                let oldest: Option<i64> = r.get(7);
                LaneStatus {
                    lane: r.get(0),
                    ready: n(1),
                    scheduled: n(2),
                    running: n(3),
                    dead: n(4),
                    done: n(5),
                    cancelled: n(9),
                    paused: r.get(10),
                    oldest_waiting: oldest.map(|t| since(now, t)),
                    next_slot_in: (slot > now).then(|| since(slot, now)),
                    runs_last_minute: n(8),
                    rule: None,
                    rule_per_minute: None,
                    pace_per_minute: None,
                }
            })
            .collect())
    }

    /// Dead jobs (of `lane`, or all), oldest first, at most `limit`.
    pub(crate) async fn dead(
        &self,
        lane: Option<String>,
        limit: i64,
    ) -> Result<Vec<DeadJob>, Error> {
        let guard = self.client().await?;
        let rows = guard
            .as_ref()
            .expect("connected")
            .query(
                "SELECT id, lane, payload, key, attempt, COALESCE(last_error, ''), COALESCE(finished_at, 0) \
                 FROM jobs WHERE state = 4 AND ($1::text IS NULL OR lane = $1) ORDER BY id LIMIT $2",
                &[&lane, &limit],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| DeadJob {
                id: r.get(0),
                lane: r.get(1),
                payload: r.get(2),
                key: r.get(3),
                attempts: r.get::<_, i64>(4) as u32,
                error: r.get(5),
                died: to_time(r.get(6)),
            })
            .collect())
    }

    /// Every recorded run of `lane`, by start.
    pub(crate) async fn runs(&self, lane: String) -> Result<Vec<Run>, Error> {
        let guard = self.client().await?;
        let rows = guard
            .as_ref()
            .expect("connected")
            .query(
                "SELECT job, attempt, started_at, slot FROM runs WHERE lane = $1 ORDER BY started_at, job, attempt",
                &[&lane],
            )
            .await?;
        Ok(rows.iter().map(run).collect())
    }

    /// The latest `limit` runs of `lane`, by start (the index on `(lane, started_at)` finds them).
    pub(crate) async fn recent_runs(&self, lane: String, limit: i64) -> Result<Vec<Run>, Error> {
        let guard = self.client().await?;
        let rows = guard
            .as_ref()
            .expect("connected")
            .query(
                "SELECT job, attempt, started_at, slot FROM runs WHERE lane = $1 \
                 ORDER BY started_at DESC, job DESC, attempt DESC LIMIT $2",
                &[&lane, &limit],
            )
            .await?;
        let mut runs: Vec<Run> = rows.iter().map(run).collect();
        runs.reverse();
        Ok(runs)
    }
}

/// A run from a row of `SELECT job, attempt, started_at, slot FROM runs`.
fn run(r: &tokio_postgres::Row) -> Run {
    Run {
        job: r.get(0),
        attempt: r.get::<_, i64>(1) as u32,
        started_ns: r.get(2),
        slot_ns: r.get(3),
    }
}
