//! [`RedisRuleLimiter`]: the blocking face of [`AsyncRedisRuleLimiter`], on a runtime of its own.

use super::limiter::AsyncRedisRuleLimiter;
use crate::connection::builder::Builder;
use crate::connection::runtime::OwnRuntime;
use crate::error::Error;
use crate::stats::Stats;
use leakgate::{Admitted, Denied, RuleStats, Rules};
use std::fmt;

/// Limits by key path shared through Redis, for code that is not async: the same rules (a
/// [`leakgate::Rules`], or a rules file) that drive an in-process [`leakgate::RuleLimiter`], with
/// its meaning across every process that connects with them.
///
/// Each key is limited by the rule of its longest configured prefix cut at `/`; its quotas are
/// charged all or nothing in one round trip; a key no rule limits is admitted untracked; a rule
/// in shadow mode decides and counts but admits. Each call blocks for one round trip at most and
/// never longer than the deadline: then the [`FailurePolicy`](crate::FailurePolicy) answers.
/// `Send + Sync`: share it by reference or `Arc`. See the
/// [crate docs](crate#rules-by-key-path) for keys, reloads and Redis Cluster.
///
/// ```no_run
/// use leakgate::Rules;
/// use leakgate_redis::RedisRuleLimiter;
/// let mut rules = Rules::new();
/// rules.insert("rate_limit", ["1/s burst 10".parse()?]);
/// rules.insert("rate_limit/192.168.11.3", ["100/s burst 500".parse()?]);
/// let lim = RedisRuleLimiter::connect("redis://127.0.0.1:6379/", rules)?;
/// assert!(lim.check("rate_limit/10.0.0.1").is_ok());
/// assert_eq!(lim.check("web/index").unwrap().remaining(), u64::MAX); // no rule: not tracked
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisRuleLimiter {
    /// Shut down first (fields drop in declaration order), then the connection goes.
    runtime: OwnRuntime,
    limiter: AsyncRedisRuleLimiter,
}

