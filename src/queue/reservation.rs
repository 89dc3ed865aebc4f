//! [`Reservation`]: a place in the queue, taken with one CAS and given back on cancel.
//!
//! # Implementation details
//!
//! Reserving is a check whose GCRA step may wait: [`Rate::admit`](crate::gcra::Rate::admit) with a
//! non-zero `max_wait` admits a request whose conformance time `TAT' - tau` lies up to `max_wait`
//! ahead, and the same Relaxed CAS loop as `Limiter::check_n` publishes `TAT'`. Each reservation
//! starts where the last one ended, so without cancellations their times are in CAS order: FIFO.
//!
//! Cancelling undoes a reservation only while it is the last one made: if `TAT` still equals
//! `TAT_r`, the state it left, one CAS puts `TAT` back to `TAT_r - c`, exactly the state it started
//! from (or the clock it was made at, if that was later). Otherwise later requests were granted on
//! top of it; they keep their places, and nothing is given back. Why this is safe: while a later
//! request `L` is kept, `TAT >= TAT_L > TAT_r`, because requests only raise `TAT` and a cancel
//! only lowers it to the start of a request that is itself the last; so `TAT` never equals `TAT_r`
//! by coincidence (no ABA), and every undo is exact. Cancelling a queue from the back empties it.
//!
//! Why not x/time/rate's more generous rule (give back the cost less what was reserved after it)?
//! It is safe for one cancel, but after a partial refund the `TAT` no longer tells how much is
//! still reserved on top, and a second cancel below it can hand back units that a later kept
//! reservation's time depends on: the property test in `tests/queue_model.rs` found such a
//! history (`regression_two_cancels_in_a_row_never_give_back_too_much` in `tests/queue.rs`).
//! A hole left in the middle of the queue cannot be reused with one state word: later requests
//! already know their times.

use crate::backoff::Backoff;
use crate::clock::{Clock, TscClock};
use crate::decision::Denied;
use crate::limiter::Limiter;
use crate::sync::Ordering;
use std::fmt;
use std::time::Duration;

