//! One leakgate limit shared by many servers, kept in Redis (or Valkey).
//!
//! A [`RedisLimiter`] (blocking) or [`AsyncRedisLimiter`] (tokio) keeps one GCRA bucket per key
//! and quota in Redis, and decides each request in one server-side script call, so that every
//! process connected with the same quotas shares each key's limit, with exactly the meaning of
//! [`leakgate::Limiter`]: a request of cost `n` at time `t` conforms iff
//! `max(TAT, t) + n*T - t <= tau`, and the fleet together never admits more than
//! `burst + window / T` units in any window.
//!
//! ```no_run
//! use leakgate_redis::RedisLimiter;
//! // 20 servers, one bank, one refund per second from the whole fleet.
//! let lim = RedisLimiter::connect("redis://127.0.0.1:6379/", "1/s".parse()?)?;
//! if lim.check("refunds/bank-a").is_ok() {
//!     // send the refund
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Exact in 53 bits
//! Lua numbers are doubles. The script keeps every time as two exact integers, whole
//! milliseconds and the rest in units of `1/D` ns where `T` is a whole number of units (for
//! `3/s`, `D = 3`), and only adds and compares them: nothing drifts, whatever the rate, and the
//! decisions are those of the rational model at each clock reading. Redis `TIME` reads
//! microseconds; a caller's clock reads nanoseconds. The range is the clock's whole range. When
//! `count / gcd(count, period in ns)` exceeds 2^32, `T` is rounded up to the next unit: the rate is
//! then below the quota by less than 3 parts in 10^8, never above.
//!
//! # One clock
//! Time comes from the Redis server's `TIME` by default, so the application servers' clocks do
//! not matter. [`Builder::caller_clock`] sends the caller's time instead (for services that
//! refuse `TIME` in scripts, and for tests). If Redis's wall clock is stepped backwards, a key
//! whose bucket was already empty (and so expired) may admit up to the step's worth of units
//! again; use a slewing NTP.
//!
//! # Keys, several quotas, several keys
//! A key's buckets live in one Redis key, `prefix + "gcra1/<count>per<period ns>..." + ":" + key`,
//! as a short string that expires when all its buckets are empty again: idle keys cost nothing.
//! Keys may be any bytes. [`Builder::quota`] may be called several times: a request must
//! conform to every quota and is charged to all of them, or to none. [`RedisLimiter::check_all_n`]
//! does the same across several keys in one script call.
//!
//! **Redis Cluster:** the keys of one call must live in one hash slot. Redis hashes only the part
//! of a key between the first `{` and the next `}` when there is one, and the prefix never
//! contains `{`, so give keys that are checked together a common tag: `"{acme}/tenant"` and
//! `"{acme}/user/42"`. A single key needs no tag. (This crate connects to one node; a Cluster
//! client is future work.)
//!
//! # Queue mode
//! [`RedisLimiter::reserve_n`] grants a time to go, up to `max_wait` ahead, and charges the
//! buckets from that time; reservations from all processes form one queue per key.
//!
//! # Leases for hot keys
//! With [`Builder::leases`], a process takes extra units in the same round trip as a request and
//! serves later requests from them locally, each within its slot of the bucket's schedule, so the
//! fleet's bound holds exactly; see [`LeaseConfig`].
//!
//! # When Redis is slow or away
//! Every call has a deadline (5 ms by default). A call that gets no decision in time, or finds the
//! circuit breaker open, or finds `max_in_flight` calls already waiting, is answered by the
//! [`FailurePolicy`]: deny (the default: the quota is never exceeded because Redis is away),
//! admit, or a local limiter at the quota divided by the expected number of servers. The breaker
//! opens after 3 calls in a row fail and probes Redis every 250 ms; a reconnect happens in the
//! background, so limiting resumes within about a second of Redis answering again, without a
//! restart. [`Stats`] counts each outcome.
//!
//! `FLUSHALL` (or losing Redis's data) empties every bucket: each key starts again with its full
//! burst. A `SCRIPT FLUSH` or a restart that loses the script is invisible: the script is loaded
//! again on `NOSCRIPT`. A key that holds something else than a leakgate bucket is an error
//! ([`Error::Rejected`]), answered by the failure policy, never read as an empty bucket.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod blocking;
mod breaker;
mod client;
mod clock;
mod config;
mod error;
mod fallback;
mod lease;
mod limiter;
mod reservation;
mod rules;
mod runtime;
mod script;
mod stats;
mod units;

pub use blocking::RedisLimiter;
pub use clock::SystemClock;
pub use config::{Builder, FailurePolicy, LeaseConfig};
pub use error::Error;
pub use limiter::AsyncRedisLimiter;
pub use reservation::RedisReservation;
pub use rules::{AsyncRedisRuleLimiter, RedisRuleLimiter};
pub use stats::Stats;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
