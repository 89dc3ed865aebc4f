//! [`KeyedTrTcm`]: one trTCM per flow, its two words in two keyed tables.
//!
//! A flow's `P` and `C` live in two [`KeyedLimiter`] tables (in ticks of PIR and of CIR), and
//! the decision is [`TrTcm`](super::TrTcm)'s (`trtcm::decide`): `P`, then `C`, and the answer of
//! the second is the colour, so nothing is ever given back. A word forgotten when idle reads as
//! a full bucket, as it is; a flow with no room in a table is refused by it as by a full bucket
//! (no room for `P`: red; no room for `C`: at best yellow).

use super::keyed_slots;
use super::ticks::Ticks;
use super::trtcm::{decide, validate};
use super::{Color, MeterError};
use crate::clock::{Clock, TscClock};
use crate::keyed::{KeyedLimiter, DEFAULT_CAPACITY};
use crate::quota::Quota;
use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

/// One RFC 2698 trTCM per flow (key), each as [`TrTcm`](super::TrTcm) would meter it, in a
/// bounded lock-free table that forgets idle flows by itself (as [`KeyedLimiter`]'s).
///
/// ```
/// use leakgate::{Color, KeyedTrTcm, ManualClock, Quota};
/// let meter = KeyedTrTcm::<u32, _>::with_capacity_and_clock(
///     "2 MB/s burst 3000 B".parse::<Quota>()?, "1 MB/s burst 1500 B".parse()?, 10_000, ManualClock::new())?;
/// assert_eq!(meter.color_blind(&7, 1500), Color::Green);
/// assert_eq!(meter.color_blind(&7, 1500), Color::Yellow);
/// assert_eq!(meter.color_blind(&7, 1500), Color::Red);
/// assert_eq!(meter.color_blind(&8, 1500), Color::Green); // flow 8 has its own meter
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedTrTcm<K, C: Clock = TscClock> {
    /// Every flow's `P`, and every flow's `C`.
    peak: KeyedLimiter<K, Arc<C>>,
    committed: KeyedLimiter<K, Arc<C>>,
    /// The clock in ticks of PIR and of CIR.
    ticks: [Ticks; 2],
    clock: Arc<C>,
}

impl<K: Hash + Eq + Clone + Send + Sync> KeyedTrTcm<K, TscClock> {
    /// One trTCM of PIR and PBS `peak` and CIR and CBS `committed` (as
    /// [`TrTcm::new`](super::TrTcm::new)) per flow, on the default clock, with room for
    /// [`DEFAULT_CAPACITY`] active flows.
    ///
    /// ```
    /// let meter = leakgate::KeyedTrTcm::<u64>::new("1 Gbit/s burst 1 MB".parse()?, "100 Mbit/s burst 64 KiB".parse()?)?;
    /// assert_eq!(meter.color_blind(&1, 1500), leakgate::Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(peak: Quota, committed: Quota) -> Result<Self, MeterError> {
        Self::with_capacity_and_clock(peak, committed, DEFAULT_CAPACITY, TscClock::new())
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedTrTcm<K, C> {
    /// One trTCM per flow, reading time from `clock`, holding at least `capacity` active flows
    /// at once (as [`KeyedLimiter::with_capacity_and_clock`], for each of its two tables).
    ///
    /// ```
    /// use leakgate::{KeyedTrTcm, ManualClock, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = KeyedTrTcm::<u64, _>::with_capacity_and_clock(q, q, 1000, ManualClock::new())?;
    /// assert_eq!(meter.capacity(), 2048);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_capacity_and_clock(
        peak: Quota,
        committed: Quota,
        capacity: usize,
        clock: C,
    ) -> Result<Self, MeterError> {
        let (peak_rate, committed_rate) = validate(&peak, &committed)?;
        let clock = Arc::new(clock);
        let table = |quota, rate| KeyedLimiter::with_rate(quota, rate, capacity, clock.clone());
        Ok(KeyedTrTcm {
            peak: table(peak, peak_rate),
            committed: table(committed, committed_rate),
            ticks: [Ticks::new(&peak), Ticks::new(&committed)],
            clock,
        })
    }

    /// The colour of a packet of `bytes` of flow `key`, metered now, colour-blind (as
    /// [`TrTcm::color_blind`](super::TrTcm::color_blind)).
    ///
    /// ```
    /// # use leakgate::{Color, KeyedTrTcm, ManualClock, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = KeyedTrTcm::<String, _>::with_capacity_and_clock(q, q, 64, ManualClock::new())?;
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

