//! A lane's pace: its buckets, one per quota of its rule, each a TAT stored beside the jobs.
//!
//! The GCRA meaning is the core's (see `leakgate`'s CONTRACT and [`leakgate::Quota`]): a run of
//! cost 1 at time `t` conforms to a bucket iff `max(TAT, t) + T - t <= tau`, and then
//! `TAT := max(TAT, t) + T`; a lane with several quotas charges every bucket or none. Everything
//! here is pure: the stores load the stored buckets in the claiming transaction, ask this module,
//! and write back what it says. Time is nanoseconds since the Unix epoch (the database's clock).
//!
//! An adaptive lane (`adaptive = true` in its rule) runs each bucket at an adapted count a period
//! of its quota (the ceiling), stored in the bucket's row: see `adapt.rs`.

mod adapt;
mod stored;

use leakgate::{ExactRate, Quota};
pub(crate) use stored::StoredBucket;
use stored::{ns_at, units_at};

/// One bucket, loaded: the quota in force (the rule's, or its adapted one) in exact units (see
/// [`leakgate::ExactRate`]), its TAT in them, and its adaptation.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    rate: ExactRate,
    tat: u128,
    /// The rule's quota: the most the bucket ever runs at.
    ceiling: Quota,
    /// The adapted count a period of `ceiling` (below its count), `None` at the ceiling.
    adapted: Option<u64>,
    /// The clock reading of the last back-off, for "once a period".
    backoff_ns: Option<i64>,
}

impl Bucket {
    /// The first state boundary at which one more run conforms: `TAT + T - tau`, in units.
    fn allowed(&self) -> u128 {
        (self.tat + self.rate.interval()).saturating_sub(self.rate.tau())
    }
}

/// A lane's buckets under its current rule (none: the lane is not paced).
#[derive(Clone, Debug)]
pub(crate) struct LanePace {
    buckets: Vec<Bucket>,
    /// The rule's `adaptive_floor` (`None`: the lane does not adapt).
    floor: Option<u64>,
}

impl LanePace {
    /// The buckets of a lane whose rule has `quotas` (and adapts down to `floor`, if given),
    /// from the rows stored for it (by index).
    ///
    /// A bucket runs at its row's adapted count when the lane adapts and the row's was adapted
    /// from a quota of the same period (clamped to `[floor, count]`); else at its rule's quota.
    /// A row charged under the quota in force is taken as is; a row of another quota keeps the
    /// units it could admit (its burst less its level `(TAT - now) / T`), capped at the new
    /// burst, as [`leakgate::RuleLimiter::reload`] does (see [`ExactRate::carry_backlog`]: no
    /// change of rules or of adapted rate hands out units); a quota with no row starts empty.
    pub(crate) fn load(
        quotas: &[Quota],
        floor: Option<u64>,
        stored: &[StoredBucket],
        now: i64,
    ) -> LanePace {
        let buckets = quotas
            .iter()
            .enumerate()
            .map(|(i, ceiling)| {
                let row = stored.get(i);
                let (adapted, backoff_ns) = match (floor, row) {
                    (Some(floor), Some(row)) => adapt::from_row(ceiling, floor, row),
                    _ => (None, None),
                };
                let rate = adapt::rate(ceiling, adapted);
                let tat = row.map_or(0, |row| carry(&rate, row, now));
                Bucket { rate, tat, ceiling: *ceiling, adapted, backoff_ns }
            })
            .collect();
        LanePace { buckets, floor }
    }

    /// Whether the lane has any bucket.
    pub(crate) fn is_paced(&self) -> bool {
        !self.buckets.is_empty()
    }

    /// The first clock reading (ns) at which one more run conforms to every bucket (0 when
    /// unpaced).
    pub(crate) fn allowed_at(&self) -> i64 {
        self.buckets.iter().map(|b| ns_at(&b.rate, b.allowed())).max().unwrap_or(0)
    }

    /// Charges one run at `now` to every bucket if it conforms to all of them; otherwise
    /// changes nothing and returns the first reading at which it would.
    pub(crate) fn admit(&mut self, now: i64) -> Result<(), i64> {
        let allowed = self.allowed_at();
        if now < allowed {
            return Err(allowed);
        }
        for b in &mut self.buckets {
            b.tat = b.tat.max(units_at(&b.rate, now)).saturating_add(b.rate.interval());
        }
        Ok(())
    }

    /// "Slow down": no run before `until`, and then none of the burst either: every bucket is
    /// made full at `until` (`TAT >= until + tau - T`), so the lane resumes at its steady rate.
    pub(crate) fn push_back(&mut self, until: i64) {
        for b in &mut self.buckets {
            let full = units_at(&b.rate, until).saturating_add(b.rate.tau() - b.rate.interval());
            b.tat = b.tat.max(full);
        }
    }

    /// The rows to store, one per quota, in order.
    pub(crate) fn stored(&self) -> Vec<StoredBucket> {
        self.buckets
            .iter()
            .map(|b| StoredBucket {
                adapted: b.adapted.map_or(0, |n| n as i64),
                backoff_ns: b.backoff_ns,
                ..StoredBucket::new(&b.rate, b.tat)
            })
            .collect()
    }
}

/// A stored row's TAT in `rate`'s units (see [`LanePace::load`]).
fn carry(rate: &ExactRate, row: &StoredBucket, now: i64) -> u128 {
    let now_units = units_at(rate, now);
    let full = now_units.saturating_add(rate.tau());
    if row.counts_in(rate) && row.burst as u64 == rate.quota().burst() {
        // The same quota: kept exactly, even past `now + tau` (a clock that went backwards must
        // not hand out a fresh burst).
        return row.tat(rate);
    }
    let Some(old) = row.rate() else {
        return full; // an unreadable row: the safe side is a full bucket
    };
    let backlog = row.tat(&old).saturating_sub(units_at(&old, now));
    now_units.saturating_add(old.carry_backlog(backlog, rate))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "adapt_tests.rs"]
mod adapt_tests;

#[cfg(test)]
#[path = "ahead_tests.rs"]
mod ahead_tests;
