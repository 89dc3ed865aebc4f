//! [`AdaptiveConcurrency`]: a concurrency limit that an algorithm moves, fed by how permits end.

use super::algorithm::{Adaptive, Algorithm, Gradient2, Outcome};
use crate::concurrency::{ConcurrencyError, ConcurrencyLimiter, MAX_PERMITS};
use crate::sync::{lock, Mutex};
use crate::{Clock, TscClock};
use std::sync::Arc;

/// A concurrency limit that follows what the protected side can take: AIMD or Gradient2 (see
/// the [`adaptive` docs](crate::docs::adaptive)) move the `max` of a [`ConcurrencyLimiter`]
/// between `min` and `max`, fed by how each permit ends: [`AdaptivePermit::success`] (its
/// latency measured on the limiter's clock), [`AdaptivePermit::dropped`] (a timeout, a 429, a
/// 5xx: overload) or [`AdaptivePermit::ignore`] (says nothing about the server; also what a
/// permit dropped without a word means).
///
/// Admission is the plain limiter's (one compare-and-swap, never waits); the feedback takes a
/// short lock after the work is done, to update the algorithm's few numbers.
///
/// ```
/// use leakgate::AdaptiveConcurrency;
///
/// let calls = AdaptiveConcurrency::aimd(1, 10, 100)?;
/// let Some(permit) = calls.try_acquire() else {
///     panic!("503: busy");
/// };
/// let outcome: Result<(), &str> = Err("504 from upstream");
/// match outcome {
///     Ok(()) => permit.success(),
///     Err(_) => permit.dropped(),
/// }
/// assert_eq!(calls.limit(), 9); // backed off by 10%
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
pub struct AdaptiveConcurrency<C: Clock = TscClock> {
    limiter: ConcurrencyLimiter,
    state: Mutex<Adaptive>,
    clock: C,
}

/// A permit of an [`AdaptiveConcurrency`]: say how its work ended, or drop it (`ignore`).
///
/// ```
/// let a = leakgate::AdaptiveConcurrency::gradient2(1, 4, 64)?;
/// a.try_acquire().unwrap().success();
/// a.try_acquire().unwrap().ignore();
/// assert_eq!(a.in_flight(), 0);
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "report how the work ended: success(), dropped() or ignore()"]
pub struct AdaptivePermit<'a, C: Clock = TscClock> {
    owner: &'a AdaptiveConcurrency<C>,
    ticket: Ticket,
}

/// A permit of an [`AdaptiveConcurrency`] behind an `Arc`, for holding across tasks (a response
/// future): as [`AdaptivePermit`].
///
/// ```
/// use std::sync::Arc;
/// let a = Arc::new(leakgate::AdaptiveConcurrency::aimd(1, 10, 10)?);
/// let p = a.try_acquire_owned().unwrap();
/// std::thread::spawn(move || p.dropped()).join().unwrap();
/// assert_eq!((a.in_flight(), a.limit()), (0, 9));
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "report how the work ended: success(), dropped() or ignore()"]
pub struct OwnedAdaptivePermit<C: Clock = TscClock> {
    owner: Arc<AdaptiveConcurrency<C>>,
    ticket: Ticket,
}

/// What a permit remembers from its acquire.
#[derive(Debug)]
struct Ticket {
    /// Still holds its permit (not yet reported or dropped).
    held: bool,
    start_ns: u64,
    generation: u64,
    in_flight: u32,
}

fn bounds(min: u32, initial: u32, max: u32) -> Result<(), ConcurrencyError> {
    if min == 0 {
        return Err(ConcurrencyError::Zero);
    }
    if max > MAX_PERMITS {
        return Err(ConcurrencyError::TooLarge(u64::from(max)));
    }
    if !(min <= initial && initial <= max) {
        return Err(ConcurrencyError::Order { min, initial, max });
    }
    Ok(())
}

