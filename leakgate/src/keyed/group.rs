//! A group of [`SLOTS`] buckets: one cache line with their state words, last-use times and
//! lowering high-water, the line after it with their keys; and its tags, one word in its page's
//! dense array of tags ([`Side`]).
//!
//! # Implementation details
//!
//! A check reads the group's tags word (16 groups' tags share a line, so a search that walks
//! several groups of a nearly full table walks one line, and a table of a million slots has a
//! megabyte of tags, which caches hold), then the group's line (the slot's `TAT`) and its keys
//! on the next line: the two lines of one 128-byte pair, which a lookup at a million keys
//! fetches as one cache miss. (With the keys behind a pointer in the line, as before, a check
//! waited on a second miss after the first: 1M `u64` keys, one thread, 2-core Xeon, `leakgate
//! bench`: 1.4x governor's time per check, where the pair costs about 1.0x. With the tags in the
//! line, a key that its window's first groups had no room for cost a pair per group passed.)
//! How keys change while lookups read them without a lock is in [`super::key_blocks`].
//!
//! A slot's `TAT` word is reused by each key the slot holds in turn. Two rules keep one key's
//! admission out of another key's bucket:
//!
//! * **The version.** Every new key bumps [`Group::version`] after publishing its keys and before
//!   its `TAT` becomes usable. A check reads the version before the keys and again after reading
//!   the `TAT`; if it moved, the `TAT` may be another key's and the check starts over.
//! * **A slot never holds a value twice across a change of key.** A check that read its key's
//!   `TAT` and was then preempted may still CAS from that value after the slot changed key; the
//!   CAS must fail. So the first value of a slot's new key is above every value the slot held
//!   before, and every later value of the new key stays at or above its first.
//!
//! The second rule, and how a lowering keeps it, are in [`super::reuse`].

use super::key_blocks::{KeyBlock, KeyBlocks, SpareBlock};
use crate::sync::{self, AtomicU32, AtomicU64, Ordering};
use std::borrow::Borrow;

/// Slots per group: four fit with their state in one 64-byte line.
pub(crate) const SLOTS: usize = 4;

/// The `TAT` of a slot changing key: no admission may land in it. No bucket ever holds this
/// value: an admission that would reach it is denied instead.
pub(crate) const SEALED: u64 = u64::MAX;

/// A group's keys: slot `i`'s key at `i`. Slots not yet used hold a copy of a used slot's key,
/// which is never compared (their tags are 0); slots are filled in order, so the first key is the
/// one copied.
pub(crate) type Keys<K> = [K; SLOTS];

/// Four buckets, on one line, and their keys, on the next: one 128-byte pair (for keys of up to
/// 8 bytes; larger keys take more lines after the first).
#[repr(C, align(128))]
pub(crate) struct Group<K> {
    /// Bumped (wrapping) twice for every slot that gets a new key, odd while the keys change
    /// (see the module notes and [`super::key_blocks`]).
    pub(super) version: AtomicU32,
    /// The epoch (its low 32 bits) of the limiter's rate the slots' states are counted in: the
    /// rate in force, or the one before while a change of quota converts the table
    /// (`requota.rs`). Written under the shard lock.
    pub(super) epoch: AtomicU32,
    /// Slot `i`'s `TAT`, in the rate's units, or [`SEALED`].
    pub(super) tats: [AtomicU64; SLOTS],
    /// The clock in whole milliseconds (wrapping) at slot `i`'s last admission; for snapshots.
    pub(super) used: [AtomicU32; SLOTS],
    /// The group's lowering high-water: the largest `TAT` a lowering of any of its slots ever
    /// moved a word down from (rate units; 0 if none). Only grows; it counts for the slots marked
    /// in [`KeyLine::lowered`] (see [`super::reuse`]).
    pub(super) lowered: AtomicU64,
    /// The keys, in the main block (the spare one is the page's), and what cold paths need.
    pub(super) keys: Line<KeyLine<K>>,
}

/// A group's second line: its keys, then what only cold paths read.
pub(super) struct KeyLine<K> {
    pub(super) block: KeyBlock<Keys<K>>,
    /// For keys whose window starts at this group: 1 + the furthest probe position (in groups
    /// from the window's start) at which one was ever given a slot past its window, or 0 if none.
    /// Only grows; written under the lock of this group's shard.
    reach: AtomicU32,
    /// Bit `i` set: slot `i`'s key was lowered since it got the slot, so the group's lowering
    /// high-water counts for it. Set by lowerings (lock-free), cleared only when the slot changes
    /// key, under the shard lock.
    pub(super) lowered: AtomicU32,
}

