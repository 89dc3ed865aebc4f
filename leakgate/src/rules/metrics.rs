//! Per-rule counters through the `metrics` facade (feature `metrics`), so any exporter
//! (Prometheus, StatsD, ...) picks them up.

use super::RuleLimiter;
use crate::clock::Clock;

impl<C: Clock + 'static> RuleLimiter<C> {
    /// Records every rule's counts with the `metrics` recorder installed in the process, as three
    /// counters labelled `rule = PATH`: `leakgate_rule_admitted_total`,
    /// `leakgate_rule_denied_total` and `leakgate_rule_denied_in_shadow_total`. Counting stays
    /// on the limiter's per-thread counters; this call (from a scrape handler or a timer) copies
    /// their totals out, so checks never touch the recorder.
    ///
    /// ```
    /// use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    /// let _ = lim.check("api/alice");
    /// lim.record_metrics(); // a no-op until a recorder is installed
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn record_metrics(&self) {
        for stats in self.stats() {
            let rule = stats.rule;
            metrics::counter!("leakgate_rule_admitted_total", "rule" => rule.clone())
                .absolute(stats.admitted);
            metrics::counter!("leakgate_rule_denied_total", "rule" => rule.clone())
                .absolute(stats.denied);
            metrics::counter!("leakgate_rule_denied_in_shadow_total", "rule" => rule)
                .absolute(stats.denied_in_shadow);
        }
    }
}
