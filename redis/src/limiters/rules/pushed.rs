//! Rules pushed through Redis (feature `rules-file`): one fleet's limits changed in one step.
//!
//! [`push_rules`] stores a [`Rules`] in Redis as TOML under `prefix + "rules"`, with a version
//! one above the last; [`RulesFollower`] polls that version (one `HGET` per interval, a
//! quarter of a second by default) and hands each new version's rules to its callback, or
//! straight to a rules limiter's `reload` ([`RulesFollower::reloading`]). So every process that
//! follows the same Redis and prefix has the pushed rules in force within about an interval of
//! the push, each key keeping its level (see the crate docs, *Reloads and levels*).
//!
//! The store is one Redis hash, written in one script call: field `version` (an integer,
//! counting pushes) and field `toml` (the rules, in the format `leakgate::Rules::from_toml`
//! reads). A version that does not parse is reported and skipped; the rules in force stay.
//!
//! ```no_run
//! use leakgate_redis::{push_rules, RedisRuleLimiter, RulesFollower};
//! use std::time::Duration;
//! let url = "redis://127.0.0.1:6379/";
//! let lim = RedisRuleLimiter::connect(url, leakgate::Rules::from_file("rules.toml")?)?;
//! let _follower = RulesFollower::reloading(url, "leakgate:", Duration::from_millis(250), lim.as_async().clone())?;
//! // Elsewhere, once for the whole fleet:
//! let version = push_rules(url, "leakgate:", &leakgate::Rules::from_file("stricter.toml")?)?;
//! println!("pushed version {version}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::limiter::AsyncRedisRuleLimiter;
use crate::error::Error;
use leakgate::{OverflowPolicy, Rules};
use std::fmt::Write as _;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a connection attempt or a command may take.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Increments the version and stores the rules, in one step.
const PUSH: &str = "local v = redis.call('HINCRBY', KEYS[1], 'version', 1) \
                    redis.call('HSET', KEYS[1], 'toml', ARGV[1]) return v";

/// The Redis key of the pushed rules for `prefix`.
fn key(prefix: &str) -> String {
    format!("{prefix}rules")
}

/// Rules as pushed, with their version.
///
/// ```
/// let pushed = leakgate_redis::PushedRules { version: 3, rules: leakgate::Rules::new() };
/// assert_eq!(pushed.version, 3);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedRules {
    /// The push's number: 1 for the first push under a prefix, one more for each.
    pub version: u64,
    /// The rules.
    pub rules: Rules,
}

fn connect(url: &str) -> Result<redis::Connection, Error> {
    let client = redis::Client::open(url).map_err(|e| Error::Config(e.to_string()))?;
    let con = client.get_connection_with_timeout(IO_TIMEOUT).map_err(Error::from_redis)?;
    con.set_read_timeout(Some(IO_TIMEOUT)).map_err(Error::from_redis)?;
    con.set_write_timeout(Some(IO_TIMEOUT)).map_err(Error::from_redis)?;
    Ok(con)
}

/// Where a follower reads the pushed rules.
enum Source {
    One(String),
    Cluster(Vec<String>),
}

impl Source {
    fn connect(&self) -> Result<Box<dyn redis::ConnectionLike + Send>, Error> {
        Ok(match self {
            Source::One(url) => Box::new(connect(url)?),
            Source::Cluster(seeds) => {
                let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
                Box::new(connect_cluster(&seeds)?)
            }
        })
    }
}

/// A blocking connection to a Redis Cluster through `seeds`.
fn connect_cluster(seeds: &[&str]) -> Result<redis::cluster::ClusterConnection, Error> {
    if seeds.is_empty() {
        return Err(Error::Config("a cluster needs at least one seed URL".into()));
    }
    let client = redis::cluster::ClusterClient::builder(seeds.iter().copied())
        .connection_timeout(IO_TIMEOUT)
        .response_timeout(IO_TIMEOUT)
        .build()
        .map_err(|e| Error::Config(e.to_string()))?;
    client.get_connection().map_err(Error::from_redis)
}

