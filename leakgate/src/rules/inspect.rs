//! Introspection: the buckets of the rules in force, and the counts per rule. Neither blocks a
//! check.

use super::counters::Count;
use super::RuleLimiter;
use crate::clock::Clock;
use crate::quota::Quota;
use std::time::Duration;

/// One tracked bucket, as seen by [`RuleLimiter::buckets`].
///
/// ```
/// use leakgate::{ManualClock, RuleLimiter, Rules};
/// let mut rules = Rules::new();
/// rules.insert("message_send", ["10/s".parse()?]);
/// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
/// lim.check_n("message_send/alice", 6).unwrap();
/// let alice = &lim.buckets("message_send/", 0.5)[0];
/// assert_eq!((alice.key.as_str(), alice.rule.as_str()), ("message_send/alice", "message_send"));
/// assert_eq!(alice.level, 6.0);
/// assert_eq!(alice.remaining, 4);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BucketState {
    /// The full key.
    pub key: String,
    /// The path of the rule it is under.
    pub rule: String,
    /// Which of the rule's quotas this bucket enforces (0 for the first).
    pub quota_index: usize,
    /// That quota.
    pub quota: Quota,
    /// Units in the bucket now: `(TAT - now) / T`, at most the burst.
    pub level: f64,
    /// Units that would conform right now.
    pub remaining: u64,
    /// `level / burst`: 0.0 empty, 1.0 full.
    pub fill: f64,
    /// Time until the bucket is empty again.
    pub reset_after: Duration,
    /// Time since the key's last admitted request (whole milliseconds of the clock).
    pub since_last_use: Duration,
}

/// One rule's counts since the limiter was made (kept across reloads, by path).
///
/// ```
/// use leakgate::{ManualClock, RuleLimiter, Rules};
/// let mut rules = Rules::new();
/// rules.insert("api", ["1/s".parse()?]);
/// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
/// let _ = lim.check("api/x");
/// let _ = lim.check("api/x");
/// let api = &lim.stats()[0];
/// assert_eq!((api.admitted, api.denied, api.denied_in_shadow), (1, 1, 0));
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleStats {
    /// The rule's path.
    pub rule: String,
    /// Requests the rule's buckets conformed to, admitted.
    pub admitted: u64,
    /// Requests refused because of this rule (one of its buckets refused).
    pub denied: u64,
    /// Requests this rule, in shadow mode, would have refused (they take nothing from it).
    pub denied_in_shadow: u64,
}

impl<C: Clock + 'static> RuleLimiter<C> {
    /// The buckets of the rules in force whose key starts with `prefix` and whose fill is at
    /// least `min_fill` (0.0 for all). Takes no lock that a check waits on: each bucket is read
    /// consistently, the whole list is not one instant. Allocates (not for the hot path).
    ///
    /// ```
    /// use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("message_send", ["4/s".parse()?]);
    /// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    /// lim.check_n("message_send/alice", 3).unwrap();
    /// lim.check_n("message_send/bob", 1).unwrap();
    /// let busy = lim.buckets("message_send", 0.5); // over half their burst
    /// assert_eq!(busy.len(), 1);
    /// assert_eq!(busy[0].key, "message_send/alice");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn buckets(&self, prefix: &str, min_fill: f64) -> Vec<BucketState> {
        let generation = self.current.load_full();
        let mut buckets = Vec::new();
        for rule in generation.rules.iter() {
            for (quota_index, table) in rule.tables.iter().enumerate() {
                let quota = table.quota();
                for state in table.snapshot() {
                    if !state.key.starts_with(prefix) || state.fill < min_fill {
                        continue;
                    }
                    buckets.push(BucketState {
                        key: state.key,
                        rule: rule.path.to_string(),
                        quota_index,
                        quota,
                        level: state.fill * quota.burst() as f64,
                        remaining: state.remaining,
                        fill: state.fill,
                        reset_after: state.reset_after,
                        since_last_use: state.since_last_use,
                    });
                }
            }
        }
        buckets.sort_by(|a, b| (&a.key, a.quota_index).cmp(&(&b.key, b.quota_index)));
        buckets
    }

    /// The counts of every rule in force, by path.
    ///
    /// ```
    /// use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("beta", ["1/s".parse()?]).shadow(true);
    /// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    /// assert!(lim.check("beta/x").is_ok());
    /// assert!(lim.check("beta/x").is_ok()); // shadow: would refuse, admits
    /// assert_eq!(lim.stats()[0].denied_in_shadow, 1);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn stats(&self) -> Vec<RuleStats> {
        let generation = self.current.load_full();
        generation
            .rules
            .iter()
            .map(|rule| RuleStats {
                rule: rule.path.to_string(),
                admitted: rule.counters.get(Count::Admitted),
                denied: rule.counters.get(Count::Denied),
                denied_in_shadow: rule.counters.get(Count::DeniedInShadow),
            })
            .collect()
    }
}
