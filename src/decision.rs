//! What a decision reports: [`Admitted`] and [`Denied`], computed lazily from a few integers.
//!
//! A decision carries the bucket's backlog (`TAT' - t`, in the rate's units) and the rate's scale;
//! the divisions that turn those into `remaining()` and durations are done only when asked, so a
//! caller that only looks at `is_ok()` pays for none of them.

use crate::gcra::Scale;
use std::fmt;
use std::time::Duration;

/// A request that conformed: its units have been taken from the bucket.
///
/// ```
/// use leakgate::{Limiter, ManualClock, Quota};
/// let lim = Limiter::with_clock(Quota::per_second(10)?, ManualClock::new());
/// let ok = lim.check_n(4).unwrap();
/// assert_eq!(ok.remaining(), 6);
/// assert_eq!(ok.reset_after().as_millis(), 400);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// `max(TAT' - t, 0)` in units.
    backlog: u64,
    scale: Scale,
}

/// A request that did not conform; the bucket is unchanged.
///
/// ```
/// use leakgate::{Limiter, ManualClock, Quota};
/// let lim = Limiter::with_clock(Quota::per_second(10)?, ManualClock::new());
/// lim.check_n(10).unwrap();
/// let no = lim.check_n(2).unwrap_err();
/// assert_eq!(no.remaining(), 0);
/// assert_eq!(no.retry_after().unwrap().as_millis(), 200);
/// assert_eq!(lim.check_n(11).unwrap_err().retry_after(), None); // more than the burst
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    /// `max(TAT - t, 0)` in units.
    backlog: u64,
    /// Units of wait until this request would conform; `u64::MAX` when it never can.
    wait: u64,
    scale: Scale,
}

/// The `wait` of a request that can never conform.
const NEVER: u64 = u64::MAX;

impl Admitted {
    #[inline]
    pub(crate) fn new(backlog: u64, scale: Scale) -> Self {
        Admitted { backlog, scale }
    }

    /// Units that would conform right now, after this request.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(3)?, ManualClock::new());
    /// assert_eq!(lim.check().unwrap().remaining(), 2);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn remaining(&self) -> u64 {
        self.scale.remaining(self.backlog)
    }

    /// Time until the bucket is empty again (a full burst available), if nothing else is admitted.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(4)?, ManualClock::new());
    /// assert_eq!(lim.check_n(2).unwrap().reset_after().as_millis(), 500);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.scale.units_to_ns(self.backlog))
    }
}

impl Denied {
    #[inline]
    pub(crate) fn new(backlog: u64, wait: Option<u64>, scale: Scale) -> Self {
        Denied { backlog, wait: wait.unwrap_or(NEVER), scale }
    }

    /// Units that would conform right now.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(3)?, ManualClock::new());
    /// lim.check_n(2).unwrap();
    /// assert_eq!(lim.check_n(2).unwrap_err().remaining(), 1);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn remaining(&self) -> u64 {
        self.scale.remaining(self.backlog)
    }

    /// Time until the bucket is empty again, if nothing else is admitted.
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(2)?, ManualClock::new());
    /// lim.check_n(2).unwrap();
    /// assert_eq!(lim.check().unwrap_err().reset_after().as_secs(), 1);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.scale.units_to_ns(self.backlog))
    }

    /// The wait after which this same request would conform if nothing else is admitted, or `None`
    /// when it never can (its cost is above the burst, or the clock is past the limiter's range).
    ///
    /// ```
    /// # use leakgate::{Limiter, ManualClock, Quota};
    /// let lim = Limiter::with_clock(Quota::per_second(2)?, ManualClock::new());
    /// lim.check_n(2).unwrap();
    /// assert_eq!(lim.check().unwrap_err().retry_after().unwrap().as_millis(), 500);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        (self.wait != NEVER).then(|| Duration::from_nanos(self.scale.units_to_ns(self.wait)))
    }
}

impl fmt::Debug for Admitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admitted")
            .field("remaining", &self.remaining())
            .field("reset_after", &self.reset_after())
            .finish()
    }
}

impl fmt::Debug for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Denied")
            .field("remaining", &self.remaining())
            .field("reset_after", &self.reset_after())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry_after() {
            Some(wait) => write!(f, "rate limited: retry after {wait:?}"),
            None => {
                f.write_str("rate limited: the request exceeds the burst and can never conform")
            }
        }
    }
}

impl std::error::Error for Denied {}
