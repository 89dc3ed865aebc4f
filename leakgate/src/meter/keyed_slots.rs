//! A flow's words in a keyed meter's tables: a request of a word, a word's state read outside
//! the bucket protocol (for a decision or a report), and the reading to hand a table that
//! converts it itself.

use crate::bucket::Word;
use crate::clock::Clock;
use crate::gcra::Rate;
use crate::keyed::{Ask, FirstState, KeyedLimiter};
use std::borrow::Borrow;
use std::hash::Hash;

/// The state of `key`'s bucket in `table` at `now` (ticks): its word's value, or `now` if the
/// table does not hold the key or is forgetting it (an idle bucket is a full one).
pub(super) fn state<K, C, Q>(table: &KeyedLimiter<K, C>, key: &Q, hash: u64, now: u64) -> u64
where
    K: Hash + Eq + Clone + Borrow<Q>,
    C: Clock,
    Q: Eq + ?Sized,
{
    loop {
        let Some(found) = table.table().find(key, hash) else { return now };
        match Word::load(&found) {
            Ok(tat) => return tat,
            Err(_) if found.is_sealed() => return now,
            // Another key took a slot of the group: look again.
            Err(_) => {}
        }
    }
}

/// The latest reading at or before `now_ns` that `rate`'s own conversion (`Rate::units_at`,
/// which may count a tick early: see [`Ticks`](super::ticks::Ticks)) turns into no more than
/// `ticks`, the decision's exact time: for the table's calls that convert a reading themselves
/// (giving a charge back, giving a flow a slot), so that they never take the decision for a
/// later one. A binary search on the monotone conversion; only on those cold paths.
pub(super) fn table_ns(rate: &Rate, ticks: u64, now_ns: u64) -> u64 {
    if rate.units_at(now_ns) <= ticks {
        return now_ns;
    }
    // units_at(lo) <= ticks < units_at(hi); units_at(0) = 0.
    let (mut lo, mut hi) = (0, now_ns);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if rate.units_at(mid) <= ticks {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// A meter's request of `n` of a flow's word in a table of rate `rate`, at `now` (the
/// decision's time in ticks of `rate`; `now_ns` the reading it came from). A meter never waits
/// (`max_wait` 0) nor borrows the table's shared bucket, and its tables never change quota
/// (epoch 0, their first rate); a new flow's bucket opens empty.
#[inline]
pub(super) fn ask(rate: &Rate, now: u64, now_ns: u64, n: u64) -> Ask<'_> {
    // What the table converts itself (the time a flow with no slot was seen, which every new
    // flow's buckets open at) must not come out a tick later than `now`.
    let now_ns = table_ns(rate, now, now_ns);
    let start = &|| FirstState::EMPTY;
    Ask { now, now_ns, n, max_wait: 0, shared_overflow: false, start, epoch: 0, rate }
}
