//! The exclusive owner's path: [`SrTcm`] and [`TrTcm`] metered through `&mut self`, for a meter
//! that one thread owns (one per core or per queue, as DPDK keeps its `rte_meter`s).
//!
//! # Implementation details
//!
//! `&mut` to a meter proves that no other thread can reach its words for the length of the
//! call, so nothing needs an atomic read-modify-write or a fence. Each word's `AtomicU64` is
//! borrowed as a plain `Cell<u64>` (`get_mut`, through `sync::with_mut`, then
//! `Cell::from_mut`: no `unsafe`), and the decision runs on the cells unchanged: the same
//! [`bucket::take`] over the same `Rate::admit`, the same srTCM decision (`sr_decide::blind`,
//! `sr_decide::aware`) and trTCM decision (`trtcm::decide`), in the forms that are always inlined
//! (`*_inline`), so that the whole decision is one function. Where the shared path loads a word
//! with `Acquire`, this one reads the cell; where it compare-and-swaps, this one compares and
//! stores; where it fences, nothing. A lone thread's CAS on a word no one else touches never
//! fails, so the shared path run by one thread takes exactly these steps: every colour, and
//! every state the words are left in, is the shared path's for the same packets at the same
//! times in the same order (`tests/meter_exclusive.rs` checks it against both the shared path
//! and the RFCs' token buckets, times going backwards included).
//!
//! The srTCM's one race (a green packet that took `A` and then finds `C` taken by another) needs
//! another thread: `C` is read, `A` charged, `C` charged, and nothing writes `C` in between. Its
//! give-back is still written as the shared path's, so that the two paths stay one decision.
//!
//! A meter may be metered shared at one time and exclusively at another: getting the `&mut`
//! (joining the threads that shared it, a lock, a channel) orders their writes before the
//! owner's plain reads, as it does for any value handed from thread to thread.

use super::sr_decide::{self, SrWords};
use super::srtcm::SrTcm;
use super::ticks::{SrRates, Ticks};
use super::trtcm::{self, TrTcm};
use super::Color;
use crate::bucket::{self, Word};
use crate::clock::Clock;
use crate::gcra::Rate;
use core::cell::Cell;
use core::convert::Infallible;

/// A word held by its one owner: its state as a plain integer. It takes charges as a meter's
/// shared word does (no add path: `ADDS` is false for both), so `bucket::take` makes the same
/// steps on it.
impl Word for Cell<u64> {
    type Gone = Infallible;
    const ADDS: bool = false;
    const MAX_STATE: u64 = u64::MAX;

    #[inline(always)]
    fn load(&self) -> Result<u64, Infallible> {
        Ok(self.get())
    }

    #[inline(always)]
    fn compare_exchange(&self, current: u64, new: u64) -> Result<(), Result<u64, Infallible>> {
        let found = self.get();
        if found != current {
            return Err(Ok(found));
        }
        self.set(new);
        Ok(())
    }

    #[inline(always)]
    fn raise_to(&self, now: u64) {
        self.set(self.get().max(now));
    }

    fn fetch_add(&self, _cost: u64) -> Option<u64> {
        None
    }

    #[inline]
    fn lower(&self, from: u64, to: u64) -> Result<(), u64> {
        let found = self.get();
        if found != from {
            return Err(found);
        }
        self.set(to);
        Ok(())
    }
}

/// A decision's view of an [`SrTcm`]'s words held by its owner, at `now` (ticks): the shared
/// view (`srtcm.rs`) step for step, on cells.
struct Owned<'m, C> {
    committed: &'m Cell<u64>,
    total: &'m Cell<u64>,
    rates: &'m SrRates,
    clock: &'m C,
    now: u64,
}

