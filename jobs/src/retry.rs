//! The retry policy: how failed runs are retried, when a job is dead, and how long a lease lasts.
//! Pure: both stores ask it inside the transaction that records a failure.

use crate::job::{Outcome, ns};
use std::time::Duration;

/// A failed run's error to store, and the delay (ns) it asked for, if it did.
pub(crate) fn failure(outcome: &Outcome) -> (String, Option<i64>) {
    match outcome {
        Outcome::RetryAfter(d) => (format!("asked to be retried after {d:?}"), Some(ns(*d))),
        Outcome::Failed(m) => (m.clone(), None),
        _ => (String::new(), None),
    }
}

/// How failed runs are retried, and how long a lease lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) max_attempts: u32,
    pub(crate) backoff: Duration,
    pub(crate) lease: Duration,
}

impl Policy {
    /// The wait before the next run after `failures` failed runs (from 1): the backoff doubled
    /// for each failure after the first, plus up to a quarter of it at random (jitter), so that
    /// many jobs failing together do not come back together. Saturates.
    pub(crate) fn retry_delay_ns(&self, failures: u32, seed: u64) -> i64 {
        let base = ns(self.backoff);
        let doubled = base.saturating_mul(1i64 << failures.saturating_sub(1).min(40));
        let jitter = (mix(seed) % 1024) as i64;
        doubled.saturating_add(doubled / 4 / 1024 * jitter)
    }

    /// Whether a job with this many failures is dead.
    pub(crate) fn is_dead(&self, failures: i64) -> bool {
        failures >= i64::from(self.max_attempts)
    }
}

/// A 64-bit mixer (splitmix64's finaliser), for jitter.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: i64 = 1_000_000_000;

    fn policy(backoff: Duration) -> Policy {
        Policy { max_attempts: 3, backoff, lease: Duration::from_secs(30) }
    }

    #[test]
    fn the_backoff_doubles_with_at_most_a_quarter_of_jitter() {
        let p = policy(Duration::from_secs(1));
        for seed in 0..200 {
            for (failures, base) in [(1, SEC), (2, 2 * SEC), (3, 4 * SEC), (11, 1024 * SEC)] {
                let delay = p.retry_delay_ns(failures, seed);
                assert!(delay >= base && delay <= base + base / 4, "{failures}: {delay}");
            }
        }
        let spread: std::collections::BTreeSet<i64> =
            (0..64).map(|seed| p.retry_delay_ns(1, seed)).collect();
        assert!(spread.len() > 32, "jitter spreads jobs that failed together");
    }

    #[test]
    fn the_backoff_saturates_and_death_comes_at_max_attempts() {
        let p = policy(Duration::from_secs(u64::MAX));
        assert_eq!(p.retry_delay_ns(u32::MAX, 7), i64::MAX);
        assert_eq!(policy(Duration::ZERO).retry_delay_ns(5, 7), 0);
        assert!(!p.is_dead(2) && p.is_dead(3) && p.is_dead(4));
    }
}
