//! [`KeyedLimiter`]: one bucket per key (client, IP address, API key, flow), in a bounded,
//! lock-free table that forgets idle keys by itself.

mod group;
mod hasher;
mod page;
mod slot;
mod snapshot;
mod table;

pub use snapshot::KeyState;

use crate::bucket;
use crate::clock::{Clock, TscClock};
use crate::decision::{Admitted, Denied};
use crate::gcra::Rate;
use crate::quota::Quota;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use group::{Found, Tat};
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use table::Table;

/// A request taken from a key's bucket: the state it left, and the slot holding the bucket (`None`
/// when the key is not tracked and the request took nothing).
// `slot`'s first readers, keyed reservations and all-or-nothing checks, are being written.
#[allow(dead_code)]
pub(crate) struct Taken<'a, K> {
    pub(crate) state: u64,
    pub(crate) slot: Option<Found<'a, K>>,
}

/// The default number of keys a [`KeyedLimiter`] can track at once: 2^18 = 262,144.
pub const DEFAULT_CAPACITY: usize = 1 << 18;

/// Rate limits per key: every key has its own bucket with the same quota, and answers exactly as a
/// [`Limiter`](crate::Limiter) would.
///
/// * **Lock-free for tracked keys.** A check finds the key's bucket and CASes its state word; only
///   the first request of a key the table does not hold takes its shard's lock, to insert it.
/// * **Idle keys reclaim themselves.** An empty bucket is indistinguishable from a new one, so its
///   slot is reused for another key with no change to any decision: no `retain_recent`, no
///   background thread.
/// * **Bounded memory.** The table never grows past its capacity, whatever the key stream.
/// * **Overflow policy: new keys are denied.** When every slot a new key may use (a window of 64
///   from its hash, in 16 groups of 4) holds a bucket that is not empty, the new key is denied
///   with `remaining() = 0` and `retry_after() = Some(T)`, and [`overflow_denials`](KeyedLimiter::overflow_denials)
///   counts it. An active bucket is never dropped to make room: that would admit beyond its
///   quota.
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
pub struct KeyedLimiter<K, C: Clock = TscClock> {
    table: Table<K>,
    rate: Rate,
    quota: Quota,
    clock: C,
    /// New keys denied because their window was full of active buckets. Counted only on that
    /// cold path; alone on its line so counting never slows checks of tracked keys.
    overflow: CachePadded<AtomicU64>,
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

    /// A keyed limiter on the default clock that tracks at most about `capacity` keys at once
    /// (rounded up to a power of two, at least 64). The table's slots are allocated up front, 16
    /// bytes each; every group of four slots in use adds one array of their keys (16 bytes plus
    /// four keys: 48 bytes for `u64` keys, so 28 bytes per slot in all).
    ///
    /// ```
    /// let keyed = leakgate::KeyedLimiter::<u64>::with_capacity(leakgate::Quota::per_second(10)?, 100_000);
    /// assert_eq!(keyed.capacity(), 131_072);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_capacity(quota: Quota, capacity: usize) -> Self {
        Self::with_capacity_and_clock(quota, capacity, TscClock::new())
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

