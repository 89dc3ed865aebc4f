//! [`KeyedAdaptiveConcurrency`]: an adaptive concurrency limit per key (each tenant, each
//! upstream host its own AIMD or Gradient2 limit), in a bounded table.
//!
//! # Implementation details
//!
//! 64 shards, each a `HashMap<K, Arc<AdaptiveConcurrency<C>>>` under a short OS lock, taken for
//! one lookup and one acquire and never across user code. A key's permits hold its limiter's
//! `Arc`, so "nothing in flight" is "the table holds the only reference" (`Arc::strong_count ==
//! 1`): a permit is only ever made under the shard's lock, so the count cannot rise while the
//! lock is held, and an entry seen idle there stays idle until the lock is released.
//!
//! Unlike [`KeyedConcurrencyLimiter`](crate::KeyedConcurrencyLimiter), an idle key is not
//! dropped the moment its last permit returns: its learned limit is what the table is for, and
//! a key with one request at a time is idle between every two of them. It is kept while there
//! is room; a new key that finds its shard full sweeps the shard's idle keys away (each starts
//! again at `initial` when it returns) and is refused only if every key there has permits in
//! flight. [`reclaim`](KeyedAdaptiveConcurrency::reclaim) sweeps every shard at once.
//!
//! Lock order: a shard's lock, then (inside `try_acquire`) the key's algorithm lock; a permit's
//! report takes only the algorithm's, so the two never wait on each other in a circle.

use super::algorithm::{Algorithm, Gradient2};
use super::concurrency::{AdaptiveConcurrency, OwnedAdaptivePermit};
use crate::concurrency::ConcurrencyError;
use crate::sync::{lock, Mutex};
use crate::{Clock, TscClock};
use crossbeam_utils::CachePadded;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

const SHARDS: usize = 64;

/// The keys a table holds unless told otherwise (about 300 bytes each once used).
const DEFAULT_CAPACITY: usize = 10_000;

/// One shard: the keys it tracks, each with its own adaptive limiter.
type Shard<K, C> = CachePadded<Mutex<HashMap<K, Arc<AdaptiveConcurrency<C>>>>>;

/// An [`AdaptiveConcurrency`] per key: each key learns its own limit between `min` and `max`
/// from how its permits end (AIMD or Gradient2), so a slow tenant or upstream backs off alone.
///
/// The table holds about `capacity` keys (10 000 unless set with
/// [`with_capacity`](Self::with_capacity)). A key with nothing in flight keeps its learned limit
/// while there is room; when a new key finds the table full, the keys with nothing in flight are
/// forgotten (a forgotten key starts again at `initial`), and if every key has permits in flight
/// the new key is refused, as a key at its limit is. Memory never grows past the bound.
///
/// ```
/// use leakgate::KeyedAdaptiveConcurrency;
///
/// let per_host = KeyedAdaptiveConcurrency::<&str>::aimd(1, 4, 64)?;
/// let p = per_host.try_acquire(&"slow.example").unwrap();
/// p.dropped(); // a 503 from that host
/// assert_eq!(per_host.limit(&"slow.example"), 3); // backed off (4 * 0.9, rounded down)
/// assert_eq!(per_host.limit(&"fast.example"), 4); // the other host is not touched
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
pub struct KeyedAdaptiveConcurrency<K, C: Clock = TscClock> {
    shards: Box<[Shard<K, C>]>,
    hasher: RandomState,
    /// Keys one shard may hold (`capacity / SHARDS` rounded up, at least 1).
    per_shard: usize,
    /// What a new key's limiter is made from.
    algorithm: Algorithm,
    min: u32,
    initial: u32,
    max: u32,
    clock: C,
}

