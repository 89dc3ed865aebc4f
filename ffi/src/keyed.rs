//! [`LgKeyed`]: one bucket per `uint64_t` key (leakgate's `KeyedLimiter<u64>`).

use crate::clock::ProcessClock;
use crate::quota::{self, LgQuota};
use crate::raw;
use crate::report::{decision, LgReport};
use crate::status::{guard, guard_unit, Error, LgStatus, LG_OK};
use leakgate::{Admitted, Denied, KeyedLimiter, DEFAULT_CAPACITY, MAX_CAPACITY};

/// One bucket per `uint64_t` key, all under one quota, in a bounded lock-free table that forgets
/// idle keys by itself (C: `lg_keyed`, opaque). Made by [`lg_keyed_new`], freed by
/// [`lg_keyed_free`]. Each key answers exactly as its own [`LgLimiter`](crate::LgLimiter) would.
///
/// ```
/// use leakgate_ffi::*;
/// use std::ptr::null_mut;
/// let (mut q, mut keyed) = (LgQuota::default(), null_mut());
/// unsafe {
///     lg_quota_new(1, 1_000_000_000, 1, &mut q); // 1/s per key
///     assert_eq!(lg_keyed_new(&q, 1000, &mut keyed), LG_OK);
///     assert_eq!(lg_keyed_check(keyed, 7, null_mut()), LG_OK);
///     assert_eq!(lg_keyed_check(keyed, 7, null_mut()), LG_DENIED);
///     assert_eq!(lg_keyed_check(keyed, 8, null_mut()), LG_OK); // key 8 has its own bucket
///     lg_keyed_free(keyed);
/// }
/// ```
pub struct LgKeyed(pub(crate) KeyedLimiter<u64, ProcessClock>);

/// The capacity C asked for: 0 for leakgate's default (2^18 keys), at most 2^30.
pub(crate) fn capacity(asked: usize) -> Result<usize, Error> {
    match asked {
        0 => Ok(DEFAULT_CAPACITY),
        n if n <= MAX_CAPACITY => Ok(n),
        _ => Err(Error::Argument),
    }
}

/// A keyed limiter table of `*quota` on the process clock, holding at least `capacity` keys
/// with busy buckets at once (0: the default, 2^18), into `*out`.
pub(crate) fn new_table<K: std::hash::Hash + Eq + Clone + Send + Sync>(
    quota: *const LgQuota,
    asked: usize,
) -> Result<KeyedLimiter<K, ProcessClock>, Error> {
    let quota = quota::read(quota)?;
    KeyedLimiter::try_with_capacity_and_clock(quota, capacity(asked)?, ProcessClock)
        .map_err(|_| Error::Argument)
}

/// Makes a keyed limiter of `*quota` (every key's bucket starts empty: a full burst available)
/// on the process clock, holding at least `capacity` keys with busy buckets at once (rounded up
/// to a power of two, a quarter more first up to 65,536 keys; 0 for the default, 2^18 keys;
/// memory is allocated as keys arrive), and writes its handle to `*out`.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA),
/// [`LG_ERR_ARGUMENT`](crate::LG_ERR_ARGUMENT) for a capacity above 2^30, or
/// [`LG_ERR_NULL`](crate::LG_ERR_NULL). `*out` is written only on success.
///
/// # Safety
/// `quota` readable, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_new(
    quota: *const LgQuota,
    capacity: usize,
    out: *mut *mut LgKeyed,
) -> LgStatus {
    guard(|| {
        raw::write_handle(out, || Ok(LgKeyed(new_table(quota, capacity)?)))?;
        Ok(LG_OK)
    })
}

/// Frees a keyed limiter. NULL does nothing. Call it once, after every other call on it has
/// returned.
///
/// # Safety
/// `keyed` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_free(keyed: *mut LgKeyed) {
    guard_unit(|| raw::free(keyed));
}

/// Checks one unit for `key` now: [`lg_keyed_check_n`] with `n` = 1.
///
/// # Safety
/// As [`lg_keyed_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_check(
    keyed: *const LgKeyed,
    key: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, report, move |k| k.check_n(&key, 1))
}

