//! Judging one request's descriptors all or nothing, and each descriptor's own figures.
//!
//! Every descriptor whose key a rule limits is charged in one `check_all_n` (costs that differ
//! are combined as `costs` explains), so a refusal charges none. A descriptor with a `limit`
//! override is keyed under a rule made for that limit (`~override/<n>/<unit>/<key>`), its own
//! bucket. Each descriptor then reports its own bucket's figures: the decision's when only one
//! key is limited, otherwise a peek at each key (cost 0, counted apart so that `/metrics` does
//! not count it as admitted). A descriptor is `OVER_LIMIT` when the request was refused and its
//! own bucket could not take its cost; shadow rules answer `OK`.

use super::answer;
use super::request::{Override, Part};
use crate::costs;
use crate::limits::{InForce, Limits};
use crate::rules::envoy_yaml::unit_quota;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use leakgate::{Admitted, Clock, Denied, Quota, Rule};
use std::sync::Arc;
use std::time::Duration;

/// A request's answer before it is put in a response.
pub(crate) struct Judged {
    pub(crate) refused: bool,
    pub(crate) statuses: Vec<DescriptorStatus>,
    /// The tightest descriptor's figures, for the IETF fields.
    pub(crate) tightest: Option<Tightest>,
}

/// The enforcing descriptor with the fewest units left.
pub(crate) struct Tightest {
    pub(crate) rule: String,
    pub(crate) quotas: Vec<Quota>,
    pub(crate) remaining: u64,
    pub(crate) reset: Duration,
    /// The request's retry time, when refused.
    pub(crate) retry: Option<Duration>,
}

/// One descriptor while it is judged.
struct Judging {
    /// The full key, with an override's rule path in front.
    key: Option<String>,
    cost: u64,
    limit: Option<Override>,
    /// An override of 0 requests: refuses whatever the buckets hold.
    never: bool,
    /// Another descriptor's rule replaces this one's (envoyproxy/ratelimit's `replaces`).
    replaced: bool,
}

/// The figures of one bucket: remaining, reset, and whether its check refused.
type Figures = (u64, Duration);

fn figures(decision: &Result<Admitted, Denied>) -> Figures {
    match decision {
        Ok(ok) => (ok.remaining(), ok.reset_after()),
        Err(no) => (no.remaining(), no.reset_after()),
    }
}

/// The rule a judged descriptor is under, if it limits it.
fn rule_of<'r>(in_force: &'r InForce, part: &Judging) -> Option<(&'r str, &'r Rule)> {
    let key = part.key.as_deref()?;
    if part.never || part.replaced {
        return None;
    }
    in_force.rules.rule_for(key).filter(|(_, rule)| !rule.quotas().is_empty())
}

