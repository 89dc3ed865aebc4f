//! A group of [`SLOTS`] buckets: one cache line with their tags, state words and last-use times,
//! the line after it with their keys, and the group's [`Side`] data, kept elsewhere.
//!
//! # Implementation details
//!
//! A check reads the group's line (tags, then the slot's `TAT` from the same line) and its keys
//! on the next line: the two lines of one 128-byte pair, which a lookup at a million keys fetches
//! as one cache miss. (With the keys behind a pointer in the line, as before, a check waited on
//! a second miss after the first: 1M `u64` keys, one thread, 2-core Xeon, `leakgate bench`: 1.4x
//! governor's time per check, where the pair costs about 1.0x.) How keys change while lookups
//! read them without a lock is in [`super::key_blocks`].
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
//! The second rule, in detail. Call `held(slot)` the largest value the slot's word has held since
//! its key last changed. Admissions only raise the word. Lowerings (a cancelled reservation, the
//! exact undo of a charge, a refused request's charge given back) move it from `V` down to a value
//! at or above the key's first value (`bucket/give_back.rs` argues it for the last, which may lower
//! from the top of the word); and before each one, the lowering code calls
//! [`Found::note_lowering`](super::slot::Found::note_lowering)`(V)`, which raises the slot's *lowering high-water* in [`Side`] to `V`.
//! So `held(slot) <= max(TAT, high-water)` always. A slot changes key only when that maximum is
//! *before* now (the key's bucket is empty, whatever was lowered); its word is then sealed (CAS to
//! [`SEALED`]), the high-water is read again after the seal (no lowering can land past a seal, and
//! the seal's `Acquire` sees every high-water raised before a lowering it observes), and the word
//! is reopened strictly above both, at or before the time the table last judged a slot idle (see
//! the table's notes): above every value a stale CAS could hold, and still an empty bucket.

use super::key_blocks::{KeyBlock, KeyBlocks};
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
    /// Byte `i`: 8 bits of slot `i`'s key's hash, never 0, or 0 while slot `i` has never held a
    /// key. Slots are used in order and never emptied. Tags only filter: a match is confirmed by
    /// comparing the real key.
    tags: AtomicU32,
    /// Slot `i`'s `TAT`, in the rate's units, or [`SEALED`].
    pub(super) tats: [AtomicU64; SLOTS],
    /// The clock in whole milliseconds (wrapping) at slot `i`'s last admission; for snapshots.
    pub(super) used: [AtomicU32; SLOTS],
    /// The epoch (its low 32 bits) of the limiter's rate the slots' states are counted in: the
    /// rate in force, or the one before while a change of quota converts the table
    /// (`requota.rs`). Written under the shard lock.
    pub(super) epoch: AtomicU32,
    /// The keys, in the main block (the spare one is in [`Side`]); on a line of their own.
    keys: Line<KeyBlock<K>>,
}

/// A value that starts a cache line.
#[repr(align(64))]
struct Line<T>(T);

const _: () = assert!(sync::LOOM || std::mem::size_of::<Group<u64>>() == 128);

/// What a group needs only on cold paths (lowering, reclaiming, inserting past a full window,
/// reading keys while they change), kept off its lines so checks never load it. 104 bytes per
/// group for `u64` keys.
pub(crate) struct Side<K> {
    /// Slot `i`'s lowering high-water: the largest `TAT` a lowering ever moved the word down from
    /// (rate units; 0 if none). Only grows; see the module notes.
    pub(super) lowered: [AtomicU64; SLOTS],
    /// For keys whose window starts at this group: 1 + the furthest probe position (in groups
    /// from the window's start) at which one was ever given a slot past its window, or 0 if none.
    /// Only grows; written under the lock of this group's shard.
    pub(crate) reach: AtomicU32,
    /// The group's spare block of keys (see [`super::key_blocks`]).
    spare_keys: KeyBlock<K>,
}

