//! Long-form documentation: what leakgate promises, exactly. No code lives here.
//!
//! * [`meaning`]: what a quota is and what every number a decision reports means;
//! * [`keyed`]: how a [`KeyedLimiter`](crate::KeyedLimiter) answers per key;
//! * [`queue`]: the leaky bucket as a queue, reservations and waits;
//! * [`concurrency`]: what the lock-free protocol guarantees under contention;
//! * [`adaptive`]: limits that follow the server, with a plot of them doing so;
//! * [`rules`]: limits by key path, several quotas at once, and reloads;
//! * [`packets`]: byte quotas and the colour meters of RFC 2697 and 2698.

pub mod meaning {
    //! # What a quota and a decision mean
    //!
    //! leakgate implements the Generic Cell Rate Algorithm (GCRA), exactly.
    //!
    //! A [`Quota`](crate::Quota) is `count` units per `period`, with at most `burst` units at
    //! once. Let `T = period / count`, the *emission interval* (an exact rational, never
    //! rounded), and `tau = burst * T`, the bucket's capacity in time.
    //!
    //! A bucket's whole state is its theoretical arrival time `TAT`. A new bucket is empty
    //! (`TAT <= now`): a full `burst` is available at once.
    //!
    //! A request of cost `n` at time `t`:
    //!
    //! * conforms iff `max(TAT, t) + n*T - t <= tau`; then `TAT := max(TAT, t) + n*T`;
    //! * otherwise it is denied and the state does not change;
    //! * `n = 0` always conforms and changes nothing (a peek);
    //! * `n > burst` can never conform: it is denied with no retry time.
    //!
    //! What a decision reports, with `TAT'` the state after it:
    //!
    //! * [`remaining()`](crate::Admitted::remaining) `= floor((tau - max(TAT' - t, 0)) / T)`:
    //!   units that would conform right now;
    //! * [`reset_after()`](crate::Admitted::reset_after) `= max(TAT' - t, 0)`: time until the
    //!   bucket is empty again;
    //! * on denial, [`retry_after()`](crate::Denied::retry_after) `= max(TAT, t) + n*T - tau - t`,
    //!   the wait after which this same request would conform if nothing else is admitted, or
    //!   `None` when `n > burst`.
    //!
    //! ```
    //! use leakgate::{Limiter, ManualClock, Quota};
    //! use std::time::Duration;
    //!
    //! // T = 250 ms, tau = 1 s.
    //! let clock = ManualClock::new();
    //! let lim = Limiter::with_clock(Quota::per_second(4)?, clock.clone());
    //! let ok = lim.check_n(3).unwrap();
    //! assert_eq!((ok.remaining(), ok.reset_after()), (1, Duration::from_millis(750)));
    //! let no = lim.check_n(2).unwrap_err();
    //! assert_eq!(no.retry_after(), Some(Duration::from_millis(250)));
    //! assert_eq!(lim.check_n(5).unwrap_err().retry_after(), None); // above the burst
    //! clock.advance(Duration::from_millis(250));
    //! assert!(lim.check_n(2).is_ok());
    //! # Ok::<(), leakgate::QuotaError>(())
    //! ```
    //!
    //! ## Exactness
    //!
    //! No drift, whatever the rate: time is kept in fixed-point units of `T` (see the
    //! implementation notes of `gcra.rs`), so `3 per second` admits exactly 3 per second for ever
    //! and `10^10 per second` exactly that. Over any window of length `w` a bucket admits at most
    //! `burst + w/T` units (plus at most one for rounding), and under continuous demand at least
    //! that minus one.
    //!
    //! When `T` is a whole number of nanoseconds, every decision matches the model above exactly,
    //! boundary included, and every reported time is exact. Otherwise a decision may differ from
    //! the model only when `t` lies within 1 ns of its boundary (so requests aimed at every
    //! boundary may see another sequence than the model's, never more in total than the window
    //! bound), and reported times are within 1 ns.
    //!
    //! ## Range
    //!
    //! Times are nanoseconds of a monotonic clock. At any rate up to 10^9 units per second a
    //! limiter stays exact for at least 100 years of clock, with its whole bucket on top; a quota
    //! whose bucket cannot (longer than about 480 years, or 95 when `T` is fractional) is refused
    //! with [`QuotaError::BurstTooLarge`](crate::QuotaError::BurstTooLarge). Faster rates keep at
    //! least 5.8 years of clock. Past its range a clock reading saturates and every request is
    //! denied: nothing wraps, nothing panics.
    //!
    //! ## Clocks that go backwards
    //!
    //! If the clock moves backwards, a limiter never admits more than it would have at the latest
    //! time it has seen, and never panics. (Every request leaves `TAT` at or past its own time,
    //! a peek or an oversized request included, so a request at an earlier time starts where it
    //! would at the latest one.) It may then refuse more than the model would.
}

