//! envoyproxy/ratelimit's YAML configuration, translated into [`Rules`].
//!
//! Each document is one `domain` with nested `descriptors`. A descriptor node `key: k` with
//! `value: v` is the path segment `k/v`; one without a value (any value, each its own counter)
//! is the segment `k`, under which every value is a key of its own bucket. So the node reached
//! by `(k1, v1), (k2)` in domain `D` is the rule `D/k1/v1/k2`, and the request descriptor
//! `(k1, v1), (k2, x)` is the key `D/k1/v1/k2/x` under it: the contract's key mapping.
//!
//! * `rate_limit: {unit, requests_per_unit}` is the quota `requests_per_unit` per unit with a
//!   burst of `requests_per_unit` (units: second, minute, hour, day, week = 7 days, month = 30
//!   days, year = 365 days); GCRA instead of a fixed window, so no boundary doubles it.
//! * `unlimited: true` is a rule without quotas: its keys are admitted and not tracked.
//! * `shadow_mode: true` makes the rule a shadow rule.
//! * `name` and `replaces` are kept: when a request's descriptors match a rule that replaces
//!   a named one, the named one does not apply to that request.
//! * `detailed_metric` and `value_to_metric` are accepted and ignored (metrics are per rule).
//!
//! Not supported (a file using them is refused with a message naming the node):
//! * a node without a `value` that has nested `descriptors` (a rule below a wildcard: rules
//!   match key prefixes, and the value sits in the middle of the key);
//! * values ending in `*` (prefix wildcards);
//! * `requests_per_unit: 0` (a limit that refuses everything).
//!
//! One difference in meaning: a request descriptor with more entries than the configured nesting
//! is limited by the deepest configured node it passes (longest prefix), where
//! envoyproxy/ratelimit does not limit it.

use crate::rules::replaces::Replaces;
use crate::rules::LoadedRules;
use leakgate::{Quota, Rule, Rules};
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    domain: String,
    #[serde(default)]
    descriptors: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Descriptor {
    key: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    rate_limit: Option<Limit>,
    #[serde(default)]
    shadow_mode: bool,
    #[serde(default)]
    #[allow(dead_code)]
    detailed_metric: bool,
    #[serde(default)]
    #[allow(dead_code)]
    value_to_metric: bool,
    #[serde(default)]
    descriptors: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Limit {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    replaces: Vec<Replace>,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    requests_per_unit: Option<u64>,
    #[serde(default)]
    unlimited: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Replace {
    name: String,
}

/// The length of one of Envoy's units, by name (any case).
pub(crate) fn unit_seconds(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        "week" => 7 * 86_400,
        "month" => 30 * 86_400,
        "year" => 365 * 86_400,
        _ => return None,
    })
}

/// `requests` per `unit_s` seconds, `requests` at once.
pub(crate) fn unit_quota(requests: u64, unit_s: u64) -> Result<Quota, String> {
    Quota::new(requests, Duration::from_secs(unit_s), requests).map_err(|e| e.to_string())
}

/// Translates every document of `text`.
pub(crate) fn translate(text: &str) -> Result<LoadedRules, String> {
    let mut out = LoadedRules { rules: Rules::new(), replaces: Replaces::default() };
    for document in serde_norway::Deserializer::from_str(text) {
        let config = Config::deserialize(document).map_err(|e| format!("not valid: {e}"))?;
        if config.domain.is_empty() {
            return Err("a document has an empty domain".into());
        }
        if config.domain.starts_with(crate::limits::RESERVED) {
            return Err(format!("domain {:?}: a domain may not start with '~'", config.domain));
        }
        for descriptor in &config.descriptors {
            walk(descriptor, &config.domain, &mut out)?;
        }
    }
    Ok(out)
}

