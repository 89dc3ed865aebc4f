//! The keys of one group of slots: an immutable array, replaced whole when a slot gets a new key,
//! and read without a lock.
//!
//! In a real build this is an `arc_swap::ArcSwapOption`: a load takes a thread-local debt slot
//! (no shared lock, no refcount traffic) and keeps the array alive while it is read.
//!
//! Loom cannot see arc-swap's std atomics, so under `cfg(loom)` the same cell is an append-only
//! list of every array ever published (kept for the model's short life) and a loom atomic index
//! to the current one. That keeps the publication edge that matters in the model: a thread that
//! loads an array sees everything the publisher wrote before storing it, and nothing more.

use super::group::SLOTS;
use std::sync::Arc;

/// A group's keys: slot `i`'s key at `i`. Slots not yet used hold a copy of a used slot's key,
/// which is never compared (their tags are 0, see `Group`); slots are filled in order, so the
/// first key is the one copied.
pub(crate) type Keys<K> = [K; SLOTS];

#[cfg(not(loom))]
pub(crate) struct PageCell<K>(arc_swap::ArcSwapOption<Keys<K>>);

#[cfg(not(loom))]
impl<K> PageCell<K> {
    pub(crate) fn empty() -> Self {
        PageCell(arc_swap::ArcSwapOption::empty())
    }

    /// Runs `f` on the current keys (`None` before the first insert), keeping them alive.
    #[inline]
    pub(crate) fn read<R>(&self, f: impl FnOnce(Option<&Keys<K>>) -> R) -> R {
        f(self.0.load().as_deref())
    }

    /// Publishes `keys`; a reader that gets them also sees every write made before this call.
    /// (arc-swap's store is `SeqCst`.)
    pub(crate) fn publish(&self, keys: Keys<K>) {
        self.0.store(Some(Arc::new(keys)));
    }
}

#[cfg(loom)]
pub(crate) struct PageCell<K> {
    /// 1 + the index of the current keys in `published`, or 0 before the first insert.
    current: loom::sync::atomic::AtomicUsize,
    /// Every array published so far. A std mutex, invisible to loom: it adds no ordering the real
    /// build lacks, and no loom operation runs while it is held.
    published: std::sync::Mutex<Vec<Arc<Keys<K>>>>,
}

#[cfg(loom)]
impl<K> PageCell<K> {
    pub(crate) fn empty() -> Self {
        PageCell {
            current: loom::sync::atomic::AtomicUsize::new(0),
            published: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn read<R>(&self, f: impl FnOnce(Option<&Keys<K>>) -> R) -> R {
        // Acquire: the weakest ordering arc-swap's load provides.
        let current = self.current.load(loom::sync::atomic::Ordering::Acquire);
        let keys = current.checked_sub(1).map(|i| self.list()[i].clone());
        f(keys.as_deref())
    }

    pub(crate) fn publish(&self, keys: Keys<K>) {
        let mut list = self.list();
        list.push(Arc::new(keys));
        let current = list.len();
        drop(list);
        // Release: the weakest ordering arc-swap's store provides.
        self.current.store(current, loom::sync::atomic::Ordering::Release);
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Keys<K>>>> {
        self.published.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
