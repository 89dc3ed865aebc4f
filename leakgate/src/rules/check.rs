//! [`RuleLimiter`]: the rules in force, and the checks against them.

use super::all_or_nothing::{self, Figures, Step, NEVER};
use super::counters::{Count, RuleCounters};
use super::current::Current;
use super::generation::{first_state, CompiledRule, Generation, Table, MOVED};
use super::resolve::Resolver;
use super::{Rule, Rules};
use crate::clock::{Clock, TscClock};
use crate::decision::{Admitted, Denied};
use crate::gcra::Scale;
use crate::keyed::{Ask, KeyedLimiter};
use crate::quota::Quota;
use crate::sync::{self, Mutex, LOOM};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Rate limits by key path: each key is limited by the rule of its longest configured prefix
/// (see [`Rules`]), with its own bucket per quota of the rule.
///
/// Checks never block: the rules in force are read through a per-thread cache in front of an
/// `arc-swap` cell, a tracked key's buckets are found without a lock, and a check of a key whose
/// rule has one quota costs about what a [`KeyedLimiter`] check does. A reload swaps the rules
/// while checks go on. (Each thread keeps the set of rules it last checked against, so a thread
/// that stops checking keeps a replaced set's tables in memory until it checks again or exits.)
///
/// ```
/// use leakgate::{ManualClock, RuleLimiter, Rules};
/// let mut rules = Rules::new();
/// rules.insert("rate_limit", ["1/s burst 2".parse()?]);
/// rules.insert("rate_limit/192.168.11.3", ["100/s burst 500".parse()?]);
/// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
/// assert!(lim.check("rate_limit/10.0.0.1").is_ok());
/// assert!(lim.check("rate_limit/10.0.0.1").is_ok());
/// assert!(lim.check("rate_limit/10.0.0.1").is_err()); // burst 2
/// assert_eq!(lim.check("rate_limit/192.168.11.3").unwrap().remaining(), 499);
/// assert_eq!(lim.check("web/index").unwrap().remaining(), u64::MAX); // no rule: not tracked
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RuleLimiter<C: Clock = TscClock> {
    /// The rules in force.
    pub(super) current: Current<C>,
    pub(super) clock: Arc<C>,
    /// Each rule path's counters, kept across reloads.
    pub(super) counters: Mutex<HashMap<Box<str>, Arc<RuleCounters>>>,
    /// Held by a reload from start to end: reloads run one at a time.
    pub(super) reloading: Mutex<()>,
}

impl RuleLimiter<TscClock> {
    /// A limiter enforcing `rules` on the default clock.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let lim = leakgate::RuleLimiter::new(rules);
    /// assert!(lim.check("api/alice").is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(rules: Rules) -> Self {
        Self::with_clock(rules, TscClock::new())
    }
}

