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
//! * otherwise a lease: the units left in the low [`UNIT_BITS`] bits (at most [`MAX_UNITS`]) and,
//!   above them, the tick (`ns >> TICK_SHIFT` of the limiter's clock) at which it expires, at most
//!   [`MAX_TICK`]. A unit is spent only at a clock reading below the expiry tick's first
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

use crate::sync::{AtomicU64, Ordering};

/// No lease in the slot.
pub(crate) const EMPTY: u64 = 0;
/// A thread is taking a lease for the slot (see the module docs).
pub(crate) const RESERVING: u64 = u64::MAX;
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
            if word == RESERVING {
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

    /// Installs a lease of `units` (at most [`MAX_UNITS`]) expiring at `tick` (at most
    /// [`MAX_TICK`]), or [`EMPTY`] for `units = 0`. Only the thread whose [`Slot::reserve`]
    /// succeeded calls this, once.
    #[inline]
    pub(crate) fn install(&self, units: u64, tick: u64) {
        debug_assert!(units <= MAX_UNITS && tick <= MAX_TICK);
        let word = if units == 0 { EMPTY } else { encode(units, tick) };
        // Relaxed: only the reserver writes a reserved word (module docs).
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
}
