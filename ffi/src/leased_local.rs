//! [`LgLeasedSrTcmLocal`] and [`LgLeasedTrTcmLocal`]: one thread's handle on a leased colour
//! meter (leakgate's `LocalMeter`): green packets from the handle's own lease, a plain
//! subtraction with no atomic write.

use crate::clock::ProcessClock;
use crate::color::{guard_color, LgColor};
use crate::leased_meters::{LgLeasedSrTcm, LgLeasedTrTcm};
use crate::raw;
use crate::status::{guard, guard_unit, LgStatus, LG_OK};
use leakgate::{LeasedSrTcm, LeasedTrTcm, LocalMeter};
use std::sync::Arc;

/// One thread's handle on an [`LgLeasedSrTcm`] (C: `lg_leased_srtcm_local`, opaque): it holds
/// one of the meter's slots and its lease of green bytes, so a green packet is a subtraction
/// with no atomic write; a new lease is one green take of the shared meter. The meter's bound
/// holds with any number of handles. A handle is used by one thread at a time (pointer rule 5,
/// as for an `_excl` function), keeps its meter alive (the meter may be freed first), and gives
/// its bytes back to its slot when freed; one kept unused keeps up to one lease from the other
/// threads. Made by [`lg_leased_srtcm_local_new`], freed by [`lg_leased_srtcm_local_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter, mut local) = (LgQuota::default(), std::ptr::null_mut(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000_000, 1_000_000_000, 1_000_000, &mut cir); // 1 GB/s, CBS 1 MB
///     assert_eq!(lg_leased_srtcm_new(&cir, 0, &mut meter), LG_OK);
///     assert_eq!(lg_leased_srtcm_local_new(meter, &mut local), LG_OK); // in each thread
///     lg_leased_srtcm_free(meter); // the handle keeps the meter alive
///     let now = lg_now_ns();
///     assert_eq!(lg_leased_srtcm_local_color_blind_at(local, 64, now), LG_GREEN);
///     lg_leased_srtcm_local_free(local);
/// }
/// ```
pub struct LgLeasedSrTcmLocal(LocalMeter<Arc<LeasedSrTcm<ProcessClock>>>);

/// One thread's handle on an [`LgLeasedTrTcm`] (C: `lg_leased_trtcm_local`, opaque), as
/// [`LgLeasedSrTcmLocal`] is on an srTCM. Made by [`lg_leased_trtcm_local_new`], freed by
/// [`lg_leased_trtcm_local_free`].
///
/// ```
/// use leakgate_ffi::*;
/// let (mut q, mut meter, mut local) = (LgQuota::default(), std::ptr::null_mut(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000_000, 1_000_000_000, 1_000_000, &mut q);
///     assert_eq!(lg_leased_trtcm_new(&q, &q, &mut meter), LG_OK);
///     assert_eq!(lg_leased_trtcm_local_new(meter, &mut local), LG_OK);
///     assert_eq!(lg_leased_trtcm_local_color_blind_at(local, 64, lg_now_ns()), LG_GREEN);
///     lg_leased_trtcm_local_free(local);
///     lg_leased_trtcm_free(meter);
/// }
/// ```
pub struct LgLeasedTrTcmLocal(LocalMeter<Arc<LeasedTrTcm<ProcessClock>>>);

/// Makes a handle on `meter` for the calling thread (holding a slot no other handle holds, if
/// one is free) and writes it to `*out`. Returns [`LG_OK`] or
/// [`LG_ERR_NULL`](crate::LG_ERR_NULL).
///
/// # Safety
/// `meter` a live handle, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_local_new(
    meter: *const LgLeasedSrTcm,
    out: *mut *mut LgLeasedSrTcmLocal,
) -> LgStatus {
    guard(|| {
        let meter = raw::handle(meter)?.0.clone();
        raw::write_handle(out, || Ok(LgLeasedSrTcmLocal(LocalMeter::new(meter))))?;
        Ok(LG_OK)
    })
}

/// Frees a handle, giving its green bytes back to its slot. NULL does nothing.
///
/// # Safety
/// `local` NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_local_free(local: *mut LgLeasedSrTcmLocal) {
    guard_unit(|| raw::free(local));
}

/// The colour of a packet of `bytes` at `now_ns` (a reading of
/// [`lg_now_ns`](crate::lg_now_ns)), colour-blind: green from the handle's lease when it holds
/// `bytes`, else as [`lg_leased_srtcm_color_blind_at`](crate::lg_leased_srtcm_color_blind_at);
/// [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL handle.
///
/// # Safety
/// `local` a live handle that no other call uses while this one runs
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_srtcm_local_color_blind_at(
    local: *mut LgLeasedSrTcmLocal,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle_mut(local)?.0.color_blind_at(bytes, now_ns)))
}

