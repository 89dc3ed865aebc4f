//! The leaky bucket as a queue: requests are not refused but given a time to go, and wait for it.
//!
//! A [`Reservation`] moves the bucket's `TAT` into the future with the same single CAS as a check,
//! so reservations are lock-free and served in the order they were made (FIFO by construction:
//! each one's time is after the previous one's). A `max_wait` bounds the queue: a request that
//! would have to wait longer is denied, so at most `max_wait / T` units are ever queued.
//!
//! Waiting: [`Reservation::wait`] (and [`Limiter::wait_n`](crate::Limiter::wait_n)) sleeps until
//! shortly before the time and spins the last stretch ([`WaitPolicy`]); with the `tokio` feature,
//! [`Limiter::until_ready_n`](crate::Limiter::until_ready_n) waits asynchronously and gives the
//! units back if it is dropped before its time.
//!
//! Pacing: with a burst of 1, releases are spaced exactly `T` apart. A burst of `1 + s` is a
//! *slack* of `s` (uber-go's `maxSlack`): a caller that fell behind may catch up by at most `s`
//! units at once, never more.

mod reservation;
mod wait;

#[cfg(feature = "tokio")]
mod async_wait;

pub use reservation::Reservation;
pub use wait::WaitPolicy;
