//! [`SwapCell`]: an immutable value replaced whole and read without a lock.
//!
//! In a real build this is an `arc_swap::ArcSwapOption`: a load takes a thread-local debt slot
//! (no shared lock, no refcount traffic) and keeps the value alive while it is read.
//!
//! Loom cannot see arc-swap's std atomics, so under `cfg(loom)` the same cell is an append-only
//! list of every value ever published (kept for the model's short life) and a loom atomic index
//! to the current one. That keeps the publication edge that matters in the model: a thread that
//! loads a value sees everything the publisher wrote before storing it, and nothing more.

use std::sync::Arc;

/// A cell holding nothing or an `Arc<T>`, replaced whole by [`SwapCell::store`].
#[cfg(not(loom))]
pub(crate) struct SwapCell<T>(arc_swap::ArcSwapOption<T>);

#[cfg(not(loom))]
impl<T> SwapCell<T> {
    pub(crate) fn empty() -> Self {
        SwapCell(arc_swap::ArcSwapOption::empty())
    }

    /// Runs `f` on the current value (`None` before the first publication), keeping it alive.
    #[inline]
    pub(crate) fn read<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        f(self.0.load().as_deref())
    }

    /// The current value, owned (one reference-count increment).
    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        self.0.load_full()
    }

    /// Publishes `value`, shared, or empties the cell; a reader that gets it also sees every write
    /// made before this call (arc-swap's store is `SeqCst`). Returns the previous value, for the
    /// caller to drop when it is ready to run its destructor.
    pub(crate) fn store(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        self.0.swap(value)
    }
}

#[cfg(loom)]
pub(crate) struct SwapCell<T> {
    /// 1 + the index of the current value in `published`, or 0 when empty.
    current: loom::sync::atomic::AtomicUsize,
    /// Every value published so far, and the current one's `current` as last stored. A std mutex,
    /// invisible to loom: it adds no ordering the real build lacks, and no loom operation runs
    /// while it is held.
    published: std::sync::Mutex<(Vec<Arc<T>>, usize)>,
}

#[cfg(loom)]
impl<T> SwapCell<T> {
    pub(crate) fn empty() -> Self {
        SwapCell {
            current: loom::sync::atomic::AtomicUsize::new(0),
            published: std::sync::Mutex::new((Vec::new(), 0)),
        }
    }

    pub(crate) fn read<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        let value = self.load_full();
        f(value.as_deref())
    }

    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        // Acquire: the weakest ordering arc-swap's load provides.
        let current = self.current.load(loom::sync::atomic::Ordering::Acquire);
        current.checked_sub(1).map(|i| self.list().0[i].clone())
    }

    pub(crate) fn store(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        let mut list = self.list();
        let previous = list.1.checked_sub(1).map(|i| list.0[i].clone());
        list.1 = match value {
            Some(value) => {
                list.0.push(value);
                list.0.len()
            }
            None => 0,
        };
        let current = list.1;
        drop(list);
        // Release: the weakest ordering arc-swap's store provides.
        self.current.store(current, loom::sync::atomic::Ordering::Release);
        previous
    }

    fn list(&self) -> std::sync::MutexGuard<'_, (Vec<Arc<T>>, usize)> {
        self.published.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