impl<K> Side<K> {
    pub(crate) fn new() -> Self {
        Side {
            lowered: std::array::from_fn(|_| AtomicU64::new(0)),
            reach: AtomicU32::new(0),
            spare_keys: KeyBlock::new(),
        }
    }
}

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
            tags: AtomicU32::new(0),
            tats: std::array::from_fn(|_| AtomicU64::new(0)),
            used: std::array::from_fn(|_| AtomicU32::new(0)),
            epoch: AtomicU32::new(0),
            keys: Line(KeyBlock::new()),
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
    fn key_blocks<'g>(&'g self, side: &'g Side<K>) -> KeyBlocks<'g, K> {
        KeyBlocks {
            version: &self.version,
            tags: &self.tags,
            main: &self.keys.0,
            spare: &side.spare_keys,
        }
    }

    /// The slot holding `key` with the group version read before the keys, if this group has
    /// it, and whether the group has a slot never used (then no key is ever placed past it: the
    /// search may stop). Lock-free.
    #[inline(always)]
    pub(crate) fn find<Q>(&self, side: &Side<K>, key: &Q, tag: u8) -> (Option<(usize, u32)>, bool)
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        loop {
            // Acquire: pairs with the version bump's Release, so a reader that sees a bump also
            // sees the keys and tags published before it.
            let version = self.version.load(Ordering::Acquire);
            // Acquire: pairs with the Release store of new tags, so a tag seen implies its keys
            // are.
            let tags = self.tags.load(Ordering::Acquire);
            let has_unused = zero_bytes(tags) != 0;
            let mut candidates = zero_bytes(tags ^ (u32::from(tag) * 0x0101_0101));
            if candidates == 0 {
                return (None, has_unused);
            }
            let slot = self.key_blocks(side).read(version, |keys| {
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
            match slot {
                Ok(slot) => return (slot.map(|slot| (slot, version)), has_unused),
                // Keys are changing since `version` was read: look again.
                Err(()) => sync::spin_loop(),
            }
        }
    }

    /// The tags, exact under the lock of the group's shard.
    pub(crate) fn tags_locked(&self) -> [u8; SLOTS] {
        // Relaxed: only lock holders store tags, and the lock orders them.
        self.tags.load(Ordering::Relaxed).to_le_bytes()
    }

    /// For a change of quota (under the shard lock): the least clock reading, in the new units,
    /// at which every used slot, reopened with `level(state)` on top, lies above every value it
    /// held since its key was set (`SEALED` aside).
    pub(crate) fn reopen_floor(&self, side: &Side<K>, level: impl Fn(u64) -> u64) -> u64 {
        let tags = self.tags_locked();
        (0..SLOTS)
            .filter(|&slot| tags[slot] != 0)
            // Relaxed: under the shard lock, a bound only (a conversion decides under its seal).
            .map(|slot| (self.tats[slot].load(Ordering::Relaxed), self.busy_until(side, slot)))
            .filter(|&(tat, _)| tat != SEALED)
            .map(|(tat, held)| held.saturating_add(1).saturating_sub(level(tat)))
            .max()
            .unwrap_or(0)
    }

    /// The latest time slot `slot` may still be busy until: `max(TAT, lowering high-water)`
    /// ([`SEALED`] while it changes key). It never decreases over the slot's whole life, across
    /// changes of key (see the module notes).
    pub(crate) fn busy_until(&self, side: &Side<K>, slot: usize) -> u64 {
        // Relaxed: a candidate or a bound only; `reclaim` decides under its seal.
        let tat = self.tats[slot].load(Ordering::Relaxed);
        tat.max(side.lowered[slot].load(Ordering::Relaxed))
    }

    /// Slot `slot`'s `TAT` if it may change key at `now`: its bucket is empty, whatever was
    /// lowered (`max(TAT, high-water)` strictly before now, so the new key can start strictly
    /// above it and still not after now).
    pub(crate) fn idle_tat(&self, side: &Side<K>, slot: usize, now: u64) -> Option<u64> {
        // Relaxed: a candidate only; the seal CAS decides.
        let tat = self.tats[slot].load(Ordering::Relaxed);
        let held = tat.max(side.lowered[slot].load(Ordering::Relaxed));
        (held < now && held < SEALED - 1).then_some(tat)
    }
}

