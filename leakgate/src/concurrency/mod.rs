//! Concurrency limits: how many at once, where a rate limit says how often.
//!
//! * `state.rs`: the one word (`in_flight`, `max`, `QUEUED`) and its lock-free steps;
//! * `queue.rs`: the first-come, first-served wait queue that releases hand their room to;
//! * `limiter.rs`: [`ConcurrencyLimiter`] and the [`Permit`]s and [`OwnedPermit`]s it gives;
//! * `acquire.rs`: the cancellation-safe async acquire;
//! * `keyed.rs`: [`KeyedConcurrencyLimiter`], a bounded count per key;
//! * `error.rs`: [`ConcurrencyError`].
//!
//! The public docs live on the types.

mod acquire;
mod error;
mod keyed;
mod limiter;
mod queue;
mod state;

pub use error::ConcurrencyError;
pub use keyed::{KeyedConcurrencyLimiter, KeyedPermit, OwnedKeyedPermit, DEFAULT_KEYED_CAPACITY};
pub use limiter::{ConcurrencyLimiter, OwnedPermit, Permit};
pub use state::MAX_PERMITS;
