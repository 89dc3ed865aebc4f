//! [`Limiter`]: one bucket, one atomic word, updated by the protocol in [`crate::bucket`].
//!
//! The whole state is the theoretical arrival time `TAT`, in the rate's fixed-point units (see
//! [`crate::gcra`]) since the clock's origin. A decision reads the clock once and hands the word
//! to [`bucket::take`]: a denial is a load and a compare and writes nothing, so denied traffic
//! leaves the cache line shared and scales across cores; an admission is one CAS, or under
//! contention one `fetch_add`, so no check waits on the others for long.

use crate::bucket::{self, Refused};
use crate::clock::{Clock, TscClock};
use crate::decision::{Admitted, Denied};
use crate::gcra::{Rate, Refusal};
use crate::quota::Quota;
use crate::sync::AtomicU64;
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
    /// Read and written only through [`crate::bucket`].
    tat: CachePadded<AtomicU64>,
    rate: Rate,
    quota: Quota,
    clock: C,
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
        let rate = quota.rate();
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
    #[inline(always)]
    pub fn check_n(&self, n: u64) -> Result<Admitted, Denied> {
        let now = self.now();
        let tat = self.take(now, n, 0)?;
        Ok(Admitted::from_units(tat.saturating_sub(now), self.rate.scale()))
    }

    /// The clock's reading, in the rate's units.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.rate.units_at(self.clock.now_ns())
    }

    /// Takes `n` at `now` allowing `max_wait` units of wait (see [`bucket::take`]): the state
    /// left on success.
    #[inline]
    pub(crate) fn take(&self, now: u64, n: u64, max_wait: u64) -> Result<u64, Denied> {
        match bucket::take(&*self.tat, &self.rate, now, n, max_wait) {
            Ok(Ok(tat)) => Ok(tat),
            Ok(Err(refused)) => Err(self.denied(refused, now)),
            Err(never) => match never {},
        }
    }

    /// Undoes a request of `cost` units that left the state at `after`, if nothing was granted
    /// since (see [`bucket::undo`]).
    pub(crate) fn undo(&self, after: u64, cost: u64) -> bool {
        bucket::undo(&*self.tat, after, cost)
    }

    #[cold]
    fn denied(&self, refused: Refused, now: u64) -> Denied {
        let Refused { tat, why } = refused;
        Denied::from_units(tat.saturating_sub(now), Refusal::wait(why), self.rate.scale())
    }

    /// The compiled rate.
    #[inline]
    pub(crate) fn rate(&self) -> &Rate {
        &self.rate
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
