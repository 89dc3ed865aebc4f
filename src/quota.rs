//! What a quota is: `count` units per `period`, at most `burst` at once, validated once.

use crate::gcra::Rate;
use std::fmt;
use std::time::Duration;

/// The highest rate a quota may have: 10^11 units per second.
///
/// Above it, one fixed-point time unit would be so short that 2^64 of them would cover less than
/// about six years of clock, so the limiter would saturate in a long-running process.
pub const MAX_RATE_PER_SECOND: u64 = 100_000_000_000;

/// A rate limit: `count` units per `period`, with at most `burst` units at once.
///
/// The emission interval is `T = period / count` (an exact rational) and the bucket's capacity is
/// `tau = burst * T`. A quota is validated when it is built, so a [`Limiter`](crate::Limiter)
/// built from one never fails.
///
/// As text (`FromStr`/`Display`): `"100/s"`, `"5/minute"`, `"100/0.5s"`, `"10/s burst 1"`. One
/// rule for the burst everywhere, [`Quota::per_second`] and friends, strings and `leakgate
/// pace`: **when no burst is given, `burst = count`**.
///
/// ```
/// use leakgate::Quota;
/// use std::time::Duration;
///
/// let q = Quota::new(3, Duration::from_secs(1), 3)?;
/// assert_eq!(q, Quota::per_second(3)?);
/// assert_eq!(q.to_string(), "3/s");
/// let q: Quota = "100/s burst 20".parse()?;
/// assert_eq!(q.burst(), 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    count: u64,
    /// The period in nanoseconds; at least 1, at most `u64::MAX` (about 584 years).
    period_ns: u64,
    burst: u64,
}

/// Why a quota could not be built or parsed.
///
/// ```
/// use leakgate::{Quota, QuotaError};
/// assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroCount));
/// let e = "10/fortnight".parse::<Quota>().unwrap_err();
/// assert!(e.to_string().contains("fortnight"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// `count` was zero: a quota must admit something.
    ZeroCount,
    /// The period was zero.
    ZeroPeriod,
    /// `burst` was zero: no request could ever conform.
    ZeroBurst,
    /// The period is longer than about 584 years (`u64::MAX` nanoseconds).
    PeriodTooLong,
    /// More than [`MAX_RATE_PER_SECOND`] units per second.
    RateTooHigh,
    /// The bucket, `burst * T`, is too long to keep exact beside a century of clock (longer than
    /// about 480 years, or 95 when `T` is not a whole number of nanoseconds; above 10^9 units
    /// per second, longer than half the clock's range).
    BurstTooLarge,
    /// A quota string did not parse; the message names the bad part.
    Parse(String),
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCount => f.write_str("the count of a quota must be at least 1"),
            Self::ZeroPeriod => f.write_str("the period of a quota must be longer than zero"),
            Self::ZeroBurst => f.write_str("the burst of a quota must be at least 1"),
            Self::PeriodTooLong => {
                f.write_str("the period of a quota must be at most u64::MAX ns (about 584 years)")
            }
            Self::RateTooHigh => write!(
                f,
                "the rate of a quota must be at most {MAX_RATE_PER_SECOND} units per second"
            ),
            Self::BurstTooLarge => f.write_str(
                "burst * (period / count) is too long: the bucket cannot stay exact beside a century of clock",
            ),
            Self::Parse(msg) => write!(f, "invalid quota: {msg}"),
        }
    }
}

impl std::error::Error for QuotaError {}

impl Quota {
    /// `count` units per `period`, at most `burst` at once.
    ///
    /// ```
    /// use leakgate::Quota;
    /// use std::time::Duration;
    /// let q = Quota::new(3, Duration::from_millis(1500), 1)?; // one every 500 ms, no burst
    /// assert_eq!(q.emission_interval(), Duration::from_millis(500));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(count: u64, period: Duration, burst: u64) -> Result<Self, QuotaError> {
        if count == 0 {
            return Err(QuotaError::ZeroCount);
        }
        if period.is_zero() {
            return Err(QuotaError::ZeroPeriod);
        }
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        let period_ns = u64::try_from(period.as_nanos()).map_err(|_| QuotaError::PeriodTooLong)?;
        // count / period_ns <= MAX / 1e9, cross-multiplied in u128 so nothing rounds.
        if u128::from(count) * 1_000_000_000
            > u128::from(MAX_RATE_PER_SECOND) * u128::from(period_ns)
        {
            return Err(QuotaError::RateTooHigh);
        }
        if Rate::new(count, period_ns, burst).is_none() {
            return Err(QuotaError::BurstTooLarge);
        }
        Ok(Quota { count, period_ns, burst })
    }

    /// `count` units per second, with a burst of `count`.
    ///
    /// ```
    /// let q = leakgate::Quota::per_second(100)?;
    /// assert_eq!(q.burst(), 100);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn per_second(count: u64) -> Result<Self, QuotaError> {
        Self::new(count, Duration::from_secs(1), count)
    }

    /// `count` units per minute, with a burst of `count`.
    ///
    /// ```
    /// let q = leakgate::Quota::per_minute(5)?;
    /// assert_eq!(q.emission_interval(), std::time::Duration::from_secs(12));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn per_minute(count: u64) -> Result<Self, QuotaError> {
        Self::new(count, Duration::from_secs(60), count)
    }

    /// `count` units per hour, with a burst of `count`.
    ///
    /// ```
    /// let q = leakgate::Quota::per_hour(1)?;
    /// assert_eq!(q.to_string(), "1/h");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn per_hour(count: u64) -> Result<Self, QuotaError> {
        Self::new(count, Duration::from_secs(3600), count)
    }

    /// The same rate with another burst.
    ///
    /// ```
    /// let q = leakgate::Quota::per_second(100)?.with_burst(1)?;
    /// assert_eq!(q.burst(), 1);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_burst(self, burst: u64) -> Result<Self, QuotaError> {
        Self::new(self.count, self.period(), burst)
    }

    /// Units per period.
    ///
    /// ```
    /// assert_eq!(leakgate::Quota::per_second(7)?.count(), 7);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The period over which `count` units are admitted.
    ///
    /// ```
    /// assert_eq!(leakgate::Quota::per_minute(7)?.period().as_secs(), 60);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_ns)
    }

    /// The most units admitted at once.
    ///
    /// ```
    /// assert_eq!(leakgate::Quota::per_second(7)?.with_burst(2)?.burst(), 2);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The emission interval `T = period / count`, rounded down to whole nanoseconds.
    ///
    /// The limiter itself keeps `T` exact; this is for display.
    ///
    /// ```
    /// let q = leakgate::Quota::per_second(3)?;
    /// assert_eq!(q.emission_interval().as_nanos(), 333_333_333);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.period_ns / self.count)
    }

    pub(crate) fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// The quota `rate` was compiled from.
    pub(crate) fn of_rate(rate: &Rate) -> Quota {
        let (count, period_ns, burst) = rate.quota_parts();
        Quota { count, period_ns, burst }
    }

    /// The quota compiled into fixed-point units; every validated quota compiles.
    pub(crate) fn rate(&self) -> Rate {
        Rate::new(self.count, self.period_ns, self.burst)
            .expect("Quota::new only builds quotas that compile to a Rate")
    }
}
