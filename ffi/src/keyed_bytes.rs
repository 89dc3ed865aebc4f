//! [`LgKeyedBytes`]: one bucket per byte-string key (leakgate's `KeyedLimiter<Vec<u8>>`).

use crate::clock::ProcessClock;
use crate::keyed::new_table;
use crate::quota::LgQuota;
use crate::raw;
use crate::report::{decision, LgReport};
use crate::status::{guard, guard_unit, LgStatus, LG_OK};
use leakgate::{Admitted, Denied, KeyedLimiter};

/// One bucket per key, keys being byte strings (an IP address, an API key, a 5-tuple: any
/// bytes, compared byte for byte), as [`LgKeyed`](crate::LgKeyed) (C: `lg_keyed_bytes`,
/// opaque). Made by [`lg_keyed_bytes_new`], freed by [`lg_keyed_bytes_free`]. A lookup copies
/// nothing; a key is copied once, when the table first inserts it.
///
/// ```
/// use leakgate_ffi::*;
/// use std::ptr::null_mut;
/// let (mut q, mut keyed) = (LgQuota::default(), null_mut());
/// unsafe {
///     lg_quota_new(1, 1_000_000_000, 1, &mut q); // 1/s per key
///     assert_eq!(lg_keyed_bytes_new(&q, 0, &mut keyed), LG_OK);
///     let alice = b"alice";
///     assert_eq!(lg_keyed_bytes_check(keyed, alice.as_ptr(), alice.len(), null_mut()), LG_OK);
///     assert_eq!(lg_keyed_bytes_check(keyed, alice.as_ptr(), alice.len(), null_mut()), LG_DENIED);
///     lg_keyed_bytes_free(keyed);
/// }
/// ```
pub struct LgKeyedBytes(pub(crate) KeyedLimiter<Vec<u8>, ProcessClock>);

/// Makes a keyed limiter with byte-string keys, as [`lg_keyed_new`](crate::lg_keyed_new) does
/// for `uint64_t` keys, and writes its handle to `*out`.
///
/// # Safety
/// `quota` readable, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_new(
    quota: *const LgQuota,
    capacity: usize,
    out: *mut *mut LgKeyedBytes,
) -> LgStatus {
    guard(|| {
        raw::write_handle(out, || Ok(LgKeyedBytes(new_table(quota, capacity)?)))?;
        Ok(LG_OK)
    })
}

/// Frees a keyed limiter with byte-string keys. NULL does nothing. Call it once, after every
/// other call on it has returned.
///
/// # Safety
/// `keyed` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_free(keyed: *mut LgKeyedBytes) {
    guard_unit(|| raw::free(keyed));
}

/// Checks one unit for the key of `key_len` bytes at `key`: [`lg_keyed_bytes_check_n`] with
/// `n` = 1.
///
/// # Safety
/// As [`lg_keyed_bytes_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_check(
    keyed: *const LgKeyedBytes,
    key: *const u8,
    key_len: usize,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, (key, key_len), report, |k, key| k.check_n(key, 1))
}

/// Checks a request of cost `n` for the key of `key_len` bytes at `key` (NULL only with
/// `key_len` 0: the empty key), as [`lg_keyed_check_n`](crate::lg_keyed_check_n).
///
/// # Safety
/// `keyed` a live handle, `key` readable for `key_len` bytes, `report` NULL or writable
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_check_n(
    keyed: *const LgKeyedBytes,
    key: *const u8,
    key_len: usize,
    n: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, (key, key_len), report, move |k, key| k.check_n(key, n))
}

/// [`lg_keyed_bytes_check`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made by
/// the caller.
///
/// # Safety
/// As [`lg_keyed_bytes_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_check_at(
    keyed: *const LgKeyedBytes,
    key: *const u8,
    key_len: usize,
    now_ns: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, (key, key_len), report, move |k, key| k.check_n_at(key, 1, now_ns))
}

