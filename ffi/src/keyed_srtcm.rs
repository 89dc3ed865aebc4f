//! [`LgKeyedSrTcm`]: one RFC 2697 srTCM per `uint64_t` flow (leakgate's `KeyedSrTcm<u64>`).

use crate::clock::ProcessClock;
use crate::color::{color_aware, guard_color, LgColor};
use crate::keyed::capacity;
use crate::quota::LgQuota;
use crate::raw;
use crate::srtcm::read_committed;
use crate::status::{guard, guard_unit, Error, LgStatus, LG_OK};
use leakgate::KeyedSrTcm;

/// One srTCM per flow, flows named by `uint64_t` keys, in bounded lock-free tables that forget
/// idle flows by themselves (C: `lg_keyed_srtcm`, opaque). Each flow is metered exactly as its
/// own [`LgSrTcm`](crate::LgSrTcm) would be. Made by [`lg_keyed_srtcm_new`], freed by
/// [`lg_keyed_srtcm_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000, 1_000_000_000, 1500, &mut cir);
///     assert_eq!(lg_keyed_srtcm_new(&cir, 1500, 10_000, &mut meter), LG_OK);
///     let now = lg_now_ns();
///     assert_eq!(lg_keyed_srtcm_color_blind_at(meter, 7, 1500, now), LG_GREEN);
///     assert_eq!(lg_keyed_srtcm_color_blind_at(meter, 7, 1500, now), LG_YELLOW);
///     assert_eq!(lg_keyed_srtcm_color_blind_at(meter, 7, 1500, now), LG_RED);
///     assert_eq!(lg_keyed_srtcm_color_blind_at(meter, 8, 1500, now), LG_GREEN); // another flow
///     lg_keyed_srtcm_free(meter);
/// }
/// ```
pub struct LgKeyedSrTcm(pub(crate) KeyedSrTcm<u64, ProcessClock>);

/// Makes a keyed srTCM, each flow's meter as [`lg_srtcm_new`](crate::lg_srtcm_new) makes one
/// (CBS 0 included), holding at least `capacity` active flows at once (0: the default, 2^18; at
/// most 2^30), and writes its handle to `*out`.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA),
/// [`LG_ERR_ARGUMENT`](crate::LG_ERR_ARGUMENT) (capacity) or [`LG_ERR_NULL`](crate::LG_ERR_NULL).
///
/// # Safety
/// `committed` readable, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_srtcm_new(
    committed: *const LgQuota,
    ebs: u64,
    capacity: usize,
    out: *mut *mut LgKeyedSrTcm,
) -> LgStatus {
    guard(|| {
        let (cir, cbs) = read_committed(committed)?;
        let capacity = self::capacity(capacity)?;
        raw::write_handle(out, || {
            KeyedSrTcm::with_bursts(cir, cbs, ebs, capacity, ProcessClock)
                .map(LgKeyedSrTcm)
                .map_err(|_| Error::Quota)
        })?;
        Ok(LG_OK)
    })
}

/// Frees a keyed srTCM. NULL does nothing. Call it once, after every other call on it has
/// returned.
///
/// # Safety
/// `meter` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_srtcm_free(meter: *mut LgKeyedSrTcm) {
    guard_unit(|| raw::free(meter));
}

/// The colour of a packet of `bytes` of flow `key`, metered now, colour-blind (as
/// [`lg_srtcm_color_blind`](crate::lg_srtcm_color_blind)). A new flow is inserted (briefly
/// taking its table's lock); a new flow that finds the tables full of active flows cannot be
/// green.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_srtcm_color_blind(
    meter: *const LgKeyedSrTcm,
    key: u64,
    bytes: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind(&key, bytes)))
}

/// [`lg_keyed_srtcm_color_blind`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns)
/// made by the caller (once per burst of packets, say).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_srtcm_color_blind_at(
    meter: *const LgKeyedSrTcm,
    key: u64,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at(&key, bytes, now_ns)))
}

/// The colour of a packet of `bytes` of flow `key` that arrives coloured `pre`, metered now,
/// colour-aware (as [`lg_srtcm_color_aware`](crate::lg_srtcm_color_aware)).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_srtcm_color_aware(
    meter: *const LgKeyedSrTcm,
    key: u64,
    bytes: u64,
    pre: LgColor,
) -> LgColor {
    color_aware(meter, pre, None, |m, pre, now| m.0.color_aware_at(&key, bytes, pre, now))
}

/// [`lg_keyed_srtcm_color_aware`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_srtcm_color_aware_at(
    meter: *const LgKeyedSrTcm,
    key: u64,
    bytes: u64,
    pre: LgColor,
    now_ns: u64,
) -> LgColor {
    color_aware(meter, pre, Some(now_ns), |m, pre, now| m.0.color_aware_at(&key, bytes, pre, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{lg_now_ns, LG_COLOR_ERROR, LG_ERR_ARGUMENT, LG_ERR_NULL, LG_ERR_QUOTA};
    use crate::{LG_GREEN, LG_RED, LG_YELLOW};
    use std::ptr::{null, null_mut};

    const CIR: LgQuota = LgQuota { count: 1000, period_ns: 1_000_000_000, burst: 1000, bytes: 1 };

    #[test]
    fn each_flow_has_its_meter() {
        let mut m = null_mut();
        unsafe {
            assert_eq!(lg_keyed_srtcm_new(&CIR, 500, 64, &mut m), LG_OK);
            let now = lg_now_ns();
            assert_eq!(lg_keyed_srtcm_color_aware_at(m, 1, 500, LG_YELLOW, now), LG_YELLOW);
            assert_eq!(lg_keyed_srtcm_color_aware_at(m, 1, 1, LG_YELLOW, now), LG_RED);
            assert_eq!(lg_keyed_srtcm_color_blind_at(m, 1, 1000, now), LG_GREEN);
            assert_eq!(lg_keyed_srtcm_color_blind_at(m, 1, 1000, now), LG_RED);
            assert_eq!(lg_keyed_srtcm_color_blind(m, 2, 1000), LG_GREEN);
            assert_eq!(lg_keyed_srtcm_color_aware(m, 2, 1, LG_RED), LG_RED);
            assert_eq!(lg_keyed_srtcm_color_blind(m, 2, 1001), LG_RED); // more than CBS and EBS
            lg_keyed_srtcm_free(m);
        }
    }

    #[test]
    fn bad_arguments_are_codes() {
        let mut m = null_mut();
        unsafe {
            assert_eq!(
                lg_keyed_srtcm_new(&LgQuota { burst: 0, ..CIR }, 0, 0, &mut m),
                LG_ERR_QUOTA
            );
            assert_eq!(lg_keyed_srtcm_new(&CIR, 0, usize::MAX, &mut m), LG_ERR_ARGUMENT);
            assert_eq!(lg_keyed_srtcm_new(null(), 0, 0, &mut m), LG_ERR_NULL);
            assert_eq!(lg_keyed_srtcm_new(&CIR, 0, 0, null_mut()), LG_ERR_NULL);
            assert!(m.is_null());
            assert_eq!(lg_keyed_srtcm_color_blind(null(), 1, 1), LG_COLOR_ERROR);
            assert_eq!(lg_keyed_srtcm_color_blind_at(null(), 1, 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_keyed_srtcm_new(&CIR, 0, 64, &mut m), LG_OK);
            assert_eq!(lg_keyed_srtcm_color_aware_at(m, 1, 1, 9, 0), LG_COLOR_ERROR);
            lg_keyed_srtcm_free(m);
            lg_keyed_srtcm_free(null_mut());
        }
    }
}
