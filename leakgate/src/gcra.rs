//! The GCRA arithmetic, exact and pure: no atomics, no clock, just numbers.
//!
//! # Implementation details
//!
//! Time is counted in fixed-point *units*. One unit is `T / S` where `T = period / count` is the
//! emission interval and `S = max(1, ceil(k * T / 1 ns))` for a fineness `k` of 4, 2 or 1, so:
//!
//! * one emission interval is exactly `S` units and a request of cost `n` moves the state by
//!   exactly `n * S` units: every increment is an integer, so nothing drifts, whatever the rate;
//! * a unit is at most `1/k` of a nanosecond, so rounding a clock reading to whole units moves a
//!   decision only when the clock lies within `1/k` ns of its boundary;
//! * when `T` is a whole number of nanoseconds a unit is exactly `1/k` ns, every conversion is
//!   exact, and every decision and reported time matches the rational model exactly.
//!
//! `k` is the finest of 4, 2 and 1 (1 only for a whole-nanosecond `T`) at which a bucket of
//! `tau = burst * T` still fits beside [`CLOCK_HORIZON_NS`] (100 years) of clock: quarter
//! nanoseconds for every bucket shorter than about 46 years, coarser units for the long ones, and
//! a [`QuotaError::BurstTooLarge`](crate::QuotaError::BurstTooLarge) for a bucket that fits at none.
//! Above 10^9 units per second (`T` under 1 ns) no century is promised: `S = max(1, ceil(4T))`,
//! the clock's range is `2^64` units (at least 5.8 years at the highest rate), and `tau` may take
//! at most half of it. Past the end of its range a clock reading saturates at `u64::MAX` units
//! and every request is denied.
//!
//! The clock conversion is one 64x64.64 fixed-point multiply (two `u64 x u64 -> u128` products),
//! so the hot path has no division; the exact `u128` division that turns units back into
//! nanoseconds is done only when a caller asks for a report, in [`crate::decision`].

/// One hundred years of 365.25 days, in nanoseconds: the clock range every quota of at most
/// 10^9 units per second is correct for, with its whole bucket on top.
pub(crate) const CLOCK_HORIZON_NS: u64 = 3_155_760_000_000_000_000;

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
    /// Units added to every clock reading: 0, except for a limiter whose quota was changed, whose
    /// new states start above every state of the old quota (see `crate::rate_cell`).
    origin: u64,
}

/// The part of a [`Rate`] that a decision carries, to compute its reports when asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scale {
    /// `S`: one emission interval, in units. At least 1.
    interval: u64,
    /// `tau = burst * S`: the bucket's capacity, in units.
    tau: u64,
    /// The quota's period in nanoseconds and its count: one unit is `period / (count * S)` ns.
    period_ns: u64,
    count: u64,
}

