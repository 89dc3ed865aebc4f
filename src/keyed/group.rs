//! A group of [`SLOTS`] buckets in one cache line: their tags, state words and last-use times,
//! beside a pointer to their keys.
//!
//! # Implementation details
//!
//! A check reads the group's line (tags, and then the slot's `TAT` from the same line) and the
//! keys the line points to: two cache misses at most, however large the table.
//!
//! Keys never change in place: giving a slot a new key publishes a new array of keys (see
//! `PageCell`). A slot's `TAT` word, though, is reused by each key the slot holds in turn. Two
//! rules keep one key's admission out of another key's bucket:
//!
//! * **The version.** Every new key bumps [`Group::version`] after publishing its keys and before
//!   its `TAT` becomes usable. A check reads the version before the keys and again after reading
//!   the `TAT`; if it moved, the `TAT` may be another key's and the check starts over.
//! * **No `TAT` value is ever seen twice in a slot.** Within a key's life its `TAT` only grows (an
//!   admission sets `max(TAT, now) + cost`). A slot changes key only when its `TAT` is *before*
//!   now; the word is sealed (CAS to [`SEALED`]) and then reopened at the old value plus one unit,
//!   still before now, so the new bucket is exactly an empty one. So every value the slot holds
//!   after a change of key is above every value it held before, and a check that read its own
//!   key's `TAT` and then lost the race to a reclamation can never succeed in its CAS: no ABA.

use super::page::{Keys, PageCell};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use std::borrow::Borrow;

/// Slots per group: four fit with their state in one 64-byte line.
pub(crate) const SLOTS: usize = 4;

/// The `TAT` of a slot changing key: no admission may land in it.
pub(crate) const SEALED: u64 = u64::MAX;

/// Four buckets and their keys. 64 bytes, aligned to a cache line, so checks of keys in
/// different groups never share a line.
#[repr(align(64))]
pub(crate) struct Group<K> {
    /// The slots' keys.
    keys: PageCell<K>,
    /// Bumped for every slot that gets a new key (see the module notes).
    version: AtomicU32,
    /// Byte `i`: 8 bits of slot `i`'s key's hash, never 0, or 0 while slot `i` has never held a
    /// key. Slots are used in order and never emptied. Tags only filter: a match is confirmed by
    /// comparing the real key.
    tags: AtomicU32,
    /// Slot `i`'s `TAT`, in the rate's units, or [`SEALED`].
    tats: [AtomicU64; SLOTS],
    /// The clock in whole milliseconds (wrapping) at slot `i`'s last admission; for snapshots.
    used: [AtomicU32; SLOTS],
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Group<u64>>() == 64);

/// A slot whose key matched, with the group version read before its keys were.
pub(crate) struct Found<'g, K> {
    pub(crate) group: &'g Group<K>,
    pub(crate) slot: usize,
    pub(crate) version: u32,
}

/// What a reader of a slot's `TAT` learns.
pub(crate) enum Tat {
    /// The slot's current `TAT`, and still the found key's.
    Current(u64),
    /// Another key was given a slot of the group meanwhile: look again.
    Moved,
    /// The slot is being given to another key, its key being idle: look again under the lock,
    /// which waits for that to finish.
    Sealed,
}

/// The tag of a hash: its top 8 bits, never 0.
#[cfg(not(loom))]
#[inline]
pub(crate) fn tag_of(hash: u64) -> u8 {
    (hash >> 56) as u8 | 1
}

/// Under loom every key has the same tag, so every lookup compares real keys, stale tags
/// included: the case where tags filter nothing is the one that can go wrong.
#[cfg(loom)]
pub(crate) fn tag_of(_hash: u64) -> u8 {
    1
}

/// A bit set at the high bit of every byte of `word` that may be 0. The lowest set bit is exact;
/// a higher one may be a false positive (a byte of 1 above a zero byte).
#[inline]
fn zero_bytes(word: u32) -> u32 {
    word.wrapping_sub(0x0101_0101) & !word & 0x8080_8080
}

