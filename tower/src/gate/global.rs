//! [`GlobalGate`]: one limiter for every request, as a meter or as a queue.

use super::queue::{peeked, wait_turn, QueueGate, Queued};
use super::{fill, Announce, BucketRef, Checked, Gate, GateInfo, Level};
use crate::key::{KeyError, OnKeyError};
use http::request::Parts;
use leakgate::{Clock, Limiter, Quota};
use std::sync::Arc;
use std::time::Duration;

/// Every request charged to one [`Limiter`].
pub(crate) struct GlobalGate<C: Clock> {
    limiter: Arc<Limiter<C>>,
}

impl<C: Clock> GlobalGate<C> {
    pub(crate) fn new(limiter: Arc<Limiter<C>>) -> Self {
        GlobalGate { limiter }
    }

    /// The bucket's level now, without taking anything (a peek).
    fn level(&self) -> Level {
        peeked(self.limiter.check_n(0))
    }
}

impl<C: Clock + 'static> Gate for GlobalGate<C> {
    #[inline]
    fn check(&self, _request: &Parts, _on_key_error: OnKeyError) -> Result<Checked, KeyError> {
        Ok(Checked { decision: self.limiter.check(), keyless: false, announce: Announce::Layer })
    }

    fn quota(&self) -> Option<Quota> {
        Some(self.limiter.quota())
    }

    fn buckets(&self, _prefix: Option<&str>, _min_fill: f64, visit: &mut dyn FnMut(BucketRef<'_>)) {
        let level = self.level();
        visit(BucketRef {
            key: None,
            remaining: level.remaining,
            fill: fill(level.reset_after, self.limiter.quota()),
            reset_after: level.reset_after,
            idle: None,
            rule: None,
        });
    }

    fn info(&self) -> GateInfo {
        GateInfo { kind: "global", capacity: None, overflow_denials: None }
    }
}

impl<C: Clock + 'static> QueueGate for GlobalGate<C> {
    fn wait(
        self: Arc<Self>,
        _request: &Parts,
        _on_key_error: OnKeyError,
        max_wait: Duration,
    ) -> Result<Queued, KeyError> {
        let wait = Box::pin(async move {
            wait_turn(self.limiter.until_ready_n_timeout(1, max_wait), || self.level()).await
        });
        Ok(Queued { wait, keyless: false })
    }
}
