//! What a quota is: `count` units per `period`, at most `burst` at once, validated once.

use crate::gcra::Rate;
use crate::parse_message::ParseMessage;
use core::fmt;
use core::time::Duration;

/// The highest rate a quota may have: 10^11 units per second.
///
/// Above it, one fixed-point time unit would be so short that 2^64 of them would cover less than
/// about six years of clock, so the limiter would saturate in a long-running process.
pub const MAX_RATE_PER_SECOND: u64 = 100_000_000_000;

/// The highest rate of a byte quota: 5 * 10^10 bytes per second, a 400 Gbit/s line metered in
/// bytes.
///
/// A byte quota up to this rate stays correct for at least 10 years of clock with its whole
/// burst on top (11.7 years at this rate with a small burst; 100 years up to 10^9 bytes per
/// second, as every quota); a faster one is refused with [`QuotaError::ByteRateTooHigh`].
pub const MAX_BYTE_RATE_PER_SECOND: u64 = 50_000_000_000;

/// Ten years of 365.25 days in nanoseconds: the clock range every byte quota above 10^9 bytes
/// per second is correct for, with its whole bucket on top.
const BYTE_CLOCK_HORIZON_NS: u64 = 315_576_000_000_000_000;

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
/// A *byte quota* counts bytes: a packet of `L` bytes is `check_n(L)`. Built with
/// [`Quota::bytes`], [`Quota::bytes_per_second`] or [`Quota::bits_per_second`], or from text in
/// bytes or bits with SI or IEC prefixes: `"10 MB/s burst 64 KiB"`, `"1 Gbit/s burst 1 MB"`,
/// `"400 Gbit/s"`. Bits are exact (8 to a byte: `1 Gbit/s` is 125,000,000 bytes a second, `1
/// bit/s` one byte every 8 seconds), and a byte quota prints in bytes. Up to
/// [`MAX_BYTE_RATE_PER_SECOND`] (400 Gbit/s).
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
/// let line: Quota = "1 Gbit/s burst 1 MB".parse()?;
/// assert_eq!(line, Quota::bytes(125_000_000, Duration::from_secs(1), 1_000_000)?);
/// assert_eq!(line.to_string(), "125 MB/s burst 1 MB");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    count: u64,
    /// The period in nanoseconds; at least 1, at most `u64::MAX` (about 584 years).
    period_ns: u64,
    burst: u64,
    /// Whether the units are bytes: then the quota prints in bytes and its range is that of
    /// [`MAX_BYTE_RATE_PER_SECOND`]. Two quotas that differ only here are not equal.
    bytes: bool,
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
    /// A byte quota of more than [`MAX_BYTE_RATE_PER_SECOND`] bytes (400 Gbit/s) per second.
    ByteRateTooHigh,
    /// The bucket, `burst * T`, is too long to keep exact beside a century of clock (longer than
    /// about 480 years, or 95 when `T` is not a whole number of nanoseconds; above 10^9 units
    /// per second, longer than half the clock's range, and for a byte quota longer than what
    /// leaves 10 years of clock).
    BurstTooLarge,
    /// A quota string did not parse; the message names the bad part.
    Parse(ParseMessage),
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
            Self::ByteRateTooHigh => f.write_str(
                "the rate of a byte quota must be at most 50 GB/s (400 Gbit/s): faster, its \
                 clock would run out within 10 years",
            ),
            Self::BurstTooLarge => f.write_str(
                "burst * (period / count) is too long: the bucket cannot stay exact beside a century of clock",
            ),
            Self::Parse(msg) => write!(f, "invalid quota: {msg}"),
        }
    }
}

impl core::error::Error for QuotaError {}