impl<K> Group<K> {
    pub(crate) fn new() -> Self {
        Group {
            keys: PageCell::empty(),
            version: AtomicU32::new(0),
            tags: AtomicU32::new(0),
            tats: std::array::from_fn(|_| AtomicU64::new(0)),
            used: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// The slot holding `key`, if this group has it, and whether the group has a slot never used
    /// (then no key is ever placed past it: the search may stop). Lock-free.
    #[inline(always)]
    pub(crate) fn find<Q>(&self, key: &Q, tag: u8) -> (Option<Found<'_, K>>, bool)
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        // Acquire: pairs with the version bump's Release, so a reader that sees a bump also sees
        // the keys and tags published before it.
        let version = self.version.load(Ordering::Acquire);
        // Acquire: pairs with the Release store of new tags, so a tag seen implies its keys are.
        let tags = self.tags.load(Ordering::Acquire);
        let has_unused = zero_bytes(tags) != 0;
        let mut candidates = zero_bytes(tags ^ (u32::from(tag) * 0x0101_0101));
        if candidates == 0 {
            return (None, has_unused);
        }
        let slot = self.keys.read(|keys| {
            let keys = keys?;
            while candidates != 0 {
                let slot = candidates.trailing_zeros() as usize / 8;
                // The SWAR test may flag a byte that is not `tag` (above a matching one); the
                // byte test drops it, so a copy in an unused slot is never compared.
                if (tags >> (8 * slot)) as u8 == tag && keys[slot].borrow() == key {
                    return Some(slot);
                }
                candidates &= candidates - 1;
            }
            None
        });
        (slot.map(|slot| Found { group: self, slot, version }), has_unused)
    }

    /// Slot `slot`'s `TAT` as one CAS loop's step sees it: the value the last CAS failed on, or a
    /// fresh load, if the slot still holds the key found at `version`.
    #[inline]
    pub(crate) fn tat(&self, slot: usize, version: u32, tat: Option<u64>) -> Tat {
        // Acquire: a value written when the slot got a new key comes after that key's version
        // bump, so the version read below sees the bump.
        let tat = tat.unwrap_or_else(|| self.tats[slot].load(Ordering::Acquire));
        // Relaxed: ordered after the Acquire load (or Acquire CAS failure) that produced `tat`.
        if tat == SEALED {
            Tat::Sealed
        } else if self.version.load(Ordering::Relaxed) != version {
            Tat::Moved
        } else {
            Tat::Current(tat)
        }
    }

    /// CAS of slot `slot`'s `TAT` from `current` (the found key's, see [`Group::tat`]) to `new`.
    /// On failure, the value found.
    #[inline]
    pub(crate) fn cas_tat(&self, slot: usize, current: u64, new: u64) -> Result<(), u64> {
        // Relaxed on success: the word is the bucket's whole state, nothing else is published
        // with it. Acquire on failure: the value found is read as `Group::tat` reads it.
        self.tats[slot]
            .compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Acquire)
            .map(drop)
    }

    /// Raises slot `slot`'s `TAT` to at least `now` (below [`SEALED`]): a sealed slot stays sealed,
    /// and raising an idle `TAT` keeps it idle and growing, whichever key holds it.
    #[inline]
    pub(crate) fn raise_tat(&self, slot: usize, now: u64) {
        // Relaxed: as for a successful CAS; the value is the bucket's whole state.
        self.tats[slot].fetch_max(now.min(SEALED - 1), Ordering::Relaxed);
    }

    /// Lowers slot `slot`'s `TAT` from `from` to `to` if it still holds `from` (an undo); on
    /// failure, the value found.
    #[inline]
    pub(crate) fn lower_tat(&self, slot: usize, from: u64, to: u64) -> Result<(), u64> {
        // Relaxed: as for a successful CAS. Strong: a spurious failure would give up an exact undo.
        self.tats[slot].compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed).map(drop)
    }

    /// Records an admission at `now_ms` for snapshots.
    #[inline]
    pub(crate) fn mark_used(&self, slot: usize, now_ms: u32) {
        // Relaxed: a statistic, read on its own.
        self.used[slot].store(now_ms, Ordering::Relaxed);
    }
}

