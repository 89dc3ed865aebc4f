//! [`AdaptiveRate`]: a rate limit that backs off on overload and recovers toward its ceiling.

use crate::sync::{lock, Mutex};
use crate::{Admitted, Clock, Denied, Limiter, Quota, QuotaError, TscClock};
use std::time::Duration;

/// Each success raises the rate by this fraction of the ceiling (at least 1 unit).
const RECOVERY_DIVISOR: u64 = 20;

/// A rate limit on calls to a service that says when it is overloaded (a 429, a 503 with
/// `Retry-After`, a "slow down"): [`overloaded`](Self::overloaded) halves the rate (at most once
/// per period of the ceiling: one burst of complaints is one overload), and with a Retry-After
/// admits nothing until exactly that much time has passed; each [`success`](Self::success)
/// raises the rate by a twentieth of the ceiling, never above it. The rate is moved with
/// [`Limiter::set_quota`], so the bucket's level is kept across every change.
///
/// ```
/// use leakgate::{AdaptiveRate, ManualClock, Quota};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let partner = AdaptiveRate::with_clock(Quota::per_second(100)?, clock.clone())?;
/// assert!(partner.check().is_ok());
/// partner.overloaded(Some(Duration::from_secs(2))); // "429, Retry-After: 2"
/// assert_eq!(partner.quota().count(), 50);
/// let denied = partner.check().unwrap_err();
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(2)));
/// clock.advance(Duration::from_secs(2));
/// assert!(partner.check().is_ok());
/// partner.success();
/// assert_eq!(partner.quota().count(), 55); // recovering toward 100
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Debug)]
pub struct AdaptiveRate<C: Clock = TscClock> {
    limiter: Limiter<C>,
    ceiling: Quota,
    state: Mutex<RateState>,
}

#[derive(Debug)]
struct RateState {
    /// The count per ceiling period in force, `1..=ceiling.count()`.
    count: u64,
    /// No admission before this clock reading (a Retry-After); 0 when none.
    hold_until_ns: u64,
    /// The last backoff's clock reading, for "once per period".
    last_backoff_ns: Option<u64>,
}

impl AdaptiveRate<TscClock> {
    /// An adaptive rate that never exceeds `ceiling` and starts there.
    ///
    /// ```
    /// let r = leakgate::AdaptiveRate::new("10/s".parse()?)?;
    /// assert_eq!(r.quota().count(), 10);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(ceiling: Quota) -> Result<Self, QuotaError> {
        Self::with_clock(ceiling, TscClock::default())
    }

    /// The algorithm's back-off step on its own, for a rate whose state is kept elsewhere (a
    /// database shared by many processes): `count` a period halved, never below one.
    ///
    /// ```
    /// assert_eq!(leakgate::AdaptiveRate::backed_off(100), 50);
    /// assert_eq!(leakgate::AdaptiveRate::backed_off(1), 1);
    /// ```
    pub fn backed_off(count: u64) -> u64 {
        (count / 2).max(1)
    }

    /// The algorithm's recovery step on its own: `count` raised by a twentieth of `ceiling` (at
    /// least one), never above `ceiling`.
    ///
    /// ```
    /// assert_eq!(leakgate::AdaptiveRate::recovered(50, 100), 55);
    /// assert_eq!(leakgate::AdaptiveRate::recovered(99, 100), 100);
    /// ```
    pub fn recovered(count: u64, ceiling: u64) -> u64 {
        let step = (ceiling / RECOVERY_DIVISOR).max(1);
        count.saturating_add(step).min(ceiling)
    }

    /// The quota in force at `count` a period of `ceiling`: the same period, the burst scaled
    /// alike (at least 1). Fails for a count of 0.
    ///
    /// ```
    /// let q = leakgate::AdaptiveRate::scaled(&"100/s burst 10".parse()?, 50)?;
    /// assert_eq!(q, "50/s burst 5".parse()?);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn scaled(ceiling: &Quota, count: u64) -> Result<Quota, QuotaError> {
        scaled(ceiling, count)
    }
}

