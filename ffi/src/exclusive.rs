//! The meters' exclusive functions (`lg_srtcm_*_excl`, `lg_trtcm_*_excl`): leakgate's `_mut`
//! path (`SrTcm::color_blind_at_mut` and the rest) for a meter that one thread owns, one per
//! core or per queue, as DPDK keeps its `rte_meter`s.
//!
//! The same colours as the plain functions, taking the same tokens, with plain reads and writes
//! of the meter's words (no atomic read-modify-write, no fence). What Rust proves with `&mut`,
//! C promises: no other call uses the meter while an `_excl` call runs ([pointer
//! rule](crate#pointers) 5). A meter may be used by the plain functions at other times.

use crate::color::{color_aware_mut, guard_color, LgColor};
use crate::raw;
use crate::srtcm::LgSrTcm;
use crate::trtcm::LgTrTcm;

/// [`lg_srtcm_color_blind`](crate::lg_srtcm_color_blind) for a meter that the caller holds
/// exclusively: the caller guarantees no other thread uses this meter during the call (one
/// meter per core or queue, as with rte_meter); use the plain functions for a shared meter.
/// The same colour, taking the same tokens, with plain reads and writes instead of atomic
/// ones. [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1000, 1_000_000_000, 1000, &mut cir); // 1000 B/s: nothing refills here
///     assert_eq!(lg_srtcm_new(&cir, 1000, &mut meter), LG_OK);
///     assert_eq!(lg_srtcm_color_blind_excl(meter, 600), LG_GREEN);
///     assert_eq!(lg_srtcm_color_blind_excl(meter, 600), LG_YELLOW);
///     lg_srtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_blind_excl(meter: *mut LgSrTcm, bytes: u64) -> LgColor {
    guard_color(move || Ok(raw::handle_mut(meter)?.0.color_blind_mut(bytes)))
}

/// [`lg_srtcm_color_blind_at`](crate::lg_srtcm_color_blind_at) for a meter that the caller
/// holds exclusively: the caller guarantees no other thread uses this meter during the call
/// (one meter per core or queue, as with rte_meter); use the plain functions for a shared
/// meter. `now_ns` is a reading of [`lg_now_ns`](crate::lg_now_ns), once per burst of packets,
/// say.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1_000_000, 1_000_000_000, 3000, &mut cir); // 1 MB/s, CBS 3000 bytes
///     assert_eq!(lg_srtcm_new(&cir, 1500, &mut meter), LG_OK); // EBS 1500 bytes
///     let now = lg_now_ns();
///     let colours: Vec<LgColor> = (0..4).map(|_| lg_srtcm_color_blind_at_excl(meter, 1500, now)).collect();
///     assert_eq!(colours, [LG_GREEN, LG_GREEN, LG_YELLOW, LG_RED]);
///     lg_srtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_blind_at_excl(
    meter: *mut LgSrTcm,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle_mut(meter)?.0.color_blind_at_mut(bytes, now_ns)))
}

/// [`lg_srtcm_color_aware`](crate::lg_srtcm_color_aware) for a meter that the caller holds
/// exclusively: the caller guarantees no other thread uses this meter during the call (one
/// meter per core or queue, as with rte_meter); use the plain functions for a shared meter.
/// [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter or a `pre` other than 0, 1, 2.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1000, 1_000_000_000, 1000, &mut cir);
///     assert_eq!(lg_srtcm_new(&cir, 1000, &mut meter), LG_OK);
///     assert_eq!(lg_srtcm_color_aware_excl(meter, 600, LG_YELLOW), LG_YELLOW); // C untouched
///     assert_eq!(lg_srtcm_color_aware_excl(meter, 600, LG_GREEN), LG_GREEN);
///     assert_eq!(lg_srtcm_color_aware_excl(meter, 1, 7), LG_COLOR_ERROR);
///     lg_srtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_aware_excl(
    meter: *mut LgSrTcm,
    bytes: u64,
    pre: LgColor,
) -> LgColor {
    color_aware_mut(meter, pre, |m, pre| m.0.color_aware_mut(bytes, pre))
}

