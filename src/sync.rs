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
