//! [`Table`]: buckets by key, each only a TAT, the quota given by each call; bounded in bytes by
//! a shared [`Budget`], its empty buckets swept away.
//!
//! # Implementation details
//!
//! 256 shards, each a `Mutex` over a `hashbrown::HashTable` of entries (the key, its TAT, the
//! quota of its last charge, and when that was). A key's shard and slot come from one SipHash of
//! its bytes under a seed drawn at random when the table is made (`std`'s `RandomState`), so
//! keys a client chooses cannot be aimed at one shard or one probe sequence.
//!
//! A call locks the shards of its keys in index order (so two calls never wait on each other in
//! a circle), reads the clock, decides every key, and charges them all or none. The clock is
//! read under the locks and through [`Table::now`], which never goes below a reading already
//! used: readings taken in the order the locks were taken never decrease, so a bucket the
//! sweeper forgot (it was empty at its reading) is empty at every later call's reading too, and
//! a forgotten key comes back exactly as its bucket would have answered.
//!
//! Memory: each key is charged [`Budget::cost`] (its entry, and its bytes if they do not fit in it)
//! when it is inserted and given back when it is swept; a new key that finds no room (after the
//! shards the call holds are swept) is refused as from a full bucket. A shard whose table is
//! mostly empty after a sweep is shrunk.

use super::budget::Budget;
use super::gcra::{decide, no_room, Params, Step, Tat};
use super::key::Key;
use hashbrown::HashTable;
use leakgate::{Admitted, Clock, Denied};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Shards per table: a sweep holds one at a time, so a check waits at most for one 256th of
/// the keys to be swept.
pub(crate) const SHARDS: usize = 256;

/// One tracked key (80 bytes: `budget::ENTRY_OVERHEAD` counts on it).
pub(crate) struct Entry {
    pub(crate) key: Key,
    pub(crate) tat: Tat,
    /// The quota of the call that last charged it (for listing).
    pub(crate) params: Params,
    /// When it was last charged, ns of the table's clock.
    pub(crate) last_ns: u64,
}

/// One key a call names, with the quota that call brings for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Charge<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) params: Params,
}

/// A call's decision, and for each key it named (in order) whether that key's own bucket could
/// take its cost.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) decision: Result<Admitted, Denied>,
    pub(crate) conformed: Vec<bool>,
}

/// One shard: its entries, and when it was last swept.
struct Shard {
    entries: HashTable<Entry>,
    /// The clock reading of its last sweep (ns): a call that finds no room sweeps the shards it
    /// holds only if this is [`RESWEEP_NS`] old, so that refusing many new keys in a full table
    /// does not cost a sweep each.
    swept_ns: u64,
}

/// How old a shard's last sweep must be for a call that finds no room to sweep it again.
const RESWEEP_NS: u64 = 100_000_000;

/// A table of TAT buckets.
pub(crate) struct Table<C: Clock> {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    budget: Arc<Budget>,
    clock: C,
    /// The latest clock reading (ns) any call or sweep used; readings are taken no lower. Only
    /// ever raised by `fetch_max`, a read-modify-write: whoever takes a shard's lock after
    /// another released it reads at least that one's reading (the lock orders the two RMWs),
    /// which is all the table needs of it, so `Relaxed` is enough.
    latest: AtomicU64,
}

type Guard<'a> = MutexGuard<'a, Shard>;

impl<C: Clock> Table<C> {
    /// An empty table on `clock`, its keys charged to `budget`.
    pub(crate) fn new(clock: C, budget: Arc<Budget>) -> Table<C> {
        let shards = (0..SHARDS)
            .map(|_| Mutex::new(Shard { entries: HashTable::new(), swept_ns: 0 }))
            .collect();
        Table { shards, hasher: RandomState::new(), budget, clock, latest: AtomicU64::new(0) }
    }

