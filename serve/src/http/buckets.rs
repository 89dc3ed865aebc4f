//! `GET /buckets?prefix=P&min_fill=F&limit=N`: the tracked buckets as JSON.
//!
//! ```json
//! {"backend":"memory","source":"file rules.toml","matched":2,"listed":2,"buckets":[
//!   {"key":"message_send/alice","rule":"message_send","quota_index":0,"quota":"10/s",
//!    "level":6.0,"fill":0.6,"remaining":4,"reset_after_ms":600,"idle_ms":12}]}
//! ```
//!
//! `prefix` keeps the keys that start with it; `min_fill` (0.0 to 1.0) the buckets at least that
//! full (`fill` is `level / burst`: 0 empty, 1 a whole burst in use; "below 50% left" is
//! `min_fill=0.5`); `limit` caps the list (1,000 by default, at most 10,000; `matched` tells how
//! many matched). Buckets are listed by key. Both limiters are listed: the rules file's and
//! `CL.THROTTLE`'s (rule `cl.throttle/<max_burst>/<count>/<period>`). With `--redis` the
//! buckets live in Redis and are not listed here (`"listed_here": false`).

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
    prefix: String,
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
    matched: usize,
    listed: usize,
    buckets: Vec<Bucket>,
}

#[derive(Serialize)]
struct Bucket {
    key: String,
    rule: String,
    quota_index: usize,
    quota: String,
    level: f64,
    fill: f64,
    remaining: u64,
    reset_after_ms: u128,
    idle_ms: u128,
}

/// The answer to `filter`, as JSON.
pub(crate) fn render<C: Clock + 'static>(limits: &Limits<C>, filter: &Filter) -> String {
    let min_fill = filter.min_fill.filter(|f| f.is_finite()).unwrap_or(0.0);
    let limit = filter.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT);
    let mut all = Vec::new();
    let mut listed_here = true;
    for backend in [&limits.rules, &limits.cell] {
        match backend.buckets(&filter.prefix, min_fill) {
            Some(buckets) => all.extend(buckets),
            None => listed_here = false,
        }
    }
    all.sort_by(|a, b| (&a.key, a.quota_index).cmp(&(&b.key, b.quota_index)));
    let matched = all.len();
    let buckets: Vec<Bucket> = all
        .into_iter()
        .take(limit)
        .map(|b| Bucket {
            key: b.key,
            rule: b.rule,
            quota_index: b.quota_index,
            quota: b.quota.to_string(),
            level: b.level,
            fill: b.fill,
            remaining: b.remaining,
            reset_after_ms: b.reset_after.as_millis(),
            idle_ms: b.since_last_use.as_millis(),
        })
        .collect();
    let page = Page {
        backend: limits.rules.kind(),
        source: limits.in_force().source.clone(),
        listed_here,
        matched,
        listed: buckets.len(),
        buckets,
    };
    serde_json::to_string(&page).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
