//! The single-limiter scenarios: every decision allowed, or every decision denied.

use crate::{Gate, Governor, MutexTokenBucket};
use std::num::NonZeroU32;

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

    /// A leased leakgate limiter for this scenario on `clock` (default [`leakgate::Leases`]),
    /// primed. Under `Denied` (one an hour) leases are off: every check is exact.
    ///
    /// ```
    /// use leakgate_baselines::{Gate, Scenario};
    /// let lim = Scenario::Allowed.leased(leakgate::TscClock::new());
    /// assert!(lim.lease_units() > 0 && lim.allow());
    /// ```
    pub fn leased<C: leakgate::Clock>(self, clock: C) -> leakgate::LeasedLimiter<C> {
        let leases = leakgate::Leases::new();
        let lim = leakgate::LeasedLimiter::with_leases(self.leakgate_quota(), clock, leases);
        self.prime(&lim);
        lim
    }

    /// A leased leakgate limiter for this scenario on `clock`, primed as
    /// [`leased`](Scenario::leased), decided through a `LocalLease` per benchmark thread.
    ///
    /// ```
    /// use leakgate_baselines::{Scenario, Workload};
    /// let lim = Scenario::Denied.local_leased(leakgate::TscClock::new());
    /// assert!(!lim.on_thread(0)(0));
    /// ```
    pub fn local_leased<C: leakgate::Clock>(self, clock: C) -> crate::LocalLeased<C> {
        crate::LocalLeased(self.leased(clock))
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
