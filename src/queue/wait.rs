//! Blocking until a reservation's time: sleep most of the way, spin the last stretch.

use crate::clock::Clock;
use crate::decision::Denied;
use crate::limiter::Limiter;
use crate::queue::Reservation;
use std::time::Duration;

/// How a blocking wait spends its time: OS sleep until `spin` before the deadline, then a spin on
/// the limiter's clock. Sleeping alone oversleeps by the OS timer slack (~50-100 µs on Linux);
/// the spin makes the release land within a few microseconds, at the cost of one busy core for at
/// most `spin` per wait.
///
/// ```
/// use leakgate::WaitPolicy;
/// use std::time::Duration;
/// let sleep_only = WaitPolicy::new(Duration::ZERO);
/// assert_eq!(WaitPolicy::default().spin(), Duration::from_micros(150));
/// # let _ = sleep_only;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    spin: Duration,
}

impl WaitPolicy {
    /// Sleep until `spin` before the deadline, then spin.
    ///
    /// ```
    /// let p = leakgate::WaitPolicy::new(std::time::Duration::from_micros(50));
    /// assert_eq!(p.spin().as_micros(), 50);
    /// ```
    pub const fn new(spin: Duration) -> Self {
        WaitPolicy { spin }
    }

    /// The spin window.
    ///
    /// ```
    /// assert!(!leakgate::WaitPolicy::default().spin().is_zero());
    /// ```
    pub const fn spin(&self) -> Duration {
        self.spin
    }

    /// Blocks until `clock` reads at least `deadline_ns`.
    fn block_until(&self, clock: &impl Clock, deadline_ns: u64) {
        let spin_ns = u64::try_from(self.spin.as_nanos()).unwrap_or(u64::MAX);
        loop {
            let now = clock.now_ns();
            if now >= deadline_ns {
                return;
            }
            let left = deadline_ns - now;
            if left > spin_ns {
                std::thread::sleep(Duration::from_nanos(left - spin_ns));
            } else {
                // A clock that moves only when told (a manual clock in a test) is not spun on
                // forever at full speed: yield now and then.
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                std::thread::yield_now();
            }
        }
    }
}

impl Default for WaitPolicy {
    /// A 150 µs spin window.
    fn default() -> Self {
        WaitPolicy::new(Duration::from_micros(150))
    }
}

impl<C: Clock> Reservation<'_, C> {
    /// Blocks until the reservation's time, with the default [`WaitPolicy`].
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let lim = Limiter::new(Quota::per_second(1000)?.with_burst(1)?);
    /// lim.check().unwrap();
    /// lim.reserve(std::time::Duration::MAX).unwrap().wait(); // about 1 ms
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn wait(self) {
        self.wait_with(WaitPolicy::default());
    }

    /// Blocks until the reservation's time, sleeping and spinning as `policy` says.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota, WaitPolicy};
    /// let lim = Limiter::new(Quota::per_second(1000)?);
    /// lim.reserve(std::time::Duration::MAX).unwrap().wait_with(WaitPolicy::new(Default::default()));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn wait_with(self, policy: WaitPolicy) {
        policy.block_until(&self.limiter().clock, self.ready_at_ns());
    }
}

impl<C: Clock> Limiter<C> {
    /// Waits as long as it takes for `n` units, then takes them. Denied only when `n` is above the
    /// burst (it could never go).
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let lim = Limiter::new(Quota::per_second(10_000)?.with_burst(1)?);
    /// for _ in 0..3 {
    ///     lim.wait_n(1).unwrap(); // evenly spaced, 100 µs apart
    /// }
    /// assert!(lim.wait_n(2).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn wait_n(&self, n: u64) -> Result<(), Denied> {
        self.wait_n_timeout(n, Duration::MAX)
    }

    /// Waits for `n` units if they can be had within `max_wait`; otherwise returns at once,
    /// denied, having taken nothing.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::new(Quota::per_hour(1)?);
    /// lim.wait_n_timeout(1, Duration::ZERO).unwrap();
    /// assert!(lim.wait_n_timeout(1, Duration::from_millis(1)).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn wait_n_timeout(&self, n: u64, max_wait: Duration) -> Result<(), Denied> {
        self.reserve_n(n, max_wait).map(Reservation::wait)
    }
}
