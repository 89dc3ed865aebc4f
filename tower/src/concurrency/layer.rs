//! [`ConcurrencyLimitLayer`] and its service [`ConcurrencyLimit`].

use super::future::ConcurrencyFuture;
use super::gate::{AdaptiveGate, Admission, Gate, GlobalGate, KeyedAdaptiveGate, KeyedGate};
use crate::body::RefusalBody;
use crate::key::{KeyErrorKind, KeyExtractor};
use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use leakgate::{
    AdaptiveConcurrency, Clock, ConcurrencyLimiter, KeyedAdaptiveConcurrency,
    KeyedConcurrencyLimiter,
};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_layer::Layer;
use tower_service::Service;

/// A layer that lets at most so many requests into the inner service at once and refuses the
/// rest at once (no queue) with `503 Service Unavailable` and `Retry-After` (1 s unless set), or
/// the status set with [`refusal_status`](Self::refusal_status).
///
/// * [`global`](Self::global): one [`ConcurrencyLimiter`] for every request;
/// * [`keyed`](Self::keyed): a [`KeyedConcurrencyLimiter`] per key from a
///   [`KeyExtractor`](crate::KeyExtractor) (a request without a key gets a 400 saying why; one
///   the extractor exempts passes unlimited);
/// * [`adaptive`](Self::adaptive): an [`AdaptiveConcurrency`] (AIMD or Gradient2) that learns the
///   limit from the responses: a 5xx, a 429, an error or the layer's [`timeout`](Self::timeout)
///   is overload (`dropped`), any other response a success with its latency;
/// * [`keyed_adaptive`](Self::keyed_adaptive): a [`KeyedAdaptiveConcurrency`], an adaptive limit
///   per key learned from that key's responses alone, in a bounded table (keys with nothing in
///   flight make room; a new key that finds its part of the table full of keys with requests in
///   flight is refused with the same 503).
///
/// The permit is held until the inner service's response (its head) comes, and given back if the
/// request is dropped first. Every service and clone the layer makes shares its limiter.
///
/// ```
/// use axum::{routing::get, Router};
/// use leakgate::{AdaptiveConcurrency, ConcurrencyLimiter};
/// use leakgate_tower::ConcurrencyLimitLayer;
/// use std::time::Duration;
///
/// // At most 64 requests in the handlers at once.
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(ConcurrencyLimitLayer::global(ConcurrencyLimiter::new(64)?));
/// // A limit between 4 and 256 that follows the backend; calls past 2 s count as overload.
/// let adaptive = AdaptiveConcurrency::gradient2(4, 32, 256)?;
/// let api: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(ConcurrencyLimitLayer::adaptive(adaptive).timeout(Duration::from_secs(2)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimitLayer {
    gate: Arc<dyn Gate>,
    retry_after: Duration,
    status: StatusCode,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for ConcurrencyLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrencyLimitLayer")
            .field("retry_after", &self.retry_after)
            .field("status", &self.status)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ConcurrencyLimitLayer {
    fn with_gate(gate: Arc<dyn Gate>) -> Self {
        ConcurrencyLimitLayer {
            gate,
            retry_after: Duration::from_secs(1),
            status: StatusCode::SERVICE_UNAVAILABLE,
            timeout: None,
        }
    }

    /// One limit for every request.
    ///
    /// ```
    /// use leakgate_tower::ConcurrencyLimitLayer;
    /// let layer = ConcurrencyLimitLayer::global(leakgate::ConcurrencyLimiter::new(8)?);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn global(limiter: impl Into<Arc<ConcurrencyLimiter>>) -> Self {
        Self::with_gate(Arc::new(GlobalGate(limiter.into())))
    }

    /// A limit per key: `max` of the table in flight for each key `extractor` finds.
    ///
    /// ```
    /// use leakgate::KeyedConcurrencyLimiter;
    /// use leakgate_tower::{ConcurrencyLimitLayer, HeaderKey};
    /// // Two requests at once per API key.
    /// let per_key = KeyedConcurrencyLimiter::new(2)?;
    /// let key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
    /// let layer = ConcurrencyLimitLayer::keyed(per_key, key);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed<E: KeyExtractor>(
        limiter: impl Into<Arc<KeyedConcurrencyLimiter<E::Key>>>,
        extractor: E,
    ) -> Self {
        Self::with_gate(Arc::new(KeyedGate { limiter: limiter.into(), extractor }))
    }

    /// One adaptive limit for every request, fed by the responses.
    ///
    /// ```
    /// use leakgate_tower::ConcurrencyLimitLayer;
    /// let layer = ConcurrencyLimitLayer::adaptive(leakgate::AdaptiveConcurrency::aimd(1, 10, 100)?);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn adaptive<C: Clock + 'static>(limiter: impl Into<Arc<AdaptiveConcurrency<C>>>) -> Self {
        Self::with_gate(Arc::new(AdaptiveGate(limiter.into())))
    }

    /// An adaptive limit per key, each fed by its own key's responses as
    /// [`adaptive`](Self::adaptive) is: a tenant whose requests time out or fail with 5xx backs
    /// off alone. A request without a key gets a 400; one the extractor exempts passes unlimited.
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use leakgate::KeyedAdaptiveConcurrency;
    /// use leakgate_tower::{ConcurrencyLimitLayer, HeaderKey};
    /// use std::time::Duration;
    ///
    /// // Per tenant: between 2 and 64 at once, starting at 8, for up to 50 000 tenants.
    /// let per_tenant = KeyedAdaptiveConcurrency::aimd(2, 8, 64)?.with_capacity(50_000);
    /// let tenant = HeaderKey::new(http::HeaderName::from_static("x-tenant"));
    /// let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(
    ///     ConcurrencyLimitLayer::keyed_adaptive(per_tenant, tenant).timeout(Duration::from_secs(5)),
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed_adaptive<E: KeyExtractor, C: Clock + Clone + 'static>(
        limiter: impl Into<Arc<KeyedAdaptiveConcurrency<E::Key, C>>>,
        extractor: E,
    ) -> Self {
        Self::with_gate(Arc::new(KeyedAdaptiveGate { limiter: limiter.into(), extractor }))
    }

    /// The `Retry-After` of a refusal, in whole seconds rounded up (1 s by default).
    ///
    /// ```
    /// use std::time::Duration;
    /// let layer = leakgate_tower::ConcurrencyLimitLayer::global(leakgate::ConcurrencyLimiter::new(8)?)
    ///     .retry_after(Duration::from_secs(5));
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// The status of a refusal (503 by default; 429 is the other common choice).
    ///
    /// ```
    /// use http::StatusCode;
    /// let layer = leakgate_tower::ConcurrencyLimitLayer::global(leakgate::ConcurrencyLimiter::new(8)?)
    ///     .refusal_status(StatusCode::TOO_MANY_REQUESTS);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn refusal_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// A request whose response has not come after `timeout` is answered with the refusal and
    /// its permit given back (for an adaptive limit, counted as overload).
    ///
    /// ```
    /// use std::time::Duration;
    /// let layer = leakgate_tower::ConcurrencyLimitLayer::global(leakgate::ConcurrencyLimiter::new(8)?)
    ///     .timeout(Duration::from_secs(30));
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    fn refusal(&self, status: StatusCode) -> Response<Bytes> {
        let mut response = Response::new(Bytes::new());
        *response.status_mut() = status;
        let secs = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        response
    }
}

