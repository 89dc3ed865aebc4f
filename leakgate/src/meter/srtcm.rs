//! [`SrTcm`]: RFC 2697's single-rate three-colour marker on two GCRA words (the decision,
//! which [`KeyedSrTcm`](super::KeyedSrTcm) makes too, is in `sr_decide.rs`; see the module docs
//! for why it is exact and all or nothing).

use super::sr_decide::{aware, blind, take_green, SrWords};
use super::ticks::{committed_quota, MeterWord, SrRates};
use super::{Color, MeterError};
use crate::bucket::{self, Word};
use crate::clock::Clock;
#[cfg(feature = "std")]
use crate::clock::TscClock;
use crate::quota::Quota;
use core::fmt;
use crossbeam_utils::CachePadded;

/// RFC 2697's single-rate three-colour marker: a committed rate (CIR) with its committed burst
/// (CBS) and an excess burst (EBS), shared by reference or `Arc` among threads.
///
/// A packet of `B` (bytes, for a byte quota) is green if the committed bucket holds `B`,
/// else yellow if the excess bucket does, else red; the buckets start full, gain one unit at each
/// tick of CIR, and the excess bucket fills only with what overflows the committed one. The
/// colours are the RFC's exactly (ticks at the multiples of `1 / CIR` from the clock's origin),
/// each bucket is one GCRA word, and a packet takes exactly what its colour takes, never part of
/// it, however many threads meter at once (see [`docs::packets`](crate::docs::packets)).
///
/// ```
/// use leakgate::{Color, ManualClock, Quota, SrTcm};
/// use std::time::Duration;
///
/// // CIR 1 MB/s, CBS 3000 bytes, EBS 1500 bytes.
/// let clock = ManualClock::new();
/// let meter = SrTcm::with_clock("1 MB/s burst 3000 B".parse::<Quota>()?, 1500, clock.clone())?;
/// assert_eq!(meter.color_blind(1500), Color::Green);
/// assert_eq!(meter.color_blind(1500), Color::Green);
/// assert_eq!(meter.color_blind(1500), Color::Yellow);
/// assert_eq!(meter.color_blind(1500), Color::Red);
/// clock.advance(Duration::from_micros(1500)); // 1500 bytes at 1 MB/s
/// assert_eq!(meter.color_blind(1500), Color::Green);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SrTcm<#[cfg(feature = "std")] C: Clock = TscClock, #[cfg(not(feature = "std"))] C: Clock>
{
    /// The two words, side by side on one line: every green packet writes both.
    pub(super) words: CachePadded<Words>,
    pub(super) rates: SrRates,
    committed: Quota,
    ebs: u64,
    pub(super) clock: C,
}

/// `C` and `A` (the total `Tc + Te`): `TAT`s in ticks of CIR since the clock's origin (0: a
/// new, full bucket). Read and written only through [`crate::bucket`].
#[derive(Debug, Default)]
pub(super) struct Words {
    pub(super) committed: MeterWord,
    pub(super) total: MeterWord,
}

#[cfg(feature = "std")]
impl SrTcm<TscClock> {
    /// An srTCM of CIR and CBS `committed` (its rate and burst) and EBS `ebs`, on the default
    /// clock. EBS may be 0 (then nothing is yellow); CBS + EBS must make a valid burst of the
    /// quota. For CBS 0, which no quota holds, see [`SrTcm::with_bursts`].
    ///
    /// ```
    /// let meter = leakgate::SrTcm::new("10 MB/s burst 64 KiB".parse()?, 128 * 1024)?;
    /// assert_eq!(meter.color_blind(1500), leakgate::Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(committed: Quota, ebs: u64) -> Result<Self, MeterError> {
        Self::with_clock(committed, ebs, TscClock::new())
    }
}

impl<C: Clock> SrTcm<C> {
    /// An srTCM as [`SrTcm::new`], reading time from `clock`.
    ///
    /// ```
    /// use leakgate::{ManualClock, Quota, SrTcm};
    /// let meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 500, ManualClock::new())?;
    /// assert_eq!(meter.tokens_at(0), (1000, 500)); // both buckets start full
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(committed: Quota, ebs: u64, clock: C) -> Result<Self, MeterError> {
        Self::with_bursts(committed, committed.burst(), ebs, clock)
    }

