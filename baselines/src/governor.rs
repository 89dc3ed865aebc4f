//! `governor`'s direct limiter, the crate leakgate is most often compared with.

use crate::Gate;
use governor::clock::DefaultClock;
use governor::state::{InMemoryState, NotKeyed};
use std::num::NonZeroU32;

/// `governor`'s direct (unkeyed) limiter on its default (quanta) clock.
///
/// ```
/// let g = leakgate_baselines::Governor::new(5, 1);
/// assert!(g.check());
/// assert!(!g.check());
/// ```
pub struct Governor(pub(crate) governor::RateLimiter<NotKeyed, InMemoryState, DefaultClock>);

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
