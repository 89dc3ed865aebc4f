//! [`Counters`]: the keyed table holding a count per key instead of a rate bucket, for
//! [`KeyedConcurrencyLimiter`](crate::KeyedConcurrencyLimiter).
//!
//! # Implementation details
//!
//! A slot's word is a generation (high 32 bits) and a count (low 32 bits, at most
//! [`MAX_PERMITS`](crate::MAX_PERMITS)), and a slot is free for another key at count 0 (see
//! [`Reuse::Counted`]): a key with nothing in flight costs nothing beyond its slot, which the
//! next new key that needs room takes. Everything else is the rate table's: where keys live, the
//! lock-free lookup, the inserts under shard locks, the table's bound and what a full table does
//! (a new key is refused).
//!
//! * **Adding** (an acquire) finds the key, reads its word as a check reads a `TAT` (through
//!   [`Found::tat`], which tells a word that is no longer the key's), and CASes the count up if
//!   it stays within the limit. A CAS that succeeds from a value of the key's generation lands in
//!   the key's own counter: the slot's next key opens at the next generation, above every value
//!   the slot held, so a thread preempted between its read and its CAS fails.
//! * **Subtracting** (a release) needs no lookup: the units it takes off keep the count above 0
//!   until it lands, so the slot cannot change key before then, and the release goes straight to
//!   the slot the add found ([`Pinned`]) with a `fetch_sub`.

use super::capacity;
use super::group::{Group, Side, SEALED, SLOTS};
use super::request::{Arrival, EpochOf, FirstState};
use super::reuse::COUNT_MASK;
use super::slot::{Found, Tat};
use super::table::Table;
use crate::sync::Ordering;
use std::borrow::Borrow;
use std::hash::Hash;

/// A table of counts per key (see the module notes).
pub(crate) struct Counters<K> {
    table: Table<K>,
}

/// Where a key's counter is, while units added there are held: what a release subtracts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pinned {
    group: usize,
    slot: usize,
    version: u32,
}

/// The epoch of a table of counters: it has no rate, so none ever changes.
struct NoEpoch;

impl<K> EpochOf<K> for NoEpoch {
    fn current(&self) -> bool {
        true
    }

    fn convert(&self, _: &Group<K>, _: &Side<'_, K>) {}
}

impl<K> Counters<K> {
    /// A table that holds at least `capacity` keys with a count above 0 at once, laid out as
    /// the rate table's `with_capacity` (at most [`MAX_CAPACITY`](crate::MAX_CAPACITY)).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let (shards, slots_per_shard) = capacity::layout(capacity);
        Self::with_layout(shards, slots_per_shard)
    }

    /// A table of exactly `shards * slots_per_shard` slots (both powers of two, at least 4 slots
    /// per shard).
    pub(crate) fn with_layout(shards: usize, slots_per_shard: usize) -> Self {
        Counters { table: Table::new(shards, slots_per_shard) }
    }

    /// Slots in all: the most keys with a count above 0 at once.
    pub(crate) fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Keys whose count is above 0 now (a count of each slot in turn, not one instant's).
    pub(crate) fn nonzero(&self) -> usize {
        let mut keys = 0;
        self.table.for_each_group(|_, group, side| {
            // Relaxed: a statistic; each word read on its own.
            let tags = side.tags.load(Ordering::Relaxed).to_le_bytes();
            keys += (0..SLOTS)
                .filter(|&slot| tags[slot] != 0)
                .map(|slot| group.tats[slot].load(Ordering::Relaxed))
                .filter(|&word| word != SEALED && word & COUNT_MASK != 0)
                .count();
        });
        keys
    }

    /// Takes `n` (at least 1) off the counter at `pinned`, which an [`Counters::add`] of at
    /// least `n` not yet taken off found.
    #[inline]
    pub(crate) fn sub(&self, pinned: Pinned, n: u32) {
        // The page is allocated: the add found the key there.
        if let Some(found) = self.table.found_at(pinned.group, pinned.slot, pinned.version) {
            // Release: what the holder did under its units comes before an add that counts on
            // their return (its Acquire CAS reads this value or a later one of the word).
            let before = found.word().fetch_sub(u64::from(n), Ordering::Release);
            debug_assert!(before & COUNT_MASK >= u64::from(n) && before != SEALED);
        }
    }
}

impl<K: Hash + Eq + Clone> Counters<K> {
    /// Adds `n` (at least 1) to `key`'s count if it stays at most `max`, giving the key a slot if
    /// it has none; where the counter is, or `None` if the count would pass `max` or the key is
    /// new and the table has no slot at count 0 for it.
    #[inline]
    pub(crate) fn add<Q>(&self, key: &Q, n: u32, max: u32) -> Option<Pinned>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        if n > max {
            return None;
        }
        let hash = self.table.hash(key);
        self.table.touch(hash);
        if let Some(found) = self.table.find(key, hash) {
            match add_to(&found, n, max) {
                Ok(()) => return Some(pinned(&found)),
                Err(Tat::Current(_)) => return None,
                Err(_) => {}
            }
        }
        self.add_slow(key, hash, n, max)
    }

