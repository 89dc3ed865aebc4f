//! [`SpinLock`]: the lock that serialises changes of quota in a build without `std`, where there
//! is no OS lock to sleep on.
//!
//! Its one user is `Limiter::set_quota` (a `SpinLock<()>`), held for the few instructions of a
//! change; a check takes it only when it meets a change in progress, to wait for it. So a spin is
//! short, with one caveat for code without threads: a check made from an interrupt handler while
//! the interrupted code is inside `set_quota` on the same limiter would spin forever, as with
//! any spin lock. Such code changes quotas with that interrupt masked, or not while it may
//! check.
//!
//! The guard gives shared access only (`Deref`, no `DerefMut`): that is all the crate needs, and
//! it keeps the lock free of `unsafe`.

use core::ops::Deref;

#[cfg(not(feature = "portable-atomic"))]
use core::sync::atomic::AtomicBool;
use core::sync::atomic::Ordering;
#[cfg(feature = "portable-atomic")]
use portable_atomic::AtomicBool;

/// A lock held by one [`SpinGuard`] at a time, taken by spinning.
pub(crate) struct SpinLock<T> {
    /// `true` while a guard is held, `false` otherwise.
    held: AtomicBool,
    /// What the lock guards, read-only.
    value: T,
}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> Self {
        SpinLock { held: AtomicBool::new(false), value }
    }

    /// Spins until the lock is free, then holds it until the guard is dropped.
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        // Acquire on success: pairs with the Release in `SpinGuard::drop`, so this holder sees
        // everything the previous one wrote while it held the lock. Relaxed on failure: nothing
        // is read on that path.
        while self
            .held
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Wait on plain loads (Relaxed: only a hint to retry the CAS, which orders), so that
            // waiters keep the line shared instead of bouncing it between cores.
            while self.held.load(Ordering::Relaxed) {
                super::spin_loop();
            }
        }
        SpinGuard { lock: self }
    }
}

/// A held [`SpinLock`]; dropping it releases the lock.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.lock.value
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire of the next `lock` (see there).
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_dropping_the_guard_frees_it() {
        let lock = SpinLock::new(7);
        let guard = lock.lock();
        assert_eq!(*guard, 7);
        assert!(lock.held.load(Ordering::Relaxed));
        drop(guard);
        assert!(!lock.held.load(Ordering::Relaxed));
        assert_eq!(*lock.lock(), 7);
    }

    #[test]
    fn threads_take_turns() {
        // Each holder reads the counter, yields and writes it back plus one: with the lock held
        // no increment is lost.
        let lock = SpinLock::new(core::sync::atomic::AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        let held = lock.lock();
                        let seen = held.load(Ordering::Relaxed);
                        std::thread::yield_now();
                        held.store(seen + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(lock.lock().load(Ordering::Relaxed), 4000);
    }
}
