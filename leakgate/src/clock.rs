//! Where time comes from: the [`Clock`] trait, and (with the feature `std`) the two production
//! clocks built on `quanta`: `tsc.rs` and `coarse.rs`.

#[cfg(feature = "std")]
mod coarse;
#[cfg(feature = "std")]
mod tsc;

#[cfg(feature = "std")]
pub use coarse::{CoarseClock, COARSE_CLOCK_RESOLUTION};
#[cfg(feature = "std")]
pub use tsc::TscClock;

/// A monotonic source of nanoseconds, read on every decision.
///
/// `now_ns` counts nanoseconds since an origin of the clock's choosing (usually its creation).
/// A limiter stays correct if a clock goes backwards: it then never admits more than it would
/// have at the latest time it saw.
///
/// Without the feature `std` the crate has no clock of its own: implement this on a hardware
/// timer, or on a time the caller sets (see the crate docs, "`no_std`").
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

#[cfg(feature = "alloc")]
impl<C: Clock + ?Sized> Clock for alloc::sync::Arc<C> {
    #[inline]
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}
