//! `GET /buckets?prefix=P&min_fill=F&limit=N`: the tracked buckets as JSON.
//!
//! ```json
//! {"backend":"memory","source":"file rules.toml","listed_here":true,"truncated":false,
//!  "matched":2,"listed":2,"buckets":[
//!   {"key":"message_send/alice","rule":"message_send","quota_index":0,"quota":"10/s",
//!    "level":6.0,"fill":0.6,"remaining":4,"reset_after_ms":600,"idle_ms":12}]}
//! ```
//!
//! `prefix` keeps the keys that start with it; `min_fill` (0.0 to 1.0) the buckets at least that
//! full (`fill` is `level / burst`: 0 empty, 1 a whole burst in use; "below 50% left" is
//! `min_fill=0.5`); `limit` caps the list (1,000 by default, at most 10,000; `matched` tells how
//! many matched). Buckets are listed by key. Both limiters are listed: the rules file's and
//! `CL.THROTTLE`'s (rule `cl.throttle/<max_burst>/<count>/<period>`). With `--redis` the
//! buckets are found in Redis (see `redis_buckets`: one row per key, no idle time,
//! `"truncated": true` when the scan stopped before the end).

use crate::limits::Limits;
use leakgate::Clock;
use serde::{Deserialize, Serialize};

/// Buckets listed when `limit` is not given.
const DEFAULT_LIMIT: usize = 1000;
/// The most buckets one answer lists.
const MAX_LIMIT: usize = 10_000;

/// The query.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Filter {
    #[serde(default)]
    pub(crate) prefix: String,
    #[serde(default)]
    min_fill: Option<f64>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Serialize)]
struct Page {
    backend: &'static str,
    source: String,
    listed_here: bool,
    /// With Redis: the scan stopped before the end of the keyspace.
    truncated: bool,
    matched: usize,
    listed: usize,
    buckets: Vec<Bucket>,
}

/// One listed bucket.
#[derive(Serialize)]
pub(crate) struct Bucket {
    pub(crate) key: String,
    pub(crate) rule: String,
    pub(crate) quota_index: usize,
    pub(crate) quota: String,
    pub(crate) level: f64,
    pub(crate) fill: f64,
    pub(crate) remaining: u64,
    pub(crate) reset_after_ms: u128,
    /// Time since the key's last admitted request (not known for buckets in Redis).
    pub(crate) idle_ms: Option<u128>,
}

/// The answer to `filter`, as JSON.
pub(crate) async fn render<C: Clock + 'static>(limits: &Limits<C>, filter: &Filter) -> String {
    let min_fill = filter.min_fill.filter(|f| f.is_finite()).unwrap_or(0.0);
    let limit = filter.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT);
    let mut all = Vec::new();
    let mut listed_here = true;
    let mut truncated = false;
    for backend in [&limits.rules, &limits.cell] {
        if let Some(buckets) = backend.buckets(&filter.prefix, min_fill) {
            all.extend(buckets.into_iter().map(|b| Bucket {
                key: b.key,
                rule: b.rule,
                quota_index: b.quota_index,
                quota: b.quota.to_string(),
                level: b.level,
                fill: b.fill,
                remaining: b.remaining,
                reset_after_ms: b.reset_after.as_millis(),
                idle_ms: Some(b.since_last_use.as_millis()),
            }));
        }
    }
    if limits.rules.redis().is_some() {
        match super::redis_buckets::list(limits, filter, min_fill).await {
            Ok((found, stopped_early)) => {
                all.extend(found);
                truncated = stopped_early;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the buckets in Redis");
                listed_here = false;
            }
        }
    }
    all.sort_by(|a, b| (&a.key, a.quota_index).cmp(&(&b.key, b.quota_index)));
    let matched = all.len();
    all.truncate(limit);
    let page = Page {
        backend: limits.rules.kind(),
        source: limits.in_force().source.clone(),
        listed_here,
        truncated,
        matched,
        listed: all.len(),
        buckets: all,
    };
    serde_json::to_string(&page).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
