//! The limiter people write first: a token bucket behind a mutex.

use crate::Gate;
use parking_lot::Mutex;

/// The limiter people write first: a token bucket refilled from elapsed time, behind a mutex.
///
/// ```
/// use leakgate_baselines::MutexTokenBucket;
/// let bucket = MutexTokenBucket::new(1.0, 1);
/// assert!(bucket.check());
/// assert!(!bucket.check());
/// ```
pub struct MutexTokenBucket {
    state: Mutex<Bucket>,
    clock: quanta::Clock,
    per_ns: f64,
    burst: f64,
}

struct Bucket {
    tokens: f64,
    last: quanta::Instant,
}

impl MutexTokenBucket {
    /// A full bucket of `burst` tokens refilled at `per_second`.
    ///
    /// ```
    /// let b = leakgate_baselines::MutexTokenBucket::new(100.0, 10);
    /// assert!(b.check());
    /// ```
    pub fn new(per_second: f64, burst: u64) -> Self {
        let clock = quanta::Clock::new();
        let last = clock.now();
        MutexTokenBucket {
            state: Mutex::new(Bucket { tokens: burst as f64, last }),
            clock,
            per_ns: per_second / 1e9,
            burst: burst as f64,
        }
    }

    /// Takes one token if there is one.
    ///
    /// ```
    /// let b = leakgate_baselines::MutexTokenBucket::new(1.0, 2);
    /// assert!(b.check() && b.check() && !b.check());
    /// ```
    pub fn check(&self) -> bool {
        let now = self.clock.now();
        let mut b = self.state.lock();
        let elapsed = now.saturating_duration_since(b.last).as_nanos() as f64;
        b.tokens = (b.tokens + elapsed * self.per_ns).min(self.burst);
        b.last = b.last.max(now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Gate for MutexTokenBucket {
    #[inline]
    fn allow(&self) -> bool {
        self.check()
    }
}
