//! Hidden entry points for the loom models and tests in this repository, which need to place keys
//! and to drive a slot's state word below the public API. Not part of the API: no stability, no
//! use outside tests.

use super::KeyedLimiter;
use crate::clock::Clock;
use std::borrow::Borrow;
use std::hash::Hash;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// The shard whose lock every insert of `key` holds (its home shard).
    #[doc(hidden)]
    pub fn model_home_shard<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        self.table.home(self.table.hash(key))
    }

    /// The table-wide index of the group where `key`'s first window starts (a new key goes
    /// there when that group has an unused slot).
    #[doc(hidden)]
    pub fn model_start_group<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        self.table.position(self.table.hash(key), 0)
    }

    /// How many tracked keys sit past both their windows (found only further along their probe
    /// sequence).
    #[doc(hidden)]
    pub fn model_keys_past_windows(&self) -> usize {
        let mut keys = Vec::new();
        self.table.for_each(|key, _, _, _| keys.push(key));
        let table = &self.table;
        let in_windows = |key: &K| {
            let hash = table.hash(key);
            let tag = super::group::tag_of(hash);
            (0..table.window()).any(|p| {
                [table.position(hash, p), table.second(hash, p)]
                    .into_iter()
                    .any(|gi| table.at(gi).is_some_and(|at| at.find(key, tag).0.is_some()))
            })
        };
        keys.iter().filter(|key| !in_windows(key)).count()
    }

    /// `key`'s raw `TAT` in the rate's units, if the table tracks it.
    #[doc(hidden)]
    pub fn model_tat<Q>(&self, key: &Q) -> Option<u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let found = self.table.find(key, self.table.hash(key))?;
        match found.tat(None) {
            super::slot::Tat::Current(tat) => Some(tat),
            _ => None,
        }
    }

    /// Lowers `key`'s `TAT` from `from` to `to` exactly as a cancel or an undo does. Whether it
    /// landed.
    #[doc(hidden)]
    pub fn model_lower<Q>(&self, key: &Q, from: u64, to: u64) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(found) = self.table.find(key, self.table.hash(key)) else { return false };
        // The slot's own lowering (`bucket::Word::lower`): the hook, then a strong CAS.
        crate::bucket::Word::lower(&found, from, to).is_ok()
    }
}