/// A request given a time to go: a place in the bucket's queue.
///
/// Made by [`Limiter::reserve_n`]. It is *kept* unless [`cancel`](Reservation::cancel)led:
/// dropping it does not give its units back, since the caller may already have gone. Wait for it
/// with [`wait`](Reservation::wait) (blocking), or read [`delay`](Reservation::delay) and wait
/// any other way; `Limiter::until_ready_n` (feature `tokio`) is the async form, which cancels
/// itself when dropped before its time.
///
/// # Pacing
///
/// With a burst of 1 every reservation's time is exactly one emission interval `T` after the
/// previous one's: the outputs are evenly spaced, and a caller that comes late does not catch up
/// (the next one goes `T` after it). A burst of `1 + s` is a *slack* of `s` units, like uber-go's
/// `maxSlack`: a caller that fell behind may go up to `s` units early to catch up, never more,
/// because the bucket holds at most `tau = (1 + s) * T` of credit.
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
///
/// // Ten per second with a slack of 2: after a pause, three go at once, then 100 ms apart.
/// let clock = ManualClock::new();
/// let paced = Limiter::with_clock(Quota::per_second(10)?.with_burst(3)?, clock.clone());
/// clock.advance(Duration::from_secs(60));
/// let delays: Vec<_> = (0..4).map(|_| paced.reserve(Duration::MAX).unwrap().delay()).collect();
/// assert_eq!(delays, [0, 0, 0, 100].map(Duration::from_millis));
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[must_use = "a reservation is kept even if unused: wait for it or cancel it"]
pub struct Reservation<'a, C: Clock = TscClock> {
    limiter: &'a Limiter<C>,
    /// `n * S`: the units of state this reservation holds (0 for a reservation of cost 0).
    cost: u64,
    /// `TAT_r`: the bucket's state just after this reservation was made, in units.
    tat_after: u64,
    /// When it may go, in units since the clock's origin: `max(TAT_r - tau, now)`.
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
    /// from now; otherwise denies and changes nothing. At most `max_wait / T` units are ever
    /// queued. `max_wait = 0` is a [`check_n`](Limiter::check_n) that hands back a reservation;
    /// `Duration::MAX` never denies a cost within the burst. Lock-free: one CAS, retried on races.
    ///
    /// On denial, `retry_after()` is how much later the same reservation would fit within
    /// `max_wait`, and `None` when `n` is above the burst (it can never go). `n = 0` is always
    /// ready and takes nothing.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::with_clock(Quota::per_second(2)?, ManualClock::new());
    /// lim.check_n(2).unwrap();
    /// let r = lim.reserve_n(2, Duration::from_secs(5)).unwrap();
    /// assert_eq!(r.delay(), Duration::from_secs(1));
    /// let denied = lim.reserve_n(2, Duration::from_millis(1500)).unwrap_err();
    /// assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve_n(&self, n: u64, max_wait: Duration) -> Result<Reservation<'_, C>, Denied> {
        if n == 0 || n > self.quota().burst() {
            // Nothing to queue: a peek, or a cost that can never go. `check_n` answers both and
            // records the time in an idle bucket, which keeps the backwards-clock guarantee.
            self.check_n(n)?;
            let now = self.rate.units_at(self.clock.now_ns());
            return Ok(Reservation { limiter: self, cost: 0, tat_after: 0, ready_at: now });
        }
        let max_wait = self.rate.ns_to_units_ceil(duration_ns(max_wait));
        let now = self.rate.units_at(self.clock.now_ns());
        let scale = self.rate.scale();
        // Relaxed, as in `check_n`: the word is the whole state and publishes nothing else.
        let mut tat = self.tat.load(Ordering::Relaxed);
        let backoff = Backoff::new();
        loop {
            let new_tat = match self.rate.admit(tat, now, n, max_wait) {
                Ok(new_tat) => new_tat,
                Err(refusal) => {
                    return Err(Denied::from_units(tat.saturating_sub(now), refusal.wait(), scale));
                }
            };
            // Relaxed on both outcomes: atomicity alone orders competing updates; on failure the
            // step is rerun against the value that won, so places are handed out in CAS order.
            match self.tat.compare_exchange_weak(tat, new_tat, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    // 1 <= n <= burst: the cost is at most tau, and the step added it to `tat`.
                    let cost = n * scale.interval();
                    let ready_at = new_tat.saturating_sub(scale.tau()).max(now);
                    return Ok(Reservation { limiter: self, cost, tat_after: new_tat, ready_at });
                }
                Err(actual) => {
                    tat = actual;
                    backoff.spin();
                }
            }
        }
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<'a, C: Clock> Reservation<'a, C> {
    /// The time it may go, as a reading of the limiter's clock (the first nanosecond at which the
    /// request conforms: never early).
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

    /// [`ready_at`](Reservation::ready_at) in nanoseconds of the limiter's clock.
    pub(crate) fn ready_at_ns(&self) -> u64 {
        self.limiter.rate.first_ns_reaching(self.ready_at)
    }

    /// How long from now until it may go (zero once it may).
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

    /// Gives the reservation up before its time, promising not to go. If it is still the last
    /// request the bucket granted, its units go back (the bucket is as if it had never been
    /// made); if later requests were granted after it, they keep their places and nothing comes
    /// back, since handing back units they stand on could let the bucket exceed its quota.
    /// Nothing comes back once its time has come. Returns whether anything was given back.
    /// Lock-free: one CAS.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::with_clock(Quota::per_second(1)?.with_burst(1)?, ManualClock::new());
    /// lim.check().unwrap();
    /// let first = lim.reserve(Duration::MAX).unwrap(); // due in 1 s
    /// let second = lim.reserve(Duration::MAX).unwrap(); // due in 2 s
    /// assert!(!first.cancel(), "the second stands on it");
    /// assert!(second.cancel());
    /// assert_eq!(lim.reserve(Duration::MAX).unwrap().delay(), Duration::from_secs(2));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn cancel(self) -> bool {
        let now = self.limiter.rate.units_at(self.limiter.clock.now_ns());
        if self.cost == 0 || now >= self.ready_at {
            return false;
        }
        // Its start: `TAT_r = start + cost`, and `start > now` here, since the reservation is not
        // yet due (`TAT_r - tau > now` and `cost <= tau`): the undo never moves `TAT` behind the
        // clock.
        let start = self.tat_after - self.cost;
        // Relaxed, as in `check_n`: the word is the whole state and publishes nothing else. A
        // strong CAS, once: it succeeds only while no other request has been granted since.
        self.limiter
            .tat
            .compare_exchange(self.tat_after, start, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

impl<C: Clock> fmt::Debug for Reservation<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation").field("ready_at", &self.ready_at()).finish_non_exhaustive()
    }
}