impl AdaptiveConcurrency<TscClock> {
    /// AIMD between `min` and `max`, starting at `initial` (`1 <= min <= initial <= max`).
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::aimd(2, 8, 100)?;
    /// assert_eq!(a.limit(), 8);
    /// assert!(leakgate::AdaptiveConcurrency::aimd(5, 1, 100).is_err());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn aimd(min: u32, initial: u32, max: u32) -> Result<Self, ConcurrencyError> {
        Self::aimd_with_clock(min, initial, max, TscClock::default())
    }

    /// Gradient2 between `min` and `max`, starting at `initial`.
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::gradient2(2, 8, 100)?;
    /// assert_eq!(a.limit(), 8);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn gradient2(min: u32, initial: u32, max: u32) -> Result<Self, ConcurrencyError> {
        Self::gradient2_with_clock(min, initial, max, TscClock::default())
    }
}

impl<C: Clock> AdaptiveConcurrency<C> {
    /// As [`aimd`](AdaptiveConcurrency::aimd), measuring latency on `clock`.
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::aimd_with_clock(1, 4, 8, leakgate::ManualClock::new())?;
    /// assert_eq!(a.limit(), 4);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn aimd_with_clock(
        min: u32,
        initial: u32,
        max: u32,
        clock: C,
    ) -> Result<Self, ConcurrencyError> {
        Self::build(Algorithm::Aimd, min, initial, max, clock)
    }

    /// As [`gradient2`](AdaptiveConcurrency::gradient2), measuring latency on `clock`.
    ///
    /// ```
    /// let clock = leakgate::ManualClock::new();
    /// let a = leakgate::AdaptiveConcurrency::gradient2_with_clock(1, 4, 8, clock)?;
    /// assert_eq!(a.limit(), 4);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn gradient2_with_clock(
        min: u32,
        initial: u32,
        max: u32,
        clock: C,
    ) -> Result<Self, ConcurrencyError> {
        Self::build(Algorithm::Gradient2(Gradient2::default()), min, initial, max, clock)
    }

    pub(super) fn build(
        algorithm: Algorithm,
        min: u32,
        initial: u32,
        max: u32,
        clock: C,
    ) -> Result<Self, ConcurrencyError> {
        bounds(min, initial, max)?;
        Ok(AdaptiveConcurrency {
            limiter: ConcurrencyLimiter::new(initial)?,
            state: Mutex::new(Adaptive::new(algorithm, min, initial, max)),
            clock,
        })
    }

    /// A permit if fewer than [`limit`](Self::limit) are in flight; `None` at once if not.
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::aimd(1, 1, 10)?;
    /// let p = a.try_acquire().unwrap();
    /// assert!(a.try_acquire().is_none());
    /// p.success();
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn try_acquire(&self) -> Option<AdaptivePermit<'_, C>> {
        Some(AdaptivePermit { owner: self, ticket: self.take()? })
    }

    /// As [`try_acquire`](Self::try_acquire), for a limiter behind an `Arc`.
    ///
    /// ```
    /// let a = std::sync::Arc::new(leakgate::AdaptiveConcurrency::aimd(1, 1, 10)?);
    /// let p = a.try_acquire_owned().unwrap();
    /// assert!(a.try_acquire_owned().is_none());
    /// p.success();
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn try_acquire_owned(self: &Arc<Self>) -> Option<OwnedAdaptivePermit<C>> {
        Some(OwnedAdaptivePermit { owner: self.clone(), ticket: self.take()? })
    }

    fn take(&self) -> Option<Ticket> {
        if !self.limiter.try_take_one() {
            return None;
        }
        let in_flight = self.limiter.in_flight();
        let generation = lock(&self.state).generation;
        Some(Ticket { held: true, start_ns: self.clock.now_ns(), generation, in_flight })
    }

    /// The limit in force now, in `[min, max]`.
    ///
    /// ```
    /// assert_eq!(leakgate::AdaptiveConcurrency::aimd(1, 3, 10)?.limit(), 3);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn limit(&self) -> u32 {
        self.limiter.max()
    }

    /// Permits in flight now.
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::aimd(1, 3, 10)?;
    /// let _p = a.try_acquire().unwrap();
    /// assert_eq!(a.in_flight(), 1);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn in_flight(&self) -> u32 {
        self.limiter.in_flight()
    }

    /// The clock latency is measured on.
    ///
    /// ```
    /// let clock = leakgate::ManualClock::new();
    /// let a = leakgate::AdaptiveConcurrency::aimd_with_clock(1, 3, 10, clock.clone())?;
    /// assert_eq!(a.clock().now(), clock.now());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Gives `ticket`'s permit back and, with an outcome, feeds the algorithm.
    fn report(&self, ticket: &mut Ticket, outcome: Option<Outcome>) {
        if !std::mem::replace(&mut ticket.held, false) {
            return;
        }
        // The permit goes back first: the new limit applies to the next acquire.
        self.limiter.release(1);
        let Some(outcome) = outcome else { return };
        let mut state = lock(&self.state);
        state.sample(outcome, ticket.generation, ticket.in_flight);
        // Under the lock, so limits are applied in the order they were computed.
        self.limiter.set_max(state.whole());
    }

    /// [`report`](Self::report)s `ticket`'s work as a success, its latency (from acquire to now,
    /// on the limiter's clock) a sample.
    fn succeeded(&self, ticket: &mut Ticket) {
        let latency = self.clock.now_ns().saturating_sub(ticket.start_ns);
        self.report(ticket, Some(Outcome::Success(latency)));
    }
}

