//! A circuit breaker: stop waiting on a Redis that keeps failing, and probe it back.
//!
//! # Implementation details
//!
//! Closed, every call goes to Redis. After `threshold` calls in a row fail for lack of an answer
//! (timeouts, broken connections), the breaker opens for `open_for`: calls are answered by the
//! failure policy at once, without touching Redis. When `open_for` has passed, exactly one call
//! at a time goes through as a probe; its success closes the breaker, its failure opens it for
//! another `open_for`. A probe whose caller gave up (its future dropped) is forgotten after
//! `open_for` and another call may probe, so no lost probe keeps the breaker open for ever.
//!
//! Every atomic here is `Relaxed`: the words publish no other memory, and each is read on its
//! own. A race can at worst let one extra call through or keep one extra call out; Redis and
//! the failure policy answer either correctly.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// The breaker's state.
#[derive(Debug)]
pub(crate) struct Breaker {
    /// Failures in a row that open the breaker.
    threshold: u32,
    /// How long it stays open before a probe, in ns.
    open_for_ns: u64,
    /// Calls in a row that failed for lack of an answer, since the last success.
    failures: AtomicU32,
    /// 0 while closed; otherwise the clock reading (ns, at least 1) from which a probe may go.
    open_until: AtomicU64,
    /// The clock reading (ns, at least 1) at which the current probe went; 0: none in flight.
    probe_since: AtomicU64,
}

/// What the breaker lets a call do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Go to Redis.
    Pass,
    /// Go to Redis as the one probe of an open breaker.
    Probe,
    /// Do not go; the next probe may go in this long.
    Open(Duration),
}

impl Breaker {
    /// A closed breaker.
    pub(crate) fn new(threshold: u32, open_for: Duration) -> Breaker {
        Breaker {
            threshold: threshold.max(1),
            open_for_ns: u64::try_from(open_for.as_nanos()).unwrap_or(u64::MAX).max(1),
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probe_since: AtomicU64::new(0),
        }
    }

    /// Whether a call may go to Redis at `now_ns` (a monotonic clock).
    pub(crate) fn enter(&self, now_ns: u64) -> Gate {
        // Relaxed: see the module docs.
        let until = self.open_until.load(Ordering::Relaxed);
        if until == 0 {
            return Gate::Pass;
        }
        let now = now_ns.max(1);
        if now < until {
            return Gate::Open(Duration::from_nanos(until - now));
        }
        // Relaxed: see the module docs.
        let since = self.probe_since.load(Ordering::Relaxed);
        let stale = since != 0 && now.saturating_sub(since) >= self.open_for_ns;
        if since == 0 || stale {
            // Relaxed: the CAS only elects one prober among racing calls.
            if self
                .probe_since
                .compare_exchange(since, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return Gate::Probe;
            }
        }
        Gate::Open(Duration::from_nanos(self.open_for_ns))
    }

    /// Records an answer from Redis (any answer, errors included: Redis is up).
    pub(crate) fn success(&self) {
        // Relaxed: see the module docs.
        self.failures.store(0, Ordering::Relaxed);
        if self.open_until.load(Ordering::Relaxed) != 0 {
            self.open_until.store(0, Ordering::Relaxed);
            self.probe_since.store(0, Ordering::Relaxed);
        }
    }

    /// Records a call that got no answer, at `now_ns`; returns whether this opened the breaker.
    pub(crate) fn failure(&self, now_ns: u64, was_probe: bool) -> bool {
        // Relaxed: see the module docs.
        let failures = self.failures.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if !was_probe && failures < self.threshold {
            return false;
        }
        let was_closed = self.open_until.load(Ordering::Relaxed) == 0;
        let until = now_ns.max(1).saturating_add(self.open_for_ns);
        self.open_until.store(until, Ordering::Relaxed);
        self.probe_since.store(0, Ordering::Relaxed);
        was_closed
    }

    /// Whether the breaker is open now.
    pub(crate) fn is_open(&self) -> bool {
        // Relaxed: see the module docs.
        self.open_until.load(Ordering::Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_and_lets_one_probe_through() {
        let b = Breaker::new(2, Duration::from_millis(100));
        assert_eq!(b.enter(10), Gate::Pass);
        assert!(!b.failure(10, false));
        assert!(b.failure(20, false));
        assert!(b.is_open());
        assert_eq!(b.enter(30), Gate::Open(Duration::from_nanos(100_000_000 - 10)));
        let probe_time = 20 + 100_000_000;
        assert_eq!(b.enter(probe_time), Gate::Probe);
        assert!(matches!(b.enter(probe_time + 1), Gate::Open(_)));
        b.success();
        assert!(!b.is_open());
        assert_eq!(b.enter(probe_time + 2), Gate::Pass);
    }

    #[test]
    fn failed_probe_reopens_for_another_interval() {
        let b = Breaker::new(1, Duration::from_secs(1));
        assert!(b.failure(5, false));
        assert_eq!(b.enter(1_000_000_005), Gate::Probe);
        assert!(!b.failure(1_000_000_010, true));
        assert_eq!(b.enter(1_000_000_011), Gate::Open(Duration::from_nanos(999_999_999)));
    }

    #[test]
    fn a_lost_probe_is_replaced_after_the_interval() {
        let b = Breaker::new(1, Duration::from_secs(1));
        b.failure(10, false);
        assert_eq!(b.enter(1_000_000_010), Gate::Probe);
        // Its caller gave up: no success, no failure. Another may probe a second later.
        assert!(matches!(b.enter(1_500_000_000), Gate::Open(_)));
        assert_eq!(b.enter(2_000_000_010), Gate::Probe);
    }

    #[test]
    fn success_resets_the_count() {
        let b = Breaker::new(2, Duration::from_secs(1));
        b.failure(1, false);
        b.success();
        assert!(!b.failure(2, false));
        assert!(!b.is_open());
    }
}