/// A value that starts a cache line.
#[repr(align(64))]
pub(super) struct Line<T>(pub(super) T);

const _: () = assert!(sync::LOOM || std::mem::size_of::<Group<u64>>() == 128);

/// What a group shares with its page: its tags word, in the page's dense array of tags, and the
/// page's spare block of keys; and its index in the page. A view, made when needed.
pub(crate) struct Side<'p, K> {
    /// Byte `i`: 8 bits of slot `i`'s key's hash, never 0, or 0 while slot `i` has never held a
    /// key. Slots are used in order and never emptied. Tags only filter: a match is confirmed by
    /// comparing the real key.
    pub(crate) tags: &'p AtomicU32,
    pub(crate) spare: &'p SpareBlock<Keys<K>>,
    pub(crate) index: usize,
}

impl<K> Clone for Side<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Side<'_, K> {}

/// What a slot gets when it is given a key: the group's new keys (from [`Group::keys_with`]),
/// the key's tag, and the time, for snapshots.
pub(crate) struct NewKey<K> {
    pub(crate) keys: Keys<K>,
    pub(crate) tag: u8,
    pub(crate) now_ms: u32,
}

/// The tag of a hash: its top 8 bits, never 0.
#[inline]
pub(crate) fn tag_of(hash: u64) -> u8 {
    sync::model_tag((hash >> 56) as u8 | 1)
}

/// The slot of `keys` holding `key` among the slots whose byte of `tags` is `tag`.
#[inline(always)]
fn matching<K: Borrow<Q>, Q: Eq + ?Sized>(
    keys: &Keys<K>,
    (tags, tag): (u32, u8),
    key: &Q,
) -> Option<usize> {
    let mut candidates = zero_bytes(tags ^ (u32::from(tag) * 0x0101_0101));
    while candidates != 0 {
        let slot = candidates.trailing_zeros() as usize / 8;
        // The SWAR test may flag a byte that is not `tag` (above a matching one); the byte test
        // drops it, so a copy in an unused slot is never compared.
        if (tags >> (8 * slot)) as u8 == tag && keys[slot].borrow() == key {
            return Some(slot);
        }
        candidates &= candidates - 1;
    }
    None
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
            version: AtomicU32::new(0),
            epoch: AtomicU32::new(0),
            tats: std::array::from_fn(|_| AtomicU64::new(0)),
            used: std::array::from_fn(|_| AtomicU32::new(0)),
            lowered: AtomicU64::new(0),
            keys: Line(KeyLine {
                block: KeyBlock::new(),
                reach: AtomicU32::new(0),
                lowered: AtomicU32::new(0),
            }),
        }
    }

    /// Asks for the group's lines (its own, and its keys on the next) before they are needed: one
    /// plain load whose value is dropped. Call it as early as the group is known, before reading
    /// the clock, which on some machines holds back loads issued after it.
    #[inline(always)]
    pub(crate) fn touch(&self) {
        // Relaxed: the value is not used; the load only brings the lines in.
        std::hint::black_box(self.version.load(Ordering::Relaxed));
    }

    /// The group's keys, as the protocol of [`super::key_blocks`] sees them.
    #[inline(always)]
    fn key_blocks<'g>(&'g self, side: &Side<'g, K>) -> KeyBlocks<'g, Keys<K>> {
        KeyBlocks {
            version: &self.version,
            tags: side.tags,
            main: &self.keys.0.block,
            spare: side.spare,
            index: side.index,
        }
    }

    /// The slot holding `key` with the group version read before the keys, if this group has
    /// it, and whether the group has a slot never used (then no key is ever placed past it: the
    /// search may stop). Lock-free.
    #[inline(always)]
    pub(crate) fn find<Q>(
        &self,
        side: &Side<'_, K>,
        key: &Q,
        tag: u8,
    ) -> (Option<(usize, u32)>, bool)
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        loop {
            // Acquire: pairs with the Release store of new tags, so a tag seen implies the keys
            // published with it are, in either block (see `key_blocks.rs`).
            let tags = side.tags.load(Ordering::Acquire);
            let has_unused = zero_bytes(tags) != 0;
            let candidates = zero_bytes(tags ^ (u32::from(tag) * 0x0101_0101));
            if candidates == 0 {
                return (None, has_unused);
            }
            // Acquire: pairs with the version bumps' Release, so the block this version names is
            // seen as written before it. Read after the tags: a version newer than the tags only
            // shows keys at least as new (see `key_blocks.rs`).
            let version = self.version.load(Ordering::Acquire);
            let slot = if version & 1 == 0 {
                // The main block, compared in place (see `KeyBlock::try_lock`).
                let keys = self.keys.0.block.try_lock();
                keys.map(|keys| keys.as_ref().and_then(|keys| matching(keys, (tags, tag), key)))
            } else {
                self.key_blocks(side).read_spare(move |keys| matching(keys?, (tags, tag), key))
            };
            // `Err`: keys are changing since `version` was read: look again.
            let Ok(slot) = slot else {
                sync::spin_loop();
                continue;
            };
            return (slot.map(|slot| (slot, version)), has_unused);
        }
    }

    /// The tags, exact under the lock of the group's shard.
    pub(crate) fn tags_locked(&self, side: &Side<'_, K>) -> [u8; SLOTS] {
        // Relaxed: only lock holders store tags, and the lock orders them.
        side.tags.load(Ordering::Relaxed).to_le_bytes()
    }

    /// For keys whose window starts at this group: how far past their window they were placed
    /// (see [`KeyLine::reach`]).
    pub(crate) fn reach(&self) -> u32 {
        // Acquire: pairs with the Release raise in `raise_reach` (not needed for exactness, which
        // the home lock gives; it makes a raise seen imply the insert before it is).
        self.keys.0.reach.load(Ordering::Acquire)
    }

    /// Records that a key whose window starts at this group was placed at probe position
    /// `reach - 1`. Under this group's shard lock, which every writer of the reach holds.
    pub(crate) fn raise_reach(&self, reach: u32) {
        // Relaxed load: only this lock's holders write it. Release store: see `reach`.
        if reach > self.keys.0.reach.load(Ordering::Relaxed) {
            self.keys.0.reach.store(reach, Ordering::Release);
        }
    }
}

