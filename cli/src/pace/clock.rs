//! The clock `leakgate pace` runs on: the operating system's monotonic clock.
//!
//! The library's default `TscClock` scales the CPU's counter by a rate `quanta` calibrates at
//! start; on this kind of machine that scale was off by 30 to 140 parts per million, so a pacer
//! on it drifted by up to 0.14 ms a second against the system clock that its readers use. A
//! pacer reads the clock a few times per line, so the cheaper TSC buys nothing here: pace uses
//! `std::time::Instant` (`CLOCK_MONOTONIC`), and its rates are exact against that clock.

use leakgate::Clock;
use std::time::Instant;

/// Nanoseconds of `CLOCK_MONOTONIC` since the clock was made; clones share the origin.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    pub(crate) fn new() -> Self {
        MonotonicClock { origin: Instant::now() }
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
