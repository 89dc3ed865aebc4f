//! [`RedisReservation`]: a place in a key's queue, shared by every process.

use crate::script::Reply;
use std::time::Duration;

/// When a reserved request may go, as Redis granted it.
///
/// Made by [`RedisLimiter::reserve_n`](crate::RedisLimiter::reserve_n) and its async twin. The
/// units are charged when it is made; there is no cancel (the queue is shared, and later
/// reservations from other processes may already stand on it).
///
/// ```
/// use leakgate_redis::RedisReservation;
/// let r = RedisReservation::at(1_000);
/// assert!(r.is_ready());
/// assert_eq!(r.ready_at().as_nanos(), 1_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisReservation {
    delay: Duration,
    ready_at: Duration,
}

impl RedisReservation {
    /// A reservation that may go at once, at clock time `now_ns`: what a failure policy that
    /// admits answers.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::RedisReservation::at(5).delay(), std::time::Duration::ZERO);
    /// ```
    pub fn at(now_ns: u64) -> RedisReservation {
        RedisReservation { delay: Duration::ZERO, ready_at: Duration::from_nanos(now_ns) }
    }

    pub(crate) fn new(reply: &Reply) -> RedisReservation {
        RedisReservation {
            delay: Duration::from_nanos(reply.delay_ns),
            ready_at: Duration::from_nanos(reply.now_ns.saturating_add(reply.delay_ns)),
        }
    }

    /// How long to wait from when Redis decided (rounded up to the nanosecond).
    ///
    /// ```
    /// assert!(leakgate_redis::RedisReservation::at(0).delay().is_zero());
    /// ```
    pub fn delay(&self) -> std::time::Duration {
        self.delay
    }

    /// When to go, on the limiter's clock: Unix time from Redis `TIME`, or the caller's clock.
    /// Every process's reservations on a key have distinct, ordered `ready_at`s.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::RedisReservation::at(7).ready_at().as_nanos(), 7);
    /// ```
    pub fn ready_at(&self) -> Duration {
        self.ready_at
    }

    /// Whether it may go at once.
    ///
    /// ```
    /// assert!(leakgate_redis::RedisReservation::at(0).is_ready());
    /// ```
    pub fn is_ready(&self) -> bool {
        self.delay.is_zero()
    }
}
