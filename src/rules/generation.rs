//! One set of rules in force: the rules compiled, their tables, and the hand-over of levels from
//! the set a reload replaced.
//!
//! # Implementation details
//!
//! A reload publishes a new [`Generation`] whose `source` is the one it replaces, then hands every
//! tracked key over. Two markers keep every admission counted exactly once:
//!
//! * **A moved bucket is full.** Handing a key's bucket over seals it: its state becomes
//!   [`MOVED`] (`bucket::seal_moved`: a CAS from the state read, so no admission lands between
//!   the read and the mark), and the level read goes to the key's bucket in the new tables. A
//!   check still running on the old rules sees `MOVED` as a bucket that is full for ever, takes
//!   back what it charged elsewhere, and starts again on the rules in force.
//! * **New keys are handed over as they arrive.** A key the new tables do not hold yet gets its
//!   slot under its home shard's lock, and its first state is chosen there, as the slot is given
//!   (`keyed::Ask::start`): the level its bucket had in the source (which is sealed first), or
//!   empty. No check sees the slot before the state is set, and the lock serialises the choice
//!   with the reload's own hand-over of the same key, so a level is handed over once. A key that
//!   finds no room chooses nothing: its level stays in the source for the reload to keep.
//! * **A replaced set is closed.** Before anything is handed over, the source is closed: its new
//!   keys start `MOVED`, and a barrier on every shard lock waits for the inserts that chose their
//!   state before. So a key absent from the source then is absent for ever (a late check on it
//!   is sent to the new rules), and nothing is left behind once every key found is handed over.
//!
//! Levels are taken at `since_ns`, the clock reading when the reload began, and carried rounding
//! against the caller: the level `(TAT - now) / T` in the old quota becomes `ceil` of that many
//! units in the new one, capped at its burst.

use super::counters::RuleCounters;
use super::resolve::Resolver;
use super::Rule;
use crate::clock::Clock;
use crate::gcra::Rate;
use crate::keyed::KeyedLimiter;
use crate::sync::{self, AtomicU32, Mutex, Ordering, SwapCell};
use std::collections::HashMap;
use std::sync::Arc;

/// The state of a bucket handed over to newer rules: the highest a keyed slot may hold (what
/// `bucket::seal_moved` raises it to), so it refuses every request. An admission may leave that
/// state too, in a bucket at the end of the clock's range: a check that sees `MOVED` twice on the
/// same rules takes it as the bucket's state.
pub(crate) const MOVED: u64 = u64::MAX - 1;

/// The tables of one quota of one rule: a bucket per full key.
pub(crate) type Table<C> = KeyedLimiter<String, Arc<C>>;

/// One rule, compiled.
pub(crate) struct CompiledRule<C: Clock> {
    pub(crate) path: Box<str>,
    pub(crate) rule: Rule,
    /// One table per quota, in the rule's order.
    pub(crate) tables: Box<[Table<C>]>,
    pub(crate) counters: Arc<RuleCounters>,
}

/// One set of rules in force.
pub(crate) struct Generation<C: Clock> {
    pub(crate) resolver: Resolver,
    pub(crate) rules: Box<[CompiledRule<C>]>,
    /// The set this one replaced, while its levels are being handed over; `None` after.
    pub(crate) source: SwapCell<Generation<C>>,
    /// The clock reading (ns) when this set took over: levels are handed over as of then.
    pub(crate) since_ns: u64,
    /// 1 once a newer set replaced this one: new keys start `MOVED`. Read by inserts under a
    /// shard lock, so the barrier in [`Generation::close`] orders it for every later insert.
    closed: AtomicU32,
    /// 1 once every insert that started before `closed` was set has finished.
    barrier_passed: AtomicU32,
    /// Levels handed over by a reload to keys that found no room in these tables then, by key
    /// and quota, as first states in these tables' units: taken by the key's first insert (or
    /// by the next reload). Touched only on inserts and reloads.
    orphans: Mutex<HashMap<(Box<str>, usize), u64>>,
}