impl QuotaError {
    /// A quota string that did not parse, with the message `args` formats to.
    pub(crate) fn parse(args: fmt::Arguments<'_>) -> Self {
        QuotaError::Parse(ParseMessage::new(args))
    }
}

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
        Self::build(count, period, burst, false)
    }

    /// A byte quota: `count` bytes per `period`, at most `burst` bytes at once. A packet of `L`
    /// bytes is then `check_n(L)`.
    ///
    /// Up to [`MAX_BYTE_RATE_PER_SECOND`] (400 Gbit/s): faster is
    /// [`QuotaError::ByteRateTooHigh`]. Such a quota is exact for at least 10 years of clock
    /// with its whole burst on top (at 400 Gbit/s, `2^64 / 50` ns = 11.7 years less the burst's
    /// own time), and for 100 years up to 10^9 bytes per second; a burst that would leave less
    /// is [`QuotaError::BurstTooLarge`].
    ///
    /// ```
    /// use leakgate::{Quota, QuotaError};
    /// use std::time::Duration;
    /// let q = Quota::bytes(10_000_000, Duration::from_secs(1), 64 * 1024)?;
    /// assert_eq!(q.to_string(), "10 MB/s burst 64 KiB");
    /// assert!(q.is_bytes());
    /// let too_fast = Quota::bytes(60_000_000_000, Duration::from_secs(1), 1500);
    /// assert_eq!(too_fast, Err(QuotaError::ByteRateTooHigh));
    /// # Ok::<(), QuotaError>(())
    /// ```
    pub fn bytes(count: u64, period: Duration, burst: u64) -> Result<Self, QuotaError> {
        Self::build(count, period, burst, true)
    }

    /// A byte quota of `bytes` bytes per second, with a burst of `bytes`.
    ///
    /// ```
    /// let q = leakgate::Quota::bytes_per_second(125_000_000)?;
    /// assert_eq!(q.to_string(), "125 MB/s");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn bytes_per_second(bytes: u64) -> Result<Self, QuotaError> {
        Self::bytes(bytes, Duration::from_secs(1), bytes)
    }

    /// A byte quota of `bits` bits per second, exactly: `bits / 8` bytes a second, kept as a
    /// whole number of bytes per a whole number of seconds (`12` bits a second is 3 bytes every
    /// 2 seconds). The burst is one second's bytes, rounded up.
    ///
    /// ```
    /// use leakgate::Quota;
    /// use std::time::Duration;
    /// assert_eq!(Quota::bits_per_second(1_000_000_000)?, Quota::bytes_per_second(125_000_000)?);
    /// assert_eq!(Quota::bits_per_second(1)?, Quota::bytes(1, Duration::from_secs(8), 1)?);
    /// assert_eq!(Quota::bits_per_second(12)?.to_string(), "3 B/2s burst 2 B");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn bits_per_second(bits: u64) -> Result<Self, QuotaError> {
        Self::bits(bits, 1_000_000_000, bits.div_ceil(8))
    }

    /// `bits` bits per `period_ns` with a burst of `burst` bytes, as a byte quota: `bits / g`
    /// bytes per `period_ns * 8 / g`, with `g` the largest of 8, 4, 2, 1 that divides `bits`.
    pub(crate) fn bits(bits: u64, period_ns: u64, burst: u64) -> Result<Self, QuotaError> {
        let g = 1u64 << bits.trailing_zeros().min(3);
        let period = u128::from(period_ns) * u128::from(8 / g);
        let period = u64::try_from(period).map_err(|_| QuotaError::PeriodTooLong)?;
        Self::bytes(bits / g, Duration::from_nanos(period), burst)
    }

    fn build(count: u64, period: Duration, burst: u64, bytes: bool) -> Result<Self, QuotaError> {
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
        let above =
            |max: u64| u128::from(count) * 1_000_000_000 > u128::from(max) * u128::from(period_ns);
        if bytes && above(MAX_BYTE_RATE_PER_SECOND) {
            return Err(QuotaError::ByteRateTooHigh);
        }
        if above(MAX_RATE_PER_SECOND) {
            return Err(QuotaError::RateTooHigh);
        }
        let rate = Rate::new(count, period_ns, burst).ok_or(QuotaError::BurstTooLarge)?;
        // Above 10^9 units a second `Rate` promises only half the clock's range to the bucket;
        // a byte quota keeps 10 years of clock with its whole bucket on top.
        if bytes && above(1_000_000_000) {
            let horizon = rate.units_at(BYTE_CLOCK_HORIZON_NS);
            if horizon.checked_add(rate.scale().tau()).is_none_or(|end| end == u64::MAX) {
                return Err(QuotaError::BurstTooLarge);
            }
        }
        Ok(Quota { count, period_ns, burst, bytes })
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
        Self::build(self.count, self.period(), burst, self.bytes)
    }

    /// Whether this is a byte quota (its units are bytes).
    ///
    /// ```
    /// use leakgate::Quota;
    /// assert!("10 MB/s".parse::<Quota>()?.is_bytes());
    /// assert!(!"10/s".parse::<Quota>()?.is_bytes());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn is_bytes(&self) -> bool {
        self.bytes
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

    /// The quota `rate` was compiled from, in bytes if `bytes`.
    pub(crate) fn of_rate(rate: &Rate, bytes: bool) -> Quota {
        let (count, period_ns, burst) = rate.quota_parts();
        Quota { count, period_ns, burst, bytes }
    }

    /// The quota compiled into fixed-point units; every validated quota compiles.
    pub(crate) fn rate(&self) -> Rate {
        Rate::new(self.count, self.period_ns, self.burst)
            .expect("Quota::new only builds quotas that compile to a Rate")
    }
}
