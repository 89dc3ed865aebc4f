//! [`ConcurrencyLimiter`]: at most `max` permits in flight, lock-free to take, FIFO to wait for;
//! and the [`Permit`]s and [`OwnedPermit`]s it hands out, given back on drop (one file: a permit
//! is the limiter's receipt, and each needs the other).

use super::error::{checked, ConcurrencyError};
use super::queue::{Enqueued, Queue};
use super::state::{State, MAX_PERMITS};
use crossbeam_utils::CachePadded;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// At most `max` permits in flight: a bound on how many things happen at once (database
/// connections, calls to a partner, jobs on a GPU), where a [`Limiter`](crate::Limiter) bounds
/// how often.
///
/// [`try_acquire`](Self::try_acquire) is one compare-and-swap on one word and never waits, locks
/// or allocates; a refusal writes nothing. [`acquire_timeout`](Self::acquire_timeout) and the
/// async [`acquire`](Self::acquire) wait in a first-come, first-served queue; while anyone waits,
/// `try_acquire` refuses too, so a stream of newcomers cannot starve a waiter. A [`Permit`] gives
/// its permits back when dropped. [`set_max`](Self::set_max) changes the limit live: lowering it
/// revokes nothing, and new permits wait until fewer than the new `max` are in flight.
///
/// ```
/// use leakgate::ConcurrencyLimiter;
/// use std::time::Duration;
///
/// let db = ConcurrencyLimiter::new(20)?; // the pool has 20 connections
/// let Some(permit) = db.try_acquire() else {
///     panic!("503: busy");
/// };
/// assert_eq!(db.in_flight(), 1);
/// drop(permit);
/// let waited = db.acquire_timeout(Duration::from_millis(50)); // waits its turn, or gives up
/// assert!(waited.is_some());
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
pub struct ConcurrencyLimiter {
    /// `in_flight`, `max` and `QUEUED` in one word (see `state.rs`); on a line of its own, so
    /// the queue's lock does not share it.
    state: CachePadded<State>,
    queue: Queue,
}

impl ConcurrencyLimiter {
    /// A limit of `max` permits in flight, `1..=MAX_PERMITS`.
    ///
    /// ```
    /// use leakgate::{ConcurrencyError, ConcurrencyLimiter};
    /// assert_eq!(ConcurrencyLimiter::new(5)?.max(), 5);
    /// assert_eq!(ConcurrencyLimiter::new(0).unwrap_err(), ConcurrencyError::Zero);
    /// # Ok::<(), ConcurrencyError>(())
    /// ```
    pub fn new(max: u32) -> Result<Self, ConcurrencyError> {
        let max = checked(u64::from(max))?;
        Ok(ConcurrencyLimiter { state: CachePadded::new(State::new(max)), queue: Queue::default() })
    }

