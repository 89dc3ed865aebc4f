//! [`AsyncRedisLimiter`]: the limit in Redis, decided by one script call per request.

use crate::connection::builder::Builder;
use crate::connection::client::Client;
use crate::connection::decide::decide;
use crate::connection::fallback::Fallback;
use crate::error::Error;
use crate::limiters::lease_table::LeaseTable;
use crate::limiters::reservation::RedisReservation;
use crate::script::units::{Rate, MAX_WAIT};
use crate::script::{Call, CallKey, Keep, Reply};
use crate::stats::Stats;
use leakgate::{Admitted, Denied, Quota};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A limit shared through Redis, for async code (tokio): every process that connects with the
/// same quotas and prefix shares each key's buckets.
///
/// Calls from many tasks are pipelined over one multiplexed connection. Each decision is one
/// round trip (or none, from a lease); each call returns within the deadline, Redis or not.
/// Cloning is cheap and clones share everything.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use leakgate_redis::AsyncRedisLimiter;
/// let lim = AsyncRedisLimiter::connect("redis://127.0.0.1:6379/", "1/s".parse()?).await?;
/// match lim.check("refunds/bank-a").await {
///     Ok(_) => println!("go"),
///     Err(no) => println!("retry in {:?}", no.retry_after()),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncRedisLimiter {
    pub(crate) shared: Arc<Shared>,
}

/// Everything a limiter's handles share.
pub(crate) struct Shared {
    pub(crate) client: Client,
    /// The quotas, compiled: every key has one bucket of each.
    pub(crate) rates: Vec<Rate>,
    /// `prefix + "gcra1" + "/<rate>"... + ":"`: the start of every Redis key of this limiter.
    key_head: Vec<u8>,
    fallback: Fallback,
    pub(crate) leases: Option<LeaseTable>,
    /// The smallest burst over the quotas: a cost above it never conforms.
    pub(crate) min_burst: u64,
}

impl Shared {
    /// The Redis key that holds `key`'s buckets.
    fn redis_key(&self, key: &[u8]) -> Vec<u8> {
        let mut full = Vec::with_capacity(self.key_head.len() + key.len());
        full.extend_from_slice(&self.key_head);
        full.extend_from_slice(key);
        full
    }
}

