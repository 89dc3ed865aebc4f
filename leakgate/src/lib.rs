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
//! * **By key path.** [`Rules`] give each `/`-separated key path its quotas (longest prefix
//!   wins, several quotas all or nothing); a [`RuleLimiter`] enforces them per full key, checks
//!   tiers of keys at once ([`RuleLimiter::check_all_n`]), reloads while running keeping every
//!   key's level, counts per rule, and lists its buckets. Rules files in TOML with the feature
//!   `rules-file`; counters through the `metrics` facade with the feature `metrics`.
//! * **How many at once.** [`ConcurrencyLimiter`] bounds permits in flight (lock-free to take,
//!   first come first served to wait for, released on drop), per key with
//!   [`KeyedConcurrencyLimiter`]; [`AdaptiveConcurrency`] (AIMD, Gradient2; per key
//!   [`KeyedAdaptiveConcurrency`]) and [`AdaptiveRate`] follow what the protected side can take;
//!   see [`docs::adaptive`].
//! * **Packets.** Byte quotas (`"10 MB/s burst 64 KiB"`, `"1 Gbit/s"`: a packet of `L` bytes is
//!   `check_n(L)`) and the colour meters of RFC 2697 and 2698 ([`SrTcm`], [`TrTcm`], per flow
//!   [`KeyedSrTcm`], [`KeyedTrTcm`]), with caller time for packet loops; see [`docs::packets`].
//!
//! # One limit for a whole process
//!
//! Build the limiter once (on the default TSC clock) and share it by reference or `Arc`; every
//! method takes `&self`.
//!
//! ```
//! use leakgate::{Limiter, Quota};
//!
//! // 100 requests a second, up to 20 at once after a quiet spell.
//! let limiter = Limiter::new("100/s burst 20".parse::<Quota>()?);
//! match limiter.check() {
//!     Ok(admitted) => println!("serve it; {} more may go right now", admitted.remaining()),
//!     Err(denied) => println!("429 Too Many Requests, retry after {:?}", denied.retry_after()),
//! }
//! # Ok::<(), leakgate::QuotaError>(())
//! ```
//!
//! # One bucket per client
//!
//! ```
//! use leakgate::{KeyedLimiter, Quota};
//! use std::net::IpAddr;
//!
//! // 10 requests a second per address, in a table sized for 100,000 active addresses.
//! let per_ip = KeyedLimiter::<IpAddr>::with_capacity(Quota::per_second(10)?, 100_000);
//! let client: IpAddr = "192.0.2.7".parse()?;
//! if per_ip.check(&client).is_err() {
//!     println!("{client}: slow down");
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Waiting for a turn, in async code (feature `tokio`)
//!
//! ```
//! # #[cfg(feature = "tokio")]
//! # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
//! use leakgate::{Limiter, Quota};
//!
//! // The bank takes 5 refunds a second, evenly spaced.
//! let bank = Limiter::new("5/s burst 1".parse::<Quota>()?);
//! for refund in ["r-1", "r-2", "r-3"] {
//!     bank.until_ready_n(1).await?; // dropped before its time, it gives its place back
//!     println!("sending {refund}");
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Tests: a clock that moves only when told to
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
//! # What a quota and a decision mean
//!
//! A [`Quota`] is `count` units per `period` with at most `burst` at once; when no burst is given
//! (`Quota::per_second`, `"10/s"`), `burst = count`. With `T = period / count` and
//! `tau = burst * T`, a request of cost `n` at time `t` conforms iff
//! `max(TAT, t) + n*T - t <= tau`, and then `TAT` becomes `max(TAT, t) + n*T`. A decision reports
//! `remaining()` (units that would conform now), `reset_after()` (time until the bucket is empty)
//! and, when denied, `retry_after()` (`None` when `n > burst`, which can never conform).
//!
//! # Limits by key path
//!
//! ```
//! use leakgate::{RuleLimiter, Rules};
//!
//! let mut rules = Rules::new();
//! rules.insert("", ["1000/s".parse()?]); // every other key
//! rules.insert("rate_limit", ["1/s burst 10".parse()?]); // rate_limit/<ip>, each its own bucket
//! rules.insert("rate_limit/192.168.11.3", ["100/s burst 500".parse()?]); // one address's own
//! rules.insert("tenant", ["10/s".parse()?, "1000/h".parse()?]); // both must conform
//! let lim = RuleLimiter::new(rules);
//! // A tenant, its user and the whole service: all charged, or none.
//! if lim.check_all_n(&["tenant/acme", "user/42", "global"], 1).is_err() {
//!     println!("429");
//! }
//! # Ok::<(), leakgate::QuotaError>(())
//! ```
//!
//! See [`docs::rules`] for what rules promise: the rule a key gets, several quotas, reloads.
//!
//! # Features
//!
//! Only `std` is on by default.
//!
//! * `std` (default): what needs an operating system: the clocks [`TscClock`] (the default)
//!   and [`CoarseClock`], the keyed table ([`KeyedLimiter`], [`KeyedSrTcm`], [`KeyedTrTcm`]),
//!   rules ([`Rules`], [`RuleLimiter`]) and queue mode ([`Limiter::reserve_n`],
//!   [`Limiter::wait_n`]). Implies `alloc`. Without it the crate is `#![no_std]` (below).
//! * `alloc`: for `no_std` code with an allocator: [`ManualClock`], a [`Clock`] for `Arc<C>`,
//!   and quota parse errors with their whole message.
//! * `portable-atomic`: 64-bit atomics from the `portable-atomic` crate, for targets without
//!   them (below).
//! * `tokio` (implies `std`): the async waits, `Limiter::until_ready_n` and its kin, also per
//!   key on a [`KeyedLimiter`]. **Without this feature they do not exist**: blocking code uses
//!   [`Limiter::wait_n`], and async code enables `tokio` (`features = ["tokio"]` on the
//!   `leakgate` dependency).
//! * `rules-file` (implies `std`): rules read from TOML (`Rules::from_toml`,
//!   `Rules::from_file`) and reloaded when their file changes (`RuleLimiter::watch_file`).
//! * `metrics` (implies `std`): per-rule counters exported through the `metrics` facade
//!   (`RuleLimiter::record_metrics`).
//!
//! # `no_std`
//!
//! With `default-features = false` leakgate is `#![no_std]` and needs no allocator: for
//! kernels, firmware and packet loops. What is there: [`Quota`] (constructors, text both ways),
//! its errors ([`QuotaError`], [`ParseMessage`], [`MeterError`]: `core::error::Error`s), the
//! [`Clock`] trait, [`Limiter`] ([`check_n`](Limiter::check_n), with caller time
//! [`check_n_at`](Limiter::check_n_at), [`peek`](Limiter::peek),
//! [`set_quota`](Limiter::set_quota)) with [`Admitted`] and [`Denied`], and the colour meters
//! [`SrTcm`] and [`TrTcm`] with their caller-time `_at` methods. Each is the same code as with
//! `std`, lock-free and allocation-free alike. There is no OS clock: bring a [`Clock`] (a
//! hardware timer, or a time the packet loop sets once per burst, as below). What stays behind
//! `std`: the default clocks, the keyed table and keyed meters (their shard locks are OS
//! locks), rules, and queue mode (its waits sleep).
//!
//! Two things differ. [`Limiter::set_quota`] serialises changes with a spin lock instead of an
//! OS lock, held for a few instructions; a check waits on it only when it meets a change in
//! progress, so a check from an interrupt handler that interrupted `set_quota` on the same
//! limiter would spin forever: change quotas with that interrupt masked. And without `alloc`, a
//! [`ParseMessage`] longer than 95 bytes is cut to fit, ending in `…`.
//!
//! ```
//! use core::sync::atomic::{AtomicU64, Ordering};
//! use leakgate::{Clock, Color, Limiter, Quota, SrTcm};
//!
//! /// The time in nanoseconds, set by the packet loop once per burst.
//! struct BurstClock(AtomicU64);
//! impl Clock for BurstClock {
//!     fn now_ns(&self) -> u64 {
//!         self.0.load(Ordering::Relaxed) // a lone value: publishes nothing else
//!     }
//! }
//!
//! static CLOCK: BurstClock = BurstClock(AtomicU64::new(0));
//! let calls = Limiter::with_clock("100/s burst 10".parse::<Quota>()?, &CLOCK);
//! let per_link = SrTcm::with_clock("10 MB/s burst 64 KiB".parse()?, 16_384, &CLOCK)?;
//! let now = 5_000_000; // read once for the burst
//! CLOCK.0.store(now, Ordering::Relaxed);
//! assert!(calls.check().is_ok());
//! assert!(calls.check_n_at(9, now).is_ok()); // the same clock, read by the caller
//! for len in [1500, 64, 9000] {
//!     assert_eq!(per_link.color_blind_at(len, now), Color::Green);
//! }
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```
//!
//! **Targets without 64-bit atomics** (32-bit microcontrollers such as `thumbv7m`, `riscv32imc`):
//! every bucket's state is one `AtomicU64`, so on such a target the build stops with a
//! `compile_error!` that says so. The feature `portable-atomic` builds it there on
//! `portable-atomic`'s 64-bit atomics, which are native where the target has them and otherwise
//! a fallback that takes a lock around each operation: correct, but no longer lock-free (and on
//! a single core without compare-and-swap, `portable-atomic` needs its own `critical-section`
//! feature or cfg).
//!
//! CI builds a `#![no_std]` crate that uses all of the above (`nostd-check/`) for
//! `x86_64-unknown-none`, a target with no `std` at all, so a `std` that creeps in fails.
//!
//! # The rest of the family
//!
//! `leakgate-redis` shares one limit among many servers through Redis, `leakgate-tower` is a
//! tower layer for HTTP servers (axum, hyper, tonic), and `leakgate-cli` is the `leakgate`
//! command (`pace`, `demo`, `bench`, `rules`). Each is a crate of its own, so this one keeps its
//! small set of dependencies (`quanta`, `crossbeam-utils`, `arc-swap`; without `std` only
//! `crossbeam-utils`).
#![cfg_attr(not(any(feature = "std", test)), no_std)]
// Without `std`, what only the keyed table, rules and queue mode use goes unused; with it (CI's
// clippy, all features) unused code is still an error.
#![cfg_attr(not(feature = "std"), allow(dead_code, unused_imports))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;

