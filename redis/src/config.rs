//! How a limiter is set up: [`Builder`], [`FailurePolicy`] and [`LeaseConfig`].

use crate::blocking::RedisLimiter;
use crate::error::Error;
use crate::limiter::AsyncRedisLimiter;
use crate::rules::{AsyncRedisRuleLimiter, RedisRuleLimiter};
use leakgate::{Clock, Quota, Rules};
use std::sync::Arc;
use std::time::Duration;

/// What a call answers when Redis gives no decision within the deadline (down, slow, the circuit
/// breaker open, too many calls in flight) or answers with an error.
///
/// ```
/// use leakgate_redis::FailurePolicy;
/// assert_eq!(FailurePolicy::default(), FailurePolicy::Deny);
/// let fleet_share = FailurePolicy::Local { expected_servers: 20 };
/// # let _ = fleet_share;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Fail closed: deny. The quota is never exceeded because Redis is away.
    #[default]
    Deny,
    /// Fail open: admit. Nothing is limited while Redis is away.
    Allow,
    /// Limit locally at `quota / expected_servers` (count unchanged, period times the number of
    /// servers, burst divided by it and at least 1), one bucket per key in this process. If the
    /// fleet has the expected number of servers, it admits about the quota while Redis is away.
    Local {
        /// How many servers share the limit (at least 1).
        expected_servers: u32,
    },
}

/// Leases for hot keys: a process takes up to `max_units` units beyond a request in the same
/// round trip, and serves later requests for that key from them without a round trip.
///
/// Leased units are charged in Redis when they are taken, so no unit is ever handed out twice;
/// each leased unit must be used before its place in the bucket's schedule has passed (unit `u`
/// of a lease by `u` emission intervals after the lease's first), or it is dropped, so the fleet
/// keeps exactly the limit's bound `burst + rate x window`. The price is fairness: a process may
/// hold up to `max_units` units that others cannot have, and units it cannot use in time are lost
/// (the *shortfall*). Lease sizes adapt: a key whose lease was used up gets a lease twice as large
/// (up to `max_units`); a key asked for again soon (`hot_within`) gets twice what it used of its
/// last lease, at least 1; other keys get what they used, so cold keys take no leases at all.
///
/// ```
/// use leakgate_redis::LeaseConfig;
/// let leases = LeaseConfig::new(64).max_keys(256);
/// assert_eq!((leases.max_units(), leases.key_capacity()), (64, 256));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    max_units: u64,
    max_keys: usize,
    hot_within: Duration,
}

impl LeaseConfig {
    /// Leases of at most `max_units` units each, for up to 1024 keys at once.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(32).max_units(), 32);
    /// ```
    pub fn new(max_units: u64) -> LeaseConfig {
        LeaseConfig { max_units, max_keys: 1024, hot_within: Duration::from_millis(10) }
    }

    /// A key asked for again within this long of its last round trip is hot, and its leases
    /// grow (default 10 ms). Keys asked for less often take no leases, so they waste no units.
    ///
    /// ```
    /// use std::time::Duration;
    /// let leases = leakgate_redis::LeaseConfig::new(8).hot_within(Duration::from_millis(50));
    /// # let _ = leases;
    /// ```
    pub fn hot_within(self, window: Duration) -> LeaseConfig {
        LeaseConfig { hot_within: window, ..self }
    }

    /// `hot_within` in ns.
    pub(crate) fn hot_ns(&self) -> u64 {
        u64::try_from(self.hot_within.as_nanos()).unwrap_or(u64::MAX)
    }

    /// How many keys may hold a lease at once; other keys go to Redis on every call.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(8).max_keys(10).key_capacity(), 10);
    /// ```
    pub fn max_keys(self, max_keys: usize) -> LeaseConfig {
        LeaseConfig { max_keys, ..self }
    }

    /// The largest lease, in units.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(8).max_units(), 8);
    /// ```
    pub fn max_units(&self) -> u64 {
        self.max_units
    }

