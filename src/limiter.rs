//! [`Limiter`]: one bucket, one atomic word, updated by compare-and-swap.
//!
//! # Implementation details
//!
//! The whole state is the theoretical arrival time `TAT`, in the rate's fixed-point units (see
//! [`crate::gcra`]) since the clock's origin. A decision reads the clock once, loads `TAT`, runs the
//! pure GCRA step, and, only if the request conforms, publishes the new `TAT` with a CAS; if the CAS
//! loses a race it retries the step against the value that won. A denial never writes, so denied
//! traffic leaves the cache line shared and scales across cores.
//!
//! Every operation on the word is `Relaxed`. The word publishes no other memory: its value is the
//! entire state, and correctness needs only that read-modify-writes of one location are totally
//! ordered, which atomicity gives at any ordering. A thread whose clock reading is older than the
//! winner's simply decides at an earlier time, which is never more permissive (see below).
//!
//! Clocks that go backwards: the step uses `max(TAT, now)`. Admission at an earlier time is never
//! easier than at a later one. `TAT` is never below the latest time the limiter has seen: an
//! admission leaves `TAT` past its time, a denial (cost within the burst) only happens when `TAT` is
//! already past the time, and the requests that take nothing raise an idle `TAT` to their time
//! (`remember`). So an admission at an earlier clock starts from `max(TAT, now) = TAT`, exactly the
//! state that admission at the latest time seen would start from.

use crate::backoff::Backoff;
use crate::clock::{Clock, TscClock};
use crate::decision::{Admitted, Denied};
use crate::gcra::{Rate, Refusal};
use crate::quota::Quota;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use std::fmt;

/// A single rate-limited bucket, shared by reference or `Arc` among threads.
///
/// ```
/// use leakgate::{Limiter, Quota};
/// let lim = Limiter::new(Quota::per_second(100)?);
/// match lim.check() {
///     Ok(_) => { /* serve the request */ }
///     Err(denied) => println!("429, retry after {:?}", denied.retry_after()),
/// }
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub struct Limiter<C: Clock = TscClock> {
    /// `TAT`: the theoretical arrival time in the rate's units since the clock's origin
    /// (`0..=u64::MAX`; 0 is a new, empty bucket). Alone on its cache line, so CAS traffic does
    /// not evict the read-only fields below from other cores.
    pub(crate) tat: CachePadded<AtomicU64>,
    pub(crate) rate: Rate,
    quota: Quota,
    pub(crate) clock: C,
}

impl Limiter<TscClock> {
    /// A limiter on the default clock ([`TscClock`]).
    ///
    /// ```
    /// let lim = leakgate::Limiter::new(leakgate::Quota::per_second(5)?);
    /// assert!(lim.check().is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(quota: Quota) -> Self {
        Self::with_clock(quota, TscClock::new())
    }
}

impl<C: Clock> Limiter<C> {
    /// A limiter reading time from `clock`.
    ///
    /// ```
    /// use leakgate::{Limiter, ManualClock, Quota};
    /// let clock = ManualClock::new();
    /// let lim = Limiter::with_clock(Quota::per_second(5)?, clock.clone());
    /// assert_eq!(lim.check_n(5).unwrap().remaining(), 0);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        let rate = Rate::new(&quota).expect("a validated Quota always compiles to a Rate");
        Limiter { tat: CachePadded::new(AtomicU64::new(0)), rate, quota, clock }
    }

    /// Checks one unit: `check_n(1)`.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert!(lim.check().is_ok());
    /// assert!(lim.check().is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check(&self) -> Result<Admitted, Denied> {
        self.check_n(1)
    }

    /// Checks a request of cost `n`: takes `n` units if they conform now, or reports when they will.
    ///
    /// `n = 0` always conforms and changes nothing; `n` above the burst is always denied, with no
    /// retry time. Never blocks, allocates or panics.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// assert_eq!(lim.check_n(7).unwrap().remaining(), 3);
    /// assert_eq!(lim.check_n(0).unwrap().remaining(), 3);
    /// assert!(lim.check_n(4).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check_n(&self, n: u64) -> Result<Admitted, Denied> {
        let now = self.rate.units_at(self.clock.now_ns());
        // Relaxed: the word is the whole state and publishes nothing else (module docs).
        let mut tat = self.tat.load(Ordering::Relaxed);
        let backoff = Backoff::new();
        loop {
            match self.rate.admit(tat, now, n, 0) {
                Ok(new_tat) if new_tat == tat => {
                    self.remember(tat, now);
                    return Ok(Admitted::from_units(tat.saturating_sub(now), self.rate.scale()));
                }
                Ok(new_tat) => {
                    // Relaxed on both outcomes: atomicity alone orders competing updates; on
                    // failure the step is simply rerun against the value that won.
                    match self.tat.compare_exchange_weak(
                        tat,
                        new_tat,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return Ok(Admitted::from_units(new_tat - now, self.rate.scale())),
                        Err(actual) => {
                            tat = actual;
                            // Lost a race: let the winner keep the cache line for a moment.
                            backoff.spin();
                        }
                    }
                }
                Err(refusal) => return Err(self.denied(tat, now, refusal)),
            }
        }
    }

    /// Records `now` in an idle bucket (`TAT < now`) by raising `TAT` to `now`, for the requests
    /// that take nothing (a peek, a cost above the burst). No answer at `now` or later changes (an
    /// idle bucket is empty either way), but a clock that later jumps back behind `now` is then
    /// held to what it would get at `now`, as for every other request. A bucket that is not idle
    /// already holds a `TAT` past `now`, so nothing is written: denials of costs within the burst
    /// and peeks at a busy bucket stay read-only.
    #[inline]
    fn remember(&self, tat: u64, now: u64) {
        if tat < now {
            // Relaxed: as for the CAS; fetch_max keeps whichever of the racing values is later.
            self.tat.fetch_max(now, Ordering::Relaxed);
        }
    }

    #[cold]
    fn denied(&self, tat: u64, now: u64, refusal: Refusal) -> Denied {
        if refusal == Refusal::Never {
            self.remember(tat, now);
        }
        Denied::from_units(tat.saturating_sub(now), refusal.wait(), self.rate.scale())
    }

    /// The quota this limiter enforces.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let q = Quota::per_minute(30)?;
    /// assert_eq!(Limiter::new(q).quota(), q);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The clock this limiter reads.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// lim.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<C: Clock> fmt::Debug for Limiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter").field("quota", &self.quota).finish_non_exhaustive()
    }
}
