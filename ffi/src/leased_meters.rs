//! [`LgLeasedSrTcm`] and [`LgLeasedTrTcm`]: the colour meters shared by threads whose green
//! packets come from per-slot leases of green units (leakgate's `LeasedSrTcm`, `LeasedTrTcm`),
//! so that threads colouring one meter do not move its line between cores on every packet.

use crate::clock::ProcessClock;
use crate::color::{color_aware, guard_color, LgColor};
use crate::quota::{self, LgQuota};
use crate::raw;
use crate::srtcm::read_committed;
use crate::status::{guard, guard_unit, Error, LgStatus, LG_OK};
use leakgate::{LeasedSrTcm, LeasedTrTcm, Leases, SrTcm, TrTcm};
use std::sync::Arc;

/// An RFC 2697 srTCM shared by threads whose green packets are coloured from per-thread-slot
/// leases of green bytes (C: `lg_leased_srtcm`, opaque): a lease is at most 1 ms of CIR (and
/// at most half of CBS, over all slots together), one slot per core. Greens in any window of
/// length `t` are at most `CBS + CIR * t + E`, greens and yellows at most
/// `CBS + EBS + CIR * t + E`, with `E` ([`lg_leased_srtcm_excess_bound`]) at most
/// `min(CIR * 1 ms, CBS / 2)`; a packet may be coloured lower than the exact meter would while
/// green bytes sit in other threads' leases (for at most 1 ms). Yellow and red are always the
/// shared meter's decisions. Made by [`lg_leased_srtcm_new`], freed by
/// [`lg_leased_srtcm_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000_000, 1_000_000_000, 1_000_000, &mut cir); // 1 GB/s, CBS 1 MB
///     assert_eq!(lg_leased_srtcm_new(&cir, 0, &mut meter), LG_OK);
///     let now = lg_now_ns();
///     assert_eq!(lg_leased_srtcm_color_blind_at(meter, 64, now), LG_GREEN);
///     assert!(lg_leased_srtcm_excess_bound(meter) <= 500_000);
///     lg_leased_srtcm_free(meter);
/// }
/// ```
pub struct LgLeasedSrTcm(pub(crate) Arc<LeasedSrTcm<ProcessClock>>);

/// An RFC 2698 trTCM shared by threads whose green packets are coloured from per-thread-slot
/// leases (C: `lg_leased_trtcm`, opaque), as [`LgLeasedSrTcm`] for an srTCM: a lease takes its
/// bytes from both buckets, and is at most 1 ms of CIR and half of CBS over all slots. Made by
/// [`lg_leased_trtcm_new`], freed by [`lg_leased_trtcm_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut q, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000_000, 1_000_000_000, 1_000_000, &mut q);
///     assert_eq!(lg_leased_trtcm_new(&q, &q, &mut meter), LG_OK);
///     assert_eq!(lg_leased_trtcm_color_blind(meter, 64), LG_GREEN);
///     lg_leased_trtcm_free(meter);
/// }
/// ```
pub struct LgLeasedTrTcm(pub(crate) Arc<LeasedTrTcm<ProcessClock>>);

/// Makes a leased srTCM of CIR and CBS `*committed` and EBS `ebs`, as
/// [`lg_srtcm_new`](crate::lg_srtcm_new) does (CBS 0 allowed when EBS is not: then leases are
/// off), and writes its handle to `*out`.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) or
/// [`LG_ERR_NULL`](crate::LG_ERR_NULL), as [`lg_srtcm_new`](crate::lg_srtcm_new).
///
/// # Safety
/// `committed` readable, `out` writable ([the pointer rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::*;
/// let mut meter = std::ptr::null_mut();
/// let zero = LgQuota { count: 0, period_ns: 1_000_000_000, burst: 1500, bytes: 1 };
/// unsafe {
///     assert_eq!(lg_leased_srtcm_new(&zero, 0, &mut meter), LG_ERR_QUOTA);
///     assert_eq!(lg_leased_srtcm_new(std::ptr::null(), 0, &mut meter), LG_ERR_NULL);
/// }
/// assert!(meter.is_null());
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_new(
    committed: *const LgQuota,
    ebs: u64,
    out: *mut *mut LgLeasedSrTcm,
) -> LgStatus {
    guard(|| {
        let (cir, cbs) = read_committed(committed)?;
        raw::write_handle(out, || {
            let meter =
                SrTcm::with_bursts(cir, cbs, ebs, ProcessClock).map_err(|_| Error::Quota)?;
            Ok(LgLeasedSrTcm(Arc::new(LeasedSrTcm::from_meter(meter, Leases::new()))))
        })?;
        Ok(LG_OK)
    })
}

/// Frees a leased srTCM. NULL does nothing. Call it once, after every other call on it has
/// returned.
///
/// # Safety
/// `meter` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_free(meter: *mut LgLeasedSrTcm) {
    guard_unit(|| raw::free(meter));
}

