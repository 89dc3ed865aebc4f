//! `/buckets` when the buckets live in Redis: found by `SCAN` over the service's keys, each read
//! with a peek (cost 0, pipelined), one row per key.
//!
//! * The rules limiter's keys (`leakgate:gcra1@<rule path>:<key>`, as `leakgate-redis`
//!   documents them): a Redis key is listed only when it is the key's bucket under the rules in
//!   force (a bucket left under an older rule is not). Each row's `remaining` and
//!   `reset_after_ms` are the key's (all its rule's quotas); `level` and `fill` are exact for a
//!   rule of one quota and, for a rule of several, measured against the quota whose bucket takes
//!   longest to empty.
//! * `CL.THROTTLE`'s keys (`leakgate:tat1:<key>`): shown as `cl.throttle/<key>` under the quota
//!   of their last charge, which the stored value names (read with `GET`).
//!
//! Idle times are not kept in Redis (`idle_ms` is null). At most [`MAX_SCANNED`] Redis keys are
//! looked at per answer (`truncated` says when more were left).

use super::row::Bucket;
use crate::limits::{write_key, Limits, CELL_HEAD};
use leakgate::{Admitted, Clock, Denied, Quota, Rules};
use leakgate_redis::AsyncRedisCell;
use std::time::Duration;

/// The most Redis keys one answer scans.
pub(crate) const MAX_SCANNED: usize = 100_000;
/// How long one answer may talk to Redis.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The start of the rules limiter's Redis keys.
const RULES_HEAD: &[u8] = b"leakgate:gcra1@";

