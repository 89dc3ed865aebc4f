//! Waiting on tokio's timer: the place is taken when the wait is called, and given back if the
//! wait is dropped before its time.

use crate::clock::Clock;
use crate::decision::Denied;
use crate::keyed::KeyedLimiter;
use crate::limiter::Limiter;
use crate::queue::Reservation;
use std::borrow::Borrow;
use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

/// Holds a reservation while its wait is pending, and cancels it if dropped before
/// [`keep`](CancelOnDrop::keep): what makes the wait cancel-safe.
pub(crate) struct CancelOnDrop<'a>(Option<Reservation<'a>>);

impl<'a> CancelOnDrop<'a> {
    pub(crate) fn new(reservation: Reservation<'a>) -> Self {
        CancelOnDrop(Some(reservation))
    }

    /// Time left until the held reservation may go.
    fn delay(&self) -> Duration {
        self.0.as_ref().map_or(Duration::ZERO, Reservation::delay)
    }

    /// The reservation's time has come and the caller goes: keep its units.
    fn keep(mut self) {
        self.0 = None;
    }

    /// Sleeps on tokio's timer until the reservation's time, then keeps it.
    ///
    /// tokio's clock and the limiter's may disagree by a little: this sleeps until the limiter's
    /// clock, not tokio's, says the time has come (never early).
    pub(crate) async fn sleep_until_ready(self) {
        loop {
            let delay = self.delay();
            if delay.is_zero() {
                break;
            }
            tokio::time::sleep(delay).await;
        }
        self.keep();
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(reservation) = self.0.take() {
            // Undone if still the last request granted; else later ones keep their places.
            reservation.cancel();
        }
    }
}

/// The future of a wait whose place was taken (or refused) when it was called.
pub(crate) fn wait_for(
    reserved: Result<Reservation<'_>, Denied>,
) -> impl Future<Output = Result<(), Denied>> + Send + '_ {
    // Wrapped before the future exists, so a future dropped unpolled gives its place back too.
    let pending = reserved.map(CancelOnDrop::new);
    async move {
        pending?.sleep_until_ready().await;
        Ok(())
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<C: Clock> Limiter<C> {
    /// Waits asynchronously for one unit: `until_ready_n(1)`.
    ///
    /// Available with the crate feature `tokio`.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # rt.block_on(async {
    /// let lim = Limiter::new(Quota::per_second(1000)?.with_burst(1)?);
    /// lim.until_ready().await?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn until_ready(&self) -> impl Future<Output = Result<(), Denied>> + Send + '_ {
        self.until_ready_n(1)
    }

    /// Waits asynchronously, on tokio's timer, until `n` units may go, and takes them. Denied at
    /// once only when `n` is above the burst.
    ///
    /// **The place in the queue is taken when this is called**, not when the future is first
    /// polled: futures are served in the order they were created, whatever order they are polled
    /// in.
    ///
    /// Cancel-safe: if the future is dropped before its time (a `select!` branch lost, a
    /// `timeout` fired, a task aborted, or never polled at all), its reservation is cancelled as
    /// by [`Reservation::cancel`]: the units come back if no later request was granted meanwhile,
    /// and otherwise the later ones keep their places. Either way a dropped wait never takes
    /// units that anyone uses.
    ///
    /// Available with the crate feature `tokio`; needs a tokio runtime with time enabled.
    /// Precision is tokio's timer (about 1 ms); the wait ends only once the limiter's own clock
    /// has reached the time. Blocking code calls [`wait_n`](Limiter::wait_n) instead.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # rt.block_on(async {
    /// let lim = Limiter::new(Quota::per_second(1000)?.with_burst(1)?);
    /// lim.until_ready_n(1).await?;
    /// lim.until_ready_n(1).await?; // about 1 ms later
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn until_ready_n(&self, n: u64) -> impl Future<Output = Result<(), Denied>> + Send + '_ {
        self.until_ready_n_timeout(n, Duration::MAX)
    }

    /// As [`until_ready_n`](Limiter::until_ready_n), but denied at once, taking nothing, when the
    /// units cannot be had within `max_wait`.
    ///
    /// Available with the crate feature `tokio`.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # rt.block_on(async {
    /// let lim = Limiter::new(Quota::per_hour(1)?);
    /// lim.until_ready_n_timeout(1, std::time::Duration::ZERO).await?;
    /// assert!(lim.until_ready_n_timeout(1, std::time::Duration::from_secs(1)).await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn until_ready_n_timeout(
        &self,
        n: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<(), Denied>> + Send + '_ {
        wait_for(self.reserve_n(n, max_wait))
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Waits asynchronously for one unit of `key`: `until_ready_n(key, 1)`.
    ///
    /// Available with the crate feature `tokio`.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # rt.block_on(async {
    /// let keyed = KeyedLimiter::new(Quota::per_second(1000)?.with_burst(1)?);
    /// keyed.until_ready("alice").await?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn until_ready<Q>(&self, key: &Q) -> impl Future<Output = Result<(), Denied>> + Send + '_
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.until_ready_n(key, 1)
    }

    /// Waits asynchronously until `n` units of `key` may go, and takes them: exactly
    /// [`Limiter::until_ready_n`] for the key's bucket (the place is taken at the call; a future
    /// dropped before its time gives it back by the cancel rule).
    ///
    /// Available with the crate feature `tokio`; needs a tokio runtime with time enabled.
    /// Blocking code calls [`wait_n`](KeyedLimiter::wait_n) instead.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # rt.block_on(async {
    /// let keyed = KeyedLimiter::new(Quota::per_second(1000)?.with_burst(1)?);
    /// keyed.until_ready_n(&42u64, 1).await?;
    /// keyed.until_ready_n(&42u64, 1).await?; // about 1 ms later
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn until_ready_n<Q>(
        &self,
        key: &Q,
        n: u64,
    ) -> impl Future<Output = Result<(), Denied>> + Send + '_
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.until_ready_n_timeout(key, n, Duration::MAX)
    }

    /// As [`until_ready_n`](KeyedLimiter::until_ready_n), but denied at once, taking nothing, when
    /// the units cannot be had within `max_wait`.
    ///
    /// Available with the crate feature `tokio`.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// # rt.block_on(async {
    /// let keyed = KeyedLimiter::new(Quota::per_hour(1)?);
    /// keyed.until_ready_n_timeout("alice", 1, std::time::Duration::ZERO).await?;
    /// let later = keyed.until_ready_n_timeout("alice", 1, std::time::Duration::from_secs(1));
    /// assert!(later.await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn until_ready_n_timeout<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Duration,
    ) -> impl Future<Output = Result<(), Denied>> + Send + '_
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        wait_for(self.reserve_n(key, n, max_wait))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Limiter, ManualClock, Quota};

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn the_wait_is_send() {
        let lim = Limiter::with_clock(Quota::per_second(1).unwrap(), ManualClock::new());
        assert_send(&lim.until_ready_n(1));
    }
}