/// The colour of a packet of `bytes` metered now, colour-blind (as
/// [`lg_srtcm_color_blind`](crate::lg_srtcm_color_blind)), green from the calling thread's
/// lease when it holds `bytes`; [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter.
/// Lock-free.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_color_blind(
    meter: *const LgLeasedSrTcm,
    bytes: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind(bytes)))
}

/// [`lg_leased_srtcm_color_blind`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_color_blind_at(
    meter: *const LgLeasedSrTcm,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at(bytes, now_ns)))
}

/// [`lg_leased_srtcm_color_blind_at`] with the lease of slot `slot` (modulo the number of
/// slots) instead of the calling thread's: for a caller that knows which packets run together
/// (a thread pinned to a core or a queue passes its number; no thread-local lookup). The bound
/// holds whatever slots callers name; callers sharing a slot share its cache line.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000_000, 1_000_000_000, 1_000_000, &mut cir);
///     assert_eq!(lg_leased_srtcm_new(&cir, 0, &mut meter), LG_OK);
///     let now = lg_now_ns();
///     assert_eq!(lg_leased_srtcm_color_blind_at_slot(meter, 3, 64, now), LG_GREEN);
///     lg_leased_srtcm_free(meter);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_color_blind_at_slot(
    meter: *const LgLeasedSrTcm,
    slot: usize,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at_slot(slot, bytes, now_ns)))
}

/// The colour of a packet of `bytes` that arrives coloured `pre`, at `now_ns` (a reading of
/// [`lg_now_ns`](crate::lg_now_ns)), colour-aware (as
/// [`lg_srtcm_color_aware_at`](crate::lg_srtcm_color_aware_at)).
/// [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter or a `pre` other than 0, 1, 2.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_color_aware_at(
    meter: *const LgLeasedSrTcm,
    bytes: u64,
    pre: LgColor,
    now_ns: u64,
) -> LgColor {
    color_aware(meter, pre, Some(now_ns), |m, pre, now| m.0.color_aware_at(bytes, pre, now))
}

/// `E` of the bound: the most green bytes in a window beyond the exact meter's; 0 for a NULL
/// meter.
///
/// # Safety
/// `meter` NULL or a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_excess_bound(meter: *const LgLeasedSrTcm) -> u64 {
    raw::handle(meter).map_or(0, |m| m.0.excess_bound())
}

/// Makes a leased trTCM of PIR and PBS `*peak` and CIR and CBS `*committed`, as
/// [`lg_trtcm_new`](crate::lg_trtcm_new) does, and writes its handle to `*out`.
///
/// Returns [`LG_OK`], [`LG_ERR_QUOTA`](crate::LG_ERR_QUOTA) or
/// [`LG_ERR_NULL`](crate::LG_ERR_NULL), as [`lg_trtcm_new`](crate::lg_trtcm_new).
///
/// # Safety
/// `peak` and `committed` readable, `out` writable ([the pointer rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::*;
/// let (mut fast, mut slow, mut meter) = (LgQuota::default(), LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1000, 1_000_000_000, 1500, &mut slow);
///     lg_quota_bytes(2000, 1_000_000_000, 1500, &mut fast);
///     assert_eq!(lg_leased_trtcm_new(&slow, &fast, &mut meter), LG_ERR_QUOTA); // PIR < CIR
///     assert_eq!(lg_leased_trtcm_new(&fast, &slow, &mut meter), LG_OK);
///     lg_leased_trtcm_free(meter);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_new(
    peak: *const LgQuota,
    committed: *const LgQuota,
    out: *mut *mut LgLeasedTrTcm,
) -> LgStatus {
    guard(|| {
        let (peak, committed) = (quota::read(peak)?, quota::read(committed)?);
        raw::write_handle(out, || {
            let meter =
                TrTcm::with_clock(peak, committed, ProcessClock).map_err(|_| Error::Quota)?;
            Ok(LgLeasedTrTcm(Arc::new(LeasedTrTcm::from_meter(meter, Leases::new()))))
        })?;
        Ok(LG_OK)
    })
}

/// Frees a leased trTCM. NULL does nothing. Call it once, after every other call on it has
/// returned.
///
/// # Safety
/// `meter` is NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_free(meter: *mut LgLeasedTrTcm) {
    guard_unit(|| raw::free(meter));
}

/// The colour of a packet of `bytes` metered now, colour-blind (as
/// [`lg_trtcm_color_blind`](crate::lg_trtcm_color_blind)), green from the calling thread's
/// lease when it holds `bytes`; [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter.
/// Lock-free.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_color_blind(
    meter: *const LgLeasedTrTcm,
    bytes: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind(bytes)))
}

/// [`lg_leased_trtcm_color_blind`] at `now_ns`, a reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_color_blind_at(
    meter: *const LgLeasedTrTcm,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at(bytes, now_ns)))
}

/// [`lg_leased_trtcm_color_blind_at`] with the lease of slot `slot` (modulo the number of
/// slots) instead of the calling thread's, as [`lg_leased_srtcm_color_blind_at_slot`].
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_color_blind_at_slot(
    meter: *const LgLeasedTrTcm,
    slot: usize,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle(meter)?.0.color_blind_at_slot(slot, bytes, now_ns)))
}

