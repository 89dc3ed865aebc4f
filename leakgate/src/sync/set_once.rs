//! [`SetOnce`]: a value set at most once, by a writer that holds a lock, and read without one.
//!
//! In a real build this is `std`'s `OnceLock`: a read is one `Acquire` load of its state.
//!
//! Loom does not model `OnceLock`, so under `cfg(loom)` the value sits in a `std` `OnceLock`
//! (invisible to loom) behind a loom flag that is set, `Release`, after the value, and read,
//! `Acquire`, before it. That keeps the edge that matters in a model: a reader that sees the value
//! sees everything written before it was set. Writers are serialised by a lock of the caller's,
//! so the `OnceLock`'s own waiting never comes into play.

use std::sync::OnceLock;

#[cfg(not(loom))]
pub(crate) struct SetOnce<T>(OnceLock<T>);

#[cfg(not(loom))]
impl<T> SetOnce<T> {
    pub(crate) fn new() -> Self {
        SetOnce(OnceLock::new())
    }

    /// The value, if set.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.get()
    }

    /// Sets the value if unset, and returns the value now held. The caller holds the lock that
    /// serialises every `set` of this cell.
    pub(crate) fn set(&self, value: T) -> &T {
        self.0.get_or_init(|| value)
    }
}

#[cfg(loom)]
pub(crate) struct SetOnce<T> {
    set: loom::sync::atomic::AtomicBool,
    value: OnceLock<T>,
}

#[cfg(loom)]
impl<T> SetOnce<T> {
    pub(crate) fn new() -> Self {
        SetOnce { set: loom::sync::atomic::AtomicBool::new(false), value: OnceLock::new() }
    }

    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire: pairs with the Release store in `set`.
        if self.set.load(loom::sync::atomic::Ordering::Acquire) {
            self.value.get()
        } else {
            None
        }
    }

    pub(crate) fn set(&self, value: T) -> &T {
        let value = self.value.get_or_init(|| value);
        // Release: a reader that sees the flag sees the value and everything written before it.
        self.set.store(true, loom::sync::atomic::Ordering::Release);
        value
    }
}
