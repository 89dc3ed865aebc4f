//! [`start`] and [`Running`]: binding the listeners a [`Config`] names, keeping the rules
//! current, and stopping gracefully ([`Signals`]).

use crate::backend::Backend;
use crate::cell::CellStore;
use crate::config::{Config, ServeError};
use crate::limits::Limits;
use crate::listen::Gate;
use crate::permits::{MemoryPermits, PermitStore};
use crate::rules::file::{RulesError, RulesFormat};
use crate::rules::reload;
use crate::rules::settle::{Fingerprint, Settle};
use crate::rules::LoadedRules;
use crate::tat::{Budget, Table};
use leakgate::{Clock, RuleLimiter, TscClock};
use leakgate_redis::FailurePolicy;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How often an instance on Redis asks whether rules were pushed.
const PUSH_POLL: Duration = Duration::from_millis(250);

/// Starts serving `config` on the default (TSC) clock; with Redis, time is Redis's.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let config = leakgate_serve::Config::new("rules.toml").resp("127.0.0.1:6380".parse()?);
/// let running = leakgate_serve::start(config).await?;
/// running.run_until_signalled().await; // SIGHUP reloads; SIGTERM or SIGINT stops
/// # Ok(()) }
/// ```
pub async fn start(config: Config) -> Result<Running<TscClock>, ServeError> {
    start_inner(config, TscClock::new(), false).await
}

/// Starts serving `config` on `clock` (a `ManualClock` in tests). With Redis, the limiters send
/// this clock's time instead of using Redis's.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let path = std::env::temp_dir().join(format!("serve-doc-clock-{}.toml", std::process::id()));
/// std::fs::write(&path, "api = \"1/s\"\n").unwrap();
/// let clock = leakgate::ManualClock::new();
/// let config = leakgate_serve::Config::new(&path).resp("127.0.0.1:0".parse().unwrap());
/// let running = leakgate_serve::start_with_clock(config, clock.clone()).await.unwrap();
/// assert!(running.resp_addr().is_some());
/// running.shutdown().await;
/// # std::fs::remove_file(&path).unwrap();
/// # });
/// ```
pub async fn start_with_clock<C: Clock + Clone + 'static>(
    config: Config,
    clock: C,
) -> Result<Running<C>, ServeError> {
    start_inner(config, clock, true).await
}

