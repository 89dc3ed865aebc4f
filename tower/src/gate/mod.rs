//! Where decisions come from: the internal [`Gate`] trait over "a limiter and a way to find the
//! bucket of a request", with one implementation per kind of limiter.
//!
//! * `global.rs`: one [`Limiter`](leakgate::Limiter) for every request; meter and queue;
//! * `keyed.rs`: a [`KeyedLimiter`](leakgate::KeyedLimiter) and a
//!   [`KeyExtractor`](crate::KeyExtractor); meter and queue;
//! * `queue.rs`: the [`QueueGate`] trait and the wait both gates' queues share;
//! * `rules.rs`: a [`RuleLimiter`](leakgate::RuleLimiter) (through [`LiveRules`](crate::LiveRules))
//!   and a [`KeyExtractor`](crate::KeyExtractor) whose keys are the paths the rules resolve;
//!   meter only (leakgate has no queue mode for rules).
//!
//! The layer holds an `Arc<dyn Gate>`, so its type does not depend on the limiter, the key or the
//! clock, and one virtual call per request is all this costs.

mod global;
mod keyed;
mod queue;
mod rules;

pub(crate) use global::GlobalGate;
pub(crate) use keyed::KeyedGate;
pub(crate) use queue::{QueueGate, Queued, Wait, Waited};
pub(crate) use rules::RulesGate;

use crate::headers::{Policy, PolicyRef};
use crate::key::{KeyError, KeyErrorKind, OnKeyError};
use http::request::Parts;
use leakgate::{Admitted, Denied, Quota};
use std::fmt;
use std::time::Duration;

/// A meter decision for one request.
pub(crate) struct Checked {
    pub(crate) decision: Result<Admitted, Denied>,
    /// The request had no key and was charged to the shared keyless bucket.
    pub(crate) keyless: bool,
    /// Which policy the response announces.
    pub(crate) announce: Announce,
}

/// Which policy a response announces in `RateLimit-Policy` and names in `RateLimit`.
#[derive(Clone, Debug)]
pub(crate) enum Announce {
    /// The layer's own (a global or keyed limit: one quota for every request).
    Layer,
    /// The quotas of the rule the request's key is under.
    Rule(PolicyRef),
    /// None: the key is under no rule, or under a rule in shadow mode (which limits nothing).
    Nothing,
}

impl Announce {
    /// The policy to announce, if any; `layer` is the layer's own (its config's `policy`).
    #[inline]
    pub(crate) fn policy<'a>(&'a self, layer: Option<&'a Policy>) -> Option<&'a Policy> {
        match self {
            Announce::Layer => layer,
            Announce::Rule(policy) => Some(policy),
            Announce::Nothing => None,
        }
    }
}

/// The figures of a bucket for the `RateLimit` field.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Level {
    pub(crate) remaining: u64,
    pub(crate) reset_after: Duration,
}

/// One bucket as a gate walks it for the operator view.
pub(crate) struct BucketRef<'a> {
    /// The key; `None` for the one bucket of a global limit or of the requests without a key.
    pub(crate) key: Option<&'a dyn fmt::Display>,
    pub(crate) remaining: u64,
    /// 0.0 empty, 1.0 full.
    pub(crate) fill: f64,
    pub(crate) reset_after: Duration,
    /// Time since the key's last admitted request (keyed limits only).
    pub(crate) idle: Option<Duration>,
    /// The rule and which of its quotas this bucket enforces (rules only).
    pub(crate) rule: Option<RuleRef<'a>>,
}

/// Where a bucket of a rules limit comes from.
pub(crate) struct RuleRef<'a> {
    pub(crate) path: &'a str,
    pub(crate) quota_index: usize,
    pub(crate) quota: Quota,
}

/// One rule in force, with its counts, for the operator view.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct RuleView {
    pub(crate) rule: String,
    pub(crate) quotas: Vec<String>,
    pub(crate) shadow: bool,
    pub(crate) admitted: u64,
    pub(crate) denied: u64,
    pub(crate) denied_in_shadow: u64,
}

/// What kind of limit a gate is, for the operator view.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct GateInfo {
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) capacity: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) overflow_denials: Option<u64>,
}

/// A source of meter decisions for requests.
pub(crate) trait Gate: Send + Sync + 'static {
    /// Decides for `request`, charging it if it conforms; `Err` when it has no key and
    /// `on_key_error` says to refuse it, or when it is exempt ([`KeyErrorKind::Exempt`]).
    fn check(&self, request: &Parts, on_key_error: OnKeyError) -> Result<Checked, KeyError>;

    /// The one quota every request is under, for `RateLimit-Policy`; `None` for rules, whose
    /// checks say which policy to announce.
    fn quota(&self) -> Option<Quota>;

    /// Shows `visit` every bucket whose key starts with `prefix` and whose fill is at least
    /// `min_fill`, and maybe others (the caller filters again), without blocking decisions.
    fn buckets(&self, prefix: Option<&str>, min_fill: f64, visit: &mut dyn FnMut(BucketRef<'_>));

    /// What kind of limit this is.
    fn info(&self) -> GateInfo;

    /// The rules in force with their counts, for a rules limit.
    fn rules(&self) -> Option<Vec<RuleView>> {
        None
    }
}

/// The key an extractor `found`, or `None` for the shared bucket of requests without one when
/// `on_key_error` says so. An exempt request stays an error whatever `on_key_error` says: the
/// service passes it on uncharged.
#[inline]
pub(crate) fn key_or_keyless<K>(
    found: Result<K, KeyError>,
    on_key_error: OnKeyError,
) -> Result<Option<K>, KeyError> {
    match found {
        Ok(key) => Ok(Some(key)),
        Err(error) if error.kind() == KeyErrorKind::Exempt => Err(error),
        Err(error) => match on_key_error {
            OnKeyError::Global => Ok(None),
            OnKeyError::Reject => Err(error),
        },
    }
}

/// How full a bucket is, from its time to empty and its capacity `tau`.
pub(crate) fn fill(reset_after: Duration, quota: Quota) -> f64 {
    let tau = quota.period().as_secs_f64() * quota.burst() as f64 / quota.count() as f64;
    (reset_after.as_secs_f64() / tau).clamp(0.0, 1.0)
}