    /// The clock's reading, never below one already used (see the field).
    pub(crate) fn now(&self) -> u64 {
        let read = self.clock.now_ns();
        // Relaxed: see the field.
        self.latest.fetch_max(read, Ordering::Relaxed).max(read)
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard_of(hash: u64) -> usize {
        // The high bits: hashbrown probes with the low ones and tags with the top seven, so
        // these bits (below the tag) pick the shard independently of both.
        ((hash >> 49) as usize) % SHARDS
    }

    fn lock(&self, shard: usize) -> Guard<'_> {
        self.shards[shard].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides cost `n` on one key under `params`.
    pub(crate) fn check(&self, key: &[u8], params: Params, n: u64) -> Result<Admitted, Denied> {
        let untracked = || Ok(Admitted::new(u64::MAX, Duration::ZERO));
        self.check_all(&[Charge { key, params }], n, untracked).decision
    }

    /// Decides cost `n` on every key of `charges` (a key named `k` times costs `k * n`) and on
    /// whatever `also` decides, all or nothing: `also` is asked (with this table's keys still
    /// locked) only when every key here conforms, and the keys are charged only when it admits
    /// too. Figures merge as a rules check's do: the smallest `remaining()`, the largest
    /// `reset_after()`, and for a denial the largest `retry_after()` (`None` if any is).
    pub(crate) fn check_all(
        &self,
        charges: &[Charge<'_>],
        n: u64,
        also: impl FnOnce() -> Result<Admitted, Denied>,
    ) -> Outcome {
        // Each distinct key once: its first naming, how many times it is named, its hash.
        let mut keys: Vec<(usize, u64, u64)> = Vec::with_capacity(charges.len());
        let mut first_of = Vec::with_capacity(charges.len());
        for (i, charge) in charges.iter().enumerate() {
            match keys.iter_mut().position(|(j, _, _)| charges[*j].key == charge.key) {
                Some(at) => {
                    keys[at].1 += 1;
                    first_of.push(at);
                }
                None => {
                    first_of.push(keys.len());
                    keys.push((i, 1, self.hash(charge.key)));
                }
            }
        }
        let mut shards: Vec<usize> = keys.iter().map(|&(_, _, h)| Self::shard_of(h)).collect();
        shards.sort_unstable();
        shards.dedup();
        let mut guards: Vec<Guard<'_>> = shards.iter().map(|&s| self.lock(s)).collect();
        let guard_of = |hash: u64| shards.binary_search(&Self::shard_of(hash)).unwrap_or(0);
        let now = self.now();
        let mut steps: Vec<(Step, bool)> = keys
            .iter()
            .map(|&(i, times, hash)| {
                let Charge { key, params } = charges[i];
                let found = guards[guard_of(hash)].entries.find(hash, |e| *e.key == *key);
                let tat = found.map_or(Tat::EMPTY, |e| e.tat);
                (decide(tat, params, now, n.saturating_mul(times)), found.is_some())
            })
            .collect();
        let mut taken = 0usize;
        let mut ok = steps.iter().all(|(step, _)| step.decision.is_ok());
        if ok {
            for (at, (step, held)) in steps.iter_mut().enumerate() {
                if *held || step.charged.is_none() {
                    continue;
                }
                let (i, _, _) = keys[at];
                let cost = Budget::cost(charges[i].key.len());
                let named = |key: &[u8]| keys.iter().any(|&(j, _, _)| charges[j].key == key);
                if self.budget.try_take(cost)
                    || (self.sweep_held(&mut guards, now, &named) > 0 && self.budget.try_take(cost))
                {
                    taken += cost;
                    continue;
                }
                self.budget.count_refused();
                *step = Step { decision: Err(no_room(charges[i].params)), charged: None };
                ok = false;
                break;
            }
        }
        let mut parts: Vec<Result<Admitted, Denied>> = Vec::with_capacity(keys.len() + 1);
        if ok {
            let other = also();
            if other.is_ok() {
                for (at, (step, held)) in steps.iter().enumerate() {
                    let Some(tat) = step.charged else { continue };
                    let (i, _, hash) = keys[at];
                    let Charge { key, params } = charges[i];
                    let guard = &mut guards[guard_of(hash)];
                    if *held {
                        if let Some(entry) = guard.entries.find_mut(hash, |e| *e.key == *key) {
                            (entry.tat, entry.params, entry.last_ns) = (tat, params, now);
                        }
                    } else {
                        let entry = Entry { key: Key::new(key), tat, params, last_ns: now };
                        guard.entries.insert_unique(hash, entry, |e| self.hasher.hash_one(&*e.key));
                    }
                }
                parts.extend(steps.into_iter().map(|(step, _)| step.decision));
                parts.push(other);
                let conformed = vec![true; charges.len()];
                return Outcome { decision: combine(parts), conformed };
            }
            parts.push(other);
        }
        self.budget.give_back(taken);
        let conformed: Vec<bool> =
            first_of.iter().map(|&at| steps[at].0.decision.is_ok()).collect();
        // Nothing charged: a key that conformed reports its bucket as it is.
        for (at, (step, _)) in steps.into_iter().enumerate() {
            match step.decision {
                Err(no) => parts.push(Err(no)),
                Ok(_) => {
                    let (i, _, hash) = keys[at];
                    let Charge { key, params } = charges[i];
                    let found = guards[guard_of(hash)].entries.find(hash, |e| *e.key == *key);
                    parts
                        .push(decide(found.map_or(Tat::EMPTY, |e| e.tat), params, now, 0).decision);
                }
            }
        }
        Outcome { decision: combine(parts), conformed }
    }

    /// Sweeps the shards a call holds that were not swept lately, keeping the keys the call
    /// names (`named`); returns the bytes given back.
    fn sweep_held(
        &self,
        guards: &mut [Guard<'_>],
        now: u64,
        named: &dyn Fn(&[u8]) -> bool,
    ) -> usize {
        let stale = |shard: &Shard| now.saturating_sub(shard.swept_ns) >= RESWEEP_NS;
        guards.iter_mut().filter(|g| stale(g)).map(|g| self.sweep_locked(g, now, named)).sum()
    }

    /// Forgets every empty bucket of one locked shard but those `keep` keeps (shrinking the
    /// shard if it is then mostly empty); returns the bytes given back.
    fn sweep_locked(&self, shard: &mut Shard, now: u64, keep: &dyn Fn(&[u8]) -> bool) -> usize {
        let mut freed = 0usize;
        shard.entries.retain(|e| {
            let gone = e.tat.is_empty_at(now) && !keep(&e.key);
            if gone {
                freed += Budget::cost(e.key.len());
            }
            !gone
        });
        let entries = &mut shard.entries;
        if entries.capacity() > 64 && entries.len() * 4 < entries.capacity() {
            entries.shrink_to(entries.len() * 2, |e| self.hasher.hash_one(&*e.key));
        }
        shard.swept_ns = now;
        self.budget.give_back(freed);
        freed
    }

    /// Forgets the empty buckets of shard `i` (below [`SHARDS`]); returns the bytes given back.
    pub(crate) fn sweep_shard(&self, i: usize) -> usize {
        let mut guard = self.lock(i);
        let now = self.now();
        self.sweep_locked(&mut guard, now, &|_| false)
    }

    /// Forgets every empty bucket; returns the bytes given back.
    #[cfg(test)]
    pub(crate) fn sweep(&self) -> usize {
        (0..SHARDS).map(|i| self.sweep_shard(i)).sum()
    }

    /// Calls `f` on every entry of shard `i` with the clock's reading, the shard locked
    /// meanwhile.
    pub(crate) fn for_each_in(&self, i: usize, mut f: impl FnMut(&Entry, u64)) {
        let guard = self.lock(i);
        let now = self.now();
        for entry in guard.entries.iter() {
            f(entry, now);
        }
    }

    /// Keys held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.lock(i).entries.len()).sum()
    }
}

/// The figures of several decisions merged into one: the smallest `remaining()`, the largest
/// `reset_after()`; a denial if any part is one, with the largest `retry_after()` (`None` if any
/// denial has none). No part: admitted, untracked.
pub(crate) fn combine(
    parts: impl IntoIterator<Item = Result<Admitted, Denied>>,
) -> Result<Admitted, Denied> {
    let (mut remaining, mut reset) = (u64::MAX, Duration::ZERO);
    let mut denied: Option<Option<Duration>> = None;
    for part in parts {
        let (left, until) = match &part {
            Ok(ok) => (ok.remaining(), ok.reset_after()),
            Err(no) => (no.remaining(), no.reset_after()),
        };
        remaining = remaining.min(left);
        reset = reset.max(until);
        if let Err(no) = part {
            denied = Some(match (denied, no.retry_after()) {
                (None, retry) => retry,
                (Some(Some(a)), Some(b)) => Some(a.max(b)),
                (Some(_), _) => None,
            });
        }
    }
    match denied {
        Some(retry) => Err(Denied::new(remaining, reset, retry)),
        None => Ok(Admitted::new(remaining, reset)),
    }
}
