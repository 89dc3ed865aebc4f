//! Waiting on tokio's timer: cancel-safe, since a dropped wait gives its units back.

use crate::clock::Clock;
use crate::decision::Denied;
use crate::limiter::Limiter;
use crate::queue::Reservation;
use std::time::Duration;

/// Holds a reservation while its wait is pending, and cancels it if dropped before
/// [`keep`](CancelOnDrop::keep): what makes the wait cancel-safe.
struct CancelOnDrop<'a, C: Clock>(Option<Reservation<'a, C>>);

impl<C: Clock> CancelOnDrop<'_, C> {
    /// Time left until the held reservation may go.
    fn delay(&self) -> Duration {
        self.0.as_ref().map_or(Duration::ZERO, Reservation::delay)
    }

    /// The reservation's time has come and the caller goes: keep its units.
    fn keep(mut self) {
        self.0 = None;
    }
}

impl<C: Clock> Drop for CancelOnDrop<'_, C> {
    fn drop(&mut self) {
        if let Some(reservation) = self.0.take() {
            // Undone if still the last request granted; else later ones keep their places.
            reservation.cancel();
        }
    }
}

impl<C: Clock> Limiter<C> {
    /// Waits asynchronously, on tokio's timer, until `n` units may go, and takes them. Denied at
    /// once only when `n` is above the burst. Places are given in the order of the calls.
    ///
    /// Cancel-safe: if the future is dropped before its time (a `select!` branch lost, a
    /// `timeout` fired, a task aborted), its reservation is cancelled as by
    /// [`Reservation::cancel`]: the units come back if no later request was granted meanwhile,
    /// and otherwise the later ones keep their places. Either way a dropped wait never takes
    /// units that anyone uses.
    ///
    /// Needs the `tokio` feature and a tokio runtime with time enabled. Precision is tokio's timer
    /// (about 1 ms); the wait ends only once the limiter's own clock has reached the time.
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
    pub async fn until_ready_n(&self, n: u64) -> Result<(), Denied> {
        self.until_ready_n_timeout(n, Duration::MAX).await
    }

    /// As [`until_ready_n`](Limiter::until_ready_n), but denied at once, taking nothing, when the
    /// units cannot be had within `max_wait`.
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
    pub async fn until_ready_n_timeout(&self, n: u64, max_wait: Duration) -> Result<(), Denied> {
        let pending = CancelOnDrop(Some(self.reserve_n(n, max_wait)?));
        // tokio's clock and the limiter's may disagree by a little: sleep until the limiter's
        // clock, not tokio's, says the time has come (never early).
        loop {
            let delay = pending.delay();
            if delay.is_zero() {
                break;
            }
            tokio::time::sleep(delay).await;
        }
        pending.keep();
        Ok(())
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
