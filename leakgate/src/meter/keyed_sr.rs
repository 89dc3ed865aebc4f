//! [`KeyedSrTcm`]: one srTCM per flow, its two words in two keyed tables.
//!
//! # Implementation details
//!
//! A flow's words `C` and `A` live in two [`KeyedLimiter`] tables (`C`'s of CBS, `A`'s of CBS +
//! EBS, both in ticks of CIR), and the decision is the one [`SrTcm`](super::SrTcm) makes, word
//! for word (`sr_decide::blind`): the order `A` then `C` is the canonical order of its two charges,
//! and the one charge it may give back (`A`'s, in the race of the module docs) goes back through
//! the table's `give_back`. Two tables rather than two slots of one group, because each word is
//! then an ordinary keyed bucket: a slot that changes key, a flow that comes back after its
//! bucket was forgotten, a table with no room, are the keyed table's cases, already argued.
//!
//! What the two-table layout adds, and why it keeps the meter exact:
//!
//! * A flow's two words are forgotten independently, each when its own bucket is idle. An idle
//!   bucket is a full one, so a forgotten `C` reads as `now` (full), and a forgotten `A` is found
//!   again (inserted) before the yellow step runs on it. A bucket that comes back starts at the
//!   table's idle mark, at or above its old state: `C` then only rises, which never makes `E`
//!   look fuller than it is, and `A` rises, which only makes it look emptier.
//! * A flow that finds no room in a table is refused by that table as by a full bucket (the
//!   tables' overflow policy is `Deny`): with no room for `A` it is red; with no room for `C` it
//!   cannot be green, and is yellow only if `E` pays.

use super::keyed_slots::{self, state, table_ns};
use super::sr_decide::{self, SrWords};
use super::ticks::{committed_quota, SrRates};
use super::{Color, MeterError};
use crate::bucket::{self, Word};
use crate::clock::{Clock, TscClock};
use crate::gcra::Rate;
use crate::keyed::{Ask, Charged, FirstState, KeyedLimiter, DEFAULT_CAPACITY};
use crate::quota::Quota;
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

/// One RFC 2697 srTCM per flow (key), each as [`SrTcm`](super::SrTcm) would meter it, in a
/// bounded lock-free table that forgets idle flows by itself (as [`KeyedLimiter`]'s).
///
/// ```
/// use leakgate::{Color, KeyedSrTcm, ManualClock, Quota};
/// let meter = KeyedSrTcm::<u32, _>::with_capacity_and_clock(
///     "1 MB/s burst 1500 B".parse::<Quota>()?, 1500, 10_000, ManualClock::new())?;
/// assert_eq!(meter.color_blind(&7, 1500), Color::Green);
/// assert_eq!(meter.color_blind(&7, 1500), Color::Yellow);
/// assert_eq!(meter.color_blind(&7, 1500), Color::Red);
/// assert_eq!(meter.color_blind(&8, 1500), Color::Green); // flow 8 has its own meter
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedSrTcm<K, C: Clock = TscClock> {
    /// Every flow's `C`, and every flow's `A` (the total `Tc + Te`).
    committed: KeyedLimiter<K, Arc<C>>,
    total: KeyedLimiter<K, Arc<C>>,
    rates: SrRates,
    ebs: u64,
    clock: Arc<C>,
}

