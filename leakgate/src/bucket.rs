//! The one protocol on a bucket's state word: admit (and, with a wait, reserve), record the time,
//! and undo. Every read-modify-write of a `TAT` in the crate is in this file; [`Limiter`],
//! reservations and keyed slots reach their words only through it.
//!
//! [`Limiter`]: crate::Limiter
//!
//! # Implementation details
//!
//! A bucket's state word `w` holds its theoretical arrival time, in the rate's units. Let `F` be
//! the state the exact GCRA reaches from the requests this word has admitted, each taken at its
//! own clock reading, in the order their writes reached the word. The whole protocol keeps one
//! invariant:
//!
//! > **`w >= F`**: the word never shows a bucket emptier than the requests it admitted leave it.
//!
//! Every admission is checked against a value `old` the word held with `old >= max(F, now)`, so
//! the exact model admits it too, and the word never admits more than the quota. The word may run
//! ahead of `F` (an *over-charge*: then it refuses a little more than the model would), and the
//! paths below say exactly when and by how much.
//!
//! **Meter and queue: the CAS path.** Load `w`, run the pure GCRA step ([`Rate::admit`]); a
//! refusal writes nothing (a denial is a clock read, a load and a compare), an admission publishes
//! `max(w, now) + cost` with a compare-and-swap from the value it was computed on, so `w = F`
//! stays exact. A lost CAS reruns the step on the value that won, at once: it never retries with a
//! value older than the one it just saw.
//!
//! **Under contention: the add path.** A CAS loop on one word is lock-free, not wait-free: under
//! saturation a thread can lose every round. So after a few lost CASes in a row
//! ([`CAS_RETRIES`]; one retry is cheaper than an add, see [`contended`]), a request that still
//! conforms with room to spare ([`room_to_add`]) takes its place with one `fetch_add` of its cost, which
//! always succeeds, and then checks the value it added onto:
//!
//! * it first raises an idle word to `now` (`fetch_max`), so a charge never lands before the time
//!   it was asked at;
//! * if `old >= now` and `old + cost - now <= tau + max_wait`, it is admitted: `w' = old + cost >=
//!   max(F, now) + cost = F'`. A `fetch_max` from a thread with a later clock that lands between
//!   another's raise and add only moves that add to the later time: the same state the model
//!   reaches if that request is taken at the later time, which it conforms at too;
//! * otherwise (the words added by racing requests overshoot the bucket, or a cancel lowered the
//!   word below `now` in between) the charge is not admitted and is taken back with [`undo`]: one
//!   CAS from `old + cost` to `old`, exact because nothing else moved the word meanwhile. Charges
//!   that raced onto it are undone first (last in, first out), so the undo retries a bounded
//!   number of times while the word stands above it.
//!
//! What this costs in exactness, all of it in the refusing direction:
//!
//! * between an overshooting `fetch_add` and its undo (a few instructions, unless the thread is
//!   descheduled there) other requests see the word that much fuller and may be refused where a
//!   sequential run admits them;
//! * an overshooting charge that an admitted request has already been stacked on cannot be undone
//!   exactly; it then stays, an over-charge of at most its own cost, until the bucket next drains.
//!   That needs the clock to pass the overshoot (a whole interval at least) between the add and
//!   its undo: a thread descheduled in those few instructions.
//!
//! The add path is taken only when the bucket has room to spare: at most half full, and with room
//! for 64 more such requests, so that overshooting takes more racers than there are threads. Near
//! the boundary the CAS path decides; there a lost CAS means another request was admitted, so
//! after a few losses the bucket is full and the rest are refused without writing.
//!
//! **Recording the time.** A request that takes nothing (a peek, a cost above the burst) raises an
//! idle word to `now` with `fetch_max`. No answer at `now` or later changes (an idle bucket is
//! empty either way), but a clock that later jumps back is held to what it would get at `now`.
//! Since every admission also leaves `w` past its time, `w` is never below the latest time any
//! request has shown it, and a request at an earlier clock starts from `max(w, now) = w`, exactly
//! where it would start at the latest time seen.
//!
//! **Undo.** [`undo`] lowers the word from the state one request left back to the state before
//! it, only if the word still holds that state: a reservation cancelled while it is the last one
//! granted, or a charge taken back. It is exact because nothing else has changed the word since.
//! A request that read the word before the undo and adds after it finds `old < now` at worst
//! (the word went below its time) and takes its charge back in turn.
//!
//! **Giving back and sealing.** A request charged to several buckets (all or nothing) that one of
//! them refuses takes its other charges back with [`give_back`]: it lowers the word, from
//! whatever value it holds, by the charge less the time since the charge was made, which keeps
//! `w >= F` wherever the charge stands among other charges and admissions (the argument is in
//! `bucket/give_back.rs`); on a clock that stood still that is the whole charge, so refused
//! requests keep nothing. [`seal_moved`] raises a word to the highest state, which refuses every
//! request, for a bucket whose state was handed over to another, and [`add_level`] puts a level
//! handed over on top of a bucket (`bucket/seal.rs`). A sealed word is never lowered again: a
//! charge still in it when it was sealed went with its state, and [`give_back`] says so
//! ([`Back::Sealed`]) for the caller to give it back where the state went.
//!
//! **Orderings.** Every operation on the word is `Relaxed` on a limiter: the word is the whole
//! state and publishes no other memory; read-modify-writes of one location are totally ordered at
//! any ordering, which is all the invariant needs. A keyed slot's word is shared by the keys the
//! slot holds in turn, and its [`Word`] implementation adds the orderings that pair the word with
//! the slot's key (see `keyed/group.rs`); keyed slots never use the add path, whose unconditional
//! write could land in a word that has changed owner.

