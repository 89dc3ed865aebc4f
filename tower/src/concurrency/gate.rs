//! Where a request's permit comes from, behind one object-safe trait so that the layer's type
//! does not depend on the limiter, the key or the clock.

use crate::key::{KeyError, KeyExtractor};
use http::request::Parts;
use leakgate::{
    AdaptiveConcurrency, Clock, ConcurrencyLimiter, KeyedAdaptiveConcurrency,
    KeyedConcurrencyLimiter, OwnedAdaptivePermit, OwnedKeyedPermit, OwnedPermit,
};
use std::sync::Arc;

/// A permit held for one request, told how the request ended.
pub(crate) trait Held: Send {
    /// The response came and was not an overload signal (latency counts from the acquire).
    fn success(self: Box<Self>);
    /// A 5xx, a 429, an error from the inner service, or the layer's timeout.
    fn dropped(self: Box<Self>);
}

/// What the gate says of a request.
pub(crate) enum Admission {
    Admitted(Box<dyn Held>),
    Busy,
    NoKey(KeyError),
}

/// A source of permits.
pub(crate) trait Gate: Send + Sync + 'static {
    fn admit(&self, parts: &Parts) -> Admission;
}

impl Held for OwnedPermit {
    fn success(self: Box<Self>) {}
    fn dropped(self: Box<Self>) {}
}

impl<K: std::hash::Hash + Eq + Clone + Send + Sync> Held for OwnedKeyedPermit<K> {
    fn success(self: Box<Self>) {}
    fn dropped(self: Box<Self>) {}
}

impl<C: Clock + 'static> Held for OwnedAdaptivePermit<C> {
    fn success(self: Box<Self>) {
        OwnedAdaptivePermit::success(*self);
    }
    fn dropped(self: Box<Self>) {
        OwnedAdaptivePermit::dropped(*self);
    }
}

fn admitted(held: Option<impl Held + 'static>) -> Admission {
    match held {
        Some(h) => Admission::Admitted(Box::new(h)),
        None => Admission::Busy,
    }
}

/// One limit for every request.
pub(crate) struct GlobalGate(pub(crate) Arc<ConcurrencyLimiter>);

impl Gate for GlobalGate {
    fn admit(&self, _: &Parts) -> Admission {
        admitted(self.0.try_acquire_owned())
    }
}

/// A limit per key.
pub(crate) struct KeyedGate<E: KeyExtractor> {
    pub(crate) limiter: Arc<KeyedConcurrencyLimiter<E::Key>>,
    pub(crate) extractor: E,
}

impl<E: KeyExtractor> Gate for KeyedGate<E> {
    fn admit(&self, parts: &Parts) -> Admission {
        match self.extractor.extract(parts) {
            Ok(key) => admitted(self.limiter.try_acquire_owned(&key)),
            Err(e) => Admission::NoKey(e),
        }
    }
}

/// One adaptive limit for every request.
pub(crate) struct AdaptiveGate<C: Clock>(pub(crate) Arc<AdaptiveConcurrency<C>>);

impl<C: Clock + 'static> Gate for AdaptiveGate<C> {
    fn admit(&self, _: &Parts) -> Admission {
        admitted(self.0.try_acquire_owned())
    }
}

/// An adaptive limit per key.
pub(crate) struct KeyedAdaptiveGate<E: KeyExtractor, C: Clock> {
    pub(crate) limiter: Arc<KeyedAdaptiveConcurrency<E::Key, C>>,
    pub(crate) extractor: E,
}

impl<E: KeyExtractor, C: Clock + Clone + 'static> Gate for KeyedAdaptiveGate<E, C> {
    fn admit(&self, parts: &Parts) -> Admission {
        match self.extractor.extract(parts) {
            Ok(key) => admitted(self.limiter.try_acquire(&key)),
            Err(e) => Admission::NoKey(e),
        }
    }
}
