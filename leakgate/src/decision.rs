//! What a decision reports: [`Admitted`] and [`Denied`], computed lazily from a few integers.
//!
//! A decision of one bucket carries the bucket's backlog (`TAT' - t`, in the rate's units) and the
//! rate's scale; the divisions that turn those into `remaining()` and durations are done only when
//! asked, so a caller that only looks at `is_ok()` pays for none of them. A decision made of
//! several buckets, or by a limiter outside this crate, carries its figures ready-made
//! ([`Admitted::new`], [`Denied::new`]).

use crate::gcra::Scale;
use core::fmt;
use core::time::Duration;

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
    report: Report,
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
    report: Report,
}

/// What a decision reports, in one of two forms.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Report {
    /// A bucket's own figures, turned into counts and durations only when asked.
    Units {
        /// `max(TAT - t, 0)` in units (`TAT'`, after the decision, for an admission).
        backlog: u64,
        /// Units of wait until a denied request would conform; [`NEVER`] when it never can; 0
        /// for an admission.
        wait: u64,
        scale: Scale,
    },
    /// Figures already computed by whoever made the decision (several buckets combined, a
    /// limiter outside this crate).
    Given { remaining: u64, reset_after: Duration, retry_after: Option<Duration> },
}

/// The `wait` of a request that can never conform.
const NEVER: u64 = u64::MAX;

impl Report {
    fn remaining(&self) -> u64 {
        match *self {
            Report::Units { backlog, scale, .. } => scale.remaining(backlog),
            Report::Given { remaining, .. } => remaining,
        }
    }

    fn reset_after(&self) -> Duration {
        match *self {
            Report::Units { backlog, scale, .. } => {
                Duration::from_nanos(scale.units_to_ns(backlog))
            }
            Report::Given { reset_after, .. } => reset_after,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match *self {
            Report::Units { wait, scale, .. } => {
                (wait != NEVER).then(|| Duration::from_nanos(scale.units_to_ns(wait)))
            }
            Report::Given { retry_after, .. } => retry_after,
        }
    }
}

impl Admitted {
    /// An admission with a backlog of `backlog` units after it.
    #[inline]
    pub(crate) fn from_units(backlog: u64, scale: Scale) -> Self {
        Admitted { report: Report::Units { backlog, wait: 0, scale } }
    }

    /// An admission decided elsewhere (several buckets at once, another process), reporting the
    /// given figures. For limiters built on leakgate's types; a `Limiter` makes its own.
    ///
    /// ```
    /// use leakgate::Admitted;
    /// use std::time::Duration;
    /// let ok = Admitted::new(3, Duration::from_millis(700));
    /// assert_eq!((ok.remaining(), ok.reset_after()), (3, Duration::from_millis(700)));
    /// ```
    pub fn new(remaining: u64, reset_after: Duration) -> Self {
        Admitted { report: Report::Given { remaining, reset_after, retry_after: None } }
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
        self.report.remaining()
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
        self.report.reset_after()
    }
}

impl Denied {
    /// A denial with `backlog` units of state ahead of the clock, and `wait` units until it would
    /// conform (`None`: never).
    #[inline]
    pub(crate) fn from_units(backlog: u64, wait: Option<u64>, scale: Scale) -> Self {
        Denied { report: Report::Units { backlog, wait: wait.unwrap_or(NEVER), scale } }
    }

    /// A denial decided elsewhere (several buckets at once, another process), reporting the given
    /// figures; `retry_after: None` means the request can never conform.
    ///
    /// ```
    /// use leakgate::Denied;
    /// use std::time::Duration;
    /// let no = Denied::new(0, Duration::from_secs(2), Some(Duration::from_millis(250)));
    /// assert_eq!(no.retry_after(), Some(Duration::from_millis(250)));
    /// assert_eq!(no.reset_after(), Duration::from_secs(2));
    /// ```
    pub fn new(remaining: u64, reset_after: Duration, retry_after: Option<Duration>) -> Self {
        Denied { report: Report::Given { remaining, reset_after, retry_after } }
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
        self.report.remaining()
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
        self.report.reset_after()
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
        self.report.retry_after()
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

impl core::error::Error for Denied {}