/// Writes: each runs under the lock of the group's shard, so one runs at a time per group.
impl<K: Clone> Group<K> {
    /// The group's keys with `key` at `slot`: the array a new key publishes. Clones the other
    /// keys, so it may panic in a key's `Clone`; it changes nothing, so a panic leaves the group
    /// as it was.
    pub(crate) fn keys_with(&self, slot: usize, key: K) -> Keys<K> {
        let current = self.keys.0.current_locked();
        let mut keys: Keys<K> = current.unwrap_or_else(|| std::array::from_fn(|_| key.clone()));
        keys[slot] = key;
        keys
    }

    /// Gives unused slot `slot` (the first unused one) the key at `slot` in `new.keys`, with a
    /// bucket whose `TAT` is `open_at`; the group version that key was published at.
    pub(crate) fn fill(&self, side: &Side<K>, slot: usize, new: NewKey<K>, open_at: u64) -> u32 {
        debug_assert_ne!(open_at, SEALED);
        // Relaxed: no check can reach this word before it finds the key, which it does only
        // through the Release publication below. Never read by a check before: no seal needed.
        self.tats[slot].store(open_at, Ordering::Relaxed);
        let (version, previous) = self.publish(side, slot, new);
        drop(previous);
        version
    }

    /// Moves slot `slot` from its idle key to the key at `slot` in `new.keys`, if its `TAT` is
    /// still `idle_tat` and it is still idle at `now`; `None` if a check admitted something there
    /// first or a lowering made it busy. `open_at(held)` gives the new key's first `TAT` from the
    /// largest value the slot held; it must return more than `held`. The group version the new
    /// key was published at.
    pub(crate) fn reclaim(
        &self,
        side: &Side<K>,
        (slot, idle_tat): (usize, u64),
        now: u64,
        new: NewKey<K>,
        open_at: impl FnOnce(u64) -> u64,
    ) -> Option<u32> {
        // Acquire on success: a lowering whose value (or a later one) the seal replaces noted its
        // high-water before a Release fence (`note_lowering`), so the load below sees it. The seal
        // and a check's CAS are read-modify-writes of one word, so exactly one wins.
        let sealed = self.tats[slot].compare_exchange(
            idle_tat,
            SEALED,
            Ordering::Acquire,
            Ordering::Relaxed,
        );
        if sealed.is_err() {
            return None;
        }
        // Relaxed: ordered after the seal's Acquire. No lowering can land from here on.
        let held = idle_tat.max(side.lowered[slot].load(Ordering::Relaxed));
        if held >= now || held >= SEALED - 1 {
            // A lowering from a later value happened between the candidate check and the seal:
            // the bucket is not empty after all. Unseal, unchanged. Release: as for a reopening.
            self.tats[slot].store(idle_tat, Ordering::Release);
            return None;
        }
        let open_at = open_at(held).min(SEALED - 1);
        debug_assert!(open_at > held);
        // From here to the end nothing runs user code that could panic with the slot sealed:
        // the keys were cloned before the seal, and the old ones are dropped after the reopening.
        // (`open_at` runs crate code only: the table's marks, and the state a keyed taker chose
        // for its key, see `Ask::start`.)
        let (version, previous) = self.publish(side, slot, new);
        // Release: a check that reads this value sees the version bump in `publish` and starts
        // over, since it may have found the slot's previous key.
        self.tats[slot].store(open_at, Ordering::Release);
        drop(previous);
        Some(version)
    }

    /// Publishes `new` for `slot`: the group version a check that found it now would read, and
    /// the keys it displaced, for the caller to drop last.
    fn publish(&self, side: &Side<K>, slot: usize, new: NewKey<K>) -> (u32, [Option<Keys<K>>; 2]) {
        // Relaxed: a statistic, read on its own.
        self.used[slot].store(new.now_ms, Ordering::Relaxed);
        let mut tags = self.tags_locked();
        tags[slot] = new.tag;
        self.key_blocks(side).publish(new.keys, u32::from_le_bytes(tags))
    }

    /// Every used slot's key, `TAT` and last use, read between two equal versions (so no slot
    /// changed key meanwhile); `None` if a slot changed key during the read.
    pub(crate) fn read_all(&self, side: &Side<K>) -> Option<Vec<(K, u64, u32)>> {
        // Acquire/Release as in `find` and `Found::tat`.
        let version = self.version.load(Ordering::Acquire);
        let tags = self.tags.load(Ordering::Acquire).to_le_bytes();
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
