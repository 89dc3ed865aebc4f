//! The limit commands: redis-cell's `CL.THROTTLE`, and leakgate's own `LG.CHECK`,
//! `LG.CHECKALL` and `LG.RULE` on the rules file.
//!
//! ```text
//! CL.THROTTLE key max_burst count period [quantity]
//!   -> [limited, max_burst + 1, remaining, retry_after_s, reset_after_s]
//! LG.CHECK key [cost]
//!   -> [limited, remaining, retry_after_ms, reset_after_ms, rule]
//! LG.CHECKALL cost key [key ...]
//!   -> [limited, remaining, retry_after_ms, reset_after_ms, [rule of each key]]
//! LG.RULE key
//!   -> [rule, quotas]
//! ```
//!
//! `CL.THROTTLE` is redis-cell's command with exact GCRA: a bucket of `max_burst + 1` units
//! refilled at `count` per `period` seconds, charged `quantity` (1 by default, 0 peeks); times
//! in whole seconds rounded up; `retry_after_s` is -1 when admitted, and also when `quantity`
//! is above `max_burst + 1` (it can never conform). As in redis-cell, a key has one bucket, its
//! TAT, whatever parameters a call brings: each call's are applied to it ([`crate::cell`]).
//! Keys are at most [`MAX_KEY`] bytes, in any table or command.
//!
//! The `LG.` commands check keys against the rules file, in milliseconds rounded up:
//! `remaining` is -1 and `rule` nil when no rule limits the key; `retry_after_ms` is -1 when
//! admitted and -2 when the cost can never conform. `LG.CHECKALL` charges every key or none.

use super::reply;
use crate::limits::{key_too_long, write_key, CellQuota, Limits, MAX_KEY};
use bytes::BytesMut;
use leakgate::{Admitted, Clock, Denied};
use std::time::Duration;

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(d: Duration) -> i64 {
    let s = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
    i64::try_from(s).unwrap_or(i64::MAX)
}

/// Whole milliseconds, rounded up.
pub(crate) fn ceil_millis(d: Duration) -> i64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A RESP integer argument: optional `-`, then decimal digits, within `i64`.
pub(crate) fn parse_int(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: i64 = 0;
    for d in digits {
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(i64::from(d - b'0'))?
        } else {
            value.checked_add(i64::from(d - b'0'))?
        };
    }
    Some(value)
}

const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

/// A non-negative integer argument, or the error to answer.
fn non_negative(text: &[u8], what: &str) -> Result<u64, String> {
    match parse_int(text) {
        Some(n) if n >= 0 => Ok(n as u64),
        Some(_) => Err(format!("ERR {what} must be 0 or more")),
        None => Err(NOT_AN_INTEGER.into()),
    }
}

/// `CL.THROTTLE key max_burst count period [quantity]`. Returns whether the reply is an error.
pub(crate) async fn cl_throttle<C: Clock + 'static>(
    limits: &Limits<C>,
    args: &[&[u8]],
    out: &mut BytesMut,
) -> bool {
    let parsed = (|| {
        if args.len() != 5 && args.len() != 6 {
            return Err("ERR wrong number of arguments for 'cl.throttle' command".to_string());
        }
        let max_burst = non_negative(args[2], "max_burst")?;
        let count = non_negative(args[3], "count")?;
        let period_s = non_negative(args[4], "period")?;
        let n = match args.get(5) {
            Some(q) => non_negative(q, "quantity")?,
            None => 1,
        };
        if args[1].len() > MAX_KEY {
            return Err(format!("ERR {}", key_too_long(args[1].len())));
        }
        let quota = CellQuota { max_burst, count, period_s };
        if count == 0 || period_s == 0 {
            return Err("ERR invalid CL.THROTTLE quota: count and period must be at least 1".into());
        }
        Ok((quota, n))
    })();
    let (quota, n) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            reply::error(out, &e);
            return true;
        }
    };
    let checked = match limits.cell_check(quota, args[1], n).await {
        Ok(checked) => checked,
        Err(e) => {
            reply::error(out, &format!("ERR invalid CL.THROTTLE quota: {e}"));
            return true;
        }
    };
    let limit = i64::try_from(quota.max_burst.saturating_add(1)).unwrap_or(i64::MAX);
    let (limited, remaining, retry, reset) = match &checked.decision {
        Ok(ok) => (0, ok.remaining(), -1, ceil_secs(ok.reset_after())),
        Err(no) => {
            (1, no.remaining(), no.retry_after().map_or(-1, ceil_secs), ceil_secs(no.reset_after()))
        }
    };
    reply::array(out, 5);
    reply::integer(out, limited);
    reply::integer(out, limit);
    reply::integer(out, i64::try_from(remaining).unwrap_or(i64::MAX));
    reply::integer(out, retry);
    reply::integer(out, reset);
    false
}

