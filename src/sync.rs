//! The one place atomics are imported from.
//!
//! Normally these are `std`'s types; under `--cfg loom` they are loom's, so that the loom models in
//! `loom-tests/` explore every interleaving of the real limiter code. No other module imports
//! `std::sync::atomic` directly, and `std::sync::Arc` only where `arc-swap` requires std's own.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex};

/// `std`'s atomics under every cfg, for process-wide state that loom never models (the coarse
/// clock's shared time, written by a real background thread).
pub(crate) use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};

/// Whether this is a loom build: the models shrink a few bounds (retry counts, spare room) so that
/// every path they guard is explored.
pub(crate) const LOOM: bool = cfg!(loom);

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
/// A hint to the CPU inside a retry loop; under loom, a point where the model lets another thread
/// run (a bare spin would make the model loop forever).
#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