pub mod keyed {
    //! # Keyed limiters
    //!
    //! A [`KeyedLimiter`](crate::KeyedLimiter) answers for each key exactly as that key's own
    //! [`Limiter`](crate::Limiter) would while time moves forward: every key's bucket runs the
    //! same protocol as a limiter's, in a slot of a bounded table.
    //!
    //! An idle bucket (empty: `TAT` before now) is indistinguishable from a new one, so the table
    //! may forget it and reuse its slot for another key without changing any answer. When the
    //! clock moves backwards a key never gets more than its own `Limiter` would: a peek or an
    //! oversized request records the time it saw, and a key whose idle bucket was forgotten comes
    //! back no earlier than the latest time the table has seen for it; it may be refused more
    //! only then.
    //!
    //! ```
    //! use leakgate::{KeyedLimiter, ManualClock, Quota};
    //! let keyed = KeyedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    //! assert!(keyed.check("alice").is_ok());
    //! assert!(keyed.check("alice").is_err());
    //! assert!(keyed.check("bob").is_ok(), "every key has its own bucket");
    //! # Ok::<(), leakgate::QuotaError>(())
    //! ```
}

pub mod queue {
    //! # The leaky bucket as a queue
    //!
    //! [`reserve_n(n, max_wait)`](crate::Limiter::reserve_n) gives a request a time to go instead
    //! of an answer now. A reservation of cost `n` at time `t` may go at
    //! `g = max(t, max(TAT, t) + n*T - tau)`; it is granted iff `n <= burst` and
    //! `g - t <= max_wait`, and then `TAT := max(TAT, t) + n*T`; otherwise it is denied with no
    //! change. `n = 0` is granted at once and changes nothing. A meter check is a reservation with
    //! `max_wait = 0`.
    //!
    //! Reservations are served in the order they were granted: their `ready_at` never decreases.
    //! [`cancel`](crate::Reservation::cancel) gives the units back only while the reservation is
    //! still the last one granted (later ones keep their places, so no unit they stand on is
    //! handed out twice). The blocking and async waits take their place when they are called and
    //! give it back, by the same rule, when they are dropped before their time.
    //!
    //! ```
    //! use leakgate::{Limiter, ManualClock, Quota};
    //! use std::time::Duration;
    //! let lim = Limiter::with_clock(Quota::per_second(2)?.with_burst(1)?, ManualClock::new());
    //! let now = lim.reserve(Duration::MAX).unwrap();
    //! let next = lim.reserve(Duration::MAX).unwrap();
    //! assert_eq!((now.delay(), next.delay()), (Duration::ZERO, Duration::from_millis(500)));
    //! # Ok::<(), leakgate::QuotaError>(())
    //! ```
}

pub mod concurrency {
    //! # Under contention
    //!
    //! Every limiter is `Send + Sync` and every method takes `&self`. A bucket is one atomic
    //! word; no method locks, allocates or panics on the decision path.
    //!
    //! * **Never more than the quota.** Every admission is checked against a state at least as
    //!   full as the exact model's for the requests admitted so far, each at its own clock
    //!   reading: concurrency can make a limiter refuse more, never admit more. This is model
    //!   checked with loom and tested against an exact model under real threads.
    //! * **A denial never writes.** It is a clock read, a load and a compare, so denied traffic
    //!   leaves the bucket's cache line shared and scales across cores.
    //! * **No check is starved.** An admission is one compare-and-swap; a request that loses it
    //!   to another takes its place with one `fetch_add`, which cannot lose, and checks the result
    //!   (near a full bucket, where that could overshoot, it retries the CAS instead, and every
    //!   lost round there means another request was admitted, so the bucket is soon full and the
    //!   rest are refused without writing). Keyed buckets use the CAS alone.
    //!
    //! What contention may cost, always in the refusing direction:
    //!
    //! * while a request that overshot the bucket takes its `fetch_add` back (a few
    //!   instructions), others see the bucket that much fuller and may be refused where a
    //!   sequential run would admit them;
    //! * if the thread of such a request is descheduled between its `fetch_add` and its undo
    //!   while other requests are admitted on top, its charge stays, at most its own cost, until
    //!   the bucket next drains;
    //! * a request is decided at its own clock reading; racing requests with readings a few
    //!   nanoseconds apart may each be judged at the other's, the later of the two.
    //!
    //! `src/bucket.rs` holds the protocol and the argument for each step.
}