impl<S> Layer<S> for ConcurrencyLimitLayer {
    type Service = ConcurrencyLimit<S>;

    fn layer(&self, inner: S) -> ConcurrencyLimit<S> {
        ConcurrencyLimit { inner, layer: self.clone() }
    }
}

/// The service a [`ConcurrencyLimitLayer`] makes.
///
/// ```
/// use leakgate_tower::{ConcurrencyLimit, ConcurrencyLimitLayer};
/// use tower_layer::Layer;
/// let layer = ConcurrencyLimitLayer::global(leakgate::ConcurrencyLimiter::new(8)?);
/// let service: ConcurrencyLimit<()> = layer.layer(());
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ConcurrencyLimit<S> {
    inner: S,
    layer: ConcurrencyLimitLayer,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ConcurrencyLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: RefusalBody,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ConcurrencyFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        let held = match self.layer.gate.admit(&parts) {
            Admission::Admitted(held) => Some(held),
            Admission::NoKey(e) if e.kind() == KeyErrorKind::Exempt => None,
            Admission::Busy => {
                return ConcurrencyFuture::refused(self.layer.refusal(self.layer.status))
            }
            Admission::NoKey(e) => {
                let mut response = Response::new(Bytes::from(e.to_string()));
                *response.status_mut() = StatusCode::BAD_REQUEST;
                return ConcurrencyFuture::refused(response);
            }
        };
        let inner = self.inner.call(Request::from_parts(parts, body));
        // An exempt request is not the limit's business: no timeout either.
        let timeout = held.as_ref().and(self.layer.timeout).map(tokio::time::sleep);
        ConcurrencyFuture::running(inner, held, timeout, self.layer.refusal(self.layer.status))
    }
}
