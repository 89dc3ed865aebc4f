//! The leaky bucket as a queue: requests are not refused but given a time to go, and wait for it.
//!
//! * `reservation.rs`: [`Reservation`], [`Limiter::reserve_n`](crate::Limiter::reserve_n) and
//!   the lock-free cancel with its refund rule;
//! * `wait.rs`: blocking waits, sleep then spin ([`WaitPolicy`]);
//! * `async_wait.rs` (feature `tokio`): the cancel-safe async wait.
//!
//! The public docs of all three live on [`Reservation`] and the `Limiter` methods.

mod reservation;
mod wait;

#[cfg(feature = "tokio")]
mod async_wait;

pub use reservation::Reservation;
pub use wait::WaitPolicy;
