//! [`RuleLimiter::reload`]: new rules in force at once, every tracked key keeping the units it
//! could admit.

use super::generation::first_state;
use super::generation::{level, Generation, MOVED};
use super::{RuleLimiter, Rules};
use crate::clock::Clock;
use crate::keyed::OverflowPolicy;
use crate::sync;
use std::cell::Cell;
use std::sync::Arc;

impl<C: Clock + 'static> RuleLimiter<C> {
    /// Puts `rules` in force. Checks go on meanwhile and never block or fail: each is decided
    /// either wholly on the old rules or wholly on the new ones.
    ///
    /// Every tracked key keeps what it could admit now under the rule that now matches it: its
    /// i-th bucket's available units (the burst less its level `(TAT - now) / T`) become the
    /// available units of the new rule's i-th quota, capped at that quota's burst and rounded
    /// down to the new quota's units (against the caller). So no reload, however frequent, makes
    /// more units available than before it: a smaller burst keeps the debt it cannot hold, and a
    /// larger one adds nothing at once (its units come at its rate). A new quota with no
    /// counterpart starts empty; a key that no longer matches any
    /// rule is no longer tracked. Levels are taken when the reload begins.
    ///
    /// Returns once every key has been handed over. Reloads run one at a time.
    ///
    /// A key that finds no room in its new table (a new capacity smaller than the keys in use)
    /// keeps its level for when it finds room. A peek (`check_n(key, 0)`) inserts nothing, so
    /// it reports an empty bucket for a key whose level is still waiting to be handed over
    /// (while the reload runs, or until the key finds room): it takes nothing, so nothing is
    /// admitted beyond the quota.
    ///
    /// ```
    /// use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    /// lim.check_n("api/alice", 8).unwrap(); // 2 units available to alice
    ///
    /// let mut stricter = Rules::new();
    /// stricter.insert("api", ["1/s burst 8".parse()?]);
    /// lim.reload(stricter);
    /// assert_eq!(lim.check("api/alice").unwrap().remaining(), 1); // 2 kept, 1 taken
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reload(&self, rules: Rules) {
        let _reloading = sync::lock(&self.reloading);
        let old = self.current.load_full();
        let since_ns = self.clock.now_ns();
        let new = Arc::new(self.compile(&rules, Some(old.clone()), since_ns));
        // Before anything of `old` is sealed (a check on `new` may seal a key at once): a charge
        // sealed in `old` is given back where its level went.
        old.successor.link(new.clone());
        self.current.store(new.clone());
        old.close();
        self.hand_over_all(&old, &new);
        self.hand_over_shared(&old, &new);
        // Every key the old tables held is in the new ones (or had no counterpart): new keys
        // start empty from now on, and the old tables go when the last check on them ends.
        drop(new.source.store(None));
    }

    /// Hands each shared overflow bucket of `old` over to the one of `new` for the same rule
    /// path and quota, if there is one: the old one is sealed (a check still on it starts again
    /// on `new`), and its level goes on top of what the new one admitted meanwhile.
    fn hand_over_shared(&self, old: &Generation<C>, new: &Generation<C>) {
        for rule in new.rules.iter() {
            let Some(before) = old.rules.iter().find(|before| before.path == rule.path) else {
                continue;
            };
            for (to, from) in rule.tables.iter().zip(before.tables.iter()) {
                if !matches!(to.overflow_policy(), OverflowPolicy::SharedBucket(_)) {
                    continue;
                }
                if let Some(tat) = from.seal_shared() {
                    let level = level(tat, from.rate_of(true), to.rate_of(true), new.since_ns);
                    to.add_to_shared(level, self.clock.now_ns());
                }
            }
        }
    }

    /// Hands every key tracked in `old` over to `new` (keys arriving in `new` meanwhile are
    /// handed over by their own checks, under the same locks). A key with a level gets its
    /// bucket in `new` now; an empty one (or one with no room) is only sealed in `old`, its
    /// level, if it had one by then, kept for its first check in `new`.
    fn hand_over_all(&self, old: &Generation<C>, new: &Generation<C>) {
        let mut tracked = Vec::new();
        for rule in old.rules.iter() {
            for (quota, table) in rule.tables.iter().enumerate() {
                let now = table.rate().units_at(self.clock.now_ns());
                table.for_each_state(|key, tat| {
                    // Sealed already (handed over by a check's insert), or changing key.
                    if tat < MOVED {
                        tracked.push((key, quota, tat > now));
                    }
                });
            }
        }
        let kept = old.orphan_keys().into_iter().map(|(key, quota)| (key, quota, true));
        for (key, quota, busy) in tracked.into_iter().chain(kept) {
            let Some(new_rule) = new.resolver.resolve(&key) else { continue };
            // A quota with no counterpart: the key's other buckets decide its late checks.
            let Some(to) = new.rules[new_rule].tables.get(quota) else { continue };
            if busy {
                let chosen = Cell::new(None);
                let start = || first_state(&chosen, new, &key, new_rule, quota);
                if to.settle(key.as_str(), self.clock.now_ns(), &start).is_some() {
                    continue;
                }
            }
            new.with_orphans(|orphans| {
                if let Some(state) = old.hand_over(&key, quota, to.rate(), new.since_ns) {
                    if state.level > 0 {
                        orphans.insert((key.into(), quota), state);
                    }
                }
            });
        }
    }
}
