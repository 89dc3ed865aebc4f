//! [`Leases`]: how long a lease may live and how many slots hold them, and the lease size that
//! follows from a quota.

use super::slot::{MAX_UNITS, TICK_SHIFT};
use crate::quota::Quota;
use core::time::Duration;

/// The shortest span a lease may live: 16 ticks of the slot's clock (16.4 µs).
const MIN_SPAN_NS: u64 = 16 << TICK_SHIFT;
/// The longest: one second.
const MAX_SPAN_NS: u64 = 1_000_000_000;
/// The most slots a limiter has.
const MAX_SLOTS: usize = 1024;

/// How a [`LeasedLimiter`](crate::LeasedLimiter) leases: the span a lease lives and the number
/// of slots.
///
/// A lease holds at most `span` of the quota's units (`count * span / period`), so a slow rate
/// takes no leases and decides every check exactly. All slots together hold at most that many,
/// and at most half the burst: each slot's lease is `min(rate * span, burst / 2) / slots` units
/// (at most 65,534), and a lease of fewer than 2 units is none.
///
/// ```
/// use leakgate::Leases;
/// use std::time::Duration;
/// let leases = Leases::new().span(Duration::from_micros(500)).slots(8);
/// assert_eq!(leases.span_of(), Duration::from_micros(500));
/// assert_eq!(leases.slots_of(), 8);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leases {
    span_ns: u64,
    slots: usize,
}

impl Leases {
    /// A span of 1 ms, and one slot per core this process may use (rounded up to a power of
    /// two, at least 2, at most 64).
    ///
    /// ```
    /// let leases = leakgate::Leases::new();
    /// assert_eq!(leases.span_of(), std::time::Duration::from_millis(1));
    /// assert!(leases.slots_of().is_power_of_two());
    /// ```
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Leases { span_ns: 1_000_000, slots: cores.clamp(2, 64).next_power_of_two() }
    }

    /// How long a lease lives after it was charged, clamped to 16.4 µs ..= 1 s. A unit is never
    /// spent later than this after it was taken from the shared bucket, and unspent units are
    /// dropped then.
    ///
    /// ```
    /// use std::time::Duration;
    /// let leases = leakgate::Leases::new().span(Duration::from_secs(60));
    /// assert_eq!(leases.span_of(), Duration::from_secs(1));
    /// ```
    pub fn span(self, span: Duration) -> Self {
        let ns = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        Leases { span_ns: ns.clamp(MIN_SPAN_NS, MAX_SPAN_NS), ..self }
    }

    /// How many slots hold leases, rounded up to a power of two, 1 ..= 1024. Threads are spread
    /// over them in the order they first check; threads sharing a slot share its lease.
    ///
    /// ```
    /// assert_eq!(leakgate::Leases::new().slots(3).slots_of(), 4);
    /// assert_eq!(leakgate::Leases::new().slots(0).slots_of(), 1);
    /// ```
    pub fn slots(self, slots: usize) -> Self {
        Leases { slots: slots.clamp(1, MAX_SLOTS).next_power_of_two(), ..self }
    }

    /// The span a lease lives.
    ///
    /// ```
    /// assert!(leakgate::Leases::new().span_of() > std::time::Duration::ZERO);
    /// ```
    pub fn span_of(&self) -> Duration {
        Duration::from_nanos(self.span_ns)
    }

    /// The number of slots.
    ///
    /// ```
    /// assert!(leakgate::Leases::new().slots_of() >= 2);
    /// ```
    pub fn slots_of(&self) -> usize {
        self.slots
    }

    pub(crate) fn span_ns(&self) -> u64 {
        self.span_ns
    }

    /// The units one slot's lease takes under `quota`: 0 when leases are off for it.
    pub(crate) fn lease_units(&self, quota: &Quota) -> u64 {
        let (count, period_ns, burst) = quota.rate().quota_parts();
        let in_span = u128::from(count) * u128::from(self.span_ns) / u128::from(period_ns.max(1));
        let all = u64::try_from(in_span).unwrap_or(u64::MAX).min(burst / 2);
        let each = (all / self.slots as u64).min(MAX_UNITS);
        if each < 2 {
            0
        } else {
            each
        }
    }
}

impl Default for Leases {
    /// [`Leases::new`].
    fn default() -> Self {
        Leases::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_lease_follows_the_rate_and_half_the_burst() {
        let leases = Leases::new().slots(4);
        let q = |s: &str| s.parse::<Quota>().unwrap();
        // 1 ms of 1M/s is 1,000 units, over 4 slots.
        assert_eq!(leases.lease_units(&q("1000000/s burst 1000000")), 250);
        // Half of a burst of 400, over 4 slots.
        assert_eq!(leases.lease_units(&q("1000000/s burst 400")), 50);
        // 1 ms of 1k/s is one unit: no leases.
        assert_eq!(leases.lease_units(&q("1000/s burst 1000")), 0);
        // Capped by the slot's count.
        assert_eq!(leases.lease_units(&q("100000000000/s burst 1000000000000")), MAX_UNITS);
    }
}
