//! [`LgQuota`]: a quota as plain numbers, built from text ([`lg_quota_parse`]) or numbers
//! ([`lg_quota_new`], [`lg_quota_bytes`]), and checked again by every constructor that takes one.

use crate::raw;
use crate::status::{guard, Error, LgStatus, LG_OK};
use leakgate::Quota;
use std::ffi::c_char;
use std::time::Duration;

/// A quota: `count` units per `period_ns` nanoseconds, at most `burst` units at once; units are
/// bytes when `bytes` is 1 (a byte quota: a packet of `L` bytes costs `L`), anything else when 0.
///
/// Plain data: C may fill one itself. Every function that takes one checks it as
/// [`lg_quota_new`] does and returns [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) for one that is not
/// valid, so a hand-made quota is never trusted.
///
/// ```
/// use leakgate_ffi::{lg_quota_parse, LgQuota, LG_OK};
/// let mut q = LgQuota::default();
/// let text = "10 MB/s burst 64 KiB";
/// let status = unsafe { lg_quota_parse(text.as_ptr().cast(), text.len(), &mut q, std::ptr::null_mut(), 0) };
/// assert_eq!(status, LG_OK);
/// assert_eq!((q.count, q.period_ns, q.burst, q.bytes), (10_000_000, 1_000_000_000, 65_536, 1));
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LgQuota {
    /// Units per period; at least 1.
    pub count: u64,
    /// The period in nanoseconds; at least 1.
    pub period_ns: u64,
    /// The most units at once; at least 1 (0 only as an srTCM's CBS: see
    /// [`lg_srtcm_new`](crate::lg_srtcm_new)).
    pub burst: u64,
    /// 1 for a byte quota, 0 otherwise.
    pub bytes: u8,
}

impl LgQuota {
    /// The quota these numbers describe, checked.
    pub(crate) fn to_quota(self) -> Result<Quota, Error> {
        let period = Duration::from_nanos(self.period_ns);
        let built = match self.bytes {
            0 => Quota::new(self.count, period, self.burst),
            1 => Quota::bytes(self.count, period, self.burst),
            _ => return Err(Error::Argument),
        };
        built.map_err(|_| Error::Quota)
    }

    fn of(quota: Quota) -> Self {
        LgQuota {
            count: quota.count(),
            // A quota's period is at most u64::MAX nanoseconds.
            period_ns: u64::try_from(quota.period().as_nanos()).unwrap_or(u64::MAX),
            burst: quota.burst(),
            bytes: u8::from(quota.is_bytes()),
        }
    }
}

/// Reads and checks the quota `p` points to.
pub(crate) fn read(p: *const LgQuota) -> Result<Quota, Error> {
    raw::read(p)?.to_quota()
}

/// Parses a quota string (leakgate's syntax: `"100/s"`, `"5/minute burst 1"`, `"10 MB/s burst
/// 64 KiB"`, `"1 Gbit/s burst 1 MB"`) into `*out`.
///
/// `text` is `len` bytes of UTF-8 (no NUL needed), or, with `len` =
/// [`LG_NUL_TERMINATED`](crate::LG_NUL_TERMINATED) (`SIZE_MAX`), a NUL-terminated string.
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) for text that does not parse or a
/// quota out of range (then, when `err` is not NULL and `err_len` > 0, the reason is written to
/// `err` as a NUL-terminated string of at most `err_len` bytes, cut if longer), or
/// [`LG_ERR_NULL`](crate::LG_ERR_NULL) / [`LG_ERR_ARGUMENT`](crate::LG_ERR_ARGUMENT) (not UTF-8).
/// `*out` is written only on success.
///
/// # Safety
/// See [the pointer rules](crate#pointers): `text` as described, `out` writable, `err` NULL or
/// writable for `err_len` bytes.
///
/// ```
/// use leakgate_ffi::{lg_quota_parse, LgQuota, LG_ERR_QUOTA, LG_NUL_TERMINATED};
/// let (mut q, mut err) = (LgQuota::default(), [0u8; 256]);
/// let status = unsafe {
///     lg_quota_parse(c"10/fortnight".as_ptr(), LG_NUL_TERMINATED, &mut q, err.as_mut_ptr().cast(), err.len())
/// };
/// assert_eq!(status, LG_ERR_QUOTA);
/// let reason = std::ffi::CStr::from_bytes_until_nul(&err).unwrap().to_str().unwrap();
/// assert!(reason.contains("fortnight"), "{reason}");
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_quota_parse(
    text: *const c_char,
    len: usize,
    out: *mut LgQuota,
    err: *mut c_char,
    err_len: usize,
) -> LgStatus {
    guard(|| {
        let text = std::str::from_utf8(raw::text(text, len)?).map_err(|_| Error::Argument)?;
        match text.parse::<Quota>() {
            Ok(quota) => {
                raw::write(out, LgQuota::of(quota))?;
                Ok(LG_OK)
            }
            Err(e) => {
                write_message(err, err_len, &e.to_string())?;
                Err(Error::Quota)
            }
        }
    })
}

