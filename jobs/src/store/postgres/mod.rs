//! PostgreSQL: one database, workers on many servers.
//!
//! * **Claims.** A claim locks the lanes it serves (`FOR UPDATE SKIP LOCKED`: a lane another
//!   worker is claiming from is skipped, never waited for), then their pace rows (`FOR UPDATE`),
//!   then reads the server's clock (`clock_timestamp()`), charges the buckets and takes the jobs,
//!   all in one transaction. A lane's rows are locked by one claim at a time and each claim reads
//!   the clock after its locks, so every charge sees the one before it, on one clock, whichever
//!   server the worker runs on.
//! * **Lock order.** Pace rows are only locked by a transaction that holds their lane's row;
//!   transactions that wait for lane rows lock them sorted by lane. Deadlocks (and serialisation
//!   failures) that remain possible between maintenance transactions are retried.
//! * **No waiting in a claim.** A claim locks every lane it touches `SKIP LOCKED`: the lanes it
//!   records outcomes for and maintains as well as those it serves. A lane held by another
//!   session (a claim in flight, or one whose worker is stalled) is left for a later claim: its
//!   outcomes are handed back to the worker ([`Taken::deferred`](crate::store::Taken)), which
//!   keeps their leases renewed and records them once the lane is free. So one stalled worker
//!   never stops another, whatever lanes they share.
//! * **Stalled sessions end.** Every session is opened with limits derived from the lease
//!   ([`Timeouts`]): the server ends a session that stays idle inside a transaction (its worker
//!   stopped, its VM paused, its network cut) and so releases its locks; a lock wait and a
//!   statement are bounded; TCP keepalives and a user timeout on both sides notice a peer that
//!   is gone.
//! * **Waking up.** One extra connection `LISTEN`s on `leakgate_jobs`; adds, requeues, new rules
//!   and completions that free a limited lane `NOTIFY` it.
//! * **TLS.** Not in this version: connect over loopback or a private network.
//!
//! The files are those of the SQLite store, step for step: `schema` (migrations), `take` (the
//! claim transaction: `take`, `outlook`), `record` (`complete`, `maintain`), `claim` (serve
//! lanes round-robin), `lanes` (counters and pace rows: `bump`, `load_pace`, `save_pace`,
//! `push_back`, and what SQLite needs not: `lock_lanes`, and `apply` for counter changes
//! gathered over a transaction), `ops` (`add`, `renew`, rules, `requeue`, `purge`), `report`
//! (`status`, `dead`, `runs`).

mod claim;
mod control;
mod lanes;
mod ops;
mod record;
mod report;
mod schedules;
mod schema;
mod take;

use super::RulesCache;
use crate::error::Error;
use futures_util::StreamExt;
use std::str::FromStr;
use std::time::Duration;
use tokio::sync::{Mutex, watch};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

/// The channel adds and completions notify.
const CHANNEL: &str = "leakgate_jobs";

/// How long to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's clock in nanoseconds since the Unix epoch (its resolution is a microsecond).
pub(crate) const CLOCK_NS: &str =
    "(floor(extract(epoch FROM clock_timestamp()) * 1000000))::bigint * 1000";

/// Limits set on every session (in the startup packet: no round trip), derived from the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// `idle_in_transaction_session_timeout`: the server ends a session that sends nothing for
    /// this long inside a transaction, which releases its locks. Half the lease, from 1 s to 30 s:
    /// a stalled claim's lanes are free again before the leases of the runs it blocks run out.
    pub(crate) idle: Duration,
    /// `lock_timeout`: twice `idle`, so a wait behind a stalled session outlasts it.
    pub(crate) lock: Duration,
    /// `statement_timeout`: four times `idle`, at least 30 s.
    pub(crate) statement: Duration,
}

