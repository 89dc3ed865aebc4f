//! A page of a [`Table`]'s buckets for `/buckets`: those whose shown key starts with a prefix,
//! at least so full, after a cursor, the first `limit` in key order.
//!
//! One pass over the table, a shard at a time (each locked only while it is read), comparing
//! each key in place: only the keys that enter the page are copied, into a heap of at most
//! `limit` entries, so a page of 1,000 out of half a million keys costs one read of each key and
//! about a thousand copies, whatever the table holds.

use super::gcra::{decide, Params};
use super::table::{Table, SHARDS};
use crate::limits::write_key;
use leakgate::Clock;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

/// What a page asks for.
#[derive(Debug)]
pub(crate) struct Query<'a> {
    /// Shown keys start with this.
    pub(crate) prefix: &'a str,
    /// Fill (level / burst) at least this.
    pub(crate) min_fill: f64,
    /// Shown keys after this one only.
    pub(crate) after: Option<&'a str>,
    /// At most this many.
    pub(crate) limit: usize,
}

/// One listed bucket.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Listed {
    /// The shown key: the table's head, then the key written as `write_key` writes it.
    pub(crate) key: String,
    /// The quota of its last charge.
    pub(crate) params: Params,
    /// Units in the bucket (`(TAT - now) / T`, at most the burst), and that over the burst.
    pub(crate) level: f64,
    pub(crate) fill: f64,
    pub(crate) remaining: u64,
    pub(crate) reset_after: Duration,
    /// Time since its last charge.
    pub(crate) idle: Duration,
}

/// A heap entry, ordered by key alone.
struct ByKey(Listed);

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}
impl Eq for ByKey {}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.key.cmp(&other.0.key)
    }
}

/// A key as shown (`head` then `raw`), compared in place when `raw` is shown as it is.
enum Shown<'a> {
    Plain(&'a str, &'a [u8]),
    Written(String),
}

impl<'a> Shown<'a> {
    fn of(head: &'a str, raw: &'a [u8]) -> Shown<'a> {
        match std::str::from_utf8(raw) {
            Ok(text) if !text.contains('\\') => Shown::Plain(head, raw),
            _ => {
                let mut written = String::from(head);
                write_key(&mut written, raw);
                Shown::Written(written)
            }
        }
    }

    fn cmp(&self, other: &str) -> Ordering {
        match self {
            Shown::Plain(head, raw) => {
                let other = other.as_bytes();
                let cut = head.len().min(other.len());
                match head.as_bytes().cmp(&other[..cut]) {
                    Ordering::Equal if head.len() > other.len() => Ordering::Greater,
                    Ordering::Equal => (*raw).cmp(&other[cut..]),
                    unequal => unequal,
                }
            }
            Shown::Written(text) => text.as_str().cmp(other),
        }
    }

    fn starts_with(&self, prefix: &str) -> bool {
        match self {
            Shown::Plain(head, raw) => {
                let p = prefix.as_bytes();
                let cut = head.len().min(p.len());
                head.as_bytes().starts_with(&p[..cut]) && raw.starts_with(&p[cut..])
            }
            Shown::Written(text) => text.starts_with(prefix),
        }
    }

    fn into_string(self) -> String {
        match self {
            // Valid UTF-8, checked in `of`.
            Shown::Plain(head, raw) => format!("{head}{}", String::from_utf8_lossy(raw)),
            Shown::Written(text) => text,
        }
    }
}

/// The page of `table` that `query` asks for (keys shown with `head` in front), in key order,
/// and how many buckets match the prefix and fill (before the cursor and the limit).
pub(crate) fn page<C: Clock>(
    table: &Table<C>,
    head: &str,
    query: &Query<'_>,
) -> (Vec<Listed>, usize) {
    let mut heap: BinaryHeap<ByKey> = BinaryHeap::with_capacity(query.limit.min(4096) + 1);
    let mut matched = 0usize;
    for shard in 0..SHARDS {
        table.for_each_in(shard, |entry, now| {
            let shown = Shown::of(head, &entry.key);
            if !shown.starts_with(query.prefix) {
                return;
            }
            let figures = match decide(entry.tat, entry.params, now, 0).decision {
                Ok(ok) => (ok.remaining(), ok.reset_after()),
                Err(no) => (no.remaining(), no.reset_after()),
            };
            let p = entry.params;
            let interval_ns = p.period_ns as f64 / p.count as f64;
            let level = (figures.1.as_nanos() as f64 / interval_ns).min(p.burst as f64);
            let fill = level / p.burst as f64;
            if fill < query.min_fill {
                return;
            }
            matched += 1;
            if query.after.is_some_and(|after| shown.cmp(after) != Ordering::Greater) {
                return;
            }
            let full = heap.len() >= query.limit;
            if full && heap.peek().is_none_or(|top| shown.cmp(&top.0.key) != Ordering::Less) {
                return;
            }
            if full {
                heap.pop();
            }
            heap.push(ByKey(Listed {
                key: shown.into_string(),
                params: p,
                level,
                fill,
                remaining: figures.0,
                reset_after: figures.1,
                idle: Duration::from_nanos(now.saturating_sub(entry.last_ns)),
            }));
        });
    }
    let listed = heap.into_sorted_vec().into_iter().map(|ByKey(listed)| listed).collect();
    (listed, matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_keys_compare_as_their_text() {
        let texts = ["", "c", "cl", "cl.throttle/", "cl.throttle/a", "cl.throttle/ab", "cl.z", "d"];
        for raw in [&b""[..], b"a", b"ab", b"b", b"a\\b", b"\xff"] {
            let shown = Shown::of("cl.throttle/", raw);
            let mut text = String::from("cl.throttle/");
            write_key(&mut text, raw);
            for other in texts {
                assert_eq!(shown.cmp(other), text.as_str().cmp(other), "{text:?} vs {other:?}");
                assert_eq!(shown.starts_with(other), text.starts_with(other), "{text:?} {other:?}");
            }
        }
    }
}
