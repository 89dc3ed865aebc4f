//! The types a request of a key's bucket carries through the table's steps (`check.rs`,
//! `insert.rs`, `requota.rs`, `handoff.rs`): what is asked ([`Ask`]), the first state of a new
//! bucket ([`FirstState`]), a key that needs a slot ([`Arrival`]) and the insert's side of a change
//! of quota ([`EpochOf`], [`Changed`]). Kept here, apart from the steps, so each step imports them
//! and none imports another for a type.

use super::group::{Group, Side};
use super::reuse::Reuse;
use crate::gcra::Rate;

/// A request of a key's bucket, as [`KeyedLimiter::take`](super::KeyedLimiter::take) takes it.
#[derive(Clone, Copy)]
pub(crate) struct Ask<'s> {
    /// The clock in the rate's units, and the reading it came from.
    pub(crate) now: u64,
    pub(crate) now_ns: u64,
    /// The cost.
    pub(crate) n: u64,
    /// Units the request may wait past its boundary: 0 for a meter (see [`bucket::take`](crate::bucket::take)).
    pub(crate) max_wait: u64,
    /// Whether a key with no room is served by the shared overflow bucket, if there is one
    /// (meters only: the shared bucket keeps no places).
    pub(crate) shared_overflow: bool,
    /// The epoch of the limiter's rate `now` and `max_wait` are counted in, and that rate.
    pub(crate) epoch: u64,
    pub(crate) rate: &'s Rate,
    /// The first state of the key's bucket if it must be given a slot (see [`FirstState`]).
    /// Called under the key's home lock, only when a slot is being given to the key (possibly
    /// with that slot sealed), and again for each slot given to it within one take (after the
    /// first was lost to another key): it must answer the same each time. Plain keyed limiters
    /// give [`FirstState::EMPTY`].
    pub(crate) start: &'s dyn Fn() -> FirstState,
}

impl<'s> Ask<'s> {
    /// What a plain keyed limiter asks: `n` units at the clock reading `now_ns`, allowing
    /// `max_wait_ns` of wait, both counted in `rate` (the rate of epoch `epoch`), of a bucket that
    /// opens empty ([`FirstState::EMPTY`]) if the key must be given a slot.
    #[inline(always)]
    pub(crate) fn plain(
        rate: &'s Rate,
        epoch: u64,
        (now_ns, n, max_wait_ns): (u64, u64, u64),
        shared_overflow: bool,
    ) -> Self {
        let now = rate.units_at(now_ns);
        let max_wait = if max_wait_ns == 0 { 0 } else { rate.ns_to_units_ceil(max_wait_ns) };
        let start = &|| FirstState::EMPTY;
        Ask { now, now_ns, n, max_wait, shared_overflow, start, epoch, rate }
    }
}

/// What a taker asks of a new bucket's first state: it opens at the larger of `at_least` and
/// where the table opens a bucket in that slot (the table's idle mark, and above anything the
/// slot held before), with `level` units on top. A level handed over from other rules is put on
/// top, not folded into `at_least`, so that giving back part of it never takes the state below
/// where the table would have opened it (see `bucket/give_back.rs` and `group.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FirstState {
    pub(crate) at_least: u64,
    pub(crate) level: u64,
}

impl FirstState {
    /// An empty bucket, opened wherever the table opens one.
    pub(crate) const EMPTY: FirstState = FirstState { at_least: 0, level: 0 };

    /// The state a bucket opens at, given where the table would open it (`floor`); below
    /// `ceiling` (the highest state the slot may hold).
    pub(crate) fn open(self, floor: u64, ceiling: u64) -> u64 {
        floor.max(self.at_least).saturating_add(self.level).min(ceiling)
    }
}

/// A key that needs a slot, and when.
pub(crate) struct Arrival<'q, Q: ?Sized, K> {
    pub(crate) key: &'q Q,
    pub(crate) hash: u64,
    /// The clock, and the clock in units of `rate`: what idleness is judged against.
    pub(crate) now_ns: u64,
    pub(crate) now: u64,
    /// The rate the insert decides in, the limiter's rate in force; `None` in a table of
    /// counters (see [`Reuse::Counted`]).
    pub(crate) rate: Option<&'q Rate>,
    /// The least first state of the key's bucket (see [`Ask::start`]).
    pub(crate) start: &'q dyn Fn() -> FirstState,
    /// Keeps the groups the insert works on in `rate`'s units (see `requota.rs`).
    pub(crate) epoch: &'q dyn EpochOf<K>,
}

impl<Q: ?Sized, K> Arrival<'_, Q, K> {
    /// The rule that frees a slot for this key: a bucket's, drained by `now`, or a counter's.
    #[inline]
    pub(crate) fn reuse(&self) -> Reuse {
        match self.rate {
            Some(_) => Reuse::Drained(self.now),
            None => Reuse::Counted,
        }
    }
}

/// The insert's side of a change of quota (`requota.rs`).
pub(crate) trait EpochOf<K> {
    /// Whether the insert's rate is still the limiter's rate in force (checked under its lock).
    fn current(&self) -> bool;
    /// Converts a group the insert is about to work on (under its shard's lock) to the insert's
    /// rate, if its states are still in the rate before.
    fn convert(&self, group: &Group<K>, side: &Side<'_, K>);
}

/// The quota changed since the caller read its rate: read it again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Changed;
