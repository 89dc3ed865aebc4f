//! Per-check latency: every decision timed with two raw TSC reads, counted in a histogram.
//!
//! Throughput hides a check that waits long while others win; this measures each one. The timer
//! is `quanta`'s raw counter (`rdtsc` on x86), read right before and after the decision and
//! scaled to nanoseconds outside the timed span; a histogram with 64 sub-buckets per power of two
//! (within 1.6 %) keeps memory fixed whatever the number of checks, and the slowest check is kept
//! exactly.

use crate::Workload;
use std::hint::black_box;
use std::sync::Barrier;

/// Values below this are counted exactly, one bucket each.
const EXACT: u64 = 128;
/// Sub-buckets per power of two above `EXACT`: 2^6.
const SUB_BITS: u32 = 6;
const SUBS: usize = 1 << SUB_BITS;
/// `EXACT` exact buckets, then 64 for each power of two from 2^7 to 2^63.
const BUCKETS: usize = EXACT as usize + (64 - 7) * SUBS;

/// Counts of latencies in nanoseconds, with a fixed relative resolution.
///
/// ```
/// use leakgate_baselines::LatencyHistogram;
/// let mut h = LatencyHistogram::new();
/// for ns in [10, 20, 30, 40, 1000] {
///     h.record(ns);
/// }
/// assert_eq!(h.count(), 5);
/// assert_eq!(h.quantile(0.5), 30);
/// assert_eq!(h.max(), 1000);
/// ```
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    count: u64,
    max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    ///
    /// ```
    /// assert_eq!(leakgate_baselines::LatencyHistogram::new().count(), 0);
    /// ```
    pub fn new() -> Self {
        LatencyHistogram { counts: vec![0; BUCKETS], count: 0, max: 0 }
    }

    fn index(ns: u64) -> usize {
        if ns < EXACT {
            return ns as usize;
        }
        let msb = 63 - ns.leading_zeros(); // >= 7
        let sub = (ns >> (msb - SUB_BITS)) as usize & (SUBS - 1);
        EXACT as usize + (msb as usize - 7) * SUBS + sub
    }

    /// The largest value counted in bucket `index`.
    fn upper_bound(index: usize) -> u64 {
        if index < EXACT as usize {
            return index as u64;
        }
        let msb = 7 + ((index - EXACT as usize) / SUBS) as u32;
        let sub = ((index - EXACT as usize) % SUBS) as u64;
        let width = 1u64 << (msb - SUB_BITS);
        ((1u64 << msb) | (sub << (msb - SUB_BITS))).saturating_add(width - 1)
    }

    /// Counts one latency.
    ///
    /// ```
    /// let mut h = leakgate_baselines::LatencyHistogram::new();
    /// h.record(u64::MAX);
    /// assert_eq!(h.max(), u64::MAX);
    /// ```
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[Self::index(ns)] += 1;
        self.count += 1;
        self.max = self.max.max(ns);
    }

    /// Adds another histogram's counts to this one.
    ///
    /// ```
    /// use leakgate_baselines::LatencyHistogram;
    /// let (mut a, mut b) = (LatencyHistogram::new(), LatencyHistogram::default());
    /// a.record(1);
    /// b.record(2);
    /// a.merge(&b);
    /// assert_eq!((a.count(), a.max()), (2, 2));
    /// ```
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    /// How many latencies were counted.
    ///
    /// ```
    /// assert_eq!(leakgate_baselines::LatencyHistogram::new().count(), 0);
    /// ```
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The slowest latency counted, exactly.
    ///
    /// ```
    /// assert_eq!(leakgate_baselines::LatencyHistogram::new().max(), 0);
    /// ```
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The latency at quantile `q` (0.5 for the median, 0.9999 for p99.99): the upper end of the
    /// bucket holding it (at most 1.6 % above the true value), never above the maximum.
    ///
    /// ```
    /// let mut h = leakgate_baselines::LatencyHistogram::new();
    /// (1..=10_000).for_each(|ns| h.record(ns));
    /// let p99 = h.quantile(0.99);
    /// assert!((9_900..=10_000).contains(&p99), "{p99}");
    /// ```
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::upper_bound(index).min(self.max);
            }
        }
        self.max
    }
}

/// Runs `per_thread` decisions on each of `threads` threads sharing `work`, timing every one, and
/// returns all their latencies in one histogram.
///
/// ```
/// use leakgate_baselines::{time_each_check, Scenario};
/// let lim = Scenario::Allowed.leakgate(leakgate::TscClock::new());
/// let h = time_each_check(&lim, 2, 1_000);
/// assert_eq!(h.count(), 2_000);
/// assert!(h.quantile(0.5) <= h.max());
/// ```
pub fn time_each_check<W: Workload + ?Sized>(
    work: &W,
    threads: usize,
    per_thread: u64,
) -> LatencyHistogram {
    let timer = quanta::Clock::new();
    let barrier = Barrier::new(threads);
    let per_thread_histograms: Vec<LatencyHistogram> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|thread| {
                let (timer, barrier) = (&timer, &barrier);
                s.spawn(move || {
                    let mut histogram = LatencyHistogram::new();
                    let mut decide = work.on_thread(thread);
                    barrier.wait();
                    for step in 0..per_thread {
                        let start = timer.raw();
                        black_box(decide(step));
                        let end = timer.raw();
                        histogram.record(timer.delta_as_nanos(start, end));
                    }
                    histogram
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("bench thread panicked")).collect()
    });
    let mut all = LatencyHistogram::new();
    for histogram in &per_thread_histograms {
        all.merge(histogram);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::LatencyHistogram;

    #[test]
    fn buckets_cover_every_value_within_their_resolution() {
        for ns in (0..5_000).chain([1 << 20, (1 << 40) + 12_345, u64::MAX / 3, u64::MAX]) {
            let index = LatencyHistogram::index(ns);
            let upper = LatencyHistogram::upper_bound(index);
            assert!(upper >= ns, "{ns} above its bucket's bound {upper}");
            assert!((upper - ns) as f64 <= ns as f64 / 64.0, "{ns}: bound {upper} too far");
            if index > 0 {
                assert!(LatencyHistogram::upper_bound(index - 1) < ns, "{ns} in a later bucket");
            }
        }
    }
}
