//! [`LgReport`]: what a check reports beside its answer, written to an optional out-parameter.

use crate::raw;
use crate::status::{LgStatus, LG_DENIED, LG_OK};
use leakgate::{Admitted, Denied};
use std::time::Duration;

/// `retry_after_ns` of a request that can never conform (its cost is above the burst).
pub const LG_NEVER: u64 = u64::MAX;

/// What a check reports (leakgate's `Admitted` / `Denied`), in integers.
///
/// Pass a pointer to one as a check's `report` to have it filled, or NULL to skip the few
/// divisions it costs.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut q, mut lim, mut r) = (LgQuota::default(), std::ptr::null_mut(), LgReport::default());
/// unsafe {
///     lg_quota_new(10, 1_000_000_000, 10, &mut q); // 10/s
///     lg_limiter_new(&q, &mut lim);
///     let now = lg_now_ns();
///     assert_eq!(lg_limiter_check_n_at(lim, 4, now, &mut r), LG_OK);
///     assert_eq!((r.remaining, r.reset_after_ns, r.retry_after_ns), (6, 400_000_000, 0));
///     assert_eq!(lg_limiter_check_n_at(lim, 8, now, &mut r), LG_DENIED);
///     assert_eq!(r.retry_after_ns, 200_000_000); // 2 more units in 200 ms
///     assert_eq!(lg_limiter_check_n_at(lim, 11, now, &mut r), LG_DENIED);
///     assert_eq!(r.retry_after_ns, LG_NEVER); // more than the burst
///     lg_limiter_free(lim);
/// }
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LgReport {
    /// Units that would conform right now (after this decision).
    pub remaining: u64,
    /// Nanoseconds until the bucket is empty again (a full burst available).
    pub reset_after_ns: u64,
    /// For a denial: nanoseconds after which this same request would conform if nothing else is
    /// admitted meanwhile, or [`LG_NEVER`] (`UINT64_MAX`) when it never can. 0 for an admission.
    pub retry_after_ns: u64,
}

fn ns(d: Duration) -> u64 {
    // Below LG_NEVER whatever the duration: a real wait is never read as "never".
    u64::try_from(d.as_nanos()).unwrap_or(LG_NEVER).min(LG_NEVER - 1)
}

impl LgReport {
    fn admitted(ok: &Admitted) -> Self {
        LgReport {
            remaining: ok.remaining(),
            reset_after_ns: ns(ok.reset_after()),
            retry_after_ns: 0,
        }
    }

    fn denied(no: &Denied) -> Self {
        LgReport {
            remaining: no.remaining(),
            reset_after_ns: ns(no.reset_after()),
            retry_after_ns: no.retry_after().map_or(LG_NEVER, ns),
        }
    }
}

/// A check's status, its report written to `report` unless that is NULL.
#[inline(always)]
pub(crate) fn decision(result: Result<Admitted, Denied>, report: *mut LgReport) -> LgStatus {
    if !report.is_null() {
        write_report(&result, report);
    }
    match result {
        Ok(_) => LG_OK,
        Err(_) => LG_DENIED,
    }
}

/// The report of `result` written to `report` (not NULL): out of line, so that a check whose
/// caller asks for no report carries none of its divisions or registers.
#[inline(never)]
fn write_report(result: &Result<Admitted, Denied>, report: *mut LgReport) {
    raw::write_optional(report, || match result {
        Ok(ok) => LgReport::admitted(ok),
        Err(no) => LgReport::denied(no),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_carry_the_decision_figures() {
        let ok = Admitted::new(3, Duration::from_millis(5));
        let mut r = LgReport { remaining: 9, reset_after_ns: 9, retry_after_ns: 9 };
        assert_eq!(decision(Ok(ok), &mut r), LG_OK);
        assert_eq!(r, LgReport { remaining: 3, reset_after_ns: 5_000_000, retry_after_ns: 0 });
        let no = Denied::new(0, Duration::from_secs(1), Some(Duration::from_nanos(7)));
        assert_eq!(decision(Err(no), &mut r), LG_DENIED);
        assert_eq!(r.retry_after_ns, 7);
        let never = Denied::new(0, Duration::MAX, None);
        assert_eq!(decision(Err(never), std::ptr::null_mut()), LG_DENIED);
        assert_eq!(decision(Err(never), &mut r), LG_DENIED);
        assert_eq!((r.reset_after_ns, r.retry_after_ns), (LG_NEVER - 1, LG_NEVER));
    }
}
