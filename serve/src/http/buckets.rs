//! `GET /buckets?prefix=P&min_fill=F&limit=N&cursor=C`: the tracked buckets as JSON, a page at a
//! time.
//!
//! ```json
//! {"backend":"memory","source":"file rules.toml","listed_here":true,"truncated":false,
//!  "matched":2,"listed":2,"next_cursor":null,"buckets":[
//!   {"key":"message_send/alice","rule":"message_send","quota_index":0,"quota":"10/s",
//!    "level":6.0,"fill":0.6,"remaining":4,"reset_after_ms":600,"idle_ms":12}]}
//! ```
//!
//! `prefix` keeps the keys that start with it (at most 4 KiB); `min_fill` (0.0 to 1.0) the
//! buckets at least that full (`fill` is `level / burst`: 0 empty, 1 a whole burst in use;
//! "below 50% left" is `min_fill=0.5`); `limit` caps the page (1,000 by default, at most
//! 10,000); `matched` counts every bucket that matches, on every page. Buckets are listed by key
//! (then quota); when more follow, `next_cursor` is the value of `cursor` that asks for the next
//! page. Listed: the rules limiter's buckets, every `CL.THROTTLE` bucket (key
//! `cl.throttle/<key>`, rule `cl.throttle`, quota that of its last charge), and the descriptor
//! overrides' (rule `~override/<n>/<unit>`). A page reads each client-made key once and copies
//! only those it lists (see `crate::tat::page`). With `--redis` the buckets are found in Redis
//! (see `redis_buckets`: one row per key, no idle time, `"truncated": true` when the scan
//! stopped before the end).

use super::row::Bucket;
use crate::cell::CellStore;
use crate::limits::{Limits, CELL_HEAD, MAX_KEY, OVERRIDE_HEAD};
use crate::tat::{self, Listed, Table};
use leakgate::Clock;
use serde::{Deserialize, Serialize};

/// Buckets listed when `limit` is not given.
pub(crate) const DEFAULT_LIMIT: usize = 1000;
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
    #[serde(default)]
    cursor: Option<String>,
}

impl Filter {
    /// Why the query cannot be answered, if it cannot.
    pub(crate) fn invalid(&self) -> Option<String> {
        if self.prefix.len() > MAX_KEY {
            return Some(format!("prefix: {}", crate::limits::key_too_long(self.prefix.len())));
        }
        match &self.cursor {
            Some(cursor) if Cursor::parse(cursor).is_none() => {
                Some("cursor: not a cursor this service gave (next_cursor)".into())
            }
            _ => None,
        }
    }
}

/// Where a page starts: after this key's bucket of this quota index.
#[derive(Debug, PartialEq, Eq)]
struct Cursor<'a> {
    quota_index: usize,
    key: &'a str,
}