    /// How many keys may hold a lease at once.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(8).key_capacity(), 1024);
    /// ```
    pub fn key_capacity(&self) -> usize {
        self.max_keys
    }
}

/// Builds a [`RedisLimiter`] (blocking) or an [`AsyncRedisLimiter`] with more than the defaults.
///
/// ```no_run
/// use leakgate_redis::{FailurePolicy, LeaseConfig, RedisLimiter};
/// use std::time::Duration;
/// let lim = RedisLimiter::builder("redis://127.0.0.1:6379/")
///     .quota("10/s".parse()?)
///     .quota("1000/h".parse()?)          // several quotas: all must conform
///     .prefix("myapp:")
///     .deadline(Duration::from_millis(5))
///     .failure_policy(FailurePolicy::Local { expected_servers: 20 })
///     .leases(LeaseConfig::new(32))
///     .connect()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Builder {
    pub(crate) url: String,
    pub(crate) quotas: Vec<Quota>,
    pub(crate) prefix: String,
    pub(crate) deadline: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) policy: FailurePolicy,
    pub(crate) caller_clock: Option<Arc<dyn Clock>>,
    pub(crate) expiry_slack: Option<Duration>,
    pub(crate) leases: Option<LeaseConfig>,
    pub(crate) max_in_flight: usize,
    pub(crate) breaker_failures: u32,
    pub(crate) breaker_open_for: Duration,
}

impl Builder {
    /// A builder for the Redis at `url` (`redis://host:port/db`), with no quota yet.
    ///
    /// ```
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/");
    /// # let _ = b;
    /// ```
    pub fn new(url: impl Into<String>) -> Builder {
        Builder {
            url: url.into(),
            quotas: Vec::new(),
            prefix: "leakgate:".into(),
            deadline: Duration::from_millis(5),
            connect_timeout: Duration::from_secs(1),
            policy: FailurePolicy::Deny,
            caller_clock: None,
            expiry_slack: None,
            leases: None,
            max_in_flight: 1024,
            breaker_failures: 3,
            breaker_open_for: Duration::from_millis(250),
        }
    }

