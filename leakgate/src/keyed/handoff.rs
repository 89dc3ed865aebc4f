//! What rules need from a keyed table besides [`KeyedLimiter::take`]: where a charge was taken
//! and giving it back, placing a key at a state chosen as it gets its slot, sealing a key's
//! bucket once its state was handed over, and a barrier that waits for the inserts in progress.

use super::check::Taken;
use super::request::{Arrival, FirstState};
use super::requota::Conversion;
use super::slot::{Found, Tat};
use super::KeyedLimiter;
use crate::bucket::{self, Back};
use crate::clock::Clock;
use crate::gcra::Rate;
use crate::sync::{self, Ordering};
use std::borrow::Borrow;
use std::hash::Hash;

/// Where a charge was taken, to give it back: the key's slot as it was found (table-wide group
/// index, slot, group version), or the shared overflow bucket. Plain words, copied cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charged {
    Slot { group: u32, slot: u8, version: u32 },
    Shared,
}

impl Charged {
    /// Where `taken`, a request of cost `n`, left its charge; `None` if it took nothing (a peek,
    /// or a key no bucket holds).
    #[inline]
    pub(crate) fn of<K>(taken: &Taken<'_, K>, n: u64) -> Option<Charged> {
        if n == 0 {
            return None;
        }
        match &taken.slot {
            Some(found) => {
                let (group, slot, version) = found.locator();
                // A table has at most 2^28 groups of 4 slots (`MAX_CAPACITY`).
                Some(Charged::Slot { group: group as u32, slot: slot as u8, version })
            }
            // An admission of cost 1 or more without a slot: the shared bucket served it.
            None => Some(Charged::Shared),
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// The rate of the keys' buckets, or (`shared`) of the shared overflow bucket if there is one.
    pub(crate) fn rate_of(&self, shared: bool) -> &Rate {
        match &self.overflow.shared {
            Some(bucket) if shared => &bucket.rate,
            _ => self.rate(),
        }
    }

    /// Gives back `key`'s charge of `n` at `at`, which left its bucket at `after`, made at the
    /// clock reading `charged_ns` (see [`bucket::give_back`]). `false` if the bucket was sealed
    /// (its state handed over to newer rules, the charge with it): nothing was given back here.
    ///
    /// The clock the bound is taken at is this limiter's, or the table's idle mark if that is
    /// later: so after a clock that went back, a charge whose bucket was forgotten (and a new
    /// one opened for the key at or above that mark) gives nothing back into the new bucket.
    /// A handle made stale by another slot of its group changing key is found again by the key;
    /// a bucket that left its slot (sealed, or the key elsewhere) keeps what is left, which had
    /// drained by then.
    pub(crate) fn give_back<Q>(
        &self,
        key: &Q,
        at: Charged,
        after: u64,
        n: u64,
        charged_ns: u64,
    ) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let rate = self.rate_of(at == Charged::Shared);
        let (cost, charged_at) = (rate.cost(n), rate.units_at(charged_ns));
        let found = match (at, &self.overflow.shared) {
            (Charged::Slot { group, slot, version }, _) => {
                let found = self.table.found_at(group as usize, usize::from(slot), version);
                let Some(found) = found else { return true };
                found
            }
            (Charged::Shared, Some(shared)) => shared.slot(),
            (Charged::Shared, None) => return true,
        };
        self.give_back_at(key, found, (after, cost, charged_at), at == Charged::Shared)
    }

    /// Gives back up to `units` of `key`'s bucket (or, `shared`, of the shared overflow bucket)
    /// that a reload handed over as of the clock reading `since_ns`, when a charge among them
    /// was refused after all: `units` less the time since `since_ns` (the level handed over was
    /// taken then), from the top of the bucket. `Some(false)` if that bucket was sealed in turn;
    /// `None` if the table does not hold the key (or has no shared bucket).
    pub(crate) fn give_back_handed_over<Q>(
        &self,
        key: &Q,
        shared: bool,
        units: u64,
        since_ns: u64,
    ) -> Option<bool>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let since = self.rate_of(shared).units_at(since_ns);
        let found = match &self.overflow.shared {
            Some(bucket) if shared => bucket.slot(),
            _ if shared => return None,
            _ => self.table.find(key, self.table.hash(key))?,
        };
        let after = bucket::Word::load(&found).ok()?;
        Some(self.give_back_at(key, found, (after, units, since), shared))
    }

    /// Waits for an insert of `key` in progress (it holds the key's home lock throughout).
    pub(crate) fn wait_for_insert_of<Q: Hash + ?Sized>(&self, key: &Q) {
        let home = self.table.home(self.table.hash(key));
        drop(sync::lock(&self.table.shards[home]));
    }

