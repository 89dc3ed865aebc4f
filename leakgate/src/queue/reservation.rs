//! [`Reservation`]: a place in the queue, taken with one CAS and given back on cancel.
//!
//! # Implementation details
//!
//! Reserving is a check whose GCRA step may wait: [`Rate::admit`](crate::gcra::Rate::admit) with a
//! non-zero `max_wait` admits a request whose conformance time `TAT' - tau` lies up to `max_wait`
//! ahead, and the bucket protocol ([`crate::bucket::take`]) publishes `TAT'` as for a check. Each
//! reservation starts where the last one ended, so without cancellations their times are in the
//! order their writes reached the word: FIFO.
//!
//! A reservation reaches the limiter that granted it through [`Lane`], borrowed or shared in an
//! `Arc`, so one type serves a `Limiter` and a keyed bucket, on the stack or moved to another
//! thread or task.
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

use crate::clock::Clock;
use crate::decision::Denied;
use crate::gcra::Rate;
use crate::limiter::Limiter;
use std::fmt;
use std::sync::Arc;
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
pub struct Reservation<'a> {
    lane: LaneRef<'a>,
    place: Place,
}

/// The limiter a reservation came from, borrowed or shared.
enum LaneRef<'a> {
    Borrowed(&'a dyn Lane),
    Shared(Arc<dyn Lane + 'a>),
}

/// What a reservation needs from the limiter that granted it.
pub(crate) trait Lane: Send + Sync {
    /// The limiter's clock, in nanoseconds.
    fn clock_ns(&self) -> u64;
    /// Undoes `place` if it is still the last request its bucket granted (see [`Place`]).
    fn give_back(&self, place: &Place) -> bool;
}

/// A granted place in a bucket's queue.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// The rate it was granted at (its units are the fields' below; a change of quota later
    /// does not move a reservation already granted).
    pub(crate) rate: Rate,
    /// `n * S`: the units of state this reservation holds (0 for a reservation of cost 0).
    pub(crate) cost: u64,
    /// `TAT_r`: the bucket's state just after this reservation was made, in units.
    pub(crate) tat_after: u64,
    /// When it may go, in units since the clock's origin: `max(TAT_r - tau, now)`.
    pub(crate) ready_at: u64,
    /// Where its bucket is, for a lane that keeps many (a keyed limiter's slot: table-wide
    /// group index, slot, version); `None` for a limiter's one bucket, or a place of cost 0.
    pub(crate) slot: Option<(usize, usize, u32)>,
}

impl Place {
    /// The place of a request of cost `n` granted at `now` that left the state at `tat_after`.
    pub(crate) fn granted(rate: &Rate, now: u64, n: u64, tat_after: u64) -> Place {
        Place::granted_in(rate, now, n, tat_after, None)
    }

    /// As [`Place::granted`], in the bucket at `slot` of a lane that keeps many.
    pub(crate) fn granted_in(
        rate: &Rate,
        now: u64,
        n: u64,
        tat_after: u64,
        slot: Option<(usize, usize, u32)>,
    ) -> Place {
        let cost = if n == 0 { 0 } else { rate.cost(n) };
        let ready_at =
            if n == 0 { now } else { tat_after.saturating_sub(rate.scale().tau()).max(now) };
        Place { rate: *rate, cost, tat_after, ready_at, slot }
    }
}

impl<C: Clock> Lane for Limiter<C> {
    fn clock_ns(&self) -> u64 {
        self.clock().now_ns()
    }

