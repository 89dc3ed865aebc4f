//! [`AsyncRedisRuleLimiter`]: rules by key path, kept in Redis, one script call per check.

use super::compiled::{CompiledRule, CompiledRules, CountsByPath};
use super::fallback::RulesFallback;
use super::in_force::InForce;
use super::outcome;
use crate::connection::builder::Builder;
use crate::connection::client::Client;
use crate::connection::decide::decide;
use crate::error::Error;
use crate::script::{Call, CallKey, Keep};
use crate::stats::Stats;
use arc_swap::ArcSwap;
use leakgate::{Admitted, Denied, RuleStats, Rules};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Limits by key path shared through Redis, for async code (tokio): each key is limited by the
/// rule of its longest configured prefix (see [`leakgate::Rules`]), with the meaning of
/// [`leakgate::RuleLimiter`] across every process that connects with the same rules and prefix.
///
/// Each check is one round trip (none for a key no rule limits) and returns within the
/// deadline, Redis or not; calls from many tasks are pipelined over one connection. Cloning is
/// cheap and clones share everything. See the [crate docs](crate#rules-by-key-path) for keys,
/// shadow rules, reloads and Redis Cluster.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use leakgate::Rules;
/// use leakgate_redis::AsyncRedisRuleLimiter;
/// let mut rules = Rules::new();
/// rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]);
/// let lim = AsyncRedisRuleLimiter::connect("redis://127.0.0.1:6379/", rules).await?;
/// if lim.check("api/alice").await.is_ok() { /* serve */ }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncRedisRuleLimiter {
    shared: Arc<Shared>,
}

/// Everything a limiter's handles share.
struct Shared {
    client: Client,
    /// The rules in force (and the earlier sets that routed keys elsewhere), swapped whole by a
    /// reload.
    current: ArcSwap<InForce>,
    /// Each rule path's counts, kept across reloads.
    counts: CountsByPath,
    fallback: RulesFallback,
    /// Held by a reload from start to end: reloads run one at a time.
    reloading: Mutex<()>,
}

