//! [`RateLimitLayer`]: what to limit by, and how to answer.

use crate::config::{Config, IntoShared, RateLimitHeaders, Shared};
use crate::counters::{Counters, Counts};
use crate::gate::{Gate, GlobalGate, KeyedGate, QueueGate, RulesGate};
use crate::handler::Refusal;
use crate::handler::RefusalHandler;
use crate::headers::{policy_name, InvalidPolicyName, Policy};
use crate::key::{KeyExtractor, OnKeyError, PeerIp};
use crate::live_rules::LiveRules;
use crate::operator::OperatorView;
use crate::service::RateLimit;
use bytes::Bytes;
use http::Response;
use leakgate::{Clock, KeyedLimiter, Limiter};
use sfv::StringRef;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// A tower layer that rate-limits requests with leakgate: per client IP, per key, globally, or
/// by key path under rules; as a meter (`429 Too Many Requests`) or, for all but rules, as a
/// queue (requests wait their turn).
///
/// Every service it makes (every route under it, every clone tower or axum takes) shares one
/// limiter and one set of [`Counts`]. A request that does not conform never reaches the inner
/// service. Responses carry `RateLimit-Policy` and `RateLimit`
/// (draft-ietf-httpapi-ratelimit-headers-10; see [`RateLimitHeaders`]), and a 429 carries
/// `Retry-After` in whole seconds, rounded up.
///
/// ```no_run
/// use axum::{routing::get, Router};
/// use leakgate::{KeyedLimiter, Quota};
/// use leakgate_tower::RateLimitLayer;
/// use std::net::SocketAddr;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let per_ip = KeyedLimiter::new("10/s burst 20".parse::<Quota>()?);
/// let app = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(RateLimitLayer::per_ip(per_ip));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    shared: Shared,
}

/// The policy name used unless [`RateLimitLayer::policy_name`] sets another.
const DEFAULT_POLICY_NAME: &StringRef = StringRef::constant("default");

