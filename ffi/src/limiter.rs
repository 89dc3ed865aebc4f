//! [`LgLimiter`]: one bucket (leakgate's `Limiter`) behind an opaque handle.

use crate::clock::ProcessClock;
use crate::quota::{self, LgQuota};
use crate::raw;
use crate::report::{decision, LgReport};
use crate::status::{guard, guard_unit, LgStatus, LG_OK};
use leakgate::{Admitted, Denied, Limiter};

/// A rate limiter: one bucket, lock-free, shared by any number of threads (C: `lg_limiter`,
/// opaque). Made by [`lg_limiter_new`], freed by [`lg_limiter_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut q, mut lim) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     assert_eq!(lg_quota_parse(c"2/s".as_ptr(), LG_NUL_TERMINATED, &mut q, std::ptr::null_mut(), 0), LG_OK);
///     assert_eq!(lg_limiter_new(&q, &mut lim), LG_OK);
///     assert_eq!(lg_limiter_check(lim, std::ptr::null_mut()), LG_OK);
///     assert_eq!(lg_limiter_check(lim, std::ptr::null_mut()), LG_OK);
///     assert_eq!(lg_limiter_check(lim, std::ptr::null_mut()), LG_DENIED);
///     lg_limiter_free(lim);
/// }
/// ```
pub struct LgLimiter(pub(crate) Limiter<ProcessClock>);

/// Makes a limiter of `*quota` on the process clock ([`lg_now_ns`](crate::lg_now_ns)), its
/// bucket empty (a full burst available), and writes its handle to `*out`.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) for a quota that is not valid, or
/// [`LG_ERR_NULL`](crate::LG_ERR_NULL). `*out` is written only on success.
///
/// # Safety
/// `quota` readable, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_limiter_new(
    quota: *const LgQuota,
    out: *mut *mut LgLimiter,
) -> LgStatus {
    guard(|| {
        let quota = quota::read(quota)?;
        raw::write_handle(out, || Ok(LgLimiter(Limiter::with_clock(quota, ProcessClock))))?;
        Ok(LG_OK)
    })
}

/// Frees a limiter. NULL does nothing. Call it once, after every other call on the limiter, in
/// every thread, has returned.
///
/// # Safety
/// `limiter` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_limiter_free(limiter: *mut LgLimiter) {
    guard_unit(|| raw::free(limiter));
}

/// Checks one unit now: [`lg_limiter_check_n`] with `n` = 1.
///
/// # Safety
/// As [`lg_limiter_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_limiter_check(
    limiter: *const LgLimiter,
    report: *mut LgReport,
) -> LgStatus {
    check(limiter, report, |l| l.check_n(1))
}

/// Checks a request of cost `n` now (reading the process clock): takes `n` units if they
/// conform and returns [`LG_OK`](crate::LG_OK), or takes nothing and returns
/// [`LG_DENIED`](crate::LG_DENIED). `n` = 0 always conforms and takes nothing; `n` above the
/// burst is always denied, with `retry_after_ns` = [`LG_NEVER`](crate::LG_NEVER). Fills
/// `*report` unless `report` is NULL. Lock-free; any number of threads may check one limiter at
/// once. [`LG_ERR_NULL`](crate::LG_ERR_NULL) for a NULL limiter.
///
/// # Safety
/// `limiter` a live handle, `report` NULL or writable ([the pointer rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::*;
/// let (mut q, mut lim) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_new(10, 1_000_000_000, 10, &mut q);
///     lg_limiter_new(&q, &mut lim);
///     assert_eq!(lg_limiter_check_n(lim, 10, std::ptr::null_mut()), LG_OK);
///     assert_eq!(lg_limiter_check_n(lim, 0, std::ptr::null_mut()), LG_OK);
///     assert_eq!(lg_limiter_check_n(std::ptr::null(), 1, std::ptr::null_mut()), LG_ERR_NULL);
///     lg_limiter_free(lim);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_limiter_check_n(
    limiter: *const LgLimiter,
    n: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(limiter, report, move |l| l.check_n(n))
}

/// [`lg_limiter_check`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made by the
/// caller.
///
/// # Safety
/// As [`lg_limiter_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_limiter_check_at(
    limiter: *const LgLimiter,
    now_ns: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(limiter, report, move |l| l.check_n_at(1, now_ns))
}

/// [`lg_limiter_check_n`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made by the
/// caller (once per burst of requests, say) instead of reading the clock. A time earlier than
/// one the limiter has seen is a clock that went backwards: it never admits more than the latest
/// time would.
///
/// # Safety
/// As [`lg_limiter_check_n`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut q, mut lim) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_new(2, 1_000_000_000, 2, &mut q); // 2/s
///     lg_limiter_new(&q, &mut lim);
///     let now = lg_now_ns();
///     assert_eq!(lg_limiter_check_n_at(lim, 2, now, std::ptr::null_mut()), LG_OK);
///     assert_eq!(lg_limiter_check_at(lim, now, std::ptr::null_mut()), LG_DENIED);
///     assert_eq!(lg_limiter_check_at(lim, now + 500_000_000, std::ptr::null_mut()), LG_OK);
///     lg_limiter_free(lim);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_limiter_check_n_at(
    limiter: *const LgLimiter,
    n: u64,
    now_ns: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(limiter, report, move |l| l.check_n_at(n, now_ns))
}

