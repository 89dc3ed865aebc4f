//! What the service counts: requests and their latency per listener, and per rule the errors
//! (checks the failure policy answered because Redis gave none) and the peeks the service made
//! itself to report each descriptor's figures (taken out of the rule's admitted count).
//!
//! Every counter is a relaxed atomic: each is a statistic read on its own, and a scrape taken
//! while requests run reads values between the totals before and after it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// The listeners, as labelled in `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listener {
    Grpc = 0,
    Resp = 1,
    Http = 2,
}

impl Listener {
    pub(crate) const ALL: [Listener; 3] = [Listener::Grpc, Listener::Resp, Listener::Http];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Listener::Grpc => "grpc",
            Listener::Resp => "resp",
            Listener::Http => "http",
        }
    }
}

/// Upper bounds of the latency histogram's buckets, in nanoseconds (the last bucket, `+Inf`,
/// is implicit).
pub(crate) const LATENCY_BOUNDS_NS: [u64; 15] = [
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
    2_500_000_000,
];

/// One listener's requests and their latency.
#[derive(Default)]
pub(crate) struct ListenerStats {
    requests: AtomicU64,
    /// Requests answered with an error (a malformed request, a server error).
    errors: AtomicU64,
    /// `buckets[i]`: requests that took at most `LATENCY_BOUNDS_NS[i]` and more than the bound
    /// before (not cumulative; the last counts those above every bound).
    buckets: [AtomicU64; LATENCY_BOUNDS_NS.len() + 1],
    /// Total latency in nanoseconds (wraps after 584 years of summed latency).
    sum_ns: AtomicU64,
}

/// A snapshot of one listener's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ListenerSnapshot {
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    /// Cumulative counts for each bound, then `+Inf` (= requests counted in the histogram).
    pub(crate) cumulative: Vec<u64>,
    pub(crate) sum_ns: u64,
}

impl ListenerStats {
    /// Counts one request that took `took`.
    pub(crate) fn record(&self, took: Duration, error: bool) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BOUNDS_NS.partition_point(|&bound| bound < ns);
        // Relaxed: statistics (module docs).
        self.requests.fetch_add(1, Ordering::Relaxed);
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ListenerSnapshot {
        let mut total = 0u64;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                total = total.wrapping_add(b.load(Ordering::Relaxed));
                total
            })
            .collect();
        ListenerSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            cumulative,
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

/// What the service counts per rule path, beside the limiter's own counts.
#[derive(Default)]
pub(crate) struct RuleExtra {
    /// Checks that involved the rule and that the failure policy answered.
    pub(crate) errors: AtomicU64,
    /// Peeks the service made on the rule's keys to report figures (the limiter counts them as
    /// admitted).
    pub(crate) internal_peeks: AtomicU64,
    /// For buckets kept outside the rules limiter (`cl.throttle`, overrides in memory):
    /// requests admitted, and requests their own bucket refused.
    pub(crate) admitted: AtomicU64,
    pub(crate) refused: AtomicU64,
}

/// One rule path's extra counts, read together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExtraCounts {
    pub(crate) errors: u64,
    pub(crate) internal_peeks: u64,
    pub(crate) admitted: u64,
    pub(crate) refused: u64,
}

/// Rules reloads.
#[derive(Default)]
pub(crate) struct Reloads {
    pub(crate) applied: AtomicU64,
    pub(crate) rejected: AtomicU64,
}

/// Everything counted.
#[derive(Default)]
pub(crate) struct Metrics {
    listeners: [ListenerStats; 3],
    rules: RwLock<HashMap<Box<str>, Arc<RuleExtra>>>,
    pub(crate) reloads: Reloads,
}

impl Metrics {
    pub(crate) fn listener(&self, listener: Listener) -> &ListenerStats {
        &self.listeners[listener as usize]
    }

    /// The extra counters of the rule at `path`.
    pub(crate) fn rule(&self, path: &str) -> Arc<RuleExtra> {
        if let Some(extra) = self.rules.read().unwrap_or_else(PoisonError::into_inner).get(path) {
            return extra.clone();
        }
        let mut rules = self.rules.write().unwrap_or_else(PoisonError::into_inner);
        rules.entry(path.into()).or_default().clone()
    }

    /// The extra counters of every rule path seen, by path.
    pub(crate) fn rules(&self) -> Vec<(String, ExtraCounts)> {
        let rules = self.rules.read().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = rules
            .iter()
            .map(|(path, extra)| {
                let counts = ExtraCounts {
                    errors: extra.errors.load(Ordering::Relaxed),
                    internal_peeks: extra.internal_peeks.load(Ordering::Relaxed),
                    admitted: extra.admitted.load(Ordering::Relaxed),
                    refused: extra.refused.load(Ordering::Relaxed),
                };
                (path.to_string(), counts)
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_their_bucket_cumulatively() {
        let stats = ListenerStats::default();
        stats.record(Duration::from_micros(10), false);
        stats.record(Duration::from_micros(25), false);
        stats.record(Duration::from_micros(26), true);
        stats.record(Duration::from_secs(100), false);
        let s = stats.snapshot();
        assert_eq!((s.requests, s.errors), (4, 1));
        assert_eq!(&s.cumulative[..3], &[2, 3, 3]);
        assert_eq!(*s.cumulative.last().unwrap(), 4);
        assert_eq!(s.cumulative[LATENCY_BOUNDS_NS.len() - 1], 3);
    }
}