    /// [`bucket::give_back`] on `found`, `key`'s slot (or the shared bucket), following the key
    /// if a change of its group made the handle stale: `false` if the bucket was sealed.
    fn give_back_at<'a, Q>(
        &'a self,
        key: &Q,
        mut found: Found<'a, K>,
        (after, cost, charged_at): (u64, u64, u64),
        shared: bool,
    ) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let rate = self.rate_of(shared);
        let now = || {
            let now = rate.units_at(self.clock().now_ns());
            // Relaxed: a bound read on its own (see `Marks::idle`); the shared bucket has none.
            let idle = self.table.marks.idle.load(Ordering::Relaxed);
            if shared {
                now
            } else {
                now.max(idle)
            }
        };
        loop {
            match bucket::give_back(&found, after, cost, charged_at, now) {
                Ok(Back::Given(_)) => return true,
                Ok(Back::Sealed) => return false,
                Err(Tat::Moved) => match self.table.find(key, self.table.hash(key)) {
                    Some(again) if same_slot(&again, &found) => found = again,
                    _ => return true,
                },
                Err(_) => return true,
            }
        }
    }

    /// Gives `key` a slot if the table does not hold it, its bucket starting at the larger of
    /// the table's idle mark and `start()`, called as the slot is given (see
    /// [`Ask::start`](super::Ask)); `None` when it has no room.
    pub(crate) fn settle<Q>(
        &self,
        key: &Q,
        now_ns: u64,
        start: &dyn Fn() -> FirstState,
    ) -> Option<()>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        // A rules table: its quota never changes, so its epoch is always 0.
        let (hash, rate) = (self.table.hash(key), self.rate());
        let now = rate.units_at(now_ns);
        let conversion = Conversion::new(&self.rates, 0, *rate, self.table.changed_at());
        let new = Arrival { key, hash, now_ns, now, rate: Some(rate), start, epoch: &conversion };
        self.table.find_or_insert(&new).ok().flatten().map(drop)
    }

    /// Seals `key`'s bucket (see [`bucket::seal_moved`]), waiting for a change of its slot's key
    /// in progress to end: the state it held, `None` if the table does not hold the key or its
    /// bucket was sealed already.
    pub(crate) fn seal_moved<Q>(&self, key: &Q) -> Option<u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.table.hash(key);
        loop {
            let found = self.table.find(key, hash)?;
            match bucket::seal_moved(&found) {
                Ok(state) => return state,
                // Its slot is being given to another key: wait for that insert (under the lock of
                // the slot's shard) to end, then look again.
                Err(Tat::Sealed) => {
                    let shard = self.table.shard_of(found.locator().0);
                    drop(sync::lock(&self.table.shards[shard]));
                }
                Err(_) => {}
            }
        }
    }

    /// Seals the shared overflow bucket (see [`bucket::seal_moved`]): the state it held, `None`
    /// if there is none or it was sealed already.
    pub(crate) fn seal_shared(&self) -> Option<u64> {
        let shared = self.overflow.shared.as_ref()?;
        // The shared bucket's slot never changes key, so it is never moved or sealed.
        bucket::seal_moved(&shared.slot()).ok().flatten()
    }

    /// Adds `level` units of the shared overflow bucket's rate to it, as of the clock reading
    /// `now_ns` (see [`bucket::add_level`]); nothing if there is no shared bucket.
    pub(crate) fn add_to_shared(&self, level: u64, now_ns: u64) {
        if let Some(shared) = &self.overflow.shared {
            let _ = bucket::add_level(&shared.slot(), level, shared.rate.units_at(now_ns));
        }
    }

    /// Every tracked key with its raw state, for a reload (takes no lock checks wait on).
    pub(crate) fn for_each_state(&self, mut f: impl FnMut(K, u64)) {
        self.table.for_each(|key, tat, _, _| f(key, tat));
    }

    /// Waits for every insert in progress to end. Every insert chooses its key's first state and
    /// gives it a slot under its home shard's lock, held from one to the other: so an insert
    /// that chose before this call has given its slot when it returns, and one that chooses after
    /// it sees everything written before the call (through the lock).
    pub(crate) fn wait_for_inserts(&self) {
        for shard in self.table.shards.iter() {
            drop(sync::lock(shard));
        }
    }
}

/// Whether two handles are on the same slot (whatever the versions they were found at).
fn same_slot<K>(a: &Found<'_, K>, b: &Found<'_, K>) -> bool {
    let ((ga, sa, _), (gb, sb, _)) = (a.locator(), b.locator());
    (ga, sa) == (gb, sb)
}
