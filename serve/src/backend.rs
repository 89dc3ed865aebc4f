//! Where decisions are made: a [`RuleLimiter`] in this process, or Redis shared by a fleet
//! ([`AsyncRedisRuleLimiter`], with its deadline, breaker and failure policy).

use leakgate::{Admitted, BucketState, Clock, Denied, RuleLimiter, RuleStats, Rules};
use leakgate_redis::AsyncRedisRuleLimiter;

/// One limiter of rules by key path, in memory or in Redis.
pub(crate) enum Backend<C: Clock> {
    Memory(RuleLimiter<C>),
    Redis(AsyncRedisRuleLimiter),
}

/// A decision, and whether the failure policy made it because Redis gave none.
pub(crate) struct Checked {
    pub(crate) decision: Result<Admitted, Denied>,
    pub(crate) failed: bool,
}

impl<C: Clock + 'static> Backend<C> {
    /// Checks cost `n` on every key at once, all or nothing (`RuleLimiter::check_all_n`).
    pub(crate) async fn check_all(&self, keys: &[&str], n: u64) -> Checked {
        match self {
            Backend::Memory(lim) => {
                let decision = match keys {
                    [key] => lim.check_n(key, n),
                    _ => lim.check_all_n(keys, n),
                };
                Checked { decision, failed: false }
            }
            Backend::Redis(lim) => {
                let (decision, failure) = lim.check_all_n_explained(keys, n).await;
                if let Some(e) = &failure {
                    tracing::debug!(error = %e, "Redis gave no decision: the failure policy answered");
                }
                Checked { decision, failed: failure.is_some() }
            }
        }
    }

    /// Puts `rules` in force, every tracked key keeping its level.
    pub(crate) fn reload(&self, rules: Rules) -> Result<(), String> {
        match self {
            Backend::Memory(lim) => {
                lim.reload(rules);
                Ok(())
            }
            Backend::Redis(lim) => lim.reload(rules).map_err(|e| e.to_string()),
        }
    }

    /// The buckets whose key starts with `prefix` and whose fill is at least `min_fill`;
    /// `None` when they live in Redis (not listed by this process).
    pub(crate) fn buckets(&self, prefix: &str, min_fill: f64) -> Option<Vec<BucketState>> {
        match self {
            Backend::Memory(lim) => Some(lim.buckets(prefix, min_fill)),
            Backend::Redis(_) => None,
        }
    }

    /// Each rule's counts (for Redis: the decisions Redis made).
    pub(crate) fn stats(&self) -> Vec<RuleStats> {
        match self {
            Backend::Memory(lim) => lim.stats(),
            Backend::Redis(lim) => lim.rule_stats(),
        }
    }

    /// The Redis rules limiter, when the buckets live in Redis.
    pub(crate) fn redis(&self) -> Option<&AsyncRedisRuleLimiter> {
        match self {
            Backend::Memory(_) => None,
            Backend::Redis(lim) => Some(lim),
        }
    }

    /// `"memory"` or `"redis"`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Backend::Memory(_) => "memory",
            Backend::Redis(_) => "redis",
        }
    }
}
