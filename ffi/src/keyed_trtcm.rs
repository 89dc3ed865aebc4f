//! [`LgKeyedTrTcm`]: one RFC 2698 trTCM per `uint64_t` flow (leakgate's `KeyedTrTcm<u64>`).

use crate::clock::ProcessClock;
use crate::color::{color_aware, guard_color, LgColor};
use crate::keyed::capacity;
use crate::quota::{self, LgQuota};
use crate::raw;
use crate::status::{guard, guard_unit, Error, LgStatus, LG_OK};
use leakgate::KeyedTrTcm;

/// One trTCM per flow, flows named by `uint64_t` keys, in bounded lock-free tables that forget
/// idle flows by themselves (C: `lg_keyed_trtcm`, opaque). Each flow is metered exactly as its
/// own [`LgTrTcm`](crate::LgTrTcm) would be. Made by [`lg_keyed_trtcm_new`], freed by
/// [`lg_keyed_trtcm_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut pir, mut cir, mut meter) = (LgQuota::default(), LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(2_000_000, 1_000_000_000, 3000, &mut pir);
///     lg_quota_bytes(1_000_000, 1_000_000_000, 1500, &mut cir);
///     assert_eq!(lg_keyed_trtcm_new(&pir, &cir, 10_000, &mut meter), LG_OK);
///     let now = lg_now_ns();
///     assert_eq!(lg_keyed_trtcm_color_blind_at(meter, 7, 1500, now), LG_GREEN);
///     assert_eq!(lg_keyed_trtcm_color_blind_at(meter, 7, 1500, now), LG_YELLOW);
///     assert_eq!(lg_keyed_trtcm_color_blind_at(meter, 7, 1500, now), LG_RED);
///     assert_eq!(lg_keyed_trtcm_color_blind_at(meter, 8, 1500, now), LG_GREEN); // another flow
///     lg_keyed_trtcm_free(meter);
/// }
/// ```
pub struct LgKeyedTrTcm(pub(crate) KeyedTrTcm<u64, ProcessClock>);

/// Makes a keyed trTCM, each flow's meter as [`lg_trtcm_new`](crate::lg_trtcm_new) makes one,
/// holding at least `capacity` active flows at once (0: the default, 2^18; at most 2^30), and
/// writes its handle to `*out`.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA),
/// [`LG_ERR_ARGUMENT`](crate::LG_ERR_ARGUMENT) (capacity) or [`LG_ERR_NULL`](crate::LG_ERR_NULL).
///
/// # Safety
/// `peak` and `committed` readable, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_trtcm_new(
    peak: *const LgQuota,
    committed: *const LgQuota,
    capacity: usize,
    out: *mut *mut LgKeyedTrTcm,
) -> LgStatus {
    guard(|| {
        let (peak, committed) = (quota::read(peak)?, quota::read(committed)?);
        let capacity = self::capacity(capacity)?;
        raw::write_handle(out, || {
            KeyedTrTcm::with_capacity_and_clock(peak, committed, capacity, ProcessClock)
                .map(LgKeyedTrTcm)
                .map_err(|_| Error::Quota)
        })?;
        Ok(LG_OK)
    })
}

/// Frees a keyed trTCM. NULL does nothing. Call it once, after every other call on it has
/// returned.
///
/// # Safety
/// `meter` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_trtcm_free(meter: *mut LgKeyedTrTcm) {
    guard_unit(|| raw::free(meter));
}

/// The colour of a packet of `bytes` of flow `key`, metered now, colour-blind (as
/// [`lg_trtcm_color_blind`](crate::lg_trtcm_color_blind)). A new flow is inserted (briefly
/// taking its table's lock); a new flow that finds the tables full of active flows is refused by
/// them as by full buckets (no room for P: red; no room for C: at best yellow).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_trtcm_color_blind(
    meter: *const LgKeyedTrTcm,
    key: u64,
    bytes: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind(&key, bytes)))
}

/// [`lg_keyed_trtcm_color_blind`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns)
/// made by the caller (once per burst of packets, say).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_trtcm_color_blind_at(
    meter: *const LgKeyedTrTcm,
    key: u64,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at(&key, bytes, now_ns)))
}

/// The colour of a packet of `bytes` of flow `key` that arrives coloured `pre`, metered now,
/// colour-aware (as [`lg_trtcm_color_aware`](crate::lg_trtcm_color_aware)).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_trtcm_color_aware(
    meter: *const LgKeyedTrTcm,
    key: u64,
    bytes: u64,
    pre: LgColor,
) -> LgColor {
    color_aware(meter, pre, None, |m, pre, now| m.0.color_aware_at(&key, bytes, pre, now))
}

/// [`lg_keyed_trtcm_color_aware`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_trtcm_color_aware_at(
    meter: *const LgKeyedTrTcm,
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

    const PIR: LgQuota = LgQuota { count: 2000, period_ns: 1_000_000_000, burst: 2000, bytes: 1 };
    const CIR: LgQuota = LgQuota { count: 1000, period_ns: 1_000_000_000, burst: 1000, bytes: 1 };

    #[test]
    fn each_flow_has_its_meter() {
        let mut m = null_mut();
        unsafe {
            assert_eq!(lg_keyed_trtcm_new(&PIR, &CIR, 64, &mut m), LG_OK);
            let now = lg_now_ns();
            assert_eq!(lg_keyed_trtcm_color_blind_at(m, 1, 1000, now), LG_GREEN);
            assert_eq!(lg_keyed_trtcm_color_aware_at(m, 1, 600, LG_GREEN, now), LG_YELLOW);
            assert_eq!(lg_keyed_trtcm_color_aware_at(m, 1, 400, LG_YELLOW, now), LG_YELLOW);
            assert_eq!(lg_keyed_trtcm_color_blind_at(m, 1, 1, now), LG_RED);
            assert_eq!(lg_keyed_trtcm_color_blind(m, 2, 1000), LG_GREEN);
            assert_eq!(lg_keyed_trtcm_color_aware(m, 2, 1, LG_RED), LG_RED);
            assert_eq!(lg_keyed_trtcm_color_blind(m, 2, 2001), LG_RED); // more than PBS
            lg_keyed_trtcm_free(m);
        }
    }

    #[test]
    fn bad_arguments_are_codes() {
        let mut m = null_mut();
        unsafe {
            assert_eq!(lg_keyed_trtcm_new(&CIR, &PIR, 0, &mut m), LG_ERR_QUOTA); // PIR < CIR
            assert_eq!(
                lg_keyed_trtcm_new(&PIR, &LgQuota { count: 0, ..CIR }, 0, &mut m),
                LG_ERR_QUOTA
            );
            assert_eq!(lg_keyed_trtcm_new(&PIR, &CIR, usize::MAX, &mut m), LG_ERR_ARGUMENT);
            assert_eq!(lg_keyed_trtcm_new(null(), &CIR, 0, &mut m), LG_ERR_NULL);
            assert_eq!(lg_keyed_trtcm_new(&PIR, &CIR, 0, null_mut()), LG_ERR_NULL);
            assert!(m.is_null());
            assert_eq!(lg_keyed_trtcm_color_blind(null(), 1, 1), LG_COLOR_ERROR);
            assert_eq!(lg_keyed_trtcm_color_blind_at(null(), 1, 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_keyed_trtcm_new(&PIR, &CIR, 64, &mut m), LG_OK);
            assert_eq!(lg_keyed_trtcm_color_aware_at(m, 1, 1, 9, 0), LG_COLOR_ERROR);
            lg_keyed_trtcm_free(m);
            lg_keyed_trtcm_free(null_mut());
        }
    }
}
