//! Limits by key path: [`Rules`] name the quotas of each path, and a [`RuleLimiter`] enforces them
//! with a bucket per full key, in bounded keyed tables, reloadable while it runs.
//!
//! * **Longest prefix wins.** A key is limited by the rule of its longest configured prefix cut
//!   at `/` (`"foo/bar/baz"`, then `"foo/bar"`, then `"foo"`), then by the default rule `""`;
//!   a key no rule matches is admitted and not tracked.
//! * **Several quotas, all or nothing.** A rule may hold several quotas (`10/s` and `1000/h`), and
//!   [`RuleLimiter::check_all_n`] checks several keys at once (tenant, user, global): the request
//!   conforms only if every bucket does, and then every bucket is charged, otherwise none is.
//! * **Live reload.** [`RuleLimiter::reload`] swaps the rules while checks go on; every tracked
//!   key keeps the units it could admit under the rule that now matches it (capped at the new
//!   burst: no reload hands out units).
//! * **Shadow mode, counters, introspection.** A rule in shadow mode decides and counts but never
//!   refuses; [`RuleLimiter::stats`] counts per rule; [`RuleLimiter::buckets`] lists levels.
//! * **Files and metrics.** With the feature `rules-file`, rules come from TOML
//!   (`Rules::from_toml`, `Rules::from_file`), and `RuleLimiter::watch_file` reloads a file when
//!   it changes; with the feature `metrics`, `RuleLimiter::record_metrics` exports the counts
//!   through the `metrics` facade.

mod all_or_nothing;
mod check;
mod counters;
mod current;
#[cfg(feature = "rules-file")]
mod file;
mod generation;
mod inspect;
#[cfg(feature = "metrics")]
mod metrics;
mod reload;
mod resolve;
mod rule;
mod successor;
#[cfg(feature = "rules-file")]
mod watch;

use crate::quota::Quota;
use std::collections::BTreeMap;

pub use check::RuleLimiter;
#[doc(hidden)]
pub use counters::BenchCounters;
#[cfg(feature = "rules-file")]
pub use file::RulesFileError;
pub use inspect::{BucketState, RuleStats};
pub use rule::{Rule, DEFAULT_RULE_CAPACITY};
#[cfg(feature = "rules-file")]
pub use watch::{RulesWatcher, WatchEvent};

/// `/`-separated key paths and their rules.
///
/// ```
/// use leakgate::Rules;
/// let mut rules = Rules::new();
/// rules.insert("rate_limit", ["1/s burst 10".parse()?]);
/// rules.insert("rate_limit/192.168.11.3", ["100/s burst 500".parse()?]);
/// rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]);
/// assert_eq!(rules.rule_for("rate_limit/10.0.0.1").unwrap().0, "rate_limit");
/// assert_eq!(rules.rule_for("rate_limit/192.168.11.3").unwrap().0, "rate_limit/192.168.11.3");
/// assert!(rules.rule_for("web/index").is_none());
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Every rule but the default one, by path.
    rules: BTreeMap<String, Rule>,
    /// The default rule, `""`. Kept out of the map: comparing a key with the empty path costs a
    /// `memcmp` of length 0 on a dangling address, which glibc answers in about 200 ns.
    default: Option<Rule>,
}

impl Rules {
    /// No rules: every key is admitted.
    ///
    /// ```
    /// assert!(leakgate::Rules::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Rules::default()
    }

    /// Sets the quotas of `path` (replacing any rule it had) and returns the rule, to set its
    /// options. The path `""` is the default rule.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("", ["100/s".parse()?]);
    /// rules.insert("api", ["10/s".parse()?]).shadow(true);
    /// assert_eq!(rules.len(), 2);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn insert(
        &mut self,
        path: impl Into<String>,
        quotas: impl IntoIterator<Item = Quota>,
    ) -> &mut Rule {
        self.insert_rule(path, Rule::new(quotas))
    }

    /// Sets the whole rule of `path`.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert_rule("api", leakgate::Rule::new(["1/s".parse()?]));
    /// assert!(rules.get("api").is_some());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn insert_rule(&mut self, path: impl Into<String>, rule: Rule) -> &mut Rule {
        let path = path.into();
        if path.is_empty() {
            return self.default.insert(rule);
        }
        let slot = self.rules.entry(path).or_insert_with(|| Rule::new([]));
        *slot = rule;
        slot
    }

    /// The rule configured at exactly `path`.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["1/s".parse()?]);
    /// assert!(rules.get("api/x").is_none());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn get(&self, path: &str) -> Option<&Rule> {
        if path.is_empty() {
            return self.default.as_ref();
        }
        self.rules.get(path)
    }

    /// Removes the rule at `path`.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["1/s".parse()?]);
    /// assert!(rules.remove("api").is_some());
    /// assert!(rules.is_empty());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn remove(&mut self, path: &str) -> Option<Rule> {
        if path.is_empty() {
            return self.default.take();
        }
        self.rules.remove(path)
    }

    /// The rule a key gets, with its path: the longest configured prefix cut at `/`, then `""`.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("", ["100/s".parse()?]);
    /// rules.insert("api", ["10/s".parse()?]);
    /// assert_eq!(rules.rule_for("api/alice").unwrap().0, "api");
    /// assert_eq!(rules.rule_for("apiary").unwrap().0, "");
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn rule_for(&self, key: &str) -> Option<(&str, &Rule)> {
        let mut cut = Some(key.len());
        while let Some(end) = cut.filter(|&end| end > 0) {
            if let Some((path, rule)) = self.rules.get_key_value(&key[..end]) {
                return Some((path.as_str(), rule));
            }
            cut = key[..end].rfind('/');
        }
        self.default.as_ref().map(|rule| ("", rule))
    }

    /// The paths tried for `key`, in order (the key, each prefix cut at `/` from the longest, then
    /// `""`), each with whether a rule is configured there; the first with one is the key's rule.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("a", ["1/s".parse()?]);
    /// let tried = rules.candidates("a/b/c");
    /// assert_eq!(tried, [("a/b/c", false), ("a/b", false), ("a", true), ("", false)]);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn candidates<'k>(&self, key: &'k str) -> Vec<(&'k str, bool)> {
        let mut tried = vec![(key, self.get(key).is_some())];
        let mut rest = key;
        while let Some(cut) = rest.rfind('/') {
            rest = &key[..cut];
            tried.push((rest, self.get(rest).is_some()));
        }
        if !key.is_empty() {
            tried.push(("", self.default.is_some()));
        }
        tried
    }

    /// Every rule, by path.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("b", ["1/s".parse()?]);
    /// rules.insert("a", ["2/s".parse()?]);
    /// let paths: Vec<_> = rules.iter().map(|(path, _)| path).collect();
    /// assert_eq!(paths, ["a", "b"]);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Rule)> {
        let default = self.default.iter().map(|rule| ("", rule));
        default.chain(self.rules.iter().map(|(path, rule)| (path.as_str(), rule)))
    }

    /// How many rules.
    ///
    /// ```
    /// assert_eq!(leakgate::Rules::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.rules.len() + usize::from(self.default.is_some())
    }

    /// Whether there are no rules.
    ///
    /// ```
    /// assert!(leakgate::Rules::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.default.is_none()
    }
}
