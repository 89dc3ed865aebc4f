//! The byte budget of the keys that clients make: every table of client-made buckets (the
//! `CL.THROTTLE` buckets, Envoy's descriptor overrides, the local fallback of `--redis`) takes
//! its keys' memory from one [`Budget`], so that no client, however many keys or quotas it
//! invents, grows the service past it. A new key that finds no room is refused, as a full table
//! refuses.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What one tracked key is charged for its entry: 80 bytes (a key of up to 22 bytes inside) in a
/// table that may be half empty after growing, so twice that, with a control byte each.
pub(crate) const ENTRY_OVERHEAD: usize = 2 * (80 + 1);

/// What a longer key's own allocation is charged beyond its bytes: the allocator's header and
/// rounding.
pub(crate) const HEAP_OVERHEAD: usize = 32;

/// The default budget: 256 MiB, about 62,000 keys of 4 KiB or 1.6 million short ones.
pub(crate) const DEFAULT_BYTES: usize = 256 << 20;

/// A byte budget shared by tables.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    /// Bytes charged to the keys held now, at most `limit`. Only changed by atomic
    /// read-modify-writes, so charges never pass the limit together; it guards no other memory
    /// (each table's entries are under their shard's lock), so `Relaxed` is enough throughout.
    used: AtomicUsize,
    /// New keys refused for want of room, since the start (a statistic).
    refused: AtomicU64,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Budget {
        Budget { limit, used: AtomicUsize::new(0), refused: AtomicU64::new(0) }
    }

    /// What a key of `len` bytes is charged: its entry, and its bytes when they do not fit in
    /// it.
    pub(crate) fn cost(len: usize) -> usize {
        if len <= super::key::INLINE {
            ENTRY_OVERHEAD
        } else {
            len.saturating_add(ENTRY_OVERHEAD + HEAP_OVERHEAD)
        }
    }

    /// Takes `bytes` if they fit, and says whether they did.
    pub(crate) fn try_take(&self, bytes: usize) -> bool {
        // Relaxed: see the field.
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .is_ok()
    }

    /// Gives back `bytes` taken before.
    pub(crate) fn give_back(&self, bytes: usize) {
        // Relaxed: see the field. Never below zero: only what was taken is given back.
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Counts a new key refused for want of room.
    pub(crate) fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes charged now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The limit, in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// New keys refused for want of room, since the start.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_never_pass_the_limit() {
        let budget = Budget::new(1000);
        assert!(budget.try_take(600));
        assert!(!budget.try_take(401));
        assert!(budget.try_take(400));
        assert!(!budget.try_take(1));
        budget.give_back(600);
        assert_eq!(budget.used(), 400);
        assert!(!budget.try_take(usize::MAX));
        assert_eq!(Budget::cost(usize::MAX), usize::MAX);
        assert_eq!(Budget::cost(0), Budget::cost(22));
        assert_eq!(Budget::cost(4000), 4000 + ENTRY_OVERHEAD + HEAP_OVERHEAD);
    }

    #[test]
    fn threads_together_never_pass_the_limit() {
        let budget = Budget::new(10_000);
        let taken = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        if budget.try_take(7) {
                            taken.fetch_add(7, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(taken.load(Ordering::Relaxed), budget.used());
        assert!(budget.used() <= 10_000 && budget.used() > 10_000 - 7);
    }
}
