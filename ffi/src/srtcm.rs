//! [`LgSrTcm`]: RFC 2697's single-rate three-colour marker (leakgate's `SrTcm`).

use crate::clock::ProcessClock;
use crate::color::{color_aware, guard_color, LgColor};
use crate::quota::LgQuota;
use crate::raw;
use crate::status::{guard, guard_unit, Error, LgStatus, LG_OK};
use leakgate::{Quota, SrTcm};

/// An RFC 2697 srTCM: a committed rate (CIR) and burst (CBS) and an excess burst (EBS),
/// lock-free, shared by any number of threads (C: `lg_srtcm`, opaque). Made by
/// [`lg_srtcm_new`], freed by [`lg_srtcm_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000, 1_000_000_000, 3000, &mut cir); // 1 MB/s, CBS 3000 bytes
///     assert_eq!(lg_srtcm_new(&cir, 1500, &mut meter), LG_OK); // EBS 1500 bytes
///     let now = lg_now_ns(); // once per burst of packets
///     assert_eq!(lg_srtcm_color_blind_at(meter, 1500, now), LG_GREEN);
///     assert_eq!(lg_srtcm_color_blind_at(meter, 1500, now), LG_GREEN);
///     assert_eq!(lg_srtcm_color_blind_at(meter, 1500, now), LG_YELLOW);
///     assert_eq!(lg_srtcm_color_blind_at(meter, 1500, now), LG_RED);
///     lg_srtcm_free(meter);
/// }
/// ```
pub struct LgSrTcm(pub(crate) SrTcm<ProcessClock>);

/// Makes an srTCM of CIR and CBS `*committed` (the quota's rate and burst; a byte quota meters
/// bytes) and EBS `ebs` (0: nothing is yellow), its buckets full, on the process clock, and
/// writes its handle to `*out`.
///
/// CBS may be 0 (`committed->burst = 0`, which only the srTCM constructors accept) when EBS is
/// not, as RFC 2697 and DPDK allow: then nothing is green, and a packet is yellow if the excess
/// bucket holds it, else red.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) (a quota that is not valid, a
/// burst CBS + EBS out of the quota's range, or CBS and EBS both 0: RFC 2697 needs one above
/// 0), or [`LG_ERR_NULL`](crate::LG_ERR_NULL).
///
/// # Safety
/// `committed` readable, `out` writable ([the pointer rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(46_000_000, 1_000_000_000, 2048, &mut cir);
///     cir.burst = 0; // CBS 0
///     assert_eq!(lg_srtcm_new(&cir, 0, &mut meter), LG_ERR_QUOTA); // EBS 0 too: refused
///     assert_eq!(lg_srtcm_new(&cir, 4096, &mut meter), LG_OK);
///     assert_eq!(lg_srtcm_color_blind_at(meter, 1500, 0), LG_YELLOW);
///     lg_srtcm_free(meter);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_new(
    committed: *const LgQuota,
    ebs: u64,
    out: *mut *mut LgSrTcm,
) -> LgStatus {
    guard(|| {
        let (cir, cbs) = read_committed(committed)?;
        raw::write_handle(out, || {
            SrTcm::with_bursts(cir, cbs, ebs, ProcessClock).map(LgSrTcm).map_err(|_| Error::Quota)
        })?;
        Ok(LG_OK)
    })
}

/// Reads an srTCM's committed quota: CIR (a checked quota of its count, period and units) and
/// CBS, its burst, which may be 0 here (RFC 2697); then the quota is checked with a burst of 1
/// and carries the rate only.
pub(crate) fn read_committed(p: *const LgQuota) -> Result<(Quota, u64), Error> {
    let raw = raw::read(p)?;
    let cir = LgQuota { burst: raw.burst.max(1), ..raw }.to_quota()?;
    Ok((cir, raw.burst))
}

/// Frees an srTCM. NULL does nothing. Call it once, after every other call on it has returned.
///
/// # Safety
/// `meter` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_free(meter: *mut LgSrTcm) {
    guard_unit(|| raw::free(meter));
}