#[cfg(feature = "std")]
mod adaptive;
mod bucket;
mod clock;
#[cfg(feature = "std")]
mod concurrency;
mod decision;
pub mod docs;
mod exact;
mod gcra;
#[cfg(feature = "std")]
mod keyed;
#[cfg(feature = "std")]
mod leased;
mod limiter;
#[cfg(feature = "alloc")]
mod manual_clock;
mod meter;
mod parse_message;
#[cfg(feature = "std")]
mod queue;
mod quota;
mod quota_bytes;
mod quota_decimal;
mod quota_parse;
mod rate_cell;
#[cfg(feature = "std")]
mod rules;
mod sync;

#[cfg(feature = "std")]
pub use adaptive::{
    AdaptiveConcurrency, AdaptivePermit, AdaptiveRate, KeyedAdaptiveConcurrency,
    OwnedAdaptivePermit,
};
pub use clock::Clock;
#[cfg(feature = "std")]
pub use clock::{CoarseClock, TscClock, COARSE_CLOCK_RESOLUTION};
#[cfg(feature = "std")]
pub use concurrency::{
    ConcurrencyError, ConcurrencyLimiter, KeyedConcurrencyLimiter, KeyedPermit, OwnedKeyedPermit,
    OwnedPermit, Permit, DEFAULT_KEYED_CAPACITY, MAX_PERMITS,
};
pub use decision::{Admitted, Denied};
pub use exact::ExactRate;
#[cfg(feature = "std")]
pub use keyed::{
    CapacityError, KeyState, KeyedLimiter, OverflowPolicy, DEFAULT_CAPACITY, MAX_CAPACITY,
};
#[cfg(feature = "std")]
pub use leased::{LeasedLimiter, Leases, LocalLease};
pub use limiter::Limiter;
#[cfg(feature = "alloc")]
pub use manual_clock::ManualClock;
pub use meter::{Color, MeterError, SrTcm, TrTcm};
#[cfg(feature = "std")]
pub use meter::{KeyedSrTcm, KeyedTrTcm, LeasedMeter, LeasedSrTcm, LeasedTrTcm, LocalMeter};
pub use parse_message::ParseMessage;
#[cfg(feature = "std")]
pub use queue::{Reservation, WaitPolicy};
pub use quota::{Quota, QuotaError, MAX_BYTE_RATE_PER_SECOND, MAX_RATE_PER_SECOND};
#[cfg(feature = "std")]
#[doc(hidden)]
pub use rules::BenchCounters;
#[cfg(feature = "std")]
pub use rules::{BucketState, Rule, RuleLimiter, RuleStats, Rules, DEFAULT_RULE_CAPACITY};
#[cfg(feature = "rules-file")]
pub use rules::{RulesFileError, RulesWatcher, WatchEvent};

/// The README's examples, compiled and run as doctests.
// The README has an async example, so it needs the `tokio` feature.
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The examples moved from the README to `docs/examples.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/examples.md")]
struct DocsExamplesDoctests;
