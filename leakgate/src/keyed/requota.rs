//! [`KeyedLimiter::set_quota`]: a new quota for every key at once, each bucket keeping the units
//! it could admit.
//!
//! # Implementation details
//!
//! Buckets are counted in the units of the limiter's rate ([`RateCell`], with its epoch). Each
//! group records the epoch its four states are in. A change publishes the new rate (epoch `e+1`)
//! and leaves the groups to be converted one by one, each under its shard's lock, by the first
//! check or insert that meets it, and by the next change, which first converts every group still
//! behind (so groups are always in the epoch in force or the one before, the two the cell keeps).
//!
//! **Converting a group** seals each used slot (a CAS to `SEALED`, as when a slot changes key:
//! a check that meets it waits on the shard's lock, a few instructions), bumps the group's
//! version by two (so every handle found before it is stale, and the keys' parity is kept), then
//! reopens each slot at its level in the new quota (as a reload hands a level over: the units
//! available in the old quota stay available, capped at the new burst, `Rate::level_in`), and
//! then records
//! the new epoch. A check that read a state before reads the version again after it and starts
//! over; one that CASes from a state read before finds it gone, since every reopened state lies
//! above every value the slot held (a *slot never holds a value twice*, as in `group.rs`): the
//! new rate's origin is chosen above the highest state of the table when the change begins, and
//! a slot that went higher still is reopened just above what it held.
//!
//! **Checks** read the epoch (after the clock) and its rate, find the key, and compare the
//! group's epoch with theirs: equal, they decide; the group behind, they convert it; theirs
//! behind (a change came in between), they read the rate again. **Inserts** re-check the epoch
//! under their lock and convert each group before they work on it; a change takes every lock to
//! publish its rate, so an insert runs wholly before or wholly after it.

use super::group::{Group, Side, SEALED, SLOTS};
use super::request::EpochOf;
use super::table::ChangedAt;
use super::KeyedLimiter;
use crate::clock::Clock;
use crate::gcra::Rate;
use crate::quota::Quota;
use crate::rate_cell::RateCell;
use crate::sync::{self, Ordering};
use std::hash::Hash;

/// How long after a change's clock reading a check on the old quota may still read the clock
/// and then charge its bucket in the old quota: new states start above any state such a check
/// leaves (a later one, only a thread descheduled between reading the clock and the epoch, is
/// reopened just above what it left, `Group::convert`). A millisecond.
const LATE_NS: u64 = 1_000_000;

impl<K> Group<K> {
    /// Converts the group's states from `from` to `to`, epoch `epoch` (see the module docs), as
    /// of the clock reading `now_ns`; nothing if it is in that epoch already. Under the lock of
    /// the group's shard.
    pub(crate) fn convert(
        &self,
        side: &Side<K>,
        (from, to): (&Rate, &Rate),
        now_ns: u64,
        epoch: u32,
    ) {
        // Relaxed: written under the lock this caller holds.
        if self.epoch.load(Ordering::Relaxed) == epoch {
            return;
        }
        let tags = self.tags_locked(side);
        let mut held = [0u64; SLOTS];
        for slot in (0..SLOTS).filter(|&slot| tags[slot] != 0) {
            // Acquire: as the seal of a reclaim (`Group::reclaim`), so a lowering's high-water
            // noted before it is seen below.
            let mut tat = self.tats[slot].load(Ordering::Relaxed);
            while let Err(found) = self.tats[slot].compare_exchange_weak(
                tat,
                SEALED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                tat = found;
            }
            held[slot] = tat;
        }
        // Release: a check that reads a reopened state (Acquire) sees the bump, and starts over.
        // By two: the keys' blocks read the version's parity (`key_blocks.rs`).
        self.version.fetch_add(2, Ordering::Release);
        for slot in (0..SLOTS).filter(|&slot| tags[slot] != 0) {
            let tat = held[slot];
            // Relaxed: ordered after the seal's Acquire.
            let high = tat.max(self.lowered_high(slot));
            let level = from.level_in(tat, to, now_ns);
            let reopen = to.units_at(now_ns).saturating_add(level).max(high.saturating_add(1));
            // Release: as for a reclaim's reopening.
            self.tats[slot].store(reopen.min(SEALED - 1), Ordering::Release);
        }
        // Release: a check that reads the new epoch (Acquire) reads the reopened states.
        self.epoch.store(epoch, Ordering::Release);
    }

    /// The epoch the group's states are in.
    #[inline(always)]
    pub(crate) fn epoch(&self) -> u32 {
        // Acquire: see `Group::convert`.
        self.epoch.load(Ordering::Acquire)
    }
}

/// A conversion to the rate of `epoch`, as an insert or a check at that epoch makes it.
pub(crate) struct Conversion<'a> {
    rates: &'a RateCell,
    epoch: u64,
    to: Rate,
    changed_at: &'a ChangedAt,
}

impl<'a> Conversion<'a> {
    /// A conversion to `to`, the rate of `epoch`, as of when the change to it was made
    /// (`changed_at`), whenever it runs.
    pub(crate) fn new(
        rates: &'a RateCell,
        epoch: u64,
        to: Rate,
        changed_at: &'a ChangedAt,
    ) -> Self {
        Conversion { rates, epoch, to, changed_at }
    }
}