impl Timeouts {
    /// The limits for leases of `lease`.
    pub(crate) fn for_lease(lease: Duration) -> Timeouts {
        let idle = (lease / 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
        Timeouts { idle, lock: idle * 2, statement: (idle * 4).max(Duration::from_secs(30)) }
    }

    /// Sets them on `config`: session settings in its `options` (before the URL's own, which
    /// may override them), TCP keepalives and a TCP user timeout on the client's side.
    fn apply(&self, config: &mut Config) {
        let idle_s = self.idle.as_secs().max(1);
        let interval_s = (idle_s / 3).max(1);
        let ours = format!(
            "-c idle_in_transaction_session_timeout={} -c lock_timeout={} -c statement_timeout={} \
             -c tcp_keepalives_idle={idle_s} -c tcp_keepalives_interval={interval_s} \
             -c tcp_keepalives_count=3",
            self.idle.as_millis(),
            self.lock.as_millis(),
            self.statement.as_millis(),
        );
        let options = match config.get_options() {
            Some(theirs) if !theirs.trim().is_empty() => format!("{ours} {theirs}"),
            _ => ours,
        };
        config.options(options);
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(idle_s));
        config.keepalives_interval(Duration::from_secs(interval_s));
        config.keepalives_retries(3);
        // Data sent and not acknowledged for this long (a server gone mid-claim) ends the
        // connection, instead of TCP's retransmissions for a quarter of an hour.
        config.tcp_user_timeout(self.lock);
    }
}

/// An open PostgreSQL database: a few connections, and one that listens.
pub(crate) struct Postgres {
    config: Config,
    clients: Vec<Mutex<Option<Client>>>,
    pub(crate) rules: RulesCache,
    /// Counts notifications; a worker marks what it has seen before each claim.
    seen: std::sync::Mutex<watch::Receiver<u64>>,
    listener: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres").field("connections", &self.clients.len()).finish()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl Postgres {
    /// Connects (`connections` plus one listening), and creates or migrates the schema.
    pub(crate) async fn open(
        url: &str,
        connections: usize,
        timeouts: Timeouts,
    ) -> Result<Postgres, Error> {
        let mut config = Config::from_str(url)
            .map_err(|e| Error::Connect(format!("bad URL {:?}: {e}", redact(url))))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("leakgate-jobs");
        timeouts.apply(&mut config);
        let mut first = connect(&config).await?;
        schema::migrate(&mut first).await?;
        let mut clients = vec![Mutex::new(Some(first))];
        for _ in 1..connections.max(1) {
            clients.push(Mutex::new(Some(connect(&config).await?)));
        }
        let (tx, changes) = watch::channel(0u64);
        let listener = tokio::spawn(listen(config.clone(), tx));
        let seen = std::sync::Mutex::new(changes);
        Ok(Postgres { config, clients, rules: RulesCache::default(), seen, listener })
    }

    /// A connection: a free one if any, else the first to come free; reconnects a closed one.
    pub(crate) async fn client(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, Option<Client>>, Error> {
        let mut guard = None;
        for slot in &self.clients {
            if let Ok(g) = slot.try_lock() {
                guard = Some(g);
                break;
            }
        }
        let mut guard = match guard {
            Some(g) => g,
            None => self.clients[0].lock().await,
        };
        if guard.as_ref().is_none_or(|c| c.is_closed()) {
            *guard = Some(connect(&self.config).await?);
        }
        Ok(guard)
    }

    /// Marks every notification so far as seen (called before a claim).
    pub(crate) fn mark_seen(&self) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).borrow_and_update();
    }

    /// Waits for a notification not yet seen, or `timeout`.
    pub(crate) async fn changed(&self, timeout: Duration) {
        let mut rx = self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let _ = tokio::time::timeout(timeout, rx.changed()).await;
    }
}

