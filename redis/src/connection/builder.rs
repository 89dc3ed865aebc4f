//! How a limiter is set up: [`Builder`]. Each `connect*` is beside the limiter it builds.

use crate::connection::cluster::Target;
use crate::connection::policy::FailurePolicy;
use crate::limiters::lease_config::LeaseConfig;
use leakgate::{Clock, Quota};
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`RedisLimiter`](crate::RedisLimiter) (blocking) or an
/// [`AsyncRedisLimiter`](crate::AsyncRedisLimiter) with more than the defaults.
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
    pub(crate) target: Target,
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
    pub(crate) wait_replicas: u32,
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
            target: Target::One(url.into()),
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
            wait_replicas: 0,
        }
    }

    /// A builder for a Redis Cluster, reached through `seeds`: the URLs of any of its nodes
    /// (one is enough; more help while a node is down). Every `connect*` works on it, with the
    /// meaning of one node's limiter on every key (see the crate docs, *Redis Cluster*).
    ///
    /// ```
    /// let b = leakgate_redis::Builder::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]);
    /// # let _ = b;
    /// ```
    pub fn cluster(seeds: impl IntoIterator<Item = impl AsRef<str>>) -> Builder {
        let seeds = seeds.into_iter().map(|s| s.as_ref().to_owned()).collect();
        Builder { target: Target::Cluster(seeds), ..Builder::new("") }
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

    /// Durability through failover (default 0: off): after a call that charged a bucket, wait
    /// (Redis `WAIT`, within what is left of the deadline) until `replicas` replicas of the
    /// key's master have the charge. A call whose charge did not reach them in time is answered
    /// by the failure policy (the charge stays: it may only refuse more). So a failover to a
    /// replica that has it loses no admitted unit, and the over-admission bound of a failover
    /// (one burst per key, see the crate docs) falls to 0 for those replicas. The cost is one
    /// more round trip per admitted request, and Redis holds the connection (shared by every
    /// call of the limiter) until the replica acknowledges: measured on a 3-master cluster on
    /// 2 cores, 4 to 7 times fewer decisions per second (the crate's README).
    ///
    /// ```
    /// let b = leakgate_redis::Builder::cluster(["redis://127.0.0.1:7000/"]).wait_for_replicas(1);
    /// # let _ = b;
    /// ```
    pub fn wait_for_replicas(mut self, replicas: u32) -> Builder {
        self.wait_replicas = replicas;
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
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("target", &self.target)
            .field("quotas", &self.quotas)
            .field("prefix", &self.prefix)
            .field("deadline", &self.deadline)
            .field("policy", &self.policy)
            .field("caller_clock", &self.caller_clock.is_some())
            .field("leases", &self.leases)
            .finish_non_exhaustive()
    }
}