impl<C: Clock> SrWords for Owned<'_, C> {
    type Charge = ();

    #[inline(always)]
    fn committed(&self) -> u64 {
        self.committed.get()
    }

    #[inline(always)]
    fn total(&self) -> u64 {
        self.total.get()
    }

    #[inline(always)]
    fn take_total(&self, n: u64) -> Option<(u64, ())> {
        let Ok(taken) = bucket::take(self.total, &self.rates.total, self.now, n, 0);
        taken.ok().map(|after| (after, ()))
    }

    #[inline(always)]
    fn take_committed(&self, n: u64) -> bool {
        let rate = &self.rates.committed;
        matches!(bucket::take(self.committed, rate, self.now, n, 0), Ok(Ok(_)))
    }

    #[inline(always)]
    fn take_excess(&self, n: u64, now_e: u64) -> bool {
        let rate = &self.rates.excess;
        matches!(bucket::take(self.total, rate, now_e, n, 0), Ok(Ok(_)))
    }

    fn give_back(&self, _: (), after: u64, n: u64) {
        let (rates, clock, now) = (self.rates, self.clock, self.now);
        let later = || now.max(rates.ticks.at(clock.now_ns()));
        let Ok(_) = bucket::give_back(self.total, after, rates.total.cost(n), now, later);
    }

    /// No other thread reads these words: nothing to order.
    #[inline(always)]
    fn publish_total(&self) {}
}

impl<C: Clock> SrTcm<C> {
    /// [`color_blind`](SrTcm::color_blind) for the meter's one owner: the same colour, taking the
    /// same tokens, with plain reads and writes instead of atomic ones (`&mut self` proves that
    /// no other thread meters at the same time). For a meter per core or per queue; share a
    /// meter with [`color_blind`](SrTcm::color_blind).
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, SrTcm};
    /// let mut meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 1000, ManualClock::new())?;
    /// assert_eq!(meter.color_blind_mut(600), Color::Green);
    /// assert_eq!(meter.color_blind_mut(600), Color::Yellow);
    /// assert_eq!(meter.color_blind(600), Color::Red); // the shared path sees the same buckets
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_mut(&mut self, bytes: u64) -> Color {
        let now_ns = self.clock.now_ns();
        self.color_blind_at_mut(bytes, now_ns)
    }

    /// [`color_blind_at`](SrTcm::color_blind_at) for the meter's one owner (see
    /// [`color_blind_mut`](SrTcm::color_blind_mut)): `now_ns` is a reading of this meter's clock
    /// made by the caller, once per burst of packets, say.
    ///
    /// ```
    /// # use leakgate::{Clock, Color, Quota, SrTcm};
    /// // One meter per receive queue, each owned by the thread that polls the queue.
    /// let mut meter = SrTcm::new("1 Gbit/s burst 64 KiB".parse::<Quota>()?, 64 * 1024)?;
    /// let now = meter.clock().now_ns(); // once per burst
    /// let colours: Vec<Color> = [1500, 64, 9000].iter().map(|&len| meter.color_blind_at_mut(len, now)).collect();
    /// assert_eq!(colours, [Color::Green; 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at_mut(&mut self, bytes: u64, now_ns: u64) -> Color {
        self.owned(now_ns, |w| sr_decide::blind_inline(w, w.rates, w.now, bytes))
    }

    /// [`color_aware`](SrTcm::color_aware) for the meter's one owner (see
    /// [`color_blind_mut`](SrTcm::color_blind_mut)).
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, SrTcm};
    /// let mut meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 1000, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_mut(600, Color::Yellow), Color::Yellow); // C is not touched
    /// assert_eq!(meter.color_aware_mut(600, Color::Green), Color::Green);
    /// assert_eq!(meter.tokens_at(0), (400, 400));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware_mut(&mut self, bytes: u64, pre: Color) -> Color {
        let now_ns = self.clock.now_ns();
        self.color_aware_at_mut(bytes, pre, now_ns)
    }

    /// [`color_aware_at`](SrTcm::color_aware_at) for the meter's one owner (see
    /// [`color_blind_mut`](SrTcm::color_blind_mut)).
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, SrTcm};
    /// let mut meter = SrTcm::with_clock(Quota::bytes_per_second(1000)?, 0, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_at_mut(1, Color::Yellow, 0), Color::Red); // EBS 0
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware_at_mut(&mut self, bytes: u64, pre: Color, now_ns: u64) -> Color {
        self.owned(now_ns, |w| sr_decide::aware_inline(w, w.rates, w.now, bytes, pre))
    }
}