/// Stores `rules` under `prefix` (`"leakgate:"` is the limiters' default) in the Redis at
/// `url`, and returns the new version. Blocking.
///
/// ```no_run
/// let mut rules = leakgate::Rules::new();
/// rules.insert("api", ["10/s".parse()?]);
/// let version = leakgate_redis::push_rules("redis://127.0.0.1/", "leakgate:", &rules)?;
/// # let _ = version; Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn push_rules(url: &str, prefix: &str, rules: &Rules) -> Result<u64, Error> {
    let text = toml_of(rules)?;
    push(&mut connect(url)?, prefix, text)
}

/// [`push_rules`] on a Redis Cluster reached through `seeds` (any of its nodes): the rules are
/// one Redis key, stored on the master of its slot, where every follower on the cluster reads it.
///
/// ```no_run
/// let mut rules = leakgate::Rules::new();
/// rules.insert("api", ["10/s".parse()?]);
/// let seeds = ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"];
/// let version = leakgate_redis::push_rules_cluster(&seeds, "leakgate:", &rules)?;
/// # let _ = version; Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn push_rules_cluster(seeds: &[&str], prefix: &str, rules: &Rules) -> Result<u64, Error> {
    let text = toml_of(rules)?;
    push(&mut connect_cluster(seeds)?, prefix, text)
}

/// `rules` as TOML, checked to read back as the same rules.
fn toml_of(rules: &Rules) -> Result<String, Error> {
    let text = rules_to_toml(rules);
    // What is stored must read back as the same rules.
    if Rules::from_toml(&text).as_ref() != Ok(rules) {
        return Err(Error::Config("these rules do not survive a round trip through TOML".into()));
    }
    Ok(text)
}

fn push(con: &mut dyn redis::ConnectionLike, prefix: &str, text: String) -> Result<u64, Error> {
    redis::Script::new(PUSH).key(key(prefix)).arg(text).invoke(con).map_err(Error::from_redis)
}

/// The rules last pushed under `prefix`, or `None` if none was. Blocking.
///
/// ```no_run
/// if let Some(pushed) = leakgate_redis::fetch_rules("redis://127.0.0.1/", "leakgate:")? {
///     println!("version {}: {} rules", pushed.version, pushed.rules.len());
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn fetch_rules(url: &str, prefix: &str) -> Result<Option<PushedRules>, Error> {
    fetch(&mut connect(url)?, prefix)
}

/// [`fetch_rules`] on a Redis Cluster reached through `seeds` (any of its nodes).
///
/// ```no_run
/// let seeds = ["redis://127.0.0.1:7000/"];
/// let pushed = leakgate_redis::fetch_rules_cluster(&seeds, "leakgate:")?;
/// # let _ = pushed; Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn fetch_rules_cluster(seeds: &[&str], prefix: &str) -> Result<Option<PushedRules>, Error> {
    fetch(&mut connect_cluster(seeds)?, prefix)
}

fn fetch(con: &mut dyn redis::ConnectionLike, prefix: &str) -> Result<Option<PushedRules>, Error> {
    let (version, text): (Option<u64>, Option<String>) = redis::cmd("HMGET")
        .arg(key(prefix))
        .arg("version")
        .arg("toml")
        .query(con)
        .map_err(Error::from_redis)?;
    let (Some(version), Some(text)) = (version, text) else { return Ok(None) };
    let rules = Rules::from_toml(&text)
        .map_err(|e| Error::Rejected(format!("pushed rules version {version}: {e}")))?;
    Ok(Some(PushedRules { version, rules }))
}

