//! The leaky bucket as a queue: requests are not refused but given a time to go, and wait for it.
//!
//! * `reservation.rs`: [`Reservation`], [`Limiter::reserve_n`](crate::Limiter::reserve_n) and
//!   the lock-free cancel with its refund rule;
//! * `wait.rs`: blocking waits, sleep then spin ([`WaitPolicy`]);
//! * `async_wait.rs` (feature `tokio`): the cancel-safe async wait;
//! * `keyed.rs`: the same per key, for [`KeyedLimiter`](crate::KeyedLimiter).
//!
//! The public docs live on [`Reservation`] and the `Limiter` and `KeyedLimiter` methods.

mod keyed;
mod reservation;
mod wait;

#[cfg(feature = "tokio")]
mod async_wait;

pub use reservation::Reservation;
pub use wait::WaitPolicy;
