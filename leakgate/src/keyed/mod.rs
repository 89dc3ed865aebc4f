//! [`KeyedLimiter`]: one bucket per key (client, IP address, API key, flow), in a bounded,
//! lock-free table that forgets idle keys by itself.

mod batch;
mod capacity;
mod check;
mod counted;
mod group;
mod handoff;
mod hasher;
mod insert;
mod key_blocks;
mod lookup;
mod model_hooks;
mod overflow;
mod page;
mod request;
mod requota;
mod reuse;
mod slot;
mod snapshot;
mod table;

pub use capacity::{CapacityError, DEFAULT_CAPACITY, MAX_CAPACITY};
pub(crate) use counted::{Counters, Pinned};
pub(crate) use handoff::Charged;
pub(crate) use hasher::{head, RandomSeed};
pub use overflow::OverflowPolicy;
pub(crate) use request::{Ask, FirstState};
pub use snapshot::KeyState;

use crate::clock::{Clock, TscClock};
use crate::gcra::Rate;
use crate::quota::Quota;
use crate::rate_cell::RateCell;
use crate::sync::Mutex;
use overflow::Overflow;
use std::fmt;
use std::hash::Hash;
use table::Table;

/// Rate limits per key: every key has its own bucket with the same quota, and answers exactly as a
/// [`Limiter`](crate::Limiter) would.
///
/// * **Lock-free for tracked keys.** A check finds the key's bucket and CASes its state word; only
///   the first request of a key the table does not hold takes a lock, to insert it.
/// * **Idle keys reclaim themselves.** An empty bucket is indistinguishable from a new one, so its
///   slot is reused for another key with no change to any decision: no `retain_recent`, no
///   background thread. A key that comes back gets a bucket no emptier than the latest time the
///   table judged a bucket empty, so a forgotten key never gets more than its own bucket would
///   have given it, even when the clock goes back or a thread read it before the key was
///   forgotten.
/// * **Holds its capacity, whatever the keys' hashes.** A table made for `n` keys holds `n` keys
///   with busy buckets at once, as `std`'s `with_capacity` does: a new key is refused only when
///   every slot of the table holds a busy bucket. Keys live in one of two windows of 64 slots
///   from their hash; when both are full a key takes a slot further on, which costs that key a
///   longer search (see [Memory and cost](#memory-and-cost)).
/// * **Bounded memory.** The table never grows past its capacity, whatever the key stream, and
///   allocates its slots in pages as keys first reach them.
/// * **Overflow policy.** When a new key finds no room it is denied, or, with
///   [`OverflowPolicy::SharedBucket`], checked against one bucket shared by every such key; see
///   [`with_overflow`](KeyedLimiter::with_overflow). An active bucket is never dropped to make
///   room: that would admit beyond its quota.
/// * **Hostile keys.** Keys are hashed with a per-table random seed, so a flood cannot be aimed
///   at one shard or window without knowing it.
///
/// ```
/// use leakgate::{KeyedLimiter, ManualClock, Quota};
/// let keyed = KeyedLimiter::with_clock(Quota::per_second(2)?, ManualClock::new());
/// assert!(keyed.check(&"alice".to_string()).is_ok());
/// assert!(keyed.check("alice").is_ok()); // &str lookups for String keys, no allocation
/// assert!(keyed.check("alice").is_err());
/// assert!(keyed.check("bob").is_ok()); // bob has his own bucket
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
///
/// # Memory and cost
///
/// A table for `n` keys has `n` rounded up to a power of two slots, so between 1 and 2 slots per
/// key it guarantees; up to 65,536 keys, `n` and a quarter more rounded up (between 1.25 and 2.5
/// slots a key: a small table that its keys fill to 98% has long probes a processor cannot
/// predict, which made checks of 1,000 keys in random order take 1.10-1.22x governor's time in
/// 1,024 slots, 0.95-1.03x in 2,048);
/// at least 64 and at most [`MAX_CAPACITY`] slots either way. A slot costs 33 bytes for
/// `u64` keys once its page is allocated: 32 for its share of its group's two lines (one with the
/// state words, last uses and the group's lowering high-water, one with the group's keys), and 1
/// for its tag, in a dense array of tags. Keys are kept once, inline (a page keeps one spare copy
/// of one group's keys, which lets checks read keys without waiting while one changes): `String`
/// keys take 65 bytes a slot (plus the strings). A million `u64` keys in
/// `with_capacity(1_000_000)` take 34.6 bytes a key, where governor's keyed limiter takes 35.7.
/// The headroom of small tables doubles their bytes a key where the bytes are few: 1,000 `u64`
/// keys in `with_capacity(1000)` take 67.8 bytes a key (2,048 slots, 68 KB in all; 34.0 in the
/// 1,024 slots before the headroom, governor 36.0), 65,536 in `with_capacity(65_536)` 66.1
/// (131,072 slots, 4.3 MB; 33.1 before, governor 34.0).
/// Pages are allocated when a key first reaches them and kept for the table's life; only a list
/// of pages (at most 2^16 entries) is allocated up front.
///
/// A key has two windows of 64 slots in its home shard, from two places its hash picks, and goes
/// into whichever has room nearer its start; a check of a tracked key reads its windows' tags (16
/// groups' tags share a line: a million slots have a megabyte of tags) and the aligned pair of
/// cache lines of the group that holds it (its state words and its keys), which processors fetch
/// together. In a table larger than a core's caches the tags and the first window's first pair are
/// asked for before the clock is read. A key placed past its windows (only when both were full: 0.1
/// to 0.5% of the lookups in tables filled to 95-98% with the seeded hasher) is found after a
/// search of the groups between; with degenerate hashes (a `Hash` that writes the same bytes for
/// many keys) those keys share one sequence, and a lookup or insert of one walks it: up to every
/// group of the table, a lock-free scan for lookups of tracked keys, under the table's insert locks
/// for new keys.
pub struct KeyedLimiter<K, C: Clock = TscClock> {
    table: Table<K>,
    /// The rate in force, and its epoch (see `requota.rs`).
    rates: RateCell,
    /// Held by a change of quota: changes run one at a time (checks never take it).
    changing: Mutex<()>,
    clock: C,
    overflow: Overflow<K>,
}

