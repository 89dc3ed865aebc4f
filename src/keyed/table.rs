//! The bounded table behind [`KeyedLimiter`](crate::KeyedLimiter): cache-padded shards of
//! fixed-size, open-addressed slots, each holding at most one key's bucket.
//!
//! # Implementation details
//!
//! A slot is an `ArcSwapOption<Entry>`: lookups load it without a lock (arc-swap's load takes a
//! thread-local debt slot, not a shared lock), compare the real key, and CAS the entry's `TAT`.
//! Only inserting a key the table does not hold takes the shard's lock, for the insert itself; all
//! inserts into a shard are serialised by it, so one key is never inserted twice.
//!
//! A key is looked for along a window of [`PROBE`] slots from its hash, up to the first empty slot
//! (slots are never emptied again, so a key is never behind one). An insert takes the first empty
//! slot of the window, or else reclaims the first *idle* entry: one whose `TAT` is not after now, a
//! bucket indistinguishable from a new one, so reusing its slot changes no decision. Reclaiming
//! first *seals* the old entry (CAS of its idle `TAT` to [`SEALED`]): a check racing on that entry
//! either wins its CAS first (the entry is then busy and the seal fails) or sees `SEALED` and looks
//! the key up again under the lock. So no admission is ever made in a reclaimed entry, and an entry
//! belongs to one key for its whole life: one key's admission can never land in another's bucket.

use super::hasher::RandomSeed;
use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering};
use arc_swap::{ArcSwapOption, Guard};
use crossbeam_utils::CachePadded;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

/// How many slots a key may be looked for in, from its hash.
pub(crate) const PROBE: usize = 16;

/// The `TAT` of an entry being reclaimed for another key: no admission may land in it.
pub(crate) const SEALED: u64 = u64::MAX;

/// One key's bucket.
pub(crate) struct Entry<K> {
    pub(crate) key: K,
    /// The bucket's `TAT` in the rate's units (as `Limiter::tat`), or [`SEALED`].
    pub(crate) tat: AtomicU64,
    /// The clock, in the rate's units, at the last admission (for snapshots only).
    pub(crate) last_used: AtomicU64,
}

/// A loaded slot: keeps its entry alive while in use, without touching the entry's refcount.
pub(crate) type Slot<K> = Guard<Option<Arc<Entry<K>>>>;

struct Shard<K> {
    slots: Box<[ArcSwapOption<Entry<K>>]>,
    /// Beside each slot, 32 bits of its key's hash (never 0), or 0 while the slot has never held
    /// an entry. A lookup reads these contiguous tags and dereferences an entry only when its tag
    /// matches, so probing past other keys costs no cache miss per entry. Tags only filter: a
    /// match is confirmed by comparing the real key, and a tag that is stale during a reclaim can
    /// only make a lookup miss, which then looks again under the lock, where tags are exact.
    tags: Box<[AtomicU32]>,
    /// Held only while inserting (and reclaiming) in this shard; never by a lookup.
    inserting: Mutex<()>,
}

pub(crate) struct Table<K> {
    shards: Box<[CachePadded<Shard<K>>]>,
    shard_mask: u64,
    slot_mask: usize,
    hasher: RandomSeed,
}

impl<K: Hash + Eq> Table<K> {
    /// A table of `shards` shards of `slots_per_shard` slots; both powers of two.
    pub(crate) fn new(shards: usize, slots_per_shard: usize) -> Self {
        debug_assert!(shards.is_power_of_two() && slots_per_shard.is_power_of_two());
        let shard = || Shard {
            slots: (0..slots_per_shard).map(|_| ArcSwapOption::empty()).collect(),
            tags: (0..slots_per_shard).map(|_| AtomicU32::new(0)).collect(),
            inserting: Mutex::new(()),
        };
        Table {
            shards: (0..shards).map(|_| CachePadded::new(shard())).collect(),
            shard_mask: shards as u64 - 1,
            slot_mask: slots_per_shard - 1,
            hasher: RandomSeed::new(),
        }
    }