    /// A keyed limiter that tracks at most about `capacity` keys at once (rounded up to a power
    /// of two, at least 64).
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::<u64, _>::with_capacity_and_clock(Quota::per_second(1)?, 1000, ManualClock::new());
    /// assert_eq!(keyed.capacity(), 1024);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_capacity_and_clock(quota: Quota, capacity: usize, clock: C) -> Self {
        let capacity = capacity.clamp(64, 1 << 40).next_power_of_two();
        // Enough shards that threads on different keys rarely meet, never fewer than 16 slots each.
        let shards = (capacity / 16).min(64);
        Self::with_layout(quota, shards, capacity / shards, clock)
    }

    /// A table of exactly `shards * slots_per_shard` slots (both powers of two, at least 4 slots
    /// per shard): for tests and models that need a tiny table.
    #[doc(hidden)]
    pub fn with_layout(quota: Quota, shards: usize, slots_per_shard: usize, clock: C) -> Self {
        let rate = quota.rate();
        KeyedLimiter {
            table: Table::new(shards, slots_per_shard),
            rate,
            quota,
            clock,
            overflow: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Checks one unit for `key`: `check_n(key, 1)`.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert!(keyed.check(&"10.0.0.1".parse::<std::net::IpAddr>().unwrap()).is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.check_n(key, 1)
    }

    /// Checks a request of cost `n` for `key`, with exactly the meaning of
    /// [`Limiter::check_n`](crate::Limiter::check_n). A peek (`n = 0`) and a cost above the burst
    /// never insert a key.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// assert_eq!(keyed.check_n(&7u64, 4).unwrap().remaining(), 6);
    /// assert_eq!(keyed.check_n(&8u64, 0).unwrap().remaining(), 10);
    /// assert_eq!(keyed.check_n(&7u64, 11).unwrap_err().retry_after(), None);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check_n<Q>(&self, key: &Q, n: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let now_ns = self.clock.now_ns();
        let now = self.rate.units_at(now_ns);
        let taken = self.take(key, now, now_ns, n, 0)?;
        Ok(Admitted::from_units(taken.state.saturating_sub(now), self.rate.scale()))
    }

    /// Takes a request of cost `n` at `now` (units; `now_ns` its reading) from `key`'s bucket,
    /// allowed to wait `max_wait` units (see [`bucket::take`]), inserting the key if it needs a
    /// slot: the state left and the slot that holds it (`None` for an untracked key's peek).
    pub(crate) fn take<Q>(
        &self,
        key: &Q,
        now: u64,
        now_ns: u64,
        n: u64,
        max_wait: u64,
    ) -> Result<Taken<'_, K>, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let hash = self.table.hash(key);
        let mut insert = false;
        loop {
            let found = if insert {
                self.table.find_or_insert(key, hash, now, millis(now_ns))
            } else {
                self.table.find(key, hash)
            };
            match found {
                Some(found) => match self.take_from_slot(&found, now, now_ns, n, max_wait) {
                    Ok(Ok(state)) => return Ok(Taken { state, slot: Some(found) }),
                    Ok(Err(denied)) => return Err(denied),
                    Err(Tat::Sealed) => insert = true,
                    Err(_) => {}
                },
                // Not tracked: a bucket that takes nothing needs no slot.
                None if n == 0 || n > self.quota.burst() || insert => {
                    return self.untracked(n, insert).map(|()| Taken { state: 0, slot: None });
                }
                None => insert = true,
            }
        }
    }

    /// [`KeyedLimiter::take`] on a found slot, by the bucket protocol; why not, if the slot may no
    /// longer hold the key.
    #[inline]
    fn take_from_slot(
        &self,
        found: &Found<'_, K>,
        now: u64,
        now_ns: u64,
        n: u64,
        max_wait: u64,
    ) -> Result<Result<u64, Denied>, Tat> {
        match bucket::take(found, &self.rate, now, n, max_wait)? {
            Ok(state) => {
                if n > 0 {
                    found.group.mark_used(found.slot, millis(now_ns));
                }
                Ok(Ok(state))
            }
            Err(refused) => {
                let backlog = refused.tat.saturating_sub(now);
                Ok(Err(Denied::from_units(backlog, refused.why.wait(), self.rate.scale())))
            }
        }
    }

    /// The answer for a key the table does not hold: a peek sees an empty bucket, a cost above
    /// the burst never conforms, and a key with no room (`overflowed`) is denied and counted.
    #[cold]
    fn untracked(&self, n: u64, overflowed: bool) -> Result<(), Denied> {
        let scale = self.rate.scale();
        if n == 0 {
            Ok(())
        } else if n > self.quota.burst() {
            Err(Denied::from_units(0, None, scale))
        } else {
            debug_assert!(overflowed);
            // Relaxed: a statistics counter.
            self.overflow.fetch_add(1, Ordering::Relaxed);
            Err(Denied::from_units(scale.tau(), Some(scale.interval()), scale))
        }
    }

    /// How many new keys were denied because the table had no room for them.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::<u64, _>::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert_eq!(keyed.overflow_denials(), 0);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn overflow_denials(&self) -> u64 {
        // Relaxed: a statistics counter.
        self.overflow.load(Ordering::Relaxed)
    }

    /// The most keys tracked at once.
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
        self.quota
    }

    /// The compiled rate every key's bucket follows.
    #[allow(dead_code)] // for the all-or-nothing check of several buckets, being written
    pub(crate) fn rate(&self) -> &Rate {
        &self.rate
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
            .field("quota", &self.quota)
            .field("capacity", &self.table.capacity())
            .finish_non_exhaustive()
    }
}