impl<K: Hash + Eq + Clone + Send + Sync> KeyedLimiter<K, TscClock> {
    /// A keyed limiter on the default clock with [`DEFAULT_CAPACITY`].
    ///
    /// ```
    /// let keyed = leakgate::KeyedLimiter::new(leakgate::Quota::per_second(10)?);
    /// assert!(keyed.check(&42u64).is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(quota: Quota) -> Self {
        Self::with_clock(quota, TscClock::new())
    }

    /// A keyed limiter on the default clock that holds at least `capacity` keys with busy
    /// buckets at once, whatever their hashes: `capacity` (and a quarter more, up to 65,536 keys)
    /// rounded up to a power of two (at least 64) slots, allocated as keys reach them; see
    /// [Memory and cost](KeyedLimiter#memory-and-cost).
    ///
    /// A capacity above [`MAX_CAPACITY`] is taken as [`MAX_CAPACITY`] (this never panics or
    /// aborts: the memory is allocated as keys arrive, and a page that cannot be allocated is a
    /// page with no room); [`try_with_capacity`](KeyedLimiter::try_with_capacity) returns an error
    /// instead.
    ///
    /// ```
    /// let keyed = leakgate::KeyedLimiter::<u64>::with_capacity(leakgate::Quota::per_second(10)?, 100_000);
    /// assert_eq!(keyed.capacity(), 131_072);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_capacity(quota: Quota, capacity: usize) -> Self {
        Self::with_capacity_and_clock(quota, capacity, TscClock::new())
    }

    /// As [`with_capacity`](KeyedLimiter::with_capacity), but a capacity above [`MAX_CAPACITY`]
    /// is an error.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// let q = Quota::per_second(10)?;
    /// assert_eq!(KeyedLimiter::<u64>::try_with_capacity(q, 1000).unwrap().capacity(), 2048);
    /// assert!(KeyedLimiter::<u64>::try_with_capacity(q, usize::MAX).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn try_with_capacity(quota: Quota, capacity: usize) -> Result<Self, CapacityError> {
        Self::try_with_capacity_and_clock(quota, capacity, TscClock::new())
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// A keyed limiter reading time from `clock`, with [`DEFAULT_CAPACITY`].
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert!(keyed.check(&1u32).is_ok());
    /// assert!(keyed.check(&1u32).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        Self::with_capacity_and_clock(quota, DEFAULT_CAPACITY, clock)
    }

    /// A keyed limiter reading time from `clock` that holds at least `capacity` keys with busy
    /// buckets at once, as [`with_capacity`](KeyedLimiter::with_capacity) (a capacity above
    /// [`MAX_CAPACITY`] is taken as [`MAX_CAPACITY`]).
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::<u64, _>::with_capacity_and_clock(Quota::per_second(1)?, 1000, ManualClock::new());
    /// assert_eq!(keyed.capacity(), 2048); // 1,000 and a quarter more, rounded up
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_capacity_and_clock(quota: Quota, capacity: usize, clock: C) -> Self {
        let (shards, slots_per_shard) = capacity::layout(capacity);
        Self::with_layout(quota, shards, slots_per_shard, clock)
    }

    /// As [`with_capacity_and_clock`](KeyedLimiter::with_capacity_and_clock), but a capacity
    /// above [`MAX_CAPACITY`] is an error.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, ManualClock, Quota, MAX_CAPACITY};
    /// let q = Quota::per_second(1)?;
    /// let err = KeyedLimiter::<u64, _>::try_with_capacity_and_clock(q, MAX_CAPACITY + 1, ManualClock::new());
    /// assert_eq!(err.unwrap_err().requested(), MAX_CAPACITY + 1);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn try_with_capacity_and_clock(
        quota: Quota,
        capacity: usize,
        clock: C,
    ) -> Result<Self, CapacityError> {
        let (shards, slots_per_shard) = capacity::layout(capacity::at_most_max(capacity)?);
        Ok(Self::with_layout(quota, shards, slots_per_shard, clock))
    }

    /// A table of exactly `shards * slots_per_shard` slots (both powers of two, at least 4 slots
    /// per shard): for tests and models that need a tiny table.
    #[doc(hidden)]
    pub fn with_layout(quota: Quota, shards: usize, slots_per_shard: usize, clock: C) -> Self {
        KeyedLimiter {
            table: Table::new(shards, slots_per_shard),
            rates: RateCell::new(quota),
            changing: Mutex::new(()),
            clock,
            overflow: Overflow::new(OverflowPolicy::Deny),
        }
    }

    /// A table holding `capacity` keys (as [`with_capacity_and_clock`]) whose buckets follow
    /// `rate`: `quota` compiled in other units, with the same burst (the colour meters count in
    /// whole intervals, `Rate::in_intervals`).
    ///
    /// [`with_capacity_and_clock`]: KeyedLimiter::with_capacity_and_clock
    pub(crate) fn with_rate(quota: Quota, rate: Rate, capacity: usize, clock: C) -> Self {
        let (shards, slots_per_shard) = capacity::layout(capacity);
        let rates = RateCell::with_rate(quota, rate);
        KeyedLimiter { rates, ..Self::with_layout(quota, shards, slots_per_shard, clock) }
    }

    /// This limiter with overflow policy `policy` (the default is [`OverflowPolicy::Deny`]); its
    /// counts start again from zero.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, ManualClock, OverflowPolicy, Quota};
    /// let keyed = KeyedLimiter::<u64, _>::with_clock(Quota::per_second(1)?, ManualClock::new())
    ///     .with_overflow(OverflowPolicy::SharedBucket(Quota::per_second(100)?));
    /// assert_eq!(keyed.overflow_policy(), OverflowPolicy::SharedBucket(Quota::per_second(100)?));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_overflow(mut self, policy: OverflowPolicy) -> Self {
        self.overflow = Overflow::new(policy);
        self
    }
}

