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
//! not matter. [`Builder::caller_clock`] sends the caller's time instead (for tests, or to decide
//! on the servers' own synced clocks; the script then reads `TIME` only for the call's deadline,
//! below). If Redis's wall clock is stepped backwards, a key
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
//! **Redis Cluster** (see [below](#redis-cluster)): the keys of one call are decided in one script
//! run when they live in one hash slot; keys in several slots are decided all or nothing in two
//! phases (two round trips, see below). Redis hashes only the part of a key between the first
//! `{` and the next `}` when there is one, and the prefix never contains `{`, so give keys that
//! are checked together a common tag: `"{acme}/tenant"` and `"{acme}/user/42"`. A single key
//! needs no tag.
//!
//! # Rules by key path
//! A [`RedisRuleLimiter`] (blocking) or [`AsyncRedisRuleLimiter`] enforces a [`leakgate::Rules`]
//! (built in code, or read from TOML with `Rules::from_file` and this crate's feature
//! `rules-file`), with the meaning of [`leakgate::RuleLimiter`] (see `leakgate::docs::rules`)
//! across every process that connects with the same rules and prefix: one rules file drives the
//! in-process limiter and the fleet's alike.
//!
//! ```no_run
//! use leakgate::Rules;
//! use leakgate_redis::RedisRuleLimiter;
//! let mut rules = Rules::new();
//! rules.insert("rate_limit", ["1/s burst 10".parse()?]);
//! rules.insert("rate_limit/192.168.11.3", ["100/s burst 500".parse()?]);
//! rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]);
//! rules.insert("api/beta", ["5/s".parse()?]).shadow(true);
//! let lim = RedisRuleLimiter::connect("redis://127.0.0.1:6379/", rules)?;
//! assert_eq!(lim.check("rate_limit/10.0.0.1").unwrap().remaining(), 9);
//! let ok = lim.check_all_n(&["api/{acme}", "rate_limit/{acme}"], 1); // one round trip
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! * **Which rule.** A key is limited by the rule of its longest configured prefix cut at `/`,
//!   then by the default rule `""`. A key no rule limits (or whose rule has no quotas) is
//!   admitted without a round trip and not tracked: `remaining() == u64::MAX`,
//!   `reset_after() == 0` ([`Stats::untracked`] counts them).
//! * **All or nothing, one round trip.** A check charges every quota of the key's rule, or none;
//!   [`check_all_n`](RedisRuleLimiter::check_all_n) does so across keys of different rules in one
//!   script call. Reports are the in-process limiter's: the smallest `remaining()`, the largest
//!   `reset_after()`, and for a refusal the largest `retry_after()` (`None` if a bucket never can
//!   conform). A key named twice is charged twice, as one cost of `2n`: a refusal reports its
//!   buckets as they were, and `None` when `2n` is above a burst (the in-process limiter decides
//!   each naming in turn, and reports the second from the first's charge).
//! * **Shadow rules** decide and count ([`RedisRuleLimiter::rule_stats`], as
//!   `RuleLimiter::stats`) but never refuse; a request one would refuse takes nothing from it.
//! * **Keys.** A key's buckets live in one Redis key, `prefix + "gcra1@" + rule path + ":" +
//!   key`, so two rules never share a bucket (in the path, `%`, `{`, `}` and `:` are written
//!   `%25`, `%7B`, `%7D`, `%3A`). Each bucket names the quota it is kept in; the key expires
//!   when all are empty, like a plain limiter's. A rule's table capacity and overflow policy do not
//!   apply: Redis holds every key (the local fallback below uses them).
//! * **Redis Cluster.** As above, the keys of one call must share a hash slot, and only the
//!   key's own `{tag}` decides it (a brace in a rule path is escaped). Since rules match the
//!   start of a key, put the tag after the rule's part: `"tenant/{acme}"` and
//!   `"user/{acme}/42"` under rules `"tenant"` and `"user"`. A fleet-wide key (`"global"`) can be
//!   checked together with per-tenant keys on a single Redis, not on a Cluster.
//! * **When Redis cannot answer**, the failure policy answers as for a plain limiter;
//!   [`FailurePolicy::Local`] checks a local [`leakgate::RuleLimiter`] holding every rule at this
//!   process's share, reloaded with the limiter. Leases and reservations are not available with
//!   rules.
//!
//! ## Reloads and levels
//! [`RedisRuleLimiter::reload`] swaps the rules on this client at once (an `arc-swap`): each
//! later check is decided wholly on the new rules, checks in flight on the old. Nothing in Redis
//! changes then; the buckets of each key are carried over when the script next reads them (the
//! key's first check or peek under the new rules), and written in their new quotas, with the
//! meaning of `RuleLimiter::reload` (the contract's "Rules"): a key keeps what it could admit.
//!
//! * The i-th bucket becomes the bucket of the rule's i-th quota: the units it could admit now
//!   (its burst less its level `(TAT - now) / T`) become what the new bucket can admit, capped
//!   at the new burst. A quota without a counterpart starts with its whole burst; a bucket
//!   without one is dropped. So no change of quota, however frequent, makes more units
//!   available than were before it: a lowered burst keeps the debt it cannot hold, and a raised
//!   burst adds no unit at once (they come at the rate).
//! * Each bucket stores its quota (its unit `1/D` ns, `T` and `tau`). A bucket whose rate stays
//!   (the same `T`: a new burst, or the same rate written otherwise, `10/s` and `600/min`) keeps
//!   every span exactly; across rates, the units it could admit are rounded down (a debt up) to
//!   the new quota's unit, with sums, halves and comparisons of exact integers only.
//! * A key whose rule path changes (a new override, a rule removed so that a shorter prefix
//!   matches) keeps its buckets too. Each check also names the key's Redis key under each path
//!   that the client's earlier rules gave it (the last four sets of rules that routed some key
//!   differently; a reload that only changes quotas adds none). The script takes in what it
//!   finds there and carries it over, and leaves there a marked copy of the key's buckets (as
//!   they are: a server on those rules carries them to its own quotas when it reads them). That
//!   costs a moved key one more `GET` per check, and one more `SET` per write, per earlier path
//!   (about twice the Redis time of a plain check); keys whose path never changed pay nothing.
//!
//! This is `RuleLimiter::reload`'s meaning, with two differences that come from the levels
//! living in Redis, shared by servers that reload at different times: a key is carried over
//! when it is next read, not when the reload began (its bucket refills at the old rate until
//! then), and a key moved by more than four routing changes between two of its checks starts
//! afresh under its new path.
//!
//! **Rollouts.** While a fleet rolls a change out, servers on the old and the new rules share
//! each key. Each server carries the key to its own quotas when it checks it, never to more
//! units than the key could admit before, so a key is limited by the rule that checked it last.
//! For a key whose path changed, a server on the new rules takes in what servers on the old
//! rules charged under the old path (the fuller bucket wins), and its writes keep the marked
//! copy there current, so that both sides draw from one budget. Servers on two different new
//! sets of rules (a second change rolled out before the first was everywhere), neither of which
//! routes the key as the other did before, do not see each other's buckets for that key.
//!
//! **Redis Cluster.** A key's Redis keys under its old and its new path hash to one slot when
//! the key has its own `{tag}` (only the key's tag can decide the slot: rule paths escape
//! braces). Without a tag they usually hash apart: on a cluster, the script is then not sent the
//! old path's key, and the key starts afresh under its new path (as a key moved by more than four
//! routing changes does).
//!
//! **Upgrading from script version 2.** Version 3 (this one) stores each rule bucket's `tau`.
//! It reads a version 2 bucket with the meaning it was written with (its level, debt included),
//! once, and writes it in its own form. A version 2 server does not know that form: it answers
//! such a key with an error (its failure policy decides; by default it refuses). Upgrade the
//! servers that share a Redis together, or accept those refusals meanwhile.
//!
//! # Redis Cluster
//! [`Builder::cluster`] (and `connect_cluster` on each limiter) connects to a Redis Cluster
//! through seed URLs, any of its nodes. Each call goes to the master of its keys' hash slot in
//! one script run, so every key, whatever its slot, has exactly the meaning above: exact GCRA,
//! several quotas, `check_all_n` over one `{tag}`, reservations, leases, rules, reloads, shadow
//! rules and stats, with the decisions a single Redis gives on the same clock. The client follows
//! `MOVED` and `ASK` (a slot migration), refreshes the slot map, and loads the script again on a
//! node that answers `NOSCRIPT` (a promoted replica, a new master). The deadline, the bound on
//! calls in flight and the failure policy are those of one node; the breaker is one per 256
//! consecutive hash slots, so a master that stops answering opens the breakers of its own slots
//! (and of at most two ranges it shares with a neighbour), and the other masters' keys are still
//! decided by Redis meanwhile.
//!
//! * **Keys of one check in different slots** (a plain limiter's `check_all_n`) are decided all
//!   or nothing, exactly, by holds. Each slot's keys *reserve* in one script: they must conform
//!   counting every live hold on them as charged, and then record a hold (the call's id, its
//!   time, its cost, an expiry one deadline after the call's), charging nothing. If every slot
//!   reserved, each *commits* (the hold becomes the charge at its own time,
//!   `TAT := max(TAT, t) + cost`); else each *releases* (the hold is dropped). Every script
//!   that reads a bucket counts its live holds, and commits a hold past its expiry (its caller
//!   may have been admitted and then died). Guarantee: never more admitted than the exact GCRA
//!   of the admitted requests, each taken at its reserve; a refused call leaves no charge,
//!   unless its caller dies between the phases, when its held units are charged at the hold's
//!   expiry. Meanwhile another caller of the same key sees the held units as charged, so it may
//!   be refused by up to them until the commit or release: one round trip, at most twice the
//!   deadline. The deadline, breaker and failure policy cover phase 1 (a slot that fails to
//!   reserve fails the call, the others released); phase 2 takes one more round trip (at most
//!   one more deadline); a commit that fails (a master went down) leaves its holds, which commit
//!   at expiry. Cost: two round trips (each phase on every slot in parallel) instead of one; calls
//!   on one slot are unchanged. Format: a key with live holds keeps them after its buckets
//!   (script version 4: `";id/t.ms/t.ns/expiry/cost..."`); buckets written before are read as
//!   they are, nothing to migrate. Holds appear only from cross-slot calls, which earlier
//!   versions refused; an earlier client that meets one answers an error for that key (its
//!   failure policy decides), never a wrong decision, so upgrade every client before making
//!   cross-slot calls. A rules call over several slots is refused whole, before any round trip
//!   ([`Error::InvalidRequest`] from the `try_` methods): give its keys a common `{tag}`.
//! * **Failover.** Replication is asynchronous: a master that dies before its replica got its
//!   last writes loses them, and each key it held may admit up to one burst more around the loss
//!   (as in *When Redis loses keys*, below; leases find the loss as there). While the replica is
//!   promoted (about the cluster's `cluster-node-timeout` and a second), the failure policy
//!   answers for the keys of that master's slots, each call within its deadline.
//!   [`Builder::wait_for_replicas`] makes each charge reach a replica before its call answers
//!   (Redis `WAIT`): a failover to that replica then loses no admitted unit, at a cost in
//!   throughput.
//! * **Clocks.** With Redis `TIME`, each key is decided on its master's clock: keep the masters'
//!   clocks synced (a key never moves between masters except by a failover or a migration, when
//!   a clock step between the two moves its bucket's time by the skew).
//!
//! # redis-cell's bucket
//! An [`AsyncRedisCell`] keeps one bucket per key, its TAT, and decides each call under the
//! quota that call brings (as redis-cell's `CL.THROTTLE` does: `leakgate serve` uses it with
//! `--redis`): the same key called with another quota keeps its TAT.
//!
//! # Queue mode
//! [`RedisLimiter::reserve_n`] grants a time to go, up to `max_wait` ahead, and charges the
//! buckets from that time; reservations from all processes form one queue per key.
//!
//! # Leases for hot keys
//! With [`Builder::leases`], a process takes extra units in the same round trip as a request and
//! serves later requests from them locally, each within its slot of the bucket's schedule, so the
//! fleet's bound holds exactly; see [`LeaseConfig`]. While one request renews the lease of a
//! key that Redis last found full, the others that the lease cannot serve are refused here, for
//! one emission interval after that answer, rather than each waiting for a round trip. Their
//! `retry_after` is the rest of that interval, an estimate. The buckets keep the room they
//! refuse for the renewing request.
//!
//! # When Redis is slow or away
//! Every call has a deadline (5 ms by default) and returns by it. A call that gets no decision in
//! time, or finds the circuit breaker open, or finds `max_in_flight` calls already waiting, or
//! comes before Redis has first answered, is answered by the [`FailurePolicy`]: deny (the
//! default: the quota is never exceeded because Redis is away), admit, or a local limiter at the
//! quota divided by the expected number of servers. The breaker opens after 3 calls in a row fail
//! and probes Redis every 250 ms; the connection is remade in the background, so limiting resumes
//! within about a second of Redis answering again, without a restart. [`Stats`] counts each
//! outcome.
//!
//! **A call that gave up changes nothing.** Each call sends the script its deadline on Redis's
//! clock. A script that starts later (Redis was frozen or overloaded, and runs the calls it held
//! when it catches up) decides nothing and charges nothing: a request the policy refused is never
//! charged afterwards, and a reservation nobody holds takes no place in the queue. The deadline
//! sent is the call's give-up time on this process's monotonic clock mapped to Redis's `TIME`
//! through the answers Redis gave: never later than the give-up, earlier by at most the return
//! trip of the answer it was taken from, and following a clock that is stepped within a second.
//! So the script also reads `TIME` with [`Builder::caller_clock`], for the deadline only.
//! [`Stats::late`] counts late answers that still arrived in time.
//!
//! **Booting while Redis is down.** `connect` fails only for a bad setting (URL, prefix) or a
//! Redis that answers with an error (a wrong password, a refused script). It waits for Redis at
//! most the connect timeout (1 s by default) and returns the limiter either way; the limiter keeps
//! connecting in the background, every 50 to 250 ms, and until Redis first answers, every call is
//! answered by the failure policy at once ([`Error::Connecting`]), as in a later outage.
//!
//! A `SCRIPT FLUSH` or a restart that loses the script is invisible: the script is loaded again
//! on `NOSCRIPT`. A key that holds something else than a leakgate bucket is an error
//! ([`Error::Rejected`]), answered by the failure policy, never read as an empty bucket.
//!
//! # When Redis loses keys
//! `FLUSHALL`, a restart without persistence, an eviction, or a failover to a replica that missed
//! the last writes empties buckets: a lost key starts again empty. The fleet may then admit up
//! to one burst more than the bound in a window around the loss; a window that begins after the
//! loss keeps the bound, except for leased units:
//!
//! * Units leased from a lost bucket stay valid (they were charged in it) and are served, each
//!   within its slot of the lost bucket's schedule.
//! * A lease request carries when its process last saw the key's buckets empty again (a TAT
//!   only grows, and a key expires only when its buckets are empty). The first such request that
//!   finds a bucket emptier than that has found the loss: every bucket of the key starts full,
//!   no sooner empty than the lost one could have been, so the units still leased and the ones
//!   admitted from then on share one schedule. [`Stats::lost_buckets`] counts these.
//!
//! So, with leases, any window of length `w` sees at most `burst + w / T + E` units (plus one for
//! rounding), where `E` is at most the units the re-created bucket admitted before the request
//! that found the loss, and at most one burst; for a window that begins after the loss, also at
//! most the units still leased when the key was lost (at most `max_units` per process). For a hot
//! key in a fleet that leases it, the request that re-creates the key is usually such a lease
//! request, and then `E = 0`. Nothing in Redis survives a loss, so a bucket re-created by a
//! process that held no lease of the key cannot know better until one that did asks.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod clock;
mod connection;
mod error;
mod limiters;
mod script;
mod stats;

pub use clock::SystemClock;
pub use connection::builder::Builder;
pub use connection::policy::FailurePolicy;
pub use error::Error;
pub use limiters::blocking::RedisLimiter;
pub use limiters::cell::AsyncRedisCell;
pub use limiters::concurrency::{AsyncRedisConcurrency, Busy, MAX_PERMITS};
pub use limiters::lease_config::LeaseConfig;
pub use limiters::limiter::AsyncRedisLimiter;
pub use limiters::permit::RedisPermit;
pub use limiters::permit_set::MAX_TTL;
pub use limiters::reservation::RedisReservation;
#[cfg(feature = "rules-file")]
pub use limiters::rules::{
    fetch_rules, fetch_rules_cluster, push_rules, push_rules_cluster, rules_to_toml, FollowEvent,
    PushedRules, RulesFollower,
};
pub use limiters::rules::{AsyncRedisRuleLimiter, RedisRuleLimiter};
pub use limiters::token::new_permit_token;
pub use stats::Stats;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
