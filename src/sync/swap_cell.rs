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

/// A cell holding nothing or an `Arc<T>`, replaced whole by [`SwapCell::publish`].
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

    /// Publishes `value`; a reader that gets it also sees every write made before this call
    /// (arc-swap's store is `SeqCst`). Returns the previous value, for the caller to drop when it
    /// is ready to run its destructor.
    pub(crate) fn publish(&self, value: T) -> Option<Arc<T>> {
        self.0.swap(Some(Arc::new(value)))
    }
}

#[cfg(loom)]
pub(crate) struct SwapCell<T> {
    /// 1 + the index of the current value in `published`, or 0 before the first publication.
    current: loom::sync::atomic::AtomicUsize,
    /// Every value published so far. A std mutex, invisible to loom: it adds no ordering the real
    /// build lacks, and no loom operation runs while it is held.
    published: std::sync::Mutex<Vec<Arc<T>>>,
}

#[cfg(loom)]
impl<T> SwapCell<T> {
    pub(crate) fn empty() -> Self {
        SwapCell {
            current: loom::sync::atomic::AtomicUsize::new(0),
            published: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn read<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        // Acquire: the weakest ordering arc-swap's load provides.
        let current = self.current.load(loom::sync::atomic::Ordering::Acquire);
        let value = current.checked_sub(1).map(|i| self.list()[i].clone());
        f(value.as_deref())
    }

    pub(crate) fn publish(&self, value: T) -> Option<Arc<T>> {
        let mut list = self.list();
        let previous = list.last().cloned();
        list.push(Arc::new(value));
        let current = list.len();
        drop(list);
        // Release: the weakest ordering arc-swap's store provides.
        self.current.store(current, loom::sync::atomic::Ordering::Release);
        previous
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<T>>> {
        self.published.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