    /// The rest of [`Counters::add`]: a loop over finding the key (inserting it when it has no
    /// slot, or its slot is being given to another key) and adding.
    #[cold]
    #[inline(never)]
    fn add_slow<Q>(&self, key: &Q, hash: u64, n: u32, max: u32) -> Option<Pinned>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let mut insert = false;
        loop {
            let found = if insert {
                self.insert(key, hash)?
            } else if let Some(found) = self.table.find(key, hash) {
                found
            } else {
                insert = true;
                continue;
            };
            match add_to(&found, n, max) {
                Ok(()) => return Some(pinned(&found)),
                Err(Tat::Current(_)) => return None,
                Err(Tat::Sealed) => insert = true,
                // Another key took the slot (the key's count was 0): look again.
                Err(Tat::Moved) => insert = false,
            }
        }
    }

    /// `key`'s slot, giving it one if it has none: `None` if there is no room.
    #[cold]
    fn insert<Q>(&self, key: &Q, hash: u64) -> Option<Found<'_, K>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let start = || FirstState::EMPTY;
        let epoch = &NoEpoch;
        let new = Arrival { key, hash, now_ns: 0, now: 0, rate: None, start: &start, epoch };
        // `NoEpoch` is always current: never `Err`.
        self.table.find_or_insert(&new).ok().flatten()
    }

    /// `key`'s count now (0 if the table does not hold it).
    pub(crate) fn count<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.table.hash(key);
        loop {
            let Some(found) = self.table.find(key, hash) else { return 0 };
            match found.tat(None) {
                Tat::Current(word) => return (word & COUNT_MASK) as u32,
                // Being given to another key: its count was 0.
                Tat::Sealed => return 0,
                Tat::Moved => crate::sync::spin_loop(),
            }
        }
    }
}

/// Where `found` is, for the release.
#[inline(always)]
fn pinned<K>(found: &Found<'_, K>) -> Pinned {
    let (group, slot, version) = found.locator();
    Pinned { group, slot, version }
}

/// Adds `n` to the count in `found`'s slot if it stays at most `max`: `Err(Tat::Current(word))`
/// if it would not, `Err` of why the slot is no longer the key's otherwise.
#[inline(always)]
fn add_to<K>(found: &Found<'_, K>, n: u32, max: u32) -> Result<(), Tat> {
    let mut seen = None;
    loop {
        let word = match found.tat(seen) {
            Tat::Current(word) => word,
            gone => return Err(gone),
        };
        // At most MAX_PERMITS + u32::MAX: no overflow, and the sum stays in the generation.
        if (word & COUNT_MASK) + u64::from(n) > u64::from(max) {
            return Err(Tat::Current(word));
        }
        // Acquire on success: the releases this add counts on (their Release `fetch_sub`s) come
        // before what its holder does. Acquire on failure: the value found is read as
        // `Found::tat` reads it (it checks the version after it).
        match found.word().compare_exchange_weak(
            word,
            word + u64::from(n),
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => return Ok(()),
            Err(found_word) => seen = Some(found_word),
        }
    }
}
