//! The srTCM's decision, on the two words of one srTCM wherever they are ([`SrTcm`]'s own,
//! a flow's in [`KeyedSrTcm`]'s tables, an owner's plain words): RFC 2697's colours, all or
//! nothing (see the module docs of `meter` for why).
//!
//! [`SrTcm`]: super::SrTcm
//! [`KeyedSrTcm`]: super::KeyedSrTcm

use super::ticks::SrRates;
use super::Color;
use crate::sync::{fence, Ordering};

/// The two words of one srTCM, wherever they are: a [`SrTcm`](super::SrTcm)'s own, or a flow's in a keyed
/// meter's tables. Each method works at the decision's time, in ticks of CIR.
pub(super) trait SrWords {
    /// Where a charge of `A` was made, to give it back.
    type Charge: Copy;
    /// `C`'s state, loaded with `Acquire`; `now` for a flow with no bucket `C` (idle: full).
    fn committed(&self) -> u64;
    /// `A`'s state, loaded after [`SrWords::committed`]; `u64::MAX` if it cannot be read.
    fn total(&self) -> u64;
    /// Takes `n` from `A` at its own rate: the state left and where, or `None` when refused.
    fn take_total(&self, n: u64) -> Option<(u64, Self::Charge)>;
    /// Takes `n` from `C`: whether it conformed.
    fn take_committed(&self, n: u64) -> bool;
    /// The yellow step: takes `n` from `A` at the rate of `E`, at time `now_e`: whether it
    /// conformed.
    fn take_excess(&self, n: u64, now_e: u64) -> bool;
    /// Gives back a charge of `n` that left `A` at `after`, made at the decision's time.
    fn give_back(&self, at: Self::Charge, after: u64, n: u64);
    /// Orders a green packet's charge of `A`, just made, before its charge of `C`, for the
    /// readers of `C` on other threads: a `Release` fence. Nothing for words that no other
    /// thread can reach (an exclusive owner's).
    #[inline(always)]
    fn publish_total(&self) {
        // Release: a reader of `C` that sees the charge of `C` to come (Acquire) sees the
        // charge of `A` made before this fence.
        fence(Ordering::Release);
    }
}

/// Writes the colour-blind decision for a packet of `n` at `now` as a function `$name` with the
/// attributes given: once as [`blind`] (`#[inline]`, the shared meters' decision, which the
/// compiler keeps out of line in their callers) and once as [`blind_inline`] (always inlined:
/// the owner's path, `exclusive.rs`, whose few instructions on plain words pay to be one
/// function with their caller). One text, so the two are the same decision; two functions, so
/// the owner's path leaves the shared path's machine code as it was.
macro_rules! colour_blind {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        pub(super) fn $name<W: SrWords>(words: &W, rates: &SrRates, now: u64, n: u64) -> Color {
            if n == 0 {
                return Color::Green;
            }
            let c = words.committed();
            if rates.committed.admit(c, now, n, 0).is_err() {
                return excess(words, c, now, n);
            }
            let Some((after, at)) = words.take_total(n) else {
                // `A` refuses: `Tc + Te < n` counting every packet in flight, so neither colour
                // pays.
                return Color::Red;
            };
            words.publish_total();
            if words.take_committed(n) {
                return Color::Green;
            }
            raced(words, rates, now, n, (after, at))
        }
    };
}

colour_blind!(
    /// The colour-blind decision for a packet of `n` at `now`.
    #[inline]
    blind
);

colour_blind!(
    /// [`blind`], always inlined: for the owner's path (see [`colour_blind`]).
    #[inline(always)]
    blind_inline
);

/// A packet that went for green but lost `C` to another after its charge of `A`: yellow if `E`
/// pays for it as the words stand, otherwise red, its charge of `A` given back.
#[cold]
fn raced<W: SrWords>(
    words: &W,
    rates: &SrRates,
    now: u64,
    n: u64,
    taken: (u64, W::Charge),
) -> Color {
    let c = words.committed();
    let a = words.total();
    if a <= c.max(now).saturating_add(rates.excess.scale().tau()) {
        return Color::Yellow;
    }
    words.give_back(taken.1, taken.0, n);
    Color::Red
}

/// Yellow if `E` pays for `n` with `C` at `c`, else red.
#[inline]
fn excess<W: SrWords>(words: &W, c: u64, now: u64, n: u64) -> Color {
    if words.take_excess(n, c.max(now)) {
        Color::Yellow
    } else {
        Color::Red
    }
}

/// The colour-aware decision for a packet of `n` coloured `pre` at `now`.
#[inline]
pub(super) fn aware<W: SrWords>(words: &W, rates: &SrRates, now: u64, n: u64, pre: Color) -> Color {
    aware_with(words, rates, now, n, pre, blind)
}

/// [`aware`] with [`blind_inline`], always inlined: for the owner's path.
#[inline(always)]
pub(super) fn aware_inline<W: SrWords>(
    words: &W,
    rates: &SrRates,
    now: u64,
    n: u64,
    pre: Color,
) -> Color {
    aware_with(words, rates, now, n, pre, blind_inline)
}

/// [`aware`], with `blind` deciding the packets that arrive green.
#[inline(always)]
fn aware_with<W: SrWords>(
    words: &W,
    rates: &SrRates,
    now: u64,
    n: u64,
    pre: Color,
    blind: fn(&W, &SrRates, u64, u64) -> Color,
) -> Color {
    match pre {
        Color::Green => blind(words, rates, now, n),
        Color::Yellow if n == 0 => Color::Yellow,
        Color::Yellow => excess(words, words.committed(), now, n),
        Color::Red => Color::Red,
    }
}

/// Takes `n` (at least 1) as green only, for a lease of green units (`meter/leased_sr.rs`):
/// `A`, the `Release` fence, then `C`, as a green packet does; if `C` refuses after all, the
/// charge of `A` is given back (as the red branch of [`raced`] gives it back) and nothing is
/// yellow. Whether `n` was taken from both words.
#[inline(never)]
pub(super) fn take_green<W: SrWords>(words: &W, rates: &SrRates, now: u64, n: u64) -> bool {
    if rates.committed.admit(words.committed(), now, n, 0).is_err() {
        return false;
    }
    let Some((after, at)) = words.take_total(n) else {
        return false;
    };
    words.publish_total();
    if words.take_committed(n) {
        return true;
    }
    words.give_back(at, after, n);
    false
}
