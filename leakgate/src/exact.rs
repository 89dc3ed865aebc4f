//! [`ExactRate`]: a quota as exact integers, for bucket state kept outside the process.
//!
//! A bucket that lives in a database row or a Redis key is read and written by many processes,
//! on many machines, across restarts and upgrades. Its TAT must mean the same to every one of
//! them, so it is counted in units that depend on the quota alone: `1/D` of a nanosecond, with
//! `D = count / gcd(count, period_ns)`, the quota's own denominator. Then
//!
//! * the emission interval `T = period_ns / count` ns is exactly `period_ns / gcd` units, and a
//!   request of cost `n` moves the state by exactly `n * T` units: nothing drifts, whatever the
//!   rate (`3 per second` counts in thirds of a nanosecond);
//! * a clock reading in whole nanoseconds is exactly `ns * D` units, so every decision is the
//!   contract's rational model, boundary included;
//! * a TAT is stored as whole nanoseconds since the clock's origin plus the rest in units
//!   ([`ExactRate::split_ns`]), plain integers a person reading the table understands.
//!
//! # Implementation details
//!
//! Arithmetic is in `u128`. `D` is at most [`ExactRate::MAX_UNITS_PER_NS`] (2^62): any clock
//! reading (`u64` ns, under 2^64) is below 2^126 units, and so is a bucket's `tau` (a [`Quota`]
//! keeps it under 2^64 ns), so a state of "clock plus a whole bucket" stays below 2^127 and never
//! overflows, and the rest of a nanosecond (`< D`) fits a signed 64-bit column. A quota whose `D` is above the cap
//! (a count above it, with no common factor with the period), or above a smaller cap a store
//! asks for ([`ExactRate::with_max_units_per_ns`]: Redis's Lua numbers want `D <= 2^32`), counts
//! in units of `1/cap` ns with `T` rounded *up* to a whole unit: the rate is then below the
//! quota's by less than one part in `T * cap`, never above it.
//!
//! # The hot path's rate
//!
//! The in-process limiters count with the same exact idea in another unit (`gcra.rs`): `T / S`,
//! with `S` chosen so that one emission interval is a whole number of units *and* a bucket's
//! whole state fits one `u64` (one atomic word, changed by one compare-and-swap), with the clock
//! converted by a multiply and no division. Those units depend on the fineness that fits in 64
//! bits, and the state starts at the process's own clock origin, so they never leave the
//! process. `ExactRate` is the same arithmetic without the one-word constraint: wider integers,
//! units fixed by the quota alone, nanoseconds of a shared clock. A quota gives the same
//! decisions in both, as the contract requires.

use crate::quota::Quota;
use core::time::Duration;

/// A quota compiled into exact integer units of `1/D` nanosecond, for bucket state stored
/// outside the process (a database row, a Redis key): see the module docs for the units.
///
/// ```
/// use leakgate::{ExactRate, Quota};
///
/// // 3 per second: T = 1/3 s, counted in thirds of a nanosecond.
/// let rate = ExactRate::new("3/s".parse::<Quota>()?);
/// assert_eq!(rate.units_per_ns(), 3);
/// assert_eq!(rate.interval(), 1_000_000_000);                    // T, in units
/// assert_eq!(rate.cost(3), rate.ns_to_units(1_000_000_000));      // 3 T = 1 s, exactly
///
/// // A bucket's TAT, stored as whole nanoseconds and a rest, then read back.
/// let tat = rate.ns_to_units(1_700_000_000_000_000_000) + rate.interval();
/// let (ns, rest) = rate.split_ns(tat);
/// assert_eq!((ns, rest), (1_700_000_000_333_333_333, 1));
/// assert_eq!(rate.join_ns(ns as u64, rest), tat);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExactRate {
    /// The quota compiled.
    quota: Quota,
    /// `D`: units per nanosecond, from 1 to the cap.
    units_per_ns: u64,
    /// `T` in units, at least 1: exact, or rounded up when `D` was capped.
    interval: u128,
    /// `tau = burst * T` in units.
    tau: u128,
    /// Whether `T` is exactly `interval` units.
    exact: bool,
}

impl ExactRate {
    /// The largest `D` (units per nanosecond): 2^62, so that the rest of a nanosecond fits a
    /// signed 64-bit integer and every sum of a clock reading and a bucket fits `u128`.
    ///
    /// ```
    /// assert_eq!(leakgate::ExactRate::MAX_UNITS_PER_NS, 1 << 62);
    /// ```
    pub const MAX_UNITS_PER_NS: u64 = 1 << 62;

