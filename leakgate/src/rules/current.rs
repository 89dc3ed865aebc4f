//! The rules in force, as checks read them: a [`SwapCell`], and in front of it a per-thread
//! cache so that a check does not pay the cell's load.
//!
//! # Implementation details
//!
//! An `arc-swap` load is lock-free but not free: it claims a thread-local debt slot with a
//! sequentially consistent write, confirms the pointer, and releases the slot when the guard
//! drops (measured about as much as the rest of a tracked key's check). The rules change only on
//! reload, so each thread keeps the last set it loaded, with the limiter's identity and the
//! reload count it was loaded at; a check reads the count (one load of a word written only by
//! reloads) and, if it has not moved, uses its own copy. A reload stores the new set and then
//! bumps the count (Release), so a thread that reads the new count (Acquire) loads at least that
//! set. A thread that read the old count just before uses the old set: the same as a check that
//! ran just before the reload, which the hand-over already covers (a moved bucket sends it on).
//!
//! The cache holds one set per thread (the last limiter it checked), so an idle thread keeps a
//! replaced set's tables alive until it checks again or exits. Under loom (whose threads share
//! one OS thread's locals) every check loads the cell.

use super::counters::thread_index;
use super::generation::Generation;
use crate::clock::Clock;
use crate::sync::{AtomicU64, Ordering, StdAtomicU64, StdOrdering, SwapCell, LOOM};
use std::sync::Arc;

pub(super) struct Current<C: Clock> {
    cell: SwapCell<Generation<C>>,
    /// This limiter's identity among all limiters of the process (for the per-thread cache).
    id: u64,
    /// How many sets have been stored; bumped after each store.
    stored: AtomicU64,
}

/// Limiters made so far in the process: the next identity.
static LIMITERS: StdAtomicU64 = StdAtomicU64::new(0);

impl<C: Clock + 'static> Current<C> {
    pub(super) fn new(first: Arc<Generation<C>>) -> Self {
        // Relaxed: a unique number is all that is needed.
        let id = LIMITERS.fetch_add(1, StdOrdering::Relaxed);
        let cell = SwapCell::empty();
        cell.store(Some(first));
        Current { cell, id, stored: AtomicU64::new(0) }
    }

    /// Puts `generation` in force.
    pub(super) fn store(&self, generation: Arc<Generation<C>>) {
        drop(self.cell.store(Some(generation)));
        // Release: a thread that reads the new count loads the set stored above, or a later one.
        self.stored.fetch_add(1, Ordering::Release);
    }

    /// The set in force, owned (for reloads and introspection).
    pub(super) fn load_full(&self) -> Arc<Generation<C>> {
        self.cell.load_full().unwrap_or_else(|| Arc::new(Generation::empty()))
    }

    /// Runs `f` on the set in force, with this thread's counter index (read with the set, so a
    /// check reads one thread-local for both).
    #[inline]
    pub(super) fn with<R>(&self, mut f: impl FnMut(&Arc<Generation<C>>, usize) -> R) -> R {
        if LOOM {
            return f(&self.load_full(), thread_index());
        }
        // Acquire: see the module docs.
        let stored = self.stored.load(Ordering::Acquire);
        let hit = CACHE.try_with(|cache| {
            let cache = cache.try_borrow().ok()?;
            let cached = cache.as_ref().filter(|c| c.limiter == self.id && c.stored == stored)?;
            let generation = cached.generation.downcast_ref::<Arc<Generation<C>>>()?;
            Some(f(generation, cached.thread))
        });
        match hit {
            Ok(Some(result)) => result,
            _ => self.miss(stored, f),
        }
    }

    /// Loads the set from the cell, remembers it for this thread, and runs `f` on it.
    #[cold]
    fn miss<R>(&self, stored: u64, mut f: impl FnMut(&Arc<Generation<C>>, usize) -> R) -> R {
        let thread = thread_index();
        let generation = self.load_full();
        let _ = CACHE.try_with(|cache| {
            if let Ok(mut cache) = cache.try_borrow_mut() {
                let generation = Box::new(generation.clone());
                *cache = Some(Cached { limiter: self.id, stored, thread, generation });
            }
        });
        f(&generation, thread)
    }
}

/// One thread's last set of rules: whose, at which store count.
struct Cached {
    limiter: u64,
    stored: u64,
    /// This thread's counter index (see `counters.rs`).
    thread: usize,
    /// An `Arc<Generation<C>>` for the limiter's clock type `C`.
    generation: Box<dyn std::any::Any>,
}

thread_local! {
    static CACHE: std::cell::RefCell<Option<Cached>> = const { std::cell::RefCell::new(None) };
}
