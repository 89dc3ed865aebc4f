//! `/buckets` when the buckets live in Redis: found by `SCAN` over the service's keys (on a Redis
//! Cluster, on every master), each read with a peek (cost 0, pipelined), one row per key.
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
use redis::aio::ConnectionLike;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::Value;
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
    let (mut con, nodes) = connect(limits).await?;
    let cell = limits.cell.redis();
    let cell_head = cell.map(|c| c.redis_key(b""));
    let (mut cursor, mut scanned) = (0u64, Vec::new());
    for node in &nodes {
        cursor = 0;
        loop {
            let mut command = redis::cmd("SCAN");
            command.arg(cursor).arg("MATCH").arg("leakgate:*").arg("COUNT").arg(1000);
            let scan = async {
                let value = match (&mut con, node) {
                    (Con::Cluster(c), Some(at)) => c.route_command(command, at.clone()).await?,
                    (c, _) => c.req_packed_command(&command).await?,
                };
                redis::from_redis_value::<(u64, Vec<Vec<u8>>)>(value.extract_error()?)
                    .map_err(redis::RedisError::from)
            };
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
        if scanned.len() >= MAX_SCANNED {
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

/// A connection to the service's Redis, one node or a cluster.
enum Con {
    One(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl ConnectionLike for Con {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        match self {
            Con::One(c) => c.req_packed_command(cmd),
            Con::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        match self {
            Con::One(c) => c.req_packed_commands(pipeline, offset, count),
            Con::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Con::One(c) => c.get_db(),
            Con::Cluster(c) => c.get_db(),
        }
    }
}

/// Connects, and names the nodes to scan: the one node (`None`), or every master of a cluster
/// (from `CLUSTER SLOTS`).
async fn connect<C: Clock + 'static>(
    limits: &Limits<C>,
) -> Result<(Con, Vec<Option<RoutingInfo>>), String> {
    let timely = |e: Result<Result<Con, redis::RedisError>, _>| {
        e.map_err(|_| "no connection to Redis in time".to_string())?.map_err(|e| e.to_string())
    };
    if let Some(url) = limits.redis_url.as_deref() {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let connect = async { client.get_multiplexed_async_connection().await.map(Con::One) };
        let con = timely(tokio::time::timeout(TIMEOUT, connect).await)?;
        return Ok((con, vec![None]));
    }
    if limits.redis_cluster.is_empty() {
        return Err("no Redis configured".into());
    }
    let client =
        redis::cluster::ClusterClient::builder(limits.redis_cluster.iter().map(String::as_str))
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
    let connect = async { client.get_async_connection().await.map(Con::Cluster) };
    let mut con = timely(tokio::time::timeout(TIMEOUT, connect).await)?;
    let mut cluster_slots = redis::cmd("CLUSTER");
    cluster_slots.arg("SLOTS");
    let slots = cluster_slots.query_async::<Value>(&mut con);
    let slots = tokio::time::timeout(TIMEOUT, slots)
        .await
        .map_err(|_| "Redis did not answer CLUSTER SLOTS in time".to_string())?
        .map_err(|e| e.to_string())?;
    let mut masters: Vec<(String, u16)> = Vec::new();
    if let Value::Array(ranges) = slots {
        for range in ranges {
            let Value::Array(range) = range else { continue };
            let Some(Value::Array(master)) = range.get(2) else { continue };
            let host =
                master.first().and_then(|h| redis::from_redis_value::<String>(h.clone()).ok());
            let port = master.get(1).and_then(|p| redis::from_redis_value::<u16>(p.clone()).ok());
            if let (Some(host), Some(port)) = (host, port) {
                if !masters.contains(&(host.clone(), port)) {
                    masters.push((host, port));
                }
            }
        }
    }
    let nodes = masters
        .into_iter()
        .map(|(host, port)| {
            Some(RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port }))
        })
        .collect();
    Ok((con, nodes))
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
