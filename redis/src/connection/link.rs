//! The connection to Redis, made in the background, and the map from this process's clock to
//! Redis's, which turns a call's deadline into a time the script can check.
//!
//! # Implementation details
//!
//! **Connecting.** A limiter is built at once: the URL is checked, and a task on the runtime (the
//! *keeper*) connects, loads the script and reads Redis's `TIME`, retrying every 50 ms to 250 ms
//! until that succeeds. Until it has, the link is not *ready* and every call is answered by the
//! failure policy without touching Redis ([`Error::Connecting`]). `connect` waits for readiness
//! for at most its connect timeout and returns the limiter either way; only a server that answers
//! with an error (a wrong password, a refused script) makes it fail. Once ready, the connection
//! manager reconnects by itself after an outage, and the keeper reads `TIME` once a second.
//!
//! **Redis's clock.** A call that gives up at `g` on this process's monotonic clock sends the
//! script `D`, its estimate of `g` on Redis's clock (`TIME`, in µs); the script charges nothing
//! when it starts after `D`. The estimate is `g + offset` with `offset = R - r`, where `R` is a
//! `TIME` reading in some answer and `r` the local time that answer arrived: `R` was read before
//! `r`, so `offset` is never more than the true difference of the two clocks (as long as neither
//! clock's rate differs), and `D` is never later than the give-up. Every answer offers such a
//! lower bound; the link keeps the largest (the tightest) of those seen since the keeper's last
//! reading, which it stores outright each second, so that a clock stepped on either side is
//! followed within a second. The local clock is `Instant` (`CLOCK_MONOTONIC`): like Redis's
//! `CLOCK_REALTIME` it runs at the rate NTP sets, so in a second the two part by microseconds.
//!
//! `offset` is a lone word that publishes nothing else: `Relaxed` throughout. Readiness is a
//! word of its own, set once the script is loaded; `Relaxed` too, as a call that sees it a
//! moment late is answered by the policy, and one that sees it early cannot (it is set after).

use crate::connection::cluster::{self, Conn, Target};
use crate::error::Error;
use crate::script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The keeper's first retry after a failed attempt; each next one waits twice as long, up to
/// [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest wait between two attempts to reach a Redis that has not answered yet, so that a
/// limiter built during an outage starts limiting within about a quarter of a second of Redis
/// answering.
const MAX_RETRY: Duration = Duration::from_millis(250);
/// How often a ready link reads `TIME` again.
const REFRESH: Duration = Duration::from_secs(1);

/// How the first connection went, as `connect` waits for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Still trying.
    Connecting,
    /// Connected, the script loaded, the clocks compared.
    Ready,
    /// Redis answered with an error: this limiter is misconfigured.
    Refused(String),
}

/// The connection, whether it is ready, and the clock offset.
pub(crate) struct Link {
    conn: Conn,
    /// The origin of this process's clock for deadlines.
    origin: Instant,
    /// Set once the script is loaded and `offset_ns` holds a reading: calls may go.
    ready: AtomicBool,
    /// Redis's clock (ns since the Unix epoch) minus this process's (ns since `origin`): a lower
    /// bound of the true difference (module docs). Meaningless until `ready`.
    offset_ns: AtomicU64,
}

