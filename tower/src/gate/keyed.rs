//! [`KeyedGate`]: one bucket per key, the key found by a [`KeyExtractor`]; as a meter or as a
//! queue per key.

use super::queue::{peeked, wait_turn, QueueGate, Queued};
use super::{fill, key_or_keyless, Announce, BucketRef, Checked, Gate, GateInfo};
use crate::key::{KeyError, KeyExtractor, OnKeyError};
use http::request::Parts;
use leakgate::{Clock, KeyedLimiter, Limiter, Quota};
use std::sync::Arc;
use std::time::Duration;

/// Requests charged to the bucket of their key.
pub(crate) struct KeyedGate<E: KeyExtractor, C: Clock> {
    keyed: Arc<KeyedLimiter<E::Key, C>>,
    extractor: E,
    /// The one bucket shared by requests without a key under [`OnKeyError::Global`]: the keyed
    /// limiter's quota, on its clock.
    keyless: Limiter<C>,
}

impl<E: KeyExtractor, C: Clock + Clone> KeyedGate<E, C> {
    pub(crate) fn new(keyed: Arc<KeyedLimiter<E::Key, C>>, extractor: E) -> Self {
        let keyless = Limiter::with_clock(keyed.quota(), keyed.clock().clone());
        KeyedGate { keyed, extractor, keyless }
    }
}

impl<E: KeyExtractor, C: Clock> KeyedGate<E, C> {
    /// The key of `request`; `Ok(None)` when it has none and `on_key_error` sends it to the
    /// keyless bucket (see [`key_or_keyless`]).
    #[inline]
    fn key(&self, request: &Parts, on_key_error: OnKeyError) -> Result<Option<E::Key>, KeyError> {
        key_or_keyless(self.extractor.extract(request), on_key_error)
    }
}

impl<E: KeyExtractor, C: Clock + 'static> Gate for KeyedGate<E, C> {
    #[inline]
    fn check(&self, request: &Parts, on_key_error: OnKeyError) -> Result<Checked, KeyError> {
        Ok(match self.key(request, on_key_error)? {
            Some(key) => Checked {
                decision: self.keyed.check(&key),
                keyless: false,
                announce: Announce::Layer,
            },
            None => {
                Checked { decision: self.keyless.check(), keyless: true, announce: Announce::Layer }
            }
        })
    }

    fn quota(&self) -> Option<Quota> {
        Some(self.keyed.quota())
    }

    fn buckets(&self, _prefix: Option<&str>, _min_fill: f64, visit: &mut dyn FnMut(BucketRef<'_>)) {
        for state in self.keyed.snapshot() {
            visit(BucketRef {
                key: Some(&state.key),
                remaining: state.remaining,
                fill: state.fill,
                reset_after: state.reset_after,
                idle: Some(state.since_last_use),
                rule: None,
            });
        }
        // The keyless bucket, when it holds anything.
        if let Ok(peek) = self.keyless.check_n(0) {
            let fill = fill(peek.reset_after(), self.keyless.quota());
            if fill > 0.0 {
                visit(BucketRef {
                    key: None,
                    remaining: peek.remaining(),
                    fill,
                    reset_after: peek.reset_after(),
                    idle: None,
                    rule: None,
                });
            }
        }
    }

    fn info(&self) -> GateInfo {
        GateInfo {
            kind: "keyed",
            capacity: Some(self.keyed.capacity()),
            overflow_denials: Some(self.keyed.overflow_denials()),
        }
    }
}

/// Each key queues in its own bucket, first come first served, independently of the others.
/// A key that finds no room in the table is refused: the keyed limiter's shared overflow bucket,
/// if it has one, serves meters only.
impl<E: KeyExtractor, C: Clock + 'static> QueueGate for KeyedGate<E, C> {
    fn wait(
        self: Arc<Self>,
        request: &Parts,
        on_key_error: OnKeyError,
        max_wait: Duration,
    ) -> Result<Queued, KeyError> {
        let key = self.key(request, on_key_error)?;
        let keyless = key.is_none();
        let wait = Box::pin(async move {
            match key {
                Some(key) => {
                    let waiting = self.keyed.until_ready_n_timeout(&key, 1, max_wait);
                    wait_turn(waiting, || peeked(self.keyed.check_n(&key, 0))).await
                }
                None => {
                    let waiting = self.keyless.until_ready_n_timeout(1, max_wait);
                    wait_turn(waiting, || peeked(self.keyless.check_n(0))).await
                }
            }
        });
        Ok(Queued { wait, keyless })
    }
}
