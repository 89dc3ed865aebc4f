//! Where time comes from: the [`Clock`] trait and the two production clocks built on `quanta`.

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

/// A monotonic source of nanoseconds, read on every decision.
///
/// `now_ns` counts nanoseconds since an origin of the clock's choosing (usually its creation).
/// A limiter stays correct if a clock goes backwards: it then never admits more than it would
/// have at the latest time it saw.
///
/// ```
/// use leakgate::{Clock, Limiter, Quota};
///
/// /// A clock that never moves: after the burst, nothing more is admitted.
/// struct Frozen;
/// impl Clock for Frozen {
///     fn now_ns(&self) -> u64 { 42 }
/// }
///
/// let lim = Limiter::with_clock(Quota::per_second(2)?, Frozen);
/// assert!(lim.check().is_ok());
/// assert!(lim.check().is_ok());
/// assert!(lim.check().is_err());
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin.
    fn now_ns(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    #[inline]
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

/// The default clock: the CPU's time-stamp counter, scaled to nanoseconds by `quanta`.
///
/// About 11 ns a read on a current x86 server, monotonic, nanosecond resolution. Where no
/// invariant TSC is available `quanta` falls back to the OS monotonic clock.
///
/// ```
/// use leakgate::{Clock, TscClock};
/// let clock = TscClock::new();
/// let a = clock.now_ns();
/// assert!(clock.now_ns() >= a);
/// ```
#[derive(Clone)]
pub struct TscClock {
    clock: quanta::Clock,
    /// The raw counter value at creation: `now_ns` counts from here.
    origin: u64,
}

impl TscClock {
    /// A clock whose origin is now.
    ///
    /// ```
    /// assert!(leakgate::TscClock::new().now_ns() < 1_000_000_000);
    /// # use leakgate::Clock;
    /// ```
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        TscClock { clock, origin }
    }
}

impl Default for TscClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for TscClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TscClock").field("now_ns", &self.now_ns()).finish()
    }
}

impl Clock for TscClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.clock.delta_as_nanos(self.origin, self.clock.raw())
    }
}

/// How often the shared upkeep thread refreshes [`CoarseClock`]'s time.
pub const COARSE_CLOCK_RESOLUTION: Duration = Duration::from_millis(1);

/// A cheap clock with about 1 ms resolution: a read is one relaxed load of a time that `quanta`'s
/// upkeep thread refreshes every [`COARSE_CLOCK_RESOLUTION`].
///
/// A read costs about 2 ns instead of the ~11 ns of [`TscClock`]. The trade-off: time advances in
/// ~1 ms steps, so within a step a limiter sees no time pass. It stays exact in what it admits
/// (never more than the quota at the time it sees), but admissions arrive in clumps of up to
/// `rate * 1 ms` units at each step, and reported waits are up to 1 ms late. Use it where rates are
/// well below 1000 per second per bucket, or where the cost of the clock dominates.
///
/// The first `CoarseClock` in a process starts the upkeep thread; it runs until the process exits.
/// If it cannot be started, reads fall back to the precise clock.
///
/// ```
/// use leakgate::{CoarseClock, Limiter, Quota};
/// let lim = Limiter::with_clock(Quota::per_second(100)?, CoarseClock::new());
/// assert!(lim.check().is_ok());
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone)]
pub struct CoarseClock {
    clock: quanta::Clock,
    origin: quanta::Instant,
    /// True when no upkeep thread runs: then reads use the precise clock.
    precise_fallback: bool,
}

/// Who keeps `quanta`'s recent time fresh in this process.
enum Upkeep {
    /// Our thread; the handle lives in a static, so it runs until the process exits.
    Ours(#[allow(dead_code)] quanta::Handle),
    /// Another part of the process started one first.
    Others,
    /// None could be started: coarse clocks read the precise clock instead.
    Failed,
}

static UPKEEP: OnceLock<Upkeep> = OnceLock::new();

fn upkeep_running() -> bool {
    let state = UPKEEP.get_or_init(|| match quanta::Upkeep::new(COARSE_CLOCK_RESOLUTION).start() {
        Ok(handle) => Upkeep::Ours(handle),
        Err(quanta::Error::UpkeepRunning) => Upkeep::Others,
        Err(quanta::Error::FailedToSpawnUpkeepThread(_)) => Upkeep::Failed,
    });
    !matches!(state, Upkeep::Failed)
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
        let precise_fallback = !upkeep_running();
        let clock = quanta::Clock::new();
        let origin = if precise_fallback { clock.now() } else { clock.recent() };
        CoarseClock { clock, origin, precise_fallback }
    }
}

impl Default for CoarseClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoarseClock").field("now_ns", &self.now_ns()).finish()
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        let now = if self.precise_fallback { self.clock.now() } else { self.clock.recent() };
        let elapsed = now.saturating_duration_since(self.origin);
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }
}