impl<C: Clock> AdaptivePermit<'_, C> {
    /// The work succeeded; its latency (from acquire to now, on the limiter's clock) is a sample.
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::aimd(1, 1, 10)?;
    /// a.try_acquire().unwrap().success();
    /// assert_eq!(a.limit(), 2); // a full window that succeeded: one more
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn success(mut self) {
        self.owner.succeeded(&mut self.ticket);
    }

    /// The work met overload: a timeout, a 429, a 5xx. The limit backs off.
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::aimd(1, 10, 10)?;
    /// a.try_acquire().unwrap().dropped();
    /// assert_eq!(a.limit(), 9);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn dropped(mut self) {
        self.owner.report(&mut self.ticket, Some(Outcome::Dropped));
    }

    /// The outcome says nothing about the server (a client error, a cancelled call): the permit
    /// goes back and the limit stays.
    ///
    /// ```
    /// let a = leakgate::AdaptiveConcurrency::aimd(1, 10, 10)?;
    /// a.try_acquire().unwrap().ignore();
    /// assert_eq!(a.limit(), 10);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn ignore(mut self) {
        self.owner.report(&mut self.ticket, None);
    }
}

impl<C: Clock> Drop for AdaptivePermit<'_, C> {
    fn drop(&mut self) {
        // Reported already (nothing held), or dropped without a word: `ignore`.
        self.owner.report(&mut self.ticket, None);
    }
}

impl<C: Clock> OwnedAdaptivePermit<C> {
    /// As [`AdaptivePermit::success`].
    ///
    /// ```
    /// let a = std::sync::Arc::new(leakgate::AdaptiveConcurrency::aimd(1, 1, 10)?);
    /// a.try_acquire_owned().unwrap().success();
    /// assert_eq!(a.limit(), 2);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn success(mut self) {
        self.owner.succeeded(&mut self.ticket);
    }

    /// As [`AdaptivePermit::dropped`].
    ///
    /// ```
    /// let a = std::sync::Arc::new(leakgate::AdaptiveConcurrency::aimd(1, 10, 10)?);
    /// a.try_acquire_owned().unwrap().dropped();
    /// assert_eq!(a.limit(), 9);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn dropped(mut self) {
        self.owner.report(&mut self.ticket, Some(Outcome::Dropped));
    }

    /// As [`AdaptivePermit::ignore`].
    ///
    /// ```
    /// let a = std::sync::Arc::new(leakgate::AdaptiveConcurrency::aimd(1, 10, 10)?);
    /// a.try_acquire_owned().unwrap().ignore();
    /// assert_eq!((a.limit(), a.in_flight()), (10, 0));
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn ignore(mut self) {
        self.owner.report(&mut self.ticket, None);
    }
}

impl<C: Clock> Drop for OwnedAdaptivePermit<C> {
    fn drop(&mut self) {
        self.owner.report(&mut self.ticket, None);
    }
}
