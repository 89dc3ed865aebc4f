//! What every service of one layer shares, and how the layer answers: the builder
//! ([`RateLimitLayer`](crate::RateLimitLayer)) fills these in, and the services, the responses
//! and the operator view read them, so neither side imports the other. Also [`IntoShared`]: how
//! the limiter a layer is given comes to be shared.

use crate::counters::Counters;
use crate::gate::{Gate, QueueGate};
use crate::handler::RefusalHandler;
use crate::headers::Policy;
use crate::key::OnKeyError;
use std::sync::Arc;
use std::time::Duration;

/// What every service of one layer shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) gate: Arc<dyn Gate>,
    /// Queue mode, when set: the gate to wait on and the longest wait.
    pub(crate) queue: Option<(Arc<dyn QueueGate>, Duration)>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) config: Config,
}

/// How the layer answers.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The layer's name (`policy_name`), as the operator view shows it.
    pub(crate) name: sfv::String,
    /// The policy of a global or keyed limit, under the layer's name; `None` for rules, where
    /// each rule announces its own.
    pub(crate) policy: Option<Policy>,
    pub(crate) headers: RateLimitHeaders,
    pub(crate) problem_details: bool,
    pub(crate) on_key_error: OnKeyError,
    /// Shapes the 429s, if set (`RateLimitLayer::on_refusal`).
    pub(crate) on_refusal: Option<RefusalHandler>,
}

/// Which responses carry `RateLimit-Policy` and `RateLimit`. `Retry-After` is always on a 429.
///
/// ```
/// use leakgate::{Limiter, Quota};
/// use leakgate_tower::{RateLimitHeaders, RateLimitLayer};
/// let layer = RateLimitLayer::global(Limiter::new(Quota::per_second(100)?))
///     .headers(RateLimitHeaders::OnRefusal);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RateLimitHeaders {
    /// Every response the layer passes or makes (the default).
    #[default]
    Always,
    /// Only the 429 responses.
    OnRefusal,
    /// None.
    Never,
}

/// A limiter by value, or already in an `Arc` to share it with other code.
///
/// ```
/// use leakgate::{Limiter, Quota};
/// use leakgate_tower::RateLimitLayer;
/// use std::sync::Arc;
/// let lim = Arc::new(Limiter::new(Quota::per_second(10)?));
/// let layer = RateLimitLayer::global(lim.clone());
/// assert!(lim.check().is_ok()); // the layer and this code share the bucket
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub trait IntoShared<T> {
    /// `self` in an `Arc`.
    fn into_shared(self) -> Arc<T>;
}

impl<T> IntoShared<T> for T {
    fn into_shared(self) -> Arc<T> {
        Arc::new(self)
    }
}

impl<T> IntoShared<T> for Arc<T> {
    fn into_shared(self) -> Arc<T> {
        self
    }
}
