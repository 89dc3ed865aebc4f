//! One round trip to Redis under a deadline, a circuit breaker and a bound on calls in flight.

use crate::connection::breaker::{Breaker, Gate};
use crate::connection::builder::Builder;
use crate::connection::cluster::{self, Conn, Target};
use crate::connection::fallback::LocalClock;
use crate::connection::link::Link;
use crate::error::Error;
use crate::script::{self, Answer, Call, Phase, Reply};
use crate::stats::Counters;
use leakgate::{Clock, TscClock};
use redis::aio::ConnectionLike;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Consecutive hash slots that share a breaker on a cluster.
const SLOTS_PER_BREAKER: usize = 256;
/// Breakers of a cluster client.
const CLUSTER_BREAKERS: usize = cluster::SLOTS as usize / SLOTS_PER_BREAKER;

/// The connection to Redis and what guards each call on it: the deadline, the circuit breaker,
/// the bound on calls in flight, the clocks and the counters. Shared by every kind of limiter.
pub(crate) struct Client {
    /// The connection (made in the background) and Redis's clock.
    link: Arc<Link>,
    sha: String,
    /// Whether the target is a Redis Cluster: a call's keys must then share a slot.
    cluster: bool,
    /// The start of every Redis key of this limiter.
    pub(crate) prefix: Vec<u8>,
    pub(crate) deadline: Duration,
    /// The caller's clock, when time does not come from Redis.
    pub(crate) caller_clock: Option<LocalClock>,
    /// The clock leases, cached denials and local fallbacks read: the caller's, or a monotonic
    /// one.
    pub(crate) local_clock: LocalClock,
    monotonic: TscClock,
    pub(crate) expiry_slack_ms: u64,
    /// One breaker for one node; on a cluster, one per [`SLOTS_PER_BREAKER`] consecutive hash
    /// slots, so that a master that stops answering opens the breakers of its own slots (and of
    /// at most two shared at the edges of its ranges), not the other masters'.
    breakers: Box<[Breaker]>,
    breaker_open_for: Duration,
    /// Replicas a charge must reach before its call answers (`WAIT`; 0: none).
    wait_replicas: u32,
    pub(crate) stats: Counters,
    in_flight: Semaphore,
}

impl Client {
    /// Starts connecting in the background (see [`crate::connection::link`]) and waits for the first
    /// connection at most the connect timeout. Fails only for a bad setting or a Redis that
    /// refuses the limiter, not for one that cannot be reached.
    pub(crate) async fn connect(b: &Builder) -> Result<Client, Error> {
        if b.prefix.contains('{') {
            return Err(Error::Config("the key prefix must not contain '{'".into()));
        }
        // Longer than the deadline: the deadline decides, and counts a timeout as one.
        let response_timeout = b.deadline.saturating_mul(2) + Duration::from_millis(100);
        let (link, connecting) = Link::open(&b.target, b.connect_timeout, response_timeout)?;
        let monotonic = TscClock::new();
        let cluster = matches!(b.target, Target::Cluster(_));
        let local_clock: LocalClock = match &b.caller_clock {
            Some(clock) => clock.clone(),
            None => Arc::new(monotonic.clone()),
        };
        let slack = b.expiry_slack.unwrap_or(match b.caller_clock {
            Some(_) => Duration::from_secs(60),
            None => Duration::ZERO,
        });
        let client = Client {
            link,
            sha: script::sha(),
            cluster,
            prefix: b.prefix.clone().into_bytes(),
            deadline: b.deadline,
            caller_clock: b.caller_clock.clone(),
            local_clock,
            monotonic,
            expiry_slack_ms: u64::try_from(slack.as_millis()).unwrap_or(u64::MAX),
            breakers: (0..if cluster { CLUSTER_BREAKERS } else { 1 })
                .map(|_| Breaker::new(b.breaker_failures, b.breaker_open_for))
                .collect(),
            breaker_open_for: b.breaker_open_for,
            wait_replicas: b.wait_replicas,
            stats: Counters::default(),
            in_flight: Semaphore::new(b.max_in_flight),
        };
        Link::settle(connecting, b.connect_timeout).await?;
        Ok(client)
    }

