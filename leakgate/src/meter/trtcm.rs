//! [`TrTcm`]: RFC 2698's two-rate three-colour marker on two GCRA words, and the decision both
//! it and [`KeyedTrTcm`](super::KeyedTrTcm) make.

use super::ticks::{ticks, MeterWord, Ticks};
use super::{Color, MeterError};
use crate::bucket;
use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::clock::TscClock;
use crate::gcra::Rate;
use crate::quota::Quota;
use core::fmt;
use crossbeam_utils::CachePadded;

/// Writes the trTCM's decision as a function `$name` with the attributes given: once as
/// [`decide`] (`#[inline]`: the shared meters') and once as [`decide_inline`] (always inlined:
/// the owner's path, `exclusive.rs`), as `sr_decide.rs` writes its `blind` twice, and for the same
/// reason.
macro_rules! decision {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        pub(super) fn $name(
            pre: Color,
            n: u64,
            take_peak: impl FnOnce() -> bool,
            take_committed: impl FnOnce() -> bool,
        ) -> Color {
            match pre {
                Color::Red => Color::Red,
                // RFC 2698 with `B = 0`: no bucket is short of 0.
                _ if n == 0 => pre,
                _ if !take_peak() => Color::Red,
                Color::Yellow => Color::Yellow,
                Color::Green if take_committed() => Color::Green,
                Color::Green => Color::Yellow,
            }
        }
    };
}

decision!(
    /// The decision for a packet of `n` coloured `pre` (`Green` for colour-blind): red if it is
    /// red already or `P` refuses it (nothing taken), yellow if it is yellow already or `C`
    /// refuses it (`P` taken), else green (both taken). `take_peak` and `take_committed` take
    /// `n` from `P` and `C` and say whether it conformed; each is called at most once, `P`
    /// first.
    #[inline]
    decide
);

decision!(
    /// [`decide`], always inlined: for the owner's path (see [`decision`]).
    #[inline(always)]
    decide_inline
);

/// The checks of a trTCM's two quotas: the same units, and PIR at least CIR (RFC 2698).
pub(super) fn validate(peak: &Quota, committed: &Quota) -> Result<(Rate, Rate), MeterError> {
    if peak.is_bytes() != committed.is_bytes() {
        return Err(MeterError::UnitsDiffer);
    }
    // peak.count / peak.period >= committed.count / committed.period, cross-multiplied.
    let (p, c) = (
        u128::from(peak.count()) * u128::from(committed.period_ns()),
        u128::from(committed.count()) * u128::from(peak.period_ns()),
    );
    if p < c {
        return Err(MeterError::PeakBelowCommitted);
    }
    Ok((ticks(peak, peak.burst())?, ticks(committed, committed.burst())?))
}

/// RFC 2698's two-rate three-colour marker: a peak rate (PIR) with its burst (PBS) and a
/// committed rate (CIR) with its burst (CBS), shared by reference or `Arc` among threads.
///
/// A packet of `B` (bytes, for a byte quota) is red if the peak bucket holds less than `B`, else
/// yellow if the committed bucket does, else green; both buckets start full and gain one unit
/// at each tick of their rate. The colours are the RFC's exactly (ticks at the multiples of
/// `1 / PIR` and `1 / CIR` from the clock's origin), each bucket is one GCRA word, and a packet
/// takes exactly what its colour takes (green both buckets, yellow the peak one, red neither),
/// however many threads meter at once (see [`docs::packets`](crate::docs::packets)).
///
/// ```
/// use leakgate::{Color, ManualClock, Quota, TrTcm};
/// use std::time::Duration;
///
/// // PIR 2 MB/s with PBS 4500 bytes, CIR 1 MB/s with CBS 1500 bytes.
/// let clock = ManualClock::new();
/// let peak: Quota = "2 MB/s burst 4500 B".parse()?;
/// let meter = TrTcm::with_clock(peak, "1 MB/s burst 1500 B".parse()?, clock.clone())?;
/// assert_eq!(meter.color_blind(1500), Color::Green);
/// assert_eq!(meter.color_blind(1500), Color::Yellow);
/// assert_eq!(meter.color_blind(1500), Color::Yellow);
/// assert_eq!(meter.color_blind(1500), Color::Red);
/// clock.advance(Duration::from_micros(1500)); // P regains 3000 bytes, C 1500
/// assert_eq!(meter.color_blind(1500), Color::Green);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TrTcm<#[cfg(feature = "std")] C: Clock = TscClock, #[cfg(not(feature = "std"))] C: Clock>
{
    /// `P` and `C`: `TAT`s in ticks of PIR and of CIR since the clock's origin (0: a new, full
    /// bucket), side by side on one line: every green packet writes both. Read and written only
    /// through [`crate::bucket`].
    pub(super) words: CachePadded<[MeterWord; 2]>,
    pub(super) peak_rate: Rate,
    pub(super) committed_rate: Rate,
    /// The clock in ticks of PIR and of CIR.
    pub(super) ticks: [Ticks; 2],
    peak: Quota,
    committed: Quota,
    pub(super) clock: C,
}