    /// Adds a quota. A request conforms only if it conforms to every quota, and then it is
    /// charged to all of them (each key has one bucket per quota).
    ///
    /// ```
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/").quota("5/s".parse()?);
    /// # let _ = b; Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn quota(mut self, quota: Quota) -> Builder {
        self.quotas.push(quota);
        self
    }

    /// The start of every Redis key this limiter writes (default `"leakgate:"`). It must not
    /// contain `{`, so that a `{tag}` in a key decides its Redis Cluster hash slot.
    ///
    /// ```
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/").prefix("billing:");
    /// # let _ = b;
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Builder {
        self.prefix = prefix.into();
        self
    }

    /// The longest a call waits for Redis (default 5 ms); then the failure policy answers. The
    /// call's script is sent this deadline too: if Redis starts it later, it charges nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .deadline(Duration::from_millis(20));
    /// # let _ = b;
    /// ```
    pub fn deadline(mut self, deadline: Duration) -> Builder {
        self.deadline = deadline;
        self
    }

    /// The longest `connect` waits for Redis to answer (default 1 s), and the longest each
    /// connection attempt takes. When Redis does not answer in time, `connect` returns the
    /// limiter anyway and it connects in the background: the failure policy answers until then.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .connect_timeout(Duration::from_secs(3));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Builder {
        self.connect_timeout = timeout;
        self
    }

    /// What a call answers when Redis cannot (default [`FailurePolicy::Deny`]).
    ///
    /// ```
    /// use leakgate_redis::FailurePolicy;
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .failure_policy(FailurePolicy::Allow);
    /// # let _ = b;
    /// ```
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Builder {
        self.policy = policy;
        self
    }

    /// Decides on `clock` instead of Redis `TIME` (for tests with a
    /// [`ManualClock`](leakgate::ManualClock), or to decide on the application servers' own
    /// clocks). Every process sharing a limit must then read the same clock: wall-clock
    /// nanoseconds since the Unix epoch ([`SystemClock`](crate::SystemClock)) on servers kept in
    /// sync. The script still reads `TIME`, only to check the call's deadline.
    ///
    /// ```
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .caller_clock(leakgate_redis::SystemClock);
    /// # let _ = b;
    /// ```
    pub fn caller_clock(mut self, clock: impl Clock + 'static) -> Builder {
        self.caller_clock = Some(Arc::new(clock));
        self
    }

    /// How long a key lives in Redis after its buckets are empty again. The default is 0 with
    /// Redis `TIME` (keys expire as soon as they are empty) and 60 s with a caller's clock, whose
    /// time may run apart from Redis's expiry clock by that much before a bucket is lost early.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .expiry_slack(Duration::from_secs(5));
    /// # let _ = b;
    /// ```
    pub fn expiry_slack(mut self, slack: Duration) -> Builder {
        self.expiry_slack = Some(slack);
        self
    }

    /// Serves hot keys from leases (see [`LeaseConfig`]). Off by default.
    ///
    /// ```
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .leases(leakgate_redis::LeaseConfig::new(16));
    /// # let _ = b;
    /// ```
    pub fn leases(mut self, leases: LeaseConfig) -> Builder {
        self.leases = Some(leases);
        self
    }

    /// The most calls waiting on Redis at once (default 1024); a call beyond it is answered by
    /// the failure policy at once, so nothing queues without bound.
    ///
    /// ```
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/").max_in_flight(256);
    /// # let _ = b;
    /// ```
    pub fn max_in_flight(mut self, max: usize) -> Builder {
        self.max_in_flight = max.max(1);
        self
    }

    /// The circuit breaker: open after `failures` calls in a row got no answer, then probe Redis
    /// once every `open_for` (default 3 and 250 ms: limiting resumes within about a quarter of a
    /// second of Redis answering again).
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .breaker(5, Duration::from_millis(100));
    /// # let _ = b;
    /// ```
    pub fn breaker(mut self, failures: u32, open_for: Duration) -> Builder {
        self.breaker_failures = failures.max(1);
        self.breaker_open_for = open_for;
        self
    }

    /// Builds the limiter, blocking until Redis answers or the connect timeout passes. A Redis
    /// that cannot be reached is not an error: the limiter connects in the background, and the
    /// failure policy answers until then. A bad URL or prefix, or a Redis that answers with an
    /// error (a wrong password, a refused script), is.
    ///
    /// ```no_run
    /// let lim = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .quota("1/s".parse()?)
    ///     .connect()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect(self) -> Result<RedisLimiter, Error> {
        RedisLimiter::from_builder(self)
    }

    /// Builds the limiter from async code, waiting for Redis as [`connect`](Self::connect) does.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let lim = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .quota("1/s".parse()?)
    ///     .connect_async()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_async(self) -> Result<AsyncRedisLimiter, Error> {
        AsyncRedisLimiter::from_builder(self).await
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

impl Builder {
    /// Connects an [`AsyncRedisCell`](crate::AsyncRedisCell) (leave [`quota`](Self::quota) and
    /// [`leases`](Self::leases) out: each call brings its quota), from async code, waiting for
    /// Redis as [`connect`](Self::connect) does.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let cell = leakgate_redis::Builder::new("redis://127.0.0.1/").connect_cell_async().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_cell_async(self) -> Result<crate::AsyncRedisCell, Error> {
        crate::AsyncRedisCell::from_builder(self).await
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("quotas", &self.quotas)
            .field("prefix", &self.prefix)
            .field("deadline", &self.deadline)
            .field("policy", &self.policy)
            .field("caller_clock", &self.caller_clock.is_some())
            .field("leases", &self.leases)
            .finish_non_exhaustive()
    }
}