/// [`lg_keyed_bytes_check_n`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made
/// by the caller (once per burst, say).
///
/// # Safety
/// As [`lg_keyed_bytes_check_n`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_check_n_at(
    keyed: *const LgKeyedBytes,
    key: *const u8,
    key_len: usize,
    n: u64,
    now_ns: u64,
    report: *mut LgReport,
) -> LgStatus {
    check(keyed, (key, key_len), report, move |k, key| k.check_n_at(key, n, now_ns))
}

/// The body of every check: `decide` on the table and the key, as a status and a report (see
/// `limiter::check`).
#[inline(always)]
fn check(
    keyed: *const LgKeyedBytes,
    (key, key_len): (*const u8, usize),
    report: *mut LgReport,
    decide: impl FnOnce(&KeyedLimiter<Vec<u8>, ProcessClock>, &[u8]) -> Result<Admitted, Denied>,
) -> LgStatus {
    guard(move || {
        let keyed = &raw::handle(keyed)?.0;
        Ok(decision(decide(keyed, raw::slice(key, key_len)?), report))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LG_DENIED, LG_ERR_NULL, LG_ERR_QUOTA};
    use std::ptr::{null, null_mut};

    const HOUR: u64 = 3_600_000_000_000;

    #[test]
    fn byte_keys_compare_by_content() {
        let q = LgQuota { count: 1, period_ns: HOUR, burst: 1, bytes: 0 };
        let mut keyed = null_mut();
        let (a, a_again) = (b"10.0.0.1".to_vec(), b"10.0.0.1".to_vec());
        unsafe {
            assert_eq!(lg_keyed_bytes_new(&q, 64, &mut keyed), LG_OK);
            assert_eq!(lg_keyed_bytes_check(keyed, a.as_ptr(), a.len(), null_mut()), LG_OK);
            let again = lg_keyed_bytes_check(keyed, a_again.as_ptr(), a_again.len(), null_mut());
            assert_eq!(again, LG_DENIED);
            assert_eq!(lg_keyed_bytes_check(keyed, a.as_ptr(), 7, null_mut()), LG_OK); // a prefix
            assert_eq!(lg_keyed_bytes_check(keyed, null(), 0, null_mut()), LG_OK); // the empty key
            assert_eq!(lg_keyed_bytes_check_n(keyed, null(), 0, 1, null_mut()), LG_DENIED);
            let (now, b) = (crate::lg_now_ns(), b"b");
            assert_eq!(lg_keyed_bytes_check_at(keyed, b.as_ptr(), 1, now, null_mut()), LG_OK);
            assert_eq!(
                lg_keyed_bytes_check_n_at(keyed, b.as_ptr(), 1, 1, now, null_mut()),
                LG_DENIED
            );
            let later = now + HOUR;
            assert_eq!(
                lg_keyed_bytes_check_n_at(keyed, b.as_ptr(), 1, 1, later, null_mut()),
                LG_OK
            );
            lg_keyed_bytes_free(keyed);
        }
    }

    #[test]
    fn bad_arguments_are_codes() {
        let q = LgQuota { count: 1, period_ns: HOUR, burst: 1, bytes: 0 };
        let mut keyed = null_mut();
        unsafe {
            assert_eq!(
                lg_keyed_bytes_new(&LgQuota { period_ns: 0, ..q }, 0, &mut keyed),
                LG_ERR_QUOTA
            );
            assert_eq!(lg_keyed_bytes_new(&q, 0, null_mut()), LG_ERR_NULL);
            assert_eq!(lg_keyed_bytes_new(&q, 0, &mut keyed), LG_OK);
            assert_eq!(lg_keyed_bytes_check(keyed, null(), 3, null_mut()), LG_ERR_NULL);
            assert_eq!(lg_keyed_bytes_check(null(), b"k".as_ptr(), 1, null_mut()), LG_ERR_NULL);
            lg_keyed_bytes_free(keyed);
            lg_keyed_bytes_free(null_mut());
        }
    }
}
