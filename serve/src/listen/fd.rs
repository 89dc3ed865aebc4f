//! The open-files limit (`RLIMIT_NOFILE`): raising its soft value to the hard one, as Redis does
//! at start, and fitting every listener's connection cap below it, so that the service never
//! runs out of descriptors because of its clients.
//!
//! Each connection holds one descriptor. The caps together leave [`RESERVED`] descriptors free:
//! enough for what the process itself opens (the runtime, the listeners, the rules file, Redis)
//! and for accepting one connection more in order to tell it that the service is full.

use rustix::process::{getrlimit, setrlimit, Resource};

/// Descriptors kept out of the listeners' caps (standard streams, the runtime's poller and
/// wakers, the listeners, the rules file while it is read, connections to Redis, and the
/// connection being refused).
pub(crate) const RESERVED: u64 = 64;

/// Raises the soft open-files limit to the hard one (as Redis does at start) and returns the
/// soft limit now in force (`None`: unlimited). The service fits its connection caps to
/// whatever limit is in force when it starts, so call this first.
///
/// ```
/// let limit = leakgate_serve::raise_open_files_limit()?;
/// println!("open files: {limit:?}");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn raise_open_files_limit() -> std::io::Result<Option<u64>> {
    let mut limit = getrlimit(Resource::Nofile);
    if limit.maximum != limit.current {
        limit.current = limit.maximum;
        setrlimit(Resource::Nofile, limit)?;
    }
    Ok(getrlimit(Resource::Nofile).current)
}

/// The soft open-files limit in force (`None`: unlimited).
pub(crate) fn open_files_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

/// Each listener's cap: `asked`, lowered so that `listeners` caps together stay [`RESERVED`]
/// descriptors below `limit`; at least 1.
pub(crate) fn fit(asked: usize, listeners: usize, limit: Option<u64>) -> usize {
    let Some(limit) = limit else { return asked.max(1) };
    let room = limit.saturating_sub(RESERVED) / listeners.max(1) as u64;
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    asked.min(room).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_share_what_the_limit_leaves() {
        assert_eq!(fit(10_000, 2, Some(128)), 32);
        assert_eq!(fit(10_000, 3, Some(1024)), 320);
        assert_eq!(fit(10_000, 3, Some(1_048_576)), 10_000);
        assert_eq!(fit(10_000, 1, None), 10_000);
        assert_eq!(fit(10, 1, Some(20)), 1, "a limit below the reserve still serves one");
        assert_eq!(fit(0, 1, None), 1);
    }

    #[test]
    fn raising_never_lowers_the_limit() {
        let before = open_files_limit();
        let after = raise_open_files_limit().unwrap();
        assert!(after.unwrap_or(u64::MAX) >= before.unwrap_or(u64::MAX));
        assert_eq!(after, getrlimit(Resource::Nofile).maximum);
    }
}
