//! `/buckets` when the buckets live in Redis: found by `SCAN` over the limiters' keys
//! (`leakgate:gcra1@<rule path>:<key>`, as `leakgate-redis` documents them), each read with a
//! peek (cost 0, pipelined), one row per key.
//!
//! A Redis key is listed only when it is the key's bucket under the rules in force (a bucket
//! left under an older rule is not). Each row's `remaining` and `reset_after_ms` are the key's
//! (all its rule's quotas); `level` and `fill` are exact for a rule of one quota and, for a rule
//! of several, measured against the quota whose bucket takes longest to empty. Idle times are
//! not kept in Redis (`idle_ms` is null). At most [`MAX_SCANNED`] Redis keys are looked at per
//! answer (`truncated` says when more were left).

use super::buckets::{Bucket, Filter};
use crate::backend::Backend;
use crate::limits::{CellQuota, Limits, CELL_HEAD};
use leakgate::{Clock, Rules};
use std::time::Duration;

/// The most Redis keys one answer scans.
pub(crate) const MAX_SCANNED: usize = 100_000;
/// How long one answer may talk to Redis.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The buckets in Redis that match `filter` (sorted by key), and whether the scan stopped early.
pub(crate) async fn list<C: Clock + 'static>(
    limits: &Limits<C>,
    filter: &Filter,
    min_fill: f64,
) -> Result<(Vec<Bucket>, bool), String> {
    let url = limits.redis_url.as_deref().ok_or("no Redis configured")?;
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let connect = client.get_multiplexed_async_connection();
    let mut con = tokio::time::timeout(TIMEOUT, connect)
        .await
        .map_err(|_| "no connection to Redis in time".to_string())?
        .map_err(|e| e.to_string())?;
    let (mut cursor, mut scanned) = (0u64, Vec::new());
    loop {
        let mut command = redis::cmd("SCAN");
        command.arg(cursor).arg("MATCH").arg("leakgate:gcra1@*").arg("COUNT").arg(1000);
        let scan = command.query_async::<(u64, Vec<Vec<u8>>)>(&mut con);
        let (next, keys) = tokio::time::timeout(TIMEOUT, scan)
            .await
            .map_err(|_| "Redis did not answer SCAN in time".to_string())?
            .map_err(|e| e.to_string())?;
        scanned.extend(keys);
        cursor = next;
        if cursor == 0 || scanned.len() >= MAX_SCANNED {
            break;
        }
    }
    // CL.THROTTLE quotas that other instances made: this one makes their rules too, so that
    // it can read their buckets.
    for redis_key in &scanned {
        if let Some(quota) = cell_quota(redis_key) {
            let _ = crate::limits::blocking(|| limits.ensure_cell(quota));
        }
    }
    // The rules limiter's and CL.THROTTLE's, each with its rules in force.
    let limiters: Vec<(&Backend<C>, Rules)> = [&limits.rules, &limits.cell]
        .into_iter()
        .filter_map(|b| b.redis().map(|lim| (b, lim.rules())))
        .collect();
    let mut found: Vec<(String, usize)> =
        scanned.iter().filter_map(|k| owner(&limiters, k, &filter.prefix)).collect();
    let truncated = cursor != 0;
    found.sort();
    found.dedup();
    let peeks = found.iter().map(|(key, which)| {
        let (backend, rules) = &limiters[*which];
        limits.peek_on(backend, rules, key)
    });
    let peeked = futures_util::future::join_all(peeks).await;
    let mut rows = Vec::new();
    for ((key, which), checked) in found.into_iter().zip(peeked) {
        let rules = &limiters[which].1;
        let Some((path, rule)) = rules.rule_for(&key) else { continue };
        let (remaining, reset) = match &checked.decision {
            Ok(ok) => (ok.remaining(), ok.reset_after()),
            Err(no) => (no.remaining(), no.reset_after()),
        };
        // The quota whose bucket takes longest to empty: reset_after is at most its tau.
        let tau = |q: &&leakgate::Quota| q.emission_interval().as_nanos() * u128::from(q.burst());
        let Some(quota) = rule.quotas().iter().max_by_key(tau) else { continue };
        let t = quota.emission_interval().as_secs_f64();
        let level = (reset.as_secs_f64() / t).min(quota.burst() as f64);
        let fill = level / quota.burst() as f64;
        if fill < min_fill {
            continue;
        }
        rows.push(Bucket {
            key,
            rule: path.to_string(),
            quota_index: 0,
            quota: rule.quotas().iter().map(|q| q.to_string()).collect::<Vec<_>>().join(", "),
            level,
            fill,
            remaining,
            reset_after_ms: reset.as_millis(),
            idle_ms: None,
        });
    }
    Ok((rows, truncated))
}

/// The `CL.THROTTLE` quota of a Redis key under a rule `cl.throttle/<max_burst>/<count>/<period>`.
fn cell_quota(redis_key: &[u8]) -> Option<CellQuota> {
    let rest = redis_key.strip_prefix(b"leakgate:gcra1@")?;
    let path = std::str::from_utf8(&rest[..rest.iter().position(|&b| b == b':')?]).ok()?;
    let mut parts = path.strip_prefix(CELL_HEAD)?.strip_prefix('/')?.split('/');
    let mut number = || parts.next()?.parse::<u64>().ok();
    let quota = CellQuota { max_burst: number()?, count: number()?, period_s: number()? };
    parts.next().is_none().then_some(quota)
}

/// The key (and which limiter holds it) whose bucket under the rules in force is `redis_key`,
/// if it starts with `prefix`.
fn owner<C: Clock + 'static>(
    limiters: &[(&Backend<C>, Rules)],
    redis_key: &[u8],
    prefix: &str,
) -> Option<(String, usize)> {
    let rest = redis_key.strip_prefix(b"leakgate:gcra1@")?;
    // The rule path has its ':' escaped: the first ':' ends it.
    let colon = rest.iter().position(|&b| b == b':')?;
    let key = std::str::from_utf8(&rest[colon + 1..]).ok()?;
    if !key.starts_with(prefix) {
        return None;
    }
    limiters.iter().enumerate().find_map(|(i, (backend, _))| {
        let lim = backend.redis()?;
        (lim.redis_key(key).as_deref() == Some(redis_key)).then(|| (key.to_string(), i))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_quotas_are_read_from_their_rule_path() {
        let quota = cell_quota(b"leakgate:gcra1@cl.throttle/15/30/60:cl.throttle/15/30/60/u:1");
        assert_eq!(quota, Some(CellQuota { max_burst: 15, count: 30, period_s: 60 }));
        for other in [
            &b"leakgate:gcra1@api:api/x"[..],
            b"leakgate:gcra1@cl.throttle/15/30:k",
            b"leakgate:gcra1@cl.throttle/15/30/60/7:k",
            b"leakgate:gcra1@cl.throttle/a/30/60:k",
            b"other:gcra1@cl.throttle/1/1/1:k",
        ] {
            assert_eq!(cell_quota(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
