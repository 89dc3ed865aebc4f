//! The one place the crate's synchronisation primitives come from, and the one place that knows
//! about loom.
//!
//! Normally these are `std`'s types; under `--cfg loom` they are loom's, so that the loom models in
//! `loom-tests/` explore every interleaving of the real limiter code. No other module imports
//! `std::sync::atomic` or names `cfg(loom)`: every difference between a real build and a model
//! lives here (the atomics and locks below, the two cells in the submodules, a fixed hash seed,
//! and one tag for every key).

mod set_once;
mod swap_cell;

pub(crate) use set_once::SetOnce;
pub(crate) use swap_cell::SwapCell;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard, RwLock};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard, RwLock};

/// `std`'s atomics under every cfg, for process-wide state that loom never models (the coarse
/// clock's shared time, written by a real background thread).
pub(crate) use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};

/// Whether this is a loom build, where atomics are loom's (larger) types: for layout assertions
/// that hold only for the real ones.
pub(crate) const LOOM: bool = cfg!(loom);

/// Locks `mutex`, ignoring poison: every holder of a lock in the crate leaves what it guards (or
/// orders: most guard no data of their own) consistent before any user code that may panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Two random odd 64-bit seeds for a keyed table's hasher, drawn from the OS through `std`'s
/// `RandomState`. Under loom a fixed pair: a model is replayed many times and every run must take
/// the same path.
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
#[inline]
pub(crate) fn model_tag(tag: u8) -> u8 {
    if LOOM {
        1
    } else {
        tag
    }
}

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
/// A hint to the CPU inside a retry loop; under loom, a point where the model lets another thread
/// run (a bare spin would make the model loop forever).
#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