impl AsyncRedisLimiter {
    /// Connects with one quota and every default (see [`Builder`]), waiting for Redis at most a
    /// second; an unreachable Redis is not an error (see [`Builder::connect`]).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "redis://127.0.0.1/";
    /// let lim = leakgate_redis::AsyncRedisLimiter::connect(url, "5/s".parse()?).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str, quota: Quota) -> Result<AsyncRedisLimiter, Error> {
        Builder::new(url).quota(quota).connect_async().await
    }

    /// Connects to a Redis Cluster through `seeds` (any of its nodes) with one quota and every
    /// default: [`Builder::cluster`] then [`Builder::connect_async`].
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let seeds = ["redis://127.0.0.1:7000/"];
    /// let lim = leakgate_redis::AsyncRedisLimiter::connect_cluster(&seeds, "5/s".parse()?).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_cluster(
        seeds: impl IntoIterator<Item = impl AsRef<str>>,
        quota: Quota,
    ) -> Result<AsyncRedisLimiter, Error> {
        Builder::cluster(seeds).quota(quota).connect_async().await
    }

    /// A builder, for several quotas or other settings.
    ///
    /// ```
    /// let b = leakgate_redis::AsyncRedisLimiter::builder("redis://127.0.0.1/");
    /// # let _ = b;
    /// ```
    pub fn builder(url: &str) -> Builder {
        Builder::new(url)
    }

    pub(crate) async fn from_builder(b: Builder) -> Result<AsyncRedisLimiter, Error> {
        if b.quotas.is_empty() {
            return Err(Error::Config("a limiter needs at least one quota".into()));
        }
        let client = Client::connect(&b).await?;
        let rates: Vec<Rate> = b.quotas.iter().map(|&q| Rate::new(q)).collect();
        let fallback = Fallback::new(b.policy, &b.quotas, &client.local_clock)?;
        let mut key_head = client.prefix.clone();
        key_head.extend_from_slice(b"gcra1");
        for rate in &rates {
            key_head.push(b'/');
            key_head.extend_from_slice(rate.id().as_bytes());
        }
        key_head.push(b':');
        let shared = Shared {
            client,
            min_burst: rates.iter().map(|r| r.quota().burst()).min().unwrap_or(0),
            rates,
            key_head,
            fallback,
            leases: b.leases.map(LeaseTable::new),
        };
        Ok(AsyncRedisLimiter { shared: Arc::new(shared) })
    }

    /// Checks one unit for `key`: `check_n(key, 1)`.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// if lim.check("api/alice").await.is_ok() { /* serve */ }
    /// # }
    /// ```
    pub async fn check(&self, key: impl AsRef<[u8]>) -> Result<Admitted, Denied> {
        self.check_n(key, 1).await
    }

    /// Checks a request of cost `n` for `key`, with the meaning of
    /// [`leakgate::Limiter::check_n`] across every process sharing the limit. When Redis cannot
    /// decide, the failure policy answers. With leases on, a hot key is often answered here.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// let ok = lim.check_n("uploads/bob", 5).await;
    /// # let _ = ok; }
    /// ```
    pub async fn check_n(&self, key: impl AsRef<[u8]>, n: u64) -> Result<Admitted, Denied> {
        let key = key.as_ref();
        if let Some(decided) = self.try_local(key, n) {
            return decided;
        }
        match &self.shared.leases {
            Some(table) if n >= 1 && n <= self.shared.min_burst => {
                self.leased_check(table, key, n).await
            }
            _ => self.or_policy(&[key], n, self.decide(&[key], n, 0).await),
        }
    }

    /// What the buckets of `key` would say to one unit now, changing nothing: `check_n(key, 0)`.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// let left = lim.peek("api/alice").await.map(|ok| ok.remaining());
    /// # let _ = left; }
    /// ```
    pub async fn peek(&self, key: impl AsRef<[u8]>) -> Result<Admitted, Denied> {
        self.check_n(key, 0).await
    }

    /// Checks a request of cost `n` against every bucket of every key, all or nothing: either
    /// all are charged or none is. A key named twice is charged twice. With Redis Cluster every
    /// key must hash to one slot: give them a common `{tag}` (see the crate docs).
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// let ok = lim.check_all_n(&["{acme}/tenant", "{acme}/user/42"], 1).await;
    /// # let _ = ok; }
    /// ```
    pub async fn check_all_n<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        n: u64,
    ) -> Result<Admitted, Denied> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.or_policy(&keys, n, self.decide(&keys, n, 0).await)
    }

    /// The decision of `check_n` without the failure policy: an error when Redis gave none.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// match lim.try_check_n("k", 1).await {
    ///     Ok(decision) => println!("Redis says {:?}", decision.is_ok()),
    ///     Err(e) => println!("no decision: {e}"),
    /// }
    /// # }
    /// ```
    pub async fn try_check_n(
        &self,
        key: impl AsRef<[u8]>,
        n: u64,
    ) -> Result<Result<Admitted, Denied>, Error> {
        self.decide(&[key.as_ref()], n, 0).await.map(|(decision, _)| decision)
    }

    /// Reserves one unit: `reserve_n(key, 1, max_wait)`.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// let r = lim.reserve("jobs", std::time::Duration::from_secs(1)).await;
    /// # let _ = r; }
    /// ```
    pub async fn reserve(
        &self,
        key: impl AsRef<[u8]>,
        max_wait: Duration,
    ) -> Result<RedisReservation, Denied> {
        self.reserve_n(key, 1, max_wait).await
    }

    /// Reserves `n` units for `key`, to go at the earliest time they conform in every bucket, if
    /// that is at most `max_wait` from now (cut to about 34 years); otherwise denies and changes
    /// nothing. Every process's reservations on a key are served in the order Redis granted
    /// them: the queue is global. The reservation says when to go; waiting is the caller's.
    ///
    /// ```no_run
    /// # async fn f(lim: leakgate_redis::AsyncRedisLimiter) -> Result<(), leakgate::Denied> {
    /// let r = lim.reserve_n("jobs", 1, std::time::Duration::from_secs(5)).await?;
    /// tokio::time::sleep(r.delay()).await;
    /// # Ok(()) }
    /// ```
    pub async fn reserve_n(
        &self,
        key: impl AsRef<[u8]>,
        n: u64,
        max_wait: Duration,
    ) -> Result<RedisReservation, Denied> {
        let key = key.as_ref();
        let max_wait_ns = u64::try_from(max_wait.min(MAX_WAIT).as_nanos()).unwrap_or(u64::MAX);
        match self.decide(&[key], n, max_wait_ns).await {
            Ok((decision, reply)) => decision.map(|_| RedisReservation::new(&reply)),
            Err(e) => {
                let now = self.shared.client.local_clock.now_ns();
                self.or_policy(&[key], n, Err(e)).map(|_| RedisReservation::at(now))
            }
        }
    }

    /// The limiter's counters.
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// println!("{} round trips", lim.stats().round_trips);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.client.stats.snapshot()
    }

    /// The quotas every key is limited by.
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// assert!(!lim.quotas().is_empty());
    /// # }
    /// ```
    pub fn quotas(&self) -> Vec<Quota> {
        self.shared.rates.iter().map(|r| r.quota()).collect()
    }

    /// The Redis key that holds `key`'s buckets.
    ///
    /// ```no_run
    /// # fn f(lim: leakgate_redis::AsyncRedisLimiter) {
    /// assert!(lim.redis_key("k").ends_with(b":k"));
    /// # }
    /// ```
    pub fn redis_key(&self, key: impl AsRef<[u8]>) -> Vec<u8> {
        self.shared.redis_key(key.as_ref())
    }

    /// One script call deciding cost `n` on `keys` (may wait `max_wait_ns`), with its reply.
    pub(crate) async fn decide(
        &self,
        keys: &[&[u8]],
        n: u64,
        max_wait_ns: u64,
    ) -> Result<(Result<Admitted, Denied>, Reply), Error> {
        let c = &self.shared.client;
        self.decide_leasing(keys, n, max_wait_ns, (0, &[]), c.caller_now(), c.deadline).await
    }

    /// `decide`, asking for `lease_want` extra units (see [`crate::limiters::lease_table`]) with the TAT of each
    /// bucket as this process last saw it (`known_tat`, by which the script finds a lost key), on
    /// the caller's clock reading `now_ns` (or Redis `TIME`), within `budget`.
    pub(crate) async fn decide_leasing(
        &self,
        keys: &[&[u8]],
        n: u64,
        max_wait_ns: u64,
        (lease_want, known_tat): (u64, &[u128]),
        now_ns: Option<u64>,
        budget: Duration,
    ) -> Result<(Result<Admitted, Denied>, Reply), Error> {
        let (s, c) = (&*self.shared, &self.shared.client);
        if keys.is_empty() {
            return Err(Error::InvalidRequest("a request needs at least one key"));
        }
        let mut call_keys: Vec<CallKey<'_>> = Vec::with_capacity(keys.len());
        for key in keys {
            let name = s.redis_key(key);
            match call_keys.iter_mut().find(|k| k.name == name) {
                Some(named) => named.times_named += 1,
                None => call_keys.push(CallKey {
                    name,
                    rates: &s.rates,
                    times_named: 1,
                    group: 0,
                    origins: Vec::new(),
                }),
            }
        }
        let most_named = call_keys.iter().map(|k| k.times_named).max().unwrap_or(1);
        let never = n.saturating_mul(most_named) > s.min_burst;
        let call = Call {
            keys: &call_keys,
            n,
            now_ns,
            max_wait_ns,
            lease_want,
            known_tat,
            write: n > 0 && !never,
            expiry_slack_ms: c.expiry_slack_ms,
            keep: Keep::Plain,
        };
        let reply = decide(c, &call, budget).await?;
        let decision = if never {
            Err(reply.denied(&call_keys, 0, true))
        } else if reply.granted {
            Ok(reply.admitted(&call_keys, n))
        } else {
            Err(reply.denied(&call_keys, max_wait_ns, false))
        };
        match &decision {
            Ok(_) => c.stats.redis_admitted.inc(),
            Err(_) => c.stats.redis_denied.inc(),
        }
        c.stats.leased_units.add(reply.leased);
        if reply.lost {
            c.stats.lost_buckets.inc();
        }
        Ok((decision, reply))
    }

    /// The decision, or the failure policy's answer when there is none.
    pub(crate) fn or_policy(
        &self,
        keys: &[&[u8]],
        n: u64,
        decided: Result<(Result<Admitted, Denied>, Reply), Error>,
    ) -> Result<Admitted, Denied> {
        match decided {
            Ok((decision, _)) => decision,
            // A request that cannot be expressed is refused whatever the policy.
            Err(Error::InvalidRequest(_)) => Err(Denied::new(0, Duration::ZERO, None)),
            Err(_) => {
                let (s, c) = (&self.shared, &self.shared.client);
                s.fallback.decide(keys, n, c.retry_hint(), &c.stats)
            }
        }
    }
}

impl fmt::Debug for AsyncRedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRedisLimiter").field("quotas", &self.quotas()).finish_non_exhaustive()
    }
}

impl Builder {
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
