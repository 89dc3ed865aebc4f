//! [`RedisLimiter`]: the blocking face of [`AsyncRedisLimiter`], on a runtime of its own.

use crate::connection::builder::Builder;
use crate::connection::runtime::OwnRuntime;
use crate::error::Error;
use crate::limiters::limiter::AsyncRedisLimiter;
use crate::limiters::reservation::RedisReservation;
use crate::stats::Stats;
use leakgate::{Admitted, Denied, Quota};
use std::fmt;
use std::future::Future;
use std::time::Duration;

/// A limit shared through Redis, for code that is not async: every process that connects with
/// the same quotas and prefix shares each key's buckets, with the meaning of
/// [`leakgate::Limiter`] (GCRA, exact, never more than the quota across all processes).
///
/// Each call blocks for one round trip at most (none when a lease answers), and never longer
/// than the deadline: then the [`FailurePolicy`](crate::FailurePolicy) answers (by default it
/// denies). The limiter runs its connection on a one-thread tokio runtime of its own; calls from
/// many threads are pipelined over that one connection. `Send + Sync`: share it by reference or
/// `Arc`.
///
/// ```no_run
/// use leakgate_redis::RedisLimiter;
/// let lim = RedisLimiter::connect("redis://127.0.0.1:6379/", "1/s".parse()?)?;
/// match lim.check("refunds/bank-a") {
///     Ok(_) => println!("refund sent"),
///     Err(no) => println!("try again in {:?}", no.retry_after()),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisLimiter {
    /// Shut down first (fields drop in declaration order), then the connection goes.
    runtime: OwnRuntime,
    limiter: AsyncRedisLimiter,
}

