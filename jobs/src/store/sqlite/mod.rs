//! SQLite: one file, several processes of one machine.
//!
//! * **Durable.** WAL journal, `synchronous = FULL`: a transaction that returned is on disk.
//! * **Serialised claims.** Every write is a `BEGIN IMMEDIATE` transaction: it takes the file's
//!   write lock first, then reads the clock (the system's real-time clock), so the order of
//!   transactions is the order of their times and every charge to a lane's bucket sees the one
//!   before it. Other processes wait for the lock (up to [`BUSY_TIMEOUT`]).
//! * **Waking up.** SQLite has no notifications across processes: a worker with nothing to do
//!   sleeps until the earliest slot or lease end it knows of, and meanwhile looks at
//!   `PRAGMA data_version` (which moves when another connection commits; a read of the WAL
//!   index in shared memory, no disk I/O) every [`POLL`], so a job added by another process is
//!   seen within that time. Adds through the same [`Jobs`](crate::Jobs) handle wake it at once.
//!
//! The files are those of the PostgreSQL store, step for step: `schema` (migrations), `take`
//! (the claim transaction: `take`, `outlook`), `record` (`complete`, `maintain`), `claim` (serve
//! lanes round-robin), `lanes` (counters and pace rows: `bump`, `load_pace`, `save_pace`,
//! `push_back`), `ops` (`add`, `renew`, rules, `requeue`, `purge`), `report` (`status`, `dead`,
//! `runs`). Where SQLite differs: the file's write lock serialises every transaction, so no lane
//! is locked row by row, and counters are changed as each step goes.

mod claim;
pub(crate) mod control;
mod lanes;
pub(crate) mod ops;
mod record;
pub(crate) mod report;
pub(crate) mod schedules;
mod schema;
pub(crate) mod take;

use super::RulesCache;
use crate::error::Error;
use crate::job::system_now;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting worker looks for other processes' changes.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// How long a transaction waits for another process's write lock before it fails.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The time of a transaction: the caller's, or the system's real-time clock (read after the
/// write lock is taken, so that transactions are ordered as their times).
pub(crate) fn now(caller: Option<i64>) -> i64 {
    caller.unwrap_or_else(system_now)
}

/// An open SQLite database.
#[derive(Debug)]
pub(crate) struct Sqlite {
    conn: Arc<Mutex<Connection>>,
    rules: Arc<RulesCache>,
    /// `PRAGMA data_version` after this handle's last operation: a different value later means
    /// another connection committed since.
    seen: Arc<Mutex<i64>>,
}

impl Sqlite {
    /// Opens or creates the database at `path` and brings its schema up to date.
    pub(crate) fn open(path: &str) -> Result<Sqlite, Error> {
        let where_ = |e: rusqlite::Error| describe(path, e);
        if std::path::Path::new(path).is_dir() {
            return Err(Error::Database(format!("{path} is a directory, not a database file")));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let mut conn = Connection::open_with_flags(path, flags).map_err(where_)?;
        conn.busy_handler(Some(busy)).map_err(where_)?;
        // The first read of the file: a file that is not SQLite fails here, before any write.
        conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))
            .map_err(where_)?;
        // Setting the journal mode takes a lock even when it is already WAL (and its busy
        // waits do not go through the busy handler): set it only on a new file, retrying while
        // another process opening it at the same time holds the lock.
        let mut mode: String =
            conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(where_)?;
        let mut tries = 0;
        while !mode.eq_ignore_ascii_case("wal") && !path.contains(":memory:") {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
                Ok(m) => mode = m,
                Err(e)
                    if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) && tries < 5000 =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(where_(e)),
            }
            if !mode.eq_ignore_ascii_case("wal") && tries == 0 {
                break;
            }
        }
        if !mode.eq_ignore_ascii_case("wal") && !path.contains(":memory:") {
            return Err(Error::Database(format!("{path}: cannot use the WAL journal ({mode})")));
        }
        conn.pragma_update(None, "synchronous", "FULL").map_err(where_)?;
        conn.set_prepared_statement_cache_capacity(64);
        schema::migrate(&mut conn).map_err(|e| match e {
            Error::Database(m) => Error::Database(format!("{path}: {m}")),
            other => other,
        })?;
        let seen = data_version(&conn).map_err(where_)?;
        Ok(Sqlite {
            conn: Arc::new(Mutex::new(conn)),
            rules: Arc::default(),
            seen: Arc::new(Mutex::new(seen)),
        })
    }

    /// Runs `f` on the connection, on a blocking thread.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, &RulesCache) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (conn, rules, seen) = (self.conn.clone(), self.rules.clone(), self.seen.clone());
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            // Read before the operation: a commit by another connection while it runs is then
            // still unseen, and wakes the next wait.
            if let Ok(version) = data_version(&conn) {
                *seen.lock().unwrap_or_else(|p| p.into_inner()) = version;
            }
            f(&mut conn, &rules)
        })
        .await
        .map_err(|e| Error::Database(format!("the SQLite thread failed: {e}")))?
    }

    /// Waits until another connection commits or `timeout` passes (see the module docs).
    pub(crate) async fn changed(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(POLL)).await;
            let (conn, seen) = (self.conn.clone(), self.seen.clone());
            let moved = tokio::task::spawn_blocking(move || {
                let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                let now = data_version(&conn).ok()?;
                let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                let moved = now != *seen;
                *seen = now;
                Some(moved)
            })
            .await;
            if let Ok(Some(true)) = moved {
                return;
            }
        }
    }
}

/// Waits for another process's write lock: every 0.2 ms for the first 100 tries (20 ms), then
/// every millisecond, up to [`BUSY_TIMEOUT`] in all. (SQLite's own `busy_timeout` sleeps in steps
/// that grow to 100 ms: a worker would start up to 100 ms past its slot after a collision with
/// another worker's commit.) Must not panic: rusqlite reads a panic as "give up".
fn busy(tries: i32) -> bool {
    if !keeps_waiting(tries) {
        return false;
    }
    std::thread::sleep(busy_step(tries));
    true
}

/// The wait after `tries` earlier waits.
fn busy_step(tries: i32) -> Duration {
    if tries < 100 { Duration::from_micros(200) } else { Duration::from_millis(1) }
}

/// Whether [`busy`] waits again after `tries` waits (the time waited so far is under the limit).
fn keeps_waiting(tries: i32) -> bool {
    let tries = tries.max(0);
    let short = tries.min(100) as u32;
    let long = (tries - 100).max(0) as u64;
    busy_step(0) * short + Duration::from_millis(long) < BUSY_TIMEOUT
}

fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0))
}

/// A SQLite error, said with the path and in words for the common cases.
fn describe(path: &str, e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => Error::NotADatabase(path.to_string()),
        Some(ErrorCode::CannotOpen) => {
            Error::Database(format!("cannot open {path} (does its directory exist?): {e}"))
        }
        Some(ErrorCode::ReadOnly) | Some(ErrorCode::PermissionDenied) => {
            Error::Database(format!("cannot write {path}: {e}"))
        }
        _ => Error::Database(format!("{path}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_handler_waits_up_to_its_limit_and_never_panics() {
        // A panic in the handler is read by rusqlite as "give up" (an overflow once did that).
        let mut waited = Duration::ZERO;
        let mut tries = 0;
        while keeps_waiting(tries) {
            waited += busy_step(tries);
            tries += 1;
        }
        assert!(
            waited >= BUSY_TIMEOUT && waited <= BUSY_TIMEOUT + Duration::from_millis(1),
            "{waited:?}"
        );
        assert!(keeps_waiting(-1) && !keeps_waiting(i32::MAX));
    }
}
