//! Per-rule counts of admitted, denied and denied-in-shadow requests, kept without a shared hot
//! cache line.
//!
//! # Implementation details
//!
//! Every thread that counts gets a small process-wide index, unique among the live threads (an
//! index freed by a thread that exits goes to the next thread that asks, lowest first). A rule's
//! counters have one cache-padded block of three counters per index below [`exclusive_blocks`],
//! plus one shared block. A thread whose index has a block of its own is its only writer, so it
//! counts with a plain load and store (no locked instruction, no line shared with another
//! writer); a thread past them adds to the shared block with `fetch_add`. A reader sums the
//! blocks. Under loom (where the models' threads share one OS thread's locals) there are no
//! blocks of one thread's own, and every count is a `fetch_add` on the shared block.

use crate::sync::{AtomicU64, Ordering, LOOM};
use crossbeam_utils::CachePadded;
use std::sync::{Mutex, OnceLock};

/// Which count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Count {
    Admitted = 0,
    Denied = 1,
    DeniedInShadow = 2,
}

/// One rule's counts, shared by every set of rules in force that has the rule's path.
pub(crate) struct RuleCounters {
    /// Blocks `0..exclusive_blocks()` belong to one thread each; the last is shared.
    blocks: Box<[CachePadded<[AtomicU64; 3]>]>,
}

/// How many threads at once count without `fetch_add`: four per core, at least 16, at most 256
/// (none under loom).
pub(crate) fn exclusive_blocks() -> usize {
    if LOOM {
        return 0;
    }
    static BLOCKS: OnceLock<usize> = OnceLock::new();
    *BLOCKS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        (cores * 4).clamp(16, 256)
    })
}

impl RuleCounters {
    pub(crate) fn new() -> Self {
        let blocks = (0..=exclusive_blocks())
            .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
            .collect();
        RuleCounters { blocks }
    }

    /// Counts one request.
    #[inline]
    pub(crate) fn add(&self, count: Count) {
        self.add_at(thread_index(), count);
    }

    /// Counts one request for the thread of index `index` (from [`thread_index`], read once for
    /// several counts).
    #[inline]
    pub(crate) fn add_at(&self, index: usize, count: Count) {
        match self.blocks.get(index) {
            Some(block) if index < self.blocks.len() - 1 => {
                let counter = &block[count as usize];
                // Relaxed load and store: this thread is the block's only writer (module docs);
                // readers need each value alone, and a u64 is never torn.
                counter.store(counter.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
            }
            _ => {
                let shared = &self.blocks[self.blocks.len() - 1];
                // Relaxed: a statistic; the add itself is atomic among the shared block's writers.
                shared[count as usize].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The total of one count.
    pub(crate) fn get(&self, count: Count) -> u64 {
        // Relaxed: each counter is read on its own; a sum taken while threads count is a value
        // between the totals before and after the read.
        let sum = self.blocks.iter().map(|block| block[count as usize].load(Ordering::Relaxed));
        sum.fold(0u64, u64::wrapping_add)
    }
}

/// Indices not held by a live thread: the next never handed out, and those given back.
struct Free {
    next: usize,
    returned: std::collections::BinaryHeap<std::cmp::Reverse<usize>>,
}

static FREE: Mutex<Free> =
    Mutex::new(Free { next: 0, returned: std::collections::BinaryHeap::new() });

/// A thread's index, given back when the thread exits.
struct ThreadIndex(usize);

impl ThreadIndex {
    fn take() -> Self {
        let mut free = FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = match free.returned.pop() {
            Some(std::cmp::Reverse(index)) => index,
            None => {
                free.next += 1;
                free.next - 1
            }
        };
        ThreadIndex(index)
    }
}

impl Drop for ThreadIndex {
    fn drop(&mut self) {
        // The mutex orders this thread's last counts before the next owner's first.
        let mut free = FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        free.returned.push(std::cmp::Reverse(self.0));
    }
}

thread_local! {
    static INDEX: ThreadIndex = ThreadIndex::take();
}

/// This thread's index (`usize::MAX`, the shared block, while the thread is exiting, and under
/// loom).
#[inline]
pub(crate) fn thread_index() -> usize {
    if LOOM {
        return usize::MAX;
    }
    INDEX.try_with(|index| index.0).unwrap_or(usize::MAX)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let counters = RuleCounters::new();
        let threads = exclusive_blocks() + 4; // some share the last block
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counters.add(Count::Admitted);
                    }
                    counters.add(Count::DeniedInShadow);
                });
            }
        });
        assert_eq!(counters.get(Count::Admitted), 1000 * threads as u64);
        assert_eq!(counters.get(Count::DeniedInShadow), threads as u64);
        assert_eq!(counters.get(Count::Denied), 0);
    }

    #[test]
    fn live_threads_hold_distinct_indices() {
        let barrier = std::sync::Barrier::new(8);
        let mut seen: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let index = thread_index();
                        barrier.wait(); // all alive at once
                        index
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 8);
    }
}

/// One rule's counters, for the counting benchmark only.
#[doc(hidden)]
pub struct BenchCounters(RuleCounters);

impl BenchCounters {
    /// Fresh counters.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        BenchCounters(RuleCounters::new())
    }

    /// Counts one admission, as a check does.
    #[inline]
    pub fn admitted(&self) {
        self.0.add(Count::Admitted);
    }

    /// The admissions counted.
    pub fn total(&self) -> u64 {
        self.0.get(Count::Admitted)
    }
}