    fn give_back(&self, place: &Place) -> bool {
        self.undo(place.tat_after, place.cost)
    }
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
    pub fn reserve(&self, max_wait: Duration) -> Result<Reservation<'_>, Denied> {
        self.reserve_n(1, max_wait)
    }

    /// Reserves `n` units, to go at the earliest time they conform, if that is at most `max_wait`
    /// from now; otherwise denies and changes nothing. At most `max_wait / T` units are ever
    /// queued. `max_wait = 0` is a [`check_n`](Limiter::check_n) that hands back a reservation;
    /// `Duration::MAX` never denies a cost within the burst. Lock-free.
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
    pub fn reserve_n(&self, n: u64, max_wait: Duration) -> Result<Reservation<'_>, Denied> {
        let place = self.place(n, max_wait)?;
        Ok(Reservation::borrowed(self, place))
    }

    /// [`reserve_n`](Limiter::reserve_n) for a limiter in an `Arc`: the reservation holds a clone
    /// of the `Arc`, so it can be moved to another thread or task and outlive this borrow.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let lim = Arc::new(Limiter::with_clock(Quota::per_second(2)?, ManualClock::new()));
    /// let r = lim.reserve_n_owned(1, Duration::ZERO).unwrap();
    /// std::thread::spawn(move || r.wait()).join().unwrap();
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve_n_owned(
        self: &Arc<Self>,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'static>, Denied>
    where
        C: 'static,
    {
        let place = self.place(n, max_wait)?;
        Ok(Reservation::shared(self.clone(), place))
    }

    /// Takes `n` units allowing `max_wait`, and says where they are.
    fn place(&self, n: u64, max_wait: Duration) -> Result<Place, Denied> {
        self.place_at(n, max_wait, self.clock().now_ns())
    }

    /// [`reserve_n`](Limiter::reserve_n) at the time `now_ns` the caller gives (nanoseconds of
    /// this limiter's clock, as for [`check_n_at`](Limiter::check_n_at)).
    ///
    /// ```
    /// # use leakgate::{Clock, Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::with_clock(Quota::per_second(10)?.with_burst(1)?, ManualClock::new());
    /// let now = lim.clock().now_ns();
    /// assert!(lim.reserve_n_at(1, Duration::ZERO, now).is_ok());
    /// let r = lim.reserve_n_at(1, Duration::from_secs(1), now).unwrap();
    /// assert_eq!(r.ready_at(), Duration::from_millis(100));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve_n_at(
        &self,
        n: u64,
        max_wait: Duration,
        now_ns: u64,
    ) -> Result<Reservation<'_>, Denied> {
        let place = self.place_at(n, max_wait, now_ns)?;
        Ok(Reservation::borrowed(self, place))
    }

    /// Takes `n` units at `now_ns` allowing `max_wait`, and says where they are.
    fn place_at(&self, n: u64, max_wait: Duration, now_ns: u64) -> Result<Place, Denied> {
        // A wait of 0 ns allows nothing past the boundary: the meter's check.
        self.take(now_ns, n, duration_ns(max_wait), |tat_after, now, rate| {
            Place::granted(rate, now, n, tat_after)
        })
    }
}

impl<'a> Reservation<'a> {
    /// A reservation of `place`, granted by `lane`.
    pub(crate) fn borrowed(lane: &'a dyn Lane, place: Place) -> Self {
        Reservation { lane: LaneRef::Borrowed(lane), place }
    }

    /// A reservation of `place`, granted by `lane`, holding it.
    pub(crate) fn shared(lane: Arc<dyn Lane + 'a>, place: Place) -> Self {
        Reservation { lane: LaneRef::Shared(lane), place }
    }

    fn lane(&self) -> &dyn Lane {
        match &self.lane {
            LaneRef::Borrowed(lane) => *lane,
            LaneRef::Shared(lane) => &**lane,
        }
    }

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
        self.place.rate.first_ns_reaching(self.place.ready_at)
    }

    /// The limiter's clock, in nanoseconds.
    pub(crate) fn clock_ns(&self) -> u64 {
        self.lane().clock_ns()
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
        Duration::from_nanos(self.ready_at_ns().saturating_sub(self.clock_ns()))
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
        let lane = self.lane();
        let now = self.place.rate.units_at(lane.clock_ns());
        // Not yet due: `TAT_r - tau > now`, and the cost is at most tau, so the undo's target
        // `TAT_r - cost` is past the clock: the undo never moves `TAT` behind the time it was
        // asked at.
        self.place.cost != 0 && now < self.place.ready_at && lane.give_back(&self.place)
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl fmt::Debug for Reservation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation").field("ready_at", &self.ready_at()).finish_non_exhaustive()
    }
}