impl<K: Hash + Eq + Clone + Send + Sync> KeyedSrTcm<K, TscClock> {
    /// One srTCM of CIR and CBS `committed` and EBS `ebs` (as [`SrTcm::new`](super::SrTcm::new))
    /// per flow, on the default clock, with room for [`DEFAULT_CAPACITY`] active flows.
    ///
    /// ```
    /// let meter = leakgate::KeyedSrTcm::<u64>::new("10 MB/s burst 64 KiB".parse()?, 64 * 1024)?;
    /// assert_eq!(meter.color_blind(&1, 1500), leakgate::Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(committed: Quota, ebs: u64) -> Result<Self, MeterError> {
        Self::with_capacity_and_clock(committed, ebs, DEFAULT_CAPACITY, TscClock::new())
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedSrTcm<K, C> {
    /// One srTCM per flow, reading time from `clock`, holding at least `capacity` active flows
    /// at once (as [`KeyedLimiter::with_capacity_and_clock`], for each of its two tables).
    ///
    /// ```
    /// use leakgate::{KeyedSrTcm, ManualClock, Quota};
    /// let meter = KeyedSrTcm::<u64, _>::with_capacity_and_clock(Quota::bytes_per_second(1000)?, 0, 1000, ManualClock::new())?;
    /// assert_eq!(meter.capacity(), 2048);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_capacity_and_clock(
        committed: Quota,
        ebs: u64,
        capacity: usize,
        clock: C,
    ) -> Result<Self, MeterError> {
        Self::with_bursts(committed, committed.burst(), ebs, capacity, clock)
    }