/// Judges `parts` all or nothing; with `headers`, also finds the tightest descriptor.
pub(crate) async fn judge<C: Clock + 'static>(
    limits: &Limits<C>,
    parts: Vec<Part>,
    headers: bool,
) -> Result<Judged, String> {
    let mut judging = Vec::with_capacity(parts.len());
    for part in parts {
        let mut key = part.key;
        let never = part.limit.is_some_and(|l| l.requests == 0);
        if let (Some(limit), Some(k), false) = (part.limit, &key, never) {
            let quota = unit_quota(u64::from(limit.requests), limit.unit_s)?;
            let path = crate::limits::blocking(|| limits.ensure_override(&limit.name(), quota))?;
            key = Some(format!("{path}/{k}"));
        }
        judging.push(Judging { key, cost: part.cost, limit: part.limit, never, replaced: false });
    }
    let in_force = limits.in_force();
    if !in_force.replaces.is_empty() {
        let paths: Vec<Option<&str>> =
            judging.iter().map(|p| rule_of(&in_force, p).map(|(path, _)| path)).collect();
        let off = in_force.replaces.replaced(&paths);
        for (part, off) in judging.iter_mut().zip(off) {
            part.replaced = off;
        }
    }
    let never = judging.iter().any(|p| p.never && p.key.is_some());
    let limited: Vec<usize> =
        (0..judging.len()).filter(|&i| rule_of(&in_force, &judging[i]).is_some()).collect();
    // The request's decision: refused outright by a zero limit, else one all-or-nothing check.
    let mut names = Vec::new();
    let charges =
        limited.iter().map(|&i| (judging[i].key.as_deref().unwrap_or(""), judging[i].cost));
    let unit = costs::namings(charges, &mut names).map_err(|e| e.to_string())?;
    let decision = if never {
        Err(Denied::new(0, Duration::ZERO, None))
    } else if unit == 0 {
        Ok(Admitted::new(u64::MAX, Duration::ZERO))
    } else {
        let checked = limits.check_all(&in_force, &names, unit).await;
        if checked.failed {
            let mut keys = names.clone();
            keys.sort_unstable();
            keys.dedup();
            limits.count_failure(&in_force.rules, &keys);
        }
        checked.decision
    };
    let refused = decision.is_err();
    // Each limited descriptor's own figures.
    let mut distinct: Vec<&str> =
        limited.iter().filter_map(|&i| judging[i].key.as_deref()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let single = distinct.len() == 1 && unit != 0 && !never;
    let own: Vec<(String, Figures)> = if single {
        distinct.iter().map(|key| (key.to_string(), figures(&decision))).collect()
    } else {
        // The peeks go together: with Redis, their round trips overlap.
        let peeks = distinct.iter().map(|key| limits.peek(&in_force, key));
        let peeked = futures_util::future::join_all(peeks).await;
        distinct
            .iter()
            .zip(peeked)
            .map(|(key, p)| (key.to_string(), figures(&p.decision)))
            .collect()
    };
    let own_of = |key: &str| own.iter().find(|(k, _)| k == key).map(|(_, f)| *f);
    let statuses = statuses(&in_force, &judging, refused, single, &own_of);
    let tightest = if headers { tightest(&in_force, &judging, &own_of, &decision) } else { None };
    Ok(Judged { refused, statuses, tightest })
}

/// Each descriptor's status, given the request's decision (`refused`), whether one key decided
/// alone (`single`: its decision is its figures), and each limited key's own figures.
fn statuses(
    in_force: &InForce,
    judging: &[Judging],
    refused: bool,
    single: bool,
    own_of: &dyn Fn(&str) -> Option<Figures>,
) -> Vec<DescriptorStatus> {
    // What the request asks of one key, over every descriptor naming it.
    let total_cost = |key: &str| -> u128 {
        let named = judging.iter().filter(|p| p.key.as_deref() == Some(key));
        named.filter(|p| rule_of(in_force, p).is_some()).map(|p| u128::from(p.cost)).sum()
    };
    let mut statuses = Vec::with_capacity(judging.len());
    let mut over_any = false;
    for part in judging {
        let mut status = DescriptorStatus {
            code: Code::Ok as i32,
            current_limit: None,
            limit_remaining: u32::MAX,
            duration_until_reset: Some(pb_duration(Duration::ZERO)),
            quota: None,
        };
        if part.never && part.key.is_some() {
            status.code = Code::OverLimit as i32;
            status.limit_remaining = 0;
            status.current_limit = part.limit.and_then(|l| override_limit(&l));
            over_any = true;
        } else if let Some((path, rule)) = rule_of(in_force, part) {
            let key = part.key.as_deref().unwrap_or("");
            let (remaining, reset) = own_of(key).unwrap_or((u64::MAX, Duration::ZERO));
            status.limit_remaining = u32::try_from(remaining).unwrap_or(u32::MAX);
            status.duration_until_reset = Some(pb_duration(reset));
            status.current_limit = match (&part.limit, rule.quotas()) {
                (Some(limit), _) => override_limit(limit),
                (None, [quota]) => answer::current_limit(path, *quota),
                _ => None,
            };
            // Its own bucket could not take what the request asked of it.
            let short = single || total_cost(key) > u128::from(remaining);
            if refused && !rule.is_shadow() && part.cost > 0 && short {
                status.code = Code::OverLimit as i32;
                over_any = true;
            }
        }
        statuses.push(status);
    }
    if refused && !over_any {
        // Refused, yet every bucket now has room (others moved meanwhile): every enforcing
        // descriptor that was charged shares the refusal.
        for (part, status) in judging.iter().zip(&mut statuses) {
            let enforcing = rule_of(in_force, part).is_some_and(|(_, rule)| !rule.is_shadow());
            if enforcing && part.cost > 0 {
                status.code = Code::OverLimit as i32;
            }
        }
    }
    statuses
}

/// The enforcing descriptor with the fewest units left (the longest reset on a tie), for the
/// IETF fields.
fn tightest(
    in_force: &Arc<InForce>,
    judging: &[Judging],
    own_of: &dyn Fn(&str) -> Option<Figures>,
    decision: &Result<Admitted, Denied>,
) -> Option<Tightest> {
    let retry = decision.as_ref().err().and_then(Denied::retry_after);
    judging
        .iter()
        .filter_map(|part| {
            let (path, rule) = rule_of(in_force, part).filter(|(_, rule)| !rule.is_shadow())?;
            let (remaining, reset) = own_of(part.key.as_deref()?)?;
            let (rule, quotas) = (path.to_string(), rule.quotas().to_vec());
            Some(Tightest { rule, quotas, remaining, reset, retry })
        })
        .min_by(|a, b| a.remaining.cmp(&b.remaining).then(b.reset.cmp(&a.reset)))
}

/// An override as Envoy's `current_limit`.
fn override_limit(
    limit: &Override,
) -> Option<envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit> {
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
    // The override's unit and the response's share their numbers (SECOND = 1 ... YEAR = 6).
    Some(RateLimit {
        name: format!("~override/{}", limit.name()),
        requests_per_unit: limit.requests,
        unit: limit.unit as i32,
    })
}

fn pb_duration(d: Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}
