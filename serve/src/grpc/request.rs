//! A `RateLimitRequest` read into parts: each descriptor's key under the rules (the contract's
//! mapping `D/k1/v1/k2/v2`), its cost, and its descriptor limit override if any.

use crate::limits::{key_too_long, MAX_KEY};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use std::fmt::Write as _;

/// The most descriptors one request may carry.
pub(crate) const MAX_DESCRIPTORS: usize = 64;
/// The most entries one descriptor may have.
pub(crate) const MAX_ENTRIES: usize = 32;

/// A descriptor's `limit` override: `requests` per one `unit` (seconds), its own bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Override {
    pub(crate) requests: u32,
    pub(crate) unit: RateLimitUnit,
    pub(crate) unit_s: u64,
}

impl Override {
    /// The name of its rule: `<requests>/<unit>`, as in `~override/10/minute`.
    pub(crate) fn name(&self) -> String {
        format!("{}/{}", self.requests, self.unit.as_str_name().to_ascii_lowercase())
    }
}

/// One descriptor of a request.
#[derive(Debug)]
pub(crate) struct Part {
    /// The key (without an override's rule path in front); `None` for a descriptor with no
    /// entries, which no rule limits.
    pub(crate) key: Option<String>,
    /// Units to charge; 0 peeks.
    pub(crate) cost: u64,
    pub(crate) limit: Option<Override>,
}

/// Reads `request` into its parts, or says why it is invalid (`INVALID_ARGUMENT`).
pub(crate) fn parts(request: &RateLimitRequest) -> Result<Vec<Part>, String> {
    if request.domain.is_empty() {
        return Err("the domain must not be empty".into());
    }
    if request.descriptors.is_empty() {
        return Err("a request needs at least one descriptor".into());
    }
    if request.descriptors.len() > MAX_DESCRIPTORS {
        return Err(format!(
            "{} descriptors: at most {MAX_DESCRIPTORS} in one request",
            request.descriptors.len()
        ));
    }
    // Envoy's rule: a request's hits_addend of 0 means 1.
    let request_cost = u64::from(request.hits_addend.max(1));
    request
        .descriptors
        .iter()
        .enumerate()
        .map(|(i, d)| {
            part(&request.domain, d, request_cost).map_err(|e| format!("descriptor {i}: {e}"))
        })
        .collect()
}

fn part(domain: &str, d: &RateLimitDescriptor, request_cost: u64) -> Result<Part, String> {
    if d.is_negative_hits {
        return Err("negative hits (giving units back) are not supported".into());
    }
    if d.entries.len() > MAX_ENTRIES {
        return Err(format!("{} entries: at most {MAX_ENTRIES}", d.entries.len()));
    }
    // An explicit 0 on a descriptor is a peek.
    let cost = d.hits_addend.as_ref().map_or(request_cost, |v| v.value);
    let limit = match &d.limit {
        None => None,
        Some(limit) => {
            let unit = RateLimitUnit::try_from(limit.unit).unwrap_or(RateLimitUnit::Unknown);
            let unit_s = match unit {
                RateLimitUnit::Second => 1,
                RateLimitUnit::Minute => 60,
                RateLimitUnit::Hour => 3600,
                RateLimitUnit::Day => 86_400,
                RateLimitUnit::Month => 30 * 86_400,
                RateLimitUnit::Year => 365 * 86_400,
                RateLimitUnit::Unknown => return Err("a limit override needs a known unit".into()),
            };
            Some(Override { requests: limit.requests_per_unit, unit, unit_s })
        }
    };
    if d.entries.is_empty() {
        return Ok(Part { key: None, cost, limit });
    }
    let mut key = String::with_capacity(64);
    key.push_str(domain);
    for entry in &d.entries {
        // Writing to a String cannot fail.
        let _ = write!(key, "/{}", entry.key);
        if !entry.value.is_empty() {
            let _ = write!(key, "/{}", entry.value);
        }
        if key.len() > MAX_KEY {
            return Err(key_too_long(key.len()));
        }
    }
    Ok(Part { key: Some(key), cost, limit })
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;

    fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
        RateLimitDescriptor {
            entries: entries
                .iter()
                .map(|(k, v)| Entry { key: k.to_string(), value: v.to_string() })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn keys_and_costs_follow_the_contract() {
        let mut with_addend = descriptor(&[("user", "")]);
        with_addend.hits_addend = Some(envoy_types::pb::google::protobuf::UInt64Value { value: 0 });
        let request = RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![
                descriptor(&[("ip", "10.0.0.1"), ("path", "/a")]),
                with_addend,
                descriptor(&[]),
            ],
            hits_addend: 0,
        };
        let parts = parts(&request).unwrap();
        assert_eq!(parts[0].key.as_deref(), Some("edge/ip/10.0.0.1/path//a"));
        assert_eq!(parts[0].cost, 1); // 0 in the request means 1
        assert_eq!((parts[1].key.as_deref(), parts[1].cost), (Some("edge/user"), 0));
        assert_eq!(parts[2].key, None);
    }

    #[test]
    fn invalid_requests_say_why() {
        let empty = RateLimitRequest {
            domain: "".into(),
            descriptors: vec![descriptor(&[("a", "b")])],
            hits_addend: 1,
        };
        assert!(parts(&empty).unwrap_err().contains("domain"));
        let none = RateLimitRequest { domain: "d".into(), descriptors: vec![], hits_addend: 1 };
        assert!(parts(&none).is_err());
        let long = "x".repeat(MAX_KEY);
        let big = RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![descriptor(&[("k", &long)])],
            hits_addend: 1,
        };
        assert!(parts(&big).unwrap_err().contains("at most 4096 bytes"));
        let mut negative = descriptor(&[("a", "b")]);
        negative.is_negative_hits = true;
        let neg =
            RateLimitRequest { domain: "d".into(), descriptors: vec![negative], hits_addend: 1 };
        assert!(parts(&neg).unwrap_err().contains("negative"));
    }
}