    /// One permit if one is free now and nobody waits; `None` otherwise. Never waits.
    ///
    /// ```
    /// let c = leakgate::ConcurrencyLimiter::new(1)?;
    /// let held = c.try_acquire().unwrap();
    /// assert!(c.try_acquire().is_none());
    /// # drop(held);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Option<Permit<'_>> {
        self.try_acquire_n(1)
    }

    /// `n` permits at once if they fit now and nobody waits; `None` otherwise (also when
    /// `n > max`). `n = 0` always succeeds and holds nothing.
    ///
    /// ```
    /// let c = leakgate::ConcurrencyLimiter::new(4)?;
    /// let three = c.try_acquire_n(3).unwrap();
    /// assert!(c.try_acquire_n(2).is_none());
    /// assert_eq!(c.in_flight(), 3);
    /// # drop(three);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Option<Permit<'_>> {
        if n == 0 {
            return Some(Permit { limiter: self, n });
        }
        // Not `then_some(Permit ..)`: that builds the permit, and so gives back `n` on its drop,
        // even when nothing was taken.
        if self.state.try_add(n, true) {
            Some(Permit { limiter: self, n })
        } else {
            None
        }
    }

    /// As [`try_acquire`](Self::try_acquire), for a limiter behind an `Arc`: the permit can move
    /// to another task or thread.
    ///
    /// ```
    /// let c = std::sync::Arc::new(leakgate::ConcurrencyLimiter::new(1)?);
    /// let p = c.try_acquire_owned().unwrap();
    /// assert!(c.try_acquire_owned().is_none());
    /// drop(p);
    /// assert!(c.try_acquire_owned().is_some());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn try_acquire_owned(self: &Arc<Self>) -> Option<OwnedPermit> {
        if self.state.try_add(1, true) {
            Some(OwnedPermit { limiter: self.clone(), n: 1 })
        } else {
            None
        }
    }

    /// One permit, waiting at most `timeout` for it in turn (first come, first served); `None`
    /// if it did not come in time.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = leakgate::ConcurrencyLimiter::new(1)?;
    /// let held = c.try_acquire().unwrap();
    /// assert!(c.acquire_timeout(Duration::from_millis(1)).is_none());
    /// drop(held);
    /// assert!(c.acquire_timeout(Duration::from_millis(1)).is_some());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn acquire_timeout(&self, timeout: Duration) -> Option<Permit<'_>> {
        self.acquire_n_timeout(1, timeout)
    }

    /// `n` permits, waiting at most `timeout` in turn. A request for more than `max` waits for
    /// `max` to rise (and those behind it wait too); one for more than
    /// [`MAX_PERMITS`](crate::MAX_PERMITS) is `None` at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = leakgate::ConcurrencyLimiter::new(3)?;
    /// assert_eq!(c.acquire_n_timeout(3, Duration::ZERO).unwrap().count(), 3);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn acquire_n_timeout(&self, n: u32, timeout: Duration) -> Option<Permit<'_>> {
        if let Some(p) = self.try_acquire_n(n) {
            return Some(p);
        }
        if n > MAX_PERMITS || timeout.is_zero() {
            return None;
        }
        // A timeout too long for the clock waits as long as the clock can count.
        let deadline = Instant::now().checked_add(timeout);
        let deadline = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(1 << 40));
        match self.queue.enqueue(&self.state, n, None) {
            Enqueued::Granted => Some(Permit { limiter: self, n }),
            Enqueued::Waiting(node) => {
                if self.queue.wait_until(&self.state, &node, deadline) {
                    Some(Permit { limiter: self, n })
                } else {
                    None
                }
            }
        }
    }

    /// Permits in flight now (held, or granted to a waiter that has yet to wake). May exceed
    /// [`max`](Self::max) for a while after `max` was lowered.
    ///
    /// ```
    /// let c = leakgate::ConcurrencyLimiter::new(3)?;
    /// let _p = c.try_acquire_n(2).unwrap();
    /// assert_eq!(c.in_flight(), 2);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn in_flight(&self) -> u32 {
        self.state.load().in_flight
    }

    /// The limit now.
    ///
    /// ```
    /// let c = leakgate::ConcurrencyLimiter::new(3)?;
    /// c.set_max(7);
    /// assert_eq!(c.max(), 7);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn max(&self) -> u32 {
        self.state.load().max
    }

    /// How many wait for permits now.
    ///
    /// ```
    /// assert_eq!(leakgate::ConcurrencyLimiter::new(3)?.waiting(), 0);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Changes the limit while permits are held. Lowering it revokes nothing: new permits wait
    /// until fewer than the new `max` are in flight. Raising it serves waiters at once. `0`
    /// admits nothing until raised; values above [`MAX_PERMITS`](crate::MAX_PERMITS) are that.
    ///
    /// ```
    /// let c = leakgate::ConcurrencyLimiter::new(3)?;
    /// let held = c.try_acquire_n(3).unwrap();
    /// c.set_max(1);
    /// assert_eq!(c.in_flight(), 3); // nothing revoked
    /// drop(held);
    /// let one = c.try_acquire().unwrap();
    /// assert!(c.try_acquire().is_none());
    /// # drop(one);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn set_max(&self, max: u32) {
        if self.state.set_max(max) {
            self.queue.serve(&self.state);
        }
    }

    /// Gives back `n` permits (a permit's drop; an adaptive permit's report).
    #[inline]
    pub(crate) fn release(&self, n: u32) {
        if n != 0 && self.state.release(n) {
            self.queue.serve(&self.state);
        }
    }

    /// Takes one permit, for a caller that counts it itself (the adaptive permits) and gives it
    /// back with [`release`](Self::release).
    pub(crate) fn try_take_one(&self) -> bool {
        self.state.try_add(1, true)
    }

    pub(super) fn state(&self) -> &State {
        &self.state
    }

    pub(super) fn queue(&self) -> &Queue {
        &self.queue
    }
}

/// Permits taken from a [`ConcurrencyLimiter`], given back when this is dropped.
///
/// ```
/// use leakgate::ConcurrencyLimiter;
///
/// let pool = ConcurrencyLimiter::new(2)?;
/// let permit = pool.try_acquire_n(2).unwrap();
/// assert_eq!(permit.count(), 2);
/// assert!(pool.try_acquire().is_none());
/// drop(permit);
/// assert_eq!(pool.in_flight(), 0);
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct Permit<'a> {
    pub(super) limiter: &'a ConcurrencyLimiter,
    pub(super) n: u32,
}

impl Permit<'_> {
    /// How many permits this holds.
    ///
    /// ```
    /// let pool = leakgate::ConcurrencyLimiter::new(5)?;
    /// assert_eq!(pool.try_acquire_n(3).unwrap().count(), 3);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn count(&self) -> u32 {
        self.n
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.limiter.release(self.n);
    }
}

/// Permits taken from a [`ConcurrencyLimiter`] behind an `Arc`, for holding across tasks (a
/// response future, a spawned task); given back when this is dropped.
///
/// ```
/// use leakgate::ConcurrencyLimiter;
/// use std::sync::Arc;
///
/// let pool = Arc::new(ConcurrencyLimiter::new(1)?);
/// let permit = pool.try_acquire_owned().unwrap();
/// std::thread::spawn(move || drop(permit)).join().unwrap();
/// assert_eq!(pool.in_flight(), 0);
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct OwnedPermit {
    pub(super) limiter: Arc<ConcurrencyLimiter>,
    pub(super) n: u32,
}

impl OwnedPermit {
    /// How many permits this holds.
    ///
    /// ```
    /// let pool = std::sync::Arc::new(leakgate::ConcurrencyLimiter::new(5)?);
    /// assert_eq!(pool.try_acquire_owned().unwrap().count(), 1);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn count(&self) -> u32 {
        self.n
    }

    /// The limiter these permits came from.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let pool = Arc::new(leakgate::ConcurrencyLimiter::new(5)?);
    /// let p = pool.try_acquire_owned().unwrap();
    /// assert!(Arc::ptr_eq(p.limiter(), &pool));
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn limiter(&self) -> &Arc<ConcurrencyLimiter> {
        &self.limiter
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        self.limiter.release(self.n);
    }
}
