//! [`Limits::check_all`]: one all-or-nothing check over keys of the rules limiter and, in memory,
//! of the descriptor overrides' table.
//!
//! An override key (`~override/<n>/<unit>/<key>`, under a rule made for that override) has its
//! bucket in the overrides' [`Table`](crate::tat::Table), the rules file's keys theirs in the
//! rules limiter. The table locks its keys, decides them, asks the rules limiter only if they
//! all conform, and charges them only if it admits too: a refusal anywhere charges nothing.
//! With Redis the override rules are rules there, and one script call decides everything.

use crate::backend::{Backend, Checked};
use crate::cell::untracked;
use crate::limits::{InForce, Limits, OVERRIDE_HEAD};
use crate::tat::{Charge, Params};
use leakgate::Clock;
use std::sync::atomic::Ordering;

impl<C: Clock + 'static> Limits<C> {
    /// Checks cost `n` on every key at once, all or nothing, each under the rule in force that
    /// limits it (`in_force`: read by the caller, who reports against the same rules).
    pub(crate) async fn check_all(&self, in_force: &InForce, keys: &[&str], n: u64) -> Checked {
        let (Some(table), Backend::Memory(lim)) = (&self.overrides, &self.rules) else {
            return self.rules.check_all(keys, n).await;
        };
        let mut charges = Vec::new();
        let mut paths = Vec::new();
        let mut rest = Vec::with_capacity(keys.len());
        for key in keys {
            let rule = in_force.rules.rule_for(key);
            match rule.filter(|(path, _)| path.starts_with(OVERRIDE_HEAD)) {
                Some((path, rule)) if !rule.quotas().is_empty() => {
                    let params = Params::of(rule.quotas()[0]);
                    charges.push(Charge { key: key.as_bytes(), params });
                    paths.push(path);
                }
                _ => rest.push(*key),
            }
        }
        if charges.is_empty() {
            return self.rules.check_all(keys, n).await;
        }
        let outcome = table.check_all(&charges, n, || match rest.as_slice() {
            [] => untracked(),
            [key] => lim.check_n(key, n),
            _ => lim.check_all_n(&rest, n),
        });
        if n > 0 {
            // Each override rule once: admitted with the request, refused if its own bucket
            // refused. Relaxed: statistics.
            let admitted = outcome.decision.is_ok();
            let mut counted: Vec<&str> = Vec::with_capacity(paths.len());
            for (path, conformed) in paths.iter().zip(&outcome.conformed) {
                if counted.contains(path) || (!admitted && *conformed) {
                    continue;
                }
                counted.push(path);
                let extra = self.metrics.rule(path);
                let count = if admitted { &extra.admitted } else { &extra.refused };
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        Checked { decision: outcome.decision, failed: false }
    }
}