/// Connects once, driving the connection on a task.
async fn connect(config: &Config) -> Result<Client, Error> {
    let (client, connection) = config.connect(NoTls).await.map_err(connect_error)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Listens for notifications, reconnecting when the connection is lost; every notification (and
/// every reconnection, which may have missed some) bumps the counter.
async fn listen(config: Config, tx: watch::Sender<u64>) {
    loop {
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            let listening = async {
                client.batch_execute(&format!("LISTEN {CHANNEL}")).await.ok()?;
                tx.send_modify(|n| *n += 1);
                std::future::pending::<Option<()>>().await
            };
            tokio::pin!(listening);
            loop {
                tokio::select! {
                    _ = &mut listening => break,
                    message = messages.next() => match message {
                        Some(Ok(AsyncMessage::Notification(_))) => tx.send_modify(|n| *n += 1),
                        Some(Ok(_)) => {}
                        _ => break,
                    },
                }
            }
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A connection error in words: the server's message (a wrong password) or why it could not be
/// reached.
fn connect_error(e: tokio_postgres::Error) -> Error {
    match e.as_db_error() {
        Some(db) => Error::Connect(db.message().to_string()),
        None => {
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message = format!("{message}: {s}");
                source = s.source();
            }
            Error::Connect(message)
        }
    }
}

/// A URL with its password hidden, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Whether an error is worth running the transaction again for: a deadlock or a serialisation
/// failure, both resolved by trying again.
pub(crate) fn retryable(e: &Error) -> bool {
    matches!(e, Error::Database(m) if m.contains("40P01") || m.contains("40001"))
}

/// [`retryable`], or a lock wait that ran past `lock_timeout` (`55P03`): what an operation that
/// waits for lanes (adding, requeueing, purging, new rules) tries again. Not a claim: a claim
/// waits for no lane, and its worker retries on its own schedule, renewing leases meanwhile.
pub(crate) fn retryable_or_lock_timeout(e: &Error) -> bool {
    retryable(e) || matches!(e, Error::Database(m) if m.contains("55P03"))
}

/// Runs a transaction body again while it fails with an error `$retry` accepts (up to 5 times).
macro_rules! retrying {
    ($retry:path, $body:expr) => {{
        let mut tries = 0;
        loop {
            match $body {
                Err(e) if $retry(&e) && tries < 5 => tries += 1,
                result => break result,
            }
        }
    }};
    ($body:expr) => {
        retrying!(crate::store::postgres::retryable_or_lock_timeout, $body)
    };
}
pub(crate) use retrying;

/// The caller's time, or the server's.
pub(crate) async fn now(
    client: &impl tokio_postgres::GenericClient,
    caller: Option<i64>,
) -> Result<i64, Error> {
    match caller {
        Some(t) => Ok(t),
        None => Ok(typed_one(client, &format!("SELECT {CLOCK_NS}"), &[]).await?.get(0)),
    }
}

/// Runs a statement that returns one row with its parameters' types given, so that it goes to
/// the server in one round trip (text given to `query` is prepared first: a round trip more).
/// The claim's statements before it reads the clock run this way: each round trip there is
/// lateness for the job it starts.
pub(crate) async fn typed_one(
    client: &impl tokio_postgres::GenericClient,
    sql: &str,
    params: &[(&(dyn tokio_postgres::types::ToSql + Sync), tokio_postgres::types::Type)],
) -> Result<tokio_postgres::Row, Error> {
    let rows = client.query_typed(sql, params).await?;
    rows.into_iter()
        .next()
        .ok_or_else(|| Error::Database(format!("PostgreSQL: no row from {sql:.40}")))
}

#[cfg(test)]
mod tests {
    use super::Timeouts;
    use std::time::Duration;

    #[test]
    fn session_limits_follow_the_lease_within_bounds() {
        let t = |ms| Timeouts::for_lease(Duration::from_millis(ms));
        let s = Duration::from_secs;
        let three = t(3000);
        assert_eq!((three.idle, three.lock, three.statement), (s(3) / 2, s(3), s(30)));
        assert_eq!(t(30_000).idle, Duration::from_millis(15_000));
        assert_eq!(t(10).idle, s(1), "never under a second: a busy client is not a stalled one");
        assert_eq!((t(3_600_000).idle, t(3_600_000).statement), (s(30), s(120)));
    }

    #[test]
    fn session_limits_go_before_the_urls_own_options() {
        let mut config: tokio_postgres::Config =
            "postgres://u@h/db?options=-c%20lock_timeout%3D5".parse().unwrap();
        Timeouts::for_lease(Duration::from_secs(4)).apply(&mut config);
        let options = config.get_options().unwrap();
        assert!(options.starts_with("-c idle_in_transaction_session_timeout=2000 "), "{options}");
        assert!(options.ends_with("-c lock_timeout=5"), "{options}");
        assert_eq!(config.get_keepalives_idle(), Duration::from_secs(2));
    }

    #[test]
    fn passwords_are_hidden_in_messages() {
        assert_eq!(super::redact("postgres://u:secret@h:5/db"), "postgres://u:***@h:5/db");
        assert_eq!(super::redact("postgres://h/db"), "postgres://h/db");
    }
}