mod give_back;
mod limiter_word;
mod seal;
#[cfg(all(test, not(loom)))]
mod tests;

pub(crate) use give_back::{give_back, Back};
pub(crate) use limiter_word::{Changed, LimiterState, SEALED};
pub(crate) use seal::{add_level, seal_moved};

use crate::gcra::{Rate, Refusal};
use crate::sync::{AtomicU64, Ordering, LOOM};

/// A bucket's state word, and how to tell that it still holds that bucket.
pub(crate) trait Word {
    /// Why the word may stop holding this bucket (a keyed slot given to another key); a plain
    /// limiter's word never does.
    type Gone;

    /// Whether charges may be taken with an unconditional `fetch_add` (only a word that holds the
    /// same bucket for its whole life).
    const ADDS: bool;

    /// The highest state the word may hold (a keyed slot keeps one value for itself).
    const MAX_STATE: u64;

    /// The current state.
    fn load(&self) -> Result<u64, Self::Gone>;

    /// Replaces `current` with `new`; on failure, the state found (or that the bucket is gone).
    fn compare_exchange(&self, current: u64, new: u64) -> Result<(), Result<u64, Self::Gone>>;

    /// Raises the state to at least `now` (`now <= MAX_STATE`).
    fn raise_to(&self, now: u64);

    /// Adds `cost` unconditionally and returns the state before; `None` for a word that takes no
    /// unconditional writes (then [`Word::ADDS`] is false and this is never called).
    fn fetch_add(&self, cost: u64) -> Option<u64>;

    /// Lowers the state from `from` to `to` if it still holds `from`; on failure the state found.
    fn lower(&self, from: u64, to: u64) -> Result<(), u64>;
}

/// A plain limiter's word: alone, never changing owner.
impl Word for AtomicU64 {
    type Gone = core::convert::Infallible;
    const ADDS: bool = true;
    const MAX_STATE: u64 = u64::MAX;

    #[inline]
    fn load(&self) -> Result<u64, Self::Gone> {
        // Relaxed: the word is the whole state and publishes nothing else (module docs).
        Ok(AtomicU64::load(self, Ordering::Relaxed))
    }

    #[inline]
    fn compare_exchange(&self, current: u64, new: u64) -> Result<(), Result<u64, Self::Gone>> {
        // Relaxed on both outcomes: atomicity alone orders competing updates; on failure the step
        // is rerun on the value found.
        self.compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Relaxed)
            .map(drop)
            .map_err(Ok)
    }

    #[inline]
    fn raise_to(&self, now: u64) {
        // Relaxed: as for the CAS; fetch_max keeps whichever of racing values is later.
        self.fetch_max(now, Ordering::Relaxed);
    }

    #[inline]
    fn fetch_add(&self, cost: u64) -> Option<u64> {
        // Relaxed: as for the CAS.
        Some(AtomicU64::fetch_add(self, cost, Ordering::Relaxed))
    }

    #[inline]
    fn lower(&self, from: u64, to: u64) -> Result<(), u64> {
        // Relaxed: as for the CAS. Strong: a spurious failure would give up an exact undo.
        AtomicU64::compare_exchange(self, from, to, Ordering::Relaxed, Ordering::Relaxed).map(drop)
    }
}

/// Why a request was refused, with the state it was judged on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The state seen (`TAT`, in units).
    pub(crate) tat: u64,
    pub(crate) why: Refusal,
}

