//! The one place the crate's synchronisation primitives come from, and the one place that knows
//! about loom, about `std` against `core`, and about targets without 64-bit atomics.
//!
//! Normally these are `std`'s types (`core`'s, without the feature `std`); under `--cfg loom` they
//! are loom's, so that the loom models in `loom-tests/` explore every interleaving of the real
//! limiter code. No other module imports `std::sync::atomic` or names `cfg(loom)`: every
//! difference between a real build and a model lives here (the atomics and locks below, the two
//! cells in the submodules, a fixed hash seed, and one tag for every key).
//!
//! Without `std` there is no OS lock: [`Mutex`] is then a spin lock (`spin.rs`), which only
//! `Limiter::set_quota` takes. With the feature `portable-atomic`, `AtomicU64` is
//! `portable-atomic`'s (native where the target has 64-bit atomics, a fallback where not); without
//! it, a target without 64-bit atomics fails to build with a message that says so.

#[cfg(feature = "std")]
mod set_once;
// Also in tests with `std`: its own tests run there (a test build of leakgate always has `std`,
// through its dev-dependencies).
#[cfg(any(test, not(any(loom, feature = "std"))))]
mod spin;
#[cfg(feature = "std")]
mod swap_cell;

#[cfg(feature = "std")]
pub(crate) use set_once::SetOnce;
#[cfg(feature = "std")]
pub(crate) use swap_cell::SwapCell;

#[cfg(all(not(loom), not(target_has_atomic = "64"), not(feature = "portable-atomic")))]
compile_error!(
    "leakgate needs 64-bit atomics: every bucket's state is one `AtomicU64`, and this target has \
     none. Enable leakgate's feature `portable-atomic` to use `portable-atomic`'s 64-bit atomics \
     (a lock-based fallback on such targets)."
);

#[cfg(all(not(loom), not(feature = "portable-atomic")))]
pub(crate) use core::sync::atomic::AtomicU64;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, Ordering};
#[cfg(all(not(loom), feature = "portable-atomic"))]
pub(crate) use portable_atomic::AtomicU64;
#[cfg(all(not(loom), feature = "std"))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32};

#[cfg(all(not(loom), feature = "alloc"))]
pub(crate) use alloc::sync::Arc;
#[cfg(all(not(loom), not(feature = "std")))]
pub(crate) use spin::{SpinGuard as MutexGuard, SpinLock as Mutex};
#[cfg(all(not(loom), feature = "std"))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};

/// `std`'s atomics under every cfg, for process-wide state that loom never models (the coarse
/// clock's shared time, written by a real background thread).
#[cfg(feature = "std")]
pub(crate) use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};

/// A small number for the calling thread, the same on every call from it: threads count up from
/// 0 in the order they first ask. For spreading threads over a [`LeasedLimiter`]'s slots
/// (`crate::leased`), so that threads started one after another land on different slots. A
/// process-wide `std` counter under every cfg: loom models name their slots explicitly.
///
/// [`LeasedLimiter`]: crate::LeasedLimiter
#[cfg(feature = "std")]
#[inline]
pub(crate) fn thread_index() -> usize {
    use core::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    /// The next index to hand out. Relaxed: a counter, ordering nothing else.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        /// This thread's index, `usize::MAX` until it first asks (a `const` initialiser: no
        /// lazy-initialisation check on each read).
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|index| {
        let mut i = index.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            index.set(i);
        }
        i
    })
}

/// Whether this is a loom build, where atomics are loom's (larger) types: for layout assertions
/// that hold only for the real ones.
pub(crate) const LOOM: bool = cfg!(loom);

/// Runs `f` on the value of `word`, which the caller holds exclusively (`&mut`, so no other
/// thread can reach it): a plain read and write of the integer, with no atomic operation and no
/// ordering. `get_mut` for `core`'s and `portable-atomic`'s atomics; loom has no `get_mut`, and
/// its `with_mut` also checks that the model's threads are done with the word.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn with_mut<R>(word: &mut AtomicU64, f: impl FnOnce(&mut u64) -> R) -> R {
    f(word.get_mut())
}

/// Under loom: loom's `with_mut` (see the other `with_mut`).
#[cfg(loom)]
pub(crate) fn with_mut<R>(word: &mut AtomicU64, f: impl FnOnce(&mut u64) -> R) -> R {
    word.with_mut(f)
}

/// Locks `mutex`, ignoring poison: every holder of a lock in the crate leaves what it guards (or
/// orders: most guard no data of their own) consistent before any user code that may panic.
#[cfg(any(loom, feature = "std"))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Two random odd 64-bit seeds for a keyed table's hasher, drawn from the OS through `std`'s
/// `RandomState`. Under loom a fixed pair: a model is replayed many times and every run must take
/// the same path.
#[cfg(feature = "std")]
pub(crate) fn hash_seeds() -> [u64; 2] {
    if LOOM {
        return [0x9e37_79b9_7f4a_7c15, 0xc2b2_ae3d_27d4_eb4f];
    }
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    // Odd multipliers keep every bit of the input in the product.
    [state.hash_one(0x5eed_u64) | 1, state.hash_one(0xfeed_u64) | 1]
}

/// A keyed table's 8-bit tag for a key, as lookups see it. Under loom every key has the same tag,
/// so every lookup compares real keys, stale tags included: the case where tags filter nothing is
/// the one that can go wrong.
#[cfg(feature = "std")]
#[inline]
pub(crate) fn model_tag(tag: u8) -> u8 {
    if LOOM {
        1
    } else {
        tag
    }
}

/// Locks `mutex`: a spin lock's guard (see `spin.rs`; it knows no poison).
#[cfg(not(any(loom, feature = "std")))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock()
}

/// A hint to the CPU inside a retry loop; under loom, a point where the model lets another thread
/// run (a bare spin would make the model loop forever).
#[cfg(not(loom))]
pub(crate) use core::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
