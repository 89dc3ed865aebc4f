//! [`KeyedConcurrencyLimiter`]: at most `max` in flight per key, in a bounded table that holds
//! only keys with something in flight.
//!
//! # Implementation details
//!
//! The keyed rate table (`keyed/`) reclaims a bucket when time has drained it; a count drains
//! only when its permits come back, at a moment the table cannot see coming, and a key must
//! vanish the instant its last permit does (a key with nothing in flight costs nothing). So this
//! is a table of its own: 64 shards, each a `HashMap<K, u32>` of the keys with permits held,
//! under a short OS lock taken for one lookup and one add (or remove) and never across user code.
//! A key's entry is removed when its count returns to zero. The table holds at most `capacity`
//! keys in all (each shard an equal part, reserved up front so the hot path never grows a map);
//! a new key past that is refused, like a key at its limit.

use super::error::{checked, ConcurrencyError};
use crate::sync::{lock, AtomicU32, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

const SHARDS: usize = 64;

/// One shard: the keys with permits in flight there, and how many each holds.
type Shard<K> = CachePadded<Mutex<HashMap<K, u32>>>;

/// The number of keys with permits in flight a table holds by default.
pub const DEFAULT_KEYED_CAPACITY: usize = 100_000;

/// At most `max` permits in flight per key: 5 calls at once per tenant, one job at a time per
/// user. A key with nothing in flight takes no room; the table holds at most `capacity` keys
/// with permits in flight ([`DEFAULT_KEYED_CAPACITY`] unless given), and refuses new keys past
/// that rather than grow.
///
/// ```
/// use leakgate::KeyedConcurrencyLimiter;
///
/// let per_tenant = KeyedConcurrencyLimiter::<u64>::new(2)?;
/// let a = per_tenant.try_acquire(&42).unwrap();
/// let b = per_tenant.try_acquire(&42).unwrap();
/// assert!(per_tenant.try_acquire(&42).is_none()); // tenant 42 has 2 in flight
/// assert!(per_tenant.try_acquire(&7).is_some()); // another tenant is not affected
/// drop((a, b));
/// assert_eq!(per_tenant.in_flight(&42), 0);
/// assert_eq!(per_tenant.len(), 0); // nothing in flight: nothing kept
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
pub struct KeyedConcurrencyLimiter<K> {
    shards: Box<[Shard<K>]>,
    hasher: RandomState,
    /// Each key's limit, `0..=MAX_PERMITS`. Relaxed everywhere: a lone setting, read under a
    /// shard's lock, which orders the counts it guards.
    max: AtomicU32,
    /// Keys one shard may hold (`capacity / SHARDS`, at least 1).
    per_shard: usize,
}

/// Permits of one key, given back when dropped.
///
/// ```
/// let k = leakgate::KeyedConcurrencyLimiter::<&str>::new(1)?;
/// let p = k.try_acquire(&"tenant-a").unwrap();
/// assert_eq!(*p.key(), "tenant-a");
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct KeyedPermit<'a, K: Hash + Eq + Clone> {
    limiter: &'a KeyedConcurrencyLimiter<K>,
    key: K,
    n: u32,
}

impl<K: Hash + Eq + Clone> KeyedConcurrencyLimiter<K> {
    /// `max` in flight per key, `1..=MAX_PERMITS`, for up to [`DEFAULT_KEYED_CAPACITY`] keys.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(5)?;
    /// assert_eq!(k.max(), 5);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn new(max: u32) -> Result<Self, ConcurrencyError> {
        Self::with_capacity(max, DEFAULT_KEYED_CAPACITY)
    }

    /// `max` in flight per key, for up to about `capacity` keys with permits in flight at once
    /// (rounded up to a multiple of 64; the room is reserved now).
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::with_capacity(1, 64)?;
    /// let held: Vec<_> = (0..64).filter_map(|key| k.try_acquire(&key)).collect();
    /// assert!(held.len() <= 64);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn with_capacity(max: u32, capacity: usize) -> Result<Self, ConcurrencyError> {
        let max = checked(u64::from(max))?;
        let per_shard = capacity.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| CachePadded::new(Mutex::new(HashMap::with_capacity(per_shard))))
            .collect();
        Ok(KeyedConcurrencyLimiter {
            shards,
            hasher: RandomState::new(),
            max: AtomicU32::new(max),
            per_shard,
        })
    }

    fn shard(&self, key: &K) -> &Mutex<HashMap<K, u32>> {
        // The high bits: the map inside uses its own hash, so the two do not correlate.
        let h = self.hasher.hash_one(key);
        &self.shards[(h >> 58) as usize % SHARDS]
    }

    /// One permit for `key` if it has fewer than `max` in flight; `None` if not (or if the key
    /// is new and the table is full).
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(1)?;
    /// let p = k.try_acquire(&1).unwrap();
    /// assert!(k.try_acquire(&1).is_none());
    /// # drop(p);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn try_acquire(&self, key: &K) -> Option<KeyedPermit<'_, K>> {
        self.try_acquire_n(key, 1)
    }

    /// `n` permits for `key` at once if they fit; `None` if not. `n = 0` holds nothing.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(3)?;
    /// let two = k.try_acquire_n(&9, 2).unwrap();
    /// assert!(k.try_acquire_n(&9, 2).is_none());
    /// assert_eq!(k.in_flight(&9), 2);
    /// # drop(two);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn try_acquire_n(&self, key: &K, n: u32) -> Option<KeyedPermit<'_, K>> {
        if n == 0 {
            return Some(KeyedPermit { limiter: self, key: key.clone(), n });
        }
        let mut map = lock(self.shard(key));
        let max = self.max.load(Ordering::Relaxed);
        match map.get_mut(key) {
            Some(held) => {
                // u64 sum: never wraps.
                if u64::from(*held) + u64::from(n) > u64::from(max) {
                    return None;
                }
                *held += n;
            }
            None => {
                if n > max || map.len() >= self.per_shard {
                    return None;
                }
                map.insert(key.clone(), n);
            }
        }
        drop(map);
        Some(KeyedPermit { limiter: self, key: key.clone(), n })
    }

    fn release(&self, key: &K, n: u32) {
        if n == 0 {
            return;
        }
        let mut map = lock(self.shard(key));
        if let Some(held) = map.get_mut(key) {
            *held = held.saturating_sub(n);
            if *held == 0 {
                map.remove(key);
            }
        }
    }

    /// Permits of `key` in flight now.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(3)?;
    /// assert_eq!(k.in_flight(&1), 0);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn in_flight(&self, key: &K) -> u32 {
        lock(self.shard(key)).get(key).copied().unwrap_or(0)
    }

    /// Keys with permits in flight now.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(3)?;
    /// let _p = k.try_acquire(&1).unwrap();
    /// assert_eq!(k.len(), 1);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether no key has permits in flight.
    ///
    /// ```
    /// assert!(leakgate::KeyedConcurrencyLimiter::<u64>::new(3)?.is_empty());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The per-key limit now.
    ///
    /// ```
    /// assert_eq!(leakgate::KeyedConcurrencyLimiter::<u64>::new(3)?.max(), 3);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn max(&self) -> u32 {
        self.max.load(Ordering::Relaxed)
    }

    /// Changes every key's limit; lowering it revokes nothing held.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(3)?;
    /// let held = k.try_acquire_n(&1, 3).unwrap();
    /// k.set_max(1);
    /// assert_eq!(k.in_flight(&1), 3);
    /// drop(held);
    /// let _one = k.try_acquire(&1).unwrap();
    /// assert!(k.try_acquire(&1).is_none());
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn set_max(&self, max: u32) {
        self.max.store(max.min(super::MAX_PERMITS), Ordering::Relaxed);
    }
}

