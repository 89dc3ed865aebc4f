//! The response fields: `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-10, Structured Field lists serialised with `sfv`) and
//! `Retry-After`.
//!
//! # What `q` and `w` say about a GCRA quota
//!
//! The draft describes a policy as a quota `q` of units in a window of `w` whole seconds. A GCRA
//! bucket is a different shape: `burst` units at once, refilled at `count / period`, so with
//! `T = period / count` it is full again `tau = burst * T` after it was emptied. Its `RateLimit`
//! numbers are `r = remaining()` (at most `burst`) and `t = reset_after()` rounded up (at most
//! `tau` rounded up). The policy is chosen so that:
//!
//! * `w = max(1, ceil(tau))` seconds: the time the bucket takes to refill completely, which is the
//!   longest `t` ever reported, so `t <= w` on every response. In queue mode a bucket also holds
//!   the places of the requests waiting in it, so it can stay full for up to `max_wait` longer
//!   than `tau`; `t` then says `w` (the most the policy lets it say), and a 429's `Retry-After`
//!   gives the real wait. (A clock that went backwards can do the same, and is capped alike.)
//! * `q = floor(w / T)`: the units the quota's rate adds over `w`, rounded down, so a client that
//!   spends `q` units per `w` seconds never goes faster than the quota's sustained rate, and
//!   `r <= burst <= q` on every response.
//!
//! When `tau` is a whole number of seconds, `w = tau` and `q = burst` exactly: `N/s burst N` is
//! `q=N;w=1`, `100/min` is `q=100;w=60`, and `1/s burst 10` is `q=10;w=10` (ten at once, refilled
//! over ten seconds, one a second on average). Otherwise the window is rounded up to whole
//! seconds and `q` is the rate over it: `100/s burst 20` (`tau` = 0.2 s) is `q=100;w=1`, the
//! sustained rate, with `r` never above 20 telling the client how much it may send at once;
//! `7/min burst 1` (`tau` = 8.57 s) is `q=1;w=9`, slightly below the true rate because `q` is
//! rounded down. Integers above the Structured Field maximum (999,999,999,999,999) are capped at
//! it.
//!
//! `policy.rs` makes the field values of a [`Policy`]; `intern.rs` keeps one copy of each, for
//! the life of the program, within a budget.

mod intern;
mod policy;

#[cfg(test)]
pub(crate) use intern::LIMIT as INTERN_LIMIT;
#[cfg(test)]
pub(crate) use policy::{fill_interner, interned_bytes};
pub(crate) use policy::{policy_name, Policy, PolicyRef};

use http::HeaderValue;
use leakgate::Quota;
use sfv::Integer;
use std::fmt;
use std::time::Duration;

/// The `RateLimit-Policy` field name.
pub(crate) const RATELIMIT_POLICY: http::HeaderName =
    http::HeaderName::from_static("ratelimit-policy");
/// The `RateLimit` field name.
pub(crate) const RATELIMIT: http::HeaderName = http::HeaderName::from_static("ratelimit");

/// Nanoseconds in a second, as the `u128` the window arithmetic is done in.
const NS_PER_S: u128 = 1_000_000_000;

/// A policy name that cannot be a Structured Field String (RFC 9651: printable ASCII only).
///
/// ```
/// use leakgate::{Limiter, Quota};
/// use leakgate_tower::RateLimitLayer;
/// let layer = RateLimitLayer::global(Limiter::new(Quota::per_second(5)?));
/// let err = layer.policy_name("naïve").unwrap_err();
/// assert!(err.to_string().contains("printable ASCII"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidPolicyName {
    name: String,
}

impl fmt::Display for InvalidPolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid rate-limit policy name {:?}: a Structured Field String holds printable \
             ASCII only",
            self.name
        )
    }
}

impl std::error::Error for InvalidPolicyName {}

/// `(q, w)` for a quota, as explained in the module docs.
pub(crate) fn window(quota: Quota) -> (u64, u64) {
    let count = u128::from(quota.count());
    let period_ns = quota.period().as_nanos();
    let burst = u128::from(quota.burst());
    // tau = burst * period / count, in ns; w = ceil(tau / 1 s), at least 1. burst * period_ns
    // < 2^128 (both < 2^64) and count * 10^9 < 2^94, so nothing overflows.
    let w = (burst * period_ns).div_ceil(count * NS_PER_S).max(1);
    // q = floor(w / T) = floor(w * 10^9 * count / period_ns). A validated quota keeps tau within
    // about a century (w < 2^32), so w * 10^9 * count < 2^32 * 2^30 * 2^64 = 2^126.
    let q = w.saturating_mul(NS_PER_S).saturating_mul(count) / period_ns.max(1);
    (saturate(q), saturate(w))
}