fn walk(node: &Descriptor, parent: &str, out: &mut LoadedRules) -> Result<(), String> {
    let path = match node.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{parent}/{}/{value}", node.key),
        _ => format!("{parent}/{}", node.key),
    };
    let at = |message: String| format!("descriptor {path:?}: {message}");
    if node.key.is_empty() {
        return Err(at("a descriptor needs a key".into()));
    }
    if node.value.as_deref().is_some_and(|v| v.ends_with('*')) {
        return Err(at("values ending in '*' (prefix wildcards) are not supported".into()));
    }
    let wildcard = node.value.as_deref().is_none_or(str::is_empty);
    if wildcard && !node.descriptors.is_empty() {
        return Err(at(
            "nested descriptors under a key without a value are not supported (rules match key \
             prefixes, and the value would sit in the middle of the key)"
                .into(),
        ));
    }
    if let Some(limit) = &node.rate_limit {
        let mut rule = if limit.unlimited {
            Rule::new([])
        } else {
            let unit = limit.unit.as_deref().ok_or_else(|| at("rate_limit needs a unit".into()))?;
            let unit_s = unit_seconds(unit).ok_or_else(|| {
                at(format!(
                    "unknown unit {unit:?} (second, minute, hour, day, week, month or year)"
                ))
            })?;
            let requests = limit
                .requests_per_unit
                .ok_or_else(|| at("rate_limit needs requests_per_unit".into()))?;
            if requests == 0 {
                return Err(at("requests_per_unit: 0 (refuse everything) is not supported".into()));
            }
            Rule::new([unit_quota(requests, unit_s).map_err(at)?])
        };
        rule.shadow(node.shadow_mode);
        if out.rules.get(&path).is_some() {
            return Err(at("configured twice".into()));
        }
        out.rules.insert_rule(path.clone(), rule);
        if let Some(name) = &limit.name {
            out.replaces.names.insert(path.clone(), name.clone());
        }
        if !limit.replaces.is_empty() {
            let names = limit.replaces.iter().map(|r| r.name.clone()).collect();
            out.replaces.replaces.insert(path.clone(), names);
        }
    }
    for child in &node.descriptors {
        walk(child, &path, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
---
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unlimited: true
  - key: header_match
    value: beta
    shadow_mode: true
    rate_limit:
      name: beta
      unit: HOUR
      requests_per_unit: 100
    descriptors:
      - key: plan
        value: gold
        rate_limit:
          replaces:
            - name: beta
          unit: day
          requests_per_unit: 1000
"#;

    #[test]
    fn envoys_example_translates() {
        let loaded = translate(EXAMPLE).unwrap();
        let rules = &loaded.rules;
        assert_eq!(rules.len(), 6);
        assert_eq!(rules.get("mongo_cps/database/users").unwrap().to_string(), "500/s");
        assert_eq!(rules.get("edge_proxy_per_ip/remote_address").unwrap().to_string(), "10/min");
        assert!(rules
            .get("edge_proxy_per_ip/remote_address/50.0.0.5")
            .unwrap()
            .quotas()
            .is_empty());
        let beta = rules.get("edge_proxy_per_ip/header_match/beta").unwrap();
        assert!(beta.is_shadow());
        assert_eq!(beta.quotas()[0], "100/h".parse().unwrap());
        let gold = "edge_proxy_per_ip/header_match/beta/plan/gold";
        assert_eq!(rules.get(gold).unwrap().quotas()[0], "1000/day".parse().unwrap());
        assert_eq!(loaded.replaces.replaces[gold], ["beta"]);
        assert_eq!(loaded.replaces.names["edge_proxy_per_ip/header_match/beta"], "beta");
        // The contract's key mapping finds these rules.
        let (path, _) = rules.rule_for("edge_proxy_per_ip/remote_address/10.0.0.1").unwrap();
        assert_eq!(path, "edge_proxy_per_ip/remote_address");
    }

    #[test]
    fn what_is_not_supported_is_refused_by_name() {
        let nested_wildcard = "domain: d\ndescriptors:\n  - key: ip\n    descriptors:\n      - key: path\n        value: /x\n        rate_limit: {unit: second, requests_per_unit: 1}\n";
        assert!(translate(nested_wildcard).unwrap_err().contains("\"d/ip\""));
        let star = "domain: d\ndescriptors:\n  - key: k\n    value: ab*\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
        assert!(translate(star).unwrap_err().contains("wildcards"));
        let zero = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 0}\n";
        assert!(translate(zero).unwrap_err().contains("not supported"));
        let typo = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, request_per_unit: 1}\n";
        assert!(translate(typo).unwrap_err().contains("request_per_unit"));
        let unit = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n";
        assert!(translate(unit).unwrap_err().contains("fortnight"));
    }
}
