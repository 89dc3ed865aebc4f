//! A keyed slot as a bucket state word: the protocol of [`crate::bucket`] on a slot's `TAT`, with
//! every value it reads checked to still belong to the key it found.

use super::group::{Found, Tat, SEALED};
use crate::bucket::Word;

impl<K> Word for Found<'_, K> {
    /// The slot was given to another key (`Moved`) or is being given (`Sealed`).
    type Gone = Tat;
    /// An unconditional add could land in the bucket of the slot's next key.
    const ADDS: bool = false;
    /// `SEALED` marks a slot changing key.
    const MAX_STATE: u64 = SEALED - 1;

    #[inline]
    fn load(&self) -> Result<u64, Tat> {
        current(self.group.tat(self.slot, self.version, None))
    }

    #[inline]
    fn compare_exchange(&self, current_tat: u64, new: u64) -> Result<(), Result<u64, Tat>> {
        self.group
            .cas_tat(self.slot, current_tat, new)
            .map_err(|found| current(self.group.tat(self.slot, self.version, Some(found))))
    }

    #[inline]
    fn raise_to(&self, now: u64) {
        self.group.raise_tat(self.slot, now);
    }

    #[inline]
    fn fetch_add(&self, _cost: u64) -> Option<u64> {
        None
    }

    #[inline]
    fn lower(&self, from: u64, to: u64) -> Result<(), u64> {
        self.group.lower_tat(self.slot, from, to)
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