/// Makes a handle on `meter` for the calling thread, as [`lg_leased_srtcm_local_new`].
///
/// # Safety
/// `meter` a live handle, `out` writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_local_new(
    meter: *const LgLeasedTrTcm,
    out: *mut *mut LgLeasedTrTcmLocal,
) -> LgStatus {
    guard(|| {
        let meter = raw::handle(meter)?.0.clone();
        raw::write_handle(out, || Ok(LgLeasedTrTcmLocal(LocalMeter::new(meter))))?;
        Ok(LG_OK)
    })
}

/// Frees a handle, giving its green bytes back to its slot. NULL does nothing.
///
/// # Safety
/// `local` NULL or a live handle that no other call uses, now or later
/// ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_local_free(local: *mut LgLeasedTrTcmLocal) {
    guard_unit(|| raw::free(local));
}

/// The colour of a packet of `bytes` at `now_ns`, colour-blind, as
/// [`lg_leased_srtcm_local_color_blind_at`] for a trTCM.
///
/// # Safety
/// `local` a live handle that no other call uses while this one runs
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_leased_trtcm_local_color_blind_at(
    local: *mut LgLeasedTrTcmLocal,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle_mut(local)?.0.color_blind_at(bytes, now_ns)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        lg_leased_srtcm_color_blind_at, lg_leased_srtcm_free, lg_leased_srtcm_new, lg_quota_bytes,
        LgQuota, LG_COLOR_ERROR, LG_ERR_NULL, LG_GREEN,
    };
    use std::ptr::{null, null_mut};

    /// Two threads with handles and one without colour one meter at one clock reading: greens
    /// never pass CBS, and once the handles are freed every green byte is coloured.
    #[test]
    fn handles_and_the_shared_path_make_the_committed_burst() {
        let cbs = 1_000_000;
        let (mut q, mut m) = (LgQuota::default(), null_mut());
        unsafe {
            assert_eq!(lg_quota_bytes(1_000_000_000, 1_000_000_000, cbs, &mut q), LG_OK);
            assert_eq!(lg_leased_srtcm_new(&q, 0, &mut m), LG_OK);
        }
        let meter = m as usize;
        let now = crate::lg_now_ns();
        let green: u64 = std::thread::scope(|s| {
            let threads: Vec<_> = (0..3)
                .map(|t| {
                    s.spawn(move || {
                        let meter = meter as *const LgLeasedSrTcm;
                        let mut local = null_mut();
                        if t < 2 {
                            assert_eq!(
                                unsafe { lg_leased_srtcm_local_new(meter, &mut local) },
                                LG_OK
                            );
                        }
                        let mut green = 0;
                        for _ in 0..10_000 {
                            let c = unsafe {
                                if t < 2 {
                                    lg_leased_srtcm_local_color_blind_at(local, 64, now)
                                } else {
                                    lg_leased_srtcm_color_blind_at(meter, 64, now)
                                }
                            };
                            green += 64 * u64::from(c == LG_GREEN);
                        }
                        unsafe { lg_leased_srtcm_local_free(local) };
                        green
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum()
        });
        assert!(green <= cbs, "{green}");
        let mut rest = 0;
        while unsafe { lg_leased_srtcm_color_blind_at(m, 64, now) } == LG_GREEN {
            rest += 64;
        }
        // Bytes left in the slots' leases (other than this thread's) may stay uncoloured.
        let e = unsafe { crate::lg_leased_srtcm_excess_bound(m) };
        assert!(green + rest <= cbs && green + rest + e >= cbs, "{green} + {rest}, E {e}");
        unsafe { lg_leased_srtcm_free(m) };
    }

    #[test]
    fn null_handles_are_codes() {
        let (mut sr, mut tr) = (null_mut(), null_mut());
        unsafe {
            assert_eq!(lg_leased_srtcm_local_new(null(), &mut sr), LG_ERR_NULL);
            assert_eq!(lg_leased_trtcm_local_new(null(), &mut tr), LG_ERR_NULL);
            assert!(sr.is_null() && tr.is_null());
            assert_eq!(lg_leased_srtcm_local_color_blind_at(null_mut(), 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_leased_trtcm_local_color_blind_at(null_mut(), 1, 0), LG_COLOR_ERROR);
            lg_leased_srtcm_local_free(null_mut());
            lg_leased_trtcm_local_free(null_mut());
        }
    }
}
