//! [`RulesGate`]: requests charged by key path to a [`RuleLimiter`](leakgate::RuleLimiter), the
//! path found by a [`KeyExtractor`]; each response announcing the rule its key is under. A meter
//! only: leakgate's rules have no queue mode.

use super::{key_or_keyless, BucketRef, Checked, Gate, GateInfo, RuleRef, RuleView};
use crate::key::{KeyError, KeyExtractor, OnKeyError};
use crate::live_rules::LiveRules;
use http::request::Parts;
use leakgate::{Clock, Quota};
use std::collections::HashMap;
use std::sync::Arc;

/// The key a request without one is checked as under [`OnKeyError::Global`]: the empty path,
/// which only the default rule `""` matches.
const KEYLESS: &str = "";

/// Requests checked against the rules, by the key path their extractor finds.
pub(crate) struct RulesGate<E: KeyExtractor, C: Clock> {
    rules: Arc<LiveRules<C>>,
    extractor: E,
}

impl<E: KeyExtractor, C: Clock> RulesGate<E, C> {
    pub(crate) fn new(rules: Arc<LiveRules<C>>, extractor: E) -> Self {
        RulesGate { rules, extractor }
    }
}

impl<E, C> Gate for RulesGate<E, C>
where
    E: KeyExtractor,
    E::Key: AsRef<str>,
    C: Clock + 'static,
{
    #[inline]
    fn check(&self, request: &Parts, on_key_error: OnKeyError) -> Result<Checked, KeyError> {
        let key = key_or_keyless(self.extractor.extract(request), on_key_error)?;
        let path = key.as_ref().map_or(KEYLESS, |key| key.as_ref());
        // The rule is found before the check: see `LiveRules` for a check racing a reload.
        let announce = self.rules.announce(path);
        let decision = self.rules.limiter().check(path);
        Ok(Checked { decision, keyless: key.is_none(), announce })
    }

    fn quota(&self) -> Option<Quota> {
        None
    }

    fn buckets(&self, prefix: Option<&str>, min_fill: f64, visit: &mut dyn FnMut(BucketRef<'_>)) {
        for state in self.rules.limiter().buckets(prefix.unwrap_or(""), min_fill) {
            visit(BucketRef {
                key: Some(&state.key),
                remaining: state.remaining,
                fill: state.fill,
                reset_after: state.reset_after,
                idle: Some(state.since_last_use),
                rule: Some(RuleRef {
                    path: &state.rule,
                    quota_index: state.quota_index,
                    quota: state.quota,
                }),
            });
        }
    }

    fn info(&self) -> GateInfo {
        GateInfo { kind: "rules", capacity: None, overflow_denials: None }
    }

    fn rules(&self) -> Option<Vec<RuleView>> {
        // The limiter's counts (kept by path across reloads), for the rules the layer knows.
        let counts: HashMap<String, _> = self
            .rules
            .limiter()
            .stats()
            .into_iter()
            .map(|stats| (stats.rule.clone(), stats))
            .collect();
        let mut rules = Vec::new();
        self.rules.each_rule(|path, rule| {
            let stats = counts.get(path);
            rules.push(RuleView {
                rule: path.to_owned(),
                quotas: rule.quotas().iter().map(Quota::to_string).collect(),
                shadow: rule.is_shadow(),
                admitted: stats.map_or(0, |s| s.admitted),
                denied: stats.map_or(0, |s| s.denied),
                denied_in_shadow: stats.map_or(0, |s| s.denied_in_shadow),
            });
        });
        Some(rules)
    }
}