impl<K> EpochOf<K> for Conversion<'_> {
    fn current(&self) -> bool {
        self.rates.epoch() == self.epoch
    }

    fn convert(&self, group: &Group<K>, side: &Side<K>) {
        if group.epoch() == self.epoch as u32 {
            return;
        }
        // Behind by one (the change before converted every group further behind); its rate is
        // the cell's previous one, kept until the next change, which cannot start while this
        // conversion holds a shard lock.
        if let Some(from) = self.rates.previous(self.epoch) {
            // Under the shard's lock (see `ChangedAt`).
            let at_ns = self.changed_at.of(self.epoch);
            group.convert(side, (&from, &self.to), at_ns, self.epoch as u32);
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// The level, in units of `to`, that a bucket of a key this limiter forgot or never saw
    /// would carry into `to` as of `now_ns` (see `Rate::level_in`): 0 if it would open empty.
    /// How a reload opens the keys its new tables never held no fuller than the old ones.
    pub(crate) fn fresh_level_in(&self, to: &Rate, now_ns: u64) -> u64 {
        let from = self.rate();
        from.level_in(from.units_at(now_ns).max(self.table.fresh()), to, now_ns)
    }

    /// Opens every new bucket with at least `level` units in it as of `now_ns` (a level another
    /// limiter's forgotten keys carry, [`Self::fresh_level_in`]). Before the limiter is shared.
    pub(crate) fn open_with_level(&self, level: u64, now_ns: u64) {
        if level > 0 {
            let state = self.rate().units_at(now_ns).saturating_add(level);
            self.table.set_fresh(self.table.fresh().max(state));
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Puts `quota` in force for every key, at once and without a restart: each tracked key's
    /// bucket keeps the units it could admit now (its burst less its level `(TAT - now) / T`),
    /// capped at the new burst and rounded down to the new units (so no change makes more units
    /// available than before it; a key the table forgot, or never saw, opens no fuller than a
    /// key it kept idle through the changes), as
    /// [`RuleLimiter::reload`](crate::RuleLimiter::reload) does. Checks take no lock: the first
    /// check of a group of four keys after the change converts that group (taking its shard's
    /// lock for the few instructions that takes, as an insert does). Changes run one at a time;
    /// each also finishes converting the groups the one before left.
    ///
    /// Every state after a change lies above every state before it (so no check still holding
    /// an old state can act on a new one): a change to a shorter interval moves the table's
    /// clock up by up to the old burst's duration (as if its fullest bucket were full: checks on
    /// the old quota may still fill one while the table is converted). The clock has a century
    /// of range, so that is nothing for changes seconds apart; a deep bucket whose quota changes
    /// many times a second spends its range sooner (then it refuses, as any limiter past its
    /// range does).
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// keyed.check_n(&"alice", 6).unwrap();
    /// keyed.set_quota("1/s burst 8".parse()?);
    /// assert_eq!(keyed.peek(&"alice"), 4); // the 4 available stay available
    /// assert_eq!(keyed.peek(&"bob"), 8);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        let _one_at_a_time = sync::lock(&self.changing);
        let (epoch, from) = self.rates.read();
        let now_ns = self.clock().now_ns();
        let raw = quota.rate();
        // Every group into the epoch in force (a conversion is a no-op for one already there),
        // and how far the new quota's clock must move up so that every slot reopens above what
        // it held: `held + 1 - level` at most, over the slots (see `Group::convert`).
        let mut ahead = 0u64;
        self.table.for_each_group(|shard, group, side| {
            let _shard = sync::lock(&self.table.shards[shard]);
            Conversion::new(&self.rates, epoch, from, self.table.changed_at()).convert(group, side);
            ahead = ahead.max(group.reopen_floor(side, |tat| from.level_in(tat, &raw, now_ns)));
        });
        // Every lock, so that an insert runs wholly before or after the change (module docs).
        let _spill = sync::lock(&self.table.spill);
        let _shards: Vec<_> = self.table.shards.iter().map(|shard| sync::lock(shard)).collect();
        // And the same for any bucket a meter could leave at any clock reading a check on the old
        // quota may still have made (before this one, or a little after: `LATE_NS`), since such
        // checks go on charging groups after the walk: between the empty bucket and the fullest,
        // `state + 1 - level` is largest at one of the two (it moves with the state at one slope
        // until the level reaches the new burst, then at another). For a shorter interval that
        // is the fullest, which moves the clock up by up to the old burst's duration (see the
        // docs of `set_quota`); bounding it by the states the walk saw instead left a busy key's
        // bucket fuller than it was by as much, after every change under load.
        let now_ns = self.clock().now_ns();
        let late_ns = now_ns.saturating_add(LATE_NS);
        let empty = from.units_at(late_ns);
        let fullest = empty.saturating_add(from.scale().tau());
        let fullest_floor =
            fullest.saturating_add(1).saturating_sub(from.level_in(fullest, &raw, late_ns));
        let late = fullest_floor.max(empty.saturating_add(1));
        // The least origin that does it.
        let to = raw.with_origin(ahead.max(late).saturating_sub(raw.units_at(now_ns)));
        // A key the table forgot or never saw opens as a bucket it held idle through every
        // change would be now (a larger burst adds nothing at once; `Rate::level_in`).
        let idle = from.units_at(now_ns).max(self.table.fresh());
        let fresh = match from.level_in(idle, &to, now_ns) {
            0 => 0,
            level => to.units_at(now_ns).saturating_add(level),
        };
        self.table.set_fresh(fresh);
        // The change saw this time: a key forgotten or new opens no earlier (the new rate's
        // buckets are reckoned from it), even through a check whose clock reads earlier.
        self.table.note_seen(now_ns);
        self.table.changed_at().record(epoch.wrapping_add(1), now_ns);
        self.table.forget_room_bound();
        let published = self.rates.publish(to, quota);
        debug_assert_eq!(published, epoch.wrapping_add(1));
    }
}