/// [`lg_srtcm_color_aware_at`](crate::lg_srtcm_color_aware_at) for a meter that the caller
/// holds exclusively: the caller guarantees no other thread uses this meter during the call
/// (one meter per core or queue, as with rte_meter); use the plain functions for a shared
/// meter.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut cir, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1000, 1_000_000_000, 1000, &mut cir);
///     assert_eq!(lg_srtcm_new(&cir, 0, &mut meter), LG_OK);
///     assert_eq!(lg_srtcm_color_aware_at_excl(meter, 1, LG_YELLOW, lg_now_ns()), LG_RED); // EBS 0
///     lg_srtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_srtcm_color_aware_at_excl(
    meter: *mut LgSrTcm,
    bytes: u64,
    pre: LgColor,
    now_ns: u64,
) -> LgColor {
    color_aware_mut(meter, pre, |m, pre| m.0.color_aware_at_mut(bytes, pre, now_ns))
}

/// [`lg_trtcm_color_blind`](crate::lg_trtcm_color_blind) for a meter that the caller holds
/// exclusively: the caller guarantees no other thread uses this meter during the call (one
/// meter per core or queue, as with rte_meter); use the plain functions for a shared meter.
/// The same colour, taking the same tokens, with plain reads and writes instead of atomic
/// ones. [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut pir, mut cir, mut meter) = (LgQuota::default(), LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(2000, 1_000_000_000, 2000, &mut pir);
///     lg_quota_bytes(1000, 1_000_000_000, 1000, &mut cir);
///     assert_eq!(lg_trtcm_new(&pir, &cir, &mut meter), LG_OK);
///     assert_eq!(lg_trtcm_color_blind_excl(meter, 1000), LG_GREEN);
///     assert_eq!(lg_trtcm_color_blind_excl(meter, 1000), LG_YELLOW);
///     assert_eq!(lg_trtcm_color_blind_excl(meter, 1), LG_RED);
///     lg_trtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_blind_excl(meter: *mut LgTrTcm, bytes: u64) -> LgColor {
    guard_color(move || Ok(raw::handle_mut(meter)?.0.color_blind_mut(bytes)))
}

/// [`lg_trtcm_color_blind_at`](crate::lg_trtcm_color_blind_at) for a meter that the caller
/// holds exclusively: the caller guarantees no other thread uses this meter during the call
/// (one meter per core or queue, as with rte_meter); use the plain functions for a shared
/// meter. `now_ns` is a reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// ```
/// use leakgate_ffi::*;
/// let (mut pir, mut cir, mut meter) = (LgQuota::default(), LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(2_000_000, 1_000_000_000, 4500, &mut pir);
///     lg_quota_bytes(1_000_000, 1_000_000_000, 1500, &mut cir);
///     assert_eq!(lg_trtcm_new(&pir, &cir, &mut meter), LG_OK);
///     let now = lg_now_ns();
///     let colours: Vec<LgColor> = (0..4).map(|_| lg_trtcm_color_blind_at_excl(meter, 1500, now)).collect();
///     assert_eq!(colours, [LG_GREEN, LG_YELLOW, LG_YELLOW, LG_RED]);
///     lg_trtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_blind_at_excl(
    meter: *mut LgTrTcm,
    bytes: u64,
    now_ns: u64,
) -> LgColor {
    guard_color(move || Ok(raw::handle_mut(meter)?.0.color_blind_at_mut(bytes, now_ns)))
}

/// [`lg_trtcm_color_aware`](crate::lg_trtcm_color_aware) for a meter that the caller holds
/// exclusively: the caller guarantees no other thread uses this meter during the call (one
/// meter per core or queue, as with rte_meter); use the plain functions for a shared meter.
/// [`LG_COLOR_ERROR`](crate::LG_COLOR_ERROR) for a NULL meter or a `pre` other than 0, 1, 2.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut pir, mut cir, mut meter) = (LgQuota::default(), LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(2000, 1_000_000_000, 2000, &mut pir);
///     lg_quota_bytes(1000, 1_000_000_000, 1000, &mut cir);
///     assert_eq!(lg_trtcm_new(&pir, &cir, &mut meter), LG_OK);
///     assert_eq!(lg_trtcm_color_aware_excl(meter, 1000, LG_YELLOW), LG_YELLOW); // P only
///     assert_eq!(lg_trtcm_color_aware_excl(meter, 1000, LG_GREEN), LG_GREEN);
///     assert_eq!(lg_trtcm_color_aware_excl(meter, 1, LG_RED), LG_RED);
///     lg_trtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_aware_excl(
    meter: *mut LgTrTcm,
    bytes: u64,
    pre: LgColor,
) -> LgColor {
    color_aware_mut(meter, pre, |m, pre| m.0.color_aware_mut(bytes, pre))
}