/// # Adaptive limits
///
/// [`AdaptiveConcurrency`](crate::AdaptiveConcurrency) moves a concurrency limit with AIMD or
/// Gradient2 (`src/adaptive/algorithm.rs` describes both), fed by how each permit ends;
/// [`AdaptiveRate`](crate::AdaptiveRate) moves a rate the same way, honouring Retry-After.
/// [`KeyedAdaptiveConcurrency`](crate::KeyedAdaptiveConcurrency) keeps one such limit per key
/// (per tenant, per upstream host), each learning from its own key's permits alone, in a table
/// of bounded size: an idle key keeps what it learned while there is room, and is forgotten
/// (back to `initial`) when a new key needs its place.
///
/// Below, both algorithms against a simulated server (`examples/adaptive/sim.rs`) that takes
/// 100 calls at once, then 50 (round 200), 100 again (400), none for 20 rounds (600), then 100:
/// calls past its capacity get a 503, and latency rises with load. Drawn by
/// `cargo run -p leakgate --example adaptive` into `docs/adaptive.svg`; the test
/// `tests/adaptive_sim.rs` checks the same runs. Measured there: once settled, both stay within
/// 0.90 to 1.04 of the capacity (the sawtooth of the 10% backoff); after a halving both are
/// within 20% in 4 to 5 round trips; after a doubling AIMD takes 57 (one more a round trip) and
/// Gradient2 17; from a start at 10 (or the outage's floor) AIMD takes about 139 and Gradient2
/// about 58; a server that is down takes the limit to 0.12 of before in 20 round trips.
///
#[doc = include_str!("../../docs/adaptive.svg")]
pub mod adaptive {}

