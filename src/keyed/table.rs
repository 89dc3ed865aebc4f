//! The bounded table behind [`KeyedLimiter`](crate::KeyedLimiter): cache-padded shards of
//! fixed-size, open-addressed groups of four buckets.
//!
//! # Implementation details
//!
//! A key may live in a window of [`WINDOW`] consecutive groups of its shard, from its hash.
//! Lookups are lock-free (see [`Group`] for how a slot's state and its key stay paired). Only
//! giving a key a slot takes the shard's lock, for that insert only; all inserts into a shard are
//! serialised by it, so one key is never inserted twice.
//!
//! Slots are used in order and never emptied, so a lookup stops at the first group of the window
//! that has an unused slot: a key inserted earlier would have taken it. An insert takes that
//! unused slot, or else reclaims the first *idle* slot of the window: one whose bucket is empty
//! (`TAT` before now), indistinguishable from a new one, so reusing it changes no decision.

use super::group::{tag_of, Found, Group, SLOTS};
use super::hasher::RandomSeed;
use crate::sync::Mutex;
use crossbeam_utils::CachePadded;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// How many groups (of [`SLOTS`] slots) a key may be looked for in, from its hash.
pub(crate) const WINDOW: usize = 16;

struct Shard<K> {
    groups: Box<[Group<K>]>,
    /// Held only while giving a slot to a key in this shard; never by a lookup.
    inserting: Mutex<()>,
}

pub(crate) struct Table<K> {
    shards: Box<[CachePadded<Shard<K>>]>,
    shard_mask: u64,
    group_mask: usize,
    hasher: RandomSeed,
}

/// Where an insert may put a key: the first unused slot of its window, else idle ones.
enum Room {
    Unused(usize, usize),
    Idle(Vec<(usize, usize, u64)>),
}

impl<K: Hash + Eq + Clone> Table<K> {
    /// A table of `shards` shards of `slots_per_shard` slots; both powers of two, and
    /// `slots_per_shard` at least [`SLOTS`].
    pub(crate) fn new(shards: usize, slots_per_shard: usize) -> Self {
        assert!(shards.is_power_of_two() && slots_per_shard.is_power_of_two());
        assert!(slots_per_shard >= SLOTS, "a shard holds at least one group");
        let groups = slots_per_shard / SLOTS;
        let shard = || Shard {
            groups: (0..groups).map(|_| Group::new()).collect(),
            inserting: Mutex::new(()),
        };
        Table {
            shards: (0..shards).map(|_| CachePadded::new(shard())).collect(),
            shard_mask: shards as u64 - 1,
            group_mask: groups - 1,
            hasher: RandomSeed::new(),
        }
    }

    #[inline]
    pub(crate) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard a hash belongs to (its low bits) and the groups of its window (the next bits),
    /// in order.
    #[inline]
    fn window(&self, hash: u64) -> (&Shard<K>, impl Iterator<Item = usize> + '_) {
        let shard = &self.shards[(hash & self.shard_mask) as usize];
        let start = (hash >> 16) as usize;
        let len = WINDOW.min(self.group_mask + 1);
        (shard, (0..len).map(move |i| (start + i) & self.group_mask))
    }

    /// The slot holding `key`, if the table tracks it. Lock-free.
    ///
    /// Always inlined into the check: at a million keys a check waits on two cache misses (the
    /// group's line, then its keys), and only a short straight path lets the processor start the
    /// next check's misses meanwhile. Measured with 1M keys, one thread: 320 ns called, 182 ns
    /// inlined.
    #[inline(always)]
    pub(crate) fn find<Q>(&self, key: &Q, hash: u64) -> Option<Found<'_, K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let (shard, window) = self.window(hash);
        let tag = tag_of(hash);
        for g in window {
            match shard.groups[g].find(key, tag) {
                (Some(found), _) => return Some(found),
                (None, true) => return None,
                (None, false) => {}
            }
        }
        None
    }

    /// Finds `key` or gives it a slot, under the shard's lock; `None` when every slot of its
    /// window holds a bucket that is not empty at `now` (the table is full there). Kept out of
    /// line: inlined, it doubles the size of the lookup path around it, which runs slower for it
    /// (see `find`).
    #[cold]
    #[inline(never)]
    pub(crate) fn find_or_insert<Q>(
        &self,
        key: &Q,
        hash: u64,
        now: u64,
        now_ms: u32,
    ) -> Option<Found<'_, K>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let (shard, window) = self.window(hash);
        let _inserting = shard.inserting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Under the lock no slot changes key, so this search is exact.
        if let Some(found) = self.find(key, hash) {
            return Some(found);
        }
        let tag = tag_of(hash);
        let room = Self::room(shard, window, now);
        match room {
            Room::Unused(g, slot) => Some(shard.groups[g].fill(slot, key.to_owned(), tag, now_ms)),
            Room::Idle(idle) => idle.into_iter().find_map(|(g, slot, idle_tat)| {
                shard.groups[g].reclaim(slot, idle_tat, key.to_owned(), tag, now_ms)
            }),
        }
    }

    /// Where a new key may go in `window`: the first unused slot, else the idle ones in order.
    fn room(shard: &Shard<K>, window: impl Iterator<Item = usize>, now: u64) -> Room {
        let mut idle = Vec::new();
        for g in window {
            let group = &shard.groups[g];
            for (slot, &tag) in group.tags_locked().iter().enumerate() {
                if tag == 0 {
                    return Room::Unused(g, slot);
                }
                if let Some(idle_tat) = group.is_idle(slot, now) {
                    idle.push((g, slot, idle_tat));
                }
            }
        }
        Room::Idle(idle)
    }

    /// Every tracked key with its `TAT` and last use, without blocking checks: a group that
    /// changes key while read is read again (under its shard's lock after a few tries, which
    /// holds up inserts only).
    pub(crate) fn for_each(&self, mut f: impl FnMut(K, u64, u32)) {
        for shard in self.shards.iter() {
            for group in shard.groups.iter() {
                let slots = (0..3).find_map(|_| group.read_all()).unwrap_or_else(|| {
                    let _inserting =
                        shard.inserting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    // Under the lock no slot changes key, so this read always succeeds.
                    group.read_all().unwrap_or_default()
                });
                for (key, tat, used) in slots {
                    f(key, tat, used);
                }
            }
        }
    }
}

impl<K> Table<K> {
    /// Slots in all.
    pub(crate) fn capacity(&self) -> usize {
        self.shards.len() * (self.group_mask + 1) * SLOTS
    }
}