impl<K: Hash + Eq + Clone> KeyedAdaptiveConcurrency<K, TscClock> {
    /// AIMD per key between `min` and `max`, each new key starting at `initial`
    /// (`1 <= min <= initial <= max <= MAX_PERMITS`).
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 8, 100)?;
    /// assert_eq!(k.limit(&7), 8);
    /// assert!(leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(9, 8, 100).is_err());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn aimd(min: u32, initial: u32, max: u32) -> Result<Self, ConcurrencyError> {
        Self::aimd_with_clock(min, initial, max, TscClock::default())
    }

    /// Gradient2 per key between `min` and `max`, each new key starting at `initial`.
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::gradient2(2, 16, 256)?;
    /// assert_eq!(k.limit(&7), 16);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn gradient2(min: u32, initial: u32, max: u32) -> Result<Self, ConcurrencyError> {
        Self::gradient2_with_clock(min, initial, max, TscClock::default())
    }
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> KeyedAdaptiveConcurrency<K, C> {
    /// As [`aimd`](KeyedAdaptiveConcurrency::aimd), measuring latency on `clock`.
    ///
    /// ```
    /// let clock = leakgate::ManualClock::new();
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64, _>::aimd_with_clock(1, 2, 9, clock)?;
    /// assert_eq!(k.limit(&1), 2);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn aimd_with_clock(
        min: u32,
        initial: u32,
        max: u32,
        clock: C,
    ) -> Result<Self, ConcurrencyError> {
        Self::build(Algorithm::Aimd, min, initial, max, clock)
    }

    /// As [`gradient2`](KeyedAdaptiveConcurrency::gradient2), measuring latency on `clock`.
    ///
    /// ```
    /// let clock = leakgate::ManualClock::new();
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64, _>::gradient2_with_clock(1, 2, 9, clock)?;
    /// assert_eq!(k.limit(&1), 2);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn gradient2_with_clock(
        min: u32,
        initial: u32,
        max: u32,
        clock: C,
    ) -> Result<Self, ConcurrencyError> {
        Self::build(Algorithm::Gradient2(Gradient2::default()), min, initial, max, clock)
    }

    fn build(
        algorithm: Algorithm,
        min: u32,
        initial: u32,
        max: u32,
        clock: C,
    ) -> Result<Self, ConcurrencyError> {
        // The same checks as one key's limiter: a table that cannot make one is refused now.
        AdaptiveConcurrency::build(algorithm.clone(), min, initial, max, clock.clone())?;
        let mut table = KeyedAdaptiveConcurrency {
            shards: Box::new([]),
            hasher: RandomState::new(),
            per_shard: 0,
            algorithm,
            min,
            initial,
            max,
            clock,
        };
        table.reserve(DEFAULT_CAPACITY);
        Ok(table)
    }

    fn reserve(&mut self, capacity: usize) {
        self.per_shard = capacity.div_ceil(SHARDS).max(1);
        self.shards = (0..SHARDS)
            .map(|_| CachePadded::new(Mutex::new(HashMap::with_capacity(self.per_shard))))
            .collect();
    }

    /// The same table for about `capacity` keys (rounded up to a multiple of 64; the room for
    /// them is reserved now; keys already tracked are forgotten).
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 1, 4)?.with_capacity(64);
    /// let held: Vec<_> = (0..1000).filter_map(|key| k.try_acquire(&key)).collect();
    /// assert!(held.len() <= 64 && k.len() <= 64);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    #[must_use]
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.reserve(capacity);
        self
    }

    fn shard(&self, key: &K) -> &Mutex<HashMap<K, Arc<AdaptiveConcurrency<C>>>> {
        // The high bits: the map inside uses its own hash, so the two do not correlate.
        let h = self.hasher.hash_one(key);
        &self.shards[(h >> 58) as usize % SHARDS]
    }

    /// A permit for `key` if it has fewer than its limit in flight; `None` at once if not, or if
    /// the key is new and the table is full of keys with permits in flight. Report how the work
    /// ended on the permit, as for [`AdaptiveConcurrency`].
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 1, 10)?;
    /// let p = k.try_acquire(&1).unwrap();
    /// assert!(k.try_acquire(&1).is_none()); // key 1 is at its limit
    /// p.success();
    /// assert_eq!(k.limit(&1), 2); // and learned it can take one more
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn try_acquire(&self, key: &K) -> Option<OwnedAdaptivePermit<C>> {
        let mut map = lock(self.shard(key));
        if let Some(limiter) = map.get(key) {
            return limiter.try_acquire_owned();
        }
        if map.len() >= self.per_shard {
            // Under the lock no permit can be made, so an entry seen idle here stays idle.
            map.retain(|_, limiter| Arc::strong_count(limiter) > 1);
            if map.len() >= self.per_shard {
                return None;
            }
        }
        let limiter = AdaptiveConcurrency::build(
            self.algorithm.clone(),
            self.min,
            self.initial,
            self.max,
            self.clock.clone(),
        )
        .ok()?; // cannot fail: the table checked these bounds when it was made
        let limiter = Arc::new(limiter);
        let permit = limiter.try_acquire_owned();
        map.insert(key.clone(), limiter);
        permit
    }

    /// `key`'s limit now: what it learned, or `initial` for a key the table does not hold.
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 5, 10)?;
    /// assert_eq!(k.limit(&3), 5);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn limit(&self, key: &K) -> u32 {
        lock(self.shard(key)).get(key).map_or(self.initial, |l| l.limit())
    }

    /// `key`'s permits in flight now.
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 5, 10)?;
    /// let _p = k.try_acquire(&3).unwrap();
    /// assert_eq!((k.in_flight(&3), k.in_flight(&4)), (1, 0));
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn in_flight(&self, key: &K) -> u32 {
        lock(self.shard(key)).get(key).map_or(0, |l| l.in_flight())
    }

    /// Keys the table holds now: those with permits in flight and the idle ones not yet swept.
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 5, 10)?;
    /// k.try_acquire(&3).unwrap().success();
    /// assert_eq!(k.len(), 1); // idle, its limit kept
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether the table holds no key.
    ///
    /// ```
    /// assert!(leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 5, 10)?.is_empty());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every key with nothing in flight now (each starts again at `initial`); returns
    /// how many were forgotten. The table also does this, one shard at a time, when it is full.
    ///
    /// ```
    /// let k = leakgate::KeyedAdaptiveConcurrency::<u64>::aimd(1, 5, 10)?;
    /// let held = k.try_acquire(&1).unwrap();
    /// k.try_acquire(&2).unwrap().dropped();
    /// assert_eq!(k.reclaim(), 1); // key 2: idle
    /// assert_eq!((k.len(), k.limit(&2)), (1, 5));
    /// # drop(held);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn reclaim(&self) -> usize {
        let mut forgotten = 0;
        for shard in self.shards.iter() {
            let mut map = lock(shard);
            let before = map.len();
            map.retain(|_, limiter| Arc::strong_count(limiter) > 1);
            forgotten += before - map.len();
        }
        forgotten
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn table(capacity: usize) -> KeyedAdaptiveConcurrency<u64, ManualClock> {
        KeyedAdaptiveConcurrency::aimd_with_clock(1, 2, 10, ManualClock::new())
            .unwrap()
            .with_capacity(capacity)
    }

    #[test]
    fn each_key_learns_alone() {
        let t = table(64);
        for _ in 0..2 {
            let (a, b) = (t.try_acquire(&1).unwrap(), t.try_acquire(&1).unwrap());
            a.success();
            b.success();
        }
        t.try_acquire(&2).unwrap().dropped();
        assert_eq!((t.limit(&1), t.limit(&2)), (3, 1));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_full_table_forgets_idle_keys_and_refuses_only_when_all_are_busy() {
        let t = table(1); // one key per shard
        let mut held = Vec::new();
        let mut key = 0;
        // Fill every shard with a busy key.
        while held.len() < SHARDS {
            if let Some(p) = t.try_acquire(&key) {
                held.push((key, p));
            }
            key += 1;
        }
        assert_eq!(t.len(), SHARDS);
        assert!((key..key + 1000).all(|k| t.try_acquire(&k).is_none()), "all busy: refused");
        // A busy key still gets its own permits.
        assert!(t.try_acquire(&held[0].0).is_some());
        let (freed_key, permit) = held.pop().unwrap();
        permit.dropped();
        assert_eq!(t.limit(&freed_key), 1, "backed off");
        assert_eq!(t.len(), SHARDS, "kept while idle");
        // Some new key lands on the freed shard, sweeps the idle key away and is admitted.
        let newcomer = (key..key + 10_000).find_map(|k| t.try_acquire(&k)).expect("room made");
        assert_eq!(t.len(), SHARDS);
        assert_eq!(t.limit(&freed_key), 2, "forgotten: back to initial");
        drop(newcomer);
        drop(held);
        assert_eq!(t.reclaim(), SHARDS);
        assert!(t.is_empty());
    }
}