impl RateLimitLayer {
    /// One bucket per client IP address, found as [`PeerIp::new`] finds it (the connection's
    /// peer; forwarding headers ignored). With axum, serve with
    /// `into_make_service_with_connect_info::<SocketAddr>()`.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::RateLimitLayer;
    /// let layer = RateLimitLayer::per_ip(KeyedLimiter::new(Quota::per_second(5)?));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn per_ip<C: Clock + Clone + 'static>(
        keyed: impl IntoShared<KeyedLimiter<IpAddr, C>>,
    ) -> Self {
        Self::keyed(keyed, PeerIp::new())
    }

    /// One bucket per key, the key found by `extractor`: a [`PeerIp`] behind proxies, a
    /// [`HeaderKey`](crate::HeaderKey), a [`KeyTemplate`](crate::KeyTemplate) or a closure.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::{KeyTemplate, RateLimitLayer};
    /// let per_route = KeyTemplate::parse("{method} {route}")?;
    /// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_second(1000)?), per_route);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed<E: KeyExtractor, C: Clock + Clone + 'static>(
        keyed: impl IntoShared<KeyedLimiter<E::Key, C>>,
        extractor: E,
    ) -> Self {
        let gate = KeyedGate::new(keyed.into_shared(), extractor);
        Self::with_gate(Arc::new(gate), None)
    }

    /// One bucket per client IP address, as [`per_ip`](RateLimitLayer::per_ip), as a queue:
    /// each address's requests wait their turn as [`keyed_queue`](RateLimitLayer::keyed_queue)
    /// says.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::RateLimitLayer;
    /// use std::time::Duration;
    /// // Each client gets 5 requests a second; its bursts wait up to 1 s instead of failing.
    /// let per_ip = KeyedLimiter::new(Quota::per_second(5)?);
    /// let layer = RateLimitLayer::per_ip_queue(per_ip, Duration::from_secs(1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn per_ip_queue<C: Clock + Clone + 'static>(
        keyed: impl IntoShared<KeyedLimiter<IpAddr, C>>,
        max_wait: Duration,
    ) -> Self {
        Self::keyed_queue(keyed, PeerIp::new(), max_wait)
    }

    /// One bucket per key, as [`keyed`](RateLimitLayer::keyed), as a queue: a request that does
    /// not conform now waits for its key's turn (in the key's arrival order) if that comes within
    /// `max_wait`, and is refused at once with a 429 otherwise. Keys queue independently: one
    /// key's backlog never delays another's requests. A request whose client hangs up while it
    /// waits gives its place back when no later request of its key was queued behind it (as
    /// `KeyedLimiter::until_ready_n` does). A request whose key cannot be found is refused with
    /// 400 or, under [`OnKeyError::Global`], queues in the one shared bucket of such requests.
    ///
    /// A key that finds no room in the keyed limiter's table is refused: its shared overflow
    /// bucket, if it has one, serves meters only. Waiting needs a tokio runtime with time
    /// enabled (axum's has it).
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::{HeaderKey, RateLimitLayer};
    /// use std::time::Duration;
    /// // Each API key may call 10 times a second; a burst of one key waits up to 3 s.
    /// let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
    /// let keyed = KeyedLimiter::new("10/s burst 2".parse::<Quota>()?);
    /// let layer = RateLimitLayer::keyed_queue(keyed, api_key, Duration::from_secs(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed_queue<E: KeyExtractor, C: Clock + Clone + 'static>(
        keyed: impl IntoShared<KeyedLimiter<E::Key, C>>,
        extractor: E,
        max_wait: Duration,
    ) -> Self {
        Self::with_queue(Arc::new(KeyedGate::new(keyed.into_shared(), extractor)), max_wait)
    }

    /// Limits by key path from a rules file or [`Rules`](leakgate::Rules): `extractor` builds
    /// each request's key (a [`KeyTemplate`](crate::KeyTemplate) such as `"api{route}/{ip}"`,
    /// or a closure returning a `String`), and the key is limited by the rule of its longest
    /// configured prefix cut at `/`, with its own buckets under each of the rule's quotas (all
    /// must conform). So one rules file drives routes, per-client overrides and several limits
    /// at once. Reload the rules while serving with [`LiveRules::reload`].
    ///
    /// * **Fields:** each response announces the rule its key is under, one `RateLimit-Policy`
    ///   item per quota, and one `RateLimit` item with the decision (see [`LiveRules`] for the
    ///   names). A key no rule matches is admitted, takes nothing, and gets neither field; so
    ///   does a key under a rule in shadow mode, which counts what it would refuse
    ///   ([`RuleLimiter::stats`](leakgate::RuleLimiter::stats)) and admits it.
    /// * **No key:** a request whose key cannot be found gets 400, or under
    ///   [`OnKeyError::Global`] is checked as the key `""`, which only the default rule `""`
    ///   matches (one bucket shared by every such request; admitted untracked when there is no
    ///   default rule).
    /// * **Meter only:** leakgate has no queue mode for rules, so there is no `rules_queue`.
    /// * The [operator view](RateLimitLayer::operator_view) lists each bucket with its rule and
    ///   quota, and each rule in force with its counts.
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use leakgate::Rules;
    /// use leakgate_tower::{KeyTemplate, LiveRules, RateLimitLayer};
    ///
    /// let mut rules = Rules::new();
    /// rules.insert("", ["100/s".parse()?]); // every other key
    /// rules.insert("api/search", ["2/s burst 5".parse()?, "100/h".parse()?]); // both must conform
    /// rules.insert("api/search/203.0.113.9", ["50/s".parse()?]); // one client's own
    /// let template = KeyTemplate::parse("api{route}/{ip}")?;
    /// let layer = RateLimitLayer::rules(LiveRules::new(rules), template);
    /// let app: Router = Router::new().route("/search", get(|| async { "results" })).layer(layer);
    /// // The first GET /search from 198.51.100.7 (key "api/search/198.51.100.7") gets
    /// //   RateLimit-Policy: "api/search#0";q=6;w=3, "api/search#1";q=100;w=3600
    /// //   RateLimit: "api/search";r=4;t=36
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rules<E, C>(rules: impl IntoShared<LiveRules<C>>, extractor: E) -> Self
    where
        E: KeyExtractor,
        E::Key: AsRef<str>,
        C: Clock + 'static,
    {
        Self::with_gate(Arc::new(RulesGate::new(rules.into_shared(), extractor)), None)
    }

    /// One bucket for every request.
    ///
    /// ```
    /// use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(1000)?));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn global<C: Clock + 'static>(limiter: impl IntoShared<Limiter<C>>) -> Self {
        Self::with_gate(Arc::new(GlobalGate::new(limiter.into_shared())), None)
    }

    /// One bucket for every request, as a queue: a request that does not conform now waits for
    /// its turn (in arrival order) if that comes within `max_wait`, and is refused at once with a
    /// 429 otherwise. A request whose client hangs up while it waits gives its place back when no
    /// later request was queued behind it (as `Limiter::until_ready_n` does). This smooths bursts
    /// into the quota's rate instead of failing them, at the cost of holding their connections.
    /// Waiting needs a tokio runtime with time enabled (axum's has it). To queue per key, see
    /// [`keyed_queue`](RateLimitLayer::keyed_queue).
    ///
    /// ```
    /// use leakgate::{Limiter, Quota};
    /// use std::time::Duration;
    /// // An upstream that takes 50 requests a second: bursts wait up to 2 s for their turn.
    /// let smooth = Limiter::new(Quota::per_second(50)?.with_burst(5)?);
    /// let layer = leakgate_tower::RateLimitLayer::global_queue(smooth, Duration::from_secs(2));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn global_queue<C: Clock + 'static>(
        limiter: impl IntoShared<Limiter<C>>,
        max_wait: Duration,
    ) -> Self {
        Self::with_queue(Arc::new(GlobalGate::new(limiter.into_shared())), max_wait)
    }

    /// A layer whose requests wait on `gate`, up to `max_wait`.
    fn with_queue(gate: Arc<impl QueueGate>, max_wait: Duration) -> Self {
        Self::with_gate(gate.clone(), Some((gate, max_wait)))
    }

    fn with_gate(gate: Arc<dyn Gate>, queue: Option<(Arc<dyn QueueGate>, Duration)>) -> Self {
        let name = DEFAULT_POLICY_NAME.to_owned();
        let config = Config {
            policy: gate.quota().map(|quota| Policy::new(name.clone(), quota)),
            name,
            headers: RateLimitHeaders::Always,
            problem_details: false,
            on_key_error: OnKeyError::Reject,
            on_refusal: None,
        };
        RateLimitLayer {
            shared: Shared { gate, queue, counters: Arc::new(Counters::new()), config },
        }
    }

    /// Names the policy in `RateLimit-Policy` and `RateLimit` (`"default"` unless set). Layers
    /// nested around one route each add their own item to both fields, so give them distinct
    /// names. Refused unless printable ASCII. A [`rules`](RateLimitLayer::rules) layer names
    /// each rule's items by its path, so there this names the layer in the operator view only.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::RateLimitLayer;
    /// let layer = RateLimitLayer::per_ip(KeyedLimiter::new(Quota::per_minute(100)?))
    ///     .policy_name("per-ip")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn policy_name(mut self, name: &str) -> Result<Self, InvalidPolicyName> {
        let name = policy_name(name)?;
        let quota = self.shared.gate.quota();
        self.shared.config.policy = quota.map(|quota| Policy::new(name.clone(), quota));
        self.shared.config.name = name;
        Ok(self)
    }

    /// Which responses carry the `RateLimit` fields (every one by default).
    ///
    /// ```
    /// use leakgate::{Limiter, Quota};
    /// use leakgate_tower::{RateLimitHeaders, RateLimitLayer};
    /// let quiet = RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .headers(RateLimitHeaders::Never);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn headers(mut self, headers: RateLimitHeaders) -> Self {
        self.shared.config.headers = headers;
        self
    }

    /// Gives refusals an `application/problem+json` body (RFC 9457): the draft's
    /// `quota-exceeded` problem type on a 429 (naming the policy in `violated-policies`), and
    /// the reason on a 400. Off by default: a 429 then has an empty body, and a 400 a line of
    /// text.
    ///
    /// ```
    /// use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .problem_details(true);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn problem_details(mut self, on: bool) -> Self {
        self.shared.config.problem_details = on;
        self
    }

    /// What to do with a request whose key cannot be found (no peer address, a missing or
    /// malformed header): refuse it with 400 (the default) or charge it to one shared bucket.
    /// A global limit finds no key, so this changes nothing for it.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::{HeaderKey, OnKeyError, RateLimitLayer};
    /// let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
    /// // Anonymous callers share one bucket with the same quota.
    /// let layer = RateLimitLayer::keyed(KeyedLimiter::new(Quota::per_second(20)?), api_key)
    ///     .on_key_error(OnKeyError::Global);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn on_key_error(mut self, on_key_error: OnKeyError) -> Self {
        self.shared.config.on_key_error = on_key_error;
        self
    }

    /// Shapes the responses to refused requests: `handler` gets each [`Refusal`] (the request,
    /// the decision's figures, and the 429 the layer would send) and returns the response to
    /// send instead, with any status, headers and body (as tower_governor's `error_handler`).
    /// The layer then adds `Retry-After` and, as [`headers`](RateLimitLayer::headers) says, the
    /// `RateLimit` fields, unless the response has them already. The handler runs on the
    /// refusal path only and should be quick: it runs inside the service's `call` (for a queue,
    /// inside the response future).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::{header, Response, StatusCode};
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::RateLimitLayer;
    ///
    /// let layer = RateLimitLayer::per_ip(KeyedLimiter::new(Quota::per_second(5)?))
    ///     .on_refusal(|refusal| {
    ///         let wait = refusal.retry_after().map_or(60, |wait| wait.as_secs() + 1);
    ///         let mut response = Response::new(Bytes::from(format!(
    ///             "<p>Slow down: try again in {wait} s.</p>"
    ///         )));
    ///         *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    ///         let html = header::HeaderValue::from_static("text/html; charset=utf-8");
    ///         response.headers_mut().insert(header::CONTENT_TYPE, html);
    ///         response // Retry-After and the RateLimit fields are added to it
    ///     });
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn on_refusal<F>(mut self, handler: F) -> Self
    where
        F: Fn(Refusal<'_>) -> Response<Bytes> + Send + Sync + 'static,
    {
        self.shared.config.on_refusal = Some(RefusalHandler::new(handler));
        self
    }

    /// What the layer has done so far, over all its services.
    ///
    /// ```
    /// use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?));
    /// assert_eq!(layer.counts().refused, 0);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn counts(&self) -> Counts {
        self.shared.counters.counts()
    }

    /// A read-only JSON view of this layer's buckets and counters, to mount on an operator-only
    /// route (see [`OperatorView`]). Configure the layer first: the view reports the policy name
    /// it had when the view was made.
    ///
    /// ```
    /// use axum::Router;
    /// use leakgate::{KeyedLimiter, Quota};
    /// use leakgate_tower::RateLimitLayer;
    /// let layer = RateLimitLayer::per_ip(KeyedLimiter::new(Quota::per_second(9)?));
    /// let admin: Router = Router::new().route_service("/ratelimit", layer.operator_view());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn operator_view(&self) -> OperatorView {
        OperatorView::new(self.shared.clone())
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit::new(inner, Arc::new(self.shared.clone()))
    }
}

impl fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("quota", &self.shared.gate.quota())
            .field("limit", &self.shared.gate.info().kind)
            .field("max_wait", &self.shared.queue.as_ref().map(|(_, max_wait)| max_wait))
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shareable<T: Send + Sync + Clone + 'static>() {}

    #[test]
    fn layers_services_and_views_can_be_shared_across_threads() {
        shareable::<RateLimitLayer>();
        shareable::<RateLimit<tower_layer::Identity>>();
        shareable::<OperatorView>();
    }
}
