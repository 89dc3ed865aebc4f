//! Leases for hot keys: units taken from Redis in one round trip and served here without one.
//!
//! # Implementation details
//!
//! A lease of `k` units is taken by the script right after an admission: it charges the bucket
//! `k` more units if they conform now, exactly as `k` more admissions would. Unit `u` (from 0)
//! then holds the bucket's slot `[F_u - T, F_u]` with `F_u = first + (u + 1) * T` measured from
//! the request's time (`first` is the backlog after the request itself). For the fleet to keep the
//! bound `burst + rate * window`, a unit must go no earlier than `F_u - tau` (true from the start:
//! the lease conformed) and no later than the start of its slot, `first + u * T`; a unit whose
//! slot has begun is dropped. So a request of cost `n` at elapsed time `e` takes the units
//! `[s, s + n)` with `s = max(next, first slot not yet begun at e)`, if `s + n <= k`, and moves
//! `next` to `s + n` with one compare-and-swap: no unit is handed out twice, and none late.
//!
//! Elapsed time is measured on this process's clock from just *before* the request was sent,
//! so it is never shorter than the time that passed on Redis's clock since the script ran; with
//! Redis `TIME` it is also stretched by 1/1024 to cover the two clocks' rates differing.
//!
//! Each lease also records, per quota, the bucket's TAT after it was taken (`Schedule::tat`), and
//! the next lease request of the key sends it: the bucket is not empty before then unless Redis
//! lost it, and the script, finding it emptier, starts the key full (see `gcra_general.lua` and the
//! crate docs, "When Redis loses keys"). The lost bucket's leased units are still served, each
//! in its slot: they were charged in it, and the full bucket's schedule begins after theirs.
//!
//! The word `next` publishes nothing but itself, so every operation on it is `Relaxed`;
//! leases are installed and read through `ArcSwap`, which orders the lease's plain fields.

use crate::limiters::lease_config::LeaseConfig;
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One quota's schedule for a lease, in that quota's units.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    /// Units per nanosecond.
    pub(crate) units_per_ns: u128,
    /// `T`.
    pub(crate) interval: u128,
    /// Start of unit 0's slot, after the request's time.
    pub(crate) first: u128,
    /// The bucket's TAT after the lease was taken, on the script's clock: the bucket is not
    /// empty before then, whatever else happens to it, unless Redis loses it. A later lease
    /// request sends it, so that the script can tell a lost bucket (see `gcra_general.lua`).
    pub(crate) tat: u128,
}

/// Units leased for one key.
#[derive(Debug)]
pub(crate) struct Lease {
    /// Local clock (ns) just before the request that took the lease was sent.
    origin_ns: u64,
    /// Whether to stretch elapsed time for clock-rate differences (Redis `TIME`).
    stretch: bool,
    /// One schedule per quota; empty for the placeholder of a key that never had a lease.
    schedules: Box<[Schedule]>,
    /// Units in the lease.
    units: u64,
    /// The first unit not yet handed out (or dropped).
    next: AtomicU64,
    /// Units handed out.
    served: AtomicU64,
}

impl Lease {
    /// The placeholder of a key that has not held a lease.
    pub(crate) fn none() -> Lease {
        Lease::new(0, false, Box::new([]), 0)
    }

    /// A lease of `units` units, taken by a request sent at `origin_ns`.
    pub(crate) fn new(
        origin_ns: u64,
        stretch: bool,
        schedules: Box<[Schedule]>,
        units: u64,
    ) -> Lease {
        Lease {
            origin_ns,
            stretch,
            schedules,
            units,
            next: AtomicU64::new(0),
            served: AtomicU64::new(0),
        }
    }

    /// The first unit whose slot has not begun at `now_ns`.
    fn first_usable(&self, now_ns: u64) -> u64 {
        let elapsed = now_ns.saturating_sub(self.origin_ns);
        let elapsed =
            u128::from(elapsed) + if self.stretch { u128::from(elapsed >> 10) } else { 0 };
        let mut first = 0u128;
        for s in self.schedules.iter() {
            let at = elapsed * s.units_per_ns;
            if at > s.first {
                first = first.max((at - s.first).div_ceil(s.interval));
            }
        }
        u64::try_from(first).unwrap_or(u64::MAX)
    }

