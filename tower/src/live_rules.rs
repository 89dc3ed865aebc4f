//! [`LiveRules`]: a [`RuleLimiter`] and what its rules announce in the response fields, reloaded
//! together.
//!
//! # Implementation details
//!
//! A decision of a [`RuleLimiter`] does not say which rule it was made under, so the layer keeps
//! its own copy of the rules in force, and for each rule the [`Policy`] it announces, made when
//! the rules are put in force (serialised once and interned, so a response only points to it:
//! kept for the life of the program while the interner's budget lasts, and past it shared by the
//! rules in force and freed with them, so reloads with ever new quotas keep memory bounded). A request finds its rule in that copy by the longest-prefix walk
//! the limiter does ([`Rules::rule_for`]), through one `arc-swap` load and a hash lookup per
//! distinct configured path length: no lock, no allocation.
//!
//! A reload puts the new copy in force just before the limiter's own rules (whose switch comes
//! after the new tables are made, and before the tracked keys are handed over, which may take
//! longer): a request decided while the two are swapped may announce the new rule's policy with
//! a decision made on the old one. Its `RateLimit` figures are always those of its decision.

use crate::gate::Announce;
use crate::headers::{policy_name, Policy};
use arc_swap::ArcSwap;
use leakgate::{Clock, Quota, Rule, RuleLimiter, Rules, TscClock};
use sfv::StringRef;
use std::collections::HashMap;
use std::fmt;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

/// The name of the default rule's items (its path, `""`, names nothing).
const DEFAULT_RULE_NAME: &str = "default";

/// A [`RuleLimiter`] whose rules a [`RateLimitLayer`](crate::RateLimitLayer) enforces and
/// announces: made from [`Rules`], reloaded with [`LiveRules::reload`], which puts new rules in
/// force for the limiter and for the response fields together. Share it with an `Arc` to reload
/// it while the layer serves.
///
/// How a rule is announced (see [`RateLimitLayer::rules`](crate::RateLimitLayer::rules)):
///
/// * `RateLimit-Policy` has one item per quota of the rule. A rule with one quota names its item
///   by the rule's path; a rule with several names them `path#0`, `path#1`, ... in the order of
///   its quotas. The default rule `""` is named `default`. Bytes of a path outside printable
///   ASCII, and `%`, are written `%XX` (a Structured Field String holds printable ASCII only).
/// * `RateLimit` has one item, named by the rule's path, with the request's decision: `r` is
///   its `remaining()` and `t` its `reset_after()` in whole seconds, rounded up. For a rule
///   with several quotas that is the combined figure leakgate's decision reports (the smallest
///   `remaining()` over the quotas, the largest `reset_after()`): the decision does not give
///   each quota's own.
/// * A key under no rule, or under a rule in shadow mode or without quotas, gets neither field:
///   nothing limits it as far as the client can tell.
///
/// ```
/// use leakgate::{ManualClock, Rules};
/// use leakgate_tower::{KeyTemplate, LiveRules, RateLimitLayer};
/// use std::sync::Arc;
///
/// let mut rules = Rules::new();
/// rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]);
/// let live = Arc::new(LiveRules::with_clock(rules, ManualClock::new()));
/// let layer = RateLimitLayer::rules(live.clone(), KeyTemplate::parse("api{route}/{ip}")?);
///
/// // Later, while the layer serves: every key keeps its level under the new limits.
/// let mut relaxed = Rules::new();
/// relaxed.insert("api", ["20/s".parse()?, "2000/h".parse()?]);
/// live.reload(relaxed);
/// assert_eq!(live.rules().get("api").unwrap().quotas()[0].to_string(), "20/s");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LiveRules<C: Clock = TscClock> {
    limiter: RuleLimiter<C>,
    in_force: ArcSwap<InForce>,
    /// Held by a reload from start to end, so the copy and the limiter's rules swap in the same
    /// order.
    reloading: Mutex<()>,
}

/// The rules in force as the layer reads them.
struct InForce {
    rules: Rules,
    /// What each rule but the default one announces, by path.
    announced: HashMap<Box<str>, Announce>,
    /// The distinct lengths of those paths, longest first.
    lengths: Box<[usize]>,
    /// What the default rule `""` announces, if there is one.
    default: Option<Announce>,
}

