//! Blocking until a reservation's time: sleep most of the way, spin the last stretch.

use crate::clock::Clock;
use crate::decision::Denied;
use crate::limiter::Limiter;
use crate::queue::reservation::duration_ns;
use crate::queue::Reservation;
use std::time::Duration;

/// The longest single OS sleep of a blocking wait. Between sleeps the wait rereads the limiter's
/// clock, so it follows a clock that moves by other means than real time (a `ManualClock` advanced
/// by a test, a simulation) within this long, and a long wait costs one wakeup per 20 ms.
const MAX_SLEEP: Duration = Duration::from_millis(20);

/// How a blocking wait spends its time: an OS sleep until `spin` before the deadline, then a busy
/// spin on the limiter's clock.
///
/// Sleeping alone wakes late by the OS timer slack and scheduling delay (~50-100 µs on Linux);
/// the spin makes a release land within a few microseconds of its time, at the cost of one busy
/// core for at most `spin` per wait. `WaitPolicy::new(Duration::ZERO)` only sleeps. The default
/// spins the last 150 µs.
///
/// The spin reads the limiter's clock; when a reading has not moved since the last one (a
/// `CoarseClock` between ticks, a `ManualClock`), the spin yields the CPU rather than burn it.
///
/// ```
/// use leakgate::{Limiter, Quota, WaitPolicy};
/// use std::time::Duration;
///
/// let lim = Limiter::new(Quota::per_second(1000)?.with_burst(1)?);
/// let gentle = WaitPolicy::new(Duration::from_micros(20)); // less spinning, a little later
/// for _ in 0..3 {
///     lim.reserve(Duration::MAX).unwrap().wait_with(gentle);
/// }
/// assert_eq!(WaitPolicy::default().spin(), Duration::from_micros(150));
/// # Ok::<(), leakgate::QuotaError>(())
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

    /// Blocks until `clock_ns` reads at least `deadline_ns`.
    pub(crate) fn block_until(&self, clock_ns: impl Fn() -> u64, deadline_ns: u64) {
        let spin_ns = duration_ns(self.spin);
        let mut last = None;
        loop {
            let now = clock_ns();
            if now >= deadline_ns {
                return;
            }
            let left = deadline_ns - now;
            if left > spin_ns {
                std::thread::sleep(Duration::from_nanos(left - spin_ns).min(MAX_SLEEP));
            } else if last == Some(now) {
                // The clock has not moved since the last reading: spinning cannot bring the
                // deadline closer, so let another thread (maybe the one moving it) run.
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            last = Some(now);
        }
    }
}

impl Default for WaitPolicy {
    /// A 150 µs spin window: enough to absorb a Linux sleep's usual lateness.
    ///
    /// ```
    /// assert_eq!(leakgate::WaitPolicy::default().spin().as_micros(), 150);
    /// ```
    fn default() -> Self {
        WaitPolicy::new(Duration::from_micros(150))
    }
}

impl Reservation<'_> {
    /// Blocks until the reservation's time, with the default [`WaitPolicy`]. Returns at once if
    /// it is already due.
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
    /// use std::time::Duration;
    /// let lim = Limiter::new(Quota::per_second(1000)?.with_burst(1)?);
    /// let sleep_only = WaitPolicy::new(Duration::ZERO);
    /// lim.reserve(Duration::MAX).unwrap().wait_with(sleep_only);
    /// lim.reserve(Duration::MAX).unwrap().wait_with(sleep_only); // about 1 ms
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn wait_with(self, policy: WaitPolicy) {
        policy.block_until(|| self.clock_ns(), self.ready_at_ns());
    }
}

impl<C: Clock> Limiter<C> {
    /// Waits as long as it takes for one unit: `wait_n(1)`.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let lim = Limiter::new(Quota::per_second(10_000)?.with_burst(1)?);
    /// lim.wait()?;
    /// lim.wait()?; // about 100 µs later
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(&self) -> Result<(), Denied> {
        self.wait_n(1)
    }

    /// Waits as long as it takes for `n` units, then returns having taken them: a reservation
    /// with no bound, waited for with the default [`WaitPolicy`]. Denied only when `n` is above
    /// the burst (it could never go). Places are given in the order of the calls.
    ///
    /// This blocks the thread. In async code, `until_ready_n(n).await` waits without blocking
    /// (it needs the crate feature `tokio`).
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
    /// denied, having taken nothing. For another [`WaitPolicy`], reserve and wait:
    /// `lim.reserve_n(n, max_wait).map(|r| r.wait_with(policy))`.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// use std::time::Duration;
    /// let lim = Limiter::new(Quota::per_hour(1)?);
    /// lim.wait_n_timeout(1, Duration::ZERO).unwrap();
    /// assert!(lim.wait_n_timeout(1, Duration::from_millis(1)).is_err()); // would wait an hour
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn wait_n_timeout(&self, n: u64, max_wait: Duration) -> Result<(), Denied> {
        self.reserve_n(n, max_wait).map(Reservation::wait)
    }
}
