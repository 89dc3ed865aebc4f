//! [`Limiter`]: one bucket, one atomic word, updated by the protocol in [`crate::bucket`].
//!
//! The whole state is the theoretical arrival time `TAT`, in the fixed-point units (see
//! [`crate::gcra`]) of the rate in force since the clock's origin. A decision reads the clock and
//! the rate once and hands the word to [`bucket::take`]: a denial is a load and a compare and
//! writes nothing, so denied traffic leaves the cache line shared and scales across cores; an
//! admission is one CAS, or under contention one `fetch_add`, so no check waits on the others for
//! long. A change of quota ([`Limiter::set_quota`]) converts the word in place
//! (`bucket/limiter_word.rs`).

use crate::bucket::{self, Changed, LimiterState, Refused, Word, SEALED};
use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::clock::TscClock;
use crate::decision::{Admitted, Denied};
use crate::gcra::{Rate, Refusal};
use crate::quota::Quota;
use crate::rate_cell::RateCell;
use crate::sync::{self, Mutex};
use core::fmt;
use crossbeam_utils::CachePadded;

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
pub struct Limiter<
    #[cfg(feature = "std")] C: Clock = TscClock,
    #[cfg(not(feature = "std"))] C: Clock,
> {
    /// `TAT` (0 is a new, empty bucket) and what a change of quota needs beside it. Alone on its
    /// cache line, so CAS traffic does not evict the read-mostly fields below from other cores.
    /// Read and written only through [`crate::bucket`].
    state: CachePadded<LimiterState>,
    /// The rate in force, and its epoch.
    rates: RateCell,
    /// Held by a change of quota: changes run one at a time (checks never take it).
    changing: Mutex<()>,
    clock: C,
}