/// The colour of a packet of `bytes` metered now (reading the process clock), colour-blind:
/// [`LG_GREEN`](crate::LG_GREEN) if the committed bucket holds `bytes`, else
/// [`LG_YELLOW`](crate::LG_YELLOW) if the excess bucket does, else [`LG_RED`](crate::LG_RED),
/// taking what that colour takes (RFC 2697); [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a
/// NULL meter. Lock-free.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_blind(meter: *const LgSrTcm, bytes: u64) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind(bytes)))
}

/// [`lg_srtcm_color_blind`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns) made by
/// the caller (once per burst of packets, say). Times must come from that clock: the meter
/// compares them with its own readings when two threads race for the same tokens.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_blind_at(
    meter: *const LgSrTcm,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at(bytes, now_ns)))
}

/// The colour of a packet of `bytes` that arrives coloured `pre`, metered now, colour-aware
/// (RFC 2697): green as [`lg_srtcm_color_blind`]; yellow is yellow if the excess bucket pays,
/// else red; red stays red, taking nothing. [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a
/// NULL meter or a `pre` other than 0, 1, 2.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_aware(
    meter: *const LgSrTcm,
    bytes: u64,
    pre: LgColor,
) -> LgColor {
    color_aware(meter, pre, None, |m, pre, now| m.0.color_aware_at(bytes, pre, now))
}

/// [`lg_srtcm_color_aware`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_aware_at(
    meter: *const LgSrTcm,
    bytes: u64,
    pre: LgColor,
    now_ns: u64,
) -> LgColor {
    color_aware(meter, pre, Some(now_ns), |m, pre, now| m.0.color_aware_at(bytes, pre, now))
}