impl<C: Clock + 'static> RuleLimiter<C> {
    /// A limiter enforcing `rules`, reading time from `clock`.
    ///
    /// ```
    /// use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("api", ["1/s".parse()?]);
    /// let clock = ManualClock::new();
    /// let lim = RuleLimiter::with_clock(rules, clock.clone());
    /// assert!(lim.check("api/x").is_ok());
    /// assert!(lim.check("api/x").is_err());
    /// clock.advance(std::time::Duration::from_secs(1));
    /// assert!(lim.check("api/x").is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_clock(rules: Rules, clock: C) -> Self {
        let clock = Arc::new(clock);
        let counters = Mutex::new(HashMap::new());
        let first = Arc::new(compile(&clock, &counters, &rules, None, 0));
        RuleLimiter { current: Current::new(first), clock, counters, reloading: Mutex::new(()) }
    }

    /// Compiles `rules` into a set of tables handing levels over from `source`.
    pub(super) fn compile(
        &self,
        rules: &Rules,
        source: Option<Arc<Generation<C>>>,
        since_ns: u64,
    ) -> Generation<C> {
        compile(&self.clock, &self.counters, rules, source, since_ns)
    }

    /// Checks one unit for `key`: `check_n(key, 1)`.
    ///
    /// ```
    /// # use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("", ["1/s".parse()?]);
    /// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    /// assert!(lim.check("anything").is_ok());
    /// assert!(lim.check("anything").is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check(&self, key: &str) -> Result<Admitted, Denied> {
        self.check_n(key, 1)
    }

    /// Checks a request of cost `n` for `key` against every quota of its rule, all or nothing.
    /// A key no rule matches (or whose rule has no quotas) is admitted with `remaining() ==
    /// u64::MAX` and `reset_after() == 0`. Never blocks; allocates nothing for a tracked key
    /// whose rule has at most 8 quotas.
    ///
    /// ```
    /// # use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("api", ["10/s".parse()?, "15/min".parse()?]);
    /// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    /// let ok = lim.check_n("api/alice", 10).unwrap();
    /// assert_eq!(ok.remaining(), 0); // the smallest over both quotas
    /// assert_eq!(ok.reset_after().as_secs(), 40); // the largest: 10 units of 4 s each
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check_n(&self, key: &str, n: u64) -> Result<Admitted, Denied> {
        let mut moved_on: Option<Arc<Generation<C>>> = None;
        loop {
            let outcome = self.current.with(|generation, thread| {
                // A `MOVED` state seen again on the same rules is a real (saturated) state.
                let moved_is_final = moved_on.as_ref().is_some_and(|g| Arc::ptr_eq(g, generation));
                let Some(rule_number) = generation.resolver.resolve(key) else {
                    return Checked::Untracked;
                };
                let rule = &generation.rules[rule_number];
                let step = match &*rule.tables {
                    [] => return Checked::Untracked,
                    [table] if !rule.rule.is_shadow() => {
                        let found = (table, key, rule_number, thread);
                        return self.check_one(generation, rule, found, n, moved_is_final);
                    }
                    _ => {
                        let rules = &mut [(0, rule_number as u32)];
                        let pass = (moved_is_final, thread);
                        all_or_nothing::decide(&*self.clock, generation, &[key], rules, n, pass)
                    }
                };
                match step {
                    Step::Decided(figures) => Checked::Decided(figures),
                    Step::Moved => Checked::Moved(generation.clone()),
                }
            });
            // The decision is built here, from a few words, straight into the return value:
            // moved whole through the layers above, it costs store-forwarding stalls.
            match outcome {
                Checked::One { backlog, wait: None, scale } => {
                    return Ok(Admitted::from_units(backlog, scale))
                }
                Checked::One { backlog, wait: Some(wait), scale } => {
                    return Err(Denied::from_units(backlog, wait, scale))
                }
                Checked::Untracked => return Ok(untracked()),
                Checked::Decided(figures) => return decision(figures),
                Checked::Moved(generation) => moved_on = Some(generation),
            }
        }
    }

    /// The common case: one enforcing quota, so the bucket's own decision is the answer.
    #[inline(always)]
    fn check_one(
        &self,
        generation: &Arc<Generation<C>>,
        rule: &CompiledRule<C>,
        (table, key, rule_number, thread): (&Table<C>, &str, usize, usize),
        n: u64,
        moved_is_final: bool,
    ) -> Checked<C> {
        let hash = table.touch_key(key);
        let now_ns = self.clock.now_ns();
        let now = table.rate().units_at(now_ns);
        let chosen = Cell::new(None);
        let start = || first_state(&chosen, generation, key, rule_number, 0);
        let ask = Ask {
            now,
            now_ns,
            n,
            max_wait: 0,
            shared_overflow: true,
            start: &start,
            epoch: 0,
            rate: table.rate(),
        };
        match table.take_hashed(key, hash, ask) {
            Ok(taken) if taken.state != MOVED || moved_is_final => {
                rule.counters.add_at(thread, Count::Admitted);
                let backlog = taken.state.saturating_sub(taken.now);
                Checked::One { backlog, wait: None, scale: taken.scale }
            }
            Err(refused) if refused.tat != MOVED || moved_is_final => {
                rule.counters.add_at(thread, Count::Denied);
                let backlog = refused.tat.saturating_sub(refused.now);
                Checked::One { backlog, wait: Some(refused.wait), scale: refused.scale }
            }
            // Handed over to newer rules (a peek sees the mark as a state): again.
            Ok(_) | Err(_) => Checked::Moved(generation.clone()),
        }
    }

    /// Checks a request of cost `n` for every key at once (tiers: tenant, user, global): it
    /// conforms only if every bucket of every key's rule conforms, and then every bucket is
    /// charged; otherwise none is, also under concurrency. A key named twice is charged twice.
    ///
    /// A denial reports the largest `retry_after()` over the buckets that refuse (`None` if one
    /// never can conform), and every decision the smallest `remaining()` and the largest
    /// `reset_after()` over the buckets. Keys with no rule are admitted and take nothing.
    /// Allocates nothing for up to 8 keys and 8 buckets in all.
    ///
    /// ```
    /// # use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("tenant", ["3/s".parse()?]);
    /// rules.insert("user", ["2/s".parse()?]);
    /// let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    /// assert!(lim.check_all_n(&["tenant/acme", "user/1"], 2).is_ok());
    /// // user/2 has room, but the tenant has 1 left: refused, and user/2 keeps both units.
    /// assert!(lim.check_all_n(&["tenant/acme", "user/2"], 2).is_err());
    /// assert_eq!(lim.check_n("user/2", 2).unwrap().remaining(), 0);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check_all_n(&self, keys: &[&str], n: u64) -> Result<Admitted, Denied> {
        let mut moved_on: Option<Arc<Generation<C>>> = None;
        loop {
            let step = self.current.with(|generation, thread| {
                let moved_is_final = moved_on.as_ref().is_some_and(|g| Arc::ptr_eq(g, generation));
                // Each key's rule, by the key's index (keys with none left out). A plain loop:
                // through an iterator adapter the pairs come back through memory (a stall each).
                let resolve = |rules: &mut [(u32, u32)]| {
                    let mut len = 0;
                    for (i, key) in keys.iter().enumerate() {
                        if let Some(rule) = generation.resolver.resolve(key) {
                            rules[len] = (i as u32, rule as u32);
                            len += 1;
                        }
                    }
                    len
                };
                let (pass, clock) = ((moved_is_final, thread), &*self.clock);
                let step = if keys.len() <= all_or_nothing::INLINE {
                    let mut rules = [(0, 0); all_or_nothing::INLINE];
                    let len = resolve(&mut rules);
                    all_or_nothing::decide(clock, generation, keys, &mut rules[..len], n, pass)
                } else {
                    let mut rules = vec![(0, 0); keys.len()];
                    let len = resolve(&mut rules);
                    all_or_nothing::decide(clock, generation, keys, &mut rules[..len], n, pass)
                };
                match step {
                    Step::Decided(figures) => Ok(figures),
                    Step::Moved => Err(generation.clone()),
                }
            });
            match step {
                Ok(figures) => return decision(figures),
                Err(generation) => moved_on = Some(generation),
            }
        }
    }

    /// The clock this limiter reads.
    ///
    /// ```
    /// # use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let lim = RuleLimiter::with_clock(Rules::new(), ManualClock::new());
    /// lim.clock().advance(std::time::Duration::from_secs(1));
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }
}

