//! Several buckets at once, all or nothing: the quotas of one rule, and the keys of one
//! [`check_all_n`](super::RuleLimiter::check_all_n).
//!
//! # Implementation details
//!
//! The buckets are charged one by one in a canonical order (by rule, key, then quota), so two
//! requests over the same buckets meet at the first one they share instead of each holding a
//! bucket the other needs. When a bucket refuses, every charge already made is given back where
//! it was made (`bucket::give_back`: the whole charge on a clock that stands still, whatever
//! other charges and admissions stand on it; otherwise less the time since the charge, never
//! below what the requests admitted need), and the buckets not reached are read without being
//! charged, for the report. A bucket a reload sealed meanwhile is never lowered: its level, the
//! charge in it, went to the newer rules, and the charge is given back there
//! ([`Generation::give_back_handed_over`]). A rule in shadow mode that refuses gives back its own charges only
//! and lets the request go on.
//!
//! A key with no room in its table is served as its rule's overflow policy says: refused as by a
//! full bucket, or charged to the table's shared overflow bucket, whose charge is given back like
//! any other (so a shared bucket keeps nothing of a refused request either). Such a charge is made
//! in the canonical order too; it is not put last, since two keys with no room may meet at one
//! shared bucket, and one refused there must give the other's charge back anyway.
//!
//! Entries are a few plain words each (the key by its index in the request, where a charge was
//! made), and the decision leaves as plain words too: copied through the layers as structs of
//! mixed-width fields, they cost store-forwarding stalls measured at a third of the check.

use super::counters::Count;
use super::generation::{first_state, Generation, Table, MOVED};
use crate::clock::Clock;
use crate::keyed::{Ask, Charged as Where};
use std::cell::Cell;

/// Buckets decided without allocating; more go to the heap.
pub(super) const INLINE: usize = 8;

/// What one pass over the rules in force decided.
pub(super) enum Step {
    Decided(Figures),
    /// A bucket had been handed over to newer rules: nothing is kept, decide again on those.
    Moved,
}

/// A decision as plain words.
#[derive(Clone, Copy, Debug)]
pub(super) struct Figures {
    pub(super) denied: bool,
    pub(super) remaining: u64,
    pub(super) reset_ns: u64,
    /// For a denial: the wait in ns, [`NEVER`] when the request can never conform.
    pub(super) retry_ns: u64,
}

/// The `retry_ns` of a request that can never conform.
pub(super) const NEVER: u64 = u64::MAX;

/// The figures of a request no quota limits.
pub(super) const UNTRACKED: Figures =
    Figures { denied: false, remaining: u64::MAX, reset_ns: 0, retry_ns: 0 };

/// One bucket of the request: plain words.
#[derive(Clone, Copy)]
struct Entry {
    /// The key's index in the request.
    key: u32,
    rule: u32,
    quota: u32,
    /// What happened to it.
    mark: Mark,
    /// Its state: after the charge when charged, the state judged on when refused, the state read
    /// for the others that were looked at; in the units of the bucket that decided (the key's, or
    /// its table's shared overflow bucket).
    state: u64,
    /// The clock in those units.
    now: u64,
    /// Why it refused: units of wait, or [`NEVER`].
    wait: u64,
}

impl Default for Entry {
    fn default() -> Self {
        Entry { key: 0, rule: 0, quota: 0, mark: Mark::Untouched, state: 0, now: 0, wait: 0 }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Untouched,
    /// Charged; the charge is still in the bucket, there.
    Charged(Where),
    /// Conformed, with nothing to give back (a peek, or a charge given back); in the shared
    /// overflow bucket, or not.
    Clear {
        shared: bool,
    },
    Refused {
        shared: bool,
    },
}

impl Mark {
    /// Whether the shared overflow bucket decided.
    fn shared(self) -> bool {
        matches!(
            self,
            Mark::Charged(Where::Shared)
                | Mark::Clear { shared: true }
                | Mark::Refused { shared: true }
        )
    }