impl InForce {
    fn new(rules: Rules) -> Self {
        let mut announced: HashMap<Box<str>, Announce> = HashMap::new();
        let mut default = None;
        for (path, rule) in rules.iter() {
            if path.is_empty() {
                default = Some(announce(path, rule));
            } else {
                announced.insert(Box::from(path), announce(path, rule));
            }
        }
        let mut lengths: Vec<usize> = announced.keys().map(|path| path.len()).collect();
        lengths.sort_unstable_by(|a, b| b.cmp(a));
        lengths.dedup();
        InForce { rules, announced, lengths: lengths.into(), default }
    }

    /// What the rule of `key` announces: the rule of its longest configured prefix cut at `/`,
    /// else the default rule, as [`Rules::rule_for`] finds it. Only the configured lengths are
    /// tried (a prefix of length `l` is a candidate when the key is `l` bytes long or has a `/`
    /// at byte `l`), one hash lookup each, and the empty path is never compared: `rule_for`
    /// compares it in its map, and comparing an empty string (whose pointer dangles) costs a
    /// masked-load fault assist on some CPUs, about 270 ns a lookup measured here.
    #[inline]
    fn announce(&self, key: &str) -> Announce {
        for &length in self.lengths.iter() {
            let cut = key.as_bytes().get(length).is_none_or(|&byte| byte == b'/');
            if length <= key.len() && cut {
                // At a `/` or the end: a character boundary, so `get` finds the prefix.
                if let Some(found) = key.get(..length).and_then(|p| self.announced.get(p)) {
                    return found.clone();
                }
            }
        }
        self.default.clone().unwrap_or(Announce::Nothing)
    }
}

/// What a rule announces.
fn announce(path: &str, rule: &Rule) -> Announce {
    if rule.is_shadow() || rule.quotas().is_empty() {
        return Announce::Nothing;
    }
    Announce::Rule(rule_policy(path, rule.quotas()).interned())
}

/// The policy of the rule at `path`: one item per quota, as [`LiveRules`] describes.
fn rule_policy(path: &str, quotas: &[Quota]) -> Policy {
    let name = item_name(path);
    let items = match quotas {
        [quota] => vec![(name.clone(), *quota)],
        _ => quotas.iter().enumerate().map(|(i, quota)| (numbered(&name, i), *quota)).collect(),
    };
    Policy::with_items(name, items)
}

/// `name#i`: printable ASCII when `name` is.
fn numbered(name: &sfv::String, i: usize) -> sfv::String {
    policy_name(&format!("{}#{i}", name.as_str())).unwrap_or_else(|_| name.clone())
}

/// A rule path as a policy name: the default rule `default`, bytes outside printable ASCII and
/// `%` as `%XX`.
fn item_name(path: &str) -> sfv::String {
    let mut name = String::with_capacity(path.len());
    if path.is_empty() {
        name.push_str(DEFAULT_RULE_NAME);
    }
    for byte in path.bytes() {
        if (b' '..=b'~').contains(&byte) && byte != b'%' {
            name.push(char::from(byte));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(name, "%{byte:02X}");
        }
    }
    // Printable ASCII only, so always a String; the fallback is never taken.
    policy_name(&name).unwrap_or_else(|_| StringRef::constant(DEFAULT_RULE_NAME).to_owned())
}

impl LiveRules<TscClock> {
    /// A limiter enforcing `rules` on the default clock.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("", ["100/s".parse()?]);
    /// let live = leakgate_tower::LiveRules::new(rules);
    /// assert!(live.limiter().check("anything").is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(rules: Rules) -> Self {
        Self::with_clock(rules, TscClock::new())
    }
}

