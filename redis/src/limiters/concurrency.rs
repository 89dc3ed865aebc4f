//! [`AsyncRedisConcurrency`]: at most `max` permits of a key in flight across every process that
//! shares the Redis, each permit a lease that returns by itself once its TTL has passed.

use crate::connection::builder::Builder;
use crate::connection::client::Client;
use crate::error::Error;
use crate::limiters::permit::RedisPermit;
use crate::limiters::permit_set::{check_ttl, op, Shared};
use crate::limiters::token::new_token;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The largest `max`.
pub const MAX_PERMITS: u64 = u32::MAX as u64;

/// Permits held as leases in Redis, for async code (tokio): at most `max` permits of one key are
/// held at once across every client of the Redis (and prefix), each until it is released or its
/// TTL passes without a renewal.
///
/// Each key is one sorted set at `prefix + "permits1:" + key` (one key: one slot, so it works on
/// a Redis Cluster as on one node): member = a permit's token (128 random bits in hex), score =
/// its expiry in ms on the Redis server's clock (`TIME`). One script call drops the expired
/// permits, counts the rest and adds one if fewer than `max` are held; renewing moves a permit's
/// expiry to `now + ttl`; releasing removes it. A holder killed with `kill -9` holds its permits
/// at most until their TTL passes. Redis running each script alone makes the bound exact: never
/// more than `max` unexpired permits of a key exist. The set expires with its last permit.
///
/// When Redis gives no answer (down, the deadline, the breaker: see [`Builder`]) no permit is
/// given: the call returns the [`Error`], whatever the failure policy (a permit cannot be lent
/// without Redis knowing of it). An acquire that Redis runs after the call gave up holds a
/// permit nobody knows: it counts until its TTL passes.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use leakgate_redis::AsyncRedisConcurrency;
/// use std::time::Duration;
/// let permits = AsyncRedisConcurrency::connect("redis://127.0.0.1:6379/").await?;
/// match permits.try_acquire(b"partner-api", 5, Duration::from_secs(30)).await? {
///     Ok(mut permit) => {
///         permit.keep_alive()?; // renewed every 10 s while held: the call may take longer
///         // call the partner; `permit.lost()` resolves if the permit could not be kept
///         permit.release().await?;
///     }
///     Err(busy) => println!("{} in flight; retry in {:?}", busy.in_flight, busy.retry_after),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncRedisConcurrency {
    shared: Arc<Shared>,
}

/// Why no permit was given: the key already had `max` permits held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy {
    /// Permits of the key held when the call was decided.
    pub in_flight: u64,
    /// When the earliest of them expires if nobody renews or releases it (an upper bound on the
    /// wait for a free permit when holders stall; released permits free one sooner).
    pub retry_after: Duration,
}