/// Writes `message` to `err` as a NUL-terminated string of at most `err_len` bytes, cut at a
/// character boundary; nothing when `err` is NULL or `err_len` is 0.
fn write_message(err: *mut c_char, err_len: usize, message: &str) -> Result<(), Error> {
    if err.is_null() || err_len == 0 {
        return Ok(());
    }
    let buf = raw::slice_mut(err.cast::<u8>(), err_len)?;
    let mut end = message.len().min(err_len - 1);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    buf[..end].copy_from_slice(&message.as_bytes()[..end]);
    buf[end] = 0;
    Ok(())
}

/// `count` units per `period_ns` nanoseconds, at most `burst` at once, checked, into `*out`.
///
/// Returns [`LG_OK`], or [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) for a count, period or burst of
/// zero, more than 10^11 units a second, or a bucket (`burst * period / count`) too long to keep
/// exact (about 95 to 480 years), or [`LG_ERR_NULL`](crate::LG_ERR_NULL).
///
/// # Safety
/// `out` is writable ([the pointer rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::{lg_quota_new, LgQuota, LG_ERR_QUOTA, LG_OK};
/// let mut q = LgQuota::default();
/// assert_eq!(unsafe { lg_quota_new(100, 1_000_000_000, 20, &mut q) }, LG_OK); // 100/s burst 20
/// assert_eq!(unsafe { lg_quota_new(0, 1_000_000_000, 20, &mut q) }, LG_ERR_QUOTA);
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_quota_new(
    count: u64,
    period_ns: u64,
    burst: u64,
    out: *mut LgQuota,
) -> LgStatus {
    build(LgQuota { count, period_ns, burst, bytes: 0 }, out)
}

/// A byte quota: `count` bytes per `period_ns` nanoseconds, at most `burst` bytes at once,
/// checked (as [`lg_quota_new`], and at most 5 * 10^10 bytes a second: 400 Gbit/s), into `*out`.
///
/// # Safety
/// `out` is writable ([the pointer rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::{lg_quota_bytes, LgQuota, LG_ERR_QUOTA, LG_OK};
/// let mut q = LgQuota::default();
/// assert_eq!(unsafe { lg_quota_bytes(125_000_000, 1_000_000_000, 1_000_000, &mut q) }, LG_OK);
/// assert_eq!(unsafe { lg_quota_bytes(60_000_000_000, 1_000_000_000, 1500, &mut q) }, LG_ERR_QUOTA);
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_quota_bytes(
    count: u64,
    period_ns: u64,
    burst: u64,
    out: *mut LgQuota,
) -> LgStatus {
    build(LgQuota { count, period_ns, burst, bytes: 1 }, out)
}