#[cfg(feature = "std")]
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
        let state = CachePadded::new(LimiterState::new());
        Limiter { state, rates: RateCell::new(quota), changing: Mutex::new(()), clock }
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
        self.check_n_at(n, self.clock.now_ns())
    }

    /// Checks one unit at a time the caller gives: `check_n_at(1, now_ns)`.
    ///
    /// ```
    /// # use leakgate::{Clock, Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(2)?, ManualClock::new());
    /// let now = lim.clock().now_ns();
    /// assert!(lim.check_at(now).is_ok());
    /// assert!(lim.check_at(now).is_ok());
    /// assert!(lim.check_at(now).is_err());
    /// assert!(lim.check_at(now + 500_000_000).is_ok()); // half a second on
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline(always)]
    pub fn check_at(&self, now_ns: u64) -> Result<Admitted, Denied> {
        self.check_n_at(1, now_ns)
    }

    /// [`check_n`](Limiter::check_n) at the time `now_ns` the caller gives instead of reading
    /// the clock: nanoseconds of this limiter's clock, as [`Clock::now_ns`] on
    /// [`clock()`](Limiter::clock) reads them. For a loop that reads the clock once for many
    /// decisions (a burst of packets). The meaning is `check_n`'s at that time; a time earlier
    /// than one the limiter has seen is a clock that went backwards, which never admits more.
    ///
    /// ```
    /// # use leakgate::{Clock, Limiter, Quota};
    /// let lim = Limiter::new("1 Gbit/s burst 64 KiB".parse::<Quota>()?);
    /// let now = lim.clock().now_ns(); // once per burst of packets
    /// let sent = [1500u64, 1500, 64, 9000].iter().filter(|&&len| lim.check_n_at(len, now).is_ok());
    /// assert_eq!(sent.count(), 4);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline(always)]
    pub fn check_n_at(&self, n: u64, now_ns: u64) -> Result<Admitted, Denied> {
        self.take(now_ns, n, 0, |tat, now, rate| {
            Admitted::from_units(tat.saturating_sub(now), rate.scale())
        })
    }

    /// Units that would conform right now, taking nothing: `check_n(0)`'s `remaining()` (a peek
    /// records the time it saw, as a check does).
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// lim.check_n(4).unwrap();
    /// assert_eq!(lim.peek(), 6);
    /// assert_eq!(lim.peek(), 6);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn peek(&self) -> u64 {
        self.check_n(0).map_or_else(|denied| denied.remaining(), |ok| ok.remaining())
    }

    /// Whether `n` units would conform at `now_ns`, taking and writing nothing: one load and the
    /// arithmetic. A hint (the state may move before a check acts on it), for
    /// [`LeasedLimiter`](crate::LeasedLimiter), which asks before it reserves a slot for a lease;
    /// a limiter whose quota was changed answers `true` and leaves the decision to the check.
    #[cfg(feature = "std")]
    #[inline(always)]
    pub(crate) fn would_admit(&self, n: u64, now_ns: u64) -> bool {
        let (seen, epoch) = self.state.read(&self.rates);
        if epoch != 0 {
            return true;
        }
        let rate = self.rates.first();
        rate.admit(seen, rate.units_in(now_ns), n, 0).is_ok()
    }

    /// Takes `n` at the clock reading `now_ns`, allowing `max_wait_ns` of wait (see
    /// [`bucket::take`]); on success, `admitted` of the state left, the clock in units, and the
    /// rate decided on. A check that meets a change of quota decides again on the new rate.
    #[inline(always)]
    pub(crate) fn take<R>(
        &self,
        now_ns: u64,
        n: u64,
        max_wait_ns: u64,
        admitted: impl FnOnce(u64, u64, &Rate) -> R,
    ) -> Result<R, Denied> {
        // The state first, then the epoch of the rate it is counted in (a new quota's state comes
        // after its epoch): one load more than a limiter with a fixed quota. Epoch 0 (the quota
        // the limiter was made with: its rate in plain fields, origin 0) is decided here, the
        // two common answers of `bucket::take_seen` spelt out; a changed quota, a change in
        // progress and every rarer answer go out of line. Measured on the 2-core Xeon (one
        // limiter, one thread, interleaved with governor): deciding on a rate chosen at run time
        // with the word set up before the decision cost 1.05x governor's time admitted and
        // 1.14x denied; this way 1.01x and 0.98x.
        let (seen, epoch) = self.state.read(&self.rates);
        if epoch == 0 {
            let rate = self.rates.first();
            // The first rate's origin is 0: no clock reading moved up.
            let now = rate.units_in(now_ns);
            let max_wait = if max_wait_ns == 0 { 0 } else { rate.ns_to_units_ceil(max_wait_ns) };
            match rate.admit(seen, now, n, max_wait) {
                // A write (never from SEALED: nothing conforms on it below SEALED).
                Ok(new) if new != seen && new < SEALED => {
                    let word = || self.state.word(&self.rates, 0);
                    let taken = match word().compare_exchange(seen, new) {
                        Ok(()) => return Ok(admitted(new, now, rate)),
                        Err(Ok(found)) => {
                            bucket::take_after_lost_cas(&word(), rate, now, n, max_wait, found)
                        }
                        Err(Err(changed)) => Err(changed),
                    };
                    match taken {
                        Ok(Ok(tat)) if n != 0 || tat != SEALED => {
                            return Ok(admitted(tat, now, rate))
                        }
                        Ok(Err(refused)) if refused.tat != SEALED => {
                            return Err(denied(refused, now, rate))
                        }
                        _ => {}
                    }
                }
                // A denial: the clock, two loads and the arithmetic, no word set up.
                Err(Refusal::Wait(units)) if seen != SEALED => {
                    return Err(denied(
                        Refused { tat: seen, why: Refusal::Wait(units) },
                        now,
                        rate,
                    ));
                }
                // Cost 0, a cost above the burst, the end of the range: the general path.
                _ => {}
            }
        }
        self.take_changing(now_ns, n, max_wait_ns, admitted)
    }

    /// [`take`](Limiter::take) once the quota was changed, or while it changes.
    #[cold]
    #[inline(never)]
    fn take_changing<R>(
        &self,
        now_ns: u64,
        n: u64,
        max_wait_ns: u64,
        admitted: impl FnOnce(u64, u64, &Rate) -> R,
    ) -> Result<R, Denied> {
        loop {
            let (seen, epoch) = self.state.read(&self.rates);
            let changed;
            let rate = match epoch {
                0 => self.rates.first(),
                _ => match self.rates.rate_at(epoch) {
                    Some(rate) => {
                        changed = rate;
                        &changed
                    }
                    None => continue,
                },
            };
            let now = rate.units_at(now_ns);
            let max_wait = if max_wait_ns == 0 { 0 } else { rate.ns_to_units_ceil(max_wait_ns) };
            let word = self.state.word(&self.rates, epoch);
            match bucket::take_seen(&word, rate, now, n, max_wait, seen) {
                Ok(Ok(tat)) if n != 0 || tat != SEALED => return Ok(admitted(tat, now, rate)),
                Ok(Err(refused)) if refused.tat != SEALED => {
                    return Err(denied(refused, now, rate))
                }
                // A change of quota in progress (a few instructions: wait for them, on the lock
                // the change holds), or done: decide on the new rate.
                Ok(_) | Err(Changed) => drop(sync::lock(&self.changing)),
            }
        }
    }

    /// Undoes a request of `cost` units that left the state at `after`, if nothing was granted
    /// since (see [`bucket::undo`]); never across a change of quota (the state then moved).
    pub(crate) fn undo(&self, after: u64, cost: u64) -> bool {
        let (epoch, _) = self.rates.read();
        bucket::undo(&self.state.word(&self.rates, epoch), after, cost)
    }

    /// Puts `quota` in force, at once and without a restart: the units the bucket could admit now
    /// (its burst less its level `(TAT - now) / T`) stay available under the new quota, capped at
    /// its burst and rounded down to its units, as
    /// [`RuleLimiter::reload`](crate::RuleLimiter::reload) does for each key. So no change, however
    /// frequent, makes more units available than before it: a smaller burst keeps the debt it
    /// cannot hold, a larger one adds nothing at once (its units come at the new rate). Checks take no lock, except one that meets the few instructions of the
    /// conversion itself, which waits for them on the change's lock (as a keyed check waits for
    /// a slot changing key); one decided before the change counts in the level handed over.
    /// Reservations granted before keep their times; one cancelled after the change gives
    /// nothing back. Changes run one at a time.
    ///
    /// Every state after a change lies above every state before it (so no check still holding
    /// an old state can act on a new one): a change to a shorter interval while buckets are full
    /// moves the limiter's clock up by up to the old burst's duration. The clock has a century
    /// of range, so that is nothing for changes seconds apart; a deep bucket whose quota changes
    /// many times a second spends its range sooner (then it refuses, as any limiter past its
    /// range does).
    ///
    /// ```
    /// use leakgate::{Limiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let lim = Limiter::with_clock(Quota::per_second(10)?, clock.clone());
    /// lim.check_n(6).unwrap(); // 4 units available
    /// lim.set_quota("1/s burst 8".parse()?);
    /// assert_eq!(lim.quota().to_string(), "1/s burst 8");
    /// assert_eq!(lim.peek(), 4); // the 4 stay available
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(lim.peek(), 5); // one a second now, up to 8
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        let _one_at_a_time = sync::lock(&self.changing);
        self.state.change(&self.rates, quota, self.clock.now_ns());
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
        self.rates.quota()
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
        f.debug_struct("Limiter").field("quota", &self.quota()).finish_non_exhaustive()
    }
}

/// The denial of a request refused at `now` (units of `rate`).
#[cold]
fn denied(refused: Refused, now: u64, rate: &Rate) -> Denied {
    let Refused { tat, why } = refused;
    Denied::from_units(tat.saturating_sub(now), Refusal::wait(why), rate.scale())
}
