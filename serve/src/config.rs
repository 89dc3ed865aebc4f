//! [`Config`]: what a service serves, and [`ServeError`]: why it could not start.

use crate::rules::file::RulesError;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What to serve: the rules file, the listeners, and where the buckets live.
///
/// ```
/// use leakgate_serve::Config;
/// let config = Config::new("rules.toml")
///     .resp("127.0.0.1:6380".parse()?)
///     .grpc("127.0.0.1:8081".parse()?)
///     .http("127.0.0.1:9090".parse()?);
/// # let _ = config;
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) rules: PathBuf,
    pub(crate) grpc: Option<SocketAddr>,
    pub(crate) resp: Option<SocketAddr>,
    pub(crate) http: Option<SocketAddr>,
    pub(crate) redis: Option<String>,
    /// Or a Redis Cluster's seed URLs (empty: none).
    pub(crate) redis_cluster: Vec<String>,
    pub(crate) redis_deadline: Option<Duration>,
    pub(crate) redis_failure: leakgate_redis::FailurePolicy,
    pub(crate) rate_limit_headers: bool,
    pub(crate) watch_every: Duration,
    /// Caps, timeouts, authentication, TLS: set by the methods in `listen/settings.rs`.
    pub(crate) listen: crate::listen::Settings,
    pub(crate) key_memory: usize,
}

impl Config {
    /// Serves the rules file at `rules` (TOML, or Envoy's YAML for `.yaml`/`.yml`), in memory,
    /// with no listener yet.
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml");
    /// # let _ = config;
    /// ```
    pub fn new(rules: impl Into<PathBuf>) -> Config {
        Config {
            rules: rules.into(),
            grpc: None,
            resp: None,
            http: None,
            redis: None,
            redis_cluster: Vec::new(),
            redis_deadline: None,
            redis_failure: leakgate_redis::FailurePolicy::Deny,
            rate_limit_headers: false,
            watch_every: Duration::from_millis(500),
            listen: crate::listen::Settings::default(),
            key_memory: crate::tat::DEFAULT_BYTES,
        }
    }

    /// Serves Envoy's rate-limit service over gRPC on `addr` (port 0: any free port).
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").grpc("127.0.0.1:0".parse()?);
    /// # let _ = config; Ok::<(), std::net::AddrParseError>(())
    /// ```
    pub fn grpc(mut self, addr: SocketAddr) -> Config {
        self.grpc = Some(addr);
        self
    }

    /// Serves the Redis protocol (`CL.THROTTLE`, `LG.CHECK`, ...) on `addr`.
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").resp("127.0.0.1:0".parse()?);
    /// # let _ = config; Ok::<(), std::net::AddrParseError>(())
    /// ```
    pub fn resp(mut self, addr: SocketAddr) -> Config {
        self.resp = Some(addr);
        self
    }

    /// Serves `/metrics`, `/buckets` and the page `/` on `addr`.
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").http("127.0.0.1:0".parse()?);
    /// # let _ = config; Ok::<(), std::net::AddrParseError>(())
    /// ```
    pub fn http(mut self, addr: SocketAddr) -> Config {
        self.http = Some(addr);
        self
    }

    /// Keeps the buckets in the Redis at `url`, shared by every instance that uses it.
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").redis("redis://127.0.0.1:6379/");
    /// # let _ = config;
    /// ```
    pub fn redis(mut self, url: impl Into<String>) -> Config {
        self.redis = Some(url.into());
        self
    }

    /// Keeps the buckets in a Redis Cluster reached through `seeds` (any of its nodes), instead
    /// of one Redis: every listener, the pushed rules and `/buckets` (every master) as with
    /// [`redis`](Self::redis).
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml")
    ///     .redis_cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]);
    /// # let _ = config;
    /// ```
    pub fn redis_cluster(mut self, seeds: impl IntoIterator<Item = impl Into<String>>) -> Config {
        self.redis_cluster = seeds.into_iter().map(Into::into).collect();
        self
    }

    /// The longest a check waits for Redis before its failure policy answers (default:
    /// `leakgate-redis`'s, 5 ms).
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = leakgate_serve::Config::new("r.toml").redis_deadline(Duration::from_millis(20));
    /// # let _ = config;
    /// ```
    pub fn redis_deadline(mut self, deadline: Duration) -> Config {
        self.redis_deadline = Some(deadline);
        self
    }

    /// What a check answers when Redis gives no decision in time (default: refuse, so the
    /// limit is never exceeded because Redis is away; `Allow`; or `Local`, a bucket in this
    /// process at each rule's share of `expected_servers`).
    ///
    /// ```
    /// use leakgate_redis::FailurePolicy;
    /// let config = leakgate_serve::Config::new("r.toml")
    ///     .redis_failure_policy(FailurePolicy::Local { expected_servers: 4 });
    /// # let _ = config;
    /// ```
    pub fn redis_failure_policy(mut self, policy: leakgate_redis::FailurePolicy) -> Config {
        self.redis_failure = policy;
        self
    }

    /// Adds the IETF `RateLimit` and `RateLimit-Policy` fields (and `Retry-After` when
    /// refused) to every gRPC answer's `response_headers_to_add` (default: off).
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").rate_limit_headers(true);
    /// # let _ = config;
    /// ```
    pub fn rate_limit_headers(mut self, on: bool) -> Config {
        self.rate_limit_headers = on;
        self
    }

    /// How often the rules file is read to see whether it changed (default 500 ms; zero: never,
    /// only [`Running::reload`](crate::Running::reload) and SIGHUP read it).
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = leakgate_serve::Config::new("rules.toml").watch_every(Duration::from_secs(2));
    /// # let _ = config;
    /// ```
    pub fn watch_every(mut self, every: Duration) -> Config {
        self.watch_every = every;
        self
    }

    /// The most bytes the keys clients make may take together (default 256 MiB): every
    /// `CL.THROTTLE` key and every key under a descriptor override, counted with its bucket's
    /// overhead (about 160 bytes). A new key that finds no room is refused, as a full table
    /// refuses (`CL.THROTTLE` answers limited, Envoy `OVER_LIMIT`), until empty buckets are
    /// swept (every second).
    ///
    /// ```
    /// let config = leakgate_serve::Config::new("rules.toml").key_memory(64 << 20);
    /// # let _ = config;
    /// ```
    pub fn key_memory(mut self, bytes: usize) -> Config {
        self.key_memory = bytes;
        self
    }
}

/// Why the service could not start.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let config = leakgate_serve::Config::new("/no/such/rules.toml").resp("127.0.0.1:0".parse().unwrap());
/// let e = leakgate_serve::start(config).await.unwrap_err();
/// assert!(e.to_string().contains("/no/such/rules.toml"));
/// # });
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The rules file could not be read or parsed.
    Rules(RulesError),
    /// A listener could not be bound.
    Bind(SocketAddr, std::io::Error),
    /// Redis could not be used.
    Redis(String),
    /// Nothing to serve: no listener was configured.
    NoListener,
    /// The secret could not be read (`--auth-file`).
    Auth(String),
    /// TLS could not be set up (`--tls-cert`, `--tls-key`, `--tls-client-ca`).
    Tls(String),
    /// A setting is out of its range.
    Settings(String),
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Rules(e) => write!(f, "rules: {e}"),
            ServeError::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            ServeError::Redis(e) => write!(f, "redis: {e}"),
            ServeError::NoListener => {
                f.write_str("nothing to serve: give --grpc, --resp or --http")
            }
            ServeError::Auth(e) => write!(f, "auth file {e}"),
            ServeError::Tls(e) => write!(f, "TLS: {e}"),
            ServeError::Settings(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ServeError {}
