//! Counters for every outcome, so that an operator can see what the limiter did and why.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a limiter's counters, each counting since the limiter was built.
///
/// Every decision is counted once, by where it came from: Redis (`redis_*`), this process's
/// lease or cached denial (`local_*`), the failure policy (`policy_*`, `fallback_*`), or no rule
/// at all (`untracked`). The
/// failures (`timeouts`, `unavailable`, `short_circuited`, `overloaded`, `rejected`) count why
/// the policy had to answer.
///
/// ```
/// use leakgate_redis::Stats;
/// let s = Stats::default();
/// assert_eq!(s.decisions(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Script calls sent to Redis (one round trip each, not counting script reloads).
    pub round_trips: u64,
    /// Requests admitted by Redis.
    pub redis_admitted: u64,
    /// Requests denied by Redis.
    pub redis_denied: u64,
    /// Requests admitted from this process's lease, without a round trip.
    pub local_admitted: u64,
    /// Requests denied without a round trip, because Redis had just denied the key until later.
    pub local_denied: u64,
    /// Units taken from Redis as leases (beyond the requests that took them).
    pub leased_units: u64,
    /// Lease requests that found Redis had lost the key's buckets (`FLUSHALL`, a restart without
    /// persistence, an eviction) while units leased from them could still be in use; the key
    /// was started full (see the crate docs, "When Redis loses keys").
    pub lost_buckets: u64,
    /// Calls that got no answer within their deadline.
    pub timeouts: u64,
    /// Of `timeouts`, those whose answer came back in time to say that Redis had started the
    /// script after the call's deadline, so it decided nothing. (Most late scripts are not seen:
    /// their callers have given up before they run.)
    pub late: u64,
    /// Calls that failed on the connection, that Redis could not serve, or that came before
    /// Redis first answered ([`Error::Connecting`](crate::Error::Connecting)).
    pub unavailable: u64,
    /// Calls not sent because the circuit breaker was open.
    pub short_circuited: u64,
    /// Calls not sent because `max_in_flight` calls were already waiting.
    pub overloaded: u64,
    /// Calls that Redis answered with an error (wrong type at a key, refused script).
    pub rejected: u64,
    /// Times the circuit breaker opened.
    pub breaker_opened: u64,
    /// Times the script was loaded again after Redis had lost it (`NOSCRIPT`).
    pub script_loads: u64,
    /// Failed calls admitted by the failure policy
    /// ([`FailurePolicy::Allow`](crate::FailurePolicy::Allow)).
    pub policy_admitted: u64,
    /// Failed calls denied by the failure policy
    /// ([`FailurePolicy::Deny`](crate::FailurePolicy::Deny)).
    pub policy_denied: u64,
    /// Failed calls admitted by the local fallback limiter.
    pub fallback_admitted: u64,
    /// Failed calls denied by the local fallback limiter.
    pub fallback_denied: u64,
    /// Requests admitted without a round trip because no rule limits any of their keys (rules
    /// limiters only).
    pub untracked: u64,
}

impl Stats {
    /// Every decision made, whoever made it.
    ///
    /// ```
    /// use leakgate_redis::Stats;
    /// let s = Stats { redis_admitted: 2, local_admitted: 5, ..Stats::default() };
    /// assert_eq!(s.decisions(), 7);
    /// ```
    pub fn decisions(&self) -> u64 {
        self.redis_admitted
            + self.redis_denied
            + self.local_admitted
            + self.local_denied
            + self.policy_admitted
            + self.policy_denied
            + self.fallback_admitted
            + self.fallback_denied
            + self.untracked
    }
}

/// One counter per field of [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) round_trips: Counter,
    pub(crate) redis_admitted: Counter,
    pub(crate) redis_denied: Counter,
    pub(crate) local_admitted: Counter,
    pub(crate) local_denied: Counter,
    pub(crate) leased_units: Counter,
    pub(crate) lost_buckets: Counter,
    pub(crate) timeouts: Counter,
    pub(crate) late: Counter,
    pub(crate) unavailable: Counter,
    pub(crate) short_circuited: Counter,
    pub(crate) overloaded: Counter,
    pub(crate) rejected: Counter,
    pub(crate) breaker_opened: Counter,
    pub(crate) script_loads: Counter,
    pub(crate) policy_admitted: Counter,
    pub(crate) policy_denied: Counter,
    pub(crate) fallback_admitted: Counter,
    pub(crate) fallback_denied: Counter,
    pub(crate) untracked: Counter,
}

/// A monotone event count.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n` events.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        // Relaxed: a count publishes nothing; readers want a recent value, not an ordering.
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one event.
    #[inline]
    pub(crate) fn inc(&self) {
        self.add(1);
    }

    pub(crate) fn get(&self) -> u64 {
        // Relaxed: as for `add`.
        self.0.load(Ordering::Relaxed)
    }
}

impl Counters {
    /// A snapshot (each counter read on its own; not one instant across all of them).
    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            round_trips: self.round_trips.get(),
            redis_admitted: self.redis_admitted.get(),
            redis_denied: self.redis_denied.get(),
            local_admitted: self.local_admitted.get(),
            local_denied: self.local_denied.get(),
            leased_units: self.leased_units.get(),
            lost_buckets: self.lost_buckets.get(),
            timeouts: self.timeouts.get(),
            late: self.late.get(),
            unavailable: self.unavailable.get(),
            short_circuited: self.short_circuited.get(),
            overloaded: self.overloaded.get(),
            rejected: self.rejected.get(),
            breaker_opened: self.breaker_opened.get(),
            script_loads: self.script_loads.get(),
            policy_admitted: self.policy_admitted.get(),
            policy_denied: self.policy_denied.get(),
            fallback_admitted: self.fallback_admitted.get(),
            fallback_denied: self.fallback_denied.get(),
            untracked: self.untracked.get(),
        }
    }
}
