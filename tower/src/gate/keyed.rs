//! [`KeyedGate`]: one bucket per key, the key found by a [`KeyExtractor`].

use super::{fill, BucketRef, Checked, Gate, GateInfo};
use crate::key::{KeyError, KeyExtractor, OnKeyError};
use http::request::Parts;
use leakgate::{Clock, KeyedLimiter, Limiter, Quota};
use std::sync::Arc;

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

impl<E: KeyExtractor, C: Clock + 'static> Gate for KeyedGate<E, C> {
    #[inline]
    fn check(&self, request: &Parts, on_key_error: OnKeyError) -> Result<Checked, KeyError> {
        match self.extractor.extract(request) {
            Ok(key) => Ok(Checked { decision: self.keyed.check(&key), keyless: false }),
            Err(error) => match on_key_error {
                OnKeyError::Global => Ok(Checked { decision: self.keyless.check(), keyless: true }),
                OnKeyError::Reject => Err(error),
            },
        }
    }

    fn quota(&self) -> Quota {
        self.keyed.quota()
    }

    fn buckets(&self, visit: &mut dyn FnMut(BucketRef<'_>)) {
        for state in self.keyed.snapshot() {
            visit(BucketRef {
                key: Some(&state.key),
                remaining: state.remaining,
                fill: state.fill,
                reset_after: state.reset_after,
                idle: Some(state.since_last_use),
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