    /// Takes `n` units at `now_ns`; returns how many are left, or `None` if the lease cannot
    /// serve them (used up, or their slots have begun).
    #[inline]
    pub(crate) fn try_take(&self, now_ns: u64, n: u64) -> Option<u64> {
        if self.units == 0 {
            return None;
        }
        let first = self.first_usable(now_ns);
        // Relaxed: `next` is the whole state (module docs).
        let mut next = self.next.load(Ordering::Relaxed);
        loop {
            let end = next.max(first).checked_add(n).filter(|&end| end <= self.units)?;
            // Relaxed on both outcomes: atomicity alone orders competing takers.
            match self.next.compare_exchange_weak(next, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    // Relaxed: a statistic for sizing the next lease.
                    self.served.fetch_add(n, Ordering::Relaxed);
                    return Some(self.units - end);
                }
                Err(actual) => next = actual,
            }
        }
    }

    /// How many units the next lease of this key should ask for, at `now_ns`: twice this one
    /// (at least 1) if the key is hot (asked again within `hot_ns` of this lease) or used it up,
    /// otherwise what was used of it. A key that has never held a lease gets none.
    ///
    /// A hot key's lease grows even if its units went unused: a unit whose slot begins sooner
    /// than a round trip after the request is dropped on arrival, so a fast rate needs leases
    /// of many intervals before any unit is usable.
    pub(crate) fn next_size(&self, now_ns: u64, hot_ns: u64, max_units: u64) -> u64 {
        if self.schedules.is_empty() {
            return 0;
        }
        // Relaxed: as in `try_take`.
        let served = self.served.load(Ordering::Relaxed);
        let hot = now_ns.saturating_sub(self.origin_ns) <= hot_ns;
        let want = if hot || (self.units > 0 && served >= self.units) {
            self.units.max(served).saturating_mul(2).max(1)
        } else {
            served
        };
        want.min(max_units)
    }

    /// When each bucket of the key is empty at the earliest, as this lease found it (the TAT of
    /// each quota's bucket, in its units); empty if the key never held a lease.
    pub(crate) fn known_tat(&self) -> impl Iterator<Item = u128> + '_ {
        self.schedules.iter().map(|s| s.tat)
    }

    /// Whether the lease's schedule has run out at `now_ns`.
    fn is_over(&self, now_ns: u64) -> bool {
        self.first_usable(now_ns) > self.units
    }
}

/// One key's lease and cached denial.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The current lease.
    pub(crate) lease: ArcSwap<Lease>,
    /// Local clock (ns) before which Redis would deny a unit; 0: no cached denial.
    denied_until: AtomicU64,
    /// Local clock (ns) before which a request that finds this key's lease being renewed is
    /// refused here instead of waiting its turn; 0: never. Set when Redis said the key's buckets
    /// had no room beyond the units it leased, to one interval after the answer arrived (see
    /// [`Slot::refuse_while_renewing`]).
    full_until: AtomicU64,
    /// Held by the one call that renews the lease.
    pub(crate) refill: tokio::sync::Mutex<()>,
}