    /// One srTCM of CIR `cir`, CBS `cbs` and EBS `ebs` (as
    /// [`SrTcm::with_bursts`](super::SrTcm::with_bursts): either burst may be 0, not both) per
    /// flow, reading time from `clock`, holding at least `capacity` active flows at once.
    ///
    /// ```
    /// use leakgate::{Color, KeyedSrTcm, ManualClock, Quota};
    /// let cir = Quota::bytes_per_second(1_000_000)?;
    /// let meter = KeyedSrTcm::<u64, _>::with_bursts(cir, 0, 3000, 1000, ManualClock::new())?;
    /// assert_eq!(meter.color_blind_at(&1, 1500, 0), Color::Yellow); // CBS 0: never green
    /// assert_eq!(meter.tokens_at(&1, 0), (0, 1500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_bursts(
        cir: Quota,
        cbs: u64,
        ebs: u64,
        capacity: usize,
        clock: C,
    ) -> Result<Self, MeterError> {
        let (rates, total) = SrRates::new(cir, cbs, ebs)?;
        // The table's quota is only reported; its buckets follow the rate (of burst CBS).
        let committed = committed_quota(cir, cbs)?;
        let clock = Arc::new(clock);
        let table = |quota, rate| KeyedLimiter::with_rate(quota, rate, capacity, clock.clone());
        Ok(KeyedSrTcm {
            committed: table(committed, rates.committed),
            total: table(total, rates.total),
            rates,
            ebs,
            clock,
        })
    }

    /// The colour of a packet of `bytes` of flow `key`, metered now, colour-blind (as
    /// [`SrTcm::color_blind`](super::SrTcm::color_blind)).
    ///
    /// ```
    /// # use leakgate::{Color, KeyedSrTcm, ManualClock, Quota};
    /// let meter = KeyedSrTcm::<String, _>::with_capacity_and_clock(Quota::bytes_per_second(1000)?, 0, 64, ManualClock::new())?;
    /// assert_eq!(meter.color_blind("10.0.0.1", 1000), Color::Green); // &str for String keys
    /// assert_eq!(meter.color_blind("10.0.0.1", 1), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind<Q>(&self, key: &Q, bytes: u64) -> Color
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.color_aware_at(key, bytes, Color::Green, self.clock.now_ns())
    }

    /// [`color_blind`](KeyedSrTcm::color_blind) at `now_ns`, a reading of this meter's clock
    /// made by the caller (say once per burst of packets).
    ///
    /// ```
    /// # use leakgate::{Clock, Color, KeyedSrTcm, Quota};
    /// let meter = KeyedSrTcm::<u64>::new(Quota::bytes_per_second(1000)?, 0)?;
    /// let now = meter.clock().now_ns();
    /// assert_eq!(meter.color_blind_at(&1, 1000, now), Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at<Q>(&self, key: &Q, bytes: u64, now_ns: u64) -> Color
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.color_aware_at(key, bytes, Color::Green, now_ns)
    }

    /// The colour of a packet of `bytes` of flow `key` that arrives coloured `pre`, metered now,
    /// colour-aware (as [`SrTcm::color_aware`](super::SrTcm::color_aware)).
    ///
    /// ```
    /// # use leakgate::{Color, KeyedSrTcm, ManualClock, Quota};
    /// let meter = KeyedSrTcm::<u64, _>::with_capacity_and_clock(Quota::bytes_per_second(1000)?, 500, 64, ManualClock::new())?;
    /// assert_eq!(meter.color_aware(&1, 500, Color::Yellow), Color::Yellow);
    /// assert_eq!(meter.color_aware(&1, 1, Color::Yellow), Color::Red); // E is empty
    /// assert_eq!(meter.color_aware(&1, 1000, Color::Green), Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware<Q>(&self, key: &Q, bytes: u64, pre: Color) -> Color
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.color_aware_at(key, bytes, pre, self.clock.now_ns())
    }

    /// [`color_aware`](KeyedSrTcm::color_aware) at `now_ns`, a reading of this meter's clock
    /// made by the caller.
    ///
    /// ```
    /// # use leakgate::{Color, KeyedSrTcm, ManualClock, Quota};
    /// let meter = KeyedSrTcm::<u64, _>::with_capacity_and_clock(Quota::bytes_per_second(1000)?, 0, 64, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_at(&1, 1, Color::Red, 0), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn color_aware_at<Q>(&self, key: &Q, bytes: u64, pre: Color, now_ns: u64) -> Color
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        if pre == Color::Red {
            return Color::Red;
        }
        let hashes = (self.committed.touch_key(key), self.total.touch_key(key));
        let now = self.rates.ticks.at(now_ns);
        let flow = Flow { meter: self, key, hashes, now, now_ns };
        sr_decide::aware(&flow, &self.rates, now, bytes, pre)
    }

    /// Flow `key`'s token counts `(Tc, Te)` at `now_ns` (a flow the meter does not track holds
    /// full buckets).
    ///
    /// ```
    /// # use leakgate::{KeyedSrTcm, ManualClock, Quota};
    /// let meter = KeyedSrTcm::<u64, _>::with_capacity_and_clock(Quota::bytes_per_second(1000)?, 500, 64, ManualClock::new())?;
    /// meter.color_blind_at(&1, 1200, 0); // red: more than Tc and more than Te
    /// meter.color_blind_at(&1, 700, 0); // green
    /// assert_eq!(meter.tokens_at(&1, 0), (300, 500));
    /// assert_eq!(meter.tokens_at(&2, 0), (1000, 500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens_at<Q>(&self, key: &Q, now_ns: u64) -> (u64, u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let hashes = (self.committed.touch_key(key), self.total.touch_key(key));
        let now = self.rates.ticks.at(now_ns);
        let flow = Flow { meter: self, key, hashes, now, now_ns };
        let c = flow.committed().max(now);
        let a = state(&self.total, key, hashes.1, now).max(now);
        let cbs = self.rates.cbs();
        (cbs.saturating_sub(c - now), self.ebs.saturating_sub(a.saturating_sub(c)))
    }

    /// The most flows tracked at once (each of the two tables' slots).
    ///
    /// ```
    /// # use leakgate::{KeyedSrTcm, Quota};
    /// let meter = KeyedSrTcm::<u64>::new(Quota::bytes_per_second(1000)?, 0)?;
    /// assert_eq!(meter.capacity(), leakgate::DEFAULT_CAPACITY);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.committed.capacity()
    }

    /// The clock this meter reads (and that caller times must come from).
    ///
    /// ```
    /// # use leakgate::{KeyedSrTcm, ManualClock, Quota};
    /// let meter = KeyedSrTcm::<u64, _>::with_capacity_and_clock(Quota::bytes_per_second(1000)?, 0, 64, ManualClock::new())?;
    /// meter.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// A decision's view of one flow's words, at `now` (ticks of CIR; `now_ns` is the reading).
