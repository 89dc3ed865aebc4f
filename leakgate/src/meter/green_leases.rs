//! The per-slot leases of green units that [`LeasedSrTcm`](super::LeasedSrTcm) and
//! [`LeasedTrTcm`](super::LeasedTrTcm) share: the slots, the size and life of a lease, and the
//! colour-blind path that spends the slot's lease or takes a new one from the shared meter.
//!
//! `meter/leased_sr.rs` gives the design and the bound (`E = slots * L`); the slot itself is the
//! leased limiter's (`leased/slot.rs`). What differs between the two meters is only how a lease
//! is sized and how the shared meter takes it ([`GreenTake`]).

use super::{Color, SrTcm, TrTcm};
use crate::clock::Clock;
use crate::leased::slot::{Slot, Spend, MAX_TICK, TICK_SHIFT};
use crate::leased::Leases;
use crossbeam_utils::CachePadded;

/// A shared meter that leases can be taken from: its exact colour-blind decision, whether it
/// holds a lease's worth of green room (a read), and the green-only take of a whole lease.
pub(super) trait GreenTake {
    /// The meter's exact colour-blind decision for `bytes` at `now_ns`.
    fn exact_at(&self, bytes: u64, now_ns: u64) -> Color;
    /// Whether the meter holds `n` green units at `now_ns` (no write).
    fn green_room_at(&self, n: u64, now_ns: u64) -> bool;
    /// Takes `n` green units, or nothing: whether it did.
    fn take_green_at(&self, n: u64, now_ns: u64) -> bool;
}

/// Both meters' own methods, under the names the lease path calls.
macro_rules! green_take {
    ($($meter:ident),*) => {$(
        impl<C: Clock> GreenTake for $meter<C> {
            #[inline]
            fn exact_at(&self, bytes: u64, now_ns: u64) -> Color {
                self.color_blind_at(bytes, now_ns)
            }
            #[inline]
            fn green_room_at(&self, n: u64, now_ns: u64) -> bool {
                $meter::green_room_at(self, n, now_ns)
            }
            fn take_green_at(&self, n: u64, now_ns: u64) -> bool {
                $meter::take_green_at(self, n, now_ns)
            }
        }
    )*};
}
green_take!(SrTcm, TrTcm);

/// The slots of a leased meter and the lease they hold.
pub(super) struct GreenLeases {
    /// The slots, a power of two of them, each alone on its cache line.
    pub(super) slots: Box<[CachePadded<Slot>]>,
    /// `slots.len() - 1`.
    pub(super) mask: usize,
    /// Green units one lease takes (at least 2), or 0: leases off.
    pub(super) lease: u64,
    /// How long a lease lives, in ns of the clock.
    pub(super) span_ns: u64,
}

impl GreenLeases {
    /// Empty slots as `leases` says, each lease `lease` green units (0: leases off).
    pub(super) fn new(lease: u64, leases: &Leases) -> Self {
        let slots: Box<[CachePadded<Slot>]> =
            (0..leases.slots_of()).map(|_| CachePadded::new(Slot::new())).collect();
        GreenLeases { mask: slots.len() - 1, slots, lease, span_ns: leases.span_ns() }
    }

    /// The colour of a packet of `bytes` at `now_ns` on `meter`, green from the lease of slot
    /// `slot` (modulo the number of slots) when it holds `bytes`.
    #[inline]
    pub(super) fn color_blind_at_slot<M: GreenTake>(
        &self,
        meter: &M,
        slot: usize,
        bytes: u64,
        now_ns: u64,
    ) -> Color {
        if bytes == 0 || self.lease == 0 {
            return meter.exact_at(bytes, now_ns);
        }
        let slot = &self.slots[slot & self.mask];
        match slot.spend(bytes, now_ns >> TICK_SHIFT) {
            Spend::Spent(_) => Color::Green,
            Spend::Refill(seen) => self.refill(meter, slot, seen, bytes, now_ns),
            Spend::Exact => meter.exact_at(bytes, now_ns),
        }
    }

    /// A packet whose slot has no lease to spend: takes a new lease for the slot and colours the
    /// packet green from it, or colours it on the shared meter.
    #[inline(never)]
    fn refill<M: GreenTake>(
        &self,
        meter: &M,
        slot: &Slot,
        seen: u64,
        n: u64,
        now_ns: u64,
    ) -> Color {
        let expiry = now_ns.saturating_add(self.span_ns) >> TICK_SHIFT;
        // A packet a lease cannot serve, a clock past the slots' range, or a meter without room
        // for a whole lease (a read, no write): the exact path. Otherwise claim the slot (one
        // lease per slot at a time: the bound's `E`).
        if n >= self.lease
            || expiry > MAX_TICK
            || !meter.green_room_at(self.lease, now_ns)
            || !slot.reserve(seen)
        {
            return meter.exact_at(n, now_ns);
        }
        if meter.take_green_at(self.lease, now_ns) {
            slot.install(self.lease - n, expiry);
            Color::Green
        } else {
            slot.install(0, 0);
            meter.exact_at(n, now_ns)
        }
    }

    /// Green units one lease takes; 0 when leases are off.
    pub(super) fn lease_units(&self) -> u64 {
        self.lease
    }

    /// The number of slots.
    pub(super) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// `E` of the bound: `slots * lease_units()`.
    pub(super) fn excess_bound(&self) -> u64 {
        self.lease.saturating_mul(self.slots.len() as u64)
    }
}
