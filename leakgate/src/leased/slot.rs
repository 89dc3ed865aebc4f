//! One lease slot: a batch of units already charged to a [`LeasedLimiter`]'s shared bucket, spent
//! by the threads mapped to the slot with no write to the shared word. The leased colour meters
//! (`meter/leased_sr.rs`, `meter/leased_tr.rs`) keep their leases of green units in the same
//! slots, with the same protocol.
//!
//! # Implementation details
//!
//! The slot's whole state is one word, alone on its cache line:
//!
//! * [`EMPTY`] (0): no lease;
//! * [`RESERVING`] (`u64::MAX`): one thread is taking a lease for the slot. Only that thread
//!   writes the word next (with the lease, or [`EMPTY`]); nobody waits for it: while the word
//!   holds this value the slot's other threads decide on the exact path. A reserver that stalls
//!   forever keeps its slot on the exact path, never admits a unit more, blocks no one;
//! * [`HELD`] (`u64::MAX - 1`): a [`LocalLease`] holds the slot's lease in its own plain
//!   counter. Only that handle writes the word next (when it is dropped: the units it has left,
//!   as a lease with the expiry they were charged with); meanwhile the slot's other threads
//!   decide on the exact path. A handle that is never dropped keeps its slot so forever: its
//!   units are never spent by anyone else (a shortfall), never admitted twice;
//! * otherwise a lease: the units left in the low [`UNIT_BITS`] bits (at most [`MAX_UNITS`]) and,
//!   above them, the tick (`ns >> TICK_SHIFT` of the limiter's clock) at which it expires, at most
//!   [`MAX_TICK`] (so no lease spells [`HELD`] or [`RESERVING`]). A unit is spent only at a clock reading below the expiry tick's first
//!   nanosecond, so a lease is never spent later than its span after it was charged.
//!
//! So a slot holds at most one lease at a time, reserved or installed: the units charged to the
//! shared bucket before an instant and spent after it are at most one lease per slot, which is
//! the `E` of the bound (`leased/mod.rs`).
//!
//! Every operation on the word is `Relaxed`: the word is the lease's whole state and publishes no
//! other memory. The units it holds were charged to the shared word by the thread that installed
//! them, before the install in that thread's order; the count of units spent from a lease is
//! bounded by the word alone (each spend is one read-modify-write of it, totally ordered).
//!
//! [`LeasedLimiter`]: crate::LeasedLimiter
//! [`LocalLease`]: crate::LocalLease

use crate::sync::{AtomicU64, Ordering};

/// No lease in the slot.
pub(crate) const EMPTY: u64 = 0;
/// A thread is taking a lease for the slot (see the module docs).
pub(crate) const RESERVING: u64 = u64::MAX;
/// A [`LocalLease`](crate::LocalLease) holds the slot (see the module docs).
pub(crate) const HELD: u64 = u64::MAX - 1;
/// Bits of the word that count the units left.
const UNIT_BITS: u32 = 16;
/// The most units a lease holds (the all-ones count is kept out so no lease spells
/// [`RESERVING`]).
pub(crate) const MAX_UNITS: u64 = (1 << UNIT_BITS) - 2;
/// A tick is `2^TICK_SHIFT` ns (1.024 µs) of the limiter's clock.
pub(crate) const TICK_SHIFT: u32 = 10;
/// The latest expiry tick a lease may carry: 2^48 ticks of 1.024 µs, about 9.1 years of clock.
/// Past it no lease is taken and every check is exact.
pub(crate) const MAX_TICK: u64 = (1 << (64 - UNIT_BITS)) - 2;
/// Lost CASes on the slot (another thread mapped to it spent first) before deciding on the exact
/// path instead.
const TRIES: u32 = 4;

/// A slot's word (see the module docs).
#[derive(Debug)]
pub(crate) struct Slot {
    word: AtomicU64,
}

/// What [`Slot::spend`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spend {
    /// Spent from the lease; the units left in it.
    Spent(u64),
    /// No lease to spend (empty, used up or expired): the word seen, for [`Slot::reserve`].
    Refill(u64),
    /// A lease is being taken, or the lease holds fewer units than asked, or the slot is
    /// contended: decide on the exact path.
    Exact,
}

/// The word of a lease of `units` expiring at `tick`.
#[inline]
fn encode(units: u64, tick: u64) -> u64 {
    (tick << UNIT_BITS) | units
}

/// The units and expiry tick of a lease word.
#[inline]
fn decode(word: u64) -> (u64, u64) {
    (word & ((1 << UNIT_BITS) - 1), word >> UNIT_BITS)
}

impl Slot {
    pub(crate) fn new() -> Self {
        Slot { word: AtomicU64::new(EMPTY) }
    }

