//! What can go wrong, each case with a message a person can act on.

use crate::rules::RulesError;
use std::fmt;

/// Why an operation on the queue failed. Nothing is half done: every operation is one
/// transaction, committed whole or not at all.
///
/// ```
/// use leakgate_jobs::{Error, NewJob};
/// let e = NewJob::new("", "x").check().unwrap_err();
/// assert!(matches!(e, Error::BadLane(_)));
/// assert!(e.to_string().contains("lane"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The database could not be opened, read or written; the message says what and where.
    Database(String),
    /// The file is not a SQLite database (nothing was written to it).
    NotADatabase(String),
    /// The PostgreSQL server could not be reached or refused the connection.
    Connect(String),
    /// The database was made by a newer version of this crate.
    SchemaTooNew {
        /// The schema version found.
        found: i64,
        /// The newest version this crate knows.
        supported: i64,
    },
    /// A lane name that cannot be a lane (empty, too long, a control character).
    BadLane(String),
    /// An idempotency key that cannot be one.
    BadKey(String),
    /// A payload above [`MAX_PAYLOAD`](crate::MAX_PAYLOAD).
    PayloadTooLarge {
        /// Its size in bytes.
        size: usize,
    },
    /// Adding would put more jobs in a lane than its `max_waiting` allows (nothing was added).
    LaneFull {
        /// The lane.
        lane: String,
        /// Its capacity.
        max_waiting: u64,
        /// Jobs waiting in it now.
        waiting: u64,
        /// Jobs the add asked for in it.
        adding: u64,
    },
    /// The job's lease ran out and the job went back to the queue (or to another worker): this
    /// run's outcome was not recorded.
    LeaseLost(i64),
    /// The outcome could not be recorded: another session held the job's lane (named here)
    /// for longer than a stalled session may (PostgreSQL); the run still holds its lease, so
    /// report it again.
    LaneBusy(String),
    /// Rules that do not parse.
    Rules(RulesError),
    /// A priority above [`MAX_PRIORITY`](crate::MAX_PRIORITY) (nothing was added).
    BadPriority(u64),
    /// No job with this id is in the database (nothing was changed).
    UnknownJob(i64),
    /// No job was ever added to this lane (a typo?); nothing was changed.
    UnknownLane(String),
    /// A schedule that cannot be stored (the message says why; nothing was written).
    BadSchedule(String),
    /// No schedule of this name (nothing was changed).
    UnknownSchedule(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Database(m) => write!(f, "database error: {m}"),
            Error::NotADatabase(p) => write!(
                f,
                "{p} is not a leakgate jobs database: the file exists but is not SQLite \
                 (nothing was written to it)"
            ),
            Error::Connect(m) => write!(f, "cannot connect to PostgreSQL: {m}"),
            Error::SchemaTooNew { found, supported } => write!(
                f,
                "the database has schema version {found}, newer than this leakgate-jobs knows \
                 ({supported}): upgrade leakgate"
            ),
            Error::BadLane(m) => write!(f, "bad lane: {m}"),
            Error::BadKey(m) => write!(f, "bad key: {m}"),
            Error::PayloadTooLarge { size } => write!(
                f,
                "payload of {size} bytes is larger than the limit of {} bytes",
                crate::MAX_PAYLOAD
            ),
            Error::LaneFull { lane, max_waiting, waiting, adding } => write!(
                f,
                "lane {lane:?} is full: {waiting} jobs waiting, {adding} more would pass its \
                 max_waiting of {max_waiting} (nothing was added)"
            ),
            Error::LeaseLost(id) => write!(
                f,
                "job {id}: its lease ran out before this run finished, so the job is back in the \
                 queue and this outcome was not recorded"
            ),
            Error::LaneBusy(lane) => write!(
                f,
                "lane {lane:?} stayed locked by another session: the outcome was not recorded \
                 (the run still holds its lease: report it again)"
            ),
            Error::Rules(e) => write!(f, "bad rules: {e}"),
            Error::BadPriority(p) => write!(
                f,
                "bad priority {p}: a priority is a whole number from 0 to {} (nothing was added)",
                crate::MAX_PRIORITY
            ),
            Error::UnknownJob(id) => {
                write!(f, "no job {id} in the database (nothing was changed)")
            }
            Error::BadSchedule(m) => write!(f, "bad schedule: {m} (nothing was written)"),
            Error::UnknownSchedule(name) => {
                write!(f, "no schedule named {name:?} (nothing was changed)")
            }
            Error::UnknownLane(lane) => write!(
                f,
                "no job was ever added to lane {lane:?}: is it a typo? (nothing was changed)"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<RulesError> for Error {
    fn from(e: RulesError) -> Self {
        Error::Rules(e)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Database(format!("SQLite: {e}"))
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => {
                Error::Database(format!("PostgreSQL: {}: {}", db.code().code(), db.message()))
            }
            None => Error::Database(format!("PostgreSQL: {e}")),
        }
    }
}