/// [`lg_trtcm_color_aware_at`](crate::lg_trtcm_color_aware_at) for a meter that the caller
/// holds exclusively: the caller guarantees no other thread uses this meter during the call
/// (one meter per core or queue, as with rte_meter); use the plain functions for a shared
/// meter.
///
/// ```
/// use leakgate_ffi::*;
/// let (mut q, mut meter) = (LgQuota::default(), std::ptr::null_mut());
/// unsafe {
///     lg_quota_bytes(1000, 1_000_000_000, 1000, &mut q);
///     assert_eq!(lg_trtcm_new(&q, &q, &mut meter), LG_OK);
///     assert_eq!(lg_trtcm_color_aware_at_excl(meter, 1, LG_RED, lg_now_ns()), LG_RED);
///     lg_trtcm_free(meter);
/// }
/// ```
///
/// # Safety
/// `meter` a live handle that no other call uses during this one
/// ([the pointer rules](crate#pointers), 5).
#[no_mangle]
pub unsafe extern "C" fn lg_trtcm_color_aware_at_excl(
    meter: *mut LgTrTcm,
    bytes: u64,
    pre: LgColor,
    now_ns: u64,
) -> LgColor {
    color_aware_mut(meter, pre, |m, pre| m.0.color_aware_at_mut(bytes, pre, now_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        lg_now_ns, lg_quota_bytes, lg_srtcm_color_aware_at, lg_srtcm_color_blind_at, lg_srtcm_free,
        lg_srtcm_new, lg_srtcm_tokens_at, lg_trtcm_color_aware_at, lg_trtcm_color_blind_at,
        lg_trtcm_free, lg_trtcm_new, lg_trtcm_tokens_at, LgQuota, LgStatus, LG_COLOR_ERROR,
        LG_GREEN, LG_OK, LG_RED, LG_YELLOW,
    };
    use std::ptr::null_mut;

    fn bytes(rate: u64, burst: u64) -> LgQuota {
        let mut q = LgQuota::default();
        assert_eq!(unsafe { lg_quota_bytes(rate, 1_000_000_000, burst, &mut q) }, LG_OK);
        q
    }

    /// A packet sequence of sizes and colours on arrival (green: colour-blind).
    const PACKETS: [(u64, LgColor); 12] = [
        (600, LG_GREEN),
        (600, LG_GREEN),
        (300, LG_YELLOW),
        (600, LG_GREEN),
        (1, LG_RED),
        (0, LG_GREEN),
        (250, LG_GREEN),
        (u64::MAX, LG_GREEN),
        (150, LG_GREEN),
        (100, LG_YELLOW),
        (200, LG_YELLOW),
        (1, LG_GREEN),
    ];

    /// One meter kind's shared and owner's functions, as [`same_colours`] drives them.
    struct Kind<M> {
        aware: unsafe extern "C" fn(*const M, u64, LgColor, u64) -> LgColor,
        aware_excl: unsafe extern "C" fn(*mut M, u64, LgColor, u64) -> LgColor,
        blind: unsafe extern "C" fn(*const M, u64, u64) -> LgColor,
        blind_excl: unsafe extern "C" fn(*mut M, u64, u64) -> LgColor,
        tokens: unsafe extern "C" fn(*const M, u64, *mut u64, *mut u64) -> LgStatus,
    }

    const SR: Kind<LgSrTcm> = Kind {
        aware: lg_srtcm_color_aware_at,
        aware_excl: lg_srtcm_color_aware_at_excl,
        blind: lg_srtcm_color_blind_at,
        blind_excl: lg_srtcm_color_blind_at_excl,
        tokens: lg_srtcm_tokens_at,
    };

    const TR: Kind<LgTrTcm> = Kind {
        aware: lg_trtcm_color_aware_at,
        aware_excl: lg_trtcm_color_aware_at_excl,
        blind: lg_trtcm_color_blind_at,
        blind_excl: lg_trtcm_color_blind_at_excl,
        tokens: lg_trtcm_tokens_at,
    };

    /// Meters [`PACKETS`] at `now` on `shared` and `owned` (two alike fresh meters), colour-aware
    /// and colour-blind in turn, through the shared and the owner's functions: the same colour
    /// and the same token counts after every packet, and every colour seen.
    ///
    /// # Safety
    /// `shared` and `owned` live handles of `kind`'s meter.
    unsafe fn same_colours<M>(kind: &Kind<M>, shared: *mut M, owned: *mut M, now: u64) {
        // SAFETY: the handles are live (the caller's promise); the token pointers are locals.
        unsafe {
            let mut seen = [0; 3];
            for (i, &(size, pre)) in PACKETS.iter().enumerate() {
                let (a, b) = if i % 2 == 0 {
                    ((kind.aware)(shared, size, pre, now), (kind.aware_excl)(owned, size, pre, now))
                } else {
                    ((kind.blind)(shared, size, now), (kind.blind_excl)(owned, size, now))
                };
                assert_eq!(a, b, "packet {i}");
                seen[usize::from(a)] += 1;
                let (mut s, mut o) = ((0, 0), (0, 0));
                (kind.tokens)(shared, now, &mut s.0, &mut s.1);
                (kind.tokens)(owned, now, &mut o.0, &mut o.1);
                assert_eq!(s, o, "packet {i}");
            }
            assert!(seen.iter().all(|&n| n > 0), "every colour seen: {seen:?}");
        }
    }

    #[test]
    fn srtcm_excl_colours_as_the_shared_functions() {
        let q = bytes(1000, 1000);
        let (mut shared, mut owned) = (null_mut(), null_mut());
        let now = lg_now_ns();
        unsafe {
            assert_eq!(lg_srtcm_new(&q, 500, &mut shared), LG_OK);
            assert_eq!(lg_srtcm_new(&q, 500, &mut owned), LG_OK);
            same_colours(&SR, shared, owned, now);
            // The clock-reading forms: 1000 B/s barely refills during the test.
            assert_eq!(lg_srtcm_color_blind_excl(owned, 900), LG_RED);
            assert_eq!(lg_srtcm_color_aware_excl(owned, 1, LG_RED), LG_RED);
            assert_eq!(lg_srtcm_color_aware_excl(owned, 1, 3), LG_COLOR_ERROR);
            lg_srtcm_free(shared);
            lg_srtcm_free(owned);
        }
    }

    #[test]
    fn trtcm_excl_colours_as_the_shared_functions() {
        let (p, c) = (bytes(2000, 1500), bytes(1000, 1000));
        let (mut shared, mut owned) = (null_mut(), null_mut());
        let now = lg_now_ns();
        unsafe {
            assert_eq!(lg_trtcm_new(&p, &c, &mut shared), LG_OK);
            assert_eq!(lg_trtcm_new(&p, &c, &mut owned), LG_OK);
            same_colours(&TR, shared, owned, now);
            assert_eq!(lg_trtcm_color_blind_excl(owned, 1600), LG_RED); // above PBS
            assert_eq!(lg_trtcm_color_aware_excl(owned, 1, 9), LG_COLOR_ERROR);
            lg_trtcm_free(shared);
            lg_trtcm_free(owned);
        }
    }

    #[test]
    fn null_and_misaligned_meters_are_errors() {
        let misaligned_sr = std::ptr::without_provenance_mut::<LgSrTcm>(1);
        let misaligned_tr = std::ptr::without_provenance_mut::<LgTrTcm>(1);
        unsafe {
            assert_eq!(lg_srtcm_color_blind_excl(null_mut(), 1), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_blind_at_excl(null_mut(), 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_aware_excl(null_mut(), 1, LG_GREEN), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_aware_at_excl(null_mut(), 1, LG_GREEN, 0), LG_COLOR_ERROR);
            assert_eq!(lg_srtcm_color_blind_at_excl(misaligned_sr, 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_color_blind_excl(null_mut(), 1), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_color_blind_at_excl(null_mut(), 1, 0), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_color_aware_excl(null_mut(), 1, LG_YELLOW), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_color_aware_at_excl(null_mut(), 1, LG_RED, 0), LG_COLOR_ERROR);
            assert_eq!(lg_trtcm_color_aware_at_excl(misaligned_tr, 1, LG_RED, 0), LG_COLOR_ERROR);
        }
    }
}
