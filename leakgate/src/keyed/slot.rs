//! [`Found`]: the handle through which a check (and any other reader or writer of a key's
//! bucket) works on a slot's state word, and the hook for code that lowers it.
//!
//! See [`super::group`] for why a slot's word never serves two keys: the version check in
//! [`Found::tat`], and the rule that a slot never holds a value twice across a change of key,
//! which [`Found::note_lowering`] keeps true when a `TAT` is lowered (see [`super::reuse`]).

use super::capacity::MAX_CAPACITY;
use super::group::{Group, SEALED, SLOTS};
use super::page::Page;
use crate::bucket::Word;
use crate::sync::{AtomicU64, Ordering};

/// A slot whose key matched, with the group version read before its keys were: the handle a
/// check (and any other reader or writer of the key's bucket) works through.
pub(crate) struct Found<'g, K> {
    /// The slot's group: its line.
    group: &'g Group<K>,
    /// Where the slot is, and the group version it was found at, in one word: the version in
    /// bits 0 to 31, the slot in bits 32 and 33, the group's table-wide index from bit 34 (a
    /// table has at most 2^28 groups). So a handle is two registers, and a lookup passes it on
    /// without going through memory (at five words it did: 1,000 keys, one thread, about 1 ns a
    /// check). Whole words also forward from a copy that does go through memory (a 4-byte
    /// store read back by an 8-byte load stalls; `benches/rules.rs`: a rules check 42 -> 38 ns,
    /// `check_all_n` over 3 keys 148 -> 138 ns).
    at: u64,
}

// The slot takes two bits, and a table's group index 30 (see `Found::at`).
const _: () = assert!(SLOTS == 4 && MAX_CAPACITY / SLOTS <= 1 << 30);

impl<K> Clone for Found<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Found<'_, K> {}

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

impl<'g, K> Found<'g, K> {
    /// The slot's `TAT` as one CAS loop's step sees it: the value the last CAS failed on (`seen`),
    /// or a fresh load, if the slot still holds the found key.
    #[inline]
    pub(crate) fn tat(&self, seen: Option<u64>) -> Tat {
        // Acquire: a value written when the slot got a new key comes after that key's version
        // bump, so the version read below sees the bump.
        let tat = seen.unwrap_or_else(|| self.group.tats[self.slot()].load(Ordering::Acquire));
        // Relaxed: ordered after the Acquire load (or Acquire CAS failure) that produced `tat`.
        if tat == SEALED {
            Tat::Sealed
        } else if self.group.version.load(Ordering::Relaxed) != self.version() {
            Tat::Moved
        } else {
            Tat::Current(tat)
        }
    }