/// `rules` as TOML that `Rules::from_toml` reads back as the same rules.
///
/// ```
/// let mut rules = leakgate::Rules::new();
/// rules.insert("api", ["10/s".parse()?, "1000/h".parse()?]).shadow(true);
/// let text = leakgate_redis::rules_to_toml(&rules);
/// assert_eq!(leakgate::Rules::from_toml(&text)?, rules);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn rules_to_toml(rules: &Rules) -> String {
    let mut out = String::new();
    for (path, rule) in rules.iter() {
        let quotas: Vec<String> =
            rule.quotas().iter().map(|q| format!("{:?}", q.to_string())).collect();
        // Writing to a String cannot fail.
        let _ = write!(out, "{path:?} = {{ quotas = [{}]", quotas.join(", "));
        if rule.is_shadow() {
            out.push_str(", shadow = true");
        }
        let _ = write!(out, ", capacity = {}", rule.table_capacity());
        if let OverflowPolicy::SharedBucket(quota) = rule.overflow_policy() {
            let _ = write!(out, ", overflow = {:?}", format!("shared {quota}"));
        }
        out.push_str(" }\n");
    }
    out
}

/// What a follower saw: a new version, or one that could not be used.
///
/// ```
/// use leakgate_redis::FollowEvent;
/// let event = FollowEvent::Refused { version: 4, reason: "line 1: invalid quota".into() };
/// assert!(matches!(event, FollowEvent::Refused { version: 4, .. }));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum FollowEvent {
    /// A new version, now handed over.
    Pushed(PushedRules),
    /// A new version that could not be read or put in force; the rules in force stay.
    Refused {
        /// The version.
        version: u64,
        /// Why.
        reason: String,
    },
}

/// A thread that follows the rules pushed under a prefix; stops when dropped.
///
/// [`push_rules`] stores a [`Rules`] as TOML with a version (one Redis hash,
/// `prefix + "rules"`, fields `version` and `toml`, written in one script call); a follower
/// asks for the version every interval (one `HGET`) and hands each newer version's rules to
/// its callback, or to a rules limiter's `reload` ([`RulesFollower::reloading`], every key
/// keeping its level). So every process following one Redis and prefix has a push in force
/// within about an interval. A version that does not parse is reported and skipped.
///
/// ```no_run
/// use leakgate_redis::{FollowEvent, RulesFollower};
/// use std::time::Duration;
/// let follower = RulesFollower::start("redis://127.0.0.1/", "leakgate:", Duration::from_millis(250), |event| {
///     if let FollowEvent::Pushed(pushed) = event {
///         println!("version {} in force", pushed.version);
///     }
///     Ok(())
/// })?;
/// # drop(follower); Ok::<(), leakgate_redis::Error>(())
/// ```
#[derive(Debug)]
pub struct RulesFollower {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl RulesFollower {
    /// Polls the version under `prefix` every `every` (at least 10 ms) and calls `on_version`
    /// with each version newer than the last one handed over (the version in Redis when it
    /// starts included). `on_version` returns an error to refuse a version (reported once, as
    /// [`FollowEvent::Refused`], to the log of the caller's choice: it is not retried). While
    /// Redis cannot be reached the follower keeps trying. Fails only on a bad URL.
    ///
    /// ```
    /// use leakgate_redis::RulesFollower;
    /// use std::time::Duration;
    /// let bad = RulesFollower::start("not a url", "leakgate:", Duration::from_secs(1), |_| Ok(()));
    /// assert!(bad.is_err());
    /// ```
    pub fn start(
        url: &str,
        prefix: &str,
        every: Duration,
        on_version: impl FnMut(FollowEvent) -> Result<(), String> + Send + 'static,
    ) -> Result<RulesFollower, Error> {
        redis::Client::open(url).map_err(|e| Error::Config(e.to_string()))?;
        RulesFollower::follow(Source::One(url.to_string()), prefix, every, on_version)
    }

