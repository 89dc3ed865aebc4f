//! A set of rules ready for checks: each rule's quotas compiled, the start of its Redis keys, and
//! its counters.

use crate::error::Error;
use crate::script::units::Rate;
use crate::stats::Counter;
use leakgate::{RuleStats, Rules};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The rules in force, compiled. Swapped whole by a reload: a check reads one set from start to
/// end.
pub(crate) struct CompiledRules {
    /// The rules as given.
    pub(crate) rules: Rules,
    /// Each rule by path.
    by_path: HashMap<Box<str>, CompiledRule>,
    /// The distinct lengths of the configured paths but `""`, longest first: the only places a
    /// key can be cut to find its rule (see [`rule_for`](Self::rule_for)).
    lengths: Vec<usize>,
    /// Every configured path and whether its rule limits (has quotas), sorted: two sets with the
    /// same shape send every key to the same path.
    shape: Vec<(Box<str>, bool)>,
}

/// One rule, compiled.
pub(crate) struct CompiledRule {
    /// Its quotas: a key under it has one bucket of each, in this order.
    pub(crate) rates: Vec<Rate>,
    pub(crate) shadow: bool,
    /// `prefix + "gcra1@" + path (escaped) + ":"`: the start of the Redis keys of its keys.
    key_head: Vec<u8>,
    /// Its counts, kept across reloads by path.
    pub(crate) counts: Arc<RuleCounts>,
}

/// What one rule's buckets decided, since the limiter was made (as [`RuleStats`] counts).
#[derive(Debug, Default)]
pub(crate) struct RuleCounts {
    pub(crate) admitted: Counter,
    pub(crate) denied: Counter,
    pub(crate) denied_in_shadow: Counter,
}

/// Every rule path's counts, kept across reloads.
pub(crate) type CountsByPath = Mutex<HashMap<Box<str>, Arc<RuleCounts>>>;

impl CompiledRules {
    /// Compiles `rules` for Redis keys starting with `prefix`, each rule with the counts kept for
    /// its path. A quota whose bucket the script cannot hold (a span beyond its range) is refused
    /// here, naming its rule, rather than on every check.
    pub(crate) fn new(
        rules: Rules,
        prefix: &[u8],
        counts: &CountsByPath,
    ) -> Result<CompiledRules, Error> {
        let mut counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut by_path = HashMap::with_capacity(rules.len());
        for (path, rule) in rules.iter() {
            let rates: Vec<Rate> = rule.quotas().iter().map(|&q| Rate::new(q)).collect();
            for rate in &rates {
                if rate.split(rate.tau()).is_none() {
                    let quota = rate.quota();
                    return Err(Error::Config(format!(
                        "rule {path:?}: the quota {quota} spans more than Redis can hold"
                    )));
                }
            }
            let mut key_head = prefix.to_vec();
            key_head.extend_from_slice(b"gcra1@");
            escape_into(&mut key_head, path);
            key_head.push(b':');
            let compiled = CompiledRule {
                rates,
                shadow: rule.is_shadow(),
                key_head,
                counts: counts.entry(path.into()).or_default().clone(),
            };
            by_path.insert(path.into(), compiled);
        }
        let mut lengths: Vec<usize> = rules.iter().map(|(path, _)| path.len()).collect();
        lengths.retain(|&len| len > 0);
        lengths.sort_unstable_by(|a, b| b.cmp(a));
        lengths.dedup();
        let mut shape: Vec<(Box<str>, bool)> =
            rules.iter().map(|(path, rule)| (path.into(), !rule.quotas().is_empty())).collect();
        shape.sort_unstable();
        Ok(CompiledRules { rules, by_path, lengths, shape })
    }

    /// The rule that limits `key`, if any does: its longest configured prefix cut at `/` (as
    /// [`Rules::rule_for`]), then `""`; a rule with no quotas limits nothing. Only the configured
    /// lengths are tried (a length `l` where the key ends or has a `/`), one hash lookup each, so
    /// a key of many segments costs no more than one of a few.
    pub(crate) fn rule_for(&self, key: &str) -> Option<&CompiledRule> {
        let bytes = key.as_bytes();
        let cut =
            self.lengths.iter().filter(|&&len| len == key.len() || bytes.get(len) == Some(&b'/'));
        // A cut at the key's end or before a `/` (ASCII, never inside a character) is a boundary.
        let found = cut.filter_map(|&len| self.by_path.get(key.get(..len)?)).next();
        found.or_else(|| self.by_path.get("")).filter(|rule| !rule.rates.is_empty())
    }

    /// Whether every key has the same rule path under `other` as under these rules.
    pub(crate) fn routes_alike(&self, other: &CompiledRules) -> bool {
        self.shape == other.shape
    }

