//! Colours as C sees them: `uint8_t` with DPDK's values, and the guard of the meter functions.

use crate::clock::ProcessClock;
use crate::raw;
use crate::status::Error;
use leakgate::{Clock, Color};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A packet's colour, with DPDK's values (`enum rte_color`): [`LG_GREEN`] 0, [`LG_YELLOW`] 1,
/// [`LG_RED`] 2; or [`LG_COLOR_ERROR`] (255) from a call that could not meter.
pub type LgColor = u8;

/// Within the committed rate and burst (`RTE_COLOR_GREEN`).
pub const LG_GREEN: LgColor = 0;
/// Over the committed rate or burst, within the excess burst (srTCM) or the peak rate (trTCM)
/// (`RTE_COLOR_YELLOW`).
pub const LG_YELLOW: LgColor = 1;
/// Over both (`RTE_COLOR_RED`).
pub const LG_RED: LgColor = 2;
/// A meter call that failed: a NULL or misaligned meter, a colour-aware call whose colour is not
/// 0, 1 or 2, or a caught panic. Nothing was taken. It orders above red, so code that drops
/// packets `>= LG_RED` drops these too.
pub const LG_COLOR_ERROR: LgColor = 255;

/// The colour C passed to a colour-aware call.
pub(crate) fn from_c(color: LgColor) -> Result<Color, Error> {
    match color {
        LG_GREEN => Ok(Color::Green),
        LG_YELLOW => Ok(Color::Yellow),
        LG_RED => Ok(Color::Red),
        _ => Err(Error::Argument),
    }
}

/// Runs the body of a meter call: its colour as C's value, or [`LG_COLOR_ERROR`] for an error or
/// a panic (see [`guard`](crate::status::guard) for why the closure is unwind-safe).
#[inline(always)]
pub(crate) fn guard_color(body: impl FnOnce() -> Result<Color, Error>) -> LgColor {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(color)) => color as LgColor,
        Ok(Err(_)) | Err(_) => LG_COLOR_ERROR,
    }
}

/// Runs the body of a colour-aware call on a shared meter handle, the same for every meter
/// kind: the handle checked, `pre` read, the clock read unless the caller gave `now_ns`, then
/// `color(meter, pre, now_ns)`; an error or a panic is [`LG_COLOR_ERROR`].
#[inline(always)]
pub(crate) fn color_aware<H>(
    meter: *const H,
    pre: LgColor,
    now_ns: Option<u64>,
    color: impl FnOnce(&H, Color, u64) -> Color,
) -> LgColor {
    guard_color(move || {
        let meter = raw::handle(meter)?;
        let pre = from_c(pre)?;
        let now_ns = now_ns.unwrap_or_else(|| ProcessClock.now_ns());
        Ok(color(meter, pre, now_ns))
    })
}

/// [`color_aware`] for a meter handle the caller holds exclusively: the handle checked, `pre`
/// read, then `color(meter, pre)`.
#[inline(always)]
pub(crate) fn color_aware_mut<H>(
    meter: *mut H,
    pre: LgColor,
    color: impl FnOnce(&mut H, Color) -> Color,
) -> LgColor {
    guard_color(move || {
        let meter = raw::handle_mut(meter)?;
        let pre = from_c(pre)?;
        Ok(color(meter, pre))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_dpdks_and_bad_ones_are_errors() {
        for c in [Color::Green, Color::Yellow, Color::Red] {
            assert_eq!(from_c(c as LgColor), Ok(c));
            assert_eq!(guard_color(|| Ok(c)), c as LgColor);
        }
        assert_eq!((LG_GREEN, LG_YELLOW, LG_RED), (0, 1, 2));
        assert_eq!(from_c(3), Err(Error::Argument));
        assert_eq!(guard_color(|| Err(Error::Null)), LG_COLOR_ERROR);
        assert_eq!(
            guard_color(|| -> Result<Color, Error> { panic!("in a meter") }),
            LG_COLOR_ERROR
        );
    }
}
