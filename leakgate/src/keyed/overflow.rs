//! What a [`KeyedLimiter`](crate::KeyedLimiter) answers a key that finds no room: the overflow
//! policy, its shared bucket, and the counts of both outcomes.

use super::page::Page;
use super::slot::Found;
use crate::gcra::Rate;
use crate::quota::Quota;
use crate::sync::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// What a [`KeyedLimiter`](crate::KeyedLimiter) does with a request of a new key when every
/// slot that key may use holds a busy bucket (the table is full of active keys).
///
/// With [`Deny`](OverflowPolicy::Deny) (the default), such requests are denied, so a sweep of
/// distinct keys that fills the table locks every further new key out until a bucket empties.
/// With [`SharedBucket`](OverflowPolicy::SharedBucket), they are checked instead against one
/// bucket with its own quota, shared by every key that finds no room: they get some service, and
/// together never more than that quota. Either way an active key's bucket is never dropped to
/// make room, and [`overflow_denials`](crate::KeyedLimiter::overflow_denials) and
/// [`overflow_admissions`](crate::KeyedLimiter::overflow_admissions) count the outcomes.
///
/// ```
/// use leakgate::{KeyedLimiter, ManualClock, OverflowPolicy, Quota};
/// // 64 slots (50 keys and a quarter more), each key 1 per hour; keys that find no room share
/// // 10 per second.
/// let keyed = KeyedLimiter::<u64, _>::with_capacity_and_clock(Quota::per_hour(1)?, 50, ManualClock::new())
///     .with_overflow(OverflowPolicy::SharedBucket(Quota::per_second(10)?));
/// let admitted = (0..1000u64).filter(|k| keyed.check(k).is_ok()).count();
/// assert_eq!(admitted, 64 + 10); // a bucket per slot, then the shared bucket's burst
/// assert_eq!(keyed.overflow_admissions(), 10);
/// assert_eq!(keyed.overflow_denials(), 1000 - 74);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OverflowPolicy {
    /// Deny the request: `remaining() = 0`, `retry_after() = Some(T)` of the keys' quota.
    #[default]
    Deny,
    /// Check the request against one bucket with this quota, shared by every key that finds no
    /// room; its decision (and its `remaining()`, `reset_after()` and `retry_after()`) is the
    /// answer. A cost above that quota's burst is denied as with [`Deny`](OverflowPolicy::Deny).
    SharedBucket(Quota),
}

/// A policy, with what it needs to run and its counts.
pub(super) struct Overflow<K> {
    pub(super) policy: OverflowPolicy,
    /// The bucket of [`OverflowPolicy::SharedBucket`].
    pub(super) shared: Option<SharedBucket<K>>,
    /// Written only on the overflow path; alone on their line so they never slow checks.
    counts: CachePadded<Counts>,
}

struct Counts {
    /// Requests of keys with no room that were denied.
    denied: AtomicU64,
    /// Requests of keys with no room that the shared bucket admitted.
    admitted: AtomicU64,
}

/// The shared overflow bucket: one slot that never changes key, checked exactly as a key's.
pub(super) struct SharedBucket<K> {
    pub(super) rate: Rate,
    pub(super) burst: u64,
    /// One group, of which slot 0 is the bucket.
    page: Page<K>,
}

impl<K> SharedBucket<K> {
    /// The bucket as a found slot: one that never changes key, so its version stays 0.
    pub(super) fn slot(&self) -> Found<'_, K> {
        Found::new(&self.page, 0, 0, 0)
    }
}

impl<K> Overflow<K> {
    pub(super) fn new(policy: OverflowPolicy) -> Self {
        let shared = match policy {
            OverflowPolicy::Deny => None,
            OverflowPolicy::SharedBucket(quota) => Some(SharedBucket {
                rate: quota.rate(),
                burst: quota.burst(),
                page: Page::single(),
            }),
        };
        let counts = Counts { denied: AtomicU64::new(0), admitted: AtomicU64::new(0) };
        Overflow { policy, shared, counts: CachePadded::new(counts) }
    }

    /// Counts one request of a key with no room.
    pub(super) fn count(&self, admitted: bool) {
        let counter = if admitted { &self.counts.admitted } else { &self.counts.denied };
        // Relaxed: a statistics counter.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn denied(&self) -> u64 {
        // Relaxed: a statistics counter.
        self.counts.denied.load(Ordering::Relaxed)
    }

    pub(super) fn admitted(&self) -> u64 {
        // Relaxed: a statistics counter.
        self.counts.admitted.load(Ordering::Relaxed)
    }
}
