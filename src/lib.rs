//! Exact, lock-free rate limiting with GCRA: a leaky bucket as a meter and as a queue.
//!
//! A [`Limiter`] is one bucket whose whole state is a single `AtomicU64`, the *theoretical arrival
//! time* of the Generic Cell Rate Algorithm, updated by compare-and-swap against a monotonic clock.
//! A decision takes a few nanoseconds, never locks, allocates or panics, and a denial never
//! writes, so denied traffic costs no cache-line transfers.
//!
//! * **Exact.** Time is counted in fixed-point units of the emission interval, so no rate drifts:
//!   `3/s` admits exactly 3 per second forever, and `10^10/s` exactly that.
//! * **Safe at the edges.** A clock that goes backwards never admits more; times past the clock's
//!   range saturate rather than wrap; bad quotas are errors, not panics.
//! * **Testable.** Every limiter takes a [`Clock`]; [`ManualClock`] moves only when told to.
//! * **A meter and a queue.** [`Limiter::check_n`] answers now; [`Limiter::reserve_n`] gives a time
//!   to go ([`Reservation`]), and [`Limiter::wait_n`] waits for it.
//! * **Per key.** [`KeyedLimiter`] keeps one bucket per key in a bounded, lock-free table that
//!   reclaims idle buckets by itself.
//!
//! ```
//! use leakgate::{Limiter, ManualClock, Quota};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let lim = Limiter::with_clock("2/s".parse::<Quota>()?, clock.clone());
//! assert!(lim.check().is_ok());
//! assert!(lim.check().is_ok());
//! let denied = lim.check().unwrap_err();
//! assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
//! clock.advance(Duration::from_millis(500));
//! assert_eq!(lim.check().unwrap().remaining(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The meaning of a quota and of every number a decision reports is fixed by the GCRA: a request
//! of cost `n` at time `t` conforms iff `max(TAT, t) + n*T - t <= tau`, with `T = period / count`
//! and `tau = burst * T`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod backoff;
mod clock;
mod decision;
mod gcra;
mod keyed;
mod limiter;
mod manual_clock;
mod queue;
mod quota;
mod quota_parse;
mod sync;

pub use clock::{Clock, CoarseClock, TscClock, COARSE_CLOCK_RESOLUTION};
pub use decision::{Admitted, Denied};
pub use keyed::{
    CapacityError, KeyState, KeyedLimiter, OverflowPolicy, DEFAULT_CAPACITY, MAX_CAPACITY,
};
pub use limiter::Limiter;
pub use manual_clock::ManualClock;
pub use queue::{Reservation, WaitPolicy};
pub use quota::{Quota, QuotaError, MAX_RATE_PER_SECOND};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
