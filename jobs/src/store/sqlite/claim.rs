//! Serving lanes in the claim transaction: take jobs lane by lane in round-robin order, as many
//! a turn as the lane's weight (one by default), as each lane's pace and `max_in_flight` allow,
//! charging each run to its lane's buckets. A lane's `credit` counts the jobs it was given in its
//! turn so far; its `served` stamp moves (to the back of the round) only when its turn is used up.
//! A paced run may be taken up to the claim's `ahead` before its slot, charged at its slot (see
//! [`charge_at`], where the argument that this never admits more than the quota is).

use super::lanes::{load_pace, save_pace};
use crate::error::Error;
use crate::job::{Job, ns};
use crate::pace::LanePace;
use crate::rules::LaneRules;
use crate::store::{Take, charge_at};
use rusqlite::{Connection, OptionalExtension, params};

/// The next lane to serve: ready jobs, its slot come by `?2` (the claim's `now + ahead`), not
/// paused at `?1` (by a slow-down or by hand), room under `max_in_flight`; the one served longest
/// ago first.
const CANDIDATE: &str = "SELECT lane, running, max_in_flight, credit FROM lanes \
    WHERE ready > 0 AND next_slot <= ?2 AND paused_until <= ?1 AND paused = 0 \
    AND (max_in_flight IS NULL OR running < max_in_flight) ORDER BY served, lane LIMIT 1";

/// A lane's first ready job: id, payload, attempt, key, due time.
type Head = (i64, Vec<u8>, i64, Option<String>, i64);

/// Takes up to `take.max` jobs, one per turn of the round robin, each run charged at
/// [`charge_at`] (up to `take.ahead` after `now`).
pub(super) fn claim(
    conn: &Connection,
    now: i64,
    take: &Take,
    rules: &LaneRules,
    out: &mut Vec<Job>,
) -> Result<(), Error> {
    let lease_until = now.saturating_add(ns(take.policy.lease));
    let horizon = now.saturating_add(take.ahead);
    while out.len() < take.max {
        let candidate: Option<(String, i64, Option<i64>, i64)> = conn
            .prepare_cached(CANDIDATE)?
            .query_row([now, horizon], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()?;
        let Some((lane, running, max_in_flight, credit)) = candidate else { break };
        // The lane's limit as the rules now say (another process may have published new ones).
        let limit = rules.limits(&lane).max_in_flight.map(|n| n.min(i64::MAX as u64) as i64);
        if limit != max_in_flight {
            conn.prepare_cached("UPDATE lanes SET max_in_flight = ?2 WHERE lane = ?1")?
                .execute(params![lane, limit])?;
            if limit.is_some_and(|m| running >= m) {
                continue;
            }
        }
        let (_, quotas) = rules.pace(&lane);
        let stored = load_pace(conn, &lane)?;
        let floor = rules.limits(&lane).adaptive_floor;
        let mut pace = LanePace::load(quotas, floor, &stored, now);
        let pace_slot = pace.allowed_at();
        let charged = match charge_at(now, pace_slot, take.ahead) {
            Some(at) => pace.admit(at).map(|()| at),
            None => Err(pace_slot),
        };
        let at = match charged {
            Ok(at) => at,
            Err(at) => {
                // Not yet (the cached slot was stale): remember when, and serve another lane. Levels
                // carried over from other rules are stored now, so they are carried once.
                if pace.stored() != stored {
                    save_pace(conn, &lane, &pace.stored())?;
                }
                conn.prepare_cached("UPDATE lanes SET next_slot = ?2 WHERE lane = ?1")?
                    .execute(params![lane, at])?;
                continue;
            }
        };
        let head: Option<Head> = conn
            .prepare_cached(
                "SELECT id, payload, attempt, key, run_at FROM jobs WHERE lane = ?1 AND state = 0 \
                 ORDER BY priority DESC, id LIMIT 1",
            )?
            .query_row([&lane], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .optional()?;
        let Some((id, payload, attempt, key, run_at)) = head else {
            // The counter was off (it never should be): put it right and go on.
            conn.prepare_cached("UPDATE lanes SET ready = 0 WHERE lane = ?1")?.execute([&lane])?;
            continue;
        };
        if pace.is_paced() {
            save_pace(conn, &lane, &pace.stored())?;
        }
        let attempt = attempt + 1;
        conn.prepare_cached(
            "UPDATE jobs SET state = 2, attempt = ?2, lease_until = ?3, started_at = ?4 WHERE id = ?1",
        )?
        .execute(params![id, attempt, lease_until, at])?;
        let slot = pace_slot.max(run_at);
        conn.prepare_cached("INSERT OR REPLACE INTO runs VALUES (?1, ?2, ?3, ?4, ?5)")?
            .execute(params![id, attempt, lane, slot, at])?;
        let served: i64 = conn
            .prepare_cached(
                "UPDATE counters SET value = value + 1 WHERE name = 'served' RETURNING value",
            )?
            .query_row([], |r| r.get(0))?;
        // Its turn used up: to the back of the round; else it keeps its place for the next job.
        let credit = credit.saturating_add(1);
        let (credit, stamp) =
            if credit >= rules.limits(&lane).turn() { (0, served) } else { (credit, -1) };
        conn.prepare_cached(
            "UPDATE lanes SET ready = ready - 1, running = running + 1, next_slot = ?3, \
             credit = ?4, served = CASE WHEN ?2 < 0 THEN served ELSE ?2 END WHERE lane = ?1",
        )?
        .execute(params![lane, stamp, pace.allowed_at(), credit])?;
        out.push(Job {
            id,
            lane,
            payload,
            attempt: attempt as u32,
            key,
            started_ns: at,
            slot_ns: slot,
            deadline: None,
        });
    }
    Ok(())
}