/// The add path is taken below this state, and for costs below [`ADD_MAX_COST`], so that even
/// 2^13 racing adds cannot wrap the word: `2^63 + 2^13 * 2^50 = 2^64`.
const ADD_CEILING: u64 = 1 << 63;
const ADD_MAX_COST: u64 = 1 << 50;

/// How many times [`undo`] on the add path retries while charges raced onto its own stand above
/// it (they are undone first, each in a few instructions).
const UNDO_TRIES: u32 = if LOOM { 2 } else { 64 };

/// How many lost CASes in a row [`contended`] answers with another CAS at once, from the value
/// the lost one found, before it takes the add path (under loom none: the models explore the add
/// path). Measured in its doc.
const CAS_RETRIES: u32 = if LOOM { 0 } else { 2 };

/// Takes a request of cost `n` at time `now` (units) from the bucket in `word`, allowed to wait
/// up to `max_wait` units past its boundary (0 for a meter): `Ok(state)` when it conforms, with the
/// state it left (the state seen, for `n = 0`), `Err` with the state it was judged on otherwise.
/// `Err(Gone)` outside when the word stopped holding the bucket (keyed slots only).
///
/// The common cases stay inline and short (a denial is a load and a compare; an uncontended
/// admission adds one CAS); everything after a lost CAS is out of line.
#[inline(always)]
pub(crate) fn take<W: Word>(
    word: &W,
    rate: &Rate,
    now: u64,
    n: u64,
    max_wait: u64,
) -> Result<Result<u64, Refused>, W::Gone> {
    take_seen(word, rate, now, n, max_wait, word.load()?)
}

/// [`take`] from the state `tat` the caller read from the word (as [`Word::load`] would).
#[inline(always)]
pub(crate) fn take_seen<W: Word>(
    word: &W,
    rate: &Rate,
    now: u64,
    n: u64,
    max_wait: u64,
    tat: u64,
) -> Result<Result<u64, Refused>, W::Gone> {
    match rate.admit(tat, now, n, max_wait) {
        Ok(new) if new != tat && new <= W::MAX_STATE => match word.compare_exchange(tat, new) {
            Ok(()) => Ok(Ok(new)),
            Err(found) => contended(word, rate, now, n, max_wait, found?, true),
        },
        Err(Refusal::Wait(units)) => Ok(Err(Refused { tat, why: Refusal::Wait(units) })),
        _ => contended(word, rate, now, n, max_wait, tat, false),
    }
}

/// [`take`] after a lost CAS from a validated state: `found` is what the word held instead.
#[inline(always)]
pub(crate) fn take_after_lost_cas<W: Word>(
    word: &W,
    rate: &Rate,
    now: u64,
    n: u64,
    max_wait: u64,
    found: u64,
) -> Result<Result<u64, Refused>, W::Gone> {
    contended(word, rate, now, n, max_wait, found, true)
}

/// The rest of [`take`]: after a lost CAS (`lost`, and `tat` is the value found), and the rare
/// answers (cost 0, a cost above the burst, a state past the range).
///
/// A lost CAS is answered first with another CAS from the value it found, at once (as governor
/// does), up to [`CAS_RETRIES`] times in a row; then the add path takes over, so a check that
/// keeps losing makes progress with one `fetch_add`. The add path at the first lost CAS cost a
/// tail: on an idle bucket (the state behind the clock, the common case of an always-allowing
/// limiter) it raises the word to the clock first, then enters the gate, adds and leaves it:
/// four read-modify-writes of the contended line where a retry is one. On the 16-core Xeon (idle;
/// `leakgate bench --tail`, 200,000 checks a thread, 3 runs of each binary, medians): p99 at 2,
/// 4, 8, 16 threads 287, 959, 3,263, 9,727 ns against governor's 435, 1,439, 3,359, 8,575 in the
/// same runs (before: 323, 1,327, 3,519, 9,599); p99.99 below governor's at every count
/// (docs/benchmarks.md). The 2-core EPYC, loaded, gave the same direction once (p99 100-110 ns
/// at 2 threads before, 20-40 after, governor 20-60) and noise in other runs. A retry after 4
/// or more spins (measured earlier, 2-core Xeon) was worse than either: p99 221-767 ns.
#[inline(never)]
fn contended<W: Word>(
    word: &W,
    rate: &Rate,
    now: u64,
    n: u64,
    max_wait: u64,
    mut tat: u64,
    lost: bool,
) -> Result<Result<u64, Refused>, W::Gone> {
    let mut lost = u32::from(lost);
    loop {
        let new = match rate.admit(tat, now, n, max_wait) {
            // Cost 0: nothing to take, but the time is recorded.
            Ok(new) if new == tat => {
                record(word, tat, now);
                return Ok(Ok(tat));
            }
            Ok(new) if new <= W::MAX_STATE => new,
            Ok(_) => return Ok(Err(Refused { tat, why: Refusal::Never })),
            Err(Refusal::Never) => {
                // Takes nothing either (a cost above the burst): the time is recorded.
                record(word, tat, now);
                return Ok(Err(Refused { tat, why: Refusal::Never }));
            }
            Err(why) => return Ok(Err(Refused { tat, why })),
        };
        if W::ADDS && lost > CAS_RETRIES && room_to_add(rate, tat, now, new, max_wait) {
            match add(word, rate, now, n, max_wait, tat) {
                Added::Admitted(state) => return Ok(Ok(state)),
                Added::Refused(refused) => return Ok(Err(refused)),
                Added::Lowered => {
                    // The word went below our time under us; decide again on what it holds now.
                    tat = word.load()?;
                    lost = 0;
                    continue;
                }
            }
        }
        match word.compare_exchange(tat, new) {
            Ok(()) => return Ok(Ok(new)),
            Err(found) => {
                tat = found?;
                lost = lost.saturating_add(1);
            }
        }
    }
}

