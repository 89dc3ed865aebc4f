//! A slot changing key: the rule that it never holds a value twice across a change of key, the
//! group's lowering high-water that keeps the rule when a `TAT` is lowered, and the reclaim of an
//! idle slot for a new key.
//!
//! # Implementation details
//!
//! The rule (see [`super::group`]): the first value of a slot's new key lies above every value the
//! slot held before, so a stale CAS from an earlier key's value fails. Call `held(slot)` the
//! largest value the slot's word has held since its key last changed. Admissions only raise the
//! word. Lowerings (a cancelled reservation, the exact undo of a charge, a refused request's charge
//! given back) move it from `V` down to a value at or above the key's first value
//! (`bucket/give_back.rs` argues it for the last, which may lower from the top of the word); and
//! before each one, the lowering code calls
//! [`Found::note_lowering`](super::slot::Found::note_lowering)`(V)`, which raises the group's
//! *lowering high-water* to `V` and marks the slot as lowered. Lowerings are rare, so one
//! high-water serves the group's four slots (8 bytes a group, where one per slot took 8 a slot): a
//! slot's own high-water is the group's if the slot is marked, 0 if not, which may be above what
//! that slot itself was lowered from (a sibling's lowering), never below it. So `held(slot) <=
//! max(TAT, high-water)` always. A slot changes key only when that maximum is *before* now (the
//! key's bucket is empty, whatever was lowered); its word is then sealed (CAS to [`SEALED`]), the
//! high-water is read again after the seal (no lowering can land past a seal, and the seal's
//! `Acquire` sees every high-water raised before a lowering it observes), its mark is cleared (the
//! new key has never been lowered), and the word is reopened strictly above both, at or before the
//! time the table last judged a slot idle (see the table's notes): above every value a stale CAS
//! could hold, and still an empty bucket.
//!
//! The same table also holds counters (the in-flight counts of
//! [`KeyedConcurrencyLimiter`](crate::KeyedConcurrencyLimiter), see [`super::counted`]): there a
//! word is a generation (high 32 bits) and a count (low 32), and [`Reuse`] says which rule frees a
//! slot. A counter is idle at count 0; its next key opens at the next generation, count 0: above
//! every value the slot held, with no high-water needed, since a counter's word is only lowered
//! by the holder of the units it takes off (a release), whose own count keeps the slot from
//! changing key until the word is back in its generation's range. A slot whose generation is the
//! last one is never reused (after 2^32 keys in one slot: it stays its last key's).

use super::group::{Group, NewKey, Side, SEALED, SLOTS};
use crate::sync::{fence, Ordering};

/// Which rule frees a slot for another key: the table's kind, and what it is judged against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Rate buckets: a slot is idle when the largest value it may hold (`max(TAT, lowering
    /// high-water)`) is strictly before the clock reading given here (rate units), so the new
    /// key can start strictly above it and still not after now.
    Drained(u64),
    /// Counters: a slot is idle at count 0 (see the module notes).
    Counted,
}

/// A counter's count: the low 32 bits of its word.
pub(crate) const COUNT_MASK: u64 = u32::MAX as u64;

/// The generation of a counter's word that is never reused (the next would wrap).
const LAST_GENERATION: u64 = u32::MAX as u64;

impl Reuse {
    /// Whether a slot that held at most `held` since its key was set may change key.
    #[inline]
    pub(crate) fn idle(self, held: u64) -> bool {
        match self {
            Reuse::Drained(now) => held < now && held < SEALED - 1,
            // `SEALED` has a count of all ones: never idle.
            Reuse::Counted => held & COUNT_MASK == 0 && held >> 32 < LAST_GENERATION,
        }
    }

    /// A counter's first word in a slot that held at most `held`, idle (see [`Reuse::idle`]):
    /// the next generation, count 0.
    pub(crate) fn next_generation(held: u64) -> u64 {
        debug_assert!(Reuse::Counted.idle(held));
        ((held >> 32) + 1) << 32
    }
}

