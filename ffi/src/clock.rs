//! The one clock every handle reads: [`lg_now_ns`], and the time base of every `*_at` function.

use leakgate::Clock;
use std::sync::OnceLock;

/// The process clock: nanoseconds since its first use, shared by every handle, so one reading
/// serves as the caller time of any of them.
///
/// leakgate's TSC clock (`quanta`) normally; under Miri, which cannot read the TSC, `std`'s
/// monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ProcessClock;

#[cfg(not(miri))]
fn source() -> &'static leakgate::TscClock {
    static SOURCE: OnceLock<leakgate::TscClock> = OnceLock::new();
    SOURCE.get_or_init(leakgate::TscClock::new)
}

#[cfg(miri)]
fn source() -> &'static MonotonicClock {
    static SOURCE: OnceLock<MonotonicClock> = OnceLock::new();
    SOURCE.get_or_init(|| MonotonicClock(std::time::Instant::now()))
}

/// `std`'s monotonic clock, for Miri.
#[cfg(miri)]
struct MonotonicClock(std::time::Instant);

#[cfg(miri)]
impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Clock for ProcessClock {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        source().now_ns()
    }
}

/// Nanoseconds since the process clock's origin (its first use): the clock every handle reads,
/// and the one the `*_at` functions' `now_ns` must come from. Monotonic, nanosecond resolution,
/// about 10 to 20 ns a read (the CPU's time-stamp counter, scaled). Thread-safe.
///
/// Read it once per burst of packets and pass it to the `*_at` functions, instead of letting
/// each check read it.
///
/// ```
/// use leakgate_ffi::lg_now_ns;
/// let a = lg_now_ns();
/// assert!(lg_now_ns() >= a);
/// ```
#[no_mangle]
pub extern "C" fn lg_now_ns() -> u64 {
    // A panic (none is known: the clock's first use calibrates it) reads as time 0, which is
    // never later than a real reading, so it can only make a limiter refuse.
    std::panic::catch_unwind(|| ProcessClock.now_ns()).unwrap_or(0)
}
