//! Where decisions come from: the internal [`Gate`] trait over "a limiter and a way to find the
//! bucket of a request", with one implementation per kind of limiter.
//!
//! * `global.rs`: one [`Limiter`](leakgate::Limiter) for every request; meter and queue;
//! * `keyed.rs`: a [`KeyedLimiter`](leakgate::KeyedLimiter) and a
//!   [`KeyExtractor`](crate::KeyExtractor); meter and queue;
//! * `queue.rs`: the [`QueueGate`] trait and the wait both gates' queues share.
//!
//! The layer holds an `Arc<dyn Gate>`, so its type does not depend on the limiter, the key or the
//! clock, and one virtual call per request is all this costs. A new source of decisions (the
//! rules limiter) is one more implementation of these traits and one more constructor on
//! [`RateLimitLayer`](crate::RateLimitLayer).

mod global;
mod keyed;
mod queue;

pub(crate) use global::GlobalGate;
pub(crate) use keyed::KeyedGate;
pub(crate) use queue::{QueueGate, Queued, Wait, Waited};

use crate::key::{KeyError, OnKeyError};
use http::request::Parts;
use leakgate::{Admitted, Denied, Quota};
use std::fmt;
use std::time::Duration;

/// A meter decision for one request.
pub(crate) struct Checked {
    pub(crate) decision: Result<Admitted, Denied>,
    /// The request had no key and was charged to the shared keyless bucket.
    pub(crate) keyless: bool,
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
    /// `on_key_error` says to refuse it.
    fn check(&self, request: &Parts, on_key_error: OnKeyError) -> Result<Checked, KeyError>;

    /// The quota, for `RateLimit-Policy`.
    fn quota(&self) -> Quota;

    /// Shows every bucket to `visit`, without blocking decisions.
    fn buckets(&self, visit: &mut dyn FnMut(BucketRef<'_>));

    /// What kind of limit this is.
    fn info(&self) -> GateInfo;
}

/// How full a bucket is, from its time to empty and its capacity `tau`.
pub(crate) fn fill(reset_after: Duration, quota: Quota) -> f64 {
    let tau = quota.period().as_secs_f64() * quota.burst() as f64 / quota.count() as f64;
    (reset_after.as_secs_f64() / tau).clamp(0.0, 1.0)
}