impl<C: Clock + 'static> LiveRules<C> {
    /// A limiter enforcing `rules`, reading time from `clock`.
    ///
    /// ```
    /// use leakgate::{ManualClock, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("api", ["1/s".parse()?]);
    /// let live = leakgate_tower::LiveRules::with_clock(rules, ManualClock::new());
    /// assert!(live.limiter().check("api/x").is_ok());
    /// assert!(live.limiter().check("api/x").is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_clock(rules: Rules, clock: C) -> Self {
        let in_force = ArcSwap::from_pointee(InForce::new(rules.clone()));
        LiveRules {
            limiter: RuleLimiter::with_clock(rules, clock),
            in_force,
            reloading: Mutex::new(()),
        }
    }

    /// Puts `rules` in force, for the limiter (as [`RuleLimiter::reload`]: every tracked key
    /// keeps its level under the rule that now matches it; checks never block) and for the
    /// fields the layer sends. Returns once every key has been handed over.
    ///
    /// Reload through this method, not through [`limiter`](LiveRules::limiter): the layer would
    /// go on announcing the rules it knows. With a rules file, read it with
    /// `Rules::from_file` (leakgate's feature `rules-file`) and pass the result here.
    ///
    /// ```
    /// use leakgate::{ManualClock, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let live = leakgate_tower::LiveRules::with_clock(rules, ManualClock::new());
    /// live.limiter().check_n("api/alice", 6)?;
    ///
    /// let mut stricter = Rules::new();
    /// stricter.insert("api", ["1/s burst 8".parse()?]);
    /// live.reload(stricter);
    /// assert_eq!(live.limiter().check("api/alice")?.remaining(), 3); // 4 available kept, 1 taken
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reload(&self, rules: Rules) {
        let _reloading = self.reloading.lock().unwrap_or_else(PoisonError::into_inner);
        self.in_force.store(Arc::new(InForce::new(rules.clone())));
        self.limiter.reload(rules);
    }

    /// The limiter, to check keys outside HTTP, or to read its [`stats`](RuleLimiter::stats)
    /// and [`buckets`](RuleLimiter::buckets). Reload with [`LiveRules::reload`].
    ///
    /// ```
    /// use leakgate::{ManualClock, Rules};
    /// let mut rules = Rules::new();
    /// rules.insert("jobs", ["2/s".parse()?]);
    /// let live = leakgate_tower::LiveRules::with_clock(rules, ManualClock::new());
    /// assert!(live.limiter().check_all_n(&["jobs/nightly", "jobs/hourly"], 1).is_ok());
    /// assert_eq!(live.limiter().stats()[0].admitted, 1);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn limiter(&self) -> &RuleLimiter<C> {
        &self.limiter
    }

    /// The rules in force.
    ///
    /// ```
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let live = leakgate_tower::LiveRules::new(rules.clone());
    /// assert_eq!(live.rules(), rules);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn rules(&self) -> Rules {
        self.in_force.load().rules.clone()
    }

    /// What a request whose key is `key` announces.
    #[inline]
    pub(crate) fn announce(&self, key: &str) -> Announce {
        self.in_force.load().announce(key)
    }

    /// Visits each rule in force (for the operator view).
    pub(crate) fn each_rule(&self, mut visit: impl FnMut(&str, &Rule)) {
        for (path, rule) in self.in_force.load().rules.iter() {
            visit(path, rule);
        }
    }
}

