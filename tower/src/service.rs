//! [`RateLimit`]: the service the layer wraps around each inner service.

use crate::body::RefusalBody;
use crate::config::{RateLimitHeaders, Shared};
use crate::counters::Event;
use crate::future::{Fields, ResponseFuture};
use crate::gate::{Announce, Checked, Level, Queued, Wait, Waited};
use crate::key::{KeyError, KeyErrorKind};
use crate::refusal;
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// A service rate-limited by a [`RateLimitLayer`](crate::RateLimitLayer); made by the layer.
///
/// Clones share the layer's limiter and counters (one `Arc`).
///
/// ```
/// use leakgate::{Limiter, ManualClock, Quota};
/// use leakgate_tower::RateLimitLayer;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let lim = Limiter::with_clock(Quota::per_second(1)?, ManualClock::new());
/// let hello = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
/// });
/// let svc = RateLimitLayer::global(lim).layer(hello);
/// let first = svc.clone().oneshot(http::Request::new(())).await?;
/// let second = svc.oneshot(http::Request::new(())).await?;
/// assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 429));
/// assert_eq!(first.headers()["ratelimit"], r#""default";r=0;t=1"#);
/// assert_eq!(second.headers()["retry-after"], "1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> RateLimit<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        RateLimit { inner, shared }
    }

    /// The wrapped service.
    ///
    /// ```
    /// use leakgate::{Limiter, Quota};
    /// use tower::Layer;
    /// let layer = leakgate_tower::RateLimitLayer::global(Limiter::new(Quota::per_second(1)?));
    /// let svc = layer.layer(tower::service_fn(|r: http::Request<()>| async move {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
    /// }));
    /// let _inner = svc.get_ref();
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("quota", &self.shared.gate.quota())
            .finish_non_exhaustive()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for RateLimit<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    ReqB: Send + 'static,
    ResB: RefusalBody,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let shared = &*self.shared;
        let (parts, body) = request.into_parts();
        if let Some((gate, max_wait)) = &shared.queue {
            return match gate.clone().wait(&parts, shared.config.on_key_error, *max_wait) {
                Ok(Queued { wait, keyless }) => {
                    if keyless {
                        shared.counters.add(Event::KeyError);
                    }
                    // The inner service was made ready by `poll_ready`: keep that one for the
                    // request and leave a fresh clone here for the next.
                    let clone = self.inner.clone();
                    let ready = std::mem::replace(&mut self.inner, clone);
                    ResponseFuture::queued(queue(wait, ready, parts, body, self.shared.clone()))
                }
                Err(error) => no_key(&mut self.inner, shared, error, parts, body),
            };
        }
        match shared.gate.check(&parts, shared.config.on_key_error) {
            Ok(Checked { decision, keyless, announce }) => {
                if keyless {
                    shared.counters.add(Event::KeyError);
                }
                match decision {
                    Ok(admitted) => {
                        shared.counters.add(Event::Admitted);
                        let fields = admitted_fields(shared, announce, || Level {
                            remaining: admitted.remaining(),
                            reset_after: admitted.reset_after(),
                        });
                        let future = self.inner.call(Request::from_parts(parts, body));
                        ResponseFuture::admitted(future, fields)
                    }
                    Err(denied) => {
                        shared.counters.add(Event::Refused);
                        let level = Level {
                            remaining: denied.remaining(),
                            reset_after: denied.reset_after(),
                        };
                        let policy = announce.policy(shared.config.policy.as_ref());
                        let response = refusal::too_many_requests(
                            &shared.config,
                            &parts,
                            policy,
                            level,
                            denied.retry_after(),
                        );
                        ResponseFuture::refused(response)
                    }
                }
            }
            Err(error) => no_key(&mut self.inner, shared, error, parts, body),
        }
    }
}

/// A request with no key: an exempt one goes on to `inner`, uncharged and without fields; any
/// other is answered 400.
#[cold]
fn no_key<S, ReqB>(
    inner: &mut S,
    shared: &Shared,
    error: KeyError,
    parts: Parts,
    body: ReqB,
) -> ResponseFuture<S::Future>
where
    S: Service<Request<ReqB>>,
{
    if error.kind() == KeyErrorKind::Exempt {
        shared.counters.add(Event::Exempt);
        return ResponseFuture::admitted(inner.call(Request::from_parts(parts, body)), None);
    }
    shared.counters.add(Event::KeyError);
    ResponseFuture::refused(refusal::bad_request(&shared.config, &error))
}

/// The fields an admitted request's response gets, if any; the level is asked for only then
/// (its divisions are the decision's lazy part).
#[inline]
fn admitted_fields(
    shared: &Shared,
    announce: Announce,
    level: impl FnOnce() -> Level,
) -> Option<Fields> {
    if shared.config.headers != RateLimitHeaders::Always {
        return None;
    }
    let policy = announce.policy(shared.config.policy.as_ref())?;
    let level = level();
    Some(Fields {
        policy: policy.field(),
        limit: policy.service_limit(level.remaining, level.reset_after),
    })
}

/// Waits for a queued request's turn, then calls the inner service; or refuses it.
async fn queue<S, ReqB>(
    wait: Wait,
    mut ready: S,
    parts: Parts,
    body: ReqB,
    shared: Arc<Shared>,
) -> Result<(S::Future, Option<Fields>), Response<Bytes>>
where
    S: Service<Request<ReqB>>,
{
    match wait.await {
        Waited::Released { level, queued } => {
            if queued {
                shared.counters.add(Event::Queued);
            }
            shared.counters.add(Event::Admitted);
            let fields = admitted_fields(&shared, Announce::Layer, || level);
            Ok((ready.call(Request::from_parts(parts, body)), fields))
        }
        Waited::Refused(denied) => {
            shared.counters.add(Event::Refused);
            let level = Level { remaining: denied.remaining(), reset_after: denied.reset_after() };
            let policy = shared.config.policy.as_ref();
            let retry_after = denied.retry_after();
            Err(refusal::too_many_requests(&shared.config, &parts, policy, level, retry_after))
        }
    }
}
