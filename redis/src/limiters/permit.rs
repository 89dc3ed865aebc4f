//! [`RedisPermit`]: one permit of an [`AsyncRedisConcurrency`](crate::AsyncRedisConcurrency)
//! held as a lease, released on drop, optionally renewed in the background while held.
//!
//! # Implementation details
//!
//! A permit expires on Redis at the Redis time its last acquire or renewal ran, plus its TTL.
//! The client cannot read that time, but it knows when it *sent* that call: the call ran after
//! it was sent, so `sent + ttl` (on this process's clock) is never later than the expiry, as
//! long as the two clocks run at about the same rate. That instant, the permit's *deadline*, is
//! kept in [`Lease`], shared by the permit (a manual [`RedisPermit::renew`] moves it too) and
//! its renewer.
//!
//! The renewer ([`RedisPermit::keep_alive`]) is a tokio task that renews every `ttl / 3` after
//! the last confirmed renewal. A renewal that fails (no answer, the deadline, the breaker) is
//! retried every `ttl / 10`; the permit is declared *lost* when Redis says it no longer holds
//! it (it expired, or someone released its token) or when `ttl / 10` before its deadline
//! passes without a confirmed renewal (the margin absorbs the timer's lateness, a millisecond
//! or so, and clock rate differences): soon it may be held by someone else, and the holder learns it
//! through [`RedisPermit::lost`] or [`RedisPermit::is_lost`]. The task ends then, or when the
//! permit is released, dropped or turned into a token (it is aborted; a renewal already sent
//! may still run, and finds nothing to renew if the release ran first: the script renews only
//! a token it holds).

