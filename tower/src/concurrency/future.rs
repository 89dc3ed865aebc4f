//! [`ConcurrencyFuture`]: the inner call with its permit, which goes back when the response
//! comes, the call fails, the timeout passes or the future is dropped.

use super::gate::Held;
use crate::body::RefusalBody;
use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::time::Sleep;

pin_project! {
    /// The future of a [`ConcurrencyLimit`](crate::ConcurrencyLimit) call.
    ///
    /// ```
    /// use leakgate_tower::ConcurrencyFuture;
    /// fn is_send<T: Send>() {}
    /// is_send::<ConcurrencyFuture<std::future::Ready<()>>>();
    /// ```
    pub struct ConcurrencyFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running {
            #[pin] inner: F,
            #[pin] timeout: Option<Sleep>,
            // `None` once reported, or for a request the limit exempts.
            held: Option<Box<dyn Held>>,
            // The refusal a timeout answers with.
            timed_out: Option<Response<Bytes>>,
        },
        Refused { response: Option<Response<Bytes>> },
    }
}

impl<F> ConcurrencyFuture<F> {
    pub(crate) fn running(
        inner: F,
        held: Option<Box<dyn Held>>,
        timeout: Option<Sleep>,
        timed_out: Response<Bytes>,
    ) -> Self {
        ConcurrencyFuture {
            state: State::Running { inner, timeout, held, timed_out: Some(timed_out) },
        }
    }

    pub(crate) fn refused(response: Response<Bytes>) -> Self {
        ConcurrencyFuture { state: State::Refused { response: Some(response) } }
    }
}

/// A 5xx or a 429 from the inner service says it is overloaded.
fn overloaded<B>(response: &Response<B>) -> bool {
    response.status().is_server_error() || response.status().as_u16() == 429
}

fn with_body<B: RefusalBody>(response: Response<Bytes>) -> Response<B> {
    response.map(B::refusal)
}

impl<F, B, E> Future for ConcurrencyFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: RefusalBody,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Refused { response } => {
                let response = response.take().expect("polled after completion");
                Poll::Ready(Ok(with_body(response)))
            }
            StateProj::Running { inner, timeout, held, timed_out } => {
                if let Poll::Ready(result) = inner.poll(cx) {
                    if let Some(held) = held.take() {
                        match &result {
                            Ok(response) if !overloaded(response) => held.success(),
                            _ => held.dropped(),
                        }
                    }
                    return Poll::Ready(result);
                }
                if let Some(sleep) = timeout.as_pin_mut() {
                    ready!(sleep.poll(cx));
                    if let Some(held) = held.take() {
                        held.dropped();
                    }
                    let response = timed_out.take().expect("polled after completion");
                    return Poll::Ready(Ok(with_body(response)));
                }
                Poll::Pending
            }
        }
    }
}