    fn refused(self) -> bool {
        matches!(self, Mark::Refused { .. })
    }
}

/// Decides a request of cost `n` for `keys`, each with its rule's number in `rules` (keys with no
/// rule left out), on `generation`, reading the time from `clock` (the limiter's); `thread` is
/// this thread's counter index.
pub(super) fn decide<C: Clock + 'static>(
    clock: &C,
    generation: &Generation<C>,
    keys: &[&str],
    rules: &mut [(u32, u32)],
    n: u64,
    (moved_is_final, thread): (bool, usize),
) -> Step {
    // The canonical order: by rule, then key, then quota. Keys are compared only between two
    // keys of one rule; an insertion sort of a few pairs, most often already in order.
    for i in 1..rules.len() {
        let mut j = i;
        while j > 0 && {
            let ((a_key, a_rule), (b_key, b_rule)) = (rules[j - 1], rules[j]);
            a_rule.cmp(&b_rule).then_with(|| keys[a_key as usize].cmp(keys[b_key as usize])).is_gt()
        } {
            rules.swap(j - 1, j);
            j -= 1;
        }
    }
    let quotas = |rule: u32| generation.rules[rule as usize].tables.len();
    let count: usize = rules.iter().map(|&(_, rule)| quotas(rule)).sum();
    if count == 0 {
        return Step::Decided(UNTRACKED);
    }
    // Counted in flight until the decision is made (see `successor.rs`); replaced rules: again.
    let Some(_in_flight) = generation.successor.enter_pass(thread) else { return Step::Moved };
    let pass = Pass { clock, generation, keys, n, moved_is_final, thread };
    let fill = |entries: &mut [Entry]| {
        let mut i = 0;
        for &(key, rule) in rules.iter() {
            for quota in 0..quotas(rule) as u32 {
                entries[i] = Entry { key, rule, quota, ..Entry::default() };
                i += 1;
            }
        }
    };
    if count <= INLINE {
        let mut inline = [Entry::default(); INLINE];
        fill(&mut inline[..count]);
        pass.run(&mut inline[..count])
    } else {
        let mut entries = vec![Entry::default(); count];
        fill(&mut entries);
        pass.run(&mut entries)
    }
}

struct Pass<'a, C: Clock + 'static> {
    clock: &'a C,
    generation: &'a Generation<C>,
    keys: &'a [&'a str],
    n: u64,
    moved_is_final: bool,
    /// This thread's counter index.
    thread: usize,
}

impl<C: Clock + 'static> Pass<'_, C> {
    fn run(&self, entries: &mut [Entry]) -> Step {
        let now_ns = self.clock.now_ns();
        // The figures of an admission, gathered as the buckets are charged (the common case
        // then needs no second pass); `None` once a shadow rule refused.
        let mut admitted = Some(UNTRACKED);
        let mut enforced_refusal = false;
        let mut start = 0;
        // Charge rule by rule (the order keeps each rule's buckets together).
        while start < entries.len() && !enforced_refusal {
            let rule = entries[start].rule;
            let end = start + entries[start..].iter().take_while(|e| e.rule == rule).count();
            for i in start..end {
                match self.charge(&mut entries[i], now_ns) {
                    Charged::Yes => {
                        if let Some(figures) = &mut admitted {
                            self.add_figures(figures, &entries[i]);
                        }
                    }
                    Charged::Moved => {
                        self.refund_all(entries, now_ns);
                        return Step::Moved;
                    }
                    Charged::Refused => {
                        if self.generation.rules[rule as usize].rule.is_shadow() {
                            // The shadow rule would refuse: it keeps nothing, the request goes on.
                            self.refund_all(&mut entries[start..end], now_ns);
                            admitted = None;
                        } else {
                            enforced_refusal = true;
                        }
                        break;
                    }
                }
            }
            start = end;
        }
        if enforced_refusal {
            self.refund_all(entries, now_ns);
            // The buckets not reached, read for the report.
            for entry in entries.iter_mut() {
                if entry.mark == Mark::Untouched && self.look(entry, now_ns) {
                    return Step::Moved;
                }
            }
            self.judge_namings_together(entries);
        }
        self.count(entries, enforced_refusal);
        match admitted {
            Some(figures) if !enforced_refusal => Step::Decided(figures),
            _ => Step::Decided(self.report(entries, enforced_refusal)),
        }
    }