    /// The counts of every rule in force, by path.
    pub(crate) fn stats(&self) -> Vec<RuleStats> {
        let counted =
            self.rules.iter().filter_map(|(path, _)| Some((path, self.by_path.get(path)?)));
        counted
            .map(|(path, rule)| RuleStats {
                rule: path.to_string(),
                admitted: rule.counts.admitted.get(),
                denied: rule.counts.denied.get(),
                denied_in_shadow: rule.counts.denied_in_shadow.get(),
            })
            .collect()
    }
}

impl CompiledRule {
    /// Whether `other` has this rule's path (and so its keys' Redis keys).
    pub(crate) fn same_path(&self, other: &CompiledRule) -> bool {
        self.key_head == other.key_head
    }

    /// The Redis key that holds `key`'s buckets under this rule.
    pub(crate) fn redis_key(&self, key: &str) -> Vec<u8> {
        let mut full = Vec::with_capacity(self.key_head.len() + key.len());
        full.extend_from_slice(&self.key_head);
        full.extend_from_slice(key.as_bytes());
        full
    }
}

/// Appends `path` with `%`, `{`, `}` and `:` written as `%25`, `%7B`, `%7D` and `%3A`: so the
/// first `:` after the head ends the path (two rules never share a Redis key), and a Redis
/// Cluster hash tag can only come from the key itself.
fn escape_into(out: &mut Vec<u8>, path: &str) {
    for byte in path.bytes() {
        match byte {
            b'%' => out.extend_from_slice(b"%25"),
            b'{' => out.extend_from_slice(b"%7B"),
            b'}' => out.extend_from_slice(b"%7D"),
            b':' => out.extend_from_slice(b"%3A"),
            other => out.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(rules: Rules) -> CompiledRules {
        CompiledRules::new(rules, b"p:", &CountsByPath::default()).unwrap()
    }

    #[test]
    fn keys_name_their_rule_and_never_meet_another_rules() {
        let mut rules = Rules::new();
        rules.insert("a", ["1/s".parse().unwrap()]);
        rules.insert("a:b", ["1/s".parse().unwrap()]);
        rules.insert("{x}", ["1/s".parse().unwrap()]);
        let c = compiled(rules);
        assert_eq!(c.rule_for("a/1").unwrap().redis_key("a/1"), b"p:gcra1@a:a/1");
        assert_eq!(c.rule_for("a:b").unwrap().redis_key("a:b"), b"p:gcra1@a%3Ab:a:b");
        // Without the escape, rule "a" on key "b:c" would be "p:gcra1@a:b:c" too.
        assert_ne!(c.rule_for("a:b").unwrap().redis_key("c"), b"p:gcra1@a:b:c");
        // A brace in a rule's path never becomes the hash tag: only the key's own can.
        let tagged = c.rule_for("{x}/{t}/1").unwrap().redis_key("{x}/{t}/1");
        assert_eq!(tagged, b"p:gcra1@%7Bx%7D:{x}/{t}/1");
    }

    #[test]
    fn the_longest_prefix_cut_at_a_slash_wins_as_in_rules() {
        let mut rules = Rules::new();
        for path in ["", "a", "a/b", "a/b/c", "x//y", "é", "rate_limit/192.168.11.3"] {
            rules.insert(path, ["1/s".parse().unwrap()]);
        }
        let c = compiled(rules.clone());
        let keys = [
            "a",
            "a/b",
            "a/bc",
            "a/b/c/d",
            "a/b/cd",
            "ab",
            "",
            "x//y/z",
            "x/",
            "é/ü",
            "éa",
            "rate_limit/192.168.11.30",
            "rate_limit/192.168.11.3/x",
            "/a",
            "a/",
        ];
        for key in keys {
            let expected = rules.rule_for(key).map(|(path, _)| path).unwrap();
            let head = c.rule_for(key).unwrap().redis_key("");
            let mut expected_head = b"p:gcra1@".to_vec();
            escape_into(&mut expected_head, expected);
            expected_head.push(b':');
            assert_eq!(head, expected_head, "{key:?}");
        }
    }

    #[test]
    fn a_rule_without_quotas_limits_nothing() {
        let mut rules = Rules::new();
        rules.insert("", ["1/s".parse().unwrap()]);
        rules.insert("free", []);
        let c = compiled(rules);
        assert!(c.rule_for("free/x").is_none());
        assert_eq!(c.rule_for("paid/x").unwrap().redis_key("paid/x"), b"p:gcra1@:paid/x");
    }

    #[test]
    fn counts_are_kept_by_path_across_compilations() {
        let counts = CountsByPath::default();
        let mut rules = Rules::new();
        rules.insert("api", ["1/s".parse().unwrap()]);
        let first = CompiledRules::new(rules.clone(), b"", &counts).unwrap();
        first.rule_for("api/x").unwrap().counts.admitted.inc();
        rules.insert("api", ["5/s".parse().unwrap()]);
        let second = CompiledRules::new(rules, b"", &counts).unwrap();
        assert_eq!(second.stats()[0].admitted, 1);
    }
}
