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
use super::successor::{Linked, Successor};
use super::Rule;
use crate::clock::Clock;
use crate::gcra::Rate;
use crate::keyed::{FirstState, KeyedLimiter};
use crate::sync::{self, AtomicU32, Mutex, Ordering, SwapCell};
use std::cell::Cell;
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
    /// The set that replaced this one, where a charge that went with a level handed over is
    /// given back, for as long as one may (see `successor.rs`).
    pub(crate) successor: Successor<Generation<C>>,
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
    orphans: Mutex<HashMap<(Box<str>, usize), FirstState>>,
}

impl<C: Clock> Linked for Generation<C> {
    fn link(&self) -> &Successor<Self> {
        &self.successor
    }
}

impl<C: Clock> Generation<C> {
    pub(crate) fn new(
        resolver: Resolver,
        rules: Box<[CompiledRule<C>]>,
        source: Option<Arc<Generation<C>>>,
        since_ns: u64,
    ) -> Self {
        if let Some(source) = &source {
            open_forgotten_keys_no_fuller(&rules, source, since_ns);
        }
        // The reload saw this time: no new bucket starts earlier (as a change of quota).
        for table in rules.iter().flat_map(|rule| rule.tables.iter()) {
            table.table().note_seen(since_ns);
        }
        let cell = SwapCell::empty();
        let replacing = source.is_some();
        cell.store(source);
        Generation {
            resolver,
            rules,
            source: cell,
            successor: Successor::new(replacing),
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
    pub(crate) fn first_state(&self, key: &str, rule: usize, quota: usize) -> FirstState {
        // Acquire: pairs with the Release store in `close`, so an insert that starts its key
        // `MOVED` then sees the rules that replaced these (stored before), and its check goes
        // there next. (The barrier orders the flag for inserts that start after it; this orders
        // what comes with it for those that see it early.)
        if self.closed.load(Ordering::Acquire) == 1 {
            return FirstState { at_least: MOVED, level: 0 };
        }
        let handed = self.source.read(|source| {
            let to = self.rules[rule].tables[quota].rate();
            source?.hand_over(key, quota, to, self.since_ns)
        });
        handed.or_else(|| self.take_orphan(key, quota)).unwrap_or(FirstState::EMPTY)
    }

    /// The level a reload left for `key`'s bucket `quota` when it found no room, if any.
    fn take_orphan(&self, key: &str, quota: usize) -> Option<FirstState> {
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
        f: impl FnOnce(&mut HashMap<(Box<str>, usize), FirstState>) -> R,
    ) -> R {
        f(&mut sync::lock(&self.orphans))
    }

    /// Closes this set to new keys (see the module docs); returns once every insert that started
    /// before has finished. Idempotent; any thread may do it.
    pub(crate) fn close(&self) {
        // Release: see `first_state`; the barrier below orders it for every later insert.
        self.closed.store(1, Ordering::Release);
        // Passes that start from now on charge nothing here (`successor.rs`).
        self.successor.close_passes();
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
    /// first state in rate `to`, taken at `at_ns` (empty for an empty bucket). `None` when this set
    /// holds no level for it: the key is absent, or its bucket was handed over already. A level
    /// kept for a key that had no room here is handed over the same way.
    pub(crate) fn hand_over(
        &self,
        key: &str,
        quota: usize,
        to: &Rate,
        at_ns: u64,
    ) -> Option<FirstState> {
        self.close();
        let table = self.resolver.resolve(key).and_then(|r| self.rules[r].tables.get(quota))?;
        // Closed: a key absent now never gets a bucket that admits. The seal's Release fence: a
        // check on these rules that reads `MOVED` (its slot's load is Acquire) and then loads
        // the rules in force sees the set this one was handed to (published before).
        if let Some(tat) = table.seal_moved(key) {
            return Some(carry(tat, table.rate(), to, at_ns));
        }
        let orphan = self.take_orphan(key, quota)?;
        let state = orphan.open(0, MOVED - 1);
        Some(carry(state, table.rate(), to, at_ns))
    }

    /// Gives back, where this set handed it over, a charge of `cost` units (of the bucket's rate)
    /// that was still in a bucket of quota `quota` of rule `rule` (`key`'s, or with `shared` the
    /// rule's shared overflow bucket) when a reload sealed it, for a request refused after all.
    ///
    /// The level handed over counted the charge, so it is given back from the bucket the level
    /// went to, in the newer rules (and on, if those were replaced in turn), as much of it as
    /// that level can hold: its size in the new units rounded down, and none of what the new
    /// quota's burst may have cut (see [`handed_over_part`]), less the time since the level was
    /// taken. So a refused request keeps nothing across a reload on a clock that stood still
    /// when the new burst holds the old bucket; otherwise it may leave part of its charge in the
    /// new bucket (which then refuses that much more until it drains), never take back more.
    pub(crate) fn give_back_handed_over(
        &self,
        key: &str,
        (rule, quota): (usize, usize),
        shared: bool,
        cost: u64,
    ) {
        let path = &self.rules[rule].path;
        let mut from = *self.rules[rule].tables[quota].rate_of(shared);
        let mut units = cost;
        let mut next = self.successor.next();
        while let Some(generation) = next {
            let rule = match shared {
                true => generation.rules.iter().position(|r| r.path == *path),
                false => generation.resolver.resolve(key),
            };
            // A quota with no counterpart took no level over.
            let Some(to) = rule.and_then(|rule| generation.rules[rule].tables.get(quota)) else {
                return;
            };
            units = handed_over_part(units, &from, to.rate_of(shared));
            if units == 0 || generation.give_back_to(to, key, quota, shared, units) {
                return;
            }
            // Sealed in turn: the level went on to the set after.
            from = *to.rate_of(shared);
            next = generation.successor.next();
        }
    }

    /// Gives back `units` handed over by the set before, from `key`'s bucket for quota `quota` in
    /// `table` (one of this set's), or from the level kept for it here for lack of room; `false`
    /// if its bucket was sealed in turn.
    fn give_back_to(
        &self,
        table: &Table<C>,
        key: &str,
        quota: usize,
        shared: bool,
        units: u64,
    ) -> bool {
        let mut waited = false;
        loop {
            if let Some(given) = table.give_back_handed_over(key, shared, units, self.since_ns) {
                return given;
            }
            if shared || waited {
                break;
            }
            // The level may be on its way in: the hand-over inserts the key under its home lock.
            table.wait_for_insert_of(key);
            waited = true;
        }
        // Kept for lack of room (the hand-over keeps it under this lock): lower what is kept.
        let rate = table.rate();
        let elapsed =
            rate.units_at(table.clock().now_ns()).saturating_sub(rate.units_at(self.since_ns));
        self.with_orphans(|orphans| {
            if let Some(state) = orphans.get_mut(&(key.into(), quota)) {
                state.level -= units.saturating_sub(elapsed).min(state.level);
            }
        });
        true
    }

    /// The keys and quotas with a level kept here for lack of room (for the next reload).
    pub(crate) fn orphan_keys(&self) -> Vec<(String, usize)> {
        self.with_orphans(|orphans| {
            orphans.keys().map(|(key, quota)| (key.to_string(), *quota)).collect()
        })
    }
}

/// The first state of `key`'s bucket for quota `quota` of rule `rule` in `generation`, chosen
/// once per take (the choice hands a level over, so a second insert within the take must reuse
/// it): see `Ask::start`.
#[inline]
pub(crate) fn first_state<C: Clock>(
    chosen: &Cell<Option<FirstState>>,
    generation: &Generation<C>,
    key: &str,
    rule: usize,
    quota: usize,
) -> FirstState {
    match chosen.get() {
        Some(state) => state,
        None => {
            let state = generation.first_state(key, rule, quota);
            chosen.set(Some(state));
            state
        }
    }
}

/// Sets each new table to open the keys it never held (forgotten by the old rules' tables, or
/// never seen) no fuller than the old rules' tables would have carried them, as of `now_ns`: a
/// key now under rule `P` was under an old rule whose path is a prefix of `P` or has `P` as its
/// prefix, so the fullest such table's carried level, quota by quota, bounds them all (see
/// `Marks::fresh`: so a smaller burst and a larger one back never hand out units).
fn open_forgotten_keys_no_fuller<C: Clock>(
    rules: &[CompiledRule<C>],
    source: &Generation<C>,
    now_ns: u64,
) {
    let nested = |a: &str, b: &str| {
        let under = |long: &str, short: &str| {
            short.is_empty() || long.strip_prefix(short).is_some_and(|rest| rest.starts_with('/'))
        };
        a == b || under(a, b) || under(b, a)
    };
    for rule in rules {
        for (i, table) in rule.tables.iter().enumerate() {
            let level = (source.rules.iter())
                .filter(|old| nested(&old.path, &rule.path))
                .filter_map(|old| old.tables.get(i))
                .map(|old| old.fresh_level_in(table.rate(), now_ns))
                .max()
                .unwrap_or(0);
            table.open_with_level(level, now_ns);
        }
    }
}

/// The first state, in rate `to`, of a bucket whose state was `tat` in rate `from`, as of `at_ns`:
/// its level (see [`level`]) on top of that time; empty for an empty bucket.
pub(crate) fn carry(tat: u64, from: &Rate, to: &Rate, at_ns: u64) -> FirstState {
    match level(tat, from, to, at_ns) {
        0 => FirstState::EMPTY,
        level => {
            FirstState { at_least: to.ns_to_units_ceil(at_ns).saturating_add(to.origin()), level }
        }
    }
}

/// Of a charge of `cost` units of rate `from` that a level handed over to rate `to` counted, the
/// part that level surely holds: the charge in `to`'s units, rounded down, less what capping the
/// level at `to`'s burst may have cut from it. The cut is at most what the fullest bucket of
/// `from` exceeds `to`'s burst by after the charge (the part a level can lose to the cap only
/// shrinks as the level grows), so this is exact whenever `to`'s burst holds all of `from`'s.
pub(crate) fn handed_over_part(cost: u64, from: &Rate, to: &Rate) -> u64 {
    let (from_s, to_s) = (u128::from(from.scale().interval()), u128::from(to.scale().interval()));
    let part = u64::try_from(u128::from(cost) * to_s / from_s).unwrap_or(u64::MAX);
    let fullest = u128::from(from.scale().tau()) * to_s;
    let fullest = u64::try_from(fullest.div_ceil(from_s)).unwrap_or(u64::MAX);
    let room = to.scale().tau().saturating_add(part).saturating_sub(fullest);
    part.min(room)
}

/// The level of a bucket whose state was `tat` in rate `from`, as of `at_ns`, in units of rate
/// `to` (see [`Rate::level_in`]).
pub(crate) fn level(tat: u64, from: &Rate, to: &Rate, at_ns: u64) -> u64 {
    from.level_in(tat, to, at_ns)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn carry_keeps_the_units_available_capped_at_the_new_burst() {
        // 10/s burst 10 (T = 100 ms) to 1/s burst 5 (T = 1 s), at 2 s.
        let from = Rate::new(10, 1_000_000_000, 10).unwrap();
        let to = Rate::new(1, 1_000_000_000, 5).unwrap();
        let (s, s2) = (from.scale().interval(), to.scale().interval());
        let at = 2_000_000_000;
        let used = |units: u64| from.units_at(at) + units * s;
        let open = |state: FirstState| state.open(0, u64::MAX);
        // 3 used, 7 available: the new burst's 5 are available (a shrink keeps no more).
        assert_eq!(carry(used(3), &from, &to, at), FirstState::EMPTY);
        // 8 used, 2 available: 2 stay available, so 3 of the 5 are used.
        assert_eq!(open(carry(used(8), &from, &to, at)), to.units_at(at) + 3 * s2);
        // Empty: nothing available, whatever the new burst.
        assert_eq!(open(carry(used(10), &from, &to, at)), to.units_at(at) + 5 * s2);
        // A grow adds nothing at once: 9 available of burst 10 are 9 of 20.
        let grown = Rate::new(1, 1_000_000_000, 20).unwrap();
        assert_eq!(carry(used(1), &from, &grown, at).level, 11 * s2);
        // So does an idle one: 10 available of 20.
        assert_eq!(carry(from.units_at(at) - 1, &from, &grown, at).level, 10 * s2);
        // An idle bucket under a smaller burst carries nothing: all of the new burst is there.
        assert_eq!(carry(from.units_at(at) - 1, &from, &to, at), FirstState::EMPTY);
        // A backlog past the burst (reservations queued beyond it) stays past the new burst.
        assert_eq!(open(carry(used(12), &from, &to, at)), to.units_at(at) + 7 * s2);
        // A fraction of a unit available is rounded down: 2.5 available are 2.5 of 1/s.
        let carried = carry(used(10) - 5 * s / 2, &from, &to, at).level;
        assert_eq!(carried, 5 * s2 - 5 * s2 / 2);
    }

    #[test]
    fn carry_rounds_what_is_available_down() {
        // 3/s: S is not a multiple of 3, so a third of an interval is a fraction of a unit of 1/s.
        let from = Rate::new(3, 1_000_000_000, 3).unwrap();
        let to = Rate::new(1, 1_000_000_000, 1).unwrap();
        let (s1, s2) = (u128::from(from.scale().interval()), u128::from(to.scale().interval()));
        // Two units and a third used: two thirds of a unit available.
        let backlog = 2 * from.scale().interval() + from.scale().interval() / 3;
        let available = s2 - u128::from(carry(backlog, &from, &to, 0).level);
        let exact = u128::from(3 * from.scale().interval() - backlog) * s2;
        assert!(available * s1 <= exact, "never more available than before");
        assert!((available + 1) * s1 > exact, "less than a unit of the new rate less");
    }

    #[test]
    fn carry_between_equal_rates_keeps_the_backlog_exactly() {
        let rate = Rate::new(7, 1_000_000_000, 4).unwrap();
        for backlog in [0, 1, rate.scale().interval(), rate.scale().tau(), rate.scale().tau() + 5] {
            assert_eq!(level(backlog, &rate, &rate, 0), backlog);
        }
    }
}
