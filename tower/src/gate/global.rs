//! [`GlobalGate`]: one limiter for every request, as a meter or as a queue.

use super::{fill, BucketRef, Checked, Gate, GateInfo, Level, QueueGate, Wait, Waited};
use crate::key::{KeyError, OnKeyError};
use http::request::Parts;
use leakgate::{Clock, Limiter, Quota};
use std::future::{poll_fn, Future};
use std::pin::pin;
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
        match self.limiter.check_n(0) {
            Ok(peek) => Level { remaining: peek.remaining(), reset_after: peek.reset_after() },
            // A peek always conforms; should a limiter ever say otherwise, its figures still hold.
            Err(peek) => Level { remaining: peek.remaining(), reset_after: peek.reset_after() },
        }
    }
}

impl<C: Clock + 'static> Gate for GlobalGate<C> {
    #[inline]
    fn check(&self, _request: &Parts, _on_key_error: OnKeyError) -> Result<Checked, KeyError> {
        Ok(Checked { decision: self.limiter.check(), keyless: false })
    }

    fn quota(&self) -> Quota {
        self.limiter.quota()
    }

    fn buckets(&self, visit: &mut dyn FnMut(BucketRef<'_>)) {
        let level = self.level();
        visit(BucketRef {
            key: None,
            remaining: level.remaining,
            fill: fill(level.reset_after, self.limiter.quota()),
            reset_after: level.reset_after,
            idle: None,
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
    ) -> Result<Wait, KeyError> {
        Ok(Box::pin(async move {
            // `until_ready_n_timeout` reserves on its first poll and cancels its reservation if
            // dropped before its time: a client that hangs up gives its place back.
            let mut waiting = pin!(self.limiter.until_ready_n_timeout(1, max_wait));
            let mut queued = false;
            let outcome = poll_fn(|cx| {
                let poll = waiting.as_mut().poll(cx);
                queued |= poll.is_pending();
                poll
            })
            .await;
            match outcome {
                Ok(()) => Waited::Released { level: self.level(), queued },
                Err(denied) => Waited::Refused(denied),
            }
        }))
    }
}
