//! Shaping refusals: [`Refusal`], what a handler set with
//! [`RateLimitLayer::on_refusal`](crate::RateLimitLayer::on_refusal) is given, and the handler
//! as the layer keeps it.

use crate::headers::Policy;
use bytes::Bytes;
use http::request::Parts;
use http::Response;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A refused request, as a handler set with
/// [`RateLimitLayer::on_refusal`](crate::RateLimitLayer::on_refusal) sees it: the request, the
/// decision's figures, and the response the layer would send
/// ([`into_response`](Refusal::into_response)).
///
/// ```
/// use bytes::Bytes;
/// use http::{Request, Response, StatusCode};
/// use leakgate::{Limiter, ManualClock, Quota};
/// use leakgate_tower::RateLimitLayer;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let lim = Limiter::with_clock(Quota::per_second(1)?, ManualClock::new());
/// // Browsers get a page; other clients the layer's own 429, with a note.
/// let layer = RateLimitLayer::global(lim).on_refusal(|refusal| {
///     let accept = refusal.request().headers.get(http::header::ACCEPT);
///     if accept.is_some_and(|a| a.as_bytes().starts_with(b"text/html")) {
///         let mut page = Response::new(Bytes::from_static(b"<h1>Slow down</h1>"));
///         *page.status_mut() = StatusCode::TOO_MANY_REQUESTS;
///         return page;
///     }
///     let mut response = refusal.into_response();
///     response.headers_mut().insert("x-note", http::HeaderValue::from_static("slow down"));
///     response
/// });
/// let svc = layer.layer(service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(String::from("hello")))
/// }));
/// assert_eq!(svc.clone().oneshot(Request::new(())).await?.status(), 200);
/// let page = Request::builder().header("accept", "text/html").body(())?;
/// let refused = svc.clone().oneshot(page).await?;
/// assert_eq!((refused.status().as_u16(), refused.body().as_str()), (429, "<h1>Slow down</h1>"));
/// assert_eq!(refused.headers()["retry-after"], "1", "added by the layer");
/// let refused = svc.oneshot(Request::new(())).await?;
/// assert_eq!(refused.headers()["x-note"], "slow down");
/// assert_eq!(refused.headers()["ratelimit"], r#""default";r=0;t=1"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Refusal<'a> {
    pub(crate) request: &'a Parts,
    pub(crate) remaining: u64,
    pub(crate) reset_after: Duration,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) policy: Option<&'a Policy>,
    pub(crate) response: Response<Bytes>,
}

impl<'a> Refusal<'a> {
    /// The refused request's method, URI, headers and extensions.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .on_refusal(|refusal| {
    ///         let _path = refusal.request().uri.path();
    ///         refusal.into_response()
    ///     });
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn request(&self) -> &'a Parts {
        self.request
    }

    /// When the same request would conform if nothing else is admitted (for a queue: when it
    /// would fit within `max_wait`); `None` when it never can (larger than the burst).
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .on_refusal(|refusal| {
    ///         let _wait_ms = refusal.retry_after().map(|wait| wait.as_millis());
    ///         refusal.into_response()
    ///     });
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The decision's `remaining()`: units that would conform now.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .on_refusal(|refusal| {
    ///         assert_eq!(refusal.remaining(), 0);
    ///         refusal.into_response()
    ///     });
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The decision's `reset_after()`: the time until the bucket is empty again.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .on_refusal(|refusal| {
    ///         let _full_for = refusal.reset_after();
    ///         refusal.into_response()
    ///     });
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reset_after(&self) -> Duration {
        self.reset_after
    }

    /// The names of the `RateLimit-Policy` items the refusal is under: the layer's policy name,
    /// or a rule's items (`api`, or `api#0`, `api#1`, ...).
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .on_refusal(|refusal| {
    ///         assert_eq!(refusal.policies().collect::<Vec<_>>(), ["default"]);
    ///         refusal.into_response()
    ///     });
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn policies(&self) -> impl Iterator<Item = &str> + '_ {
        self.policy.into_iter().flat_map(|policy| policy.item_names())
    }

    /// The response the layer would send: `429 Too Many Requests` with `Retry-After`, the
    /// `RateLimit` fields as the layer's `headers` say, and a problem body if the layer has
    /// `problem_details(true)`.
    ///
    /// ```
    /// # use leakgate::{Limiter, Quota};
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(9)?))
    ///     .on_refusal(|refusal| {
    ///         let mut response = refusal.into_response();
    ///         *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    ///         response
    ///     });
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn into_response(self) -> Response<Bytes> {
        self.response
    }
}

impl fmt::Debug for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refusal")
            .field("method", &self.request.method)
            .field("uri", &self.request.uri)
            .field("remaining", &self.remaining)
            .field("reset_after", &self.reset_after)
            .field("retry_after", &self.retry_after)
            .finish_non_exhaustive()
    }
}

/// The function that shapes a layer's refusals.
type Handle = dyn Fn(Refusal<'_>) -> Response<Bytes> + Send + Sync;

/// A refusal handler, shared by every service of the layer.
#[derive(Clone)]
pub(crate) struct RefusalHandler(Arc<Handle>);

impl RefusalHandler {
    pub(crate) fn new(
        handler: impl Fn(Refusal<'_>) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        RefusalHandler(Arc::new(handler))
    }

    /// The response `handler` makes of `refusal`.
    pub(crate) fn shape(&self, refusal: Refusal<'_>) -> Response<Bytes> {
        (self.0)(refusal)
    }
}

impl fmt::Debug for RefusalHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RefusalHandler(..)")
    }
}