fn build(quota: LgQuota, out: *mut LgQuota) -> LgStatus {
    guard(|| {
        let quota = quota.to_quota()?;
        raw::write(out, LgQuota::of(quota))?;
        Ok(LG_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LG_ERR_ARGUMENT, LG_ERR_NULL, LG_ERR_QUOTA, LG_NUL_TERMINATED};
    use std::ptr::{null, null_mut};

    fn parse(text: &str) -> (LgStatus, LgQuota, String) {
        let (mut q, mut err) = (LgQuota::default(), [0xAAu8; 16]);
        let status = unsafe {
            lg_quota_parse(text.as_ptr().cast(), text.len(), &mut q, err.as_mut_ptr().cast(), 16)
        };
        let message = std::ffi::CStr::from_bytes_until_nul(&err)
            .map(|m| m.to_string_lossy().into_owned())
            .unwrap_or_default();
        (status, q, message)
    }

    #[test]
    fn text_parses_into_numbers_and_round_trips() {
        let (status, q, _) = parse("1 Gbit/s burst 1 MB");
        assert_eq!(status, LG_OK);
        assert_eq!(
            q,
            LgQuota { count: 125_000_000, period_ns: 1_000_000_000, burst: 1_000_000, bytes: 1 }
        );
        assert_eq!(q.to_quota().unwrap().to_string(), "125 MB/s burst 1 MB");
        let (status, q, _) = parse("3/s");
        assert_eq!((status, q.count, q.burst, q.bytes), (LG_OK, 3, 3, 0));
    }

    #[test]
    fn bad_text_is_an_error_with_a_cut_message() {
        for bad in ["", "10/fortnight", "0/s", "1/s burst 0", "999999999999/ns", "hello"] {
            let (status, q, message) = parse(bad);
            assert_eq!(status, LG_ERR_QUOTA, "{bad:?}");
            assert_eq!(q, LgQuota::default(), "out untouched for {bad:?}");
            assert!(!message.is_empty() && message.len() <= 15, "{bad:?}: {message:?}");
        }
    }

    #[test]
    fn nul_terminated_text_and_null_pointers() {
        let mut q = LgQuota::default();
        let ok = unsafe {
            lg_quota_parse(c"5/minute".as_ptr(), LG_NUL_TERMINATED, &mut q, null_mut(), 0)
        };
        assert_eq!((ok, q.count, q.period_ns), (LG_OK, 5, 60_000_000_000));
        let null_text = unsafe { lg_quota_parse(null(), 3, &mut q, null_mut(), 0) };
        assert_eq!(null_text, LG_ERR_NULL);
        let null_cstr = unsafe { lg_quota_parse(null(), LG_NUL_TERMINATED, &mut q, null_mut(), 0) };
        assert_eq!(null_cstr, LG_ERR_NULL);
        let null_out = unsafe { lg_quota_parse(c"5/s".as_ptr(), 3, null_mut(), null_mut(), 0) };
        assert_eq!(null_out, LG_ERR_NULL);
        let not_utf8 = [0xffu8, b'/', b's'];
        let bad = unsafe { lg_quota_parse(not_utf8.as_ptr().cast(), 3, &mut q, null_mut(), 0) };
        assert_eq!(bad, LG_ERR_ARGUMENT);
        // Length 0 with a NULL pointer is the empty string: a quota error, not a NULL one.
        let empty = unsafe { lg_quota_parse(null(), 0, &mut q, null_mut(), 0) };
        assert_eq!(empty, LG_ERR_QUOTA);
    }

    #[test]
    fn numbers_are_checked() {
        let mut q = LgQuota::default();
        let second = 1_000_000_000;
        unsafe {
            assert_eq!(lg_quota_new(10, second, 5, &mut q), LG_OK);
            assert_eq!(q, LgQuota { count: 10, period_ns: second, burst: 5, bytes: 0 });
            assert_eq!(lg_quota_new(0, second, 5, null_mut()), LG_ERR_QUOTA);
            assert_eq!(lg_quota_new(10, 0, 5, &mut q), LG_ERR_QUOTA);
            assert_eq!(lg_quota_new(10, second, 0, &mut q), LG_ERR_QUOTA);
            assert_eq!(lg_quota_new(u64::MAX, 1, 1, &mut q), LG_ERR_QUOTA);
            assert_eq!(lg_quota_new(1, u64::MAX, u64::MAX, &mut q), LG_ERR_QUOTA);
            assert_eq!(lg_quota_new(10, second, 5, null_mut()), LG_ERR_NULL);
            assert_eq!(lg_quota_bytes(50_000_000_001, second, 1500, &mut q), LG_ERR_QUOTA);
            assert_eq!(lg_quota_bytes(50_000_000_000, second, 1500, &mut q), LG_OK);
            assert_eq!(q.bytes, 1);
        }
        let odd = LgQuota { bytes: 2, ..q };
        assert_eq!(odd.to_quota(), Err(Error::Argument));
    }
}