    /// Spends `n` (at least 1) units of the lease at the clock tick `now_tick`.
    #[inline]
    pub(crate) fn spend(&self, n: u64, now_tick: u64) -> Spend {
        // Relaxed: the word is the whole lease (module docs).
        let mut word = self.word.load(Ordering::Relaxed);
        for _ in 0..TRIES {
            if word >= HELD {
                // Reserved or held: the exact path.
                return Spend::Exact;
            }
            let (units, expiry) = decode(word);
            if units == 0 || now_tick >= expiry {
                return Spend::Refill(word);
            }
            if units < n {
                // Keep the units for smaller requests; this one goes to the shared word.
                return Spend::Exact;
            }
            // Relaxed on both outcomes: as for the load; on failure decide again on the value
            // found. Weak: a spurious failure only costs another round.
            match self.word.compare_exchange_weak(
                word,
                encode(units - n, expiry),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Spend::Spent(units - n),
                Err(found) => word = found,
            }
        }
        Spend::Exact
    }

    /// Claims the slot for a new lease, if it still holds `seen` (a word [`Slot::spend`] found
    /// empty, used up or expired; an expired lease's units are dropped, never spent).
    #[inline]
    pub(crate) fn reserve(&self, seen: u64) -> bool {
        // Relaxed: the word is the whole lease (module docs). Strong: a spurious failure would
        // send this check to the exact path for nothing.
        self.word.compare_exchange(seen, RESERVING, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Takes the slot for a [`LocalLease`](crate::LocalLease), with the lease it holds: the
    /// units left and their expiry tick (units that expired by `now_tick` are dropped: `(0, 0)`),
    /// or `None` when it is reserved or held already.
    pub(crate) fn hold(&self, now_tick: u64) -> Option<(u64, u64)> {
        // Relaxed: the word is the whole lease (module docs).
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            if word >= HELD {
                return None;
            }
            // Relaxed on both outcomes: as for the load. Weak: a spurious failure loops.
            match self.word.compare_exchange_weak(word, HELD, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    let (units, expiry) = decode(word);
                    return Some(if now_tick < expiry { (units, expiry) } else { (0, 0) });
                }
                Err(found) => word = found,
            }
        }
    }

    /// Drops the slot's lease, if it holds one that is neither reserved nor held (a change of
    /// quota: its units were charged under the quota before). A lease being installed, or held,
    /// is left to its taker.
    pub(crate) fn clear(&self) {
        // Relaxed: the word is the whole lease (module docs).
        let mut word = self.word.load(Ordering::Relaxed);
        while word != EMPTY && word < HELD {
            // Relaxed on both outcomes: as for the load; on failure look again.
            match self.word.compare_exchange_weak(word, EMPTY, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(found) => word = found,
            }
        }
    }

    /// Installs a lease of `units` (at most [`MAX_UNITS`]) expiring at `tick` (at most
    /// [`MAX_TICK`]), or [`EMPTY`] for `units = 0`. Only the thread whose [`Slot::reserve`]
    /// succeeded (or whose [`Slot::hold`] did) calls this, once.
    #[inline]
    pub(crate) fn install(&self, units: u64, tick: u64) {
        debug_assert!(units <= MAX_UNITS && tick <= MAX_TICK);
        let word = if units == 0 { EMPTY } else { encode(units, tick) };
        // Relaxed: only the reserver (the holder) writes a reserved (held) word (module docs).
        self.word.store(word, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_spent_down_then_refilled() {
        let slot = Slot::new();
        assert_eq!(slot.spend(1, 0), Spend::Refill(EMPTY));
        assert!(slot.reserve(EMPTY));
        assert_eq!(slot.spend(1, 0), Spend::Exact, "reserved: exact path");
        slot.install(3, 10);
        assert_eq!(slot.spend(2, 9), Spend::Spent(1));
        assert_eq!(slot.spend(2, 9), Spend::Exact, "fewer units than asked stay");
        assert_eq!(slot.spend(1, 9), Spend::Spent(0));
        assert!(matches!(slot.spend(1, 9), Spend::Refill(_)));
    }

    #[test]
    fn an_expired_lease_is_not_spent() {
        let slot = Slot::new();
        assert!(slot.reserve(EMPTY));
        slot.install(MAX_UNITS, MAX_TICK);
        assert_eq!(slot.spend(1, MAX_TICK - 1), Spend::Spent(MAX_UNITS - 1));
        let seen = match slot.spend(1, MAX_TICK) {
            Spend::Refill(seen) => seen,
            other => panic!("{other:?}"),
        };
        assert_ne!(seen, RESERVING);
        assert!(slot.reserve(seen));
        assert!(!slot.reserve(seen), "one reserver at a time");
    }

    #[test]
    fn a_held_slot_is_spent_by_no_one_else_until_given_back() {
        let slot = Slot::new();
        assert!(slot.reserve(EMPTY));
        slot.install(5, 10);
        assert_eq!(slot.hold(3), Some((5, 10)));
        assert_eq!(slot.hold(3), None, "one holder at a time");
        assert_eq!(slot.spend(1, 3), Spend::Exact);
        slot.clear();
        assert_eq!(slot.spend(1, 3), Spend::Exact, "a change of quota leaves a held slot");
        slot.install(2, 10);
        assert_eq!(slot.spend(1, 3), Spend::Spent(1));
        slot.clear();
        assert_eq!(slot.spend(1, 3), Spend::Refill(EMPTY));
        assert!(slot.reserve(EMPTY));
        slot.install(5, 10);
        assert_eq!(slot.hold(10), Some((0, 0)), "expired units are not taken");
    }
}