    /// [`start`](Self::start) on a Redis Cluster reached through `seeds` (any of its nodes).
    /// Fails only when no seed is given or one is not a URL.
    ///
    /// ```
    /// use leakgate_redis::RulesFollower;
    /// use std::time::Duration;
    /// let none = RulesFollower::start_cluster(&[], "leakgate:", Duration::from_secs(1), |_| Ok(()));
    /// assert!(none.is_err());
    /// ```
    pub fn start_cluster(
        seeds: &[&str],
        prefix: &str,
        every: Duration,
        on_version: impl FnMut(FollowEvent) -> Result<(), String> + Send + 'static,
    ) -> Result<RulesFollower, Error> {
        if seeds.is_empty() {
            return Err(Error::Config("a cluster needs at least one seed URL".into()));
        }
        for seed in seeds {
            redis::Client::open(*seed).map_err(|e| Error::Config(e.to_string()))?;
        }
        let seeds = seeds.iter().map(|s| s.to_string()).collect();
        RulesFollower::follow(Source::Cluster(seeds), prefix, every, on_version)
    }

    fn follow(
        source: Source,
        prefix: &str,
        every: Duration,
        mut on_version: impl FnMut(FollowEvent) -> Result<(), String> + Send + 'static,
    ) -> Result<RulesFollower, Error> {
        let prefix = prefix.to_string();
        let every = every.max(Duration::from_millis(10));
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("leakgate-rules-follow".into())
            .spawn(move || {
                let mut con: Option<Box<dyn redis::ConnectionLike + Send>> = None;
                let mut last = 0u64;
                let (stopped, wake) = &*stopping;
                let mut guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                while !*guard {
                    drop(guard);
                    if con.is_none() {
                        con = source.connect().ok();
                    }
                    if let Some(c) = con.as_mut() {
                        match poll(c.as_mut(), &prefix, last) {
                            Ok(None) => {}
                            Ok(Some(Ok(pushed))) => {
                                last = pushed.version;
                                let version = pushed.version;
                                if let Err(reason) = on_version(FollowEvent::Pushed(pushed)) {
                                    let _ = on_version(FollowEvent::Refused { version, reason });
                                }
                            }
                            Ok(Some(Err((version, reason)))) => {
                                last = version;
                                let _ = on_version(FollowEvent::Refused { version, reason });
                            }
                            Err(_) => con = None,
                        }
                    }
                    guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                    if *guard {
                        break;
                    }
                    guard = wake.wait_timeout(guard, every).unwrap_or_else(|p| p.into_inner()).0;
                }
            })
            .map_err(|e| Error::Config(format!("cannot start the follower thread: {e}")))?;
        Ok(RulesFollower { stop, thread: Some(thread) })
    }

    /// Follows the rules pushed under `prefix` and puts each version in force on `limiter`,
    /// with [`AsyncRedisRuleLimiter::reload`] (every key keeps what it could admit).
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::RedisRuleLimiter) -> Result<(), leakgate_redis::Error> {
    /// use std::time::Duration;
    /// let url = "redis://127.0.0.1/";
    /// let _follower = leakgate_redis::RulesFollower::reloading(url, "leakgate:", Duration::from_millis(250), lim.as_async().clone())?;
    /// # Ok(()) }
    /// ```
    pub fn reloading(
        url: &str,
        prefix: &str,
        every: Duration,
        limiter: AsyncRedisRuleLimiter,
    ) -> Result<RulesFollower, Error> {
        RulesFollower::start(url, prefix, every, move |event| match event {
            FollowEvent::Pushed(pushed) => limiter.reload(pushed.rules).map_err(|e| e.to_string()),
            _ => Ok(()),
        })
    }
}

/// A version newer than `last`, if there is one: its rules, or why they cannot be read.
#[allow(clippy::type_complexity)]
fn poll(
    con: &mut dyn redis::ConnectionLike,
    prefix: &str,
    last: u64,
) -> Result<Option<Result<PushedRules, (u64, String)>>, Error> {
    let version: Option<u64> =
        redis::cmd("HGET").arg(key(prefix)).arg("version").query(con).map_err(Error::from_redis)?;
    match version {
        Some(v) if v > last => match fetch(con, prefix) {
            Ok(Some(pushed)) => Ok(Some(Ok(pushed))),
            Ok(None) => Ok(None),
            Err(Error::Rejected(reason)) => Ok(Some(Err((v, reason)))),
            Err(e) => Err(e),
        },
        _ => Ok(None),
    }
}

impl Drop for RulesFollower {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
