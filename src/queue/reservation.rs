//! [`Reservation`]: a place in the queue, taken with one CAS and given back on cancel.

use crate::clock::{Clock, TscClock};
use crate::decision::Denied;
use crate::gcra::Refusal;
use crate::limiter::Limiter;
use crate::sync::Ordering;
use crossbeam_utils::Backoff;
use std::fmt;
use std::time::Duration;

/// A request given a time to go. Kept unless [`cancel`](Reservation::cancel)led: dropping it does
/// not give its units back.
///
/// ```
/// use leakgate::{Limiter, ManualClock, Quota};
/// use std::time::Duration;
///
/// let lim = Limiter::with_clock(Quota::per_second(10)?.with_burst(1)?, ManualClock::new());
/// let first = lim.reserve(Duration::from_secs(1)).unwrap();
/// let second = lim.reserve(Duration::from_secs(1)).unwrap();
/// assert_eq!(first.delay(), Duration::ZERO);
/// assert_eq!(second.delay(), Duration::from_millis(100));
/// // A queue bounded at 150 ms: the third would wait 200 ms.
/// assert!(lim.reserve(Duration::from_millis(150)).is_err());
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[must_use = "a reservation is kept even if unused: wait for it or cancel it"]
pub struct Reservation<'a, C: Clock = TscClock> {
    limiter: &'a Limiter<C>,
    /// `n * S`: the units of time this reservation holds.
    cost: u64,
    /// The bucket's `TAT` just after this reservation was made.
    tat_after: u64,
    /// When it may go, in units since the clock's origin: `TAT' - tau`.
    ready_at: u64,
}

impl<C: Clock> Limiter<C> {
    /// Reserves one unit: `reserve_n(1, max_wait)`.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert!(lim.reserve(std::time::Duration::ZERO).unwrap().is_ready());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve(&self, max_wait: Duration) -> Result<Reservation<'_, C>, Denied> {
        self.reserve_n(1, max_wait)
    }

    /// Reserves `n` units, to go at the earliest time they conform, if that is at most `max_wait`
    /// from now; otherwise denies (and changes nothing). `max_wait = 0` is a [`check_n`]
    /// (`Limiter::check_n`) that hands back a reservation. Lock-free: one CAS, retried on races.
    ///
    /// The denial's `retry_after()` is how much later the same reservation would fit within
    /// `max_wait`; it is `None` when `n` is above the burst.
    ///
    /// [`check_n`]: Limiter::check_n
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::with_clock(Quota::per_second(2)?, ManualClock::new());
    /// lim.check_n(2).unwrap();
    /// let r = lim.reserve_n(2, Duration::from_secs(5)).unwrap();
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve_n(&self, n: u64, max_wait: Duration) -> Result<Reservation<'_, C>, Denied> {
        let max_wait = u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX);
        let max_wait = self.rate.ns_to_units_ceil(max_wait);
        let now = self.rate.units_at(self.clock.now_ns());
        let scale = self.rate.scale();
        let cost = n.saturating_mul(scale.interval());
        // Relaxed throughout, as in `check_n`: the word is the whole state.
        let mut tat = self.tat.load(Ordering::Relaxed);
        let backoff = Backoff::new();
        loop {
            match self.rate.admit(tat, now, n, max_wait) {
                Ok(new_tat) => {
                    let won = new_tat == tat
                        || self
                            .tat
                            .compare_exchange_weak(
                                tat,
                                new_tat,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            )
                            .map_err(|actual| tat = actual)
                            .is_ok();
                    if won {
                        let ready_at = new_tat.saturating_sub(scale.tau()).max(now);
                        return Ok(Reservation {
                            limiter: self,
                            cost,
                            tat_after: new_tat,
                            ready_at,
                        });
                    }
                    backoff.spin();
                }
                Err(refusal) => {
                    let wait = match refusal {
                        Refusal::Wait(units) => Some(units),
                        Refusal::Never => None,
                    };
                    return Err(Denied::new(tat.saturating_sub(now), wait, scale));
                }
            }
        }
    }
}

impl<'a, C: Clock> Reservation<'a, C> {
    /// The time it may go, as a reading of the limiter's clock.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// clock.set(Duration::from_secs(7));
    /// let lim = Limiter::with_clock(Quota::per_second(1)?.with_burst(1)?, clock);
    /// lim.check().unwrap();
    /// assert_eq!(lim.reserve(Duration::MAX).unwrap().ready_at(), Duration::from_secs(8));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn ready_at(&self) -> Duration {
        Duration::from_nanos(self.ready_at_ns())
    }

    /// The first clock reading at which the reservation conforms (rounded up, never early).
    pub(crate) fn ready_at_ns(&self) -> u64 {
        self.limiter.rate.first_ns_reaching(self.ready_at)
    }

    /// How long from now until it may go (zero when it already may).
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::with_clock(Quota::per_second(4)?.with_burst(1)?, ManualClock::new());
    /// lim.check().unwrap();
    /// assert_eq!(lim.reserve(Duration::MAX).unwrap().delay(), Duration::from_millis(250));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn delay(&self) -> Duration {
        Duration::from_nanos(self.ready_at_ns().saturating_sub(self.limiter.clock.now_ns()))
    }

    /// Whether it may go now.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(4)?, ManualClock::new());
    /// assert!(lim.reserve(std::time::Duration::ZERO).unwrap().is_ready());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn is_ready(&self) -> bool {
        self.delay().is_zero()
    }

    /// The limiter it was taken from.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(4)?, ManualClock::new());
    /// let r = lim.reserve(std::time::Duration::ZERO).unwrap();
    /// assert_eq!(r.limiter().quota(), lim.quota());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn limiter(&self) -> &'a Limiter<C> {
        self.limiter
    }

    /// Gives the reservation up before its time, returning its units to the bucket, less any
    /// that later reservations were already granted on top of it (they keep their places, so
    /// handing back more would let the bucket admit beyond its quota). Nothing is returned once
    /// the reservation's time has come. Returns whether anything was given back.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::with_clock(Quota::per_second(1)?.with_burst(1)?, ManualClock::new());
    /// lim.check().unwrap();
    /// let r = lim.reserve(Duration::MAX).unwrap(); // due in 1 s
    /// assert!(r.cancel());
    /// assert_eq!(lim.reserve(Duration::MAX).unwrap().delay(), Duration::from_secs(1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn cancel(self) -> bool {
        let now = self.limiter.rate.units_at(self.limiter.clock.now_ns());
        if now >= self.ready_at {
            return false;
        }
        let state = &self.limiter.tat;
        // Relaxed, as in `check_n`: the word is the whole state.
        let mut tat = state.load(Ordering::Relaxed);
        loop {
            // Units granted to later reservations since this one.
            let granted_after = tat.saturating_sub(self.tat_after);
            let refund = self.cost.saturating_sub(granted_after);
            // Never below `now`: the bucket keeps the latest time it has seen (see `Limiter`).
            let new_tat = tat.saturating_sub(refund).max(now);
            if refund == 0 || new_tat >= tat {
                return false;
            }
            match state.compare_exchange_weak(tat, new_tat, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => tat = actual,
            }
        }
    }
}

impl<C: Clock> fmt::Debug for Reservation<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation").field("ready_at", &self.ready_at()).finish_non_exhaustive()
    }
}