    /// An srTCM of CIR `cir` (the quota's rate; its burst is not used), CBS `cbs` and EBS `ebs`
    /// (in the quota's units), reading time from `clock`: RFC 2697's three parameters as written,
    /// where either burst may be 0 but not both ([`MeterError::ZeroBursts`]). CBS + EBS must
    /// make a valid burst of the quota.
    ///
    /// With CBS 0 nothing is green (a packet of 0 bytes aside): every tick of CIR goes to the
    /// excess bucket, and a packet is yellow if that holds it, else red, as RFC 2697 and DPDK's
    /// `rte_meter_srtcm` with `cbs = 0` colour it. With EBS 0 nothing is yellow.
    ///
    /// ```
    /// use leakgate::{Color, ManualClock, MeterError, Quota, SrTcm};
    /// // CIR 46 MB/s, CBS 0, EBS 4096 bytes.
    /// let cir = Quota::bytes_per_second(46_000_000)?;
    /// let meter = SrTcm::with_bursts(cir, 0, 4096, ManualClock::new())?;
    /// assert_eq!(meter.tokens_at(0), (0, 4096));
    /// assert_eq!(meter.color_blind_at(1500, 0), Color::Yellow);
    /// assert_eq!(meter.color_blind_at(4000, 0), Color::Red); // 2596 left in E
    /// assert_eq!(meter.committed_burst(), 0);
    /// assert_eq!(SrTcm::with_bursts(cir, 0, 0, ManualClock::new()).unwrap_err(), MeterError::ZeroBursts);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_bursts(cir: Quota, cbs: u64, ebs: u64, clock: C) -> Result<Self, MeterError> {
        let (rates, _) = SrRates::new(cir, cbs, ebs)?;
        let committed = committed_quota(cir, cbs)?;
        Ok(SrTcm { words: CachePadded::default(), rates, committed, ebs, clock })
    }

    /// The colour of a packet of `bytes` (the quota's units), metered now, colour-blind: green,
    /// yellow or red, taking from the buckets what that colour takes. Never blocks, allocates
    /// or panics.
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, SrTcm};
    /// let meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 1000, ManualClock::new())?;
    /// assert_eq!(meter.color_blind(600), Color::Green);
    /// assert_eq!(meter.color_blind(600), Color::Yellow); // 400 left in C, 1000 in E
    /// assert_eq!(meter.color_blind(600), Color::Red); // 400 in each: neither pays alone
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind(&self, bytes: u64) -> Color {
        self.color_blind_at(bytes, self.clock.now_ns())
    }

    /// [`color_blind`](SrTcm::color_blind) at `now_ns`, a reading of this meter's clock made by
    /// the caller (say once per burst of packets).
    ///
    /// ```
    /// # use leakgate::{Clock, Color, Quota, SrTcm};
    /// let meter = SrTcm::new(Quota::bytes_per_second(1_000_000)?, 0)?;
    /// let now = meter.clock().now_ns();
    /// let colours: Vec<Color> = [1500, 1500].iter().map(|&len| meter.color_blind_at(len, now)).collect();
    /// assert_eq!(colours, [Color::Green, Color::Green]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at(&self, bytes: u64, now_ns: u64) -> Color {
        let now = self.rates.ticks.at(now_ns);
        blind(&At { meter: self, now }, &self.rates, now, bytes)
    }

    /// The colour of a packet of `bytes` that arrives coloured `pre`, metered now, colour-aware
    /// (RFC 2697): a green packet as [`color_blind`](SrTcm::color_blind); a yellow one yellow if
    /// the excess bucket pays for it, else red; a red one red, taking nothing.
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, SrTcm};
    /// let meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 1000, ManualClock::new())?;
    /// assert_eq!(meter.color_aware(600, Color::Yellow), Color::Yellow); // C is not touched
    /// assert_eq!(meter.color_aware(600, Color::Green), Color::Green);
    /// assert_eq!(meter.color_aware(1, Color::Red), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware(&self, bytes: u64, pre: Color) -> Color {
        self.color_aware_at(bytes, pre, self.clock.now_ns())
    }

    /// [`color_aware`](SrTcm::color_aware) at `now_ns`, a reading of this meter's clock made by
    /// the caller.
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, SrTcm};
    /// let meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 0, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_at(1, Color::Yellow, 0), Color::Red); // EBS 0
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware_at(&self, bytes: u64, pre: Color, now_ns: u64) -> Color {
        let now = self.rates.ticks.at(now_ns);
        aware(&At { meter: self, now }, &self.rates, now, bytes, pre)
    }

    /// Whether `C` holds `n` at `now_ns` (a read, no write): the room a lease of `n` green
    /// units needs (`meter/leased_sr.rs`).
    #[inline]
    pub(crate) fn green_room_at(&self, n: u64, now_ns: u64) -> bool {
        let now = self.rates.ticks.at(now_ns);
        let Ok(c) = self.words.committed.load();
        self.rates.committed.admit(c, now, n, 0).is_ok()
    }

    /// Takes `n` (at least 1) from both words as green, or nothing (see
    /// `sr_decide::take_green`): whether it did.
    pub(crate) fn take_green_at(&self, n: u64, now_ns: u64) -> bool {
        let now = self.rates.ticks.at(now_ns);
        take_green(&At { meter: self, now }, &self.rates, now, n)
    }

    /// The RFC's token counts `(Tc, Te)` at `now_ns`: what the committed and excess buckets
    /// hold.
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, SrTcm};
    /// let meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 500, ManualClock::new())?;
    /// assert_eq!(meter.color_blind_at(1200, 0), Color::Red); // more than Tc, and than Te
    /// assert_eq!(meter.color_blind_at(800, 0), Color::Green);
    /// assert_eq!(meter.tokens_at(0), (200, 500));
    /// assert_eq!(meter.tokens_at(1_000_000_000), (1000, 500)); // refilled after a second
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens_at(&self, now_ns: u64) -> (u64, u64) {
        let now = self.rates.ticks.at(now_ns);
        let at = At { meter: self, now };
        let (c, a) = (at.committed().max(now), at.total().max(now));
        (self.rates.cbs().saturating_sub(c - now), self.ebs.saturating_sub(a.saturating_sub(c)))
    }

    /// The committed rate and burst (CIR and CBS) as a quota; for a meter of CBS 0 (a burst no
    /// quota has) the quota it was given, whose burst is not CBS: see
    /// [`committed_burst`](SrTcm::committed_burst).
    ///
    /// ```
    /// # use leakgate::{Quota, SrTcm};
    /// let q: Quota = "1 Gbit/s burst 1 MB".parse()?;
    /// assert_eq!(SrTcm::new(q, 0)?.committed(), q);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn committed(&self) -> Quota {
        self.committed
    }

    /// The committed burst size (CBS), 0 included.
    ///
    /// ```
    /// # use leakgate::{ManualClock, Quota, SrTcm};
    /// let q: Quota = "1 Gbit/s burst 1 MB".parse()?;
    /// assert_eq!(SrTcm::new(q, 0)?.committed_burst(), 1_000_000);
    /// assert_eq!(SrTcm::with_bursts(q, 0, 9000, ManualClock::new())?.committed_burst(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn committed_burst(&self) -> u64 {
        self.rates.cbs()
    }

    /// The excess burst size (EBS).
    ///
    /// ```
    /// # use leakgate::{Quota, SrTcm};
    /// assert_eq!(SrTcm::new(Quota::bytes_per_second(1000)?, 750)?.excess_burst(), 750);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn excess_burst(&self) -> u64 {
        self.ebs
    }

    /// The clock this meter reads (and that caller times must come from).
    ///
    /// ```
    /// # use leakgate::{ManualClock, Quota, SrTcm};
    /// let meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 0, ManualClock::new())?;
    /// meter.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// A decision's view of a [`SrTcm`]'s words, at `now` (ticks).
