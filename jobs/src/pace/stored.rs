//! A bucket as a row of the `pace` table, and the clock readings the stores give, in the exact
//! units of [`leakgate::ExactRate`].
//!
//! A row names the quota it was charged under (count, period, burst) and holds its TAT split in
//! two integers, `tat_ns = TAT div D` and `tat_frac = TAT mod D` ([`ExactRate::split_ns`]), so
//! that the database keeps plain `BIGINT`s (`D <= 2^62`: the fraction fits) and a person reading
//! the table sees nanoseconds since the Unix epoch. Times are `i64` nanoseconds as the databases
//! hold them: a negative one counts as 0, and one past `i64::MAX` is stored as `i64::MAX`.

use leakgate::{ExactRate, Quota};
use std::time::Duration;

/// A bucket as a row of the `pace` table: the quota it was charged under and its TAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StoredBucket {
    /// The quota's count, period (ns) and burst; `u64`s kept bit for bit in `BIGINT`s.
    pub(crate) count: i64,
    pub(crate) period_ns: i64,
    pub(crate) burst: i64,
    /// The TAT: `tat_ns + tat_frac / D` ns since the epoch, `0 <= tat_frac < D`.
    pub(crate) tat_ns: i64,
    pub(crate) tat_frac: i64,
    /// An adaptive lane's count in force a period of its rule's quota (below that quota's
    /// count), 0 when at the quota.
    pub(crate) adapted: i64,
    /// When that lane last backed off (ns), `None` if never.
    pub(crate) backoff_ns: Option<i64>,
}

impl StoredBucket {
    /// The row of a bucket of `rate` whose TAT is `tat` units (saturating at `i64::MAX` ns).
    pub(crate) fn new(rate: &ExactRate, tat: u128) -> StoredBucket {
        let quota = rate.quota();
        let (whole, frac) = rate.split_ns(tat);
        let (tat_ns, tat_frac) = match i64::try_from(whole) {
            Ok(ns) => (ns, frac as i64),
            Err(_) => (i64::MAX, 0),
        };
        StoredBucket {
            count: quota.count() as i64,
            period_ns: quota.period().as_nanos() as i64,
            burst: quota.burst() as i64,
            tat_ns,
            tat_frac,
            adapted: 0,
            backoff_ns: None,
        }
    }

    /// Whether the row was charged under `rate`'s count and period: its TAT is in `rate`'s
    /// units.
    pub(crate) fn counts_in(&self, rate: &ExactRate) -> bool {
        let quota = rate.quota();
        self.count as u64 == quota.count()
            && u128::from(self.period_ns as u64) == quota.period().as_nanos()
    }

    /// The row's TAT in the units of `rate`, which it was charged under (negative fields count
    /// as 0; a fraction past `D` as `D - 1`).
    pub(crate) fn tat(&self, rate: &ExactRate) -> u128 {
        rate.join_ns(self.tat_ns.max(0) as u64, self.tat_frac.max(0) as u64)
    }

    /// The rate the row was charged under; `None` for a row no valid quota wrote.
    pub(crate) fn rate(&self) -> Option<ExactRate> {
        let period = Duration::from_nanos(self.period_ns as u64);
        let quota = Quota::new(self.count as u64, period, (self.burst as u64).max(1)).ok()?;
        Some(ExactRate::new(quota))
    }
}

/// A clock reading (ns since the epoch; a negative one counts as 0) in `rate`'s units.
pub(crate) fn units_at(rate: &ExactRate, ns: i64) -> u128 {
    rate.ns_to_units(ns.max(0) as u64)
}

/// Units as the first clock reading at or after them (saturating at `i64::MAX`).
pub(crate) fn ns_at(rate: &ExactRate, units: u128) -> i64 {
    i64::try_from(rate.units_to_ns_ceil(units)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(text: &str) -> ExactRate {
        ExactRate::new(text.parse().unwrap())
    }

    #[test]
    fn a_row_holds_whole_nanoseconds_and_the_rest() {
        let r = rate("3/s");
        let tat = r.interval() + units_at(&r, 5);
        let row = StoredBucket::new(&r, tat);
        assert_eq!((row.count, row.period_ns, row.burst), (3, 1_000_000_000, 3));
        assert_eq!((row.tat_ns, row.tat_frac), (333_333_338, 1));
        assert_eq!(row.tat(&r), tat);
        assert!(row.counts_in(&r) && !row.counts_in(&rate("3/2s")));
        assert_eq!(row.rate(), Some(r));
        assert_eq!(ns_at(&r, r.interval()), 333_333_334);
    }

    #[test]
    fn stored_fields_saturate_instead_of_wrapping() {
        let r = rate("3/s");
        let row = StoredBucket::new(&r, u128::MAX);
        assert_eq!((row.tat_ns, row.tat_frac), (i64::MAX, 0));
        let bad = StoredBucket { tat_ns: -5, tat_frac: -1, ..row };
        assert_eq!(bad.tat(&r), 0);
        let past = StoredBucket { tat_ns: 0, tat_frac: 99, ..row };
        assert_eq!(past.tat(&r), 2, "a frac past D is read as D - 1");
        assert_eq!((units_at(&r, -7), ns_at(&r, u128::MAX)), (0, i64::MAX));
        assert_eq!(StoredBucket { count: 0, ..row }.rate(), None);
    }
}