impl<K> Group<K> {
    /// The hook for lowering slot `slot`'s word from `from` (see
    /// [`Found::note_lowering`](super::slot::Found::note_lowering)): raises the group's lowering
    /// high-water to `from` and marks the slot, before the lowering CAS.
    #[inline]
    pub(crate) fn note_lowering(&self, slot: usize, from: u64) {
        // Relaxed, then a Release fence: the fence orders both writes before the lowering CAS
        // that follows (at any ordering), so a reclaimer whose seal (Acquire) reads the lowered
        // value, or a later value of the same word, also reads the mark and the high-water.
        self.lowered.fetch_max(from, Ordering::Relaxed);
        self.keys.0.lowered.fetch_or(1 << slot, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// Slot `slot`'s lowering high-water: the group's if the slot is marked as lowered, else 0.
    /// At or above every value a lowering of the slot's key moved its word down from.
    pub(crate) fn lowered_high(&self, slot: usize) -> u64 {
        // Relaxed: a bound read after a seal's Acquire (which orders it), or a candidate only.
        if self.keys.0.lowered.load(Ordering::Relaxed) & (1 << slot) != 0 {
            self.lowered.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// For a change of quota (under the shard lock): the least clock reading, in the new units,
    /// at which every used slot, reopened with `level(state)` on top, lies above every value it
    /// held since its key was set (`SEALED` aside).
    pub(crate) fn reopen_floor(&self, side: &Side<'_, K>, level: impl Fn(u64) -> u64) -> u64 {
        let tags = self.tags_locked(side);
        (0..SLOTS)
            .filter(|&slot| tags[slot] != 0)
            // Relaxed: under the shard lock, a bound only (a conversion decides under its seal).
            .map(|slot| (self.tats[slot].load(Ordering::Relaxed), self.busy_until(slot)))
            .filter(|&(tat, _)| tat != SEALED)
            .map(|(tat, held)| held.saturating_add(1).saturating_sub(level(tat)))
            .max()
            .unwrap_or(0)
    }

    /// The latest time slot `slot` may still be busy until: `max(TAT, lowering high-water)`
    /// ([`SEALED`] while it changes key). It never decreases while the slot keeps its key, and
    /// the slot's next key starts above it (see the module notes).
    pub(crate) fn busy_until(&self, slot: usize) -> u64 {
        // Relaxed: a candidate or a bound only; `reclaim` decides under its seal.
        let tat = self.tats[slot].load(Ordering::Relaxed);
        tat.max(self.lowered_high(slot))
    }

    /// Slot `slot`'s word if it may change key under `rule` (see [`Reuse::idle`]), judged on
    /// `max(word, high-water)`: for a bucket, empty whatever was lowered.
    pub(crate) fn idle_tat(&self, slot: usize, rule: Reuse) -> Option<u64> {
        // Relaxed: a candidate only; the seal CAS decides.
        let tat = self.tats[slot].load(Ordering::Relaxed);
        rule.idle(tat.max(self.lowered_high(slot))).then_some(tat)
    }
}

/// The reclaim: under the lock of the group's shard, as every write to a group.
impl<K: Clone> Group<K> {
    /// Moves slot `slot` from its idle key to the key at `slot` in `new.keys`, if its word is
    /// still `idle_tat` and it is still idle under `rule`; `None` if a check admitted something
    /// there first or a lowering made it busy. `open_at(held)` gives the new key's first `TAT` from the
    /// largest value the slot held; it must return more than `held`. The group version the new
    /// key was published at.
    pub(crate) fn reclaim(
        &self,
        side: &Side<'_, K>,
        (slot, idle_tat): (usize, u64),
        rule: Reuse,
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
        // Ordered after the seal's Acquire. No lowering can land from here on.
        let held = idle_tat.max(self.lowered_high(slot));
        if !rule.idle(held) {
            // A lowering from a later value happened between the candidate check and the seal:
            // the bucket is not empty after all. Unseal, unchanged. Release: as for a reopening.
            self.tats[slot].store(idle_tat, Ordering::Release);
            return None;
        }
        let open_at = open_at(held).min(SEALED - 1);
        debug_assert!(open_at > held);
        // The new key was never lowered. Relaxed: before the Release publication below, which
        // every lowering of the new key comes after (it must find the key first); a late
        // lowering of the old key may mark the slot again, which only makes it look busier.
        self.keys.0.lowered.fetch_and(!(1 << slot), Ordering::Relaxed);
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
}