/// What the lease table answers without Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Local {
    /// Admitted from the lease; this many units are left in it.
    Admitted(u64),
    /// Redis denied a unit until this many ns from now.
    Denied(u64),
    /// Ask Redis.
    Ask,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            lease: ArcSwap::from_pointee(Lease::none()),
            denied_until: AtomicU64::new(0),
            full_until: AtomicU64::new(0),
            refill: tokio::sync::Mutex::new(()),
        }
    }

    /// Serves a request of cost `n >= 1` at `now_ns` from the lease or the cached denial.
    #[inline]
    pub(crate) fn serve(&self, now_ns: u64, n: u64) -> Local {
        // Relaxed: the deadline publishes nothing; a stale read only sends a call to Redis.
        let until = self.denied_until.load(Ordering::Relaxed);
        if now_ns < until {
            return Local::Denied(until - now_ns);
        }
        match self.lease.load().try_take(now_ns, n) {
            Some(left) => Local::Admitted(left),
            None => Local::Ask,
        }
    }

    /// Redis denied one unit, asked at `origin_ns`, until `retry_ns` after the script's time.
    pub(crate) fn deny_until(&self, origin_ns: u64, retry_ns: u64) {
        // Relaxed: see `serve`. Measured from before the call, so never later than Redis's time.
        self.denied_until.store(origin_ns.saturating_add(retry_ns), Ordering::Relaxed);
    }

    /// Redis's answer, arrived at `answered_ns`, left the key's buckets no room for one more unit
    /// beyond the units it leased; the shortest emission interval among its quotas is
    /// `interval_ns`.
    pub(crate) fn note_full(&self, answered_ns: u64, interval_ns: u64) {
        // Relaxed: see `serve`.
        self.full_until.store(answered_ns.saturating_add(interval_ns), Ordering::Relaxed);
    }

    /// Redis had room the last time it was asked.
    pub(crate) fn note_room(&self) {
        // Relaxed: see `serve`.
        self.full_until.store(0, Ordering::Relaxed);
    }

    /// For a request at `now_ns` that finds another one renewing the lease: `Some(wait)` if it is
    /// refused here, `None` if it should wait for the renewal and then ask.
    ///
    /// Refusing it admits nothing, so it is safe, and it costs the key no capacity, only time.
    /// The buckets were full when Redis last answered, and since then they have freed at most
    /// one unit per interval: fewer than one round trip's worth plus one. The renewing request
    /// reaches Redis after this moment and takes what has freed, as its own unit and as a lease
    /// (the lease of a hot key grows until it covers a round trip). Whatever it leaves stays in
    /// the buckets for the next call: a bucket keeps its room until it is full of it. The
    /// alternative is every request waiting its turn for a round trip of its own, which holds a
    /// saturated hot key to one decision per round trip.
    ///
    /// The window is one interval after the answer, so a key that went quiet after being full
    /// is not refused here on a burst much later: by then its room is unknown, and the
    /// requests wait for the renewal as usual.
    pub(crate) fn refuse_while_renewing(&self, now_ns: u64) -> Option<u64> {
        // Relaxed: see `serve`.
        let until = self.full_until.load(Ordering::Relaxed);
        (now_ns < until).then(|| until - now_ns)
    }
}

/// The keys that hold leases, at most `max_keys` of them.
#[derive(Debug)]
pub(crate) struct LeaseTable {
    config: LeaseConfig,
    slots: ArcSwap<HashMap<Vec<u8>, Arc<Slot>>>,
}

impl LeaseTable {
    /// An empty table.
    pub(crate) fn new(config: LeaseConfig) -> LeaseTable {
        LeaseTable { config, slots: ArcSwap::from_pointee(HashMap::new()) }
    }

    /// The configuration.
    pub(crate) fn config(&self) -> LeaseConfig {
        self.config
    }

    /// Serves a request from `key`'s slot, without Redis if it can.
    #[inline]
    pub(crate) fn serve(&self, key: &[u8], now_ns: u64, n: u64) -> Local {
        match self.slots.load().get(key) {
            Some(slot) => slot.serve(now_ns, n),
            None => Local::Ask,
        }
    }