impl Link {
    /// Checks `target` and starts connecting in the background on the current tokio runtime.
    pub(crate) fn open(
        target: &Target,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<(Arc<Link>, watch::Receiver<Settled>), Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Config("the limiter needs a tokio runtime".into()))?;
        let conn = match target {
            Target::One(url) => Conn::One(one(url, connect_timeout, response_timeout)?),
            Target::Cluster(seeds) if seeds.is_empty() => {
                return Err(Error::Config("a cluster needs at least one seed URL".into()));
            }
            Target::Cluster(seeds) => Conn::Cluster(
                cluster::open(seeds, connect_timeout, response_timeout)
                    .map_err(|e| Error::Config(e.to_string()))?,
            ),
        };
        let link = Arc::new(Link {
            conn,
            origin: Instant::now(),
            ready: AtomicBool::new(false),
            offset_ns: AtomicU64::new(0),
        });
        let (settled, waiting) = watch::channel(Settled::Connecting);
        runtime.spawn(keep(Arc::downgrade(&link), settled, connect_timeout));
        Ok((link, waiting))
    }

    /// Waits at most `wait` for the first connection: `Err` only if Redis refused it.
    pub(crate) async fn settle(
        mut waiting: watch::Receiver<Settled>,
        wait: Duration,
    ) -> Result<(), Error> {
        let settled = waiting.wait_for(|s| *s != Settled::Connecting);
        match tokio::time::timeout(wait, settled).await {
            Ok(Ok(s)) => match &*s {
                Settled::Refused(why) => Err(Error::Config(format!("Redis refused: {why}"))),
                _ => Ok(()),
            },
            // Not yet: the keeper goes on trying.
            _ => Ok(()),
        }
    }

    /// The connection, once the link is ready.
    #[inline]
    pub(crate) fn connection(&self) -> Option<Conn> {
        // Relaxed: module docs.
        self.ready.load(Ordering::Relaxed).then(|| self.conn.clone())
    }

    /// Whether Redis has answered since the limiter was built.
    pub(crate) fn is_ready(&self) -> bool {
        // Relaxed: module docs.
        self.ready.load(Ordering::Relaxed)
    }

    /// This process's clock for deadlines, in ns.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The time on Redis's clock, in µs, not later than `local_ns` on this process's clock.
    #[inline]
    pub(crate) fn redis_us(&self, local_ns: u64) -> u64 {
        // Relaxed: module docs.
        local_ns.saturating_add(self.offset_ns.load(Ordering::Relaxed)) / 1_000
    }

    /// An answer arrived at `local_ns` carrying Redis's `TIME` reading `redis_us`.
    #[inline]
    pub(crate) fn observe(&self, redis_us: u64, local_ns: u64) {
        let seen = offset(redis_us, local_ns);
        // Relaxed: module docs. Most answers tighten nothing: read before writing, so that
        // concurrent calls do not pass the word's cache line around for nothing.
        if seen > self.offset_ns.load(Ordering::Relaxed) {
            self.offset_ns.fetch_max(seen, Ordering::Relaxed);
        }
    }
}

/// A connection manager for the Redis at `url`, connected lazily.
fn one(
    url: &str,
    connect_timeout: Duration,
    response_timeout: Duration,
) -> Result<ConnectionManager, Error> {
    let client = redis::Client::open(url).map_err(|e| Error::Config(e.to_string()))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(200));
    ConnectionManager::new_lazy_with_config(client, config)
        .map_err(|e| Error::Config(e.to_string()))
}

/// Redis's clock minus ours, from a reading `redis_us` that arrived at `local_ns`.
fn offset(redis_us: u64, local_ns: u64) -> u64 {
    redis_us.saturating_mul(1_000).saturating_sub(local_ns)
}

/// The keeper: connects, loads the script and reads `TIME` until that works, then reads `TIME`
/// once a second; ends with the limiter.
async fn keep(link: Weak<Link>, settled: watch::Sender<Settled>, timeout: Duration) {
    let mut retry = FIRST_RETRY;
    loop {
        let Some(link) = link.upgrade() else { return };
        let ready = link.ready.load(Ordering::Relaxed);
        let mut conn = link.conn.clone();
        match tokio::time::timeout(timeout, probe(&mut conn, !ready)).await {
            Ok(Ok(redis_us)) => {
                let at = link.now_ns();
                // Relaxed: module docs. The offset is stored before readiness is announced.
                link.offset_ns.store(offset(redis_us, at), Ordering::Relaxed);
                if !ready {
                    link.ready.store(true, Ordering::Relaxed);
                    settled.send_replace(Settled::Ready);
                }
                retry = REFRESH;
            }
            Ok(Err(e)) if !ready && !e.is_unavailable() => {
                settled.send_replace(Settled::Refused(e.to_string()));
            }
            _ => {}
        }
        drop(link);
        tokio::time::sleep(retry).await;
        if retry < REFRESH {
            retry = (retry * 2).min(MAX_RETRY);
        }
    }
}

/// Loads the script if `load`, then reads Redis's clock (µs).
async fn probe(conn: &mut Conn, load: bool) -> Result<u64, Error> {
    if load {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(script::SOURCE);
        let _: String = cmd.query_async(conn).await.map_err(Error::from_redis)?;
    }
    let (s, us): (u64, u64) =
        redis::cmd("TIME").query_async(conn).await.map_err(Error::from_redis)?;
    Ok(s.saturating_mul(1_000_000).saturating_add(us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_a_lower_bound_and_the_tightest_one_is_kept() {
        // A reading of 5 s on Redis's clock that arrived at 2 s on ours: at least 3 s apart.
        assert_eq!(offset(5_000_000, 2_000_000_000), 3_000_000_000);
        assert_eq!(offset(1, 5_000), 0, "saturates rather than wrapping");
    }
}