impl<C: Clock> AdaptiveRate<C> {
    /// As [`new`](AdaptiveRate::new), on `clock`. Fails for a ceiling of bytes (back off a byte
    /// rate by hand with [`Limiter::set_quota`]).
    ///
    /// ```
    /// let r = leakgate::AdaptiveRate::with_clock("10/s".parse()?, leakgate::ManualClock::new())?;
    /// assert!(r.check().is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_clock(ceiling: Quota, clock: C) -> Result<Self, QuotaError> {
        // Every scaled quota must build: check the smallest one now.
        scaled(&ceiling, 1)?;
        Ok(AdaptiveRate {
            limiter: Limiter::with_clock(ceiling, clock),
            ceiling,
            state: Mutex::new(RateState {
                count: ceiling.count(),
                hold_until_ns: 0,
                last_backoff_ns: None,
            }),
        })
    }

    /// One call: admitted, or denied with when to retry (the end of a Retry-After hold, or the
    /// bucket's own answer).
    ///
    /// ```
    /// let r = leakgate::AdaptiveRate::with_clock("1/s".parse()?, leakgate::ManualClock::new())?;
    /// assert!(r.check().is_ok());
    /// assert!(r.check().is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check(&self) -> Result<Admitted, Denied> {
        let now = self.limiter.clock().now_ns();
        let hold = lock(&self.state).hold_until_ns;
        if now < hold {
            let wait = Duration::from_nanos(hold - now);
            return Err(Denied::new(0, wait, Some(wait)));
        }
        self.limiter.check_n_at(1, now)
    }

    /// The call succeeded: the rate recovers by a twentieth of the ceiling (at least one unit),
    /// up to the ceiling.
    ///
    /// ```
    /// let r = leakgate::AdaptiveRate::with_clock("40/s".parse()?, leakgate::ManualClock::new())?;
    /// r.overloaded(None);
    /// r.success();
    /// assert_eq!(r.quota().count(), 22);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn success(&self) {
        let mut state = lock(&self.state);
        let ceiling = self.ceiling.count();
        if state.count >= ceiling {
            return;
        }
        state.count = AdaptiveRate::recovered(state.count, ceiling);
        self.apply(state.count);
    }

    /// The service said it is overloaded, with an optional Retry-After: the rate halves (not
    /// below one unit a period; at most once per period of the ceiling), and with a Retry-After
    /// nothing is admitted until exactly that long from now (a later, longer one extends it).
    ///
    /// ```
    /// use std::time::Duration;
    /// let clock = leakgate::ManualClock::new();
    /// let r = leakgate::AdaptiveRate::with_clock("8/s".parse()?, clock.clone())?;
    /// r.overloaded(None);
    /// r.overloaded(None); // the same overload
    /// assert_eq!(r.quota().count(), 4);
    /// clock.advance(Duration::from_secs(1));
    /// r.overloaded(None);
    /// assert_eq!(r.quota().count(), 2);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn overloaded(&self, retry_after: Option<Duration>) {
        let now = self.limiter.clock().now_ns();
        let mut state = lock(&self.state);
        if let Some(wait) = retry_after {
            let wait_ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
            state.hold_until_ns = state.hold_until_ns.max(now.saturating_add(wait_ns));
        }
        let period_ns = u64::try_from(self.ceiling.period().as_nanos()).unwrap_or(u64::MAX);
        let recent = state.last_backoff_ns.is_some_and(|t| now >= t && now - t < period_ns);
        if recent {
            return;
        }
        state.last_backoff_ns = Some(now);
        state.count = AdaptiveRate::backed_off(state.count);
        self.apply(state.count);
    }

    /// The quota in force now.
    ///
    /// ```
    /// let r = leakgate::AdaptiveRate::new("10/s".parse()?)?;
    /// assert_eq!(r.quota(), "10/s".parse()?);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.limiter.quota()
    }

    /// The limiter underneath (its clock, `peek`, queue mode).
    ///
    /// ```
    /// let r = leakgate::AdaptiveRate::new("10/s".parse()?)?;
    /// assert_eq!(r.limiter().peek(), 10);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn limiter(&self) -> &Limiter<C> {
        &self.limiter
    }

    fn apply(&self, count: u64) {
        if let Ok(q) = scaled(&self.ceiling, count) {
            self.limiter.set_quota(q);
        }
    }
}

/// The ceiling's quota at `count` per its period, the burst scaled alike (at least 1).
fn scaled(ceiling: &Quota, count: u64) -> Result<Quota, QuotaError> {
    let burst = u128::from(ceiling.burst()) * u128::from(count) / u128::from(ceiling.count());
    let burst = u64::try_from(burst).unwrap_or(u64::MAX).max(1);
    Quota::new(count, ceiling.period(), burst)
}