/// Why [`Rate::admit`] refused a request. The state does not change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The request would conform after this many more units of time.
    Wait(u64),
    /// The request can never conform: its cost is above the burst, or the state it would leave is
    /// past the end of the representable range.
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
    /// Compiles `count` units per `period_ns` with a burst of `burst` (all at least 1), or `None`
    /// when the bucket does not fit beside the promised clock range at any fineness.
    pub(crate) fn new(count: u64, period_ns: u64, burst: u64) -> Option<Rate> {
        let whole_ns = period_ns.is_multiple_of(count);
        [4, 2, 1]
            .into_iter()
            .filter(|&k| k > 1 || whole_ns)
            .find_map(|k| Rate::with_fineness(count, period_ns, burst, k))
    }

    /// Compiles the quota in units of whole emission intervals (`S = 1`: one unit is `T`, and a
    /// clock reading counts the intervals begun since the origin, rounded down), or `None` when
    /// the bucket does not fit beside the promised clock range. A bucket in these units is a
    /// token bucket that gains one whole unit at each multiple of `T`: the colour meters'
    /// (`crate::meter`). `burst` may be 0 here (a bucket that holds nothing).
    pub(crate) fn in_intervals(count: u64, period_ns: u64, burst: u64) -> Option<Rate> {
        // k = 0: `S = max(1, ceil(0 * T)) = 1`. Intervals are at least as long as the units of
        // `Rate::new`, so this fits wherever that does.
        Rate::with_fineness(count, period_ns, burst, 0)
    }

    /// The rate at units of `T / max(1, ceil(k * T))`, if its bucket fits the clock range.
    fn with_fineness(count: u64, period_ns: u64, burst: u64, k: u128) -> Option<Rate> {
        let (count_w, period) = (u128::from(count), u128::from(period_ns));
        let interval = u64::try_from((k * period).div_ceil(count_w)).ok()?.max(1);
        let tau = burst.checked_mul(interval)?;
        // count * S / period, as 64.64 fixed point rounded *up*, so that a clock reading that is an
        // exact multiple of T converts to an exact multiple of S (rounding down would make the
        // bucket look one unit fuller than it is, exactly at the boundary). The excess is below
        // 2^-64 units per ns, under one unit over the whole clock range. count * S < 2^66 and the
        // remainder is below period < 2^64, so neither shift overflows u128, and the rounded-up
        // fraction stays below 2^64 because period < 2^64.
        let units_per_period = count_w * u128::from(interval);
        let units_per_ns_int = u64::try_from(units_per_period / period).ok()?;
        let units_per_ns_frac = ((units_per_period % period) << 64).div_ceil(period) as u64;
        let rate = Rate {
            scale: Scale { interval, tau, period_ns, count },
            burst,
            units_per_ns_int,
            units_per_ns_frac,
            origin: 0,
        };
        let fits = if period_ns >= count {
            // A century of clock with a whole bucket on top stays below the saturation point.
            let horizon = rate.units_at(CLOCK_HORIZON_NS);
            horizon < u64::MAX && horizon.checked_add(tau).is_some()
        } else {
            tau <= u64::MAX / 2
        };
        fits.then_some(rate)
    }

    /// A clock reading in nanoseconds, in units, rounded down; `u64::MAX` past the range.
    #[inline]
    pub(crate) fn units_at(&self, ns: u64) -> u64 {
        self.units_in(ns).saturating_add(self.origin)
    }

    /// This rate with every clock reading moved up by `origin` units (see the field).
    pub(crate) fn with_origin(self, origin: u64) -> Rate {
        Rate { origin, ..self }
    }

    /// The burst, in units of cost.
    #[inline(always)]
    pub(crate) fn burst(&self) -> u64 {
        self.burst
    }

    /// The count, period in nanoseconds and burst of the quota this rate was compiled from.
    pub(crate) fn quota_parts(&self) -> (u64, u64, u64) {
        (self.scale.count, self.scale.period_ns, self.burst)
    }

    /// Units added to every clock reading (see the field).
    pub(crate) fn origin(&self) -> u64 {
        self.origin
    }

    /// The rate's words, for a cell that keeps a rate in atomics (`crate::rate_cell`).
    pub(crate) fn to_words(self) -> [u64; 8] {
        let Scale { interval, tau, period_ns, count } = self.scale;
        let (int, frac, origin) = (self.units_per_ns_int, self.units_per_ns_frac, self.origin);
        [interval, tau, period_ns, count, self.burst, int, frac, origin]
    }

    /// The rate whose words [`Rate::to_words`] gave.
    pub(crate) fn from_words(words: [u64; 8]) -> Rate {
        let [interval, tau, period_ns, count, burst, units_per_ns_int, units_per_ns_frac, origin] =
            words;
        let scale = Scale { interval, tau, period_ns, count };
        Rate { scale, burst, units_per_ns_int, units_per_ns_frac, origin }
    }

    /// A span of `ns` nanoseconds in units, rounded down; `u64::MAX` past the range.
    #[inline]
    pub(crate) fn units_in(&self, ns: u64) -> u64 {
        if self.units_per_ns_frac == 0 {
            // A whole number of units per nanosecond (k whenever T is a whole number of ns).
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
    /// needs no write. No step overflows, whatever the inputs.
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
        // Units of backlog after admission beyond what the bucket may hold right now,
        // `start - now + cost - tau`, written so that nothing overflows (cost <= tau).
        let over = (start - now).saturating_sub(self.scale.tau - cost);
        if over > max_wait {
            return Err(Refusal::Wait(over - max_wait));
        }
        start.checked_add(cost).ok_or(Refusal::Never)
    }

    /// The units a request of cost `n` moves the state by (`n * S`), for `1 <= n <= burst`.
    #[inline]
    pub(crate) fn cost(&self, n: u64) -> u64 {
        n.saturating_mul(self.scale.interval)
    }

    /// The level of a bucket of this rate whose state is `tat`, as of the clock reading `at_ns`, in
    /// units of rate `to`: how a change of quota hands a bucket over. The units the bucket could
    /// admit now (its burst less its level `(tat - now) / T`) become what it can admit in `to`,
    /// capped at `to`'s burst, so a change never makes more units available than before it (a
    /// shrink keeps the debt it cannot hold, and a grow adds nothing at once: the new units come
    /// at the new rate). A backlog beyond this rate's burst (reservations queued past it) is kept
    /// as a backlog beyond `to`'s burst. Rounded against the caller: the units available down,
    /// the backlog up. Equal rates keep the backlog exactly.
    ///
    /// An idle bucket (nothing in it) is no exception: under a larger burst it has the old
    /// burst's units available, not the new one's. Were it a new bucket instead, a shrink (which
    /// leaves a bucket with at most the new burst available, idle) and a grow back would hand
    /// out units; the keyed tables open the buckets of keys they forgot or never saw at this
    /// same level (`fresh` in their marks).
    pub(crate) fn level_in(&self, tat: u64, to: &Rate, at_ns: u64) -> u64 {
        // `units_at` rounds the clock down, so the backlog is never smaller than exact.
        let backlog = tat.saturating_sub(self.units_at(at_ns));
        let (from_s, to_s) = (u128::from(self.scale.interval()), u128::from(to.scale.interval()));
        let to_tau = to.scale.tau();
        match self.scale.tau().checked_sub(backlog) {
            Some(available) => {
                let available = (u128::from(available) * to_s / from_s).min(u128::from(to_tau));
                // At most `to_tau`, which is a u64.
                to_tau - u64::try_from(available).unwrap_or(to_tau)
            }
            None => {
                let debt = (u128::from(backlog - self.scale.tau()) * to_s).div_ceil(from_s);
                to_tau.saturating_add(u64::try_from(debt).unwrap_or(u64::MAX))
            }
        }
    }

    /// The reporting part, for decisions.
    #[inline]
    pub(crate) fn scale(&self) -> Scale {
        self.scale
    }

    /// The first clock reading, in nanoseconds, that converts to at least `units`: the earliest
    /// time at which a state boundary of `units` has been reached (`u64::MAX` if never).
    pub(crate) fn first_ns_reaching(&self, units: u64) -> u64 {
        let units = units.saturating_sub(self.origin);
        // The nearest-nanosecond conversion is within a nanosecond of the answer; step to it.
        let mut ns = self.scale.units_to_ns(units);
        for _ in 0..4 {
            if ns > 0 && self.units_in(ns - 1) >= units {
                ns -= 1;
            } else if ns < u64::MAX && self.units_in(ns) < units {
                ns += 1;
            } else {
                break;
            }
        }
        ns
    }

    /// A span of nanoseconds in units, rounded up (a wait a caller allows, as a bound on the
    /// state).
    pub(crate) fn ns_to_units_ceil(&self, ns: u64) -> u64 {
        let floor = self.units_in(ns);
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

    /// Units to nanoseconds, rounded to the nearest (halves up), exactly: `units * period /
    /// (count * S)` in `u128`, saturating at `u64::MAX`. When a unit is exactly a quarter, a half
    /// or a whole nanosecond (`T` a whole number of nanoseconds), the same value by a shift, with
    /// no `u128` division: a decision over several buckets converts each one's figures.
    #[inline]
    pub(crate) fn units_to_ns(&self, units: u64) -> u64 {
        // units and period are below 2^64, so their product fits u128; count * S < 2^66.
        let denominator = u128::from(self.count) * u128::from(self.interval);
        let period = u128::from(self.period_ns);
        if period << 2 == denominator {
            return (units >> 2) + ((units >> 1) & 1);
        } else if period << 1 == denominator {
            return (units >> 1) + (units & 1);
        } else if period == denominator {
            return units;
        }
        let numerator = u128::from(units) * period;
        let (quotient, remainder) = (numerator / denominator, numerator % denominator);
        let rounded = quotient + u128::from(2 * remainder >= denominator);
        u64::try_from(rounded).unwrap_or(u64::MAX)
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
    fn rate(count: u64, period_ns: u64, burst: u64) -> Rate {
        Rate::new(count, period_ns, burst).unwrap()
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

    const YEAR_NS: u64 = 365 * 86_400 * 1_000_000_000;

    #[test]
    fn no_step_overflows_for_a_century_long_bucket() {
        // Two per century, burst 2: a third request at 0 waits 50 years, reported exactly.
        let r = rate(2, 100 * YEAR_NS, 2);
        let full = r.admit(0, 0, 2, 0).unwrap();
        let Err(Refusal::Wait(wait)) = r.admit(full, 0, 1, 0) else { panic!("must wait") };
        assert_eq!(r.scale().units_to_ns(wait), 50 * YEAR_NS);
    }

    #[test]
    fn long_buckets_use_coarser_units_to_keep_a_century_of_clock() {
        // One per 50 years: quarter-nanosecond units would overflow at 100 years of clock.
        let r = rate(1, 50 * YEAR_NS, 1);
        let century = r.units_at(CLOCK_HORIZON_NS);
        assert!(r.admit(0, century, 1, 0).is_ok());
        assert_eq!(r.scale().units_to_ns(r.scale().interval()), 50 * YEAR_NS);
        // A bucket that fits at no fineness is refused.
        assert!(Rate::new(1, u64::MAX, 1).is_none());
        assert_ne!((200 * YEAR_NS + 1) % 7, 0);
        assert!(Rate::new(7, 200 * YEAR_NS + 1, 7).is_none(), "fractional T: at most ~95 years");
    }

    #[test]
    fn the_shift_conversion_agrees_with_the_division() {
        let exact = |scale: Scale, units: u64| {
            let n = u128::from(units) * u128::from(scale.period_ns);
            let d = u128::from(scale.count) * u128::from(scale.interval);
            u64::try_from(n / d + u128::from(2 * (n % d) >= d)).unwrap_or(u64::MAX)
        };
        for (count, period_ns, burst) in
            [(10, 1_000_000_000, 5), (1_000_000_000, 1_000_000_000, 9), (3, 1_000_000_000, 3)]
                .into_iter()
                .chain([(7, 3, 2), (1, 3_600_000_000_000, 1), (1, 50 * YEAR_NS, 1)])
        {
            let scale = rate(count, period_ns, burst).scale();
            for units in [0, 1, 2, 3, 5, 7, 1 << 33, u64::MAX - 1, u64::MAX, scale.tau()] {
                assert_eq!(scale.units_to_ns(units), exact(scale, units), "{count}/{period_ns}");
            }
        }
    }

    #[test]
    fn reported_times_are_exact_to_the_nearest_nanosecond() {
        // T = 0.0428 ns at 2.3e10/s: a state 19 years ahead converts back within half a ns.
        let r = rate(2_988_575_458, 127_781_132, 1);
        let t = 610_931_235_664_900_864u64;
        let units = r.units_at(t) + r.scale().interval();
        let exact = (u128::from(units) * 127_781_132) as f64 / 2_988_575_458.0;
        assert!((r.scale().units_to_ns(units) as f64 - exact).abs() <= 0.5);
    }
}
