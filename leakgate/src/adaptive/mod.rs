//! Adaptive limits: limits that follow what the protected side can take.
//!
//! * `algorithm.rs`: the two concurrency algorithms, AIMD and Gradient2, as plain state machines
//!   fed one sample at a time (no clock, no atomics: easy to test on their own);
//! * `concurrency.rs`: [`AdaptiveConcurrency`], a [`ConcurrencyLimiter`](crate::ConcurrencyLimiter)
//!   whose `max` an algorithm moves, and [`AdaptivePermit`], which reports how its work ended;
//! * `keyed.rs`: [`KeyedAdaptiveConcurrency`], one such limit per key in a bounded table;
//! * `rate.rs`: [`AdaptiveRate`], a [`Limiter`](crate::Limiter) whose quota backs off on overload
//!   (honouring a Retry-After exactly) and recovers toward a ceiling.
//!
//! The public docs live on the types and in [`docs::adaptive`](crate::docs::adaptive), with the
//! plot of both algorithms against a simulated server.

mod algorithm;
mod concurrency;
mod keyed;
mod rate;

pub use concurrency::{AdaptiveConcurrency, AdaptivePermit, OwnedAdaptivePermit};
pub use keyed::KeyedAdaptiveConcurrency;
pub use rate::AdaptiveRate;
