//! Cancelling jobs and pausing lanes on PostgreSQL. As every operation that changes counters,
//! a cancel locks the jobs' lanes first, in lane order, then the jobs: the order a claim takes.

use super::{CHANNEL, Postgres, now, retrying};
use crate::error::Error;
use std::collections::BTreeMap;

impl Postgres {
    /// Cancels jobs `ids` (see the SQLite store's `cancel`).
    pub(crate) async fn cancel(&self, ids: Vec<i64>, caller: Option<i64>) -> Result<u64, Error> {
        retrying!(self.try_cancel(&ids, caller).await)
    }

    async fn try_cancel(&self, ids: &[i64], caller: Option<i64>) -> Result<u64, Error> {
        let mut guard = self.client().await?;
        let tx = guard.as_mut().expect("connected").transaction().await?;
        let now = now(&tx, caller).await?;
        let found: Vec<i64> = tx
            .query("SELECT id FROM jobs WHERE id = ANY($1)", &[&ids])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if let Some(&missing) = ids.iter().find(|id| !found.contains(id)) {
            return Err(Error::UnknownJob(missing));
        }
        tx.query(
            "SELECT lane FROM lanes WHERE lane IN (SELECT lane FROM jobs WHERE id = ANY($1)) \
             ORDER BY lane FOR UPDATE",
            &[&ids],
        )
        .await?;
        let rows = tx
            .query(
                "WITH old AS (SELECT id, lane, state FROM jobs WHERE id = ANY($1) AND state IN (0, 1, 2) \
                     FOR UPDATE) \
                 UPDATE jobs j SET state = 5, lease_until = NULL, finished_at = $2, last_error = 'cancelled' \
                 FROM old WHERE j.id = old.id RETURNING old.lane, old.state",
                &[&ids, &now],
            )
            .await?;
        // Per lane: (ready, scheduled, running) cancelled.
        let mut lanes: BTreeMap<String, [i64; 3]> = BTreeMap::new();
        for row in &rows {
            let state: i16 = row.get(1);
            lanes.entry(row.get(0)).or_default()[state.clamp(0, 2) as usize] += 1;
        }
        let names: Vec<&str> = lanes.keys().map(String::as_str).collect();
        let col = |i: usize| lanes.values().map(|c| c[i]).collect::<Vec<i64>>();
        tx.execute(
            "UPDATE lanes l SET ready = l.ready - d.r, scheduled = l.scheduled - d.s, \
             running = l.running - d.u, cancelled = l.cancelled + d.r + d.s + d.u \
             FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS d(lane, r, s, u) \
             WHERE l.lane = d.lane",
            &[&names, &col(0), &col(1), &col(2)],
        )
        .await?;
        tx.commit().await?;
        Ok(rows.len() as u64)
    }

    /// Pauses or resumes a lane; a lane never seen refuses.
    pub(crate) async fn pause(&self, lane: String, paused: bool) -> Result<(), Error> {
        retrying!(self.try_pause(&lane, paused).await)
    }

    async fn try_pause(&self, lane: &str, paused: bool) -> Result<(), Error> {
        let mut guard = self.client().await?;
        let tx = guard.as_mut().expect("connected").transaction().await?;
        let n =
            tx.execute("UPDATE lanes SET paused = $2 WHERE lane = $1", &[&lane, &paused]).await?;
        if n == 0 {
            return Err(Error::UnknownLane(lane.to_string()));
        }
        if !paused {
            tx.batch_execute(&format!("NOTIFY {CHANNEL}")).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Which of `ids` are cancelled.
    pub(crate) async fn cancelled_among(&self, ids: Vec<i64>) -> Result<Vec<i64>, Error> {
        let guard = self.client().await?;
        let rows = guard
            .as_ref()
            .expect("connected")
            .query("SELECT id FROM jobs WHERE id = ANY($1) AND state = 5", &[&ids])
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
