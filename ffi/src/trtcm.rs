//! [`LgTrTcm`]: RFC 2698's two-rate three-colour marker (leakgate's `TrTcm`).

use crate::clock::ProcessClock;
use crate::color::{color_aware, guard_color, LgColor};
use crate::quota::{self, LgQuota};
use crate::raw;
use crate::status::{guard, guard_unit, Error, LgStatus, LG_OK};
use leakgate::TrTcm;

/// An RFC 2698 trTCM: a peak rate (PIR) and burst (PBS) and a committed rate (CIR) and burst
/// (CBS), lock-free, shared by any number of threads (C: `lg_trtcm`, opaque). Made by
/// [`lg_trtcm_new`], freed by [`lg_trtcm_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut pir, mut cir, mut meter) = (LgQuota::default(), LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(2_000_000, 1_000_000_000, 4500, &mut pir);
///     lg_quota_bytes(1_000_000, 1_000_000_000, 1500, &mut cir);
///     assert_eq!(lg_trtcm_new(&pir, &cir, &mut meter), LG_OK);
///     let now = lg_now_ns();
///     assert_eq!(lg_trtcm_color_blind_at(meter, 1500, now), LG_GREEN);
///     assert_eq!(lg_trtcm_color_blind_at(meter, 1500, now), LG_YELLOW);
///     assert_eq!(lg_trtcm_color_blind_at(meter, 1500, now), LG_YELLOW);
///     assert_eq!(lg_trtcm_color_blind_at(meter, 1500, now), LG_RED);
///     lg_trtcm_free(meter);
/// }
/// ```
pub struct LgTrTcm(pub(crate) TrTcm<ProcessClock>);

/// Makes a trTCM of PIR and PBS `*peak` and CIR and CBS `*committed`, its buckets full, on the
/// process clock, and writes its handle to `*out`.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) (a quota that is not valid, a peak
/// rate below the committed rate, or quotas of different units: one in bytes, the other not),
/// or [`LG_ERR_NULL`](crate::LG_ERR_NULL).
///
/// # Safety
/// `peak` and `committed` readable, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_new(
    peak: *const LgQuota,
    committed: *const LgQuota,
    out: *mut *mut LgTrTcm,
) -> LgStatus {
    guard(|| {
        let (peak, committed) = (quota::read(peak)?, quota::read(committed)?);
        raw::write_handle(out, || {
            TrTcm::with_clock(peak, committed, ProcessClock).map(LgTrTcm).map_err(|_| Error::Quota)
        })?;
        Ok(LG_OK)
    })
}

/// Frees a trTCM. NULL does nothing. Call it once, after every other call on it has returned.
///
/// # Safety
/// `meter` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_free(meter: *mut LgTrTcm) {
    guard_unit(|| raw::free(meter));
}

/// The colour of a packet of `bytes` metered now, colour-blind: [`LG_RED`](crate::LG_RED) if
/// the peak bucket holds less than `bytes`, else [`LG_YELLOW`](crate::LG_YELLOW) if the
/// committed bucket does, else [`LG_GREEN`](crate::LG_GREEN), taking what that colour takes
/// (RFC 2698); [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter. Lock-free.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_blind(meter: *const LgTrTcm, bytes: u64) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind(bytes)))
}

/// [`lg_trtcm_color_blind`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made by
/// the caller (once per burst of packets, say).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_blind_at(
    meter: *const LgTrTcm,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at(bytes, now_ns)))
}

/// The colour of a packet of `bytes` that arrives coloured `pre`, metered now, colour-aware
/// (RFC 2698): red stays red (taking nothing); yellow is yellow if the peak bucket pays, else
/// red; green as [`lg_trtcm_color_blind`]. [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL
/// meter or a `pre` other than 0, 1, 2.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_aware(
    meter: *const LgTrTcm,
    bytes: u64,
    pre: LgColor,
) -> LgColor {
    color_aware(meter, pre, None, |m, pre, now| m.0.color_aware_at(bytes, pre, now))
}

/// [`lg_trtcm_color_aware`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_aware_at(
    meter: *const LgTrTcm,
    bytes: u64,
    pre: LgColor,
    now_ns: u64,
) -> LgColor {
    color_aware(meter, pre, Some(now_ns), |m, pre, now| m.0.color_aware_at(bytes, pre, now))
}

