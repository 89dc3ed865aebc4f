//! The limiters leakgate is measured against, behind one small trait so that benchmarks and
//! `leakgate bench` drive every contender through the same call.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use governor::clock::DefaultClock;
use governor::state::{InMemoryState, NotKeyed};
use parking_lot::Mutex;
use std::num::NonZeroU32;

/// Anything that answers "may one unit go now?".
///
/// Implemented for leakgate's `Limiter`, [`Governor`] and [`MutexTokenBucket`].
///
/// ```
/// use leakgate_baselines::{Gate, MutexTokenBucket};
/// let bucket = MutexTokenBucket::new(10.0, 2);
/// assert!(bucket.allow());
/// ```
pub trait Gate: Sync {
    /// Takes one unit if it conforms now.
    fn allow(&self) -> bool;
}

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

/// `governor`'s direct (unkeyed) limiter on its default (quanta) clock.
///
/// ```
/// let g = leakgate_baselines::Governor::new(5, 1);
/// assert!(g.check());
/// assert!(!g.check());
/// ```
pub struct Governor(governor::RateLimiter<NotKeyed, InMemoryState, DefaultClock>);

impl Governor {
    /// `per_second` cells a second with a burst of `burst` (both clamped to at least 1).
    ///
    /// ```
    /// let g = leakgate_baselines::Governor::new(1_000_000, 1000);
    /// assert!(g.check());
    /// ```
    pub fn new(per_second: u32, burst: u32) -> Self {
        let rate = NonZeroU32::new(per_second.max(1)).expect("clamped to at least 1");
        let burst = NonZeroU32::new(burst.max(1)).expect("clamped to at least 1");
        Governor(governor::RateLimiter::direct(
            governor::Quota::per_second(rate).allow_burst(burst),
        ))
    }

    /// Takes one cell if it conforms now.
    ///
    /// ```
    /// assert!(leakgate_baselines::Governor::new(1, 1).check());
    /// ```
    #[inline]
    pub fn check(&self) -> bool {
        self.0.check().is_ok()
    }
}

impl Gate for Governor {
    #[inline]
    fn allow(&self) -> bool {
        self.check()
    }
}

impl<C: leakgate::Clock> Gate for leakgate::Limiter<C> {
    #[inline]
    fn allow(&self) -> bool {
        self.check().is_ok()
    }
}

/// Quotas that make every contender in a scenario answer the same way.
///
/// ```
/// use leakgate_baselines::Scenario;
/// assert!(Scenario::Allowed.leakgate_quota().burst() > 1_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Every request is admitted: the rate and burst are far above what a benchmark can ask.
    Allowed,
    /// Every request is denied: one unit an hour, spent before measuring.
    Denied,
}

impl Scenario {
    /// The leakgate quota for this scenario.
    ///
    /// ```
    /// let q = leakgate_baselines::Scenario::Denied.leakgate_quota();
    /// assert_eq!(q.to_string(), "1/h");
    /// ```
    pub fn leakgate_quota(self) -> leakgate::Quota {
        match self {
            Scenario::Allowed => leakgate::Quota::new(
                100_000_000_000,
                std::time::Duration::from_secs(1),
                1_000_000_000_000,
            ),
            Scenario::Denied => leakgate::Quota::per_hour(1),
        }
        .expect("valid quota")
    }

    /// A leakgate limiter for this scenario on `clock`, primed so every check answers the same.
    ///
    /// ```
    /// use leakgate_baselines::{Gate, Scenario};
    /// let lim = Scenario::Denied.leakgate(leakgate::TscClock::new());
    /// assert!(!lim.allow());
    /// ```
    pub fn leakgate<C: leakgate::Clock>(self, clock: C) -> leakgate::Limiter<C> {
        let lim = leakgate::Limiter::with_clock(self.leakgate_quota(), clock);
        self.prime(&lim);
        lim
    }

    /// A governor limiter for this scenario, primed.
    ///
    /// ```
    /// use leakgate_baselines::{Gate, Scenario};
    /// assert!(Scenario::Allowed.governor().allow());
    /// ```
    pub fn governor(self) -> Governor {
        let g = match self {
            Scenario::Allowed => Governor::new(u32::MAX, u32::MAX),
            Scenario::Denied => Governor(governor::RateLimiter::direct(governor::Quota::per_hour(
                NonZeroU32::new(1).expect("1 is not zero"),
            ))),
        };
        self.prime(&g);
        g
    }

    /// A mutex token bucket for this scenario, primed.
    ///
    /// ```
    /// use leakgate_baselines::{Gate, Scenario};
    /// assert!(!Scenario::Denied.mutex_bucket().allow());
    /// ```
    pub fn mutex_bucket(self) -> MutexTokenBucket {
        let b = match self {
            Scenario::Allowed => MutexTokenBucket::new(1e11, 1_000_000_000_000),
            Scenario::Denied => MutexTokenBucket::new(1.0 / 3600.0, 1),
        };
        self.prime(&b);
        b
    }

    /// Spends what must be spent for the scenario to hold, and checks that it does.
    fn prime(self, gate: &impl Gate) {
        if self == Scenario::Denied {
            while gate.allow() {}
        }
        assert_eq!(gate.allow(), self == Scenario::Allowed, "{self:?} does not hold");
    }
}

/// Runs `per_thread` checks on each of `threads` threads sharing `gate`, started together, and
/// returns the wall time from the common start until the last thread finishes.
///
/// ```
/// use leakgate_baselines::{hammer, Scenario};
/// let lim = Scenario::Allowed.governor();
/// assert!(hammer(&lim, 2, 1000) > std::time::Duration::ZERO);
/// ```
pub fn hammer(gate: &impl Gate, threads: usize, per_thread: u64) -> std::time::Duration {
    let barrier = std::sync::Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..per_thread {
                        std::hint::black_box(gate.allow());
                    }
                })
            })
            .collect();
        barrier.wait();
        let start = std::time::Instant::now();
        for w in workers {
            w.join().expect("benchmark thread panicked");
        }
        start.elapsed()
    })
}
