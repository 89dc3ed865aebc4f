//! [`SwapCell`]: an immutable value replaced whole and read without a lock.
//!
//! In a real build this is an `arc_swap::ArcSwapOption`: a load takes a thread-local debt slot
//! (no shared lock, no refcount traffic) and keeps the value alive while it is read.
//!
//! Loom cannot see arc-swap's std atomics, so under `cfg(loom)` the same cell is an append-only
//! list of every value ever published (the current one held, the others weakly) and a loom
//! atomic index to the current one. That keeps the publication edge that matters in the model: a thread that
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
    /// Every value published so far, and the current one's `current` as last stored: the current
    /// value held, the others only weakly (the cell keeps no value alive that the real one would
    /// have dropped, so cycles through cells are broken as in a real build). A std mutex,
    /// invisible to loom: it adds no ordering the real build lacks, and no loom operation runs
    /// while it is held.
    published: std::sync::Mutex<(Vec<Published<T>>, usize)>,
}

/// A value a loom [`SwapCell`] published.
#[cfg(loom)]
enum Published<T> {
    Current(Arc<T>),
    Replaced(std::sync::Weak<T>),
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
        loop {
            // Acquire: the weakest ordering arc-swap's load provides.
            let current = self.current.load(loom::sync::atomic::Ordering::Acquire);
            let i = current.checked_sub(1)?;
            match &self.list().0[i] {
                Published::Current(value) => return Some(value.clone()),
                // Replaced since the index was read: the value, if anything still holds it (a
                // real load that raced the store may return either value); else the newer one.
                Published::Replaced(value) => match value.upgrade() {
                    Some(value) => return Some(value),
                    None => loom::thread::yield_now(),
                },
            }
        }
    }

    pub(crate) fn store(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        let mut list = self.list();
        let previous = list.1.checked_sub(1).and_then(|i| {
            let Published::Current(value) = &list.0[i] else { return None };
            let value = value.clone();
            list.0[i] = Published::Replaced(Arc::downgrade(&value));
            Some(value)
        });
        list.1 = match value {
            Some(value) => {
                list.0.push(Published::Current(value));
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

    fn list(&self) -> std::sync::MutexGuard<'_, (Vec<Published<T>>, usize)> {
        self.published.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