struct At<'m, C: Clock> {
    meter: &'m SrTcm<C>,
    now: u64,
}

impl<C: Clock> SrWords for At<'_, C> {
    type Charge = ();

    #[inline]
    fn committed(&self) -> u64 {
        let Ok(tat) = self.meter.words.committed.load();
        tat
    }

    #[inline]
    fn total(&self) -> u64 {
        let Ok(tat) = self.meter.words.total.load();
        tat
    }

    #[inline]
    fn take_total(&self, n: u64) -> Option<(u64, ())> {
        let Ok(taken) =
            bucket::take(&self.meter.words.total, &self.meter.rates.total, self.now, n, 0);
        taken.ok().map(|after| (after, ()))
    }

    #[inline]
    fn take_committed(&self, n: u64) -> bool {
        let rate = &self.meter.rates.committed;
        matches!(bucket::take(&self.meter.words.committed, rate, self.now, n, 0), Ok(Ok(_)))
    }

    #[inline]
    fn take_excess(&self, n: u64, now_e: u64) -> bool {
        let rate = &self.meter.rates.excess;
        matches!(bucket::take(&self.meter.words.total, rate, now_e, n, 0), Ok(Ok(_)))
    }

    fn give_back(&self, _: (), after: u64, n: u64) {
        let (rates, clock, now) = (&self.meter.rates, &self.meter.clock, self.now);
        let rate = &rates.total;
        // The clock is read after the value to be lowered was seen: see `bucket::give_back`.
        let later = || now.max(rates.ticks.at(clock.now_ns()));
        let Ok(_) = bucket::give_back(&self.meter.words.total, after, rate.cost(n), now, later);
    }
}

impl<C: Clock> fmt::Debug for SrTcm<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SrTcm")
            .field("committed", &self.committed)
            .field("cbs", &self.rates.cbs())
            .field("ebs", &self.ebs)
            .finish_non_exhaustive()
    }
}