use crate::error::Error;
use crate::limiters::permit_set::{check_ttl, op, Shared};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A permit held in Redis. Dropping it releases it in the background (when dropped inside a
/// tokio runtime; otherwise it returns when its TTL passes); [`release`](Self::release) releases
/// it and says whether it was still held; [`renew`](Self::renew) extends it by its TTL once, and
/// [`keep_alive`](Self::keep_alive) keeps renewing it in the background until it is released,
/// reporting through [`lost`](Self::lost) if it could not be kept.
///
/// ```no_run
/// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
/// let permit = p.try_acquire(b"gpu", 2, std::time::Duration::from_secs(10)).await?.unwrap();
/// assert_eq!(permit.token().len(), 32);
/// assert!(permit.renew().await?);
/// # Ok(()) }
/// ```
pub struct RedisPermit {
    shared: Arc<Shared>,
    key: Vec<u8>,
    token: String,
    ttl: Duration,
    in_flight: u64,
    lease: Arc<Lease>,
    /// The background renewer, once [`keep_alive`](RedisPermit::keep_alive) started it.
    renewer: Option<JoinHandle<()>>,
    /// `false` once released or handed over as a token: dropping it then does nothing.
    armed: bool,
}

/// What a permit and its renewer share: when the permit must be taken as expired, and whether
/// it was lost.
struct Lease {
    base: Instant,
    /// When the latest confirmed acquire or renewal was sent, in ns after `base`: the permit
    /// holds on Redis at least until this plus the TTL. Only grows (`fetch_max`). Relaxed: a
    /// lone number; nothing else is published through it.
    confirmed_ns: AtomicU64,
    /// `true` once the permit is lost; never goes back to `false`.
    lost: watch::Sender<bool>,
}

impl Lease {
    fn new(sent: Instant) -> Lease {
        Lease { base: sent, confirmed_ns: AtomicU64::new(0), lost: watch::Sender::new(false) }
    }

    /// A renewal sent at `sent` was confirmed.
    fn confirm(&self, sent: Instant) {
        let ns = u64::try_from(sent.saturating_duration_since(self.base).as_nanos());
        self.confirmed_ns.fetch_max(ns.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// When the latest confirmed call was sent.
    fn confirmed(&self) -> Instant {
        let ns = self.confirmed_ns.load(Ordering::Relaxed);
        self.base.checked_add(Duration::from_nanos(ns)).unwrap_or(self.base)
    }

    fn mark_lost(&self) {
        self.lost.send_replace(true);
    }
}

impl RedisPermit {
    /// A permit whose acquire, sent at `sent`, Redis granted.
    pub(super) fn new(
        shared: Arc<Shared>,
        key: Vec<u8>,
        token: String,
        ttl: Duration,
        in_flight: u64,
        sent: Instant,
    ) -> RedisPermit {
        let lease = Arc::new(Lease::new(sent));
        RedisPermit { shared, key, token, ttl, in_flight, lease, renewer: None, armed: true }
    }

    /// The permit's token (32 hex digits).
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = p.try_acquire(b"k", 1, std::time::Duration::from_secs(1)).await?.unwrap();
    /// println!("{}", permit.token());
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Permits of the key held just after this one was taken (this one included).
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = p.try_acquire(b"k", 4, std::time::Duration::from_secs(1)).await?.unwrap();
    /// assert!(permit.in_flight() >= 1);
    /// # Ok(()) }
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Extends the permit to its TTL from now: `true` if it was still held (`false`: it expired
    /// and may have been given to another holder; the permit is then [lost](Self::lost)).
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = p.try_acquire(b"k", 1, std::time::Duration::from_secs(1)).await?.unwrap();
    /// assert!(permit.renew().await?);
    /// # Ok(()) }
    /// ```
    pub async fn renew(&self) -> Result<bool, Error> {
        let ttl_ms = check_ttl(self.ttl)?;
        let sent = Instant::now();
        let held = op(&self.shared, &self.key, b"r", &self.token, ttl_ms).await?;
        if held {
            self.lease.confirm(sent);
        } else {
            self.lease.mark_lost();
        }
        Ok(held)
    }

    /// Keeps the permit while it is held: a tokio task renews it every `ttl / 3` (retrying a
    /// failed renewal every `ttl / 10`) until it is released, dropped or turned into a token.
    /// If Redis says the permit is gone, or no renewal is confirmed by a tenth of the TTL before
    /// the permit may expire (its last confirmed acquire or renewal's send time plus its TTL),
    /// the permit is lost: [`lost`](Self::lost) resolves and [`is_lost`](Self::is_lost) turns
    /// `true` (so, while Redis cannot answer, at `0.9 * ttl` after the last confirmed call, with
    /// the margin for timer lateness), and renewal stops. Calling it again does nothing. Needs a tokio runtime
    /// ([`Error::Config`] outside one). Each held permit costs Redis 3 renewals per TTL.
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// # async fn transcode() {}
    /// let ttl = std::time::Duration::from_secs(3);
    /// let mut permit = p.try_acquire(b"gpu", 2, ttl).await?.unwrap();
    /// permit.keep_alive()?;
    /// tokio::select! {
    ///     _ = transcode() => {} // may take far longer than 3 s
    ///     _ = permit.lost() => eprintln!("permit lost: stop, someone else may hold it now"),
    /// }
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn keep_alive(&mut self) -> Result<(), Error> {
        if self.renewer.is_some() {
            return Ok(());
        }
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Config("keep_alive needs a tokio runtime".into()))?;
        let ttl_ms = check_ttl(self.ttl)?;
        let renewal = Renewal {
            shared: Arc::clone(&self.shared),
            key: self.key.clone(),
            token: self.token.clone(),
            ttl: self.ttl,
            ttl_ms,
            lease: Arc::clone(&self.lease),
        };
        self.renewer = Some(rt.spawn(renewal.run()));
        Ok(())
    }

    /// Resolves once the permit is lost (see [`keep_alive`](Self::keep_alive); without it,
    /// only a [`renew`](Self::renew) that finds the permit gone makes it lost). Cancel-safe.
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut permit = p.try_acquire(b"k", 1, std::time::Duration::from_secs(1)).await?.unwrap();
    /// permit.keep_alive()?;
    /// let still = tokio::time::timeout(std::time::Duration::from_secs(5), permit.lost()).await;
    /// assert!(still.is_err(), "kept for 5 TTLs");
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        let mut seen = self.lease.lost.subscribe();
        // An error only if the sender is gone, which the permit's own `Arc` prevents.
        let _ = seen.wait_for(|lost| *lost).await;
    }

    /// Whether the permit was lost (see [`lost`](Self::lost)).
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = p.try_acquire(b"k", 1, std::time::Duration::from_secs(1)).await?.unwrap();
    /// assert!(!permit.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        *self.lease.lost.borrow()
    }

    /// Releases the permit (stopping its renewal): `true` if it was still held.
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = p.try_acquire(b"k", 1, std::time::Duration::from_secs(1)).await?.unwrap();
    /// assert!(permit.release().await?);
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<bool, Error> {
        self.armed = false;
        self.stop_renewal();
        op(&self.shared, &self.key, b"x", &self.token, 0).await
    }

    /// Gives up the guard (and stops any renewal) and returns the token: the permit stays held
    /// until [`AsyncRedisConcurrency::release_token`](crate::AsyncRedisConcurrency::release_token)
    /// or its TTL.
    ///
    /// ```no_run
    /// # async fn f(p: leakgate_redis::AsyncRedisConcurrency) -> Result<(), Box<dyn std::error::Error>> {
    /// let permit = p.try_acquire(b"k", 1, std::time::Duration::from_secs(1)).await?.unwrap();
    /// let token: String = permit.into_token();
    /// # Ok(()) }
    /// ```
    pub fn into_token(mut self) -> String {
        self.armed = false;
        self.stop_renewal();
        std::mem::take(&mut self.token)
    }

    fn stop_renewal(&mut self) {
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
    }
}

/// The background renewal of one permit.
struct Renewal {
    shared: Arc<Shared>,
    key: Vec<u8>,
    token: String,
    ttl: Duration,
    ttl_ms: u64,
    lease: Arc<Lease>,
}

impl Renewal {
    async fn run(self) {
        let period = self.ttl / 3;
        let retry = (self.ttl / 10).max(Duration::from_millis(1));
        let mut next = self.lease.confirmed() + period;
        loop {
            tokio::time::sleep_until(next.into()).await;
            // The permit may expire on Redis from `confirmed + ttl` on (a manual renew moves
            // it); the holder is told a tenth of the TTL before.
            let deadline = self.lease.confirmed() + (self.ttl - self.ttl / 10);
            let sent = Instant::now();
            if sent >= deadline {
                return self.lease.mark_lost();
            }
            let renew = op(&self.shared, &self.key, b"r", &self.token, self.ttl_ms);
            match tokio::time::timeout_at(deadline.into(), renew).await {
                Ok(Ok(true)) => {
                    self.lease.confirm(sent);
                    next = sent + period;
                }
                Ok(Ok(false)) | Err(_) => return self.lease.mark_lost(),
                // No answer this time: try again before the deadline.
                Ok(Err(_)) => next = (Instant::now() + retry).min(deadline),
            }
        }
    }
}

impl Drop for RedisPermit {
    fn drop(&mut self) {
        self.stop_renewal();
        if !self.armed {
            return;
        }
        // Without a runtime the TTL returns it.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let shared = Arc::clone(&self.shared);
            let key = std::mem::take(&mut self.key);
            let token = std::mem::take(&mut self.token);
            rt.spawn(async move {
                // A failure leaves the permit to its TTL.
                let _ = op(&shared, &key, b"x", &token, 0).await;
            });
        }
    }
}

impl fmt::Debug for RedisPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisPermit")
            .field("key", &String::from_utf8_lossy(&self.key))
            .field("ttl", &self.ttl)
            .field("kept_alive", &self.renewer.is_some())
            .field("lost", &self.is_lost())
            .finish_non_exhaustive()
    }
}