/// The RFC's token counts at `now_ns`: what the committed bucket (`*tc`) and the excess bucket
/// (`*te`) hold. Takes nothing. Either pointer may be NULL.
///
/// # Safety
/// `meter` a live handle, `tc` and `te` NULL or writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_tokens_at(
    meter: *const LgSrTcm,
    now_ns: u64,
    tc: *mut u64,
    te: *mut u64,
) -> LgStatus {
    guard(|| {
        raw::write_pair_optional(tc, te, raw::handle(meter)?.0.tokens_at(now_ns));
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

    fn meter(cir: u64, cbs: u64, ebs: u64) -> *mut LgSrTcm {
        let q = LgQuota { count: cir, period_ns: 1_000_000_000, burst: cbs, bytes: 1 };
        let mut m = null_mut();
        assert_eq!(unsafe { lg_srtcm_new(&q, ebs, &mut m) }, LG_OK);
        m
    }

    #[test]
    fn colours_follow_rfc_2697() {
        let m = meter(1000, 1000, 1000);
        let now = lg_now_ns();
        let (mut tc, mut te) = (0, 0);
        unsafe {
            assert_eq!(lg_srtcm_color_blind_at(m, 600, now), LG_GREEN);
            assert_eq!(lg_srtcm_color_blind_at(m, 600, now), LG_YELLOW);
            assert_eq!(lg_srtcm_color_blind_at(m, 600, now), LG_RED);
            assert_eq!(lg_srtcm_tokens_at(m, now, &mut tc, &mut te), LG_OK);
            assert_eq!((tc, te), (400, 400));
            assert_eq!(lg_srtcm_color_aware_at(m, 300, LG_YELLOW, now), LG_YELLOW);
            assert_eq!(lg_srtcm_color_aware_at(m, 1, LG_RED, now), LG_RED);
            assert_eq!(lg_srtcm_color_aware_at(m, 300, LG_GREEN, now), LG_GREEN);
            assert_eq!(lg_srtcm_tokens_at(m, now, &mut tc, null_mut()), LG_OK);
            assert_eq!(tc, 100);
            // A second later (in caller time) both buckets are full again.
            assert_eq!(lg_srtcm_tokens_at(m, now + 2_000_000_000, &mut tc, &mut te), LG_OK);
            assert_eq!((tc, te), (1000, 1000));
            lg_srtcm_free(m);
        }
    }

    #[test]
    fn the_clock_reading_calls_meter_too() {
        let m = meter(1, 1500, 0); // a byte a second: nothing refills during the test
        unsafe {
            assert_eq!(lg_srtcm_color_blind(m, 1500), LG_GREEN);
            assert_eq!(lg_srtcm_color_blind(m, 1500), LG_RED);
            assert_eq!(lg_srtcm_color_aware(m, 1500, LG_GREEN), LG_RED);
            lg_srtcm_free(m);
        }
    }

    /// RFC 2697 allows CBS 0 when EBS is not, and DPDK's meter tests configure it (CIR 46 MB/s,
    /// CBS 2048, EBS 4096; CBS 0 accepted, both 0 refused): nothing is green then.
    #[test]
    fn cbs_zero_is_accepted_and_both_zero_refused() {
        use crate::{lg_keyed_srtcm_color_blind_at, lg_keyed_srtcm_free, lg_keyed_srtcm_new};
        let cir = LgQuota { count: 46_000_000, period_ns: 1_000_000_000, burst: 0, bytes: 1 };
        let (mut m, mut k) = (null_mut(), null_mut());
        let (mut tc, mut te) = (9, 9);
        unsafe {
            assert_eq!(lg_srtcm_new(&cir, 0, &mut m), LG_ERR_QUOTA);
            assert_eq!(lg_keyed_srtcm_new(&cir, 0, 64, &mut k), LG_ERR_QUOTA);
            assert!(m.is_null() && k.is_null());
            assert_eq!(lg_srtcm_new(&LgQuota { burst: 2048, ..cir }, 0, &mut m), LG_OK);
            lg_srtcm_free(m);
            assert_eq!(lg_srtcm_new(&cir, 4096, &mut m), LG_OK);
            assert_eq!(lg_keyed_srtcm_new(&cir, 4096, 64, &mut k), LG_OK);
            assert_eq!(lg_srtcm_tokens_at(m, 0, &mut tc, &mut te), LG_OK);
            assert_eq!((tc, te), (0, 4096));
            let plain = |len| lg_srtcm_color_blind_at(m, len, 0);
            let keyed = |len| lg_keyed_srtcm_color_blind_at(k, 7, len, 0);
            for meter_at in [&plain as &dyn Fn(u64) -> LgColor, &keyed] {
                assert_eq!(meter_at(2047), LG_YELLOW);
                assert_eq!(meter_at(2049), LG_YELLOW);
                assert_eq!(meter_at(1), LG_RED, "E spent, and C holds nothing");
            }
            assert_eq!(lg_srtcm_color_aware_at(m, 1, LG_GREEN, 1_000_000), LG_YELLOW);
            lg_srtcm_free(m);
            lg_keyed_srtcm_free(k);
        }
    }

    #[test]
    fn bad_arguments_are_codes() {
        let zero_rate = LgQuota { count: 0, period_ns: 1_000_000_000, burst: 1500, bytes: 1 };
        let mut m = null_mut();
        unsafe {
            assert_eq!(lg_srtcm_new(&zero_rate, 0, &mut m), LG_ERR_QUOTA);
            let q = LgQuota { count: 0, ..zero_rate };
            assert_eq!(lg_srtcm_new(&LgQuota { count: 1000, ..q }, u64::MAX, &mut m), LG_ERR_QUOTA);
            assert_eq!(lg_srtcm_new(null(), 0, &mut m), LG_ERR_NULL);
            assert_eq!(lg_srtcm_new(&LgQuota { count: 1000, ..q }, 0, null_mut()), LG_ERR_NULL);
            assert!(m.is_null());
            assert_eq!(lg_srtcm_color_blind(null(), 1), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_blind_at(null(), 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_aware(null(), 1, LG_GREEN), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_tokens_at(null(), 0, null_mut(), null_mut()), LG_ERR_NULL);
            let m = meter(1000, 1000, 0);
            assert_eq!(lg_srtcm_color_aware_at(m, 1, 3, 0), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_aware(m, 1, 255), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_blind_at(m, 1000, lg_now_ns()), LG_GREEN); // nothing taken
            lg_srtcm_free(m);
            lg_srtcm_free(null_mut());
        }
    }
}