/// The colour of a packet of `bytes` that arrives coloured `pre`, at `now_ns`, colour-aware (as
/// [`lg_trtcm_color_aware_at`](crate::lg_trtcm_color_aware_at)).
/// [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter or a `pre` other than 0, 1, 2.
///
/// # Safety
/// `meter` a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_color_aware_at(
    meter: *const LgLeasedTrTcm,
    bytes: u64,
    pre: LgColor,
    now_ns: u64,
) -> LgColor {
    color_aware(meter, pre, Some(now_ns), |m, pre, now| m.0.color_aware_at(bytes, pre, now))
}

/// `E` of the bound: the most green bytes in a window beyond the exact meter's; 0 for a NULL
/// meter.
///
/// # Safety
/// `meter` NULL or a live handle ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_excess_bound(meter: *const LgLeasedTrTcm) -> u64 {
    raw::handle(meter).map_or(0, |m| m.0.excess_bound())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{lg_quota_bytes, LG_COLOR_ERROR, LG_GREEN, LG_RED, LG_YELLOW};
    use std::ptr::{null, null_mut};

    fn bytes(rate: u64, burst: u64) -> LgQuota {
        let mut q = LgQuota::default();
        assert_eq!(unsafe { lg_quota_bytes(rate, 1_000_000_000, burst, &mut q) }, LG_OK);
        q
    }

    /// Two threads colour one meter at one clock reading: never more green than CBS, and no
    /// fewer than CBS less `E` (bytes left in the leases); then yellow from EBS, then red.
    #[test]
    fn two_threads_at_one_instant_keep_the_bound() {
        let cbs = 1_000_000;
        let mut m = null_mut();
        assert_eq!(
            unsafe { lg_leased_srtcm_new(&bytes(1_000_000_000, cbs), 64_000, &mut m) },
            LG_OK
        );
        let meter = m as usize;
        let now = crate::lg_now_ns();
        let counts: Vec<[u64; 3]> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(move || {
                        let mut seen = [0u64; 3];
                        for _ in 0..20_000 {
                            let c = unsafe {
                                lg_leased_srtcm_color_blind_at(meter as *const _, 64, now)
                            };
                            seen[c as usize] += 1;
                        }
                        seen
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let green = 64 * (counts[0][0] + counts[1][0]);
        let yellow = 64 * (counts[0][1] + counts[1][1]);
        let e = unsafe { lg_leased_srtcm_excess_bound(m) };
        assert!(e > 0 && green <= cbs && green + e >= cbs, "{green} of {cbs}, E {e}");
        assert!(yellow <= 64_000, "{yellow}");
        unsafe { lg_leased_srtcm_free(m) };
    }

    #[test]
    fn colours_and_bad_arguments() {
        let (mut sr, mut tr) = (null_mut(), null_mut());
        let q = bytes(1000, 1000); // leases off: exact
        unsafe {
            assert_eq!(lg_leased_srtcm_new(&q, 1000, &mut sr), LG_OK);
            assert_eq!(lg_leased_srtcm_excess_bound(sr), 0);
            assert_eq!(lg_leased_srtcm_color_blind_at(sr, 600, 0), LG_GREEN);
            assert_eq!(lg_leased_srtcm_color_blind_at(sr, 600, 0), LG_YELLOW);
            assert_eq!(lg_leased_srtcm_color_blind_at(sr, 600, 0), LG_RED);
            assert_eq!(lg_leased_srtcm_color_aware_at(sr, 1, LG_RED, 0), LG_RED);
            assert_eq!(lg_leased_srtcm_color_aware_at(sr, 1, 3, 0), LG_COLOR_ERROR);
            assert_eq!(lg_leased_trtcm_new(&q, &q, &mut tr), LG_OK);
            assert_eq!(lg_leased_trtcm_color_blind_at(tr, 600, 0), LG_GREEN);
            assert_eq!(lg_leased_trtcm_color_blind_at_slot(tr, 5, 600, 0), LG_RED);
            assert_eq!(lg_leased_trtcm_color_aware_at(tr, 300, LG_YELLOW, 0), LG_YELLOW);
            assert_eq!(lg_leased_trtcm_color_aware_at(tr, 1, 7, 0), LG_COLOR_ERROR);
            assert_eq!(lg_leased_srtcm_color_blind(null(), 1), LG_COLOR_ERROR);
            assert_eq!(lg_leased_srtcm_color_blind_at_slot(null(), 0, 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_leased_trtcm_color_blind(null(), 1), LG_COLOR_ERROR);
            assert_eq!(lg_leased_trtcm_excess_bound(null()), 0);
            assert_eq!(lg_leased_trtcm_new(null(), &q, &mut tr), crate::LG_ERR_NULL);
            lg_leased_srtcm_free(sr);
            lg_leased_trtcm_free(tr);
            lg_leased_srtcm_free(null_mut());
        }
    }
}
