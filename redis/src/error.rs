//! What can go wrong between a limiter and Redis, sorted by what the limiter does about it.

use std::fmt;
use std::time::Duration;

/// Why a call to Redis gave no decision. [`check_n`](crate::RedisLimiter::check_n) answers these
/// with the limiter's [`FailurePolicy`](crate::FailurePolicy); the `try_` methods return them.
///
/// ```
/// use leakgate_redis::Error;
/// use std::time::Duration;
/// let e = Error::Timeout(Duration::from_millis(5));
/// assert!(e.is_unavailable());
/// assert_eq!(e.to_string(), "Redis gave no answer within the deadline of 5ms");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// No answer within the call's deadline.
    Timeout(Duration),
    /// The connection failed or Redis cannot serve now (down, loading, read-only replica).
    Unavailable(String),
    /// Redis has not answered since the limiter was built: it connects in the background, and
    /// until it has, the failure policy answers every call.
    Connecting,
    /// The circuit breaker is open: Redis failed recently and is not asked until the next probe.
    CircuitOpen,
    /// Too many calls are already waiting on Redis (the limiter's `max_in_flight`).
    Overloaded,
    /// Redis answered with an error: a key holds something that is not a leakgate bucket, or
    /// the server refused the script. Redis is up; this does not trip the circuit breaker.
    Rejected(String),
    /// The request cannot be expressed: a wait beyond the script's range, or no key at all.
    InvalidRequest(&'static str),
    /// The limiter could not be built (a bad URL or prefix, or a Redis that refused it: a wrong
    /// password, a refused script). A Redis that cannot be reached is not an error: the limiter
    /// connects in the background ([`Error::Connecting`]).
    Config(String),
}

impl Error {
    /// Whether the error means Redis could not be reached in time (timeouts, connection
    /// failures, the breaker, the in-flight bound), as opposed to an answer that was an error.
    ///
    /// ```
    /// use leakgate_redis::Error;
    /// assert!(Error::CircuitOpen.is_unavailable());
    /// assert!(Error::Connecting.is_unavailable());
    /// assert!(!Error::Rejected("WRONGTYPE".into()).is_unavailable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Timeout(_)
                | Error::Unavailable(_)
                | Error::Connecting
                | Error::CircuitOpen
                | Error::Overloaded
        )
    }

    /// Sorts an error from the `redis` crate.
    pub(crate) fn from_redis(err: redis::RedisError) -> Error {
        use redis::{ErrorKind, ServerErrorKind};
        let down = match err.kind() {
            ErrorKind::Io | ErrorKind::Parse | ErrorKind::Client => true,
            ErrorKind::Server(kind) => matches!(
                kind,
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::ReadOnly
            ),
            _ => false,
        };
        if err.is_timeout() {
            Error::Unavailable(format!("timed out: {err}"))
        } else if down || err.is_connection_dropped() {
            Error::Unavailable(err.to_string())
        } else {
            Error::Rejected(err.to_string())
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Timeout(d) => write!(f, "Redis gave no answer within the deadline of {d:?}"),
            Error::Unavailable(why) => write!(f, "Redis is unavailable: {why}"),
            Error::Connecting => f.write_str("Redis has not answered yet; connecting"),
            Error::CircuitOpen => f.write_str("Redis failed recently; the circuit breaker is open"),
            Error::Overloaded => f.write_str("too many calls are waiting on Redis"),
            Error::Rejected(why) => write!(f, "Redis answered with an error: {why}"),
            Error::InvalidRequest(why) => write!(f, "invalid request: {why}"),
            Error::Config(why) => write!(f, "cannot build the limiter: {why}"),
        }
    }
}

impl std::error::Error for Error {}
