//! How a bucket's times are written for Redis: exact integers below 2^53, split in two fields.
//!
//! # Implementation details
//!
//! Lua numbers are doubles, exact only for integers below 2^53. A time is therefore kept as a
//! pair `(ms, lo)`: whole milliseconds since the clock's origin (the Unix epoch for Redis `TIME`)
//! and the rest of the millisecond in *units* of `1/D` ns, `0 <= lo < L = 10^6 * D`. The script
//! only adds, subtracts and compares such pairs (carrying between the fields), so every value it
//! handles is an exact integer:
//!
//! * `D` is the quota's own denominator `count / gcd(count, period_ns)` when that is at most
//!   [`MAX_UNITS_PER_NS`] (2^32: every quota with a round count), so that the emission interval
//!   `T = period_ns / count` ns is exactly `period_ns / gcd` units: costs are whole numbers of
//!   units, nothing drifts, and with clock readings in whole nanoseconds every decision is exactly
//!   the rational model's. Otherwise `D = 2^32` and `T` is rounded *up* to a whole unit: the rate
//!   is then below the quota by less than one part in `T * 2^32` (under 3 * 10^-8 at the highest
//!   rate a quota may have), never above.
//! * `L <= 2^52`, so `lo + lo < 2^53`: a sum of two pairs never loses a bit before its carry.
//! * `ms` stays below 2^52: clock readings are at most `u64::MAX` ns (1.8 * 10^13 ms), a
//!   bucket's span `tau` at most about 4.6 * 10^12 ms (a `Quota` keeps `tau` within 2^64 quarter
//!   nanoseconds), and waits are capped at [`MAX_WAIT`]; the range is therefore the whole range of
//!   the clock, and Redis `TIME` (microseconds) keeps its resolution for as long as Redis counts.
//!
//! The client computes everything else (costs, `tau`, reports) in `u128`, from the same units, with
//! the core's [`leakgate::ExactRate`] (capped at `D = 2^32`): one exact-units type for every store.

use leakgate::{ExactRate, Quota};
use std::ops::Deref;
use std::time::Duration;

/// The finest unit: `1/D` ns with `D <= 2^32`, so that `L = 10^6 * D <= 2^52`.
pub(crate) const MAX_UNITS_PER_NS: u64 = 1 << 32;

/// Nanoseconds in the `ms` field's unit.
pub(crate) const NS_PER_MS: u64 = 1_000_000;

/// The longest wait a reservation may ask for (about 34 years); longer waits are cut to this.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(1 << 30);

/// Every `ms` field the script sees stays below this, so that sums stay below 2^53.
const MAX_MS: u128 = 1 << 52;

/// A time or a span as the script holds it: whole milliseconds and units within the millisecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Split {
    /// Whole milliseconds.
    pub(crate) ms: u64,
    /// Units of `1/D` ns within the millisecond, below `L = 10^6 * D`.
    pub(crate) lo: u64,
}

/// A quota compiled into the script's units: the core's [`ExactRate`] with `D` capped at
/// [`MAX_UNITS_PER_NS`], and the script's split of a span into `(ms, lo)`. Everything else
/// (`T`, `tau`, costs, reports) is the `ExactRate`'s, through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rate(ExactRate);

impl Rate {
    /// Compiles a quota. Every valid [`Quota`] compiles.
    pub(crate) fn new(quota: Quota) -> Rate {
        Rate(ExactRate::with_max_units_per_ns(quota, MAX_UNITS_PER_NS))
    }

    /// `L`: units per millisecond.
    pub(crate) fn units_per_ms(&self) -> u64 {
        self.units_per_ns() * NS_PER_MS
    }

    /// A span in units as the script's pair; `None` past the script's range.
    pub(crate) fn split(&self, units: u128) -> Option<Split> {
        let per_ms = u128::from(self.units_per_ms());
        let ms = units / per_ms;
        (ms < MAX_MS).then(|| Split { ms: ms as u64, lo: (units % per_ms) as u64 })
    }

    /// A pair from the script, back in units.
    pub(crate) fn join(&self, split: Split) -> u128 {
        u128::from(split.ms) * u128::from(self.units_per_ms()) + u128::from(split.lo)
    }

    /// The name of this rate inside a Redis key: `<count>per<period in ns>`. The burst is not part
    /// of it: a bucket's state is a time, valid whatever the burst, so a burst can change without
    /// losing the state.
    pub(crate) fn id(&self) -> String {
        let quota = self.quota();
        format!("{}per{}", quota.count(), quota.period().as_nanos())
    }
}

impl Deref for Rate {
    type Target = ExactRate;

    fn deref(&self) -> &ExactRate {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(count: u64, period_ns: u64, burst: u64) -> Rate {
        Rate::new(Quota::new(count, Duration::from_nanos(period_ns), burst).unwrap())
    }

    #[test]
    fn three_per_second_counts_in_thirds_of_a_nanosecond() {
        let r = rate(3, 1_000_000_000, 3);
        assert!(r.is_exact());
        assert_eq!(r.units_per_ns(), 3);
        assert_eq!(r.interval(), 1_000_000_000);
        // Three intervals are exactly one second.
        assert_eq!(r.cost(3), r.ns_to_units(1_000_000_000));
        assert_eq!(r.units_to_duration_ceil(r.interval()), Duration::from_nanos(333_333_334));
    }

    #[test]
    fn whole_nanosecond_interval_uses_nanoseconds() {
        let r = rate(1000, 1_000_000_000, 10);
        assert_eq!((r.units_per_ns(), r.interval()), (1, 1_000_000));
        assert_eq!(r.remaining(2_500_000), 7);
    }

    #[test]
    fn ten_to_the_eleven_per_second_is_a_hundredth_of_a_nanosecond() {
        let r = rate(100_000_000_000, 1_000_000_000, 1);
        assert_eq!((r.units_per_ns(), r.interval()), (100, 1));
    }

    #[test]
    fn awkward_count_is_rounded_to_a_slower_rate() {
        // 4294967311 is prime and above 2^32: no exact unit fits.
        let r = rate(4_294_967_311, 86_400_000_000_000, 1);
        assert!(!r.is_exact());
        // T is rounded up, never down: at most the quota's rate.
        let exact_t_times_d = 86_400_000_000_000u128 * u128::from(MAX_UNITS_PER_NS);
        assert!(r.interval() * 4_294_967_311 >= exact_t_times_d);
        assert!((r.interval() - 1) * 4_294_967_311 < exact_t_times_d);
    }

    #[test]
    fn split_and_join_round_trip_and_stay_in_range() {
        let r = rate(7, 1_000_000_001, 5);
        let l = u128::from(r.units_per_ms());
        assert!(l <= 1 << 52);
        for units in [0, 1, l - 1, l, 123_456_789_012_345_678, r.tau()] {
            let s = r.split(units).unwrap();
            assert!(u128::from(s.lo) < l);
            assert_eq!(r.join(s), units);
        }
        assert_eq!(r.split(MAX_MS * l), None);
    }

    #[test]
    fn largest_spans_fit() {
        // About the longest bucket a quota allows (63 years) still splits at the clock's end.
        let q = Quota::new(1, Duration::from_nanos(2_000_000_000_000_000_000), 1).unwrap();
        let r = Rate::new(q);
        let clock_end = r.ns_to_units(u64::MAX);
        assert!(r.split(clock_end + r.tau() + r.ns_to_units(MAX_WAIT.as_nanos() as u64)).is_some());
    }
}