/// The four figures of an `LG.` reply.
fn figures(out: &mut BytesMut, decision: &Result<Admitted, Denied>) {
    let (limited, remaining, retry, reset) = match decision {
        Ok(ok) => (0, ok.remaining(), -1, ok.reset_after()),
        Err(no) => (1, no.remaining(), no.retry_after().map_or(-2, ceil_millis), no.reset_after()),
    };
    reply::integer(out, limited);
    reply::integer(out, if remaining == u64::MAX { -1 } else { remaining as i64 });
    reply::integer(out, retry);
    reply::integer(out, ceil_millis(reset));
}

/// `LG.CHECK key [cost]`, `LG.CHECKALL cost key [key ...]`, `LG.RULE key`. Returns whether the
/// reply is an error.
pub(crate) async fn lg<C: Clock + 'static>(
    limits: &Limits<C>,
    command: &str,
    args: &[&[u8]],
    resp3: bool,
    out: &mut BytesMut,
) -> bool {
    let (cost, keys): (u64, &[&[u8]]) = match (command, args.len()) {
        ("lg.check", 2) => (1, &args[1..]),
        ("lg.check", 3) => match non_negative(args[2], "cost") {
            Ok(cost) => (cost, &args[1..2]),
            Err(e) => {
                reply::error(out, &e);
                return true;
            }
        },
        ("lg.checkall", n) if n >= 3 => match non_negative(args[1], "cost") {
            Ok(cost) => (cost, &args[2..]),
            Err(e) => {
                reply::error(out, &e);
                return true;
            }
        },
        ("lg.rule", 2) => (0, &args[1..]),
        _ => {
            reply::error(out, &format!("ERR wrong number of arguments for '{command}' command"));
            return true;
        }
    };
    if let Some(long) = keys.iter().find(|key| key.len() > MAX_KEY) {
        reply::error(out, &format!("ERR {}", key_too_long(long.len())));
        return true;
    }
    let written: Vec<String> = keys
        .iter()
        .map(|key| {
            let mut s = String::with_capacity(key.len());
            write_key(&mut s, key);
            s
        })
        .collect();
    let keys: Vec<&str> = written.iter().map(String::as_str).collect();
    let in_force = limits.in_force();
    if command == "lg.rule" {
        match in_force.rules.rule_for(keys[0]) {
            Some((path, rule)) => {
                reply::array(out, 2);
                reply::bulk(out, path.as_bytes());
                reply::bulk(out, rule.to_string().as_bytes());
            }
            None => {
                reply::array(out, 2);
                reply::null(out, resp3);
                reply::null(out, resp3);
            }
        }
        return false;
    }
    let checked = limits.check_all(&in_force, &keys, cost).await;
    if checked.failed {
        limits.count_failure(&in_force.rules, &keys);
    }
    reply::array(out, 5);
    figures(out, &checked.decision);
    let rule_of = |key: &str| in_force.rules.rule_for(key).map(|(path, _)| path.to_string());
    if command == "lg.check" {
        match rule_of(keys[0]) {
            Some(path) => reply::bulk(out, path.as_bytes()),
            None => reply::null(out, resp3),
        }
    } else {
        reply::array(out, keys.len());
        for key in &keys {
            match rule_of(key) {
                Some(path) => reply::bulk(out, path.as_bytes()),
                None => reply::null(out, resp3),
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_redis_reads_them() {
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"-12"), Some(-12));
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b"9223372036854775808"[..], b"", b"-", b"+1", b"1 ", b"1.5", b"0x10"] {
            assert_eq!(parse_int(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn times_round_up() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1900)), 2);
        assert_eq!(ceil_secs(Duration::from_secs(3)), 3);
        assert_eq!(ceil_millis(Duration::from_nanos(1_000_001)), 2);
        assert_eq!(ceil_secs(Duration::MAX), i64::MAX);
    }
}
