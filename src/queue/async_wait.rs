//! Waiting on tokio's timer: cancel-safe, since a dropped wait gives its units back.

use crate::clock::Clock;
use crate::decision::Denied;
use crate::limiter::Limiter;
use crate::queue::Reservation;
use std::time::Duration;

/// Cancels the reservation it holds unless it was disarmed: what makes the future cancel-safe.
struct CancelOnDrop<'a, C: Clock>(Option<Reservation<'a, C>>);

impl<C: Clock> Drop for CancelOnDrop<'_, C> {
    fn drop(&mut self) {
        if let Some(reservation) = self.0.take() {
            reservation.cancel();
        }
    }
}

impl<C: Clock> Limiter<C> {
    /// Waits asynchronously (on tokio's timer) until `n` units may go, and takes them. Denied
    /// only when `n` is above the burst. Cancel-safe: if the future is dropped before its time,
    /// the units are given back (as by [`Reservation::cancel`]).
    ///
    /// Needs the `tokio` feature. Precision is tokio's timer (about 1 ms).
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let lim = Limiter::new(Quota::per_second(1000)?.with_burst(1)?);
    /// lim.until_ready_n(1).await?;
    /// lim.until_ready_n(1).await?; // about 1 ms later
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_ready_n(&self, n: u64) -> Result<(), Denied> {
        self.until_ready_n_timeout(n, Duration::MAX).await
    }

    /// As [`until_ready_n`](Limiter::until_ready_n), but denied at once, taking nothing, when
    /// the units cannot be had within `max_wait`.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let lim = Limiter::new(Quota::per_hour(1)?);
    /// lim.until_ready_n_timeout(1, std::time::Duration::ZERO).await?;
    /// assert!(lim.until_ready_n_timeout(1, std::time::Duration::from_secs(1)).await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn until_ready_n_timeout(&self, n: u64, max_wait: Duration) -> Result<(), Denied> {
        let reservation = self.reserve_n(n, max_wait)?;
        let delay = reservation.delay();
        let mut guard = CancelOnDrop(Some(reservation));
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // Its time has come: keep it.
        guard.0 = None;
        Ok(())
    }
}
