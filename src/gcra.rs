//! The GCRA arithmetic, exact and pure: no atomics, no clock, just numbers.
//!
//! # Implementation details
//!
//! Time is counted in fixed-point *units*. One unit is `T / S` where `T = period / count` is the
//! emission interval and `S = max(1, ceil(4 * T / 1 ns))`, so:
//!
//! * one emission interval is exactly `S` units and a request of cost `n` moves the state by
//!   exactly `n * S` units: every increment is an integer, so nothing drifts, whatever the rate;
//! * a unit is at most a quarter of a nanosecond (it lies in `(0.2 ns, 0.25 ns]` when
//!   `T >= 1 ns`), so rounding a clock reading to whole units moves a decision only when the clock
//!   lies within 0.25 ns of its boundary, and a reported duration, rounded to the nearest
//!   nanosecond, is within 0.75 ns of the exact rational value;
//! * when `T` is a whole number of nanoseconds a unit is exactly 0.25 ns, every conversion is
//!   exact, and every decision and reported time matches the rational model exactly.
//!
//! 2^64 units cover at least 116 years when `T >= 1 ns` (rates up to 10^9 per second), and at
//! least 5.8 years at the highest rate a quota may have
//! ([`MAX_RATE_PER_SECOND`](crate::quota::MAX_RATE_PER_SECOND)); past the end of its range a clock
//! reading saturates at `u64::MAX` units and every request is denied.
//!
//! The clock conversion is one 64x64.64 fixed-point multiply (two `u64 x u64 -> u128` products),
//! so the hot path has no division; the divisions needed to report `remaining()` and durations are
//! done only when a caller asks for them, in [`crate::decision`].

use crate::quota::Quota;

/// A quota compiled into fixed-point units. Immutable, `Copy`, shared by all readers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rate {
    /// What a decision needs to report itself.
    scale: Scale,
    /// The burst, in units of cost.
    burst: u64,
    /// Units per nanosecond, integer part (at most 100, by the rate limit of a quota).
    units_per_ns_int: u64,
    /// Units per nanosecond, fractional part in 1/2^64.
    units_per_ns_frac: u64,
}

/// The part of a [`Rate`] that a decision carries, to compute its reports when asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scale {
    /// `S`: one emission interval, in units. At least 1.
    interval: u64,
    /// `tau = burst * S`: the bucket's capacity, in units.
    tau: u64,
    /// Nanoseconds per unit (at most 1/4) in 1/2^64, rounded down.
    ns_per_unit_q64: u64,
}

/// Why [`Rate::admit`] refused a request. The state does not change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The request would conform after this many more units of time.
    Wait(u64),
    /// The request can never conform: its cost is above the burst, or the clock is past the end of
    /// the representable range.
    Never,
}

impl Refusal {
    /// The wait a denial reports: units until the request would conform, `None` for never.
    #[inline]
    pub(crate) fn wait(self) -> Option<u64> {
        match self {
            Refusal::Wait(units) => Some(units),
            Refusal::Never => None,
        }
    }
}

impl Rate {
    /// Compiles a quota, or `None` when `tau` does not fit in 64 bits.
    pub(crate) fn new(quota: &Quota) -> Option<Rate> {
        let count = u128::from(quota.count());
        let period = u128::from(quota.period_ns());
        let interval = u64::try_from((4 * period).div_ceil(count)).ok()?.max(1);
        let tau = quota.burst().checked_mul(interval)?;
        // count * S / period, as 64.64 fixed point rounded *up*, so that a clock reading that is an
        // exact multiple of T converts to an exact multiple of S (rounding down would make the
        // bucket look one unit fuller than it is, exactly at the boundary). The excess is below
        // 2^-64 units per ns, under one unit over the whole clock range. count * S < 2^65 and the
        // remainder is below period < 2^64, so neither shift overflows u128, and the rounded-up
        // fraction stays below 2^64 because period < 2^64.
        let units_per_period = count * u128::from(interval);
        let units_per_ns_int = u64::try_from(units_per_period / period).ok()?;
        let units_per_ns_frac = ((units_per_period % period) << 64).div_ceil(period) as u64;
        // period / (count * S) <= 1/4: a unit is never longer than a quarter nanosecond, so the
        // quotient fits in 62 bits.
        let ns_per_unit_q64 = ((period << 64) / units_per_period) as u64;
        Some(Rate {
            scale: Scale { interval, tau, ns_per_unit_q64 },
            burst: quota.burst(),
            units_per_ns_int,
            units_per_ns_frac,
        })
    }

