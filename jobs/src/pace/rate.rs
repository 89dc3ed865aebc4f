//! A quota in the units its bucket is stored in: exact fractions of a nanosecond.
//!
//! # Implementation details
//!
//! The core (`leakgate`'s `gcra.rs`) counts time in units of `T / S` and keeps its state in one
//! `u64`; a stored bucket has no such constraint, so this crate counts in units of `1/D` ns with
//! `D = count / gcd(count, period_ns)`, the quota's own denominator. Then the emission interval
//! `T = period_ns / count` ns is exactly `period_ns / gcd` units, every clock reading (whole
//! nanoseconds) is exactly `ns * D` units, and every decision is the rational model's, boundary
//! included, whatever the rate. Arithmetic is in `u128`: a reading below 2^63 ns times `D` below
//! 2^63 fits, and so does a bucket on top (a `Quota` keeps `tau` below about 480 years). `D` above
//! 2^62 (a count above 2^62 with no common factor with the period) is rounded to 2^62 with `T`
//! rounded *up*: the rate is then below the quota by less than one part in 10^18, never above.
//!
//! A bucket is stored as the quota it was charged under and its TAT split in two integers,
//! `tat_ns = TAT div D` and `tat_frac = TAT mod D`, so that the database holds plain `BIGINT`s
//! and a person reading the table sees nanoseconds since the Unix epoch.

use leakgate::Quota;

/// The largest unit denominator kept exact (see the module docs).
const MAX_UNITS_PER_NS: u128 = 1 << 62;

/// A quota compiled into stored units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rate {
    /// The quota's count and period: a stored bucket names the rate it was charged under.
    pub(crate) count: u64,
    pub(crate) period_ns: u64,
    /// `D`: units per nanosecond, at least 1.
    d: u128,
    /// `T` in units.
    interval: u128,
    /// `tau = burst * T` in units.
    tau: u128,
}

impl Rate {
    /// Compiles a quota. Every valid [`Quota`] compiles.
    pub(crate) fn new(quota: &Quota) -> Rate {
        let count = u128::from(quota.count());
        let period_ns = quota.period().as_nanos();
        let g = gcd(period_ns, count);
        let (d, interval) = if count / g <= MAX_UNITS_PER_NS {
            (count / g, period_ns / g)
        } else {
            (MAX_UNITS_PER_NS, (period_ns * MAX_UNITS_PER_NS).div_ceil(count))
        };
        Rate {
            count: quota.count(),
            period_ns: quota.period().as_nanos() as u64,
            d,
            interval,
            tau: u128::from(quota.burst()).saturating_mul(interval),
        }
    }

    /// A clock reading (ns since the epoch; negative readings count as 0) in units.
    pub(crate) fn at(&self, ns: i64) -> u128 {
        u128::from(ns.max(0) as u64) * self.d
    }

    /// `T` in units.
    pub(crate) fn interval(&self) -> u128 {
        self.interval
    }

    /// `tau` in units.
    pub(crate) fn tau(&self) -> u128 {
        self.tau
    }

    /// Units as nanoseconds, rounded up: the first clock reading at or after `units`
    /// (saturating at `i64::MAX`).
    pub(crate) fn ns_ceil(&self, units: u128) -> i64 {
        i64::try_from(units.div_ceil(self.d)).unwrap_or(i64::MAX)
    }

    /// A TAT in units as the two stored integers `(ns, frac)`; saturates at `i64::MAX` ns.
    pub(crate) fn split(&self, units: u128) -> (i64, i64) {
        match i64::try_from(units / self.d) {
            Ok(ns) => (ns, (units % self.d) as i64),
            Err(_) => (i64::MAX, 0),
        }
    }

    /// The two stored integers back in units (negative fields count as 0).
    pub(crate) fn join(&self, ns: i64, frac: i64) -> u128 {
        self.at(ns) + (frac.max(0) as u128).min(self.d - 1)
    }

    /// Whether a bucket stored under `(count, period_ns)` counts in this rate's units.
    pub(crate) fn same_rate(&self, count: u64, period_ns: u64) -> bool {
        self.count == count && self.period_ns == period_ns
    }
}

/// Greatest common divisor (`gcd(x, 0) = x`).
fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rate(count: u64, period_ns: u64, burst: u64) -> Rate {
        Rate::new(&Quota::new(count, Duration::from_nanos(period_ns), burst).unwrap())
    }

    #[test]
    fn three_per_second_counts_in_thirds_of_a_nanosecond() {
        let r = rate(3, 1_000_000_000, 3);
        assert_eq!((r.d, r.interval, r.tau), (3, 1_000_000_000, 3_000_000_000));
        assert_eq!(r.at(1_000_000_000), 3 * r.interval());
        assert_eq!(r.ns_ceil(r.interval()), 333_333_334);
        assert_eq!(r.split(r.interval() + r.at(5)), (333_333_338, 1));
        assert_eq!(r.join(333_333_338, 1), r.interval() + r.at(5));
    }

    #[test]
    fn whole_nanosecond_interval_counts_in_nanoseconds() {
        let r = rate(20, 1_000_000_000, 1);
        assert_eq!((r.d, r.interval), (1, 50_000_000));
    }

    #[test]
    fn a_huge_coprime_count_is_rounded_to_a_slower_rate() {
        // 2^63 + 1 (odd) per 2^62 ns (about 2 per ns): D would be 2^63 + 1.
        let count = (1u64 << 63) + 1;
        let q = Quota::new(count, Duration::from_nanos(1 << 62), 1).unwrap();
        let r = Rate::new(&q);
        assert_eq!(r.d, MAX_UNITS_PER_NS);
        let exact = (1u128 << 62) * MAX_UNITS_PER_NS;
        assert!(r.interval() * u128::from(count) >= exact, "T rounded up");
        assert!((r.interval() - 1) * u128::from(count) < exact, "by less than a unit");
    }

    #[test]
    fn stored_fields_saturate_instead_of_wrapping() {
        let r = rate(3, 1_000_000_000, 3);
        assert_eq!(r.split(u128::MAX), (i64::MAX, 0));
        assert_eq!(r.join(-5, -1), 0);
        assert_eq!(r.join(0, 99), 2, "a frac past D is read as D - 1");
    }
}