/// Checks a request of cost `n` for `key` now, with the meaning of
/// [`lg_limiter_check_n`](crate::lg_limiter_check_n) for that key's bucket:
/// [`LG_OK`](crate::LG_OK) (taken) or [`LG_DENIED`](crate::LG_DENIED) (nothing taken), `*report`
/// filled unless `report` is NULL. A key the table does not hold is inserted (the only case
/// that takes a lock, briefly); when the table is full of busy keys a new key is denied.
///
/// # Safety
/// `keyed` a live handle, `report` NULL or writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_check_n(
    keyed: *const LgKeyed,
    key: u64,
    n: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, report, move |k| k.check_n(&key, n))
}

/// [`lg_keyed_check`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made by the
/// caller.
///
/// # Safety
/// As [`lg_keyed_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_check_at(
    keyed: *const LgKeyed,
    key: u64,
    now_ns: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, report, move |k| k.check_n_at(&key, 1, now_ns))
}

/// [`lg_keyed_check_n`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made by the
/// caller (once per burst, say).
///
/// # Safety
/// As [`lg_keyed_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_check_n_at(
    keyed: *const LgKeyed,
    key: u64,
    n: u64,
    now_ns: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, report, move |k| k.check_n_at(&key, n, now_ns))
}

/// The body of every check: `decide` on the table, as a status and a report (see
/// `limiter::check`).
#[inline(always)]
fn check(
    keyed: *const LgKeyed,
    report: *mut LgReport,
    decide: impl FnOnce(&KeyedLimiter<u64, ProcessClock>) -> Result<Admitted, Denied>,
) -> LgStatus {
    guard(move || Ok(decision(decide(&raw::handle(keyed)?.0), report)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LG_DENIED, LG_ERR_ARGUMENT, LG_ERR_NULL, LG_ERR_QUOTA};
    use std::ptr::{null, null_mut};

    const HOUR: u64 = 3_600_000_000_000;

    #[test]
    fn keys_have_their_own_buckets() {
        let q = LgQuota { count: 1, period_ns: HOUR, burst: 2, bytes: 0 };
        let (mut keyed, mut r) = (null_mut(), LgReport::default());
        unsafe {
            assert_eq!(lg_keyed_new(&q, 0, &mut keyed), LG_OK);
            assert_eq!(lg_keyed_check_n(keyed, u64::MAX, 2, &mut r), LG_OK);
            assert_eq!(r.remaining, 0);
            assert_eq!(lg_keyed_check(keyed, u64::MAX, &mut r), LG_DENIED);
            assert_eq!(lg_keyed_check(keyed, 0, &mut r), LG_OK);
            assert_eq!(r.remaining, 1);
            let now = crate::lg_now_ns();
            assert_eq!(lg_keyed_check_at(keyed, 1, now, &mut r), LG_OK);
            assert_eq!((r.remaining, r.reset_after_ns), (1, HOUR));
            assert_eq!(lg_keyed_check_n_at(keyed, 1, 2, now, &mut r), LG_DENIED);
            assert_eq!((r.remaining, r.retry_after_ns), (1, HOUR));
            assert_eq!(lg_keyed_check_n_at(keyed, 1, 1, now + HOUR, &mut r), LG_OK);
            assert_eq!(r.remaining, 1);
            lg_keyed_free(keyed);
        }
    }

    #[test]
    fn bad_arguments_are_codes() {
        let q = LgQuota { count: 1, period_ns: HOUR, burst: 2, bytes: 0 };
        let zero_burst = LgQuota { burst: 0, ..q };
        let mut keyed = null_mut();
        unsafe {
            assert_eq!(lg_keyed_new(&zero_burst, 0, &mut keyed), LG_ERR_QUOTA);
            assert_eq!(lg_keyed_new(&q, MAX_CAPACITY + 1, &mut keyed), LG_ERR_ARGUMENT);
            assert_eq!(lg_keyed_new(null(), 0, &mut keyed), LG_ERR_NULL);
            assert_eq!(lg_keyed_new(&q, 0, null_mut()), LG_ERR_NULL);
            assert!(keyed.is_null());
            assert_eq!(lg_keyed_check(null(), 1, null_mut()), LG_ERR_NULL);
            assert_eq!(lg_keyed_check_n(null(), 1, 1, null_mut()), LG_ERR_NULL);
            assert_eq!(lg_keyed_check_at(null(), 1, 0, null_mut()), LG_ERR_NULL);
            assert_eq!(lg_keyed_check_n_at(null(), 1, 1, 0, null_mut()), LG_ERR_NULL);
            lg_keyed_free(null_mut());
        }
    }
}