async fn start_inner<C: Clock + Clone + 'static>(
    config: Config,
    clock: C,
    redis_caller_clock: bool,
) -> Result<Running<C>, ServeError> {
    let listeners = [config.grpc, config.resp, config.http].iter().flatten().count();
    if listeners == 0 {
        return Err(ServeError::NoListener);
    }
    // The secret and the certificates are read, and the caps fitted, before anything listens.
    let prepared = config.listen.prepare(listeners)?;
    // The bytes loaded are the watcher's first version: a change made from now on is seen.
    let modified = std::fs::metadata(&config.rules).and_then(|m| m.modified()).ok();
    let bytes = std::fs::read(&config.rules).map_err(|e| {
        let message = format!("cannot read the file: {e}");
        ServeError::Rules(RulesError { path: Some(config.rules.clone()), message })
    })?;
    let loaded = LoadedRules::from_bytes(&bytes, RulesFormat::of(&config.rules))
        .map_err(|e| ServeError::Rules(RulesError { path: Some(config.rules.clone()), ..e }))?;
    if let Some((path, _)) =
        loaded.rules.iter().find(|(p, _)| p.starts_with(crate::limits::RESERVED))
    {
        let message = format!("rule {path:?}: paths that start with '~' are reserved");
        return Err(ServeError::Rules(RulesError { path: Some(config.rules.clone()), message }));
    }
    let budget = Arc::new(Budget::new(config.key_memory));
    let table = || Table::new(clock.clone(), budget.clone());
    let redis_target = match (&config.redis, config.redis_cluster.is_empty()) {
        (Some(url), _) => Some(leakgate_redis::Builder::new(url.clone())),
        (None, false) => Some(leakgate_redis::Builder::cluster(&config.redis_cluster)),
        (None, true) => None,
    };
    let stores = match &redis_target {
        None => (
            Backend::Memory(RuleLimiter::with_clock(loaded.rules.clone(), clock.clone())),
            CellStore::Memory(table()),
            Some(table()),
        ),
        Some(target) => {
            let builder = || {
                let mut builder = target.clone().failure_policy(config.redis_failure);
                if let Some(deadline) = config.redis_deadline {
                    builder = builder.deadline(deadline);
                }
                if redis_caller_clock {
                    builder = builder.caller_clock(clock.clone());
                }
                builder
            };
            let rules = builder().connect_rules_async(loaded.rules.clone()).await;
            let rules = rules.map_err(|e| ServeError::Redis(e.to_string()))?;
            let cell = builder().connect_cell_async().await;
            let cell = cell.map_err(|e| ServeError::Redis(e.to_string()))?;
            let local = matches!(config.redis_failure, FailurePolicy::Local { .. }).then(table);
            (Backend::Redis(rules), CellStore::Redis { cell, local }, None)
        }
    };
    let source = format!("file {}", config.rules.display());
    let fingerprint = Fingerprint::of(&bytes, modified);
    let count = loaded.rules.len();
    let permits = match &redis_target {
        None => PermitStore::Memory(MemoryPermits::new(clock.clone(), budget.clone())),
        Some(target) => {
            let mut builder = target.clone();
            if let Some(deadline) = config.redis_deadline {
                builder = builder.deadline(deadline);
            }
            let permits = builder.connect_concurrency_async().await;
            PermitStore::Redis(permits.map_err(|e| ServeError::Redis(e.to_string()))?)
        }
    };
    let mut limits = Limits::new(stores, budget, loaded, source);
    limits.permits = Some(permits);
    limits.redis_url = config.redis.clone();
    limits.redis_cluster = config.redis_cluster.clone();
    limits.rules_file = Mutex::new(Settle::new(Some(fingerprint)));
    let hash = format!("{:016x}", fingerprint.hash);
    let file = config.rules.display();
    tracing::info!(rules = count, bytes = bytes.len(), %hash, %file, "rules file applied");
    if count == 0 {
        tracing::warn!(%file, "the rules file has no rules: LG.CHECK and Envoy limit nothing");
    }
    let limits = Arc::new(limits);
    let (shutdown, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut running = Running {
        limits: limits.clone(),
        config: config.clone(),
        resp_addr: None,
        grpc_addr: None,
        http_addr: None,
        shutdown,
        tasks: JoinSet::new(),
        follower: None,
    };
    if let Some(addr) = config.resp {
        let listener = bind(addr).await?;
        running.resp_addr = listener.local_addr().ok();
        let gate = Gate::new(listener, prepared.cap, "resp", crate::resp::REFUSAL);
        let (limits, stop, secret) = (limits.clone(), stop.clone(), prepared.secret.clone());
        tasks.spawn(crate::resp::serve(gate, limits, stop, secret, prepared.deadlines));
    }
    if let Some(addr) = config.grpc {
        let listener = bind(addr).await?;
        running.grpc_addr = listener.local_addr().ok();
        // An HTTP/2 client can be told nothing before its preface: it is closed.
        let gate = Gate::new(listener, prepared.cap, "grpc", b"");
        let (limits, stop, headers) = (limits.clone(), stop.clone(), config.rate_limit_headers);
        tasks.spawn(crate::grpc::serve(gate, limits, stop, headers, prepared.clone()));
    }
    if let Some(addr) = config.http {
        let listener = bind(addr).await?;
        running.http_addr = listener.local_addr().ok();
        let gate = Gate::new(listener, prepared.cap, "http", crate::http::REFUSAL);
        tasks.spawn(crate::http::serve(gate, limits.clone(), stop.clone(), prepared.clone()));
    }
    if let Some(url) = &config.redis {
        let follower = reload::follow_redis(limits.clone(), url, PUSH_POLL);
        running.follower = Some(follower.map_err(|e| ServeError::Redis(e.to_string()))?);
    } else if !config.redis_cluster.is_empty() {
        let follower =
            reload::follow_redis_cluster(limits.clone(), &config.redis_cluster, PUSH_POLL);
        running.follower = Some(follower.map_err(|e| ServeError::Redis(e.to_string()))?);
    }
    tasks.spawn(crate::tat::sweep_every(
        limits.clone(),
        Limits::tables,
        crate::tat::SWEEP_EVERY,
        stop.clone(),
    ));
    if !config.watch_every.is_zero() {
        let every = config.watch_every;
        let path = config.rules.clone();
        tasks.spawn(reload::watch_file(limits.clone(), path, every, stop));
    }
    running.tasks = tasks;
    tracing::info!(
        resp = ?running.resp_addr,
        grpc = ?running.grpc_addr,
        http = ?running.http_addr,
        backend = limits.rules.kind(),
        "serving"
    );
    Ok(running)
}

/// Connections the kernel queues for a listener before it accepts them: a burst of new clients
/// beyond the default of 128 would see their connection attempts dropped and retried a second
/// later.
const BACKLOG: u32 = 4096;

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    };
    let listen = |socket: tokio::net::TcpSocket| {
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(BACKLOG)
    };
    socket.and_then(listen).map_err(|e| ServeError::Bind(addr, e))
}

