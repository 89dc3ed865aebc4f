//! [`KeyedConcurrencyLimiter`]: at most `max` in flight per key, in the bounded, lock-free table
//! of the keyed rate limiter, where a key with nothing in flight is free to be reclaimed.
//!
//! # Implementation details
//!
//! Each key's slot holds its count in flight (see `keyed/counted.rs`): an acquire finds the key
//! without a lock and CASes its count up within the limit; a release subtracts from the slot the
//! acquire found, which its own permits keep from changing key meanwhile. A slot at count 0 is
//! given to the next new key that needs room, as the rate table gives an empty bucket's slot: a
//! key is never reclaimed while a permit of it is held. Only a key the table does not hold takes
//! a lock (its home shard's), to be given a slot.

use super::error::{checked, ConcurrencyError};
use crate::keyed::{Counters, Pinned};
use crate::sync::{AtomicU32, Ordering};
use std::hash::Hash;

/// The number of keys with permits in flight a table holds by default (its slots: 131,072).
pub const DEFAULT_KEYED_CAPACITY: usize = 100_000;

/// At most `max` permits in flight per key: 5 calls at once per tenant, one job at a time per
/// user.
///
/// * **Lock-free for tracked keys.** An acquire finds its key and CASes its count; a release
///   subtracts from the slot its acquire found. Only a key the table does not hold takes a lock,
///   to be given a slot.
/// * **The keyed rate limiter's bounded table.** The table has `capacity` (and a quarter more, up
///   to 65,536 keys) rounded up to a power of two slots (at least 64, at most
///   [`MAX_CAPACITY`](crate::MAX_CAPACITY)), allocated in pages
///   as keys reach them and never more, and holds that many keys with permits in flight at once,
///   whatever their hashes (see [`KeyedLimiter`'s memory and cost](crate::KeyedLimiter#memory-and-cost)).
/// * **A key with nothing in flight costs nothing.** Its slot is given to the next new key that
///   needs room; a key is never reclaimed while a permit of it is held. Acquires and releases of
///   keys the table holds never allocate; a key given a slot (new, or back after its slot went to
///   another key) takes its home shard's lock and allocates its group's new array of keys.
/// * **A full table refuses.** A new key that finds every slot it may use holding permits gets
///   `None`, as a key at its limit does; no held permit is ever dropped to make room.
/// * **Memory.** About 33 bytes a slot for `u64` keys once its page is allocated, plus what the
///   keys own; a permit keeps a clone of its key.
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
pub struct KeyedConcurrencyLimiter<K> {
    counts: Counters<K>,
    /// Each key's limit, `0..=MAX_PERMITS`. Relaxed everywhere: a lone setting, compared with
    /// each key's count by that count's own CAS, which is what orders permits.
    max: AtomicU32,
}

impl<K> std::fmt::Debug for KeyedConcurrencyLimiter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedConcurrencyLimiter")
            .field("max", &self.max.load(Ordering::Relaxed))
            .field("capacity", &self.counts.capacity())
            .finish_non_exhaustive()
    }
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
    /// Where the key's count is (`None` when `n` is 0).
    pinned: Option<Pinned>,
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

    /// `max` in flight per key, holding at least `capacity` keys with permits in flight at once,
    /// whatever their hashes: `capacity` (and a quarter more, up to 65,536 keys) rounded up to a
    /// power of two (at least 64, at most [`MAX_CAPACITY`](crate::MAX_CAPACITY)) slots, allocated
    /// as keys reach them, as [`KeyedLimiter`'s](crate::KeyedLimiter#memory-and-cost).
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::with_capacity(1, 50)?;
    /// assert_eq!(k.capacity(), 64); // 50 and a quarter more, rounded up
    /// let held: Vec<_> = (0..64).filter_map(|key| k.try_acquire(&key)).collect();
    /// assert_eq!(held.len(), 64);
    /// assert!(k.try_acquire(&64).is_none()); // full: every slot holds a permit
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn with_capacity(max: u32, capacity: usize) -> Result<Self, ConcurrencyError> {
        let max = checked(u64::from(max))?;
        Ok(KeyedConcurrencyLimiter {
            counts: Counters::with_capacity(capacity),
            max: AtomicU32::new(max),
        })
    }

    /// A table of exactly `shards * slots_per_shard` slots (both powers of two, at least 4 slots
    /// per shard): for tests and models that need a tiny table.
    #[doc(hidden)]
    pub fn with_layout(
        max: u32,
        shards: usize,
        slots_per_shard: usize,
    ) -> Result<Self, ConcurrencyError> {
        let max = checked(u64::from(max))?;
        Ok(KeyedConcurrencyLimiter {
            counts: Counters::with_layout(shards, slots_per_shard),
            max: AtomicU32::new(max),
        })
    }

    /// The most keys with permits in flight at once: the table's slots.
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::with_capacity(1, 1000)?;
    /// assert_eq!(k.capacity(), 2048);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.counts.capacity()
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
        let pinned = if n == 0 {
            None
        } else {
            Some(self.counts.add(key, n, self.max.load(Ordering::Relaxed))?)
        };
        Some(KeyedPermit { limiter: self, key: key.clone(), n, pinned })
    }

    /// Gives back `n` permits held at `pinned`.
    #[inline]
    fn release(&self, pinned: Option<Pinned>, n: u32) {
        if let Some(pinned) = pinned.filter(|_| n > 0) {
            self.counts.sub(pinned, n);
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
        self.counts.count(key)
    }

    /// Keys with permits in flight now (a walk of the table: each slot read in turn).
    ///
    /// ```
    /// let k = leakgate::KeyedConcurrencyLimiter::<u64>::new(3)?;
    /// let _p = k.try_acquire(&1).unwrap();
    /// assert_eq!(k.len(), 1);
    /// # Ok::<(), leakgate::ConcurrencyError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.counts.nonzero()
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
    pinned: Option<Pinned>,
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
        let (n, pinned) = (permit.n, permit.pinned);
        let owned = OwnedKeyedPermit { limiter: self.clone(), key: key.clone(), n, pinned };
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
        self.limiter.release(self.pinned, self.n);
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
        self.limiter.release(self.pinned, self.n);
    }
}