impl<'a> Cursor<'a> {
    /// `"<quota_index>:<key>"`.
    fn parse(text: &'a str) -> Option<Cursor<'a>> {
        let (index, key) = text.split_once(':')?;
        (key.len() <= MAX_KEY + OVERRIDE_HEAD.len() + 64).then_some(())?;
        Some(Cursor { quota_index: index.parse().ok()?, key })
    }

    fn of(bucket: &Bucket) -> String {
        format!("{}:{}", bucket.quota_index, bucket.key)
    }

    /// Whether `bucket` comes after the cursor.
    fn before(&self, bucket: &Bucket) -> bool {
        (self.key, self.quota_index) < (bucket.key.as_str(), bucket.quota_index)
    }
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
    next_cursor: Option<String>,
    buckets: Vec<Bucket>,
}

/// A table's listed bucket as a row, under `rule`.
fn row(listed: Listed, rule: String) -> Bucket {
    Bucket {
        rule,
        quota_index: 0,
        quota: listed.params.quota().map_or_else(String::new, |q| q.to_string()),
        level: listed.level,
        fill: listed.fill,
        remaining: listed.remaining,
        reset_after_ms: listed.reset_after.as_millis(),
        idle_ms: Some(listed.idle.as_millis()),
        key: listed.key,
    }
}

/// The rule path of an override key: `~override/<n>/<unit>`.
fn override_rule(key: &str) -> String {
    let mut cut = key.match_indices('/').map(|(i, _)| i);
    match cut.nth(2) {
        Some(end) => key[..end].to_string(),
        None => key.to_string(),
    }
}

/// The answer to `filter`, as JSON.
pub(crate) async fn render<C: Clock + 'static>(limits: &Limits<C>, filter: &Filter) -> String {
    let min_fill = filter.min_fill.filter(|f| f.is_finite()).unwrap_or(0.0);
    let limit = filter.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let cursor = filter.cursor.as_deref().and_then(Cursor::parse);
    let after = |b: &Bucket| cursor.as_ref().is_none_or(|c| c.before(b));
    // One more than the page, from each source: whether more follow.
    let want = limit + 1;
    let (mut rows, mut matched) = (Vec::new(), 0usize);
    let mut listed_here = true;
    let mut truncated = false;
    if let Some(buckets) = limits.rules.buckets(&filter.prefix, min_fill) {
        matched += buckets.len();
        let rules = buckets.into_iter().map(|b| Bucket {
            key: b.key,
            rule: b.rule,
            quota_index: b.quota_index,
            quota: b.quota.to_string(),
            level: b.level,
            fill: b.fill,
            remaining: b.remaining,
            reset_after_ms: b.reset_after.as_millis(),
            idle_ms: Some(b.since_last_use.as_millis()),
        });
        rows.extend(rules.filter(|b| after(b)).take(want));
    }
    let query = tat::Query {
        prefix: &filter.prefix,
        min_fill,
        after: cursor.as_ref().map(|c| c.key),
        limit: want,
    };
    // With Redis, the cell store's table is the local fallback's: not listed.
    let cells = match &limits.cell {
        CellStore::Memory(table) => Some(table),
        CellStore::Redis { .. } => None,
    };
    let tables: [(Option<&Table<C>>, &str); 2] =
        [(cells, CELL_HEAD), (limits.overrides.as_ref(), "")];
    for (table, head) in tables {
        let Some(table) = table else { continue };
        let shown = if head.is_empty() { String::new() } else { format!("{head}/") };
        let (listed, found) = tat::page(table, &shown, &query);
        matched += found;
        for listed in listed {
            let rule = if head.is_empty() { override_rule(&listed.key) } else { head.to_string() };
            rows.push(row(listed, rule));
        }
    }
    if limits.rules.redis().is_some() {
        match super::redis_buckets::list(limits, &filter.prefix, min_fill).await {
            Ok((found, stopped_early)) => {
                matched += found.len();
                rows.extend(found.into_iter().filter(|b| after(b)).take(want));
                truncated = stopped_early;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the buckets in Redis");
                listed_here = false;
            }
        }
    }
    rows.sort_by(|a, b| (&a.key, a.quota_index).cmp(&(&b.key, b.quota_index)));
    let next_cursor = (rows.len() > limit).then(|| Cursor::of(&rows[limit - 1]));
    rows.truncate(limit);
    let page = Page {
        backend: limits.rules.kind(),
        source: limits.in_force().source.clone(),
        listed_here,
        truncated,
        matched,
        listed: rows.len(),
        next_cursor,
        buckets: rows,
    };
    serde_json::to_string(&page).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_what_they_wrote() {
        let c = Cursor::parse("2:api/x:y").unwrap();
        assert_eq!(c, Cursor { quota_index: 2, key: "api/x:y" });
        assert_eq!(Cursor::parse("x:api"), None);
        assert_eq!(Cursor::parse("api"), None);
        let long = format!("0:{}", "k".repeat(MAX_KEY + 100));
        assert_eq!(Cursor::parse(&long), None);
    }

    #[test]
    fn override_keys_name_their_rule() {
        assert_eq!(override_rule("~override/10/minute/edge/ip/1"), "~override/10/minute");
        assert_eq!(override_rule("~override/10"), "~override/10");
    }
}