    fn table(&self, entry: &Entry) -> &Table<C> {
        &self.generation.rules[entry.rule as usize].tables[entry.quota as usize]
    }

    /// Charges one bucket.
    fn charge(&self, entry: &mut Entry, now_ns: u64) -> Charged {
        let generation = self.generation;
        let table = self.table(entry);
        let now = table.rate().units_at(now_ns);
        let key = self.keys[entry.key as usize];
        let (rule, quota) = (entry.rule as usize, entry.quota as usize);
        let chosen = Cell::new(None);
        let start = || first_state(&chosen, generation, key, rule, quota);
        let ask = Ask {
            now,
            now_ns,
            n: self.n,
            max_wait: 0,
            shared_overflow: true,
            start: &start,
            epoch: 0,
            rate: table.rate(),
        };
        match table.take(key, ask) {
            Ok(taken) if taken.state != MOVED || self.moved_is_final => {
                (entry.state, entry.now) = (taken.state, taken.now);
                entry.mark = match Where::of(&taken, self.n) {
                    Some(at) => Mark::Charged(at),
                    None => Mark::Clear { shared: false },
                };
                Charged::Yes
            }
            Err(refused) if refused.tat != MOVED || self.moved_is_final => {
                (entry.state, entry.now) = (refused.tat, refused.now);
                entry.wait = refused.wait.unwrap_or(NEVER);
                // Refused by the shared overflow bucket if in another scale (in the same one, the
                // figures are the same either way).
                entry.mark = Mark::Refused { shared: refused.scale != table.rate().scale() };
                Charged::Refused
            }
            Ok(_) | Err(_) => Charged::Moved,
        }
    }

    /// Reads a bucket without charging it (a key the table does not hold reads as empty);
    /// `true` if it was handed over to newer rules.
    fn look(&self, entry: &mut Entry, now_ns: u64) -> bool {
        let table = self.table(entry);
        let rate = table.rate();
        let key = self.keys[entry.key as usize];
        // A peek never gives a key a slot, so its first state is never asked for.
        let ask = Ask::plain(rate, 0, (now_ns, 0, 0), true);
        let now = ask.now;
        let tat = table.take(key, ask).map_or(now, |taken| taken.state);
        if tat == MOVED && !self.moved_is_final {
            return true;
        }
        (entry.state, entry.now) = (tat, now);
        entry.mark = Mark::Clear { shared: false };
        if let Err(why) = rate.admit(tat, now, self.n, 0) {
            entry.wait = why.wait().unwrap_or(NEVER);
            entry.mark = Mark::Refused { shared: false };
        }
        false
    }

    /// For a refusal's report: a key named `m` times asks `m * n` of each of its buckets, so each
    /// such bucket's wait is judged for that whole cost on the state before the request (the
    /// lowest state seen among its namings, all charges given back), not one naming at a time;
    /// the request's `retry_after` is then the wait after which the same request conforms.
    fn judge_namings_together(&self, entries: &mut [Entry]) {
        let same_bucket = |a: &Entry, b: &Entry| {
            a.rule == b.rule
                && a.quota == b.quota
                && !a.mark.shared()
                && !b.mark.shared()
                && self.keys[a.key as usize] == self.keys[b.key as usize]
        };
        for i in 0..entries.len() {
            let namings = entries.iter().filter(|e| same_bucket(&entries[i], e)).count() as u64;
            if namings < 2 {
                continue;
            }
            let before = entries.iter().filter(|e| same_bucket(&entries[i], e)).map(|e| e.state);
            let before = before.min().unwrap_or(entries[i].state);
            let rate = self.table(&entries[i]).rate();
            let entry = &mut entries[i];
            match rate.admit(before, entry.now, self.n.saturating_mul(namings), 0) {
                Ok(_) => entry.mark = Mark::Clear { shared: false },
                Err(why) => {
                    entry.wait = why.wait().unwrap_or(NEVER);
                    entry.mark = Mark::Refused { shared: false };
                }
            }
            entry.state = before;
        }
    }