#[cfg(feature = "std")]
impl TrTcm<TscClock> {
    /// A trTCM of PIR and PBS `peak` and CIR and CBS `committed` (each a rate and its burst), on
    /// the default clock. The peak rate must be at least the committed one, and both quotas
    /// must count the same units.
    ///
    /// ```
    /// let meter = leakgate::TrTcm::new("1 Gbit/s burst 1 MB".parse()?, "100 Mbit/s burst 64 KiB".parse()?)?;
    /// assert_eq!(meter.color_blind(1500), leakgate::Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(peak: Quota, committed: Quota) -> Result<Self, MeterError> {
        Self::with_clock(peak, committed, TscClock::new())
    }
}

impl<C: Clock> TrTcm<C> {
    /// A trTCM as [`TrTcm::new`], reading time from `clock`.
    ///
    /// ```
    /// use leakgate::{ManualClock, Quota, TrTcm};
    /// let meter = TrTcm::with_clock(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?, ManualClock::new())?;
    /// assert_eq!(meter.tokens_at(0), (2000, 1000)); // both buckets start full
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(peak: Quota, committed: Quota, clock: C) -> Result<Self, MeterError> {
        let (peak_rate, committed_rate) = validate(&peak, &committed)?;
        let words = CachePadded::default();
        let ticks = [Ticks::new(&peak), Ticks::new(&committed)];
        Ok(TrTcm { words, peak_rate, committed_rate, ticks, peak, committed, clock })
    }