impl<C: Clock> Generation<C> {
    pub(crate) fn new(
        resolver: Resolver,
        rules: Box<[CompiledRule<C>]>,
        source: Option<Arc<Generation<C>>>,
        since_ns: u64,
    ) -> Self {
        let cell = SwapCell::empty();
        cell.store(source);
        Generation {
            resolver,
            rules,
            source: cell,
            since_ns,
            closed: AtomicU32::new(0),
            barrier_passed: AtomicU32::new(0),
            orphans: Mutex::new(HashMap::new()),
        }
    }

    /// A set of no rules (what a limiter whose cell was never filled would see).
    pub(crate) fn empty() -> Self {
        Generation::new(Resolver::new(std::iter::empty()), Box::new([]), None, 0)
    }

    /// The first state of `key`'s bucket for quota `quota` of rule `rule`, chosen under the
    /// key's home lock as it gets a slot: `MOVED` once closed, else the level handed over from
    /// the source, else empty.
    pub(crate) fn first_state(&self, key: &str, rule: usize, quota: usize) -> u64 {
        // Acquire: pairs with the Release store in `close`, so an insert that starts its key
        // `MOVED` then sees the rules that replaced these (stored before), and its check goes
        // there next. (The barrier orders the flag for inserts that start after it; this orders
        // what comes with it for those that see it early.)
        if self.closed.load(Ordering::Acquire) == 1 {
            return MOVED;
        }
        let handed = self.source.read(|source| {
            let to = self.rules[rule].tables[quota].rate();
            source?.hand_over(key, quota, to, self.since_ns)
        });
        handed.or_else(|| self.take_orphan(key, quota)).unwrap_or(0)
    }

    /// The level a reload left for `key`'s bucket `quota` when it found no room, if any.
    fn take_orphan(&self, key: &str, quota: usize) -> Option<u64> {
        self.with_orphans(|orphans| match orphans.is_empty() {
            true => None,
            false => orphans.remove(&(key.into(), quota)),
        })
    }

    /// The levels kept for keys with no room, locked. A reload holds the lock across handing a
    /// key over and keeping its level, so the key's first insert (which looks here after finding
    /// the old bucket handed over) waits for the level to be there.
    pub(crate) fn with_orphans<R>(
        &self,
        f: impl FnOnce(&mut HashMap<(Box<str>, usize), u64>) -> R,
    ) -> R {
        f(&mut sync::lock(&self.orphans))
    }

    /// Closes this set to new keys (see the module docs); returns once every insert that started
    /// before has finished. Idempotent; any thread may do it.
    pub(crate) fn close(&self) {
        // Release: see `first_state`; the barrier below orders it for every later insert.
        self.closed.store(1, Ordering::Release);
        // Acquire: pairs with the Release store below, so a thread that skips the barrier sees
        // every insert the barrier waited for.
        if self.barrier_passed.load(Ordering::Acquire) == 1 {
            return;
        }
        for rule in self.rules.iter() {
            for table in rule.tables.iter() {
                table.wait_for_inserts();
            }
        }
        // Release: see the load above.
        self.barrier_passed.store(1, Ordering::Release);
    }

    /// Hands `key`'s bucket for quota `quota` over: seals it `MOVED` and returns its level as a
    /// first state in rate `to`, taken at `at_ns` (0 for an empty bucket). `None` when this set
    /// holds no level for it: the key is absent, or its bucket was handed over already. A level
    /// kept for a key that had no room here is handed over the same way.
    pub(crate) fn hand_over(&self, key: &str, quota: usize, to: &Rate, at_ns: u64) -> Option<u64> {
        self.close();
        let table = self.resolver.resolve(key).and_then(|r| self.rules[r].tables.get(quota))?;
        // Closed: a key absent now never gets a bucket that admits. The seal's Release fence: a
        // check on these rules that reads `MOVED` (its slot's load is Acquire) and then loads
        // the rules in force sees the set this one was handed to (published before).
        if let Some(tat) = table.seal_moved(key) {
            return Some(carry(tat, table.rate(), to, at_ns));
        }
        let orphan = self.take_orphan(key, quota)?;
        Some(carry(orphan, table.rate(), to, at_ns))
    }

