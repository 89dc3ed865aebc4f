//! [`AsyncRedisCell`]: redis-cell's bucket in Redis: one TAT per key, the quota given by each
//! call.

use crate::connection::builder::Builder;
use crate::connection::client::Client;
use crate::connection::decide::decide;
use crate::connection::fallback;
use crate::connection::policy::FailurePolicy;
use crate::error::Error;
use crate::script::units::Rate;
use crate::script::{Call, CallKey, Keep};
use crate::stats::Stats;
use leakgate::{Admitted, Denied, Quota};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// redis-cell's bucket, shared through Redis, for async code (tokio): each key has one bucket,
/// its theoretical arrival time (TAT), and each call brings the quota it is decided under, so
/// the same key called with another quota is not a new bucket (what `CL.THROTTLE` promises).
///
/// A call of cost `n` under quota `q` at time `t` conforms iff `max(TAT, t) + n*T - t <= tau`
/// with `q`'s `T` and `tau`, and then `TAT := max(TAT, t) + n*T`; every process sharing the
/// Redis and prefix shares each key's TAT. A TAT is kept in the units of the quota that wrote it
/// (exact, as in [crate docs](crate#exact-in-53-bits)); a call in other units reads it rounded
/// up to the whole nanosecond, so a decision can differ from the rational model only within
/// 1 ns of its boundary, and then refuses. A TAT beyond a smaller quota's `tau` stays: that
/// quota refuses until the bucket has drained to it.
///
/// Keys live at `prefix + "tat1:" + key` (the value also names the quota of its last charge,
/// [`stored_quota`](Self::stored_quota) reads it) and expire once their bucket is empty. Each
/// call is one round trip under the deadline, breaker and bound on calls in flight of
/// [`Builder`]; [`check_n_explained`](Self::check_n_explained) answers with the failure policy
/// when Redis gives no decision.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use leakgate_redis::AsyncRedisCell;
/// let cell = AsyncRedisCell::connect("redis://127.0.0.1:6379/").await?;
/// let five_a_minute = "5/min".parse()?;
/// let decided = cell.try_check_n(b"user123", five_a_minute, 1).await?;
/// # let _ = decided; Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncRedisCell {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    policy: FailurePolicy,
    /// `prefix + "tat1:"`.
    key_head: Vec<u8>,
}

