//! A page of a [`Table`]'s buckets for `/buckets`: those whose shown key starts with a prefix,
//! at least so full, after a cursor, the first `limit` in key order.
//!
//! One pass over the table, a shard at a time (each locked only while it is read), comparing
//! each key in place and its fill in floating point: only the keys that enter the page are
//! copied (and their figures computed exactly), into a heap of at most `limit` entries, so a page
//! of 1,000 out of half a million keys costs one read of each key and about a thousand copies,
//! whatever the table holds.

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

/// A key's tail, as shown after the table's head: its bytes when they are shown as they are,
/// else as `write_key` writes them.
enum Tail<'a> {
    Plain(&'a [u8]),
    Written(String),
}

impl<'a> Tail<'a> {
    fn of(raw: &'a [u8]) -> Tail<'a> {
        match std::str::from_utf8(raw) {
            Ok(text) if !text.contains('\\') => Tail::Plain(raw),
            _ => {
                let mut written = String::new();
                write_key(&mut written, raw);
                Tail::Written(written)
            }
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Tail::Plain(raw) => raw,
            Tail::Written(text) => text.as_bytes(),
        }
    }
}

/// Where the cursor is, relative to the shown keys (all of which start with the head).
enum After<'a> {
    /// Every shown key comes after it.
    Nothing,
    /// No shown key comes after it.
    Everything,
    /// Shown keys whose tail is greater than this come after it.
    Tail(&'a [u8]),
}

impl<'a> After<'a> {
    fn of(head: &str, after: Option<&'a str>) -> After<'a> {
        let Some(after) = after else { return After::Nothing };
        if let Some(tail) = after.strip_prefix(head) {
            return After::Tail(tail.as_bytes());
        }
        // The cursor is a proper prefix of the head, or they differ before either ends.
        if head.as_bytes() > after.as_bytes() {
            After::Nothing
        } else {
            After::Everything
        }
    }

    fn passes(&self, tail: &[u8]) -> bool {
        match self {
            After::Nothing => true,
            After::Everything => false,
            After::Tail(after) => tail > *after,
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
    // Every shown key starts with the head: the prefix and the cursor become conditions on the
    // tail, decided once here as far as the head decides them.
    let prefix_tail = if head.starts_with(query.prefix) {
        &b""[..]
    } else if let Some(tail) = query.prefix.strip_prefix(head) {
        tail.as_bytes()
    } else {
        return (Vec::new(), 0);
    };
    let after = After::of(head, query.after);
    let mut heap: BinaryHeap<ByKey> = BinaryHeap::with_capacity(query.limit.min(4096) + 1);
    let mut matched = 0usize;
    for shard in 0..SHARDS {
        table.for_each_in(shard, |entry, now| {
            let tail = Tail::of(&entry.key);
            if !prefix_tail.is_empty() && !tail.bytes().starts_with(prefix_tail) {
                return;
            }
            // The level in floating point (no division of u128 for a key not listed): the
            // backlog `TAT - now` over the emission interval, at most the burst.
            let (p, tat) = (entry.params, entry.tat);
            let backlog_ns = match tat.ns.cmp(&now) {
                Ordering::Less => 0.0,
                _ => (tat.ns - now) as f64 + tat.rem as f64 / tat.den as f64,
            };
            let interval_ns = p.period_ns as f64 / p.count as f64;
            let level = (backlog_ns / interval_ns).min(p.burst as f64);
            let fill = level / p.burst as f64;
            if fill < query.min_fill {
                return;
            }
            matched += 1;
            if !after.passes(tail.bytes()) {
                return;
            }
            let full = heap.len() >= query.limit;
            let later = |top: &ByKey| tail.bytes() >= &top.0.key.as_bytes()[head.len()..];
            if full && heap.peek().is_none_or(later) {
                return;
            }
            if full {
                heap.pop();
            }
            let figures = match decide(tat, p, now, 0).decision {
                Ok(ok) => (ok.remaining(), ok.reset_after()),
                Err(no) => (no.remaining(), no.reset_after()),
            };
            let key = match tail {
                // Valid UTF-8, checked in `Tail::of`.
                Tail::Plain(raw) => format!("{head}{}", String::from_utf8_lossy(raw)),
                Tail::Written(text) => format!("{head}{text}"),
            };
            heap.push(ByKey(Listed {
                key,
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
    fn prefixes_and_cursors_on_the_tail_decide_as_on_the_shown_key() {
        let texts = ["", "c", "cl", "cl.throttle/", "cl.throttle/a", "cl.throttle/ab", "cl.z", "d"];
        let head = "cl.throttle/";
        for raw in [&b""[..], b"a", b"ab", b"b", b"a\\b", b"\xff"] {
            let tail = Tail::of(raw);
            let mut shown = String::from(head);
            write_key(&mut shown, raw);
            for other in texts {
                let after = After::of(head, Some(other));
                assert_eq!(
                    after.passes(tail.bytes()),
                    shown.as_str() > other,
                    "{shown:?} > {other:?}"
                );
            }
        }
    }
}