struct Flow<'m, K, C: Clock, Q: ?Sized> {
    meter: &'m KeyedSrTcm<K, C>,
    key: &'m Q,
    /// The key's hash in the `C` table and in the `A` table.
    hashes: (u64, u64),
    now: u64,
    now_ns: u64,
}

impl<K, C, Q> Flow<'_, K, C, Q>
where
    K: Hash + Eq + Clone + Send + Sync + Borrow<Q>,
    C: Clock,
    Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
{
    /// A request of `n` of `table`'s bucket for the flow.
    fn ask<'t>(&self, table: &'t KeyedLimiter<K, Arc<C>>, n: u64) -> Ask<'t> {
        keyed_slots::ask(table.rate(), self.now, self.now_ns, n)
    }

    /// The yellow step on the slot of `A` the table holds for the flow (see `take_excess`):
    /// whether it conformed, or `None` if the table does not hold the flow or is forgetting it.
    fn step_excess(&self, rate: &Rate, n: u64, now_e: u64) -> Option<bool> {
        loop {
            let found = self.meter.total.table().find(self.key, self.hashes.1)?;
            match bucket::take(&found, rate, now_e, n, 0) {
                Ok(decided) => return Some(decided.is_ok()),
                Err(_) if found.is_sealed() => return None,
                // Another key took a slot of the group: look again.
                Err(_) => {}
            }
        }
    }
}

impl<K, C, Q> SrWords for Flow<'_, K, C, Q>
where
    K: Hash + Eq + Clone + Send + Sync + Borrow<Q>,
    C: Clock,
    Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
{
    type Charge = Option<Charged>;

    fn committed(&self) -> u64 {
        state(&self.meter.committed, self.key, self.hashes.0, self.now)
    }

    fn total(&self) -> u64 {
        // Called only with a charge of the flow in `A`, so its bucket is busy and held; if not,
        // refuse (the caller then gives the charge back, if it can still be found).
        match self.meter.total.table().find(self.key, self.hashes.1) {
            Some(found) => Word::load(&found).unwrap_or(u64::MAX),
            None => u64::MAX,
        }
    }

    fn take_total(&self, n: u64) -> Option<(u64, Option<Charged>)> {
        let taken = self
            .meter
            .total
            .take_hashed(self.key, self.hashes.1, self.ask(&self.meter.total, n))
            .ok()?;
        Some((taken.state, Charged::of(&taken, n)))
    }

    fn take_committed(&self, n: u64) -> bool {
        self.meter
            .committed
            .take_hashed(self.key, self.hashes.0, self.ask(&self.meter.committed, n))
            .is_ok()
    }

    fn take_excess(&self, n: u64, now_e: u64) -> bool {
        if n > self.meter.ebs {
            return false;
        }
        loop {
            if let Some(decided) = self.step_excess(&self.meter.rates.excess, n, now_e) {
                return decided;
            }
            // The table does not hold the flow's `A` (or is forgetting it): give it a slot,
            // starting no emptier than the table's idle mark; no room, no yellow.
            let ns = table_ns(self.meter.total.rate(), self.now, self.now_ns);
            if self.meter.total.settle(self.key, ns, &|| FirstState::EMPTY).is_none() {
                return false;
            }
        }
    }

    fn give_back(&self, at: Option<Charged>, after: u64, n: u64) {
        if let Some(at) = at {
            let ns = table_ns(self.meter.total.rate(), self.now, self.now_ns);
            self.meter.total.give_back(self.key, at, after, n, ns);
        }
    }
}

impl<K, C: Clock> fmt::Debug for KeyedSrTcm<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedSrTcm")
            .field("committed", &self.committed.quota())
            .field("cbs", &self.rates.cbs())
            .field("ebs", &self.ebs)
            .field("capacity", &self.committed.capacity())
            .finish_non_exhaustive()
    }
}