impl AsyncRedisCell {
    /// Connects with every default (see [`Builder`]), waiting for Redis at most a second; an
    /// unreachable Redis is not an error (see [`Builder::connect`]).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let cell = leakgate_redis::AsyncRedisCell::connect("redis://127.0.0.1/").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<AsyncRedisCell, Error> {
        Builder::new(url).connect_cell_async().await
    }

    pub(crate) async fn from_builder(b: Builder) -> Result<AsyncRedisCell, Error> {
        if !b.quotas.is_empty() {
            return Err(Error::Config(
                "each call brings its quota: leave Builder::quota out".into(),
            ));
        }
        if b.leases.is_some() {
            return Err(Error::Config("leases are not available with per-call quotas".into()));
        }
        let client = Client::connect(&b).await?;
        let mut key_head = client.prefix.clone();
        key_head.extend_from_slice(b"tat1:");
        let shared = Shared { client, policy: b.policy, key_head };
        Ok(AsyncRedisCell { shared: Arc::new(shared) })
    }

    /// Decides a request of cost `n` for `key` under `quota` in one round trip: `Ok(decision)`,
    /// or the reason Redis gave none. `n = 0` peeks; `n` above the burst never conforms.
    ///
    /// ```no_run
    /// # async fn f(cell: leakgate_redis::AsyncRedisCell) -> Result<(), Box<dyn std::error::Error>> {
    /// match cell.try_check_n(b"user123", "30/min burst 16".parse()?, 1).await? {
    ///     Ok(ok) => println!("{} left", ok.remaining()),
    ///     Err(no) => println!("retry in {:?}", no.retry_after()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_check_n(
        &self,
        key: &[u8],
        quota: Quota,
        n: u64,
    ) -> Result<Result<Admitted, Denied>, Error> {
        let c = &self.shared.client;
        let rates = [Rate::new(quota)];
        let keys = [CallKey {
            name: self.redis_key(key),
            rates: &rates,
            times_named: 1,
            group: 0,
            origins: Vec::new(),
        }];
        let never = n > quota.burst();
        let note = quota.to_string();
        let call = Call {
            keys: &keys,
            n,
            now_ns: c.caller_now(),
            max_wait_ns: 0,
            lease_want: 0,
            known_tat: &[],
            write: n > 0 && !never,
            expiry_slack_ms: c.expiry_slack_ms,
            keep: Keep::Tat(&note),
        };
        let reply = decide(c, &call, c.deadline).await?;
        let backlog = reply.backlogs.first().copied().unwrap_or(0);
        let rate = &rates[0];
        let decision = if n == 0 && backlog > rate.tau() {
            // A peek at a bucket past this quota's tau (a larger burst filled it): limited
            // until it is within it, as the inequality says for n = 0.
            let over = rate.units_to_duration_ceil(backlog - rate.tau());
            Err(Denied::new(0, rate.units_to_duration_ceil(backlog), Some(over)))
        } else if never {
            Err(reply.denied(&keys, 0, true))
        } else if reply.granted {
            Ok(reply.admitted(&keys, n))
        } else {
            Err(reply.denied(&keys, 0, false))
        };
        match &decision {
            Ok(_) => c.stats.redis_admitted.inc(),
            Err(_) => c.stats.redis_denied.inc(),
        }
        Ok(decision)
    }

    /// [`try_check_n`](Self::try_check_n), answered by the failure policy when Redis gives no
    /// decision (with the reason): `Deny` and `Allow` answer by themselves, and
    /// [`FailurePolicy::Local`] by `local`, the caller's own bucket for the key at its share of
    /// the quota (this limiter keeps none: the quotas come with the calls).
    ///
    /// ```no_run
    /// # async fn f(cell: leakgate_redis::AsyncRedisCell) -> Result<(), Box<dyn std::error::Error>> {
    /// let quota = "10/s".parse()?;
    /// let (decision, failure) = cell
    ///     .check_n_explained(b"k", quota, 1, || Err(leakgate::Denied::new(0, Default::default(), None)))
    ///     .await;
    /// if let Some(e) = failure {
    ///     eprintln!("the failure policy answered ({e}): {}", decision.is_ok());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check_n_explained(
        &self,
        key: &[u8],
        quota: Quota,
        n: u64,
        local: impl FnOnce() -> Result<Admitted, Denied>,
    ) -> (Result<Admitted, Denied>, Option<Error>) {
        let c = &self.shared.client;
        match self.try_check_n(key, quota, n).await {
            Ok(decision) => (decision, None),
            // A request that cannot be expressed is refused whatever the policy.
            Err(e @ Error::InvalidRequest(_)) => {
                (Err(Denied::new(0, Duration::ZERO, None)), Some(e))
            }
            Err(e) => {
                (fallback::answer(self.shared.policy, c.retry_hint(), &c.stats, local), Some(e))
            }
        }
    }

    /// The failure policy.
    ///
    /// ```no_run
    /// # fn f(cell: leakgate_redis::AsyncRedisCell) {
    /// println!("{:?}", cell.failure_policy());
    /// # }
    /// ```
    pub fn failure_policy(&self) -> FailurePolicy {
        self.shared.policy
    }

    /// The Redis key that holds `key`'s bucket.
    ///
    /// ```no_run
    /// # fn f(cell: leakgate_redis::AsyncRedisCell) {
    /// assert!(cell.redis_key(b"user123").ends_with(b"tat1:user123"));
    /// # }
    /// ```
    pub fn redis_key(&self, key: &[u8]) -> Vec<u8> {
        let head = &self.shared.key_head;
        let mut full = Vec::with_capacity(head.len() + key.len());
        full.extend_from_slice(head);
        full.extend_from_slice(key);
        full
    }

    /// The quota of the last charge of a bucket, from the value stored at its Redis key (what
    /// `GET` returns), or `None` if the value is not such a bucket.
    ///
    /// ```
    /// use leakgate_redis::AsyncRedisCell;
    /// let quota = AsyncRedisCell::stored_quota(b"1700000000000:5@1;10/s burst 20");
    /// assert_eq!(quota.unwrap().to_string(), "10/s burst 20");
    /// assert!(AsyncRedisCell::stored_quota(b"1700000000000:5").is_none());
    /// ```
    pub fn stored_quota(value: &[u8]) -> Option<Quota> {
        let text = std::str::from_utf8(value).ok()?;
        let (units, note) = text.split_once(';')?;
        let (tat, d) = units.split_once('@')?;
        let (ms, lo) = tat.split_once(':')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (digits(ms) && digits(lo) && digits(d)).then_some(())?;
        note.parse().ok()
    }

    /// The limiter's counters (round trips, failures, policy answers).
    ///
    /// ```no_run
    /// # fn f(cell: leakgate_redis::AsyncRedisCell) {
    /// println!("{} round trips", cell.stats().round_trips);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.client.stats.snapshot()
    }
}

impl fmt::Debug for AsyncRedisCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRedisCell")
            .field("policy", &self.shared.policy)
            .finish_non_exhaustive()
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