/// Permits of one key of a [`KeyedConcurrencyLimiter`] behind an `Arc`, for holding across
/// tasks; given back when dropped.
///
/// ```
/// use std::sync::Arc;
/// let k = Arc::new(leakgate::KeyedConcurrencyLimiter::<u64>::new(1)?);
/// let p = k.try_acquire_owned(&3).unwrap();
/// assert_eq!((*p.key(), p.count()), (3, 1));
/// std::thread::spawn(move || drop(p)).join().unwrap();
/// assert!(k.is_empty());
/// # Ok::<(), leakgate::ConcurrencyError>(())
/// ```
#[derive(Debug)]
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct OwnedKeyedPermit<K: Hash + Eq + Clone> {
    limiter: std::sync::Arc<KeyedConcurrencyLimiter<K>>,
    key: K,
    n: u32,
}

impl<K: Hash + Eq + Clone> KeyedConcurrencyLimiter<K> {
    /// As [`try_acquire`](Self::try_acquire), for a table behind an `Arc`: the permit can move
    /// to another task or thread.
    ///
    /// ```
    /// let k = std::sync::Arc::new(leakgate::KeyedConcurrencyLimiter::<u64>::new(1)?);
    /// let p = k.try_acquire_owned(&1).unwrap();
    /// assert!(k.try_acquire_owned(&1).is_none());
    /// # drop(p);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn try_acquire_owned(self: &std::sync::Arc<Self>, key: &K) -> Option<OwnedKeyedPermit<K>> {
        let mut permit = self.try_acquire(key)?;
        let owned = OwnedKeyedPermit { limiter: self.clone(), key: key.clone(), n: permit.n };
        // The count moves to the owned permit: the borrowed one's drop gives back nothing.
        permit.n = 0;
        Some(owned)
    }
}

impl<K: Hash + Eq + Clone> OwnedKeyedPermit<K> {
    /// The key these permits are for.
    ///
    /// ```
    /// let k = std::sync::Arc::new(leakgate::KeyedConcurrencyLimiter::<u64>::new(1)?);
    /// assert_eq!(*k.try_acquire_owned(&5).unwrap().key(), 5);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn key(&self) -> &K {
        &self.key
    }

    /// How many permits this holds.
    ///
    /// ```
    /// let k = std::sync::Arc::new(leakgate::KeyedConcurrencyLimiter::<u64>::new(1)?);
    /// assert_eq!(k.try_acquire_owned(&5).unwrap().count(), 1);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn count(&self) -> u32 {
        self.n
    }
}

impl<K: Hash + Eq + Clone> Drop for OwnedKeyedPermit<K> {
    fn drop(&mut self) {
        self.limiter.release(&self.key, self.n);
    }
}

impl<K: Hash + Eq + Clone> KeyedPermit<'_, K> {
    /// The key these permits are for.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(1)?;
    /// assert_eq!(*k.try_acquire(&5).unwrap().key(), 5);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn key(&self) -> &K {
        &self.key
    }

    /// How many permits this holds.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(4)?;
    /// assert_eq!(k.try_acquire_n(&5, 3).unwrap().count(), 3);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn count(&self) -> u32 {
        self.n
    }
}

impl<K: Hash + Eq + Clone> Drop for KeyedPermit<'_, K> {
    fn drop(&mut self) {
        self.limiter.release(&self.key, self.n);
    }
}