    /// A clock reading in nanoseconds, in units, rounded down; `u64::MAX` past the range.
    #[inline]
    pub(crate) fn units_at(&self, ns: u64) -> u64 {
        if self.units_per_ns_frac == 0 {
            // A whole number of units per nanosecond (4 whenever T is a whole number of ns).
            return ns.saturating_mul(self.units_per_ns_int);
        }
        let ns = u128::from(ns);
        let units = ns * u128::from(self.units_per_ns_int)
            + ((ns * u128::from(self.units_per_ns_frac)) >> 64);
        u64::try_from(units).unwrap_or(u64::MAX)
    }

    /// The GCRA step for a request of cost `n` at time `now`, against state `tat` (both in units),
    /// allowed to wait up to `max_wait` units past the conformance boundary (0 for a meter).
    ///
    /// Returns the new state, or why the request is refused. A new state equal to `tat` (cost 0)
    /// needs no write.
    #[inline]
    pub(crate) fn admit(&self, tat: u64, now: u64, n: u64, max_wait: u64) -> Result<u64, Refusal> {
        if n == 0 {
            return Ok(tat);
        }
        if n > self.burst {
            return Err(Refusal::Never);
        }
        // n <= burst, so the product is at most tau and cannot overflow.
        let cost = n * self.scale.interval;
        let start = tat.max(now);
        // Units of backlog after admission, beyond what the bucket may hold right now.
        let over = (start - now + cost).saturating_sub(self.scale.tau);
        if over > max_wait {
            return Err(Refusal::Wait(over - max_wait));
        }
        start.checked_add(cost).ok_or(Refusal::Never)
    }

    /// The reporting part, for decisions.
    #[inline]
    pub(crate) fn scale(&self) -> Scale {
        self.scale
    }

    /// The first clock reading, in nanoseconds, that converts to at least `units`: the earliest
    /// time at which a state boundary of `units` has been reached (`u64::MAX` if never).
    pub(crate) fn first_ns_reaching(&self, units: u64) -> u64 {
        // The nearest-nanosecond conversion is within a nanosecond of the answer; step to it.
        let mut ns = self.scale.units_to_ns(units);
        for _ in 0..4 {
            if ns > 0 && self.units_at(ns - 1) >= units {
                ns -= 1;
            } else if ns < u64::MAX && self.units_at(ns) < units {
                ns += 1;
            } else {
                break;
            }
        }
        ns
    }

    /// Nanoseconds to units, rounded up (a wait a caller allows, as a bound on the state).
    pub(crate) fn ns_to_units_ceil(&self, ns: u64) -> u64 {
        let floor = self.units_at(ns);
        if floor == u64::MAX || self.scale.units_to_ns(floor) >= ns {
            floor
        } else {
            floor + 1
        }
    }
}

impl Scale {
    /// `S`: one emission interval in units.
    #[inline]
    pub(crate) fn interval(&self) -> u64 {
        self.interval
    }

    /// `tau`: the bucket's capacity in units.
    #[inline]
    pub(crate) fn tau(&self) -> u64 {
        self.tau
    }

    /// Units to nanoseconds, rounded to the nearest (exact when a unit is a quarter nanosecond).
    pub(crate) fn units_to_ns(&self, units: u64) -> u64 {
        // units < 2^64 and the factor < 2^62, so adding one half cannot overflow u128; the result
        // is below 2^62 and always fits.
        let ns = u128::from(units) * u128::from(self.ns_per_unit_q64) + (1 << 63);
        (ns >> 64) as u64
    }

