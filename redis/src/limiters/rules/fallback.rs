//! What a rules check answers when Redis could not decide: the [`FailurePolicy`], with a local
//! [`RuleLimiter`] at each rule's share for [`FailurePolicy::Local`].

use crate::connection::fallback::{answer, share, LocalClock};
use crate::connection::policy::FailurePolicy;
use crate::error::Error;
use crate::stats::Counters;
use leakgate::{Admitted, Denied, OverflowPolicy, Rule, RuleLimiter, Rules};
use std::time::Duration;

/// The failure policy of a rules limiter.
pub(crate) struct RulesFallback {
    policy: FailurePolicy,
    /// With [`FailurePolicy::Local`]: the rules, each quota at this process's share, reloaded
    /// with the limiter's (keys keep their local levels as a `RuleLimiter` reload keeps them).
    local: Option<RuleLimiter<LocalClock>>,
}

impl RulesFallback {
    /// The policy for `rules`.
    pub(crate) fn new(
        policy: FailurePolicy,
        rules: &Rules,
        clock: &LocalClock,
    ) -> Result<RulesFallback, Error> {
        let local = match policy {
            FailurePolicy::Local { expected_servers } => {
                let shares = share_rules(rules, expected_servers)?;
                Some(RuleLimiter::with_clock(shares, clock.clone()))
            }
            _ => None,
        };
        Ok(RulesFallback { policy, local })
    }

    /// What [`reload`](Self::reload) will put in force for `rules`: checked before anything is
    /// swapped, so a reload that cannot be done changes nothing.
    pub(crate) fn prepare(&self, rules: &Rules) -> Result<Option<Rules>, Error> {
        match self.policy {
            FailurePolicy::Local { expected_servers } => {
                share_rules(rules, expected_servers).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Puts the shares [`prepare`](Self::prepare) made in force.
    pub(crate) fn reload(&self, prepared: Option<Rules>) {
        if let (Some(local), Some(shares)) = (&self.local, prepared) {
            local.reload(shares);
        }
    }

    /// The answer to a request of cost `n` on `keys` that Redis could not decide.
    pub(crate) fn decide(
        &self,
        keys: &[&str],
        n: u64,
        retry: Duration,
        stats: &Counters,
    ) -> Result<Admitted, Denied> {
        answer(self.policy, retry, stats, || match &self.local {
            Some(local) => local.check_all_n(keys, n),
            None => Err(Denied::new(0, Duration::ZERO, Some(retry))),
        })
    }
}

/// `rules` with every quota (overflow buckets' included) at one server's share of `servers`.
fn share_rules(rules: &Rules, servers: u32) -> Result<Rules, Error> {
    let servers = servers.max(1);
    let mut shares = Rules::new();
    for (path, rule) in rules.iter() {
        let quotas = rule.quotas().iter().map(|q| share(q, servers)).collect::<Result<Vec<_>, _>>();
        let overflow = match rule.overflow_policy() {
            OverflowPolicy::SharedBucket(q) => OverflowPolicy::SharedBucket(share(&q, servers)?),
            other => other,
        };
        let mut shared = Rule::new(quotas?);
        shared.shadow(rule.is_shadow()).capacity(rule.table_capacity()).overflow(overflow);
        shares.insert_rule(path, shared);
    }
    Ok(shares)
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakgate::ManualClock;
    use std::sync::Arc;

    #[test]
    fn local_rules_are_each_rules_share() {
        let mut rules = Rules::new();
        rules.insert("api", ["10/s burst 4".parse().unwrap(), "100/min".parse().unwrap()]);
        rules.insert("beta", ["10/s".parse().unwrap()]).shadow(true);
        let shares = share_rules(&rules, 2).unwrap();
        let api = shares.get("api").unwrap();
        assert_eq!(api.quotas()[0].to_string(), "10/2s burst 2");
        assert_eq!(api.quotas()[1].burst(), 50);
        assert!(shares.get("beta").unwrap().is_shadow());

        let clock: LocalClock = Arc::new(ManualClock::new());
        let local = FailurePolicy::Local { expected_servers: 2 };
        let fallback = RulesFallback::new(local, &rules, &clock).unwrap();
        let stats = Counters::default();
        let r = Duration::from_millis(250);
        assert!(fallback.decide(&["api/x"], 2, r, &stats).is_ok());
        assert!(fallback.decide(&["api/x"], 1, r, &stats).is_err());
        assert_eq!(fallback.decide(&["web/x"], 1, r, &stats).unwrap().remaining(), u64::MAX);
        let s = stats.snapshot();
        assert_eq!((s.fallback_admitted, s.fallback_denied), (2, 1));
    }
}
