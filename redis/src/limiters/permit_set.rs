//! The permits' sorted sets in Redis as every permit of one [`AsyncRedisConcurrency`] sees them:
//! the connection and script they share, the TTL they take, and the two calls on a held permit
//! (renew, release).
//!
//! Below both [`AsyncRedisConcurrency`] (which acquires) and [`RedisPermit`] (which renews and
//! releases), so that each imports it and neither the other.
//!
//! [`AsyncRedisConcurrency`]: crate::AsyncRedisConcurrency
//! [`RedisPermit`]: crate::RedisPermit

use crate::connection::client::Client;
use crate::error::Error;
use std::time::Duration;

/// The permits' script (see `script/permits.lua`).
const SOURCE: &str = include_str!("../script/permits.lua");
/// The longest TTL (about 49 days).
///
/// ```
/// assert_eq!(leakgate_redis::MAX_TTL.as_millis(), u128::from(u32::MAX));
/// ```
pub const MAX_TTL: Duration = Duration::from_millis(u32::MAX as u64);

/// What every permit of one limiter shares: the connection, the script and the keys' start.
pub(super) struct Shared {
    pub(super) client: Client,
    pub(super) script: redis::Script,
    /// `prefix + "permits1:"`.
    pub(super) key_head: Vec<u8>,
}

impl Shared {
    /// The permits of `client`, under its prefix.
    pub(super) fn new(client: Client) -> Shared {
        let mut key_head = client.prefix.clone();
        key_head.extend_from_slice(b"permits1:");
        Shared { client, script: redis::Script::new(SOURCE), key_head }
    }
}

/// `ttl` in whole ms, if it is a TTL the script takes.
pub(super) fn check_ttl(ttl: Duration) -> Result<u64, Error> {
    let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 || ttl > MAX_TTL {
        return Err(Error::InvalidRequest("ttl must be between 1 ms and 2^32 - 1 ms"));
    }
    Ok(ms)
}

/// Renews (`b"r"`) or releases (`b"x"`) `token` of the set `key`.
pub(super) async fn op(
    shared: &Shared,
    key: &[u8],
    what: &[u8],
    token: &str,
    ttl_ms: u64,
) -> Result<bool, Error> {
    let ttl_s = ttl_ms.to_string();
    let args: [&[u8]; 4] = [what, token.as_bytes(), b"0", ttl_s.as_bytes()];
    let value = shared.client.eval_on(&shared.script, key, &args).await?;
    let n: u64 = redis::from_redis_value(value)
        .map_err(|e| Error::Rejected(format!("unexpected reply: {e}")))?;
    Ok(n == 1)
}
