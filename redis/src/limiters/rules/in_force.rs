//! The rules in force, and the few earlier ones that sent some key to another rule path: where a
//! key's buckets may still be after a reload moved it (a new override, a rule removed).
//!
//! A key's buckets live under its rule's path (`compiled`), so a reload that gives a key another
//! path would leave its buckets behind. Each check therefore also names the key's Redis key under
//! the path each earlier set gave it, when that differs; the script takes what it finds there in
//! and leaves a marked copy (see `gcra_general.lua`). Only sets that route some key differently
//! from the rules in force are kept (at most [`MAX_EARLIER`], the latest first): a reload that
//! changes quotas only adds none, and a check of a key whose path never changed names no more
//! keys.

use super::compiled::{CompiledRule, CompiledRules};
use crate::script::Origin;
use std::sync::Arc;

/// The most earlier rule sets kept: a key moved by more reloads than this before its next check
/// starts afresh under its new path.
pub(crate) const MAX_EARLIER: usize = 4;

/// The rules in force and the earlier sets that route keys differently. Swapped whole by a
/// reload: a check reads one from start to end.
pub(crate) struct InForce {
    /// The rules in force.
    pub(crate) now: Arc<CompiledRules>,
    /// Earlier sets, latest first, each routing some key to another path than `now` does and
    /// than every later one kept.
    earlier: Vec<Arc<CompiledRules>>,
}

impl InForce {
    /// The first rules of a limiter.
    pub(crate) fn new(rules: CompiledRules) -> InForce {
        InForce { now: Arc::new(rules), earlier: Vec::new() }
    }

    /// The rules in force after a reload to `next`: these become the latest earlier set, unless
    /// they route every key as `next` does (or as a later set kept does).
    pub(crate) fn reloaded(&self, next: CompiledRules) -> InForce {
        let mut earlier: Vec<Arc<CompiledRules>> = Vec::with_capacity(MAX_EARLIER);
        for set in std::iter::once(&self.now).chain(&self.earlier) {
            let routed_alike = |other: &Arc<CompiledRules>| other.routes_alike(set);
            if earlier.len() < MAX_EARLIER
                && !next.routes_alike(set)
                && !earlier.iter().any(routed_alike)
            {
                earlier.push(Arc::clone(set));
            }
        }
        InForce { now: Arc::new(next), earlier }
    }

    /// `key`'s Redis keys under the paths earlier sets gave it that differ from `rule`'s (its rule
    /// now), each once, with the number of quotas of its rule there.
    pub(crate) fn origins(&self, key: &str, rule: &CompiledRule) -> Vec<Origin> {
        let mut origins: Vec<(Origin, &CompiledRule)> = Vec::new();
        for set in &self.earlier {
            let Some(then) = set.rule_for(key) else { continue };
            if then.same_path(rule) || origins.iter().any(|(_, seen)| then.same_path(seen)) {
                continue;
            }
            origins.push((Origin { name: then.redis_key(key), quotas: then.rates.len() }, then));
        }
        origins.into_iter().map(|(origin, _)| origin).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiters::rules::compiled::CountsByPath;
    use leakgate::Rules;

    fn compiled(paths: &[&str]) -> CompiledRules {
        let mut rules = Rules::new();
        for path in paths {
            rules.insert(*path, ["1/s".parse().unwrap()]);
        }
        CompiledRules::new(rules, b"p:", &CountsByPath::default()).unwrap()
    }

    fn origins(in_force: &InForce, key: &str) -> Vec<Vec<u8>> {
        let rule = in_force.now.rule_for(key).unwrap();
        in_force.origins(key, rule).into_iter().map(|o| o.name).collect()
    }

    #[test]
    fn a_key_moved_by_reloads_is_looked_for_under_each_earlier_path() {
        let first = InForce::new(compiled(&["ip"]));
        assert!(origins(&first, "ip/1").is_empty());
        let second = first.reloaded(compiled(&["ip", "ip/1"]));
        assert_eq!(origins(&second, "ip/1"), [b"p:gcra1@ip:ip/1".to_vec()]);
        assert!(origins(&second, "ip/2").is_empty(), "its path never changed");
        let third = second.reloaded(compiled(&["", "ip/1"]));
        assert_eq!(
            origins(&third, "ip/2"),
            [b"p:gcra1@ip:ip/2".to_vec()],
            "one key per path, the latest set first"
        );
        // Not checked under the second set: its buckets may still be under "ip".
        assert_eq!(origins(&third, "ip/1"), [b"p:gcra1@ip:ip/1".to_vec()]);
        let back = third.reloaded(compiled(&["ip"]));
        assert_eq!(origins(&back, "ip/1"), [b"p:gcra1@ip/1:ip/1".to_vec()]);
        assert_eq!(back.earlier.len(), 2, "the first set routes as the rules in force");
    }

    #[test]
    fn reloads_that_route_keys_alike_keep_no_earlier_set() {
        let first = InForce::new(compiled(&["ip"]));
        let mut rules = Rules::new();
        rules.insert("ip", ["5/s burst 2".parse().unwrap()]);
        let second =
            first.reloaded(CompiledRules::new(rules, b"p:", &CountsByPath::default()).unwrap());
        assert!(second.earlier.is_empty());
        let mut sets = InForce::new(compiled(&["a"]));
        for round in 0..10u32 {
            let paths: &[&str] = if round.is_multiple_of(2) { &["a", "a/x"] } else { &["a"] };
            sets = sets.reloaded(compiled(paths));
        }
        assert_eq!(sets.earlier.len(), 1, "a toggle keeps one set, not one per reload");
        for n in 0..10 {
            sets = sets.reloaded(compiled(&["a", &format!("a/{n}")]));
        }
        assert_eq!(sets.earlier.len(), MAX_EARLIER);
    }
}