impl RedisLimiter {
    /// Connects with one quota and every default (see [`Builder`]), blocking until Redis
    /// answers or a second has passed. An unreachable Redis is not an error: the limiter
    /// connects in the background and denies until then (the default failure policy); a
    /// malformed URL is.
    ///
    /// ```no_run
    /// let lim = leakgate_redis::RedisLimiter::connect("redis://127.0.0.1/", "100/s".parse()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect(url: &str, quota: Quota) -> Result<RedisLimiter, Error> {
        Builder::new(url).quota(quota).connect()
    }

    /// Connects to a Redis Cluster through `seeds` (any of its nodes) with one quota and every
    /// default: [`Builder::cluster`] then [`Builder::connect`].
    ///
    /// ```no_run
    /// use leakgate_redis::RedisLimiter;
    /// let seeds = ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"];
    /// let lim = RedisLimiter::connect_cluster(&seeds, "100/s".parse()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect_cluster(
        seeds: impl IntoIterator<Item = impl AsRef<str>>,
        quota: Quota,
    ) -> Result<RedisLimiter, Error> {
        Builder::cluster(seeds).quota(quota).connect()
    }

    /// A builder, for several quotas or other settings.
    ///
    /// ```
    /// let b = leakgate_redis::RedisLimiter::builder("redis://127.0.0.1/");
    /// # let _ = b;
    /// ```
    pub fn builder(url: &str) -> Builder {
        Builder::new(url)
    }

    pub(crate) fn from_builder(b: Builder) -> Result<RedisLimiter, Error> {
        let runtime = OwnRuntime::start()?;
        let limiter = runtime.run(AsyncRedisLimiter::from_builder(b))?;
        Ok(RedisLimiter { limiter, runtime })
    }

    /// Checks one unit for `key`: `check_n(key, 1)`.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// if lim.check("refunds/bank-a").is_ok() { /* send it */ }
    /// # }
    /// ```
    pub fn check(&self, key: impl AsRef<[u8]>) -> Result<Admitted, Denied> {
        self.check_n(key, 1)
    }

    /// Checks a request of cost `n` for `key` (see [`AsyncRedisLimiter::check_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// let ok = lim.check_n("uploads/bob", 5);
    /// # let _ = ok; }
    /// ```
    pub fn check_n(&self, key: impl AsRef<[u8]>, n: u64) -> Result<Admitted, Denied> {
        let key = key.as_ref();
        if let Some(decided) = self.limiter.try_local(key, n) {
            return decided;
        }
        self.run(self.limiter.check_n(key, n))
    }

    /// What `key`'s buckets would say now, changing nothing: `check_n(key, 0)`.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// let left = lim.peek("api/alice").map(|ok| ok.remaining());
    /// # let _ = left; }
    /// ```
    pub fn peek(&self, key: impl AsRef<[u8]>) -> Result<Admitted, Denied> {
        self.check_n(key, 0)
    }

    /// Checks cost `n` against every bucket of every key, all or nothing (see
    /// [`AsyncRedisLimiter::check_all_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// let ok = lim.check_all_n(&["{acme}/tenant", "{acme}/user/42"], 1);
    /// # let _ = ok; }
    /// ```
    pub fn check_all_n<K: AsRef<[u8]> + Sync>(
        &self,
        keys: &[K],
        n: u64,
    ) -> Result<Admitted, Denied> {
        self.run(self.limiter.check_all_n(keys, n))
    }

    /// The decision without the failure policy (see [`AsyncRedisLimiter::try_check_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// if let Err(e) = lim.try_check_n("k", 1) { eprintln!("no decision: {e}"); }
    /// # }
    /// ```
    pub fn try_check_n(
        &self,
        key: impl AsRef<[u8]>,
        n: u64,
    ) -> Result<Result<Admitted, Denied>, Error> {
        self.run(self.limiter.try_check_n(key.as_ref(), n))
    }

    /// Reserves one unit: `reserve_n(key, 1, max_wait)`.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// let r = lim.reserve("jobs", std::time::Duration::from_secs(1));
    /// # let _ = r; }
    /// ```
    pub fn reserve(
        &self,
        key: impl AsRef<[u8]>,
        max_wait: Duration,
    ) -> Result<RedisReservation, Denied> {
        self.reserve_n(key, 1, max_wait)
    }

    /// Reserves `n` units (see [`AsyncRedisLimiter::reserve_n`]).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) -> Result<(), leakgate::Denied> {
    /// let r = lim.reserve_n("jobs", 1, std::time::Duration::from_secs(5))?;
    /// std::thread::sleep(r.delay());
    /// # Ok(()) }
    /// ```
    pub fn reserve_n(
        &self,
        key: impl AsRef<[u8]>,
        n: u64,
        max_wait: Duration,
    ) -> Result<RedisReservation, Denied> {
        self.run(self.limiter.reserve_n(key.as_ref(), n, max_wait))
    }

    /// The limiter's counters.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// let s = lim.stats();
    /// println!("{} decisions in {} round trips", s.decisions(), s.round_trips);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.limiter.stats()
    }

    /// The quotas every key is limited by.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// println!("{:?}", lim.quotas());
    /// # }
    /// ```
    pub fn quotas(&self) -> Vec<Quota> {
        self.limiter.quotas()
    }

    /// The Redis key that holds `key`'s buckets.
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// println!("{}", String::from_utf8_lossy(&lim.redis_key("refunds/bank-a")));
    /// # }
    /// ```
    pub fn redis_key(&self, key: impl AsRef<[u8]>) -> Vec<u8> {
        self.limiter.redis_key(key)
    }

    /// The async limiter underneath (sharing everything with this one).
    ///
    /// ```no_run
    /// # fn f(lim: &leakgate_redis::RedisLimiter) {
    /// let async_lim = lim.as_async().clone();
    /// # let _ = async_lim; }
    /// ```
    pub fn as_async(&self) -> &AsyncRedisLimiter {
        &self.limiter
    }

    fn run<F: Future + Send>(&self, fut: F) -> F::Output
    where
        F::Output: Send,
    {
        self.runtime.run(fut)
    }
}

impl fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter").field("quotas", &self.quotas()).finish_non_exhaustive()
    }
}

impl Builder {
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
}