    /// CAS of the slot's `TAT` from `current` (the found key's, as [`Found::tat`] returned it) to
    /// `new`, which must not be [`SEALED`]. On failure, the value found.
    ///
    /// Raising the word (an admission, or recording a time in an idle bucket) needs nothing
    /// more. Raise through this CAS rather than a blind `fetch_max`: a `fetch_max` that lands
    /// while the slot is sealed is lost if the reclaim then backs out (see
    /// [`Group::reclaim`](super::group::Group::reclaim)), where this CAS reports the seal. To
    /// *lower* the word (from `current` to a smaller `new`), call
    /// [`Found::note_lowering`]`(current)` first.
    #[inline]
    pub(crate) fn cas_tat(&self, current: u64, new: u64) -> Result<(), u64> {
        debug_assert_ne!(new, SEALED);
        // Relaxed on success: the word is the bucket's whole state, nothing else is published
        // with it (a lowering's high-water is carried by `note_lowering`'s fence). Acquire on
        // failure: the value found is read as `Found::tat` reads it.
        self.group.tats[self.slot()]
            .compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Acquire)
            .map(drop)
    }

    /// The hook for code that lowers a slot's `TAT`: call it with the value the lowering CAS will
    /// replace (`from`), before that CAS, every time. It keeps the slot from changing key until the
    /// clock is past `from`, and makes its next key start above `from`, so a check that read `from`
    /// (or anything below it) before the lowering can never CAS into another key's bucket. See the
    /// module notes. Costs a `fetch_max` and a `fetch_or` on the slot's group's lines (see
    /// [`Group::note_lowering`](super::group::Group::note_lowering)); the lowering CAS after it may
    /// be `Relaxed`.
    ///
    /// What the argument needs of the lowering itself: it goes from `from` down to no lower than
    /// the key's first value (an undo goes back to the `TAT` the undone charge was computed
    /// against, `max(TAT, now)` at that charge; a charge given back from the top of the word
    /// stays above the exact state, see `bucket/give_back.rs`), so a key's values never fall
    /// below its first. A handle whose slot has changed key since it was
    /// found is harmless here: its `from` lies below the new key's first value, so the high-water
    /// it raises and the mark it sets only make the slot look busier, and its CAS fails.
    #[inline]
    pub(crate) fn note_lowering(&self, from: u64) {
        self.group.note_lowering(self.slot(), from);
    }

    /// Records an admission at `now_ms` for snapshots.
    #[inline]
    pub(crate) fn mark_used(&self, now_ms: u32) {
        // Relaxed: a statistic, read on its own.
        self.group.used[self.slot()].store(now_ms, Ordering::Relaxed);
    }

    /// Where the slot is, table-wide, and the version it was found at: what a reservation keeps
    /// to find it again ([`Table::found_at`](super::table::Table::found_at)).
    pub(crate) fn locator(&self) -> (usize, usize, u32) {
        ((self.at >> 34) as usize, self.slot(), self.version())
    }

    /// The epoch of the limiter's rate the group's states are in (see `requota.rs`).
    #[inline(always)]
    pub(crate) fn epoch(&self) -> u32 {
        self.group.epoch()
    }

    /// Whether the slot is being given to another key right now.
    pub(crate) fn is_sealed(&self) -> bool {
        // Acquire: as in `Found::tat`.
        self.group.tats[self.slot()].load(Ordering::Acquire) == SEALED
    }

    /// The handle on slot `slot` of group `index` of `page`, found at group version `version`.
    #[inline(always)]
    pub(super) fn new(page: &'g Page<K>, index: usize, slot: usize, version: u32) -> Self {
        let at = (page.group_index(index) as u64) << 34 | (slot as u64 & 3) << 32;
        Found { group: page.line(index), at: at | u64::from(version) }
    }

    /// The slot's word itself: for the counters of [`super::counted`], which keep their own
    /// protocol on it.
    #[inline(always)]
    pub(super) fn word(&self) -> &'g AtomicU64 {
        &self.group.tats[self.slot()]
    }

    /// The slot's index in its group.
    #[inline(always)]
    fn slot(&self) -> usize {
        (self.at >> 32) as usize & 3
    }

    /// The group version the slot was found at.
    #[inline(always)]
    fn version(&self) -> u32 {
        self.at as u32
    }
}

/// A slot as a bucket state word: the protocol of [`crate::bucket`] on its `TAT`, with every value
/// it reads checked to still belong to the key it found.
impl<K> Word for Found<'_, K> {
    /// The slot was given to another key (`Moved`) or is being given (`Sealed`).
    type Gone = Tat;
    /// An unconditional add could land in the bucket of the slot's next key.
    const ADDS: bool = false;
    /// `SEALED` marks a slot changing key.
    const MAX_STATE: u64 = SEALED - 1;

    #[inline]
    fn load(&self) -> Result<u64, Tat> {
        current(self.tat(None))
    }

    #[inline]
    fn compare_exchange(&self, current_tat: u64, new: u64) -> Result<(), Result<u64, Tat>> {
        self.cas_tat(current_tat, new).map_err(|found| current(self.tat(Some(found))))
    }

    /// Through the CAS, not a blind `fetch_max` (see [`Found::cas_tat`]); stops if the slot
    /// changes key.
    fn raise_to(&self, now: u64) {
        let mut seen = None;
        while let Tat::Current(tat) = self.tat(seen) {
            if tat >= now {
                return;
            }
            match self.cas_tat(tat, now) {
                Ok(()) => return,
                Err(found) => seen = Some(found),
            }
        }
    }

    #[inline]
    fn fetch_add(&self, _cost: u64) -> Option<u64> {
        None
    }

    /// Calls the lowering hook first, then one strong CAS (a weak one retried while it fails
    /// spuriously).
    fn lower(&self, from: u64, to: u64) -> Result<(), u64> {
        self.note_lowering(from);
        loop {
            match self.cas_tat(from, to) {
                Err(found) if found == from => continue,
                done => return done,
            }
        }
    }
}

/// The found key's state, or why the slot no longer holds it.
#[inline]
fn current(tat: Tat) -> Result<u64, Tat> {
    match tat {
        Tat::Current(tat) => Ok(tat),
        gone => Err(gone),
    }
}