/// The body of every check: `decide` on the limiter, its answer as a status and a report. The
/// closures are `move` and each extern function has its own `decide`, so the arguments reach
/// the guarded body by value, already specialised.
#[inline(always)]
fn check(
    limiter: *const LgLimiter,
    report: *mut LgReport,
    decide: impl FnOnce(&Limiter<ProcessClock>) -> Result<Admitted, Denied>,
) -> LgStatus {
    guard(move || Ok(decision(decide(&raw::handle(limiter)?.0), report)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LG_DENIED, LG_ERR_NULL, LG_ERR_QUOTA, LG_NEVER};
    use std::ptr::{null, null_mut};

    fn limiter(count: u64, burst: u64) -> *mut LgLimiter {
        let q = LgQuota { count, period_ns: 3_600_000_000_000, burst, bytes: 0 };
        let mut lim = null_mut();
        assert_eq!(unsafe { lg_limiter_new(&q, &mut lim) }, LG_OK);
        assert!(!lim.is_null());
        lim
    }

    #[test]
    fn a_burst_then_denials_with_reports() {
        let lim = limiter(1, 3); // one an hour, burst 3: the clock cannot refill it in a test
        let mut r = LgReport::default();
        unsafe {
            assert_eq!(lg_limiter_check_n(lim, 2, &mut r), LG_OK);
            assert_eq!(r.remaining, 1);
            assert_eq!(lg_limiter_check(lim, null_mut()), LG_OK);
            assert_eq!(lg_limiter_check(lim, &mut r), LG_DENIED);
            assert_eq!(r.remaining, 0);
            assert!(r.retry_after_ns > 3_500_000_000_000 && r.retry_after_ns <= 3_600_000_000_000);
            assert_eq!(lg_limiter_check_n(lim, 4, &mut r), LG_DENIED);
            assert_eq!(r.retry_after_ns, LG_NEVER);
            lg_limiter_free(lim);
        }
    }

    #[test]
    fn caller_time_gives_exact_reports_and_never_more_backwards() {
        let lim = limiter(3600, 3); // one a second, burst 3
        let mut r = LgReport::default();
        let now = crate::lg_now_ns() + 10_000_000_000;
        unsafe {
            assert_eq!(lg_limiter_check_n_at(lim, 2, now, &mut r), LG_OK);
            assert_eq!(
                r,
                LgReport { remaining: 1, reset_after_ns: 2_000_000_000, retry_after_ns: 0 }
            );
            assert_eq!(lg_limiter_check_n_at(lim, 3, now, &mut r), LG_DENIED);
            let expected = LgReport {
                remaining: 1,
                reset_after_ns: 2_000_000_000,
                retry_after_ns: 2_000_000_000,
            };
            assert_eq!(r, expected);
            assert_eq!(lg_limiter_check_at(lim, now, &mut r), LG_OK);
            // A second earlier: a clock gone back admits nothing more.
            assert_eq!(lg_limiter_check_at(lim, now - 1_000_000_000, &mut r), LG_DENIED);
            assert_eq!(lg_limiter_check_at(lim, now + 1_000_000_000, &mut r), LG_OK);
            assert_eq!(lg_limiter_check_n_at(null(), 1, now, &mut r), LG_ERR_NULL);
            assert_eq!(lg_limiter_check_at(null(), now, &mut r), LG_ERR_NULL);
            lg_limiter_free(lim);
        }
    }

    #[test]
    fn bad_arguments_are_codes() {
        let mut lim = null_mut();
        let zero_rate = LgQuota { count: 0, period_ns: 1, burst: 1, bytes: 0 };
        unsafe {
            assert_eq!(lg_limiter_new(&zero_rate, &mut lim), LG_ERR_QUOTA);
            assert!(lim.is_null());
            assert_eq!(lg_limiter_new(null(), &mut lim), LG_ERR_NULL);
            let q = LgQuota { count: 1, period_ns: 1, burst: 1, bytes: 0 };
            assert_eq!(lg_limiter_new(&q, null_mut()), LG_ERR_NULL);
            assert_eq!(lg_limiter_check(null(), null_mut()), LG_ERR_NULL);
            assert_eq!(lg_limiter_check_n(null(), 1, null_mut()), LG_ERR_NULL);
            lg_limiter_free(null_mut());
        }
    }

    #[test]
    fn threads_share_one_limiter() {
        let lim = limiter(1_000_000, 1000);
        // Shared as C shares it, a pointer in every thread (through a reference, which is Sync).
        let (shared, now): (&LgLimiter, u64) = (unsafe { &*lim }, crate::lg_now_ns());
        let admitted: u64 = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(move || {
                        let lim: *const LgLimiter = shared;
                        (0..400)
                            .filter(
                                |_| unsafe { lg_limiter_check_at(lim, now, null_mut()) } == LG_OK,
                            )
                            .count() as u64
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(admitted, 1000);
        unsafe { lg_limiter_free(lim) };
    }
}