    /// Compiles a quota, with `D` up to [`MAX_UNITS_PER_NS`](Self::MAX_UNITS_PER_NS): every
    /// quota of a realistic count is exact. Every valid [`Quota`] compiles.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new(leakgate::Quota::per_second(20)?);
    /// assert_eq!((rate.units_per_ns(), rate.interval()), (1, 50_000_000)); // T = 50 ms
    /// assert!(rate.is_exact());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(quota: Quota) -> ExactRate {
        ExactRate::with_max_units_per_ns(quota, Self::MAX_UNITS_PER_NS)
    }

    /// Compiles a quota with `D` at most `max_units_per_ns` (taken between 1 and
    /// [`MAX_UNITS_PER_NS`](Self::MAX_UNITS_PER_NS)), for a store with narrower numbers; past
    /// it, `T` is rounded up: the rate is at most the quota's, never above.
    ///
    /// ```
    /// use leakgate::{ExactRate, Quota};
    /// use std::time::Duration;
    ///
    /// // 4294967311 (a prime above 2^32) per day: no exact unit fits under 2^32.
    /// let q = Quota::new(4_294_967_311, Duration::from_secs(86_400), 1)?;
    /// let rate = ExactRate::with_max_units_per_ns(q, 1 << 32);
    /// assert_eq!(rate.units_per_ns(), 1 << 32);
    /// assert!(!rate.is_exact());
    /// assert!(ExactRate::new(q).is_exact());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_max_units_per_ns(quota: Quota, max_units_per_ns: u64) -> ExactRate {
        let cap = u128::from(max_units_per_ns.clamp(1, Self::MAX_UNITS_PER_NS));
        let count = u128::from(quota.count());
        let period_ns = quota.period().as_nanos();
        let g = gcd(period_ns, count);
        let (d, interval, exact) = if count / g <= cap {
            (count / g, period_ns / g, true)
        } else {
            // period_ns < 2^64 and cap <= 2^62: the product fits.
            (cap, (period_ns * cap).div_ceil(count), false)
        };
        ExactRate {
            quota,
            units_per_ns: d as u64,
            interval,
            tau: u128::from(quota.burst()).saturating_mul(interval),
            exact,
        }
    }

    /// The quota this rate was compiled from.
    ///
    /// ```
    /// let q: leakgate::Quota = "10/s burst 2".parse()?;
    /// assert_eq!(leakgate::ExactRate::new(q).quota(), q);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// `D`: units per nanosecond.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("7/s".parse()?);
    /// assert_eq!(rate.units_per_ns(), 7);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn units_per_ns(&self) -> u64 {
        self.units_per_ns
    }

    /// `T`, the emission interval, in units (at least 1).
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("7/s".parse()?);
    /// assert_eq!(rate.interval(), 1_000_000_000); // 1/7 s = 10^9 sevenths of a ns
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn interval(&self) -> u128 {
        self.interval
    }

    /// `tau = burst * T`, the bucket's capacity, in units.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("10/s burst 4".parse()?);
    /// assert_eq!(rate.tau(), 4 * rate.interval());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn tau(&self) -> u128 {
        self.tau
    }

    /// Whether `T` is exactly [`interval`](Self::interval) units, so that every decision is
    /// the rational model's (false only when `D` was capped).
    ///
    /// ```
    /// assert!(leakgate::ExactRate::new("3/s".parse()?).is_exact());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// The cost of `n` units of work, `n * T`, in units of time (saturating).
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("3/s".parse()?);
    /// assert_eq!(rate.cost(2), 2 * rate.interval());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn cost(&self, n: u64) -> u128 {
        u128::from(n).saturating_mul(self.interval)
    }

    /// A clock reading (or a span) in whole nanoseconds as units: exact.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("3/s".parse()?);
    /// assert_eq!(rate.ns_to_units(5), 15);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn ns_to_units(&self, ns: u64) -> u128 {
        u128::from(ns) * u128::from(self.units_per_ns)
    }

    /// Units as nanoseconds, rounded up: the first clock reading at or after `units` (a slot, a
    /// wait), saturating at `u64::MAX`.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("3/s".parse()?);
    /// assert_eq!(rate.units_to_ns_ceil(rate.interval()), 333_333_334);
    /// assert_eq!(rate.units_to_ns_ceil(u128::MAX), u64::MAX);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn units_to_ns_ceil(&self, units: u128) -> u64 {
        let ns = units.div_ceil(u128::from(self.units_per_ns));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// Units as a duration, rounded up to the nanosecond (saturating): what a reported wait is.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rate = leakgate::ExactRate::new("3/s".parse()?);
    /// assert_eq!(rate.units_to_duration_ceil(rate.interval()), Duration::from_nanos(333_333_334));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn units_to_duration_ceil(&self, units: u128) -> Duration {
        Duration::from_nanos(self.units_to_ns_ceil(units))
    }

    /// Units as whole nanoseconds and the rest in units (`rest < D`): how a TAT is stored.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("3/s".parse()?);
    /// assert_eq!(rate.split_ns(rate.interval() + 15), (333_333_338, 1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn split_ns(&self, units: u128) -> (u128, u64) {
        let d = u128::from(self.units_per_ns);
        (units / d, (units % d) as u64)
    }

    /// The stored pair of [`split_ns`](Self::split_ns) back in units; a `rest` of `D` or more
    /// (not one this rate wrote) is read as `D - 1`.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("3/s".parse()?);
    /// assert_eq!(rate.join_ns(333_333_338, 1), rate.interval() + 15);
    /// assert_eq!(rate.join_ns(0, 99), 2);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn join_ns(&self, ns: u64, rest: u64) -> u128 {
        self.ns_to_units(ns) + u128::from(rest.min(self.units_per_ns - 1))
    }

    /// Whole units of cost that conform with `backlog` units of state ahead of the clock
    /// (`floor((tau - backlog) / T)`, 0 when the backlog is past `tau`): a decision's
    /// `remaining()`.
    ///
    /// ```
    /// let rate = leakgate::ExactRate::new("1000/s burst 10".parse()?);
    /// assert_eq!(rate.remaining(0), 10);
    /// assert_eq!(rate.remaining(2_500_000), 7); // 2.5 ms of backlog: 2.5 units used
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn remaining(&self, backlog: u128) -> u64 {
        let free = self.tau.saturating_sub(backlog) / self.interval;
        u64::try_from(free).unwrap_or(u64::MAX)
    }

    /// A backlog of this rate (units of state ahead of the clock) as the same level of cost in
    /// `to`'s units: `backlog * T_to / T_self`, rounded up, saturating. How a bucket's level is
    /// carried to a new quota; cap it at the new bucket's `tau` as the change of quota requires.
    ///
    /// ```
    /// let old = leakgate::ExactRate::new("1/s burst 5".parse()?);
    /// let new = leakgate::ExactRate::new("10/s burst 10".parse()?);
    /// // 2.5 units of level under 1/s are 2.5 units under 10/s: a quarter second of backlog.
    /// assert_eq!(old.backlog_in(old.ns_to_units(2_500_000_000), &new), new.ns_to_units(250_000_000));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn backlog_in(&self, backlog: u128, to: &ExactRate) -> u128 {
        backlog.checked_mul(to.interval).map_or(u128::MAX, |scaled| scaled.div_ceil(self.interval))
    }

    /// A change of quota (the contract's `reload`): the backlog, in `to`'s units, of a bucket of
    /// this rate whose backlog is `backlog` when the quota becomes `to`. The units it could admit
    /// (its burst less its level) stay what it can admit, capped at `to`'s burst, rounded down;
    /// a backlog past this burst (reservations queued beyond it) stays past `to`'s, rounded up.
    /// So no change makes more units available than before it: a smaller burst keeps the debt
    /// it cannot hold, and a larger one adds nothing at once.
    ///
    /// ```
    /// let big = leakgate::ExactRate::new("10/s burst 10".parse()?);
    /// let small = leakgate::ExactRate::new("10/s burst 5".parse()?);
    /// let t = big.interval();
    /// // 2 of 10 used, 8 available: 5 of 5 available (none used) under the smaller burst...
    /// assert_eq!(big.carry_backlog(2 * t, &small), 0);
    /// // ...and back under 10, still 5 available: 5 used.
    /// assert_eq!(small.carry_backlog(0, &big), 5 * t);
    /// // A backlog of 12 under burst 10 (2 queued past it): 2 past the smaller burst.
    /// assert_eq!(big.carry_backlog(12 * t, &small), 7 * t);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn carry_backlog(&self, backlog: u128, to: &ExactRate) -> u128 {
        match self.tau.checked_sub(backlog) {
            Some(available) => {
                let available = available
                    .checked_mul(to.interval)
                    .map_or(u128::MAX, |scaled| scaled / self.interval)
                    .min(to.tau);
                to.tau - available
            }
            None => to.tau.saturating_add(self.backlog_in(backlog - self.tau, to)),
        }
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
#[path = "exact_tests.rs"]
mod tests;