/// Compiles `rules` into a set of tables on `clock` handing levels over from `source`, with
/// each rule's counters from `counters` (kept by path).
fn compile<C: Clock + 'static>(
    clock: &Arc<C>,
    counters: &Mutex<HashMap<Box<str>, Arc<RuleCounters>>>,
    rules: &Rules,
    source: Option<Arc<Generation<C>>>,
    since_ns: u64,
) -> Generation<C> {
    let resolver = Resolver::new(rules.iter().map(|(path, _)| path));
    let mut counters = sync::lock(counters);
    let compiled = rules
        .iter()
        .map(|(path, rule)| CompiledRule {
            path: path.into(),
            rule: rule.clone(),
            tables: rule.quotas().iter().map(|&q| table(clock, q, rule)).collect(),
            counters: counters
                .entry(path.into())
                .or_insert_with(|| Arc::new(RuleCounters::new()))
                .clone(),
        })
        .collect();
    Generation::new(resolver, compiled, source, since_ns)
}

/// One quota's table of a rule. Under loom, one group of four slots: the models explore every
/// interleaving of a few keys.
fn table<C: Clock>(clock: &Arc<C>, quota: Quota, rule: &Rule) -> Table<C> {
    let table = if LOOM {
        KeyedLimiter::with_layout(quota, 1, 4, clock.clone())
    } else {
        KeyedLimiter::with_capacity_and_clock(quota, rule.table_capacity(), clock.clone())
    };
    table.with_overflow(rule.overflow_policy())
}

/// What one pass of [`RuleLimiter::check_n`] found.
enum Checked<C: Clock> {
    /// One bucket decided: its backlog after the decision, its wait if refused (`None` inside:
    /// never), its scale.
    One { backlog: u64, wait: Option<Option<u64>>, scale: Scale },
    /// No quota limits the key.
    Untracked,
    /// Several buckets decided.
    Decided(Figures),
    /// A bucket had been handed over from these rules: again, on the newer ones.
    Moved(Arc<Generation<C>>),
}

/// A decision from its figures.
fn decision(figures: Figures) -> Result<Admitted, Denied> {
    let reset_after = Duration::from_nanos(figures.reset_ns);
    if figures.denied {
        let retry_after =
            (figures.retry_ns != NEVER).then(|| Duration::from_nanos(figures.retry_ns));
        Err(Denied::new(figures.remaining, reset_after, retry_after))
    } else {
        Ok(Admitted::new(figures.remaining, reset_after))
    }
}

/// The decision for a key no quota limits.
#[inline]
pub(super) fn untracked() -> Admitted {
    Admitted::new(u64::MAX, Duration::ZERO)
}

impl<C: Clock + 'static> fmt::Debug for RuleLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let generation = self.current.load_full();
        let paths: Vec<&str> = generation.rules.iter().map(|rule| &*rule.path).collect();
        f.debug_struct("RuleLimiter").field("rules", &paths).finish_non_exhaustive()
    }
}