/// A `u128` as `u64`, saturating.
fn saturate(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// A duration in whole seconds, rounded up (`delay-seconds`), saturating.
pub(crate) fn whole_seconds_up(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

/// The largest Structured Field Integer.
const SF_INTEGER_MAX: u64 = 999_999_999_999_999;

/// A non-negative count as a Structured Field Integer, capped at its maximum (10^15 - 1).
fn sf_integer(v: u64) -> Integer {
    Integer::try_from(v.min(SF_INTEGER_MAX)).unwrap_or(Integer::MAX)
}

/// The `Retry-After` value for a wait: delay-seconds, rounded up.
pub(crate) fn retry_after(wait: Duration) -> HeaderValue {
    HeaderValue::from(whole_seconds_up(wait))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quota {
        s.parse().unwrap()
    }

    fn named(name: &str, quota: Quota) -> Result<Policy, InvalidPolicyName> {
        Ok(Policy::new(policy_name(name)?, quota))
    }

    #[test]
    fn a_per_second_quota_with_its_own_burst_is_q_n_w_1() {
        for n in [1, 3, 10, 1000] {
            assert_eq!(window(Quota::per_second(n).unwrap()), (n, 1));
        }
    }

    #[test]
    fn a_whole_second_refill_is_q_burst_w_tau() {
        assert_eq!(window(q("100/min")), (100, 60));
        assert_eq!(window(q("1/s burst 10")), (10, 10));
        assert_eq!(window(q("1/h")), (1, 3600));
        assert_eq!(window(q("10/min burst 5")), (5, 30));
    }

    #[test]
    fn a_sub_second_refill_rounds_the_window_up_and_reports_the_rate() {
        assert_eq!(window(q("100/s burst 20")), (100, 1));
        assert_eq!(window(q("7/s burst 3")), (7, 1));
    }

    #[test]
    fn a_fractional_refill_rounds_q_down() {
        // T = 60/7 s, tau = 8.57 s: w = 9, q = floor(9 * 7 / 60) = 1.
        assert_eq!(window(q("7/min burst 1")), (1, 9));
        // T = 1.5 s, tau = 1.5 s: w = 2, q = floor(2 / 1.5) = 1.
        assert_eq!(window(Quota::new(2, Duration::from_secs(3), 1).unwrap()), (1, 2));
    }

    #[test]
    fn r_and_t_never_exceed_the_policy() {
        for s in ["3/s", "100/s burst 20", "7/min burst 1", "1/s burst 10", "5/h burst 2"] {
            let quota = q(s);
            let (q, w) = window(quota);
            assert!(quota.burst() <= q, "{s}");
            let tau = quota.period() * u32::try_from(quota.burst()).unwrap()
                / u32::try_from(quota.count()).unwrap();
            assert!(whole_seconds_up(tau) <= w, "{s}");
        }
    }

    #[test]
    fn huge_rates_saturate_at_the_structured_field_maximum() {
        let quota = Quota::new(100_000_000_000, Duration::from_secs(1), 100_000_000_000).unwrap();
        let policy = named("p", quota).unwrap();
        assert_eq!(policy.field().to_str().unwrap(), r#""p";q=100000000000;w=1"#);
        // 10^11/s with a burst of 2 * 10^15: w = 20,000 s, q = 2 * 10^15, above the maximum.
        let big = Quota::new(100_000_000_000, Duration::from_secs(1), 2_000_000_000_000_000);
        let field = named("p", big.unwrap()).unwrap().field();
        assert_eq!(field.to_str().unwrap(), r#""p";q=999999999999999;w=20000"#);
        let limit = policy.service_limit(u64::MAX, Duration::MAX);
        assert_eq!(limit.to_str().unwrap(), r#""p";r=999999999999999;t=1"#, "t <= w");
    }

    #[test]
    fn fields_are_byte_exact() {
        let policy = named("default", q("100/min")).unwrap();
        assert_eq!(policy.field().to_str().unwrap(), r#""default";q=100;w=60"#);
        let limit = policy.service_limit(42, Duration::from_millis(6001));
        assert_eq!(limit.to_str().unwrap(), r#""default";r=42;t=7"#);
        assert_eq!(
            policy.service_limit(0, Duration::ZERO).to_str().unwrap(),
            r#""default";r=0;t=0"#
        );
    }

    #[test]
    fn the_per_thread_cache_never_mixes_up_values() {
        let a = named("a", q("10/min")).unwrap();
        let b = named("b", q("10/min")).unwrap();
        for round in 0..3 {
            for r in 0..300 {
                for (name, policy) in [("a", &a), ("b", &b)] {
                    let t = (r + round) % 4;
                    let got = policy.service_limit(r, Duration::from_secs(t));
                    assert_eq!(got.to_str().unwrap(), format!(r#""{name}";r={r};t={t}"#));
                }
            }
        }
    }

    #[test]
    fn t_never_exceeds_the_largest_w_of_the_policy() {
        // A queue's backlog (or a clock gone backwards) may hold a bucket beyond its window.
        let policy = named("d", q("1/s")).unwrap();
        assert_eq!(policy.service_limit(0, Duration::from_secs(11)), r#""d";r=0;t=1"#);
        assert_eq!(policy.service_limit(0, Duration::from_millis(300)), r#""d";r=0;t=1"#);
        assert_eq!(policy.service_limit(0, Duration::ZERO), r#""d";r=0;t=0"#);
        // Several items: the largest window bounds the one RateLimit item.
        let name = policy_name("r").unwrap();
        let items = vec![
            (policy_name("r#0").unwrap(), q("10/s")),
            (policy_name("r#1").unwrap(), q("100/min")),
        ];
        let rule = Policy::with_items(name, items);
        assert_eq!(rule.service_limit(0, Duration::from_secs(59)), r#""r";r=0;t=59"#);
        assert_eq!(rule.service_limit(0, Duration::from_secs(3600)), r#""r";r=0;t=60"#);
    }

    #[test]
    fn names_are_escaped_or_refused() {
        let policy = named(r#"a "quoted" \ name"#, q("1/s")).unwrap();
        assert_eq!(policy.field().to_str().unwrap(), r#""a \"quoted\" \\ name";q=1;w=1"#);
        assert!(named("tab\there", q("1/s")).is_err());
        assert!(named("é", q("1/s")).is_err());
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after(Duration::from_millis(1)), "1");
        assert_eq!(retry_after(Duration::from_secs(2)), "2");
        assert_eq!(retry_after(Duration::from_nanos(2_000_000_001)), "3");
        assert_eq!(retry_after(Duration::MAX), u64::MAX.to_string().as_str());
    }
}