impl RedisRuleLimiter {
    /// Connects with `rules` and every default (see [`Builder`]), blocking until Redis answers
    /// or a second has passed; an unreachable Redis is not an error (see
    /// [`Builder::connect`]).
    ///
    /// ```no_run
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]);
    /// let lim = leakgate_redis::RedisRuleLimiter::connect("redis://127.0.0.1/", rules)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect(url: &str, rules: Rules) -> Result<RedisRuleLimiter, Error> {
        Builder::new(url).connect_rules(rules)
    }

    /// Connects to a Redis Cluster through `seeds` (any of its nodes), enforcing `rules` with
    /// every default: [`Builder::cluster`] then [`Builder::connect_rules`].
    ///
    /// ```no_run
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let seeds = ["redis://127.0.0.1:7000/"];
    /// let lim = leakgate_redis::RedisRuleLimiter::connect_cluster(&seeds, rules)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect_cluster(
        seeds: impl IntoIterator<Item = impl AsRef<str>>,
        rules: Rules,
    ) -> Result<RedisRuleLimiter, Error> {
        Builder::cluster(seeds).connect_rules(rules)
    }

    /// A builder, for other settings; finish it with [`connect_rules`](Builder::connect_rules).
    ///
    /// ```
    /// let b = leakgate_redis::RedisRuleLimiter::builder("redis://127.0.0.1/");
    /// # let _ = b;
    /// ```
    pub fn builder(url: &str) -> Builder {
        Builder::new(url)
    }

    pub(crate) fn from_builder(b: Builder, rules: Rules) -> Result<RedisRuleLimiter, Error> {
        let runtime = OwnRuntime::start()?;
        let limiter = runtime.run(AsyncRedisRuleLimiter::from_builder(b, rules))?;
        Ok(RedisRuleLimiter { runtime, limiter })
    }

    /// Checks one unit for `key`: `check_n(key, 1)`.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// if lim.check("rate_limit/10.0.0.1").is_ok() { /* serve */ }
    /// # }
    /// ```
    pub fn check(&self, key: &str) -> Result<Admitted, Denied> {
        self.check_n(key, 1)
    }

    /// Checks a request of cost `n` for `key` (see [`AsyncRedisRuleLimiter::check_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// let ok = lim.check_n("api/alice", 5);
    /// # let _ = ok; }
    /// ```
    pub fn check_n(&self, key: &str, n: u64) -> Result<Admitted, Denied> {
        self.runtime.run(self.limiter.check_n(key, n))
    }

    /// What `key`'s buckets would say now, changing nothing: `check_n(key, 0)`.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// let left = lim.peek("api/alice").map(|ok| ok.remaining());
    /// # let _ = left; }
    /// ```
    pub fn peek(&self, key: &str) -> Result<Admitted, Denied> {
        self.check_n(key, 0)
    }

    /// Checks cost `n` for every key at once, each under its own rule, all or nothing, in one
    /// round trip (see [`AsyncRedisRuleLimiter::check_all_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// let ok = lim.check_all_n(&["tenant/{acme}", "user/{acme}/42"], 1);
    /// # let _ = ok; }
    /// ```
    pub fn check_all_n(&self, keys: &[&str], n: u64) -> Result<Admitted, Denied> {
        self.runtime.run(self.limiter.check_all_n(keys, n))
    }

    /// The decision without the failure policy (see [`AsyncRedisRuleLimiter::try_check_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// if let Err(e) = lim.try_check_n("api/alice", 1) { eprintln!("no decision: {e}"); }
    /// # }
    /// ```
    pub fn try_check_n(&self, key: &str, n: u64) -> Result<Result<Admitted, Denied>, Error> {
        self.runtime.run(self.limiter.try_check_n(key, n))
    }

    /// The decision of `check_all_n` without the failure policy (see
    /// [`AsyncRedisRuleLimiter::try_check_all_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// let decided = lim.try_check_all_n(&["tenant/{acme}", "user/{acme}/42"], 1);
    /// # let _ = decided; }
    /// ```
    pub fn try_check_all_n(
        &self,
        keys: &[&str],
        n: u64,
    ) -> Result<Result<Admitted, Denied>, Error> {
        self.runtime.run(self.limiter.try_check_all_n(keys, n))
    }

    /// Puts `rules` in force at once (see [`AsyncRedisRuleLimiter::reload`]). Never blocks on
    /// Redis.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) -> Result<(), Box<dyn std::error::Error>> {
    /// # #[cfg(feature = "rules-file")]
    /// lim.reload(leakgate::Rules::from_file("/etc/myapp/limits.toml")?)?;
    /// # Ok(()) }
    /// ```
    pub fn reload(&self, rules: Rules) -> Result<(), Error> {
        self.limiter.reload(rules)
    }

    /// The rules in force.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// assert!(lim.rules().get("api").is_some());
    /// # }
    /// ```
    pub fn rules(&self) -> Rules {
        self.limiter.rules()
    }

    /// Each rule's counts (see [`AsyncRedisRuleLimiter::rule_stats`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// let shadow_refusals: u64 = lim.rule_stats().iter().map(|r| r.denied_in_shadow).sum();
    /// # let _ = shadow_refusals; }
    /// ```
    pub fn rule_stats(&self) -> Vec<RuleStats> {
        self.limiter.rule_stats()
    }

    /// The limiter's counters.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// let s = lim.stats();
    /// println!("{} decisions in {} round trips", s.decisions(), s.round_trips);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.limiter.stats()
    }

    /// The Redis key that holds `key`'s buckets, or `None` when no rule limits `key`.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// if let Some(k) = lim.redis_key("api/alice") { println!("{}", String::from_utf8_lossy(&k)); }
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> Option<Vec<u8>> {
        self.limiter.redis_key(key)
    }

    /// The async limiter underneath (sharing everything with this one).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisRuleLimiter) {
    /// let async_lim = lim.as_async().clone();
    /// # let _ = async_lim; }
    /// ```
    pub fn as_async(&self) -> &AsyncRedisRuleLimiter {
        &self.limiter
    }
}

impl fmt::Debug for RedisRuleLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.limiter.fmt_as("RedisRuleLimiter", f)
    }
}

impl Builder {
    /// Connects a [`RedisRuleLimiter`] enforcing `rules` (leave [`quota`](Self::quota) and
    /// [`leases`](Self::leases) out: a rules limiter takes its quotas from its rules, and takes
    /// no leases), blocking until Redis answers or the connect timeout passes (and connecting in
    /// the background after that, as [`connect`](Self::connect)).
    ///
    /// ```no_run
    /// let mut rules = leakgate::Rules::new();
    /// rules.insert("api", ["10/s".parse()?]);
    /// let lim = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .prefix("myapp:")
    ///     .connect_rules(rules)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect_rules(self, rules: Rules) -> Result<RedisRuleLimiter, Error> {
        RedisRuleLimiter::from_builder(self, rules)
    }
}
