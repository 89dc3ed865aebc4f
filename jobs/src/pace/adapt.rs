//! An adaptive lane's rate: a "slow down" backs each bucket off, done jobs bring it back.
//!
//! The steps are [`leakgate::AdaptiveRate`]'s ([`AdaptiveRate::backed_off`],
//! [`AdaptiveRate::recovered`], [`AdaptiveRate::scaled`]), applied to state kept in the bucket's
//! row instead of in one process, so that every worker on the database runs the lane at the same
//! rate: a slow-down halves each bucket's count a period (at most once a period of its quota: one
//! burst of complaints is one overload), never below the rule's floor; each done job adds a
//! twentieth of the quota's count, never above it. The quota in force is the rule's quota scaled
//! to that count (same period, burst scaled alike), charged exactly as any quota is; a change of
//! it carries the bucket's level as a change of rules does (no units handed out).

use super::{Bucket, LanePace, StoredBucket, carry, ns_at, units_at};
use leakgate::{AdaptiveRate, ExactRate, Quota};

/// A row's adaptation under `ceiling` (the rule's quota) with `floor`: the count in force
/// (`None`: the ceiling) and the last back-off. A row adapted under another period is not
/// (the rule changed under it); a count outside `[floor, count]` is clamped into it.
pub(super) fn from_row(
    ceiling: &Quota,
    floor: u64,
    row: &StoredBucket,
) -> (Option<u64>, Option<i64>) {
    let same_period = u128::from(row.period_ns.max(0) as u64) == ceiling.period().as_nanos();
    let adapted = (row.adapted > 0 && same_period)
        .then(|| clamp(row.adapted as u64, ceiling, floor))
        .filter(|&n| n < ceiling.count());
    (adapted, row.backoff_ns)
}

/// The exact rate of `ceiling` at `adapted` a period (the ceiling itself when `None`).
pub(super) fn rate(ceiling: &Quota, adapted: Option<u64>) -> ExactRate {
    // `scaled` builds any count from 1 to the ceiling's (a smaller rate of the same period); the
    // ceiling is only the fallback of an error that cannot happen.
    let quota = adapted.and_then(|n| AdaptiveRate::scaled(ceiling, n).ok()).unwrap_or(*ceiling);
    ExactRate::new(quota)
}

/// `n` within `[floor, count]` of `ceiling` (a floor above the count is the count).
fn clamp(n: u64, ceiling: &Quota, floor: u64) -> u64 {
    let count = ceiling.count();
    n.clamp(floor.clamp(1, count), count)
}

impl LanePace {
    /// A "slow down" at `now`: an adaptive lane's buckets back off, each at most once a period
    /// of its quota. A lane that does not adapt is unchanged (the caller's pause still holds).
    pub(crate) fn back_off(&mut self, now: i64) {
        let Some(floor) = self.floor else { return };
        for b in &mut self.buckets {
            let period = i64::try_from(b.ceiling.period().as_nanos()).unwrap_or(i64::MAX);
            // A clock that went backwards counts as a new period only once it is a period on.
            let recent = b.backoff_ns.is_some_and(|t| now >= t && now - t < period);
            if recent {
                continue;
            }
            b.backoff_ns = Some(now);
            let current = b.adapted.unwrap_or(b.ceiling.count());
            set_count(b, clamp(AdaptiveRate::backed_off(current), &b.ceiling, floor), now);
        }
    }

    /// `done` jobs finished in an adaptive lane: each adapted bucket recovers a step per job.
    /// Answers whether any bucket changed.
    pub(crate) fn recover(&mut self, done: u64, now: i64) -> bool {
        if self.floor.is_none() {
            return false;
        }
        let mut changed = false;
        for b in &mut self.buckets {
            let Some(mut n) = b.adapted else { continue };
            let count = b.ceiling.count();
            // At most 21 steps reach the ceiling (each is a twentieth of it, at least 1 when
            // the count is under 20), so the loop is short whatever `done` is.
            for _ in 0..done {
                n = AdaptiveRate::recovered(n, count);
                if n >= count {
                    break;
                }
            }
            set_count(b, n, now);
            changed = true;
        }
        changed
    }

    /// The first quota in force, a second (what the rate gauge shows), if paced.
    pub(crate) fn per_second(&self) -> Option<f64> {
        self.first_quota().map(|q| q.count() as f64 * 1e9 / q.period().as_nanos() as f64)
    }

    /// The first quota in force (the rule's, or its adapted one), if paced.
    pub(crate) fn first_quota(&self) -> Option<Quota> {
        self.buckets.first().map(|b| b.rate.quota())
    }
}

/// Moves `b` to `n` a period of its ceiling, its level carried to the new rate at `now`; its
/// next run is never made earlier by the change (a Retry-After's hold outlasts a recovery).
fn set_count(b: &mut Bucket, n: u64, now: i64) {
    let row = StoredBucket::new(&b.rate, b.tat);
    let next = ns_at(&b.rate, b.allowed());
    b.adapted = (n < b.ceiling.count()).then_some(n);
    b.rate = rate(&b.ceiling, b.adapted);
    b.tat = carry(&b.rate, &row, now);
    // Full at `next` (as `push_back` makes it) at the least: nothing conforms before it.
    let full = units_at(&b.rate, next).saturating_add(b.rate.tau() - b.rate.interval());
    b.tat = b.tat.max(full);
}
