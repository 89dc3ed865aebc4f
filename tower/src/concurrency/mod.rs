//! The concurrency layer: at most so many requests in the inner service at once, globally or
//! per key, with a fixed or an adaptive limit; the rest refused at once with 503 and
//! `Retry-After`, never queued.
//!
//! * `gate.rs`: where a permit comes from (one limiter, one per key, an adaptive one) and how a
//!   held permit reports its request's end;
//! * `layer.rs`: [`ConcurrencyLimitLayer`] and its service, [`ConcurrencyLimit`];
//! * `future.rs`: [`ConcurrencyFuture`], which holds the permit until the response comes (or the
//!   timeout passes) and tells an adaptive limit how the request went.

mod future;
mod gate;
mod layer;

pub use future::ConcurrencyFuture;
pub use layer::{ConcurrencyLimit, ConcurrencyLimitLayer};