    /// [`color_blind`](KeyedTrTcm::color_blind) at `now_ns`, a reading of this meter's clock
    /// made by the caller (say once per burst of packets).
    ///
    /// ```
    /// # use leakgate::{Clock, Color, KeyedTrTcm, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = KeyedTrTcm::<u64>::new(q, q)?;
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
    /// colour-aware (as [`TrTcm::color_aware`](super::TrTcm::color_aware)).
    ///
    /// ```
    /// # use leakgate::{Color, KeyedTrTcm, ManualClock, Quota};
    /// let meter = KeyedTrTcm::<u64, _>::with_capacity_and_clock(
    ///     Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?, 64, ManualClock::new())?;
    /// assert_eq!(meter.color_aware(&1, 1000, Color::Yellow), Color::Yellow);
    /// assert_eq!(meter.color_aware(&1, 1000, Color::Green), Color::Green);
    /// assert_eq!(meter.color_aware(&1, 1, Color::Green), Color::Red);
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

    /// [`color_aware`](KeyedTrTcm::color_aware) at `now_ns`, a reading of this meter's clock
    /// made by the caller.
    ///
    /// ```
    /// # use leakgate::{Color, KeyedTrTcm, ManualClock, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = KeyedTrTcm::<u64, _>::with_capacity_and_clock(q, q, 64, ManualClock::new())?;
    /// assert_eq!(meter.color_aware_at(&1, 1, Color::Red, 0), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn color_aware_at<Q>(&self, key: &Q, bytes: u64, pre: Color, now_ns: u64) -> Color
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        if pre == Color::Red || bytes == 0 {
            return pre;
        }
        let hashes = (self.peak.touch_key(key), self.committed.touch_key(key));
        let take = |table: &KeyedLimiter<K, Arc<C>>, ticks: &Ticks, hash| {
            let ask = keyed_slots::ask(table.rate(), ticks.at(now_ns), now_ns, bytes);
            table.take_hashed(key, hash, ask).is_ok()
        };
        decide(
            pre,
            bytes,
            || take(&self.peak, &self.ticks[0], hashes.0),
            || take(&self.committed, &self.ticks[1], hashes.1),
        )
    }

    /// Flow `key`'s token counts `(Tp, Tc)` at `now_ns` (a flow the meter does not track holds
    /// full buckets).
    ///
    /// ```
    /// # use leakgate::{KeyedTrTcm, ManualClock, Quota};
    /// let meter = KeyedTrTcm::<u64, _>::with_capacity_and_clock(
    ///     Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?, 64, ManualClock::new())?;
    /// meter.color_blind_at(&1, 1500, 0); // yellow: P pays, C cannot
    /// assert_eq!(meter.tokens_at(&1, 0), (500, 1000));
    /// assert_eq!(meter.tokens_at(&2, 0), (2000, 1000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens_at<Q>(&self, key: &Q, now_ns: u64) -> (u64, u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let tokens = |table: &KeyedLimiter<K, Arc<C>>, ticks: &Ticks| {
            let now = ticks.at(now_ns);
            let tat = keyed_slots::state(table, key, table.touch_key(key), now);
            table.quota().burst().saturating_sub(tat.saturating_sub(now))
        };
        (tokens(&self.peak, &self.ticks[0]), tokens(&self.committed, &self.ticks[1]))
    }

    /// The most flows tracked at once (each of the two tables' slots).
    ///
    /// ```
    /// # use leakgate::{KeyedTrTcm, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// assert_eq!(KeyedTrTcm::<u64>::new(q, q)?.capacity(), leakgate::DEFAULT_CAPACITY);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.peak.capacity()
    }

    /// The clock this meter reads (and that caller times should come from).
    ///
    /// ```
    /// # use leakgate::{KeyedTrTcm, ManualClock, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = KeyedTrTcm::<u64, _>::with_capacity_and_clock(q, q, 64, ManualClock::new())?;
    /// meter.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

impl<K, C: Clock> fmt::Debug for KeyedTrTcm<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedTrTcm")
            .field("peak", &self.peak.quota())
            .field("committed", &self.committed.quota())
            .field("capacity", &self.peak.capacity())
            .finish_non_exhaustive()
    }
}
