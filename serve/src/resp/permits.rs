//! The permit commands: fleet-wide concurrency limits over RESP.
//!
//! ```text
//! LG.ACQUIRE key max ttl_ms
//!   -> [acquired (1|0), token, in_flight, max, retry_after_ms]
//! LG.RELEASE key token
//!   -> 1 if that permit was held, 0 if not (expired, released, or never given)
//! ```
//!
//! At most `max` permits of `key` are held at once (across every instance with `--redis` or
//! `--redis-cluster`); a permit not released within `ttl_ms` returns by itself. `token` is 32
//! hex digits (128 random bits), empty when not acquired; `retry_after_ms` (rounded up) is when
//! the earliest held permit expires if nobody releases it, 0 when acquired. `max` and `ttl_ms`
//! are 1 to 2^32 - 1; keys at most [`MAX_KEY`] bytes.

use super::reply;
use super::throttle::{ceil_millis, parse_int};
use crate::limits::{key_too_long, Limits, MAX_KEY};
use crate::permits::Acquired;
use bytes::BytesMut;
use leakgate::Clock;
use std::time::Duration;

/// The largest `max` and `ttl_ms`.
const LARGEST: i64 = u32::MAX as i64;

/// `command` is `lg.acquire` or `lg.release`. Returns whether the reply is an error.
pub(crate) async fn command<C: Clock + 'static>(
    limits: &Limits<C>,
    command: &str,
    args: &[&[u8]],
    out: &mut BytesMut,
) -> bool {
    let answer = run(limits, command, args, out).await;
    match answer {
        Ok(()) => false,
        Err(e) => {
            reply::error(out, &e);
            true
        }
    }
}

/// `1..=LARGEST`, or the error to answer.
fn in_range(text: &[u8], what: &str) -> Result<u64, String> {
    match parse_int(text) {
        Some(n) if (1..=LARGEST).contains(&n) => Ok(n as u64),
        Some(_) => Err(format!("ERR {what} must be between 1 and {LARGEST}")),
        None => Err("ERR value is not an integer or out of range".into()),
    }
}

async fn run<C: Clock + 'static>(
    limits: &Limits<C>,
    command: &str,
    args: &[&[u8]],
    out: &mut BytesMut,
) -> Result<(), String> {
    let want = if command == "lg.acquire" { 4 } else { 3 };
    if args.len() != want {
        return Err(format!("ERR wrong number of arguments for '{command}' command"));
    }
    let key = args[1];
    if key.len() > MAX_KEY {
        return Err(format!("ERR {}", key_too_long(key.len())));
    }
    let Some(store) = &limits.permits else {
        return Err("ERR permits are not available on this server".into());
    };
    if command == "lg.release" {
        let held = store.release(key, args[2]).await?;
        reply::integer(out, i64::from(held));
        return Ok(());
    }
    let max = in_range(args[2], "max")?;
    let ttl = Duration::from_millis(in_range(args[3], "ttl_ms")?);
    let acquired = store.acquire(key, max, ttl).await?;
    let (token, in_flight, retry) = match &acquired {
        Acquired::Yes { token, in_flight } => (token.as_bytes(), *in_flight, 0),
        Acquired::No { in_flight, retry_after } => {
            (&b""[..], *in_flight, ceil_millis(*retry_after))
        }
    };
    reply::array(out, 5);
    reply::integer(out, i64::from(matches!(acquired, Acquired::Yes { .. })));
    reply::bulk(out, token);
    reply::integer(out, i64::try_from(in_flight).unwrap_or(i64::MAX));
    reply::integer(out, max as i64);
    reply::integer(out, retry);
    Ok(())
}