    /// Units of cost that would conform with `backlog` units of state ahead of the clock:
    /// `floor((tau - backlog) / S)`, 0 when the backlog exceeds `tau`.
    pub(crate) fn remaining(&self, backlog: u64) -> u64 {
        self.tau.saturating_sub(backlog) / self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rate(count: u64, period_ns: u64, burst: u64) -> Rate {
        Rate::new(&Quota::new(count, Duration::from_nanos(period_ns), burst).unwrap()).unwrap()
    }

    #[test]
    fn whole_nanosecond_interval_uses_quarter_nanosecond_units() {
        let r = rate(1000, 1_000_000_000, 10);
        assert_eq!(r.scale().interval(), 4_000_000);
        assert_eq!(r.scale().tau(), 40_000_000);
        for ns in [0, 1, 999, 123_456_789, u64::MAX / 8] {
            assert_eq!(r.units_at(ns), 4 * ns);
            assert_eq!(r.scale().units_to_ns(4 * ns), ns);
        }
    }

    #[test]
    fn fractional_interval_is_exact_at_whole_periods() {
        // T = 333_333_333.33 ns: S = ceil(4T) = 1_333_333_334.
        let r = rate(3, 1_000_000_000, 3);
        assert_eq!(r.scale().interval(), 1_333_333_334);
        // After one period exactly 3 intervals have elapsed, not a unit less.
        assert_eq!(r.units_at(1_000_000_000), 3 * 1_333_333_334);
        assert_eq!(r.scale().units_to_ns(3 * 1_333_333_334), 1_000_000_000);
        // One interval reports as T rounded to the nearest nanosecond.
        assert_eq!(r.scale().units_to_ns(1_333_333_334), 333_333_333);
        // ...but the first reading at which one interval has passed is the next nanosecond.
        assert_eq!(r.first_ns_reaching(1_333_333_334), 333_333_334);
        assert_eq!(r.first_ns_reaching(3 * 1_333_333_334), 1_000_000_000);
    }

    #[test]
    fn rate_above_four_per_nanosecond_counts_in_intervals() {
        let r = rate(10_000_000_000, 1_000_000_000, 1);
        assert_eq!(r.scale().interval(), 1);
        assert_eq!(r.units_at(7), 70);
        assert_eq!(r.scale().units_to_ns(70), 7);
    }

    #[test]
    fn range_is_over_a_century_at_one_per_nanosecond() {
        // The coarsest unit for T >= 1 ns is T / ceil(4T) > 0.2 ns: T = 1.0000001 ns here.
        let r = rate(10_000_000, 10_000_001, 1);
        let century_ns = 100 * 365 * 24 * 3600 * 1_000_000_000u64;
        assert!(r.units_at(century_ns) < u64::MAX);
    }

    #[test]
    fn conversion_saturates_past_range() {
        let r = rate(3, 1_000_000_000, 3);
        assert_eq!(r.units_at(u64::MAX), u64::MAX);
    }

    #[test]
    fn admit_follows_gcra() {
        let r = rate(1, 10, 2); // T = 10 ns = 40 units, tau = 80 units
        assert_eq!(r.admit(0, 400, 1, 0), Ok(440));
        assert_eq!(r.admit(440, 400, 1, 0), Ok(480));
        assert_eq!(r.admit(480, 400, 1, 0), Err(Refusal::Wait(40)));
        assert_eq!(r.admit(480, 400, 0, 0), Ok(480));
        assert_eq!(r.admit(0, 400, 3, 0), Err(Refusal::Never));
        assert_eq!(r.admit(480, 400, 1, 40), Ok(520));
        assert_eq!(r.admit(u64::MAX - 5, u64::MAX - 5, 1, 0), Err(Refusal::Never));
    }
}