    /// The time to send to the script: the caller's clock, or `None` for Redis `TIME`.
    pub(crate) fn caller_now(&self) -> Option<u64> {
        self.caller_clock.as_ref().map(|c| c.now_ns())
    }

    /// When asking Redis again may help, after a failed call.
    pub(crate) fn retry_hint(&self) -> Duration {
        if self.breakers.iter().any(Breaker::is_open) || !self.link.is_ready() {
            self.breaker_open_for
        } else {
            self.deadline
        }
    }

    /// Whether the target is a Redis Cluster (a call's keys must then share a slot).
    pub(crate) fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// When a call with `budget` left gives up, on Redis's clock (µs since the epoch).
    pub(crate) fn give_up_us(&self, budget: Duration) -> u64 {
        let budget_ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
        self.link.redis_us(self.link.now_ns().saturating_add(budget_ns))
    }

    /// Runs one `phase` of the script (its keys share a slot) once: within `budget` (the
    /// deadline, less what the call already waited), unless Redis has not answered yet, the
    /// breaker is open or too many calls are in flight. The script decides nothing if it starts
    /// after `give_up` (µs on Redis's clock). Records the outcome in the breaker and the
    /// counters.
    pub(crate) async fn call_in(
        &self,
        call: &Call<'_>,
        phase: Phase<'_>,
        give_up: u64,
        budget: Duration,
    ) -> Result<Reply, Error> {
        let conn = self.connection()?;
        let cmd = call.command(&self.sha, give_up, self.cluster, phase)?;
        let breaker = self.breaker_of(call);
        let (gate, permit) = self.enter(breaker)?;
        let started = std::time::Instant::now();
        let answer = tokio::time::timeout(budget, self.eval(conn.clone(), &cmd)).await;
        let error = match answer.map(|got| got.map(|value| Answer::parse(value, call))) {
            Ok(Ok(Ok(Answer::Decided(reply)))) => {
                breaker.success();
                self.link.observe(reply.redis_us, self.link.now_ns());
                let left = budget.saturating_sub(started.elapsed());
                let charged = (call.write && reply.granted) || matches!(phase, Phase::Commit(_));
                if self.wait_replicas == 0 || !charged || self.replicated(conn, call, left).await {
                    return Ok(reply);
                }
                // Answered, but not durable in time: the policy answers; the charge stays.
                self.stats.timeouts.inc();
                return Err(Error::Timeout(self.deadline));
            }
            // Redis started the script after the call's deadline: as if it had not answered.
            Ok(Ok(Ok(Answer::Late { redis_us }))) => {
                self.link.observe(redis_us, self.link.now_ns());
                self.stats.late.inc();
                Error::Timeout(self.deadline)
            }
            Ok(Ok(Err(unexpected))) => unexpected,
            Ok(Err(e)) => Error::from_redis(e),
            Err(_) => Error::Timeout(self.deadline),
        };
        drop(permit);
        Err(self.failed(breaker, gate, error))
    }

    /// Runs another script (`script`) on `key` with `args`, under the same deadline, breaker and
    /// bound on calls in flight as [`call_in`](Self::call_in) (the permits' script uses it). Unlike the
    /// GCRA script it carries no deadline of its own: a script that runs after the call gave up
    /// still takes effect (for a permit: one nobody holds, returned by its TTL).
    pub(crate) async fn eval_on(
        &self,
        script: &redis::Script,
        key: &[u8],
        args: &[&[u8]],
    ) -> Result<redis::Value, Error> {
        let mut conn = self.connection()?;
        let breaker = self.breaker_for(Some(key));
        let (gate, _permit) = self.enter(breaker)?;
        let mut invocation = script.key(key);
        for a in args {
            invocation.arg(*a);
        }
        self.stats.round_trips.inc();
        let answer = tokio::time::timeout(self.deadline, invocation.invoke_async(&mut conn)).await;
        let error = match answer {
            Ok(Ok(value)) => {
                breaker.success();
                return Ok(value);
            }
            Ok(Err(e)) => Error::from_redis(e),
            Err(_) => Error::Timeout(self.deadline),
        };
        Err(self.failed(breaker, gate, error))
    }