    /// `key`'s slot, made if there is room (slots whose leases have run out make room).
    pub(crate) fn slot(&self, key: &[u8], now_ns: u64) -> Option<Arc<Slot>> {
        if let Some(slot) = self.slots.load().get(key) {
            return Some(slot.clone());
        }
        let mut made = None;
        self.slots.rcu(|map| {
            let mut map = HashMap::clone(map);
            if let Some(slot) = map.get(key) {
                made = Some(slot.clone());
                return map;
            }
            if map.len() >= self.config.key_capacity() {
                // A slot being renewed stays; one whose lease is over is free to go (a caller
                // still holding it renews a lease that is no longer in the table: safe, units
                // are charged in Redis either way).
                map.retain(|_, s| s.refill.try_lock().is_err() || !s.lease.load().is_over(now_ns));
            }
            made = None;
            if map.len() < self.config.key_capacity() {
                let slot = Arc::new(Slot::new());
                map.insert(key.to_vec(), slot.clone());
                made = Some(slot);
            }
            map
        });
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// T = 10 ns in 1 unit/ns; unit 0's slot begins 10 ns after the origin at 1000.
    fn lease(units: u64) -> Lease {
        let s = Schedule { units_per_ns: 1, interval: 10, first: 10, tat: 0 };
        Lease::new(1000, false, Box::new([s]), units)
    }

    #[test]
    fn units_are_served_once_and_in_time() {
        let l = lease(3);
        assert_eq!(l.try_take(1000, 2), Some(1));
        assert_eq!(l.try_take(1005, 2), None);
        assert_eq!(l.try_take(1005, 1), Some(0));
        assert_eq!(l.try_take(1005, 1), None);
    }

    #[test]
    fn units_whose_slot_has_begun_are_dropped() {
        let l = lease(4);
        // At 1025 the slots of units 0 and 1 (beginning at +10 and +20) have begun.
        assert_eq!(l.try_take(1025, 1), Some(1));
        assert_eq!(l.try_take(1031, 1), Some(0));
        assert_eq!(l.try_take(1031, 1), None);
        // Unit 2's slot began at +30: at +31 only unit 3 remained, now taken.
    }

    #[test]
    fn stretched_time_drops_units_earlier() {
        let s = Schedule { units_per_ns: 1, interval: 1000, first: 0, tat: 0 };
        let l = Lease::new(0, true, Box::new([s]), 2);
        // 1024 ns stretched is 1025: unit 1's slot (at 1000) has begun.
        assert_eq!(l.try_take(1024, 1), None);
    }

    #[test]
    fn sizes_grow_when_used_up_or_hot_and_shrink_otherwise() {
        let hot = 1000;
        let l = lease(4);
        l.try_take(1000, 4);
        assert_eq!(l.next_size(9000, hot, 64), 8);
        assert_eq!(l.next_size(9000, hot, 6), 6);
        let part = lease(4);
        part.try_take(1000, 1);
        assert_eq!(part.next_size(1500, hot, 64), 8, "hot: twice the lease");
        assert_eq!(part.next_size(5000, hot, 64), 1, "cold: what was used");
        assert_eq!(Lease::none().next_size(0, hot, 64), 0);
        assert_eq!(lease(0).next_size(1005, hot, 64), 1, "asked again soon: starts leasing");
        assert_eq!(lease(0).next_size(9000, hot, 64), 0, "asked rarely: no lease");
    }

    #[test]
    fn cached_denial_answers_until_its_time() {
        let slot = Slot::new();
        slot.deny_until(100, 50);
        assert_eq!(slot.serve(120, 1), Local::Denied(30));
        assert_eq!(slot.serve(150, 1), Local::Ask);
    }

    #[test]
    fn a_full_key_refuses_during_a_renewal_for_one_interval_after_the_answer() {
        let slot = Slot::new();
        assert_eq!(slot.refuse_while_renewing(0), None, "never full: wait for the renewal");
        slot.note_full(1_000, 100);
        assert_eq!(slot.refuse_while_renewing(1_000), Some(100));
        assert_eq!(slot.refuse_while_renewing(1_099), Some(1));
        assert_eq!(slot.refuse_while_renewing(1_100), None, "the window has passed");
        slot.note_full(2_000, 100);
        slot.note_room();
        assert_eq!(slot.refuse_while_renewing(2_000), None, "room at the last answer");
        // The window saturates rather than wrapping.
        slot.note_full(u64::MAX - 1, u64::MAX);
        assert_eq!(slot.refuse_while_renewing(u64::MAX - 1), Some(1));
        // A refusal here never touches the lease or the cached denial.
        assert_eq!(slot.serve(0, 1), Local::Ask);
    }

    #[test]
    fn table_is_bounded_and_reclaims_finished_leases() {
        let table = LeaseTable::new(LeaseConfig::new(8).max_keys(1));
        let a = table.slot(b"a", 0).unwrap();
        a.lease.store(Arc::new(lease(1)));
        drop(a);
        // "a" still has a live lease at 1000: no room.
        assert!(table.slot(b"b", 1000).is_none());
        // At 2000 its schedule is over: "b" takes its place.
        assert!(table.slot(b"b", 2000).is_some());
        assert_eq!(table.serve(b"a", 2000, 1), Local::Ask);
    }
}