impl<K, C: Clock> KeyedLimiter<K, C> {
    /// The overflow policy: what a new key that finds no room gets.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, OverflowPolicy, Quota};
    /// let keyed = KeyedLimiter::<u64>::new(Quota::per_second(1)?);
    /// assert_eq!(keyed.overflow_policy(), OverflowPolicy::Deny);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn overflow_policy(&self) -> OverflowPolicy {
        self.overflow.policy
    }

    /// How many requests of keys that found no room were denied: all of them under
    /// [`OverflowPolicy::Deny`], those the shared bucket denied under
    /// [`OverflowPolicy::SharedBucket`].
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::<u64, _>::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert_eq!(keyed.overflow_denials(), 0);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn overflow_denials(&self) -> u64 {
        self.overflow.denied()
    }

    /// How many requests of keys that found no room the shared overflow bucket admitted (always
    /// 0 under [`OverflowPolicy::Deny`]).
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::<u64, _>::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert_eq!(keyed.overflow_admissions(), 0);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn overflow_admissions(&self) -> u64 {
        self.overflow.admitted()
    }

    /// The most keys tracked at once: the table's slots.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// let keyed = KeyedLimiter::<u64>::new(Quota::per_second(1)?);
    /// assert_eq!(keyed.capacity(), leakgate::DEFAULT_CAPACITY);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// The quota every key's bucket enforces.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// let q = Quota::per_minute(60)?;
    /// assert_eq!(KeyedLimiter::<u64>::new(q).quota(), q);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.rates.quota()
    }

    /// The compiled rate every key's bucket follows.
    /// The rate of the quota the limiter was made with: the rate of a table whose quota never
    /// changes (the tables of rules, which change by reloads instead).
    pub(crate) fn rate(&self) -> &Rate {
        self.rates.first()
    }

    /// The table of buckets.
    pub(crate) fn table(&self) -> &Table<K> {
        &self.table
    }

    /// The clock this limiter reads.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::<u64, _>::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// keyed.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// A clock reading in whole milliseconds, wrapping (about 49.7 days): last-use times for
/// snapshots.
#[inline]
fn millis(now_ns: u64) -> u32 {
    (now_ns / 1_000_000) as u32
}

impl<K, C: Clock> fmt::Debug for KeyedLimiter<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("quota", &self.quota())
            .field("capacity", &self.table.capacity())
            .field("overflow", &self.overflow.policy)
            .finish_non_exhaustive()
    }
}