    /// The connection, or [`Error::Connecting`] (counted) while there is none yet.
    fn connection(&self) -> Result<Conn, Error> {
        self.link.connection().ok_or_else(|| {
            self.stats.unavailable.inc();
            Error::Connecting
        })
    }

    /// Lets one round trip through `breaker` and the bound on calls in flight, or says which
    /// stopped it (counted). The permit is the call's place in flight until dropped.
    fn enter(&self, breaker: &Breaker) -> Result<(Gate, SemaphorePermit<'_>), Error> {
        let gate = breaker.enter(self.monotonic.now_ns());
        if let Gate::Open(_) = gate {
            self.stats.short_circuited.inc();
            return Err(Error::CircuitOpen);
        }
        let Ok(permit) = self.in_flight.try_acquire() else {
            self.stats.overloaded.inc();
            return Err(Error::Overloaded);
        };
        Ok((gate, permit))
    }

    /// Counts a failed call by kind and tells its breaker: Redis unreachable or late counts
    /// against it; an error reply means Redis answered, so it is up.
    fn failed(&self, breaker: &Breaker, gate: Gate, error: Error) -> Error {
        match &error {
            Error::Timeout(_) => self.stats.timeouts.inc(),
            Error::Unavailable(_) => self.stats.unavailable.inc(),
            _ => self.stats.rejected.inc(),
        }
        if error.is_unavailable() {
            if breaker.failure(self.monotonic.now_ns(), gate == Gate::Probe) {
                self.stats.breaker_opened.inc();
            }
        } else {
            breaker.success();
        }
        error
    }

    /// The breaker of the call's keys (they share a slot on a cluster: `Call::command`).
    fn breaker_of(&self, call: &Call<'_>) -> &Breaker {
        self.breaker_for(call.keys.first().map(|key| &key.name[..]))
    }

    /// The breaker of `key`'s slot on a cluster; the one breaker on one node.
    fn breaker_for(&self, key: Option<&[u8]>) -> &Breaker {
        let slot = match (self.cluster, key) {
            (true, Some(key)) => usize::from(cluster::slot(key)),
            _ => 0,
        };
        &self.breakers[(slot / SLOTS_PER_BREAKER).min(self.breakers.len() - 1)]
    }

    /// Whether `wait_replicas` replicas of the call's master got its charge within `left`.
    async fn replicated(&self, mut conn: Conn, call: &Call<'_>, left: Duration) -> bool {
        let Some(key) = call.keys.first() else { return true };
        self.stats.round_trips.inc();
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
        let wait = conn.wait(&key.name, self.wait_replicas, ms);
        let acked = tokio::time::timeout(left + Duration::from_millis(5), wait).await;
        matches!(acked, Ok(Ok(n)) if n >= u64::from(self.wait_replicas))
    }

    /// `EVALSHA`, loading the script again if Redis lost it (restart, `SCRIPT FLUSH`).
    async fn eval(&self, mut conn: Conn, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        self.stats.round_trips.inc();
        // An error reply comes back as a value: turn it into an error to sort it.
        match conn.req_packed_command(cmd).await.and_then(redis::Value::extract_error) {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.stats.script_loads.inc();
                let _: String = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(script::SOURCE)
                    .query_async(&mut conn)
                    .await?;
                conn.req_packed_command(cmd).await.and_then(redis::Value::extract_error)
            }
            answer => answer,
        }
    }
}
