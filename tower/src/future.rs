//! [`ResponseFuture`]: the inner service's response with the `RateLimit` fields added, or the
//! layer's own refusal, or a queued request's wait followed by either.

use crate::body::RefusalBody;
use crate::headers::{RATELIMIT, RATELIMIT_POLICY};
use bytes::Bytes;
use http::{HeaderValue, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// The two fields an admitted response gets.
pub(crate) struct Fields {
    pub(crate) policy: HeaderValue,
    pub(crate) limit: HeaderValue,
}

/// A queued request's wait, then the inner call (or a refusal).
type Queued<F> = Pin<Box<dyn Future<Output = Result<(F, Option<Fields>), Refusal>> + Send>>;

/// A response the layer makes itself, its body still as bytes.
type Refusal = Response<Bytes>;

pin_project! {
    /// The future of a [`RateLimit`](crate::RateLimit) call.
    ///
    /// ```
    /// use leakgate_tower::ResponseFuture;
    /// fn is_send<T: Send>() {}
    /// is_send::<ResponseFuture<std::future::Ready<()>>>();
    /// ```
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Admitted { #[pin] inner: F, fields: Option<Fields> },
        Refused { response: Option<Refusal> },
        Queued { wait: Queued<F> },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn admitted(inner: F, fields: Option<Fields>) -> Self {
        ResponseFuture { state: State::Admitted { inner, fields } }
    }

    pub(crate) fn refused(response: Refusal) -> Self {
        ResponseFuture { state: State::Refused { response: Some(response) } }
    }

    pub(crate) fn queued(
        wait: impl Future<Output = Result<(F, Option<Fields>), Refusal>> + Send + 'static,
    ) -> Self {
        ResponseFuture { state: State::Queued { wait: Box::pin(wait) } }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: RefusalBody,
{
    type Output = Result<Response<B>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project().state.project() {
                StateProj::Admitted { inner, fields } => {
                    let mut response = ready!(inner.poll(cx))?;
                    if let Some(fields) = fields.take() {
                        add_fields(&mut response, fields);
                    }
                    return Poll::Ready(Ok(response));
                }
                StateProj::Refused { response } => {
                    // Polled again after completion: an empty 429 rather than a panic.
                    let response = response.take().unwrap_or_else(|| {
                        let mut empty = Response::new(Bytes::new());
                        *empty.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
                        empty
                    });
                    return Poll::Ready(Ok(response.map(B::refusal)));
                }
                StateProj::Queued { wait } => match ready!(wait.as_mut().poll(cx)) {
                    Ok((inner, fields)) => {
                        self.as_mut().project().state.set(State::Admitted { inner, fields });
                    }
                    Err(response) => {
                        self.as_mut()
                            .project()
                            .state
                            .set(State::Refused { response: Some(response) });
                    }
                },
            }
        }
    }
}

/// Adds the `RateLimit` fields to a response that passed through.
fn add_fields<B>(response: &mut Response<B>, fields: Fields) {
    let headers = response.headers_mut();
    // Appended, not inserted: an inner layer's items stay (the fields are lists).
    headers.append(RATELIMIT_POLICY, fields.policy);
    headers.append(RATELIMIT, fields.limit);
}
