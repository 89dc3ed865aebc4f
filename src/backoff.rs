//! What a thread does after losing a compare-and-swap on a bucket's state word: spin for a while,
//! twice as long after each further loss, so the winner keeps the cache line long enough to
//! finish, and the losers do not all come back at once.
//!
//! # Why the cap is 2^8 spins
//!
//! The cap sets how long the losers can stay away when many threads hammer one word. Measured
//! with `leakgate bench --threads 2,8,16` (one shared limiter, every check admitted, median
//! ns/decision of 9 rounds) on a 16-core Intel Xeon: a cap of 2^6 spins (crossbeam's `Backoff`,
//! used before) gave 41, 81 and 166 ns at 2, 8 and 16 threads; 2^8 gave 40, 47 and 54; no
//! backoff at all gave 76, 87 and 104. Caps of 2^2 and 2^4 were worse than 2^6 everywhere from
//! 4 threads up. On the 2-core dev machine, 2^6 and 2^8 are level.
//!
//! # What it does not bound
//!
//! A retry loop on one word is lock-free, not wait-free: under saturation one thread can keep
//! losing. Per-check latency of one limiter hammered by 16 threads on that Xeon (a scratch
//! program timing every check, six runs): with 2^8, p50 53 to 65 ns and p99.99 4 to 8 µs, but
//! the slowest check took 0.6 to 1.1 s; with 2^6 (two runs), p50 150 to 170 ns, p99.99 about
//! 3 ms, slowest 0.3 to 0.4 s. Reloading the word after a wait, so that the retry is not doomed
//! by a stale value, cut the slowest check to 2 to 12 ms but pushed p50 to 470 to 830 ns and
//! throughput down to governor's or below, so it was not kept.

use std::cell::Cell;
// A CPU hint, not a scheduling point: under loom the retried CAS is what gets scheduled.
use std::hint::spin_loop;

/// The longest wait, in spins, is `2^MAX_STEP`.
const MAX_STEP: u32 = 8;

/// Exponential backoff for compare-and-swap retry loops; one per loop, never shared.
///
/// ```text
/// let backoff = Backoff::new();
/// while word.compare_exchange_weak(old, new, Relaxed, Relaxed).is_err() {
///     backoff.spin();
/// }
/// ```
pub(crate) struct Backoff {
    step: Cell<u32>,
}

impl Backoff {
    #[inline]
    pub(crate) fn new() -> Self {
        Backoff { step: Cell::new(0) }
    }

    /// Spins `2^step` times and lengthens the next wait, up to `2^MAX_STEP` spins.
    #[inline]
    pub(crate) fn spin(&self) {
        let step = self.step.get();
        for _ in 0..1u32 << step {
            spin_loop();
        }
        self.step.set((step + 1).min(MAX_STEP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_then_stop_growing() {
        let backoff = Backoff::new();
        let steps: Vec<u32> = (0..12)
            .map(|_| {
                let step = backoff.step.get();
                backoff.spin();
                step
            })
            .collect();
        assert_eq!(steps, [0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 8, 8]);
    }
}