pub mod rules {
    //! # Rules: limits by key path
    //!
    //! [`Rules`](crate::Rules) map `/`-separated key paths to one or more quotas, and a
    //! [`RuleLimiter`](crate::RuleLimiter) enforces them with a bucket per full key and quota.
    //!
    //! **Which rule.** A key is limited by the rule of its longest configured prefix cut at `/`:
    //! for `"foo/bar/baz"`, the rule at `"foo/bar/baz"`, else `"foo/bar"`, else `"foo"`, else the
    //! default rule `""` if there is one. `"foo/barn"` is not under `"foo/bar"`. A key that
    //! matches no rule (or whose rule has no quotas) is admitted and not tracked: its decision
    //! reports `remaining() == u64::MAX` and `reset_after() == 0`.
    //!
    //! **Several quotas, all or nothing.** A rule may hold several quotas (`10/s` and `1000/h`),
    //! and [`check_all_n`](crate::RuleLimiter::check_all_n) checks several keys at once (tenant,
    //! user, global), each under its own rule. A request of cost `n` conforms iff every bucket
    //! involved conforms (each as in [`meaning`](super::meaning)); then every bucket is charged
    //! `n`, otherwise none is, also under concurrency: a bucket charged before another refused
    //! gets its charge back. A key named twice is charged once per naming. The decision reports
    //! the smallest `remaining()` and the largest `reset_after()` over the buckets, and a denial
    //! the largest `retry_after()` over the buckets that refuse (`None` if one of them never can
    //! conform).
    //!
    //! Exactly so on a clock that does not move during the check (every test clock). On a
    //! running clock a charge given back keeps the time since it was made (the check's own
    //! duration, nanoseconds) until its bucket drains: a request aimed at that bucket's exact
    //! boundary may then be refused. Nothing is ever admitted beyond a quota.
    //!
    //! **Shadow mode.** A rule in shadow mode decides and counts as usual but never refuses; a
    //! request it would refuse takes nothing from its buckets.
    //!
    //! **No room.** Each quota of a rule has a [`KeyedLimiter`](crate::KeyedLimiter) table of the
    //! rule's capacity. A new key that finds its table full of busy buckets gets the rule's
    //! [`OverflowPolicy`](crate::OverflowPolicy): denied as by a full bucket, or checked against
    //! the table's shared overflow bucket, whose charge is given back like any other when another
    //! bucket refuses.
    //!
    //! **Reload.** [`reload`](crate::RuleLimiter::reload) puts new rules in force at once; checks
    //! never block or fail meanwhile, and each is decided wholly on the old rules or wholly on the
    //! new. Every tracked key keeps what it could admit under whatever rule now matches it: its
    //! i-th bucket's available units (its burst less its level `(TAT - now) / T`, at the time the
    //! reload began) become the available units of the new rule's i-th quota, capped at that
    //! quota's burst and rounded down (against the caller), so no reload makes more units
    //! available than before it; a new quota without a counterpart starts empty; a key that no
    //! longer matches any rule is no longer tracked. A key with a level that
    //! finds no room in its new table keeps it for when it finds room. A shared overflow bucket's
    //! level goes to the new rules' shared bucket of the same rule path and quota, if any.
    //!
    //! ```
    //! use leakgate::{ManualClock, RuleLimiter, Rules};
    //! let mut rules = Rules::new();
    //! rules.insert("rate_limit", ["1/s burst 10".parse()?]);
    //! rules.insert("rate_limit/192.168.11.3", ["100/s burst 500".parse()?]);
    //! rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]);
    //! let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    //! assert_eq!(lim.check("rate_limit/10.0.0.1").unwrap().remaining(), 9);
    //! assert_eq!(lim.check("rate_limit/192.168.11.3").unwrap().remaining(), 499);
    //! assert_eq!(lim.check_n("api/alice", 10).unwrap().remaining(), 0); // 10/s binds
    //!
    //! let mut stricter = Rules::new();
    //! stricter.insert("api", ["1/s burst 12".parse()?]); // alice has none available, as before
    //! lim.reload(stricter);
    //! assert!(lim.check("api/alice").is_err()); // a larger burst adds nothing at once
    //! assert!(lim.check("rate_limit/10.0.0.1").is_ok()); // no rule any more: not tracked
    //! # Ok::<(), leakgate::QuotaError>(())
    //! ```
}