/// The buckets in Redis whose keys start with `prefix`, at least `min_fill` full (sorted by
/// key), and whether the scan stopped early.
pub(crate) async fn list<C: Clock + 'static>(
    limits: &Limits<C>,
    prefix: &str,
    min_fill: f64,
) -> Result<(Vec<Bucket>, bool), String> {
    let url = limits.redis_url.as_deref().ok_or("no Redis configured")?;
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let connect = client.get_multiplexed_async_connection();
    let mut con = tokio::time::timeout(TIMEOUT, connect)
        .await
        .map_err(|_| "no connection to Redis in time".to_string())?
        .map_err(|e| e.to_string())?;
    let cell = limits.cell.redis();
    let cell_head = cell.map(|c| c.redis_key(b""));
    let (mut cursor, mut scanned) = (0u64, Vec::new());
    loop {
        let mut command = redis::cmd("SCAN");
        command.arg(cursor).arg("MATCH").arg("leakgate:*").arg("COUNT").arg(1000);
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
    let truncated = cursor != 0;
    let mut rows = Vec::new();
    if let Some(lim) = limits.rules.redis() {
        let rules = lim.rules();
        let mut found: Vec<String> = scanned.iter().filter_map(|k| owner(lim, k, prefix)).collect();
        found.sort();
        found.dedup();
        let peeks = found.iter().map(|key| limits.peek_on(&limits.rules, &rules, key));
        let peeked = futures_util::future::join_all(peeks).await;
        for (key, checked) in found.into_iter().zip(peeked) {
            rows.extend(rule_row(&rules, key, &checked.decision, min_fill));
        }
    }
    if let (Some(cell), Some(head)) = (cell, cell_head) {
        let mut shown = format!("{CELL_HEAD}/");
        let keys: Vec<(Vec<u8>, String)> = scanned
            .iter()
            .filter_map(|k| k.strip_prefix(head.as_slice()))
            .map(|raw| {
                shown.truncate(CELL_HEAD.len() + 1);
                write_key(&mut shown, raw);
                (raw.to_vec(), shown.clone())
            })
            .filter(|(_, shown)| shown.starts_with(prefix))
            .collect();
        for batch in keys.chunks(1000) {
            let names: Vec<Vec<u8>> = batch.iter().map(|(raw, _)| cell.redis_key(raw)).collect();
            let mut mget = redis::cmd("MGET");
            mget.arg(&names);
            let get = mget.query_async::<Vec<Option<Vec<u8>>>>(&mut con);
            let values = tokio::time::timeout(TIMEOUT, get)
                .await
                .map_err(|_| "Redis did not answer MGET in time".to_string())?
                .map_err(|e| e.to_string())?;
            let quotas: Vec<Option<Quota>> = values
                .iter()
                .map(|v| v.as_deref().and_then(AsyncRedisCell::stored_quota))
                .collect();
            let peeks = batch.iter().zip(&quotas).filter_map(|((raw, shown), quota)| {
                let quota = (*quota)?;
                Some(async move { (shown, quota, cell.try_check_n(raw, quota, 0).await) })
            });
            for (shown, quota, peeked) in futures_util::future::join_all(peeks).await {
                let Ok(decision) = peeked else { continue };
                rows.extend(cell_row(shown.clone(), quota, &decision, min_fill));
            }
        }
    }
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    Ok((rows, truncated))
}

/// A rules limiter key's row, unless it is below `min_fill`.
fn rule_row(
    rules: &Rules,
    key: String,
    decision: &Result<Admitted, Denied>,
    min_fill: f64,
) -> Option<Bucket> {
    let (path, rule) = rules.rule_for(&key)?;
    let (remaining, reset) = figures(decision);
    // The quota whose bucket takes longest to empty: reset_after is at most its tau.
    let tau = |q: &&Quota| q.emission_interval().as_nanos() * u128::from(q.burst());
    let quota = rule.quotas().iter().max_by_key(tau)?;
    let (level, fill) = level_fill(*quota, reset);
    (fill >= min_fill).then(|| Bucket {
        key,
        rule: path.to_string(),
        quota_index: 0,
        quota: rule.quotas().iter().map(|q| q.to_string()).collect::<Vec<_>>().join(", "),
        level,
        fill,
        remaining,
        reset_after_ms: reset.as_millis(),
        idle_ms: None,
    })
}

/// A `CL.THROTTLE` key's row, unless it is below `min_fill`.
fn cell_row(
    key: String,
    quota: Quota,
    decision: &Result<Admitted, Denied>,
    min_fill: f64,
) -> Option<Bucket> {
    let (remaining, reset) = figures(decision);
    let (level, fill) = level_fill(quota, reset);
    (fill >= min_fill).then(|| Bucket {
        key,
        rule: CELL_HEAD.to_string(),
        quota_index: 0,
        quota: quota.to_string(),
        level,
        fill,
        remaining,
        reset_after_ms: reset.as_millis(),
        idle_ms: None,
    })
}

fn figures(decision: &Result<Admitted, Denied>) -> (u64, Duration) {
    match decision {
        Ok(ok) => (ok.remaining(), ok.reset_after()),
        Err(no) => (no.remaining(), no.reset_after()),
    }
}

/// A bucket's level (units in it, at most the burst) and fill, from the time until it is empty.
fn level_fill(quota: Quota, reset: Duration) -> (f64, f64) {
    let t = quota.emission_interval().as_secs_f64();
    let level = (reset.as_secs_f64() / t).min(quota.burst() as f64);
    (level, level / quota.burst() as f64)
}

/// The key whose bucket under the rules in force is `redis_key`, if it starts with `prefix`.
fn owner(
    lim: &leakgate_redis::AsyncRedisRuleLimiter,
    redis_key: &[u8],
    prefix: &str,
) -> Option<String> {
    let rest = redis_key.strip_prefix(RULES_HEAD)?;
    // The rule path has its ':' escaped: the first ':' ends it.
    let colon = rest.iter().position(|&b| b == b':')?;
    let key = std::str::from_utf8(&rest[colon + 1..]).ok()?;
    if !key.starts_with(prefix) {
        return None;
    }
    (lim.redis_key(key).as_deref() == Some(redis_key)).then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_at_half_its_burst_is_half_full() {
        let quota: Quota = "10/s burst 20".parse().unwrap();
        assert_eq!(level_fill(quota, Duration::from_secs(1)), (10.0, 0.5));
        assert_eq!(level_fill(quota, Duration::from_secs(5)), (20.0, 1.0));
    }
}