impl AsyncRedisConcurrency {
    /// Connects with every default (see [`Builder`]).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let p = leakgate_redis::AsyncRedisConcurrency::connect("redis://127.0.0.1/").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<AsyncRedisConcurrency, Error> {
        Builder::new(url).connect_concurrency_async().await
    }

    /// Connects to a Redis Cluster through `seeds` (any of its nodes) with every default:
    /// [`Builder::cluster`] then [`Builder::connect_concurrency_async`]. Each key's permits live
    /// in one slot, so everything here (background renewal included) works as on one node.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let seeds = ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"];
    /// let p = leakgate_redis::AsyncRedisConcurrency::connect_cluster(&seeds).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_cluster(
        seeds: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<AsyncRedisConcurrency, Error> {
        Builder::cluster(seeds).connect_concurrency_async().await
    }

    async fn from_builder(b: Builder) -> Result<AsyncRedisConcurrency, Error> {
        if !b.quotas.is_empty() || b.leases.is_some() {
            return Err(Error::Config("permits take no quota and no leases".into()));
        }
        let shared = Shared::new(Client::connect(&b).await?);
        Ok(AsyncRedisConcurrency { shared: Arc::new(shared) })
    }

    /// Takes one of `key`'s `max` permits for `ttl` in one round trip: `Ok(Ok(permit))`,
    /// `Ok(Err(busy))` when `max` are held, or the reason Redis gave no answer. `max` must be in
    /// `1..=`[`MAX_PERMITS`] and `ttl` at least 1 ms and at most [`MAX_TTL`](crate::MAX_TTL)
    /// ([`Error::InvalidRequest`] otherwise).
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let ttl = std::time::Duration::from_secs(5);
    /// let first = p.try_acquire(b"db", 1, ttl).await?;
    /// assert!(p.try_acquire(b"db", 1, ttl).await?.is_err()); // the one permit is held
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(
        &self,
        key: &[u8],
        max: u64,
        ttl: Duration,
    ) -> Result<Result<RedisPermit, Busy>, Error> {
        let ttl_ms = check_ttl(ttl)?;
        if max == 0 || max > MAX_PERMITS {
            return Err(Error::InvalidRequest("max must be between 1 and 2^32 - 1"));
        }
        let token = new_token();
        let key = self.redis_key(key);
        let (max_s, ttl_s) = (max.to_string(), ttl_ms.to_string());
        let args: [&[u8]; 4] = [b"a", token.as_bytes(), max_s.as_bytes(), ttl_s.as_bytes()];
        let sent = std::time::Instant::now();
        let value = self.shared.client.eval_on(&self.shared.script, &key, &args).await?;
        let (got, in_flight, retry_ms): (u64, u64, i64) = redis::from_redis_value(value)
            .map_err(|e| Error::Rejected(format!("unexpected reply to acquire: {e}")))?;
        if got == 1 {
            let shared = Arc::clone(&self.shared);
            Ok(Ok(RedisPermit::new(shared, key, token, ttl, in_flight, sent)))
        } else {
            let retry_after = Duration::from_millis(u64::try_from(retry_ms).unwrap_or(0));
            Ok(Err(Busy { in_flight, retry_after }))
        }
    }

    /// Releases the permit `token` of `key` (as [`RedisPermit::token`] gave it, perhaps to
    /// another process): `true` if it was held, `false` if it had expired or was released.
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = p.try_acquire(b"db", 3, std::time::Duration::from_secs(5)).await?.unwrap();
    /// let token = permit.into_token();
    /// assert!(p.release_token(b"db", &token).await?);
    /// assert!(!p.release_token(b"db", &token).await?);
    /// # Ok(()) }
    /// ```
    pub async fn release_token(&self, key: &[u8], token: &str) -> Result<bool, Error> {
        op(&self.shared, &self.redis_key(key), b"x", token, 0).await
    }

    /// Renews the permit `token` of `key` for `ttl` from now: `true` if it was still held.
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let ttl = std::time::Duration::from_secs(5);
    /// let token = p.try_acquire(b"db", 3, ttl).await?.unwrap().into_token();
    /// assert!(p.renew_token(b"db", &token, ttl).await?);
    /// # Ok(()) }
    /// ```
    pub async fn renew_token(&self, key: &[u8], token: &str, ttl: Duration) -> Result<bool, Error> {
        let ttl_ms = check_ttl(ttl)?;
        op(&self.shared, &self.redis_key(key), b"r", token, ttl_ms).await
    }

    /// The Redis key that holds `key`'s permits.
    ///
    /// ```no_run
    /// # fn f(p: leakgate_redis::AsyncRedisConcurrency) {
    /// assert!(p.redis_key(b"db").ends_with(b"permits1:db"));
    /// # }
    /// ```
    pub fn redis_key(&self, key: &[u8]) -> Vec<u8> {
        let mut name = self.shared.key_head.clone();
        name.extend_from_slice(key);
        name
    }

    /// The connection's counters.
    ///
    /// ```no_run
    /// # fn f(p: leakgate_redis::AsyncRedisConcurrency) {
    /// println!("{} round trips", p.stats().round_trips);
    /// # }
    /// ```
    pub fn stats(&self) -> crate::Stats {
        self.shared.client.stats.snapshot()
    }
}

impl fmt::Debug for AsyncRedisConcurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRedisConcurrency")
            .field("prefix", &String::from_utf8_lossy(&self.shared.key_head))
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// Connects permits held as leases ([`AsyncRedisConcurrency`]) with these settings (no
    /// quota, no leases; the failure policy does not apply: see the type).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let p = leakgate_redis::Builder::new("redis://127.0.0.1/")
    ///     .deadline(std::time::Duration::from_millis(50))
    ///     .connect_concurrency_async()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_concurrency_async(self) -> Result<AsyncRedisConcurrency, Error> {
        AsyncRedisConcurrency::from_builder(self).await
    }
}