/// The RFC's token counts at `now_ns`: what the peak bucket (`*tp`) and the committed bucket
/// (`*tc`) hold. Takes nothing. Either pointer may be NULL.
///
/// # Safety
/// `meter` a live handle, `tp` and `tc` NULL or writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_tokens_at(
    meter: *const LgTrTcm,
    now_ns: u64,
    tp: *mut u64,
    tc: *mut u64,
) -> LgStatus {
    guard(|| {
        raw::write_pair_optional(tp, tc, raw::handle(meter)?.0.tokens_at(now_ns));
        Ok(LG_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        lg_now_ns, LG_COLOR_ERROR, LG_ERR_NULL, LG_ERR_QUOTA, LG_GREEN, LG_RED, LG_YELLOW,
    };
    use std::ptr::{null, null_mut};

    const SECOND: u64 = 1_000_000_000;

    fn bytes(rate: u64, burst: u64) -> LgQuota {
        LgQuota { count: rate, period_ns: SECOND, burst, bytes: 1 }
    }

    #[test]
    fn colours_follow_rfc_2698() {
        let mut m = null_mut();
        let (mut tp, mut tc) = (0, 0);
        unsafe {
            assert_eq!(lg_trtcm_new(&bytes(2000, 2000), &bytes(1000, 1000), &mut m), LG_OK);
            let now = lg_now_ns();
            assert_eq!(lg_trtcm_color_blind_at(m, 1000, now), LG_GREEN);
            assert_eq!(lg_trtcm_color_blind_at(m, 600, now), LG_YELLOW);
            assert_eq!(lg_trtcm_color_aware_at(m, 400, LG_RED, now), LG_RED);
            assert_eq!(lg_trtcm_color_aware_at(m, 300, LG_YELLOW, now), LG_YELLOW);
            assert_eq!(lg_trtcm_color_blind_at(m, 101, now), LG_RED);
            assert_eq!(lg_trtcm_tokens_at(m, now, &mut tp, &mut tc), LG_OK);
            assert_eq!((tp, tc), (100, 0));
            assert_eq!(lg_trtcm_tokens_at(m, now + SECOND, &mut tp, &mut tc), LG_OK);
            assert_eq!((tp, tc), (2000, 1000));
            assert_eq!(lg_trtcm_color_blind(m, 2001), LG_RED); // more than PBS, whenever
            assert_eq!(lg_trtcm_color_aware(m, 100, LG_YELLOW), LG_YELLOW);
            lg_trtcm_free(m);
        }
    }

    #[test]
    fn bad_arguments_are_codes() {
        let mut m = null_mut();
        let requests = LgQuota { bytes: 0, ..bytes(2000, 2000) };
        unsafe {
            // The peak below the committed rate; units that differ; a zero rate.
            assert_eq!(lg_trtcm_new(&bytes(1000, 1000), &bytes(2000, 2000), &mut m), LG_ERR_QUOTA);
            assert_eq!(lg_trtcm_new(&requests, &bytes(1000, 1000), &mut m), LG_ERR_QUOTA);
            assert_eq!(lg_trtcm_new(&bytes(0, 1000), &bytes(0, 1000), &mut m), LG_ERR_QUOTA);
            assert_eq!(lg_trtcm_new(null(), &bytes(1000, 1000), &mut m), LG_ERR_NULL);
            assert_eq!(lg_trtcm_new(&bytes(1000, 1000), null(), &mut m), LG_ERR_NULL);
            assert_eq!(
                lg_trtcm_new(&bytes(1000, 1000), &bytes(1000, 1000), null_mut()),
                LG_ERR_NULL
            );
            assert!(m.is_null());
            assert_eq!(lg_trtcm_color_blind(null(), 1), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_color_blind_at(null(), 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_color_aware_at(null(), 1, LG_GREEN, 0), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_tokens_at(null(), 0, null_mut(), null_mut()), LG_ERR_NULL);
            assert_eq!(lg_trtcm_new(&bytes(1000, 1000), &bytes(1000, 1000), &mut m), LG_OK);
            assert_eq!(lg_trtcm_color_aware(m, 1, 7), LG_COLOR_ERROR);
            lg_trtcm_free(m);
        }
    }
}
