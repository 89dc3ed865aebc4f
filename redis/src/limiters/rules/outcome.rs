//! A rules check's decision from the script's reply: which rules refused, what the request gets,
//! and what each rule counts, as `leakgate::RuleLimiter` decides (see `leakgate::docs::rules`).

use super::compiled::CompiledRule;
use crate::script::units::Rate;
use crate::script::{CallKey, Reply};
use leakgate::{Admitted, Denied};
use std::time::Duration;

/// The decision for a request of cost `n` (0: a peek) on `keys`, the `i`-th under `rules[i]`,
/// from the script's `reply`; each rule met is counted once.
///
/// A bucket conforms iff its backlog plus the cost is within its tau. The script refused the
/// request iff a bucket of an enforcing rule refuses (then it charged nothing); a shadow rule with
/// a bucket that refuses was not charged and is left out of the report. The report is the smallest
/// `remaining()` and the largest `reset_after()` over the other buckets (after the charge when
/// admitted), and for a refusal the largest wait over the enforcing buckets that refuse (`None`
/// if one of them never can conform). A request whose every bucket is left out reports as an
/// untracked key: `u64::MAX` remaining, no reset.
pub(crate) fn decide(
    keys: &[CallKey<'_>],
    rules: &[&CompiledRule],
    n: u64,
    reply: &Reply,
) -> Result<Admitted, Denied> {
    let cost_of = |key: &CallKey<'_>, rate: &Rate| rate.cost(n.saturating_mul(key.times_named));
    let refuses =
        |key: &CallKey<'_>, rate: &Rate, before: u128| before + cost_of(key, rate) > rate.tau();
    // Which keys have a bucket that refuses, then which rules (a rule refuses through any key).
    let mut key_refused = vec![false; keys.len()];
    let mut x = 0;
    for (i, key) in keys.iter().enumerate() {
        for rate in key.rates {
            key_refused[i] |= refuses(key, rate, reply.backlogs[x]);
            x += 1;
        }
    }
    let same_rule = |i: usize, j: usize| std::ptr::eq(rules[i], rules[j]);
    let rule_refused: Vec<bool> = (0..keys.len())
        .map(|i| (0..keys.len()).any(|j| same_rule(i, j) && key_refused[j]))
        .collect();
    // The script's verdict (what it charged); the same as "an enforcing rule refused", which the
    // tests check against the in-process limiter.
    let denied = n > 0 && !reply.granted;

    let (mut remaining, mut reset) = (u64::MAX, 0u128);
    let mut retry: Option<Duration> = Some(Duration::ZERO);
    let mut x = 0;
    for (i, key) in keys.iter().enumerate() {
        let left_out = rules[i].shadow && rule_refused[i];
        for rate in key.rates {
            let before = reply.backlogs[x];
            x += 1;
            if left_out {
                continue;
            }
            let cost = cost_of(key, rate);
            let backlog = if denied { before } else { before + cost };
            remaining = remaining.min(rate.remaining(backlog));
            reset = reset.max(rate.units_to_duration_ceil(backlog).as_nanos());
            if denied && refuses(key, rate, before) {
                retry = match retry {
                    Some(_) if cost > rate.tau() => None,
                    Some(longest) => {
                        Some(longest.max(rate.units_to_duration_ceil(before + cost - rate.tau())))
                    }
                    None => None,
                };
            }
        }
    }
    count(rules, &rule_refused, denied);
    let reset_after = Duration::from_nanos(u64::try_from(reset).unwrap_or(u64::MAX));
    if denied {
        Err(Denied::new(remaining, reset_after, retry))
    } else {
        Ok(Admitted::new(remaining, reset_after))
    }
}

/// Counts the request once for each rule it met.
fn count(rules: &[&CompiledRule], rule_refused: &[bool], denied: bool) {
    for (i, rule) in rules.iter().enumerate() {
        if rules[..i].iter().any(|earlier| std::ptr::eq(*earlier, *rule)) {
            continue;
        }
        let counter = match (rule_refused[i], rule.shadow, denied) {
            (true, true, _) => &rule.counts.denied_in_shadow,
            (true, false, _) => &rule.counts.denied,
            (false, _, false) => &rule.counts.admitted,
            (false, _, true) => continue,
        };
        counter.inc();
    }
}