/// A started service: its bound addresses, and the handles to reload and stop it. Dropping it
/// stops the listeners without waiting for them.
pub struct Running<C: Clock + 'static = TscClock> {
    pub(crate) limits: Arc<Limits<C>>,
    config: Config,
    resp_addr: Option<SocketAddr>,
    grpc_addr: Option<SocketAddr>,
    http_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// With Redis: the thread that follows pushed rules (stops when dropped).
    follower: Option<leakgate_redis::RulesFollower>,
}

impl<C: Clock + 'static> Running<C> {
    /// Where the Redis protocol is served (the bound port, when the configuration said 0).
    ///
    /// ```no_run
    /// # fn f(running: leakgate_serve::Running) {
    /// println!("redis-cli -p {}", running.resp_addr().unwrap().port());
    /// # }
    /// ```
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.resp_addr
    }

    /// Where gRPC is served.
    ///
    /// ```no_run
    /// # fn f(running: leakgate_serve::Running) {
    /// println!("grpc://{}", running.grpc_addr().unwrap());
    /// # }
    /// ```
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc_addr
    }

    /// Where `/metrics`, `/buckets` and the page are served.
    ///
    /// ```no_run
    /// # fn f(running: leakgate_serve::Running) {
    /// println!("http://{}/", running.http_addr().unwrap());
    /// # }
    /// ```
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Reads the rules file again and puts it in force, keeping every key's level (what
    /// SIGHUP does). A file that does not parse is refused and the rules in force stay.
    ///
    /// ```no_run
    /// # fn f(running: leakgate_serve::Running) {
    /// match running.reload() {
    ///     Ok(n) => println!("{n} rules in force"),
    ///     Err(e) => eprintln!("kept the old rules: {e}"),
    /// }
    /// # }
    /// ```
    pub fn reload(&self) -> Result<usize, RulesError> {
        crate::limits::blocking(|| reload::reload_file(&self.limits, &self.config.rules))
    }

    /// Stops gracefully: stops accepting, lets the calls in flight finish, and returns once
    /// every listener has stopped.
    ///
    /// ```no_run
    /// # async fn f(running: leakgate_serve::Running) {
    /// running.shutdown().await;
    /// # }
    /// ```
    pub async fn shutdown(mut self) {
        self.follower = None;
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully; SIGHUP reloads the rules
    /// file meanwhile. The handlers are installed here: a program that announces its addresses
    /// first should install them before starting ([`Signals::install`] and
    /// [`Running::run_until`]), so that a signal sent right after the announcement is not
    /// handled by the default action.
    ///
    /// ```no_run
    /// # async fn f(running: leakgate_serve::Running) {
    /// running.run_until_signalled().await;
    /// # }
    /// ```
    pub async fn run_until_signalled(self) {
        match Signals::install() {
            Ok(signals) => self.run_until(signals).await,
            Err(e) => {
                tracing::error!(error = %e, "cannot install signal handlers: serving until killed");
                std::future::pending::<()>().await;
            }
        }
    }

    /// Serves until `signals` hears SIGTERM or SIGINT, then shuts down gracefully; SIGHUP
    /// reloads the rules file meanwhile.
    ///
    /// ```no_run
    /// # async fn f(config: leakgate_serve::Config) -> Result<(), Box<dyn std::error::Error>> {
    /// let signals = leakgate_serve::Signals::install()?; // before anyone learns the addresses
    /// let running = leakgate_serve::start(config).await?;
    /// println!("resp {:?}", running.resp_addr());
    /// running.run_until(signals).await;
    /// # Ok(()) }
    /// ```
    pub async fn run_until(self, mut signals: Signals) {
        loop {
            tokio::select! {
                _ = signals.term.recv() => break,
                _ = signals.int.recv() => break,
                _ = signals.hup.recv() => {
                    tracing::info!("SIGHUP: reading the rules file again");
                    let _ = self.reload();
                }
            }
        }
        tracing::info!("stopping: finishing the calls in flight");
        self.shutdown().await;
    }
}

/// SIGTERM, SIGINT and SIGHUP, caught from the moment this is made (inside a tokio runtime)
/// until it is dropped; signals that arrive meanwhile wait for [`Running::run_until`].
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let signals = leakgate_serve::Signals::install()?;
/// # let _ = signals; Ok(()) }
/// ```
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers (within a tokio runtime).
    ///
    /// ```no_run
    /// # async fn f() -> std::io::Result<()> {
    /// let signals = leakgate_serve::Signals::install()?;
    /// # let _ = signals; Ok(()) }
    /// ```
    pub fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

impl<C: Clock + 'static> Drop for Running<C> {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

impl<C: Clock + 'static> fmt::Debug for Running<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("resp", &self.resp_addr)
            .field("grpc", &self.grpc_addr)
            .field("http", &self.http_addr)
            .finish_non_exhaustive()
    }
}