impl<C: Clock + 'static> fmt::Debug for LiveRules<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveRules").field("rules", &self.in_force.load().rules).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quota {
        s.parse().unwrap()
    }

    fn fields(path: &str, quotas: &[&str]) -> (String, String) {
        let quotas: Vec<Quota> = quotas.iter().map(|s| q(s)).collect();
        let policy = rule_policy(path, &quotas);
        let limit = policy.service_limit(3, std::time::Duration::from_millis(1500));
        (policy.field().to_str().unwrap().to_owned(), limit.to_str().unwrap().to_owned())
    }

    #[test]
    fn one_quota_is_named_by_the_rule_path() {
        let (policy, limit) = fields("api/search", &["10/s"]);
        assert_eq!(policy, r#""api/search";q=10;w=1"#);
        assert_eq!(limit, r#""api/search";r=3;t=1"#, "1.5 s, rounded up to 2, is more than w");
    }

    #[test]
    fn several_quotas_are_numbered_and_reported_together() {
        let (policy, limit) = fields("api", &["10/s", "1000/h", "2/s burst 3"]);
        assert_eq!(policy, r#""api#0";q=10;w=1, "api#1";q=1000;w=3600, "api#2";q=4;w=2"#);
        assert_eq!(limit, r#""api";r=3;t=2"#);
    }

    #[test]
    fn the_default_rule_is_named_default() {
        assert_eq!(fields("", &["100/min"]).0, r#""default";q=100;w=60"#);
        assert_eq!(fields("", &["1/s", "5/min"]).0, r#""default#0";q=1;w=1, "default#1";q=5;w=60"#);
    }

    #[test]
    fn paths_outside_printable_ascii_are_escaped() {
        assert_eq!(item_name("café/100%").as_str(), "caf%C3%A9/100%25");
        assert_eq!(item_name("tab\there \"q\"").as_str(), "tab%09here \"q\"");
        assert_eq!(fields("a\"b", &["1/s"]).0, r#""a\"b";q=1;w=1"#);
    }

    #[test]
    fn shadow_and_empty_rules_announce_nothing() {
        let mut shadow = Rule::new([q("1/s")]);
        shadow.shadow(true);
        assert!(matches!(announce("beta", &shadow), Announce::Nothing));
        assert!(matches!(announce("free", &Rule::new([])), Announce::Nothing));
        assert!(matches!(announce("api", &Rule::new([q("1/s")])), Announce::Rule(_)));
    }

    /// The rule each key announces is the one `Rules::rule_for` finds, over paths with shared
    /// prefixes, trailing and doubled slashes, a default rule or none, and keys of every shape.
    #[test]
    fn announcements_follow_rule_for() {
        let paths = ["", "a", "a/b", "a/b/c", "a/", "ab", "b//c", "x/y", "é/z", "a/bc"];
        let keys = [
            "", "a", "a/", "a//", "a/b", "a/b/", "a/b/c", "a/b/cd", "a/bc", "a/bcd", "ab", "ab/",
            "abc", "b", "b/", "b//c", "b//c/d", "b/c", "x/y/z", "x/yz", "é/z/1", "é", "/", "//a",
        ];
        for mask in 0u32..(1 << paths.len()) {
            let mut rules = Rules::new();
            for (i, path) in paths.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0) {
                rules.insert(*path, [Quota::per_second(i as u64 + 1).unwrap()]);
            }
            let in_force = InForce::new(rules.clone());
            for key in keys {
                let want = rules.rule_for(key).map(|(path, _)| item_name(path));
                let got = match in_force.announce(key) {
                    Announce::Rule(policy) => Some(policy.name().to_owned()),
                    Announce::Nothing => None,
                    Announce::Layer => unreachable!(),
                };
                let want = want.map(|name| name.as_str().to_owned());
                assert_eq!(got, want, "rules {:?}, key {key:?}", rules.iter().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn the_same_rule_announces_the_same_policy() {
        let a = rule_policy("api", &[q("10/s"), q("1/min")]).interned();
        let b = rule_policy("api", &[q("10/s"), q("1/min")]).interned();
        assert_eq!(a.field(), b.field());
        let c = rule_policy("api", &[q("10/s"), q("2/min")]).interned();
        assert_ne!(a.field(), c.field());
    }

    /// Live reloads with a new quota each time: past the interner's budget, each reload's
    /// policies are freed with the rules they announced, and the interner keeps no more than
    /// its limit.
    #[test]
    fn reloads_with_changing_quotas_keep_memory_bounded() {
        use crate::headers::PolicyRef;
        // A long-running program that has already filled the budget.
        crate::headers::fill_interner();
        let live = LiveRules::with_clock(Rules::new(), leakgate::ManualClock::new());
        let mut previous: Option<std::sync::Weak<Policy>> = None;
        for i in 1..=3_000u64 {
            let mut rules = Rules::new();
            rules.insert("api", [Quota::per_second(i).unwrap(), Quota::per_minute(i * 7).unwrap()]);
            live.reload(rules);
            let in_force = live.in_force.load();
            let Some(Announce::Rule(PolicyRef::Shared(policy))) = in_force.announced.get("api")
            else {
                panic!("reload {i}: a new policy past the budget is shared");
            };
            assert_eq!(
                policy.field_text(),
                format!(r#""api#0";q={i};w=1, "api#1";q={};w=60"#, i * 7)
            );
            if let Some(previous) = previous.replace(Arc::downgrade(policy)) {
                assert!(
                    previous.upgrade().is_none(),
                    "reload {i}: the last rules' policy lives on"
                );
            }
            assert!(crate::headers::interned_bytes() <= crate::headers::INTERN_LIMIT);
        }
        // Requests still get right fields from a shared policy.
        let Announce::Rule(policy) = live.announce("api/alice") else { panic!("no rule") };
        let limit = policy.service_limit(3, std::time::Duration::from_millis(1500));
        assert_eq!(limit.to_str().unwrap(), r#""api";r=3;t=2"#);
    }
}