/// Whether a request that would take the bucket from `tat` to `new` at `now` may take the add
/// path: it leaves at least half the bucket, and room for 64 more like it, to spare (under loom,
/// any room: the models explore the racing adds and undos that spare room makes rare).
#[inline]
fn room_to_add(rate: &Rate, tat: u64, now: u64, new: u64, max_wait: u64) -> bool {
    let tau = rate.scale().tau();
    let cost = new - tat.max(now);
    let spare = if LOOM { 0 } else { (tau / 2).min(cost.saturating_mul(64)) };
    let limit = tau.saturating_add(max_wait);
    new < ADD_CEILING && cost < ADD_MAX_COST && new - now <= limit.saturating_sub(spare)
}

/// What the add path decided.
enum Added {
    /// Admitted; the state after the charge.
    Admitted(u64),
    /// Refused on the value the charge landed on (the charge was taken back, or stays as an
    /// over-charge: see the module docs).
    Refused(Refused),
    /// The word was below `now` when the charge landed (lowered by an undo or a cancel after it was
    /// read): the charge was taken back (or stays), and the request must be decided again.
    Lowered,
}

/// The add path: one `fetch_add`, checked after the fact (module docs).
fn add<W: Word>(word: &W, rate: &Rate, now: u64, n: u64, max_wait: u64, seen: u64) -> Added {
    let cost = rate.cost(n);
    if seen < now {
        // An idle bucket: the charge must start at `now`, not at its stale state.
        word.raise_to(now);
    }
    let Some(old) = word.fetch_add(cost) else {
        return Added::Lowered;
    };
    // old < ADD_CEILING + (racing adds) * ADD_MAX_COST: no wrap (see ADD_CEILING).
    let end = old.saturating_add(cost);
    if old < now {
        undo_charge(word, end, cost);
        return Added::Lowered;
    }
    match rate.admit(old, now, n, max_wait) {
        Ok(state) => {
            debug_assert_eq!(state, end);
            Added::Admitted(end)
        }
        Err(why) => {
            undo_charge(word, end, cost);
            Added::Refused(Refused { tat: old, why })
        }
    }
}

/// Takes back a charge of `cost` that left the word at `end`, retrying while charges that raced
/// onto it (and will be taken back first) stand above it; gives up, leaving an over-charge, when
/// an admitted request stands on it.
fn undo_charge<W: Word>(word: &W, end: u64, cost: u64) {
    for _ in 0..UNDO_TRIES {
        match word.lower(end, end - cost) {
            Ok(()) => return,
            // While the charge is in the word, only charges above it can move the word, and
            // lowering one of them stops at its start, at or above `end`.
            Err(found) if found > end => crate::sync::spin_loop(),
            Err(_) => return,
        }
    }
}

/// Records `now` in an idle bucket (`tat < now`): see "Recording the time" in the module docs.
#[inline]
fn record<W: Word>(word: &W, tat: u64, now: u64) {
    if tat < now {
        word.raise_to(now.min(W::MAX_STATE));
    }
}

/// Undoes a request of `cost` units that left the state at `after`, if the word still holds that
/// state (nothing was granted since): the word goes back to `after - cost`, exactly the state
/// before the request. One strong CAS; `false` if anything moved the word since.
pub(crate) fn undo<W: Word>(word: &W, after: u64, cost: u64) -> bool {
    word.lower(after, after - cost).is_ok()
}
