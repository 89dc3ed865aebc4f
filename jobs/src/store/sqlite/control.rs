//! Cancelling jobs and pausing lanes on SQLite (the file's write lock, taken by `BEGIN
//! IMMEDIATE`, covers the jobs and their lanes' counters).

use super::lanes::bump;
use super::now;
use crate::error::Error;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// Cancels jobs `ids`: waiting or running ones go to state 5 (a running one's lease is gone with
/// it, so its worker stops the run at its next renewal and records nothing); done, dead and
/// cancelled ones are left as they are. An id not in the database refuses the whole call.
/// Answers how many were cancelled.
pub(crate) fn cancel(
    conn: &mut Connection,
    ids: &[i64],
    caller: Option<i64>,
) -> Result<u64, Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now(caller);
    let mut n = 0;
    for &id in ids {
        let row: Option<(String, i64)> = tx
            .prepare_cached("SELECT lane, state FROM jobs WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let Some((lane, state)) = row else { return Err(Error::UnknownJob(id)) };
        let counter = match state {
            0 => "ready",
            1 => "scheduled",
            2 => "running",
            _ => continue,
        };
        tx.prepare_cached(
            "UPDATE jobs SET state = 5, lease_until = NULL, finished_at = ?2, \
             last_error = 'cancelled' WHERE id = ?1",
        )?
        .execute(params![id, now])?;
        bump(&tx, &lane, &[(counter, -1), ("cancelled", 1)])?;
        n += 1;
    }
    tx.commit()?;
    Ok(n)
}

/// Pauses (`paused`) or resumes a lane; a lane never seen refuses.
pub(crate) fn pause(conn: &mut Connection, lane: &str, paused: bool) -> Result<(), Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let n = tx.execute("UPDATE lanes SET paused = ?2 WHERE lane = ?1", params![lane, paused])?;
    if n == 0 {
        return Err(Error::UnknownLane(lane.to_string()));
    }
    tx.commit()?;
    Ok(())
}

/// Which of `ids` are cancelled.
pub(crate) fn cancelled_among(conn: &mut Connection, ids: &[i64]) -> Result<Vec<i64>, Error> {
    let mut out = Vec::new();
    for &id in ids {
        let state: Option<i64> = conn
            .prepare_cached("SELECT state FROM jobs WHERE id = ?1")?
            .query_row([id], |r| r.get(0))
            .optional()?;
        if state == Some(5) {
            out.push(id);
        }
    }
    Ok(out)
}