pub mod packets {
    //! # Packets: byte quotas and colour meters
    //!
    //! **Byte quotas.** A [`Quota`](crate::Quota) whose unit is a byte meters bytes: a packet of
    //! `L` bytes is `check_n(L)`. Written in bytes or bits with SI or IEC prefixes (`"10 MB/s
    //! burst 64 KiB"`, `"1 Gbit/s burst 1 MB"`, `"400 Gbit/s"`), exact by the rules of every
    //! quota: a rate in bits is kept as whole bytes per whole periods (`1 Gbit/s` is 125,000,000
    //! bytes a second, `1 bit/s` a byte every 8 seconds). Up to
    //! [`MAX_BYTE_RATE_PER_SECOND`](crate::MAX_BYTE_RATE_PER_SECOND) (400 Gbit/s); every byte
    //! quota is exact for at least 10 years of clock with its whole burst on top (at 400 Gbit/s,
    //! `2^64` bytes of clock: 11.7 years less the burst's own time), and for 100 years up to
    //! 10^9 bytes a second. Beyond: [`QuotaError::ByteRateTooHigh`](crate::QuotaError) or
    //! `BurstTooLarge`.
    //!
    //! **Colour meters.** [`SrTcm`](crate::SrTcm) (RFC 2697: CIR, CBS, EBS) and
    //! [`TrTcm`](crate::TrTcm) (RFC 2698: PIR, PBS, CIR, CBS), and one per flow
    //! ([`KeyedSrTcm`](crate::KeyedSrTcm), [`KeyedTrTcm`](crate::KeyedTrTcm)), colour-blind and
    //! colour-aware:
    //!
    //! * **The RFCs' colours, exactly.** Each bucket is one GCRA word counted in whole ticks of
    //!   its rate, which is the RFCs' token bucket: it starts full and gains one token at each
    //!   tick (at the multiples of `1 / rate` from the clock's origin: tick `k` counts from the
    //!   first nanosecond at or after `k / rate`), at every rate and every clock reading, with
    //!   no rounding. In the srTCM the excess bucket fills only
    //!   with what overflows the committed one, as in the RFC: it is kept as the total of both
    //!   buckets, a bucket of CBS + EBS at CIR. Property tests check every colour and token
    //!   count against the RFCs' token buckets written from their text. Either of CBS and EBS
    //!   may be 0, not both, as RFC 2697 has it ([`SrTcm::with_bursts`](crate::SrTcm::with_bursts)):
    //!   with CBS 0 nothing is green, with EBS 0 nothing is yellow.
    //! * **All or nothing, lock-free.** A packet takes exactly the buckets its colour takes
    //!   (green both, yellow one, red none), never part of them, however many threads meter at
    //!   once, and no bucket ever admits more than its size plus its ticks (loom models and
    //!   threaded tests). Under threads a packet may get a lower colour than a sequential run
    //!   would give it, when another packet in flight is counted first. One race, two srTCM
    //!   packets going for the same last committed tokens while the excess bucket cannot pay
    //!   for the loser, gives the loser's charge of the total back: whole on a clock that has not
    //!   moved, less the time since its clock reading otherwise.
    //! * **Caller time.** Every method has an `_at` form that takes a reading of the meter's
    //!   clock made by the caller (once per burst of packets, say), and none allocates.
    //! * **Shared or owned.** `color_blind`, `color_aware` and their `_at` forms take `&self`:
    //!   the meter is shared (`&` or `Arc`) by any number of threads, lock-free, and a green
    //!   packet costs one compare-and-swap a bucket. A meter that one thread owns (one per core
    //!   or per receive queue, as DPDK keeps its `rte_meter`s) can use the `_mut` forms
    //!   ([`SrTcm::color_blind_at_mut`](crate::SrTcm::color_blind_at_mut) and the rest), which
    //!   take `&mut self` and read and write its words as plain integers: the same colours, no
    //!   atomic read-modify-write, no fence. The two may be mixed on one meter; the `&mut`
    //!   borrow is the proof that no other thread is using it.
    //! * **Shared and hot: leased.** One meter coloured by many threads at a high packet rate
    //!   moves its line between cores on every green packet. [`LeasedSrTcm`](crate::LeasedSrTcm)
    //!   and [`LeasedTrTcm`](crate::LeasedTrTcm) (opt-in) colour green packets from per-thread
    //!   leases of green units (at most a short span of CIR, at most half of CBS), with no write
    //!   to the meter; yellow and red stay the shared meter's. Greens in a window may exceed
    //!   `CBS + CIR * window` by `excess_bound()` (one lease per slot); slow rates take no leases.
    //!
    //! ```
    //! use leakgate::{Clock, Color, Quota, SrTcm};
    //!
    //! // CIR 1 Gbit/s, CBS 64 KiB, EBS 128 KiB.
    //! let meter = SrTcm::new("1 Gbit/s burst 64 KiB".parse::<Quota>()?, 128 * 1024)?;
    //! let burst = [1500u64, 64, 9000, 1500];
    //! let now = meter.clock().now_ns(); // once per burst
    //! let colours: Vec<Color> = burst.iter().map(|&len| meter.color_blind_at(len, now)).collect();
    //! assert_eq!(colours, [Color::Green; 4]);
    //!
    //! // One meter per queue, each owned by the thread that polls its queue.
    //! let mut per_queue: Vec<SrTcm> = (0..4)
    //!     .map(|_| SrTcm::new("1 Gbit/s burst 64 KiB".parse::<Quota>()?, 128 * 1024))
    //!     .collect::<Result<_, _>>()?;
    //! std::thread::scope(|s| {
    //!     for meter in &mut per_queue {
    //!         s.spawn(move || {
    //!             let now = meter.clock().now_ns();
    //!             for &len in &burst {
    //!                 assert_eq!(meter.color_blind_at_mut(len, now), Color::Green);
    //!             }
    //!         });
    //!     }
    //! });
    //! # Ok::<(), Box<dyn std::error::Error>>(())
    //! ```
}
