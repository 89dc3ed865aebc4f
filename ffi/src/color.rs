//! Colours as C sees them: `uint8_t` with DPDK's values, and the guard of the meter functions.

use crate::status::Error;
use leakgate::Color;
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