    /// Gives back every charge made, last first, where it was made (see the module docs).
    fn refund_all(&self, entries: &mut [Entry], now_ns: u64) {
        for entry in entries.iter_mut().rev() {
            let Mark::Charged(at) = entry.mark else { continue };
            let table = self.table(entry);
            let key = self.keys[entry.key as usize];
            if !table.give_back(key, at, entry.state, self.n, now_ns) {
                // Sealed: the charge went with the level a reload handed over; give it back there.
                let shared = at == Where::Shared;
                let cost = table.rate_of(shared).cost(self.n);
                let bucket = (entry.rule as usize, entry.quota as usize);
                self.generation.give_back_handed_over(key, bucket, shared, cost);
            }
            entry.state =
                entry.state.saturating_sub(table.rate_of(at == Where::Shared).cost(self.n));
            entry.mark = Mark::Clear { shared: at == Where::Shared };
        }
    }

    /// Counts the request once for each rule it met.
    fn count(&self, entries: &[Entry], denied: bool) {
        let thread = self.thread;
        let mut start = 0;
        while start < entries.len() {
            let rule = entries[start].rule;
            let group = entries[start..].iter().take_while(|e| e.rule == rule);
            let refused = group.clone().any(|e| e.mark.refused());
            start += group.count();
            let compiled = &self.generation.rules[rule as usize];
            let count = match (refused, compiled.rule.is_shadow(), denied) {
                (true, true, _) => Count::DeniedInShadow,
                (true, false, _) => Count::Denied,
                (false, _, false) => Count::Admitted,
                (false, _, true) => continue,
            };
            compiled.counters.add_at(thread, count);
        }
    }

    /// The decision's figures over the buckets of the rules that decide (shadow rules that would
    /// refuse are left out).
    fn report(&self, entries: &[Entry], denied: bool) -> Figures {
        let mut figures = Figures { denied, remaining: u64::MAX, reset_ns: 0, retry_ns: 0 };
        for entry in entries {
            let compiled = &self.generation.rules[entry.rule as usize];
            let shadowed = compiled.rule.is_shadow()
                && entries.iter().any(|e| e.rule == entry.rule && e.mark.refused());
            if shadowed || entry.mark == Mark::Untouched {
                continue;
            }
            self.add_figures(&mut figures, entry);
        }
        figures
    }

    /// Folds one bucket's figures into `figures`: the smallest remaining, the largest reset and,
    /// for a refusal, the largest wait (never, if it never can conform).
    #[inline]
    fn add_figures(&self, figures: &mut Figures, entry: &Entry) {
        let table = self.table(entry);
        let scale = table.rate_of(entry.mark.shared()).scale();
        let backlog = entry.state.saturating_sub(entry.now);
        figures.remaining = figures.remaining.min(scale.remaining(backlog));
        figures.reset_ns = figures.reset_ns.max(scale.units_to_ns(backlog));
        if entry.mark.refused() && figures.retry_ns != NEVER {
            figures.retry_ns = match entry.wait {
                NEVER => NEVER,
                wait => figures.retry_ns.max(scale.units_to_ns(wait)),
            };
        }
    }
}

/// What charging one bucket did.
enum Charged {
    Yes,
    Refused,
    Moved,
}
