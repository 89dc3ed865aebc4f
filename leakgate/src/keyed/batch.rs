//! Batch checks: a burst of keys decided at one clock reading, their buckets fetched together.
//!
//! # Implementation details
//!
//! A check of one key at a million keys waits on one cache miss (its group's lines), and a loop
//! of single checks waits on each in turn: the processor cannot start the next key's miss before
//! the clock read and the decision of the one before. A batch hashes a window of keys first and
//! touches each key's group ([`Group::touch`](super::group::Group::touch): one plain load whose
//! value is dropped), so the window's misses are all in flight together; then it decides each key
//! as a single check at `now_ns` would, in order. The answers are exactly those of the same
//! checks made one by one at that time, in that order (the decisions themselves are the same
//! code). Nothing is allocated: a window's hashes live on the stack.

use super::KeyedLimiter;
use crate::clock::Clock;
use std::borrow::Borrow;
use std::hash::Hash;

/// Keys hashed and touched ahead of their decisions: enough misses in flight to cover one's
/// latency, few enough that the first lines are still in cache when their keys are decided.
const WINDOW: usize = 16;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Checks a burst of requests at the time `now_ns` the caller gives (nanoseconds of this
    /// limiter's clock, as for [`check_n_at`](KeyedLimiter::check_n_at)): request `i` is
    /// `costs[i]` units of `keys[i]`'s bucket, and `admitted[i]` says whether it conformed. The
    /// answers are those of `check_n_at(keys[i], costs[i], now_ns)` made one by one, in order
    /// (a key named twice is charged twice); the buckets of a window of keys are fetched
    /// together first, so at a million keys a batch costs a fraction of the single checks.
    /// Decides `min(keys.len(), costs.len(), admitted.len())` requests and returns how many were
    /// admitted. Allocates nothing.
    ///
    /// ```
    /// use leakgate::{Clock, KeyedLimiter, ManualClock, Quota};
    /// // Each flow may send 3000 bytes at once, 1500 bytes a second.
    /// let flows = KeyedLimiter::with_clock(Quota::per_second(1500)?.with_burst(3000)?, ManualClock::new());
    /// let (keys, lens) = ([&1u64, &2, &1, &1], [1500u64, 64, 1500, 1]);
    /// let mut sent = [false; 4];
    /// let now = flows.clock().now_ns(); // once per receive burst
    /// assert_eq!(flows.check_batch_at(&keys, &lens, now, &mut sent), 3);
    /// assert_eq!(sent, [true, true, true, false]);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check_batch_at<Q>(
        &self,
        keys: &[&Q],
        costs: &[u64],
        now_ns: u64,
        admitted: &mut [bool],
    ) -> usize
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let len = keys.len().min(costs.len()).min(admitted.len());
        let mut count = 0;
        let mut hashes = [0u64; WINDOW];
        for start in (0..len).step_by(WINDOW) {
            let end = (start + WINDOW).min(len);
            for (hash, key) in hashes.iter_mut().zip(&keys[start..end]) {
                *hash = self.touch_key(*key);
            }
            for (i, &hash) in (start..end).zip(hashes.iter()) {
                let ok = self.check_hashed_at(keys[i], hash, costs[i], now_ns).is_ok();
                admitted[i] = ok;
                count += usize::from(ok);
            }
        }
        count
    }

    /// [`check_batch_at`](KeyedLimiter::check_batch_at) at one reading of the clock.
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, Quota};
    /// let flows = KeyedLimiter::<u64>::new(Quota::per_second(10)?);
    /// let mut admitted = [false; 3];
    /// assert_eq!(flows.check_batch(&[&1, &2, &3], &[1, 1, 11], &mut admitted), 2);
    /// assert_eq!(admitted, [true, true, false]);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check_batch<Q>(&self, keys: &[&Q], costs: &[u64], admitted: &mut [bool]) -> usize
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.check_batch_at(keys, costs, self.clock().now_ns(), admitted)
    }
}
