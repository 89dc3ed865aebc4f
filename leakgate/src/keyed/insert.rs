//! Giving a key a slot: in its window under its home shard's lock, or past its window under the
//! spill lock (see [`super::table`] for the layout and the lock order).
//!
//! # What a new key costs
//!
//! In its window: a search of the window, one allocation (the group's new array of keys), and a
//! clone of each key of the group. Past its window, on top of that: a search of the probe sequence
//! up to the first slot with room, taking each shard's lock on the way, while holding the table's
//! spill lock; so at most one key at a time is placed past its window. When that search finds no
//! room anywhere, it records the earliest time any slot can become idle, and new keys refused
//! before then are refused after searching their window only.
//!
//! With hashes that spread keys (the table's hasher is seeded at random per table, so a key
//! stream cannot be aimed), keys go past their window only when the table is more than about 60%
//! full. With degenerate hashes (a `Hash` that writes the same bytes for many keys) all those keys
//! share one probe sequence: the table still holds its capacity, but a lookup or insert of such a
//! key walks that sequence, up to every group of the table (a scan of `capacity / 4` lines).

use super::group::{tag_of, Group, NewKey, SEALED, SLOTS};
use super::request::{Arrival, Changed, EpochOf};
use super::reuse::Reuse;
use super::slot::Found;
use super::table::Table;
use crate::sync::{self, Ordering};
use std::borrow::Borrow;
use std::hash::Hash;

/// What an insert attempt under the home lock ends with.
enum Step<'t, K> {
    /// The key's slot, or `None`: there is no room for it.
    Done(Option<Found<'t, K>>),
    /// The key's slot in this shard is being given to another key (the key is idle): wait for
    /// that shard's insert to finish, then try again.
    WaitFor(usize),
    /// The quota changed since the insert read its rate: decide again on the new one.
    Changed,
}

/// What an exact search under the home lock finds.
enum Search<'t, K> {
    Found(Found<'t, K>),
    /// Found in a slot being given to another key, in this shard.
    Sealed(usize),
    Missing,
}

