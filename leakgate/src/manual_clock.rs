//! A clock that moves only when told to: for tests, simulations and loom models.

use crate::clock::Clock;
use crate::sync::{Arc, AtomicU64, Ordering};
use core::time::Duration;

/// A clock set by hand. Clones share one time; it starts at zero and may move backwards.
///
/// Every ordering on its counter is `Relaxed`: the time is a lone value that publishes no other
/// memory, and a test that needs "advance, then check" across threads already orders the two
/// through its own synchronisation (a join, a channel).
///
/// ```
/// use leakgate::{Limiter, ManualClock, Quota};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let lim = Limiter::with_clock(Quota::per_second(1)?, clock.clone());
/// assert!(lim.check().is_ok());
/// assert!(lim.check().is_err());
/// clock.advance(Duration::from_secs(1));
/// assert!(lim.check().is_ok());
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    /// Nanoseconds since the origin. Saturates at `u64::MAX` (about 584 years).
    ns: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at time zero.
    ///
    /// ```
    /// assert_eq!(leakgate::ManualClock::new().now(), std::time::Duration::ZERO);
    /// ```
    pub fn new() -> Self {
        ManualClock { ns: Arc::new(AtomicU64::new(0)) }
    }

    /// Moves the time forward by `by`, saturating at `u64::MAX` nanoseconds.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = leakgate::ManualClock::new();
    /// c.advance(Duration::from_millis(5));
    /// assert_eq!(c.now(), Duration::from_millis(5));
    /// ```
    pub fn advance(&self, by: Duration) {
        let by = duration_to_ns(by);
        // Relaxed: see the type's docs; the update itself is atomic, so concurrent advances add up.
        let _ = self
            .ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |ns| Some(ns.saturating_add(by)));
    }

    /// Sets the time, forwards or backwards (saturating at `u64::MAX` nanoseconds).
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = leakgate::ManualClock::new();
    /// c.set(Duration::from_secs(10));
    /// c.set(Duration::from_secs(3));
    /// assert_eq!(c.now(), Duration::from_secs(3));
    /// ```
    pub fn set(&self, to: Duration) {
        // Relaxed: see the type's docs.
        self.ns.store(duration_to_ns(to), Ordering::Relaxed);
    }

    /// The current time since the origin.
    ///
    /// ```
    /// assert!(leakgate::ManualClock::new().now().is_zero());
    /// ```
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ns())
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        // Relaxed: see the type's docs.
        self.ns.load(Ordering::Relaxed)
    }
}

fn duration_to_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn clones_share_time_and_it_moves_both_ways() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_nanos(7));
        assert_eq!(b.now_ns(), 7);
        b.set(Duration::from_nanos(3));
        assert_eq!(a.now_ns(), 3);
    }

    #[test]
    fn saturates_instead_of_wrapping() {
        let c = ManualClock::new();
        c.set(Duration::MAX);
        assert_eq!(c.now_ns(), u64::MAX);
        c.advance(Duration::from_secs(1));
        assert_eq!(c.now_ns(), u64::MAX);
    }
}
