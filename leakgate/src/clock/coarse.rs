//! [`CoarseClock`]: one relaxed load of a process-wide time that a background thread refreshes.

use super::{Clock, TscClock};
use crate::sync::{StdAtomicU64, StdOrdering};
use std::sync::OnceLock;
use std::time::Duration;

/// How often [`CoarseClock`]'s upkeep thread refreshes the shared coarse time.
pub const COARSE_CLOCK_RESOLUTION: Duration = Duration::from_millis(1);

/// A cheap clock with about 1 ms resolution: a read is one relaxed load of a process-wide time that
/// a background thread refreshes from the TSC every [`COARSE_CLOCK_RESOLUTION`].
///
/// This is the design of `quanta`'s `Clock::recent()`, with the time kept as plain nanoseconds so
/// a read needs no conversion: about 1 ns instead of the ~11 ns of [`TscClock`]. The trade-off: time
/// advances in ~1 ms steps, so within a step a limiter sees no time pass. It stays exact in what it
/// admits (never more than the quota at the time it sees), but admissions arrive in clumps of up
/// to `rate * 1 ms` units at each step, and reported waits may be up to 1 ms early in real time.
/// Use it where per-bucket rates are well below 1000 per second, or where the cost of reading the
/// clock dominates.
///
/// The first `CoarseClock` in a process starts the upkeep thread (named `leakgate-coarse-clock`);
/// it runs until the process exits. If it cannot be started, reads fall back to the precise clock.
///
/// ```
/// use leakgate::{CoarseClock, Limiter, Quota};
/// let lim = Limiter::with_clock(Quota::per_second(100)?, CoarseClock::new());
/// assert!(lim.check().is_ok());
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug)]
pub struct CoarseClock {
    /// The shared coarse time at this clock's creation: `now_ns` counts from here.
    origin: u64,
    /// `Some` when no upkeep thread runs: then reads use this precise clock instead.
    fallback: Option<TscClock>,
}

/// The process-wide coarse time: nanoseconds of [`upkeep_clock`] as of its last refresh, written
/// only by the upkeep thread. A plain `std` atomic on purpose: it is process-wide clock state that
/// loom models never touch (they use `ManualClock`).
static COARSE_NS: StdAtomicU64 = StdAtomicU64::new(0);

/// The precise clock the upkeep thread samples, and whether the thread is running.
fn upkeep_clock() -> Option<&'static TscClock> {
    static UPKEEP: OnceLock<Option<TscClock>> = OnceLock::new();
    UPKEEP
        .get_or_init(|| {
            let clock = TscClock::new();
            let sampled = clock.clone();
            // Relaxed: readers need the value only, not any memory written before it.
            COARSE_NS.store(sampled.now_ns(), StdOrdering::Relaxed);
            std::thread::Builder::new()
                .name("leakgate-coarse-clock".into())
                .spawn(move || loop {
                    std::thread::sleep(COARSE_CLOCK_RESOLUTION);
                    COARSE_NS.store(sampled.now_ns(), StdOrdering::Relaxed);
                })
                .ok()
                .map(|_| clock)
        })
        .as_ref()
}

impl CoarseClock {
    /// A coarse clock whose origin is now; starts the upkeep thread if none runs yet.
    ///
    /// ```
    /// use leakgate::{Clock, CoarseClock};
    /// let c = CoarseClock::new();
    /// assert!(c.now_ns() < 1_000_000_000);
    /// ```
    pub fn new() -> Self {
        match upkeep_clock() {
            // Relaxed: see `COARSE_NS`.
            Some(_) => CoarseClock { origin: COARSE_NS.load(StdOrdering::Relaxed), fallback: None },
            None => CoarseClock { origin: 0, fallback: Some(TscClock::new()) },
        }
    }
}

impl Default for CoarseClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        match &self.fallback {
            // Relaxed: see `COARSE_NS`. The value never decreases (the TSC clock is monotonic).
            None => COARSE_NS.load(StdOrdering::Relaxed).saturating_sub(self.origin),
            Some(precise) => precise.now_ns(),
        }
    }
}
