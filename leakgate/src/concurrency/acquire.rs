//! The async acquire: a future that waits its turn in the queue and, dropped, leaves it whole.

use super::limiter::ConcurrencyLimiter;
use super::limiter::Permit;
use super::queue::{Enqueued, Node};
use super::state::MAX_PERMITS;
use crate::sync::Arc;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

impl ConcurrencyLimiter {
    /// One permit, waiting in turn (first come, first served) without blocking a thread. Works on
    /// any executor; bound the wait with the runtime's timeout (`tokio::time::timeout`).
    /// Cancellation-safe: a future dropped while waiting leaves the queue, and one dropped just
    /// after its permits were granted gives them back.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let c = leakgate::ConcurrencyLimiter::new(1)?;
    /// let first = c.acquire().await;
    /// assert!(c.try_acquire().is_none());
    /// drop(first);
    /// let _second = c.acquire().await;
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn acquire(&self) -> Permit<'_> {
        Acquire { limiter: self, n: 1, node: None }.await
    }

    /// `n` permits, waiting in turn; `None` at once only when `n > MAX_PERMITS` (which no limit
    /// can grant). A request for more than `max` waits for `max` to rise.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let c = leakgate::ConcurrencyLimiter::new(4)?;
    /// assert_eq!(c.acquire_n(3).await.unwrap().count(), 3);
    /// assert!(c.acquire_n(u32::MAX).await.is_none());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn acquire_n(&self, n: u32) -> Option<Permit<'_>> {
        if n > MAX_PERMITS {
            return None;
        }
        Some(Acquire { limiter: self, n, node: None }.await)
    }
}

/// The future behind `acquire`: not queued until its first poll finds no room.
struct Acquire<'a> {
    limiter: &'a ConcurrencyLimiter,
    n: u32,
    /// Its place in the queue once it has one; `None` before, and after its permits came.
    node: Option<Arc<Node>>,
}

impl<'a> Future for Acquire<'a> {
    type Output = Permit<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Permit<'a>> {
        let (limiter, n) = (self.limiter, self.n);
        let granted = match &self.node {
            Some(node) => limiter.queue().poll(node, cx.waker()),
            None if limiter.state().try_add(n, true) => true,
            None => match limiter.queue().enqueue(limiter.state(), n, Some(cx.waker().clone())) {
                Enqueued::Granted => true,
                Enqueued::Waiting(node) => {
                    self.node = Some(node);
                    false
                }
            },
        };
        if granted {
            // The permit owns them now: a later drop of this future has nothing to give back.
            self.node = None;
            Poll::Ready(Permit { limiter, n })
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            self.limiter.queue().cancel(self.limiter.state(), &node);
        }
    }
}