impl<C: Clock> SrTcm<C> {
    /// `decide` on the meter's words as cells (`&mut self`: no other thread holds them), at the
    /// clock reading `now_ns`.
    #[inline(always)]
    fn owned<R>(&mut self, now_ns: u64, decide: impl FnOnce(&Owned<'_, C>) -> R) -> R {
        let now = self.rates.ticks.at(now_ns);
        let (rates, clock) = (&self.rates, &self.clock);
        let words = &mut *self.words;
        words.committed.with_mut(|committed| {
            words.total.with_mut(|total| decide(&Owned { committed, total, rates, clock, now }))
        })
    }
}

impl<C: Clock> TrTcm<C> {
    /// [`color_blind`](TrTcm::color_blind) for the meter's one owner: the same colour, taking the
    /// same tokens, with plain reads and writes instead of atomic ones (`&mut self` proves that
    /// no other thread meters at the same time). For a meter per core or per queue; share a
    /// meter with [`color_blind`](TrTcm::color_blind).
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, TrTcm};
    /// let (peak, committed) = (Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?);
    /// let mut meter = TrTcm::with_clock(peak, committed, ManualClock::new())?;
    /// assert_eq!(meter.color_blind_mut(1000), Color::Green);
    /// assert_eq!(meter.color_blind_mut(1000), Color::Yellow);
    /// assert_eq!(meter.color_blind(1), Color::Red); // the shared path sees the same buckets
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_mut(&mut self, bytes: u64) -> Color {
        let now_ns = self.clock.now_ns();
        self.color_aware_at_mut(bytes, Color::Green, now_ns)
    }

    /// [`color_blind_at`](TrTcm::color_blind_at) for the meter's one owner (see
    /// [`color_blind_mut`](TrTcm::color_blind_mut)): `now_ns` is a reading of this meter's clock
    /// made by the caller, once per burst of packets, say.
    ///
    /// ```
    /// # use leakgate::{Clock, Color, Quota, TrTcm};
    /// let mut meter = TrTcm::new("1 Gbit/s burst 1 MB".parse()?, "100 Mbit/s burst 64 KiB".parse()?)?;
    /// let now = meter.clock().now_ns(); // once per burst
    /// assert_eq!(meter.color_blind_at_mut(1500, now), Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at_mut(&mut self, bytes: u64, now_ns: u64) -> Color {
        self.color_aware_at_mut(bytes, Color::Green, now_ns)
    }

    /// [`color_aware`](TrTcm::color_aware) for the meter's one owner (see
    /// [`color_blind_mut`](TrTcm::color_blind_mut)).
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, TrTcm};
    /// let (peak, committed) = (Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?);
    /// let mut meter = TrTcm::with_clock(peak, committed, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_mut(1000, Color::Yellow), Color::Yellow); // P only
    /// assert_eq!(meter.tokens_at(0), (1000, 1000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware_mut(&mut self, bytes: u64, pre: Color) -> Color {
        let now_ns = self.clock.now_ns();
        self.color_aware_at_mut(bytes, pre, now_ns)
    }

    /// [`color_aware_at`](TrTcm::color_aware_at) for the meter's one owner (see
    /// [`color_blind_mut`](TrTcm::color_blind_mut)).
    ///
    /// ```
    /// # use leakgate::{Color, ManualClock, Quota, TrTcm};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let mut meter = TrTcm::with_clock(q, q, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_at_mut(1, Color::Red, 0), Color::Red); // takes nothing
    /// assert_eq!(meter.tokens_at(0), (1000, 1000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware_at_mut(&mut self, bytes: u64, pre: Color, now_ns: u64) -> Color {
        let (peak_rate, committed_rate) = (&self.peak_rate, &self.committed_rate);
        let [peak, committed] = &self.ticks;
        let [p, c] = &mut *self.words;
        p.with_mut(|p| {
            c.with_mut(|c| {
                // As `TrTcm::color_aware_at`, on the words as cells.
                let take = |word: &Cell<u64>, rate: &Rate, ticks: &Ticks| {
                    let Ok(taken) = bucket::take(word, rate, ticks.at(now_ns), bytes, 0);
                    taken.is_ok()
                };
                trtcm::decide_inline(
                    pre,
                    bytes,
                    || take(p, peak_rate, peak),
                    || take(c, committed_rate, committed),
                )
            })
        })
    }
}
