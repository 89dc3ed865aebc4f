//! [`SystemClock`]: the wall clock, for callers that supply the time themselves.

use leakgate::Clock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch from the system's wall clock: the clock to give
/// [`Builder::caller_clock`](crate::Builder::caller_clock) when Redis may not read `TIME` in a
/// script. Every server sharing a limit must keep its wall clock in sync (NTP); a server whose
/// clock runs ahead spends the others' share sooner, one that runs behind is refused longer.
///
/// ```
/// use leakgate::Clock;
/// let ns = leakgate_redis::SystemClock.now_ns();
/// assert!(ns > 1_600_000_000 * 1_000_000_000); // after 2020
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }
}