    /// The colour of a packet of `bytes` (the quota's units), metered now, colour-blind, taking
    /// from the buckets what that colour takes. Never blocks, allocates or panics.
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, TrTcm};
    /// let meter = TrTcm::with_clock(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?, ManualClock::new())?;
    /// assert_eq!(meter.color_blind(1000), Color::Green);
    /// assert_eq!(meter.color_blind(1000), Color::Yellow);
    /// assert_eq!(meter.color_blind(1), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind(&self, bytes: u64) -> Color {
        self.color_aware_at(bytes, Color::Green, self.clock.now_ns())
    }

    /// [`color_blind`](TrTcm::color_blind) at `now_ns`, a reading of this meter's clock made by
    /// the caller (say once per burst of packets).
    ///
    /// ```
    /// # use leakgate::{Clock, Color, Quota, TrTcm};
    /// let meter = TrTcm::new(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?)?;
    /// let now = meter.clock().now_ns();
    /// assert_eq!(meter.color_blind_at(1000, now), Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at(&self, bytes: u64, now_ns: u64) -> Color {
        self.color_aware_at(bytes, Color::Green, now_ns)
    }

    /// The colour of a packet of `bytes` that arrives coloured `pre`, metered now, colour-aware
    /// (RFC 2698): a red packet stays red (taking nothing); a yellow one is yellow if the peak
    /// bucket pays for it, else red; a green one as [`color_blind`](TrTcm::color_blind).
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, TrTcm};
    /// let meter = TrTcm::with_clock(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?, ManualClock::new())?;
    /// assert_eq!(meter.color_aware(1000, Color::Yellow), Color::Yellow); // takes from P only
    /// assert_eq!(meter.color_aware(1000, Color::Green), Color::Green);
    /// assert_eq!(meter.color_aware(1, Color::Green), Color::Red); // P is empty
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware(&self, bytes: u64, pre: Color) -> Color {
        self.color_aware_at(bytes, pre, self.clock.now_ns())
    }

    /// [`color_aware`](TrTcm::color_aware) at `now_ns`, a reading of this meter's clock made by
    /// the caller.
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, TrTcm};
    /// let meter = TrTcm::with_clock(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_at(1, Color::Red, 0), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware_at(&self, bytes: u64, pre: Color, now_ns: u64) -> Color {
        let [p, c] = &*self.words;
        let take = |word: &MeterWord, rate: &Rate, ticks: &Ticks| {
            let Ok(taken) = bucket::take(word, rate, ticks.at(now_ns), bytes, 0);
            taken.is_ok()
        };
        let [peak, committed] = &self.ticks;
        decide(
            pre,
            bytes,
            || take(p, &self.peak_rate, peak),
            || take(c, &self.committed_rate, committed),
        )
    }

    /// Whether `P` and `C` both hold `n` at `now_ns` (reads, no write): the room a lease of `n`
    /// green units needs (`meter/leased_tr.rs`).
    #[inline]
    pub(crate) fn green_room_at(&self, n: u64, now_ns: u64) -> bool {
        let [p, c] = &*self.words;
        let room = |word: &MeterWord, rate: &Rate, ticks: &Ticks| {
            let Ok(tat) = bucket::Word::load(word);
            rate.admit(tat, ticks.at(now_ns), n, 0).is_ok()
        };
        room(p, &self.peak_rate, &self.ticks[0]) && room(c, &self.committed_rate, &self.ticks[1])
    }

    /// Takes `n` (at least 1) from `P` and `C` as green, or nothing, for a lease of green units
    /// (`meter/leased_tr.rs`): `P`, then `C`, as a green packet does; if `C` refuses, the charge
    /// of `P` is given back (`bucket::give_back`: the whole charge on a clock that has not moved
    /// since, less the time since otherwise, an over-charge that only refuses more). Whether it
    /// took `n`.
    pub(crate) fn take_green_at(&self, n: u64, now_ns: u64) -> bool {
        let [p, c] = &*self.words;
        let now_p = self.ticks[0].at(now_ns);
        let Ok(Ok(after)) = bucket::take(p, &self.peak_rate, now_p, n, 0) else {
            return false;
        };
        let now_c = self.ticks[1].at(now_ns);
        if matches!(bucket::take(c, &self.committed_rate, now_c, n, 0), Ok(Ok(_))) {
            return true;
        }
        // The clock is read after the value to be lowered was seen: see `bucket::give_back`.
        let later = || now_p.max(self.ticks[0].at(self.clock.now_ns()));
        let Ok(_) = bucket::give_back(p, after, self.peak_rate.cost(n), now_p, later);
        false
    }

    /// The RFC's token counts `(Tp, Tc)` at `now_ns`: what the peak and committed buckets hold.
    ///
    /// ```
    /// # use leakgate::{ManualClock, Quota, TrTcm};
    /// let meter = TrTcm::with_clock(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?, ManualClock::new())?;
    /// meter.color_blind_at(1500, 0); // yellow: P pays, C cannot
    /// assert_eq!(meter.tokens_at(0), (500, 1000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens_at(&self, now_ns: u64) -> (u64, u64) {
        let tokens = |word: &MeterWord, ticks: &Ticks, burst: u64| {
            let now = ticks.at(now_ns);
            let Ok(tat) = bucket::Word::load(word);
            burst.saturating_sub(tat.saturating_sub(now))
        };
        let [p, c] = &*self.words;
        (
            tokens(p, &self.ticks[0], self.peak.burst()),
            tokens(c, &self.ticks[1], self.committed.burst()),
        )
    }

    /// The peak rate and burst (PIR and PBS).
    ///
    /// ```
    /// # use leakgate::{Quota, TrTcm};
    /// let peak = Quota::bytes_per_second(2000)?;
    /// assert_eq!(TrTcm::new(peak, Quota::bytes_per_second(1000)?)?.peak(), peak);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peak(&self) -> Quota {
        self.peak
    }

    /// The committed rate and burst (CIR and CBS).
    ///
    /// ```
    /// # use leakgate::{Quota, TrTcm};
    /// let committed = Quota::bytes_per_second(1000)?;
    /// assert_eq!(TrTcm::new(Quota::bytes_per_second(2000)?, committed)?.committed(), committed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn committed(&self) -> Quota {
        self.committed
    }

    /// The clock this meter reads (and that caller times should come from).
    ///
    /// ```
    /// # use leakgate::{ManualClock, Quota, TrTcm};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = TrTcm::with_clock(q, q, ManualClock::new())?;
    /// meter.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<C: Clock> fmt::Debug for TrTcm<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrTcm")
            .field("peak", &self.peak)
            .field("committed", &self.committed)
            .finish_non_exhaustive()
    }
}