    #[inline]
    pub(crate) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard a hash belongs to (its low bits) and the slots of its probe window (the next
    /// bits), in order.
    #[inline]
    fn window(&self, hash: u64) -> (&Shard<K>, impl Iterator<Item = usize> + '_) {
        let shard = &self.shards[(hash & self.shard_mask) as usize];
        let start = (hash >> 16) as usize;
        let window = (0..PROBE.min(self.slot_mask + 1)).map(move |i| (start + i) & self.slot_mask);
        (shard, window)
    }

    /// The slot holding `key`'s entry, if the table tracks it. Lock-free.
    #[inline]
    pub(crate) fn find<Q>(&self, key: &Q, hash: u64) -> Option<Slot<K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let (shard, window) = self.window(hash);
        // Loom cannot see arc-swap's std atomics, so it would miss the happens-before edge from
        // an entry's creation to a lookup that loads it (arc-swap's SeqCst store and load give it
        // in a real run). Under loom only, lookups take the shard lock to stand in for that edge;
        // the races that matter (checks against seals, inserts against inserts) stay modeled.
        #[cfg(loom)]
        let _published = shard.inserting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let tag = tag_of(hash);
        for i in window {
            // Relaxed: a filter only (see `Shard::tags`); the slot load below is what publishes.
            match shard.tags[i].load(Ordering::Relaxed) {
                0 => return None,
                t if t != tag => continue,
                _ => {}
            }
            let slot = shard.slots[i].load();
            match slot.as_deref() {
                None => return None,
                Some(entry) if entry.key.borrow() == key => return Some(slot),
                Some(_) => {}
            }
        }
        None
    }

    /// Finds `key` or inserts it, under the shard's lock; `None` when every slot of its window
    /// holds a bucket that is not idle at `now` (the table is full there).
    pub(crate) fn find_or_insert<Q>(&self, key: &Q, hash: u64, now: u64) -> Option<Slot<K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized + ToOwned<Owned = K>,
    {
        let (shard, window) = self.window(hash);
        let _inserting = shard.inserting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut idle = Vec::<usize>::new();
        let mut empty = None;
        for i in window {
            let slot = shard.slots[i].load();
            match slot.as_deref() {
                None => {
                    empty = Some(i);
                    break;
                }
                Some(entry) if entry.key.borrow() == key => return Some(slot),
                // Relaxed: the seal below is the CAS that decides; this only picks candidates.
                Some(entry) if entry.tat.load(Ordering::Relaxed) <= now => idle.push(i),
                Some(_) => {}
            }
        }
        let fresh = || Some(Arc::new(Entry::new(key.to_owned())));
        // Relaxed tag stores: filters only; the entry is published by the slot store, and under
        // the lock (where inserts read tags) they are exact.
        let tag = tag_of(hash);
        if let Some(i) = empty {
            shard.slots[i].store(fresh());
            shard.tags[i].store(tag, Ordering::Relaxed);
            return Some(shard.slots[i].load());
        }
        for i in idle {
            let slot = shard.slots[i].load();
            let Some(entry) = slot.as_deref() else { continue };
            // Relaxed: the seal and a checker's CAS are read-modify-writes of one word, so exactly
            // one of them wins; nothing else is published through the word.
            let tat = entry.tat.load(Ordering::Relaxed);
            if tat <= now
                && entry
                    .tat
                    .compare_exchange(tat, SEALED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                shard.tags[i].store(tag, Ordering::Relaxed);
                shard.slots[i].store(fresh());
                return Some(shard.slots[i].load());
            }
        }
        None
    }

    /// Every entry held now, without locking: a snapshot for introspection.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Entry<K>)) {
        for shard in self.shards.iter() {
            // Under loom only: see `find`.
            #[cfg(loom)]
            let _published =
                shard.inserting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            for slot in shard.slots.iter() {
                if let Some(entry) = slot.load().as_deref() {
                    f(entry);
                }
            }
        }
    }
}

/// The tag of a hash: bits the shard and window do not use, never 0.
#[inline]
fn tag_of(hash: u64) -> u32 {
    ((hash >> 32) as u32) | 1
}

impl<K> Table<K> {
    /// Slots in all.
    pub(crate) fn capacity(&self) -> usize {
        self.shards.len() * (self.slot_mask + 1)
    }
}

impl<K> Entry<K> {
    fn new(key: K) -> Self {
        Entry { key, tat: AtomicU64::new(0), last_used: AtomicU64::new(0) }
    }
}
