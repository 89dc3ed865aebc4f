//! What a `ShouldRateLimit` answer says about each descriptor: its code, `current_limit` (when
//! its quota fits Envoy's units), `limit_remaining`, `duration_until_reset`; and the IETF
//! `RateLimit`/`RateLimit-Policy` fields for the response headers.
//!
//! # Which quotas Envoy's units express
//!
//! Envoy describes a limit as `requests_per_unit` per one `unit` (second, minute, hour, day,
//! week, month, year): a fixed window. A GCRA quota is `burst` units at once, refilled at
//! `count / period`; it is full again `tau = burst * period / count` after it was emptied. It
//! is reported as `burst` per `unit` exactly when `tau` is one unit (`10/s` is 10 per SECOND,
//! `100/min` 100 per MINUTE, `1/s burst 60` 60 per MINUTE); otherwise (`5/30s`, `100/s burst
//! 20`) no `current_limit` is sent, since any window would misstate the limit. A rule with
//! several quotas sends none either.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
use leakgate::Quota;
use std::time::Duration;

/// Envoy's response units with their length in seconds.
const UNITS: [(Unit, u64); 7] = [
    (Unit::Second, 1),
    (Unit::Minute, 60),
    (Unit::Hour, 3600),
    (Unit::Day, 86_400),
    (Unit::Week, 7 * 86_400),
    (Unit::Month, 30 * 86_400),
    (Unit::Year, 365 * 86_400),
];

/// `quota` as `requests_per_unit` per one of Envoy's units, when `tau` is exactly one unit.
pub(crate) fn current_limit(name: &str, quota: Quota) -> Option<RateLimit> {
    let period_ns = quota.period().as_nanos();
    let requests = u32::try_from(quota.burst()).ok()?;
    let (unit, _) = UNITS.iter().find(|(_, unit_s)| {
        // tau = burst * period / count == unit_s seconds, cross-multiplied (u128: no overflow).
        u128::from(quota.burst()) * period_ns
            == u128::from(*unit_s) * 1_000_000_000 * u128::from(quota.count())
    })?;
    Some(RateLimit { name: name.to_string(), requests_per_unit: requests, unit: *unit as i32 })
}

/// The largest integer a Structured Field may carry.
const SF_MAX: u128 = 999_999_999_999_999;

/// `(q, w)` of `RateLimit-Policy` for `quota`, as `leakgate-tower` states them: `w` is the
/// time the bucket takes to refill, `max(1, ceil(tau))` seconds, and `q` the units the rate
/// adds over `w`, rounded down; `N/s burst N` is `q=N;w=1`.
pub(crate) fn window(quota: Quota) -> (u128, u128) {
    let count = u128::from(quota.count());
    let period_ns = quota.period().as_nanos();
    let tau_ns = (u128::from(quota.burst()) * period_ns).div_ceil(count);
    let w = tau_ns.div_ceil(1_000_000_000).max(1);
    let q = (w * 1_000_000_000 * count) / period_ns;
    (q.min(SF_MAX), w.min(SF_MAX))
}

/// `text` as a Structured Field String: quoted, `\` and `"` escaped, anything but printable
/// ASCII written as `?`.
pub(crate) fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

/// Whole seconds, rounded up.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue { key: key.to_string(), value, raw_value: Vec::new() }
}

/// The fields for a decision on `rule`'s `quotas` (draft-ietf-httpapi-ratelimit-headers-10):
/// `RateLimit-Policy` with one item per quota (named `rule`, or `rule#i` for several),
/// `RateLimit` with `r = remaining` and `t = reset` rounded up, and `Retry-After` when refused
/// with a known wait.
pub(crate) fn headers(
    rule: &str,
    quotas: &[Quota],
    remaining: u64,
    reset: Duration,
    retry_after: Option<Duration>,
) -> Vec<HeaderValue> {
    let items: Vec<String> = quotas
        .iter()
        .enumerate()
        .map(|(i, &quota)| {
            let name = if quotas.len() == 1 { rule.to_string() } else { format!("{rule}#{i}") };
            let (q, w) = window(quota);
            format!("{};q={q};w={w}", sf_string(&name))
        })
        .collect();
    let r = u128::from(remaining).min(SF_MAX);
    let t = u128::from(ceil_secs(reset)).min(SF_MAX);
    let mut out = vec![
        header("RateLimit-Policy", items.join(", ")),
        header("RateLimit", format!("{};r={r};t={t}", sf_string(rule))),
    ];
    if let Some(wait) = retry_after {
        out.push(header("Retry-After", ceil_secs(wait).to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quota {
        text.parse().unwrap()
    }

    #[test]
    fn envoys_units_express_a_quota_when_tau_is_one_unit() {
        let limit = |text| current_limit("r", q(text)).map(|l| (l.requests_per_unit, l.unit));
        assert_eq!(limit("10/s"), Some((10, Unit::Second as i32)));
        assert_eq!(limit("100/min"), Some((100, Unit::Minute as i32)));
        assert_eq!(limit("1/s burst 60"), Some((60, Unit::Minute as i32)));
        assert_eq!(limit("1000/day"), Some((1000, Unit::Day as i32)));
        assert_eq!(limit("5/30s"), None);
        assert_eq!(limit("100/s burst 20"), None);
    }

    #[test]
    fn policy_windows_as_the_tower_layer_states_them() {
        assert_eq!(window(q("10/s")), (10, 1));
        assert_eq!(window(q("100/min")), (100, 60));
        assert_eq!(window(q("1/s burst 10")), (10, 10));
        assert_eq!(window(q("100/s burst 20")), (100, 1));
        assert_eq!(window(q("7/min burst 1")), (1, 9));
    }

    #[test]
    fn fields_are_structured_field_lists() {
        let h = headers(
            "api",
            &[q("10/s")],
            3,
            Duration::from_millis(700),
            Some(Duration::from_millis(100)),
        );
        let text: Vec<(String, String)> = h.into_iter().map(|h| (h.key, h.value)).collect();
        assert_eq!(
            text,
            [
                ("RateLimit-Policy".into(), "\"api\";q=10;w=1".into()),
                ("RateLimit".into(), "\"api\";r=3;t=1".into()),
                ("Retry-After".into(), "1".into()),
            ]
        );
        assert_eq!(sf_string("a\"b\\c\u{e9}"), "\"a\\\"b\\\\c?\"");
    }
}
