//! The claim transaction on SQLite: in one `BEGIN IMMEDIATE` transaction, record finished runs
//! and take back expired leases ([`super::record`]), then take jobs lane by lane in round-robin
//! order, charging each run to its lane's buckets ([`super::claim`]), and say when to look
//! again ([`outlook`]).

use super::claim::claim;
use super::now;
use super::ops::{current_rules, version};
use super::record::{complete, maintain};
use super::schedules::fire;
use crate::error::Error;
use crate::store::{RulesCache, Take, Taken};
use rusqlite::{Connection, TransactionBehavior};

/// Whether anything could be taken or needs maintenance at `?1` (a paced lane: its slot by
/// `?2`, the claim's horizon `now + ahead`).
const ANYTHING_DUE: &str = "SELECT EXISTS (SELECT 1 FROM lanes WHERE ready > 0 AND next_slot <= ?2 \
    AND paused_until <= ?1 AND paused = 0 AND (max_in_flight IS NULL OR running < max_in_flight)) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 1 AND run_at <= ?1) \
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 2 AND lease_until <= ?1) \
    OR EXISTS (SELECT 1 FROM schedules WHERE next_tick <= ?1)";

/// Records `take.completions`, maintains, and takes up to `take.max` jobs.
pub(crate) fn take(conn: &mut Connection, take: &Take, cache: &RulesCache) -> Result<Taken, Error> {
    if take.completions.is_empty() && take.look_first {
        // A look before taking the write lock: with nothing to record and nothing due, other
        // processes are not held up by a write transaction that would do nothing.
        let now = now(take.now);
        let horizon = now.saturating_add(take.ahead);
        let due: bool =
            conn.prepare_cached(ANYTHING_DUE)?.query_row([now, horizon], |r| r.get(0))?;
        let rules_moved = version(conn)? != cache.version();
        if !due && !rules_moved {
            let (wake, remaining) = outlook(conn, now, take.ahead)?;
            return Ok(Taken { now, wake, remaining, ..Taken::default() });
        }
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Read after the write lock is held: transactions are ordered as their times.
    let now = now(take.now);
    let read = std::time::Instant::now();
    let rules = current_rules(&tx, cache)?;
    let mut taken = Taken { now, ..Taken::default() };
    complete(&tx, &take.completions, now, &take.policy, &rules, &mut taken)?;
    maintain(&tx, now, &take.policy, &mut taken)?;
    taken.ticked = fire(&tx, now, &rules)?;
    claim(&tx, now, take, &rules, &mut taken.jobs)?;
    taken.claim_clock = Some((now, read));
    (taken.wake, taken.remaining) = outlook(&tx, now, take.ahead)?;
    tx.commit()?;
    Ok(taken)
}

/// When something may next become takeable by a claim that looks `ahead` ns ahead (a paced
/// lane: that long before its slot), and how many jobs are waiting or running.
fn outlook(conn: &Connection, now: i64, ahead: i64) -> Result<(Option<i64>, i64), Error> {
    let (slot, due, lease, remaining, tick): (Option<i64>, Option<i64>, Option<i64>, i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT (SELECT MIN(MAX(next_slot - ?1, paused_until)) FROM lanes WHERE ready > 0 AND paused = 0 \
                     AND (max_in_flight IS NULL OR running < max_in_flight)), \
                    (SELECT MIN(run_at) FROM jobs WHERE state = 1), \
                    (SELECT MIN(lease_until) FROM jobs WHERE state = 2), \
                    (SELECT COALESCE(SUM(ready + scheduled + running), 0) FROM lanes), \
                    (SELECT MIN(next_tick) FROM schedules)",
        )?
        .query_row([ahead], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
    let wake = [slot, due, lease, tick].into_iter().flatten().min().map(|t| t.max(now));
    Ok((wake, remaining))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a paused lane with ready jobs once made the outlook answer "due now", and a
    /// worker then claimed every millisecond for as long as the lane stayed paused.
    #[test]
    fn a_paused_lane_is_neither_due_nor_a_wake_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("q.db")).unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        conn.execute_batch("INSERT INTO lanes (lane, ready, paused) VALUES ('mail', 1, 1)")
            .unwrap();
        let due: bool = conn.query_row(ANYTHING_DUE, [5, 5], |r| r.get(0)).unwrap();
        assert!(!due);
        assert_eq!(outlook(&conn, 5, 0).unwrap(), (None, 1), "no wake-up; the job still counts");
        conn.execute_batch("UPDATE lanes SET paused = 0").unwrap();
        assert_eq!(outlook(&conn, 5, 0).unwrap(), (Some(5), 1));
    }
}