impl AsyncRedisRuleLimiter {
    /// Connects with `rules` and every default (see [`Builder`]), waiting for Redis at most a
    /// second; an unreachable Redis is not an error (see [`Builder::connect`]).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("", ["100/s".parse()?]);
    /// let url = "redis://127.0.0.1/";
    /// let lim = leakgate_redis::AsyncRedisRuleLimiter::connect(url, rules).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str, rules: Rules) -> Result<AsyncRedisRuleLimiter, Error> {
        Builder::new(url).connect_rules_async(rules).await
    }

    /// Connects to a Redis Cluster through `seeds` (any of its nodes), enforcing `rules` with
    /// every default: [`Builder::cluster`] then [`Builder::connect_rules_async`].
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let seeds = ["redis://127.0.0.1:7000/"];
    /// let lim = leakgate_redis::AsyncRedisRuleLimiter::connect_cluster(&seeds, rules).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_cluster(
        seeds: impl IntoIterator<Item = impl AsRef<str>>,
        rules: Rules,
    ) -> Result<AsyncRedisRuleLimiter, Error> {
        Builder::cluster(seeds).connect_rules_async(rules).await
    }

    /// A builder, for other settings; finish it with
    /// [`connect_rules_async`](Builder::connect_rules_async).
    ///
    /// ```
    /// let b = leakgate_redis::AsyncRedisRuleLimiter::builder("redis://127.0.0.1/");
    /// # let _ = b;
    /// ```
    pub fn builder(url: &str) -> Builder {
        Builder::new(url)
    }

    pub(crate) async fn from_builder(
        b: Builder,
        rules: Rules,
    ) -> Result<AsyncRedisRuleLimiter, Error> {
        if !b.quotas.is_empty() {
            let why = "a rules limiter takes its quotas from its rules: leave Builder::quota out";
            return Err(Error::Config(why.into()));
        }
        if b.leases.is_some() {
            return Err(Error::Config("leases are not available with rules".into()));
        }
        let client = Client::connect(&b).await?;
        let counts = CountsByPath::default();
        let fallback = RulesFallback::new(b.policy, &rules, &client.local_clock)?;
        let compiled = CompiledRules::new(rules, &client.prefix, &counts)?;
        let shared = Shared {
            client,
            current: ArcSwap::from_pointee(InForce::new(compiled)),
            counts,
            fallback,
            reloading: Mutex::new(()),
        };
        Ok(AsyncRedisRuleLimiter { shared: Arc::new(shared) })
    }

    /// Checks one unit for `key`: `check_n(key, 1)`.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// if lim.check("api/alice").await.is_ok() { /* serve */ }
    /// # }
    /// ```
    pub async fn check(&self, key: &str) -> Result<Admitted, Denied> {
        self.check_n(key, 1).await
    }

    /// Checks a request of cost `n` for `key` against every quota of its rule, all or nothing,
    /// with the meaning of [`leakgate::RuleLimiter::check_n`] across every process sharing the
    /// rules. A key no rule limits is admitted with `remaining() == u64::MAX` and
    /// `reset_after() == 0`, without a round trip. When Redis cannot decide, the failure policy
    /// answers.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// let ok = lim.check_n("uploads/bob", 5).await;
    /// # let _ = ok; }
    /// ```
    pub async fn check_n(&self, key: &str, n: u64) -> Result<Admitted, Denied> {
        self.check_all_n(&[key], n).await
    }

    /// What `key`'s buckets would say to one unit now, changing nothing: `check_n(key, 0)`.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// let left = lim.peek("api/alice").await.map(|ok| ok.remaining());
    /// # let _ = left; }
    /// ```
    pub async fn peek(&self, key: &str) -> Result<Admitted, Denied> {
        self.check_n(key, 0).await
    }

    /// Checks a request of cost `n` for every key at once, each under its own rule, in one
    /// round trip: it conforms only if every bucket of every enforcing rule conforms, and then
    /// every bucket is charged (a shadow rule's only if all of its conform); otherwise none is.
    /// A key named twice is charged twice; keys with no rule take nothing. With Redis Cluster
    /// every key must hash to one slot: see the [crate docs](crate#rules-by-key-path).
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// let ok = lim.check_all_n(&["tenant/{acme}", "user/{acme}/42"], 1).await;
    /// # let _ = ok; }
    /// ```
    pub async fn check_all_n(&self, keys: &[&str], n: u64) -> Result<Admitted, Denied> {
        self.check_all_n_explained(keys, n).await.0
    }

    /// [`check_all_n`](Self::check_all_n), with the reason Redis gave no decision when the
    /// failure policy answered instead (`None` when Redis decided, or when no key has a rule):
    /// for callers that count failures by rule, as `leakgate serve` does.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// let (decision, failure) = lim.check_all_n_explained(&["api/{acme}"], 1).await;
    /// if let Some(e) = failure {
    ///     eprintln!("the failure policy answered ({e}): {}", decision.is_ok());
    /// }
    /// # }
    /// ```
    pub async fn check_all_n_explained(
        &self,
        keys: &[&str],
        n: u64,
    ) -> (Result<Admitted, Denied>, Option<Error>) {
        let c = &self.shared.client;
        match self.decide(keys, n).await {
            Ok(decision) => (decision, None),
            // A request that cannot be expressed is refused whatever the policy.
            Err(e @ Error::InvalidRequest(_)) => {
                (Err(Denied::new(0, Duration::ZERO, None)), Some(e))
            }
            Err(e) => (self.shared.fallback.decide(keys, n, c.retry_hint(), &c.stats), Some(e)),
        }
    }

    /// The decision of `check_n` without the failure policy: an error when Redis gave none.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// match lim.try_check_n("api/alice", 1).await {
    ///     Ok(decision) => println!("Redis says {:?}", decision.is_ok()),
    ///     Err(e) => println!("no decision: {e}"),
    /// }
    /// # }
    /// ```
    pub async fn try_check_n(&self, key: &str, n: u64) -> Result<Result<Admitted, Denied>, Error> {
        self.decide(&[key], n).await
    }

    /// The decision of `check_all_n` without the failure policy: an error when Redis gave none.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// let decided = lim.try_check_all_n(&["tenant/{acme}", "user/{acme}/42"], 1).await;
    /// # let _ = decided; }
    /// ```
    pub async fn try_check_all_n(
        &self,
        keys: &[&str],
        n: u64,
    ) -> Result<Result<Admitted, Denied>, Error> {
        self.decide(keys, n).await
    }

    /// Puts `rules` in force at once: each later check is decided wholly on them, checks in
    /// flight on the rules they started with. Nothing in Redis changes here; each key's buckets
    /// (under its rule's path, or an earlier one) are carried over to its new quotas at its next
    /// check, keeping what the key could admit (see the
    /// [crate docs](crate#reloads-and-levels)). With [`FailurePolicy::Local`](crate::FailurePolicy)
    /// the local rules are reloaded too. A rule the limiter cannot enforce (a quota beyond the
    /// script's range, or one the local policy cannot divide) is an error, and the rules in
    /// force stay.
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut stricter = leakgate::Rules::new();
    /// stricter.insert("api", ["1/s burst 5".parse()?]);
    /// lim.reload(stricter)?;
    /// # Ok(()) }
    /// ```
    pub fn reload(&self, rules: Rules) -> Result<(), Error> {
        let s = &self.shared;
        let _reloading = s.reloading.lock().unwrap_or_else(PoisonError::into_inner);
        let local = s.fallback.prepare(&rules)?;
        let compiled = CompiledRules::new(rules, &s.client.prefix, &s.counts)?;
        // Loaded under `reloading`: no other reload stores in between.
        let next = s.current.load().reloaded(compiled);
        s.current.store(Arc::new(next));
        s.fallback.reload(local);
        Ok(())
    }

    /// The rules in force.
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// println!("{} rules", lim.rules().len());
    /// # }
    /// ```
    pub fn rules(&self) -> Rules {
        self.shared.current.load().now.rules.clone()
    }

    /// Each rule's counts (as [`leakgate::RuleLimiter::stats`]): requests its buckets admitted,
    /// requests it refused, and requests it would have refused in shadow mode. Only decisions
    /// made by Redis are counted here; [`stats`](Self::stats) counts the failure policy's.
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// for rule in lim.rule_stats() {
    ///     println!("{}: {} admitted, {} denied", rule.rule, rule.admitted, rule.denied);
    /// }
    /// # }
    /// ```
    pub fn rule_stats(&self) -> Vec<RuleStats> {
        self.shared.current.load().now.stats()
    }

    /// The limiter's counters (round trips, failures, policy answers, untracked keys).
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// println!("{} round trips", lim.stats().round_trips);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.client.stats.snapshot()
    }

    /// The Redis key that holds `key`'s buckets under the rules in force, or `None` when no
    /// rule limits `key`.
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisRuleLimiter) {
    /// assert!(lim.redis_key("api/alice").unwrap().ends_with(b":api/alice"));
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> Option<Vec<u8>> {
        self.shared.current.load().now.rule_for(key).map(|rule| rule.redis_key(key))
    }

    /// One script call deciding cost `n` on `keys` under the rules in force now.
    async fn decide(&self, keys: &[&str], n: u64) -> Result<Result<Admitted, Denied>, Error> {
        let c = &self.shared.client;
        if keys.is_empty() {
            return Err(Error::InvalidRequest("a request needs at least one key"));
        }
        // One set of rules for the whole check, however long Redis takes.
        let in_force = self.shared.current.load_full();
        let compiled = &in_force.now;
        let mut call_keys: Vec<CallKey<'_>> = Vec::with_capacity(keys.len());
        let mut rules: Vec<&CompiledRule> = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(rule) = compiled.rule_for(key) else { continue };
            let name = rule.redis_key(key);
            if let Some(named) = call_keys.iter_mut().find(|k| k.name == name) {
                named.times_named += 1;
                continue;
            }
            // Every key of a shadow rule in one group: the rule is charged or refuses as one.
            let group = if rule.shadow { shadow_group(&rules, rule) } else { 0 };
            let origins = in_force.origins(key, rule);
            call_keys.push(CallKey { name, rates: &rule.rates, times_named: 1, group, origins });
            rules.push(rule);
        }
        if call_keys.is_empty() {
            c.stats.untracked.inc();
            return Ok(Ok(Admitted::new(u64::MAX, Duration::ZERO)));
        }
        let call = Call {
            keys: &call_keys,
            n,
            now_ns: c.caller_now(),
            max_wait_ns: 0,
            lease_want: 0,
            known_tat: &[],
            write: n > 0,
            expiry_slack_ms: c.expiry_slack_ms,
            keep: Keep::Rules,
        };
        let reply = decide(c, &call, c.deadline).await?;
        let decision = outcome::decide(&call_keys, &rules, n, &reply);
        match &decision {
            Ok(_) => c.stats.redis_admitted.inc(),
            Err(_) => c.stats.redis_denied.inc(),
        }
        Ok(decision)
    }
}

/// The shadow group of `rule` in a call whose keys so far are under `rules`: the group of an
/// earlier key of the same rule, or a new one.
fn shadow_group(rules: &[&CompiledRule], rule: &CompiledRule) -> u32 {
    let earlier = rules.iter().position(|r| std::ptr::eq(*r, rule));
    let index = earlier.unwrap_or(rules.len());
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

impl AsyncRedisRuleLimiter {
    /// Writes the limiter as `name { rules: [paths], .. }` (the blocking one uses it too).
    pub(super) fn fmt_as(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules = self.rules();
        let paths: Vec<&str> = rules.iter().map(|(path, _)| path).collect();
        f.debug_struct(name).field("rules", &paths).finish_non_exhaustive()
    }
}

impl fmt::Debug for AsyncRedisRuleLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_as("AsyncRedisRuleLimiter", f)
    }
}

impl Builder {
    /// Connects an [`AsyncRedisRuleLimiter`] enforcing `rules`, from async code.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let lim = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .connect_rules_async(rules)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_rules_async(self, rules: Rules) -> Result<AsyncRedisRuleLimiter, Error> {
        AsyncRedisRuleLimiter::from_builder(self, rules).await
    }
}
