//! The permit count and the limit in one word, and the lock-free steps on it.
//!
//! # Implementation details
//!
//! [`State`] is one `AtomicU64`:
//!
//! | bits    | meaning                                                                      |
//! |---------|------------------------------------------------------------------------------|
//! | 0..32   | `in_flight`: permits held now (`0..=MAX_PERMITS`; may exceed `max` after it was lowered) |
//! | 32..63  | `max`: the limit (`0..=MAX_PERMITS`)                                          |
//! | 63      | `QUEUED`: the wait queue is not empty (set and cleared only under its lock)   |
//!
//! An acquire is one compare-and-swap that adds to `in_flight` when the sum stays within `max`
//! and nobody queues (so a newcomer never overtakes a waiter); a denial writes nothing. A release
//! is one `fetch_sub`; when the word it replaced had `QUEUED`, the releaser goes on to hand the
//! freed room to the queue (`queue.rs`). Because both steps act on the same word, a release either
//! precedes a waiter's enqueue in the word's order (and the enqueuer, which re-reads the word after
//! setting `QUEUED`, sees the room) or follows it (and sees `QUEUED`): no wakeup is lost.

use crate::sync::{AtomicU64, Ordering};

/// The most permits a limiter can have (its `max`) or hand out in one acquire: `2^31 - 1`.
pub const MAX_PERMITS: u32 = (1 << 31) - 1;

const IN_FLIGHT_MASK: u64 = 0xFFFF_FFFF;
const MAX_SHIFT: u32 = 32;
const MAX_MASK: u64 = (MAX_PERMITS as u64) << MAX_SHIFT;
pub(crate) const QUEUED: u64 = 1 << 63;

/// The state word (see the module docs for its bits).
#[derive(Debug)]
pub(crate) struct State {
    /// `in_flight | max << 32 | QUEUED`: see the table in the module docs.
    word: AtomicU64,
}

/// What the word holds, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) in_flight: u32,
    pub(crate) max: u32,
    pub(crate) queued: bool,
}

fn unpack(word: u64) -> Snapshot {
    Snapshot {
        in_flight: (word & IN_FLIGHT_MASK) as u32,
        max: ((word & MAX_MASK) >> MAX_SHIFT) as u32,
        queued: word & QUEUED != 0,
    }
}

impl State {
    /// A word with nothing in flight and the limit `max` (at most [`MAX_PERMITS`]).
    pub(crate) fn new(max: u32) -> Self {
        debug_assert!(max <= MAX_PERMITS);
        State { word: AtomicU64::new(u64::from(max) << MAX_SHIFT) }
    }

    /// The word now. Relaxed: a reading for reports, which orders nothing else.
    pub(crate) fn load(&self) -> Snapshot {
        unpack(self.word.load(Ordering::Relaxed))
    }

    /// Takes `n` permits if they fit under `max`; `honour_queue` refuses while anyone waits (a
    /// newcomer), and is false only for the queue handing room to its own head.
    #[inline]
    pub(crate) fn try_add(&self, n: u32, honour_queue: bool) -> bool {
        // Relaxed: only a guess for the compare-and-swap, which checks it.
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            let s = unpack(cur);
            if honour_queue && s.queued {
                return false;
            }
            // u64 sum: never wraps, whatever `n`.
            if u64::from(s.in_flight) + u64::from(n) > u64::from(s.max) {
                return false;
            }
            // Acquire on success: the permit's holder then sees everything the holders of the
            // permits it took over did before their release (which is Release), as a lock would.
            // Relaxed on failure: the new value is only another guess.
            match self.word.compare_exchange_weak(
                cur,
                cur + u64::from(n),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Gives back `n` permits; true when someone was queued (the caller then serves the queue).
    #[inline]
    pub(crate) fn release(&self, n: u32) -> bool {
        // Release: publishes the holder's work to the next acquirer (whose add is Acquire).
        // `in_flight >= n` always (every `n` given back was added by the same permit), so the
        // subtraction never borrows into `max`.
        let before = self.word.fetch_sub(u64::from(n), Ordering::Release);
        debug_assert!(before & IN_FLIGHT_MASK >= u64::from(n));
        before & QUEUED != 0
    }

    /// Replaces `max`; true when someone was queued. In flight is left as it is: a lower limit
    /// revokes nothing, and new permits wait until enough are given back.
    pub(crate) fn set_max(&self, max: u32) -> bool {
        let max = max.min(MAX_PERMITS);
        // Relaxed: a guess for the compare-and-swap.
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            let next = (cur & !MAX_MASK) | (u64::from(max) << MAX_SHIFT);
            // AcqRel on success: a rise is room freed, as a release is (Release), and the caller
            // may go on to serve the queue from what it read (Acquire). Relaxed on failure.
            match self.word.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return next & QUEUED != 0,
                Err(now) => cur = now,
            }
        }
    }

    /// Sets or clears `QUEUED`; called only with the queue's lock held.
    pub(crate) fn set_queued(&self, queued: bool) {
        // Relaxed: the flag is read by releasers only to decide to take the queue's lock, which
        // orders everything the queue holds; its place in the word's order is what matters
        // (see the module docs), and an atomic read-modify-write keeps that.
        if queued {
            self.word.fetch_or(QUEUED, Ordering::Relaxed);
        } else {
            self.word.fetch_and(!QUEUED, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_bits_round_trip_at_their_edges() {
        let s = State::new(MAX_PERMITS);
        assert!(s.try_add(MAX_PERMITS, true));
        assert!(!s.try_add(1, true));
        assert_eq!(s.load(), Snapshot { in_flight: MAX_PERMITS, max: MAX_PERMITS, queued: false });
        s.set_queued(true);
        assert!(s.load().queued);
        assert!(s.release(MAX_PERMITS));
        s.set_queued(false);
        assert_eq!(s.load(), Snapshot { in_flight: 0, max: MAX_PERMITS, queued: false });
    }

    #[test]
    fn a_lower_max_keeps_what_is_held() {
        let s = State::new(4);
        assert!(s.try_add(3, true));
        s.set_max(1);
        assert_eq!(s.load().in_flight, 3);
        assert!(!s.try_add(1, true));
        s.release(3);
        assert!(s.try_add(1, true));
        assert!(!s.try_add(1, true));
    }

    #[test]
    fn a_newcomer_waits_behind_the_queue() {
        let s = State::new(4);
        s.set_queued(true);
        assert!(!s.try_add(1, true));
        assert!(s.try_add(1, false));
    }
}