/// Writes: each runs under the lock of the group's shard, so one runs at a time per group.
impl<K: Clone> Group<K> {
    /// The tags, exact under the lock.
    pub(crate) fn tags_locked(&self) -> [u8; SLOTS] {
        // Relaxed: only lock holders store tags, and the lock orders them.
        self.tags.load(Ordering::Relaxed).to_le_bytes()
    }

    /// Whether slot `slot`'s bucket is empty at `now` and may change key: its `TAT` is before
    /// now (strictly, so that the new key's `TAT`, one unit above, is still not after now).
    pub(crate) fn is_idle(&self, slot: usize, now: u64) -> Option<u64> {
        // Relaxed: a candidate only; the seal CAS decides.
        let tat = self.tats[slot].load(Ordering::Relaxed);
        (tat < now && tat + 1 < SEALED).then_some(tat)
    }

    /// Gives unused slot `slot` (the first unused one) to `key`, at `now_ms`.
    pub(crate) fn fill(&self, slot: usize, key: K, tag: u8, now_ms: u32) -> Found<'_, K> {
        // Its `TAT` is still its initial 0, never seen by a check: no seal, no reopening needed.
        self.give(slot, key, tag, now_ms, None)
    }

    /// Moves slot `slot` from its idle key to `key` if its `TAT` is still `idle_tat`; `None` if a
    /// check admitted something there first (the slot is busy again).
    pub(crate) fn reclaim(
        &self,
        slot: usize,
        idle_tat: u64,
        key: K,
        tag: u8,
        now_ms: u32,
    ) -> Option<Found<'_, K>> {
        // Relaxed: the seal and a check's CAS are read-modify-writes of one word, so exactly one
        // wins. The keys published next are ordered after the seal by program order and the
        // publication's Release, so a check that reads the new keys then sees `SEALED` or later.
        let sealed = self.tats[slot]
            .compare_exchange(idle_tat, SEALED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        sealed.then(|| self.give(slot, key, tag, now_ms, Some(idle_tat + 1)))
    }

    /// Publishes `key` in slot `slot`; the slot as a check that found it now would see it.
    fn give(
        &self,
        slot: usize,
        key: K,
        tag: u8,
        now_ms: u32,
        reopen_at: Option<u64>,
    ) -> Found<'_, K> {
        let mut keys: Keys<K> = self
            .keys
            .read(|old| old.cloned())
            .unwrap_or_else(|| std::array::from_fn(|_| key.clone()));
        keys[slot] = key;
        self.used[slot].store(now_ms, Ordering::Relaxed);
        self.keys.publish(keys);
        let mut tags = self.tags_locked();
        tags[slot] = tag;
        // Release: a reader that sees the tag sees the keys published above.
        self.tags.store(u32::from_le_bytes(tags), Ordering::Release);
        // Release: a reader that sees the new version sees the keys and tags.
        let version = self.version.fetch_add(1, Ordering::Release).wrapping_add(1);
        if let Some(tat) = reopen_at {
            // Release: a check that reads this value sees the version bump above and starts
            // over, since it may have found the slot's previous key.
            self.tats[slot].store(tat, Ordering::Release);
        }
        Found { group: self, slot, version }
    }

    /// Every used slot's key, `TAT` and last use, read between two equal versions (so no slot
    /// changed key meanwhile); `None` if a slot changed key during the read.
    pub(crate) fn read_all(&self) -> Option<Vec<(K, u64, u32)>> {
        // Acquire/Release as in `find` and `tat`.
        let version = self.version.load(Ordering::Acquire);
        let tags = self.tags.load(Ordering::Acquire).to_le_bytes();
        let slots = self.keys.read(|keys| {
            let keys = keys?;
            let slots = (0..SLOTS).filter(|&slot| tags[slot] != 0);
            Some(
                slots
                    .map(|slot| {
                        let tat = self.tats[slot].load(Ordering::Acquire);
                        (keys[slot].clone(), tat, self.used[slot].load(Ordering::Relaxed))
                    })
                    .collect::<Vec<_>>(),
            )
        });
        // Relaxed: ordered after the Acquire loads above.
        (self.version.load(Ordering::Relaxed) == version).then(|| slots.unwrap_or_default())
    }
}