    /// The keys and quotas with a level kept here for lack of room (for the next reload).
    pub(crate) fn orphan_keys(&self) -> Vec<(String, usize)> {
        self.with_orphans(|orphans| {
            orphans.keys().map(|(key, quota)| (key.to_string(), *quota)).collect()
        })
    }
}

/// The first state, in rate `to`, of a bucket whose state was `tat` in rate `from`, as of `at_ns`:
/// its level (see [`level`]) on top of that time; 0 for an empty bucket.
pub(crate) fn carry(tat: u64, from: &Rate, to: &Rate, at_ns: u64) -> u64 {
    match level(tat, from, to, at_ns) {
        0 => 0,
        level => to.ns_to_units_ceil(at_ns).saturating_add(level).min(MOVED - 1),
    }
}

/// The level of a bucket whose state was `tat` in rate `from`, as of `at_ns`, in units of rate
/// `to`: `(tat - now) / T` rounded up to whole units of `to` (against the caller), capped at
/// `to`'s burst.
pub(crate) fn level(tat: u64, from: &Rate, to: &Rate, at_ns: u64) -> u64 {
    // Rounded down, so the backlog (and the level) is never smaller than exact.
    let backlog = tat.saturating_sub(from.units_at(at_ns));
    let (from_s, to_s) = (from.scale().interval(), to.scale().interval());
    let level = (u128::from(backlog) * u128::from(to_s)).div_ceil(u128::from(from_s));
    u64::try_from(level).unwrap_or(u64::MAX).min(to.scale().tau())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn carry_keeps_the_level_and_rounds_against_the_caller() {
        // 10/s (T = 100 ms) to 1/s (T = 1 s): 3 units in the bucket stay 3 units.
        let from = Rate::new(10, 1_000_000_000, 10).unwrap();
        let to = Rate::new(1, 1_000_000_000, 5).unwrap();
        let at = 2_000_000_000;
        let tat = from.units_at(at) + 3 * from.scale().interval();
        assert_eq!(carry(tat, &from, &to, at), to.units_at(at) + 3 * to.scale().interval());
        // Capped at the new burst.
        let tat = from.units_at(at) + 10 * from.scale().interval();
        assert_eq!(carry(tat, &from, &to, at), to.units_at(at) + 5 * to.scale().interval());
        // A fraction of a unit is rounded up: 2.5 units of 10/s are 2.5 units of 1/s.
        let tat = from.units_at(at) + 5 * from.scale().interval() / 2;
        let carried = carry(tat, &from, &to, at) - to.units_at(at);
        assert_eq!(carried, 5 * to.scale().interval() / 2);
        // An idle bucket carries nothing.
        assert_eq!(carry(from.units_at(at) - 1, &from, &to, at), 0);
    }

    #[test]
    fn carry_of_a_fractional_level_rounds_up_to_the_next_unit() {
        // 3/s: S is not a multiple of 3, so a third of an interval is a fraction of a unit of 1/s.
        let from = Rate::new(3, 1_000_000_000, 3).unwrap();
        let to = Rate::new(1, 1_000_000_000, 1).unwrap();
        let (s1, s2) = (u128::from(from.scale().interval()), u128::from(to.scale().interval()));
        let backlog = from.scale().interval() / 3;
        let carried = u128::from(carry(backlog, &from, &to, 0));
        assert!(carried * s1 >= u128::from(backlog) * s2, "never less than the level");
        assert!((carried - 1) * s1 < u128::from(backlog) * s2, "less than a unit more");
    }
}