/// Writes: each runs under the lock of the group's shard, so one runs at a time per group (and
/// per page, whose spare block they share).
impl<K: Clone> Group<K> {
    /// The group's keys with `key` at `slot`: the array a new key publishes. Clones the other
    /// keys, so it may panic in a key's `Clone`; it changes nothing, so a panic leaves the group
    /// as it was.
    pub(crate) fn keys_with(&self, slot: usize, key: K) -> Keys<K> {
        let current = self.keys.0.block.current_locked();
        let mut keys: Keys<K> = current.unwrap_or_else(|| std::array::from_fn(|_| key.clone()));
        keys[slot] = key;
        keys
    }

    /// Gives unused slot `slot` (the first unused one) the key at `slot` in `new.keys`, with a
    /// bucket whose `TAT` is `open_at`; the group version that key was published at.
    pub(crate) fn fill(
        &self,
        side: &Side<'_, K>,
        slot: usize,
        new: NewKey<K>,
        open_at: u64,
    ) -> u32 {
        debug_assert_ne!(open_at, SEALED);
        // Relaxed: no check can reach this word before it finds the key, which it does only
        // through the Release publication below. Never read by a check before: no seal needed.
        self.tats[slot].store(open_at, Ordering::Relaxed);
        let (version, previous) = self.publish(side, slot, new);
        drop(previous);
        version
    }

    /// Publishes `new` for `slot`: the group version a check that found it now would read, and
    /// the keys it displaced, for the caller to drop last.
    pub(super) fn publish(
        &self,
        side: &Side<'_, K>,
        slot: usize,
        new: NewKey<K>,
    ) -> (u32, [Option<Keys<K>>; 2]) {
        // Relaxed: a statistic, read on its own.
        self.used[slot].store(new.now_ms, Ordering::Relaxed);
        let mut tags = self.tags_locked(side);
        tags[slot] = new.tag;
        self.key_blocks(side).publish(new.keys, u32::from_le_bytes(tags))
    }

    /// Every used slot's key, `TAT` and last use, read between two equal versions (so no slot
    /// changed key meanwhile); `None` if a slot changed key during the read.
    pub(crate) fn read_all(&self, side: &Side<'_, K>) -> Option<Vec<(K, u64, u32)>> {
        // Acquire/Release as in `find` and `Found::tat`.
        let version = self.version.load(Ordering::Acquire);
        let tags = side.tags.load(Ordering::Acquire).to_le_bytes();
        let slots = self.key_blocks(side).read(version, |keys| {
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
        // `Err`: the block was being rewritten, so the version moved; read again.
        let slots = slots.ok()?;
        // Relaxed: ordered after the Acquire loads above.
        (self.version.load(Ordering::Relaxed) == version).then(|| slots.unwrap_or_default())
    }
}