impl<K: Hash + Eq + Clone> Table<K> {
    /// Finds `key` or gives it a slot whose bucket starts at the larger of the table's idle mark
    /// and `start()` (called only as a slot is given: see [`Ask::start`](super::Ask)); `None`
    /// when every slot the key may use holds a busy bucket at `now` (or a page it needs cannot be
    /// allocated). Kept out of line: inlined, it doubles the size of the lookup path around it,
    /// which runs slower for it.
    #[cold]
    #[inline(never)]
    pub(crate) fn find_or_insert<Q>(
        &self,
        new: &Arrival<'_, Q, K>,
    ) -> Result<Option<Found<'_, K>>, Changed>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let home = &self.shards[self.home(new.hash)];
        loop {
            let step = {
                let _home = sync::lock(home);
                self.insert_in_window(new)
            };
            let step = match step {
                Some(step) => step,
                None => {
                    let _spill = sync::lock(&self.spill);
                    let _home = sync::lock(home);
                    // The window may have changed while no lock was held: look again first.
                    self.insert_in_window(new).unwrap_or_else(|| self.insert_past_window(new))
                }
            };
            match step {
                Step::Done(found) => return Ok(found),
                Step::WaitFor(shard) => drop(sync::lock(&self.shards[shard])),
                Step::Changed => return Err(Changed),
            }
        }
    }

    /// Under the home lock: the key if tracked, else a slot in one of its windows (the first
    /// unused one, else an idle one); `None` if neither window has room and the key may go past
    /// them.
    fn insert_in_window<Q>(&self, new: &Arrival<'_, Q, K>) -> Option<Step<'_, K>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        // Under the home lock (and, past the window, the spill lock): a change of quota, which
        // takes every lock, publishes its rate either before this insert or after it.
        if !new.epoch.current() {
            return Some(Step::Changed);
        }
        match self.search_locked(new.key, new.hash, new.epoch) {
            Search::Found(found) => return Some(Step::Done(Some(found))),
            Search::Sealed(shard) => return Some(Step::WaitFor(shard)),
            Search::Missing => {}
        }
        let mut idle = Vec::new();
        // Both windows by turns, group by group (as lookups go): the first group with an unused
        // slot is the nearer one to its window's start, the first window's on a tie.
        let two = self.two_windows(new.hash);
        let mut open = [true, two];
        for p in 0..self.window() {
            for (w, gi) in [(0, self.position(new.hash, p)), (1, self.second(new.hash, p))] {
                if !open[w] {
                    continue;
                }
                // A page that cannot be allocated ends that window: a lookup stops there too.
                let Some(at) = self.at_or_alloc(gi) else {
                    open[w] = false;
                    continue;
                };
                let (group, side) = (at.line(), &at.side());
                new.epoch.convert(group, side);
                if let Some(slot) = group.tags_locked(side).iter().position(|&tag| tag == 0) {
                    let version =
                        group.fill(side, slot, self.new_key(new, group, slot), self.opening(new));
                    return Some(Step::Done(Some(at.found(slot, version))));
                }
                idle.extend((0..SLOTS).filter_map(|slot| {
                    group.idle_tat(slot, new.reuse()).map(|idle_tat| (gi, slot, idle_tat))
                }));
            }
        }
        for (gi, slot, idle_tat) in idle {
            if let Some(found) = self.reclaim(new, gi, (slot, idle_tat)) {
                return Some(Step::Done(Some(found)));
            }
        }
        // A window that ended at a page with no room for it (see above) keeps the key out of the
        // probe sequence past the windows: lookups of it would stop in that window.
        // Relaxed: a bound that stays valid forever once written (see `Marks::no_room_before`).
        let ended = !open[0] || (two && !open[1]);
        if ended || new.now < self.marks.no_room_before.load(Ordering::Relaxed) {
            return Some(Step::Done(None));
        }
        None
    }

    /// Under the spill lock and the home lock, with no room in the key's window: the first slot
    /// past it with room (unused or idle), in probe order, taking each other shard's lock in
    /// turn. If there is none, records when the table can next have room.
    fn insert_past_window<Q>(&self, new: &Arrival<'_, Q, K>) -> Step<'_, K>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let home = self.home(new.hash);
        // The earliest time any slot may become idle, over every slot of the table; the window's
        // slots are all busy, and stay so under the home lock.
        let mut busy_until = (0..self.window())
            .filter_map(|p| self.at(self.position(new.hash, p)))
            .flat_map(|at| (0..SLOTS).map(move |slot| at.line().busy_until(slot)))
            .min()
            .unwrap_or(SEALED);
        let mut p = self.window();
        while p < self.positions() {
            let shard = self.shard_of(self.position(new.hash, p));
            let _shard = (shard != home).then(|| sync::lock(&self.shards[shard]));
            let run_end = self.shard_run_end(p);
            for p in p..run_end {
                let gi = self.position(new.hash, p);
                let Some(at) = self.at_or_alloc(gi) else {
                    return Step::Done(None);
                };
                let (group, side) = (at.line(), &at.side());
                new.epoch.convert(group, side);
                let tags = group.tags_locked(side);
                for (slot, &tag) in tags.iter().enumerate() {
                    let found = if tag == 0 {
                        let key = self.new_key(new, group, slot);
                        Some(at.found(slot, group.fill(side, slot, key, self.opening(new))))
                    } else if let Some(idle_tat) = group.idle_tat(slot, new.reuse()) {
                        self.reclaim(new, gi, (slot, idle_tat))
                    } else {
                        None
                    };
                    if let Some(found) = found {
                        self.raise_reach(new.hash, p);
                        return Step::Done(Some(found));
                    }
                    busy_until = busy_until.min(group.busy_until(slot));
                }
            }
            p = run_end;
        }
        // A counter has no time at which it frees: no bound for counters.
        if new.reuse() != Reuse::Counted {
            // Relaxed: a bound read on its own, valid whenever read (`Marks::no_room_before`).
            let no_room_before = busy_until.saturating_add(1);
            self.marks.no_room_before.fetch_max(no_room_before, Ordering::Relaxed);
        }
        Step::Done(None)
    }

    /// Searches both windows of `key`, then its probe sequence up to its reach, under its home
    /// lock (so exactly: only this lock's holder can give the key a slot).
    fn search_locked<Q>(&self, key: &Q, hash: u64, epoch: &dyn EpochOf<K>) -> Search<'_, K>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let tag = tag_of(hash);
        let two = self.two_windows(hash);
        let mut open = [true, two];
        for p in 0..self.window() {
            for (w, gi) in [(0, self.position(hash, p)), (1, self.second(hash, p))] {
                if open[w] {
                    match self.search_group(gi, key, (hash, tag), epoch) {
                        Some(Search::Missing) => open[w] = false,
                        Some(search) => return search,
                        None => {}
                    }
                }
            }
        }
        // Keys go past their windows only when both are full (and so stay full).
        if !open[0] || (two && !open[1]) {
            return Search::Missing;
        }
        for p in self.window()..self.reach(hash) {
            if let Some(search) = self.search_group(self.position(hash, p), key, (hash, tag), epoch)
            {
                return search;
            }
        }
        Search::Missing
    }

    /// [`Table::search_locked`] in group `gi`: `None` if the key is not there and may be further
    /// on; `Some(Search::Missing)` if no key is further on in this window or sequence.
    fn search_group<Q>(
        &self,
        gi: usize,
        key: &Q,
        (hash, tag): (u64, u8),
        epoch: &dyn EpochOf<K>,
    ) -> Option<Search<'_, K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let Some(at) = self.at(gi) else { return Some(Search::Missing) };
        // Groups of the home shard only (the lock held): a key past its window is in the rate
        // its group was last converted to, which its check converts, under that lock.
        if self.shard_of(gi) == self.home(hash) {
            epoch.convert(at.line(), &at.side());
        }
        match at.find(key, tag) {
            (Some((slot, version)), _) => {
                let found = at.found(slot, version);
                if found.is_sealed() {
                    return Some(Search::Sealed(self.shard_of(gi)));
                }
                Some(Search::Found(found))
            }
            (None, true) => Some(Search::Missing),
            (None, false) => None,
        }
    }

    /// What slot `slot` of `group` gets for the arriving key. Clones the key and the group's
    /// other keys, so it may panic in a key's `Clone`: it is made before the slot is touched.
    fn new_key<Q>(&self, new: &Arrival<'_, Q, K>, group: &Group<K>, slot: usize) -> NewKey<K>
    where
        Q: ?Sized + ToOwned<Owned = K>,
    {
        let keys = group.keys_with(slot, new.key.to_owned());
        NewKey { keys, tag: tag_of(new.hash), now_ms: super::millis(new.now_ns) }
    }

    /// Moves idle slot `slot` of group `gi` (its `TAT` was `idle_tat`) to the arriving key, if it
    /// is still idle; see [`Group::reclaim`](super::group::Group::reclaim).
    fn reclaim<Q>(
        &self,
        new: &Arrival<'_, Q, K>,
        gi: usize,
        (slot, idle_tat): (usize, u64),
    ) -> Option<Found<'_, K>>
    where
        Q: ?Sized + ToOwned<Owned = K>,
    {
        let at = self.at(gi)?;
        let key = self.new_key(new, at.line(), slot);
        let version =
            at.line().reclaim(&at.side(), (slot, idle_tat), new.reuse(), key, |held| {
                // A counter opens at its next generation (see `reuse.rs`).
                let Some(rate) = new.rate else { return Reuse::next_generation(held) };
                // Relaxed: the new value reaches a later insert of the forgotten key through the
                // Release publication of the group that follows (it must find the key gone first).
                let idle_ns = self.marks.idle.fetch_max(new.now_ns, Ordering::Relaxed);
                let forgotten_at = rate.units_at(idle_ns).max(new.now);
                // No fuller than an idle bucket through the changes of quota (a level handed over
                // is already at least that full: it is not added twice).
                (new.start)().open(forgotten_at.max(held + 1), SEALED - 1).max(self.fresh())
            })?;
        Some(at.found(slot, version))
    }

    /// Records that a request the table holds no bucket for (a peek, a cost above the burst) was
    /// decided at `now`: every new bucket starts at or above it, as that key's own bucket would
    /// have recorded it.
    pub(crate) fn note_seen(&self, now_ns: u64) {
        // Relaxed: as in `reclaim`; a later insert in the same thread reads it in program order.
        self.marks.idle.fetch_max(now_ns, Ordering::Relaxed);
    }

    /// The first `TAT` of the arriving key's bucket in a never-used slot: from the latest time a
    /// key was forgotten and no fuller than the changes of quota left an idle bucket, as the
    /// key's taker asks (see [`FirstState`]).
    fn opening<Q: ?Sized>(&self, new: &Arrival<'_, Q, K>) -> u64 {
        // A counter: generation 0, count 0.
        let Some(rate) = new.rate else { return 0 };
        // Relaxed: as in `reclaim`.
        let forgotten_at = rate.units_at(self.marks.idle.load(Ordering::Relaxed));
        // As in `reclaim`.
        (new.start)().open(forgotten_at, SEALED - 1).max(self.fresh())
    }

    /// Records that a key of `hash`'s window was placed at position `p` of its probe sequence.
    /// Under the home lock, which every writer of this reach holds.
    fn raise_reach(&self, hash: u64, p: usize) {
        if let Some(at) = self.at(self.position(hash, 0)) {
            at.line().raise_reach(u32::try_from(p + 1).unwrap_or(u32::MAX));
        }
    }
}
