//! [`LocalMeter`]: one thread's handle on a [`LeasedSrTcm`] or [`LeasedTrTcm`], holding one
//! slot's lease of green units in a plain counter, so a green packet from it is a compare and a
//! subtraction: no atomic write, no cache line shared with another core.
//!
//! # Implementation details
//!
//! As [`LocalLease`](crate::LocalLease) is for a limiter (`leased/local.rs`): the handle takes a
//! slot (its word becomes `HELD`, `leased/slot.rs`) with any unexpired lease in it, takes leases
//! of green units with one green take of the shared meter, as the slot would, and spends them by
//! subtracting from its counter; the slot's other threads colour on the shared meter meanwhile.
//!
//! **The bound holds unchanged** (`meter/leased_sr.rs`, `leased_tr.rs`): green units in a window
//! were charged to the meter in it, or sat at its start in one lease per slot, the handle's
//! counting as its slot's. When they are spent does not matter, so the handle's units do not
//! expire while it holds them. Yellow and red stay the shared meter's decisions.
//!
//! **What a handle holds.** At most one lease; the units left (fewer than a packet) are dropped
//! when it takes the next. A handle kept unused keeps its units from every other thread until it
//! is used or dropped (a shortfall of at most one lease, never an excess); dropped, it gives them
//! back to its slot with the expiry they were charged with. A handle that finds no free slot
//! colours as the meter's `color_blind_at_slot` does.

use super::{Color, LeasedSrTcm, LeasedTrTcm};
use crate::clock::Clock;
use crate::leased::slot::{MAX_TICK, MAX_UNITS, TICK_SHIFT};
use core::fmt;
use core::ops::Deref;
use sealed::Sealed as _;

mod sealed {
    use super::Color;

    /// What a [`LocalMeter`](super::LocalMeter) needs of a leased meter.
    pub trait Sealed {
        /// The number of slots (a power of two), the units one lease takes (0: leases off) and
        /// the span in ns.
        fn leases(&self) -> (usize, u64, u64);
        /// `Slot::hold` on slot `index`.
        fn hold(&self, index: usize, now_tick: u64) -> Option<(u64, u64)>;
        /// `Slot::install` on slot `index`, which this handle holds.
        fn give_back(&self, index: usize, units: u64, tick: u64);
        /// The shared meter's clock, now.
        fn now_ns(&self) -> u64;
        /// Whether `C` (and `P`) hold `n` green units now (a read).
        fn green_room_at(&self, n: u64, now_ns: u64) -> bool;
        /// Takes `n` green units, or nothing.
        fn take_green_at(&self, n: u64, now_ns: u64) -> bool;
        /// The shared meter's colour-blind decision.
        fn exact_at(&self, n: u64, now_ns: u64) -> Color;
        /// The leased meter's decision with slot `slot`.
        fn at_slot(&self, slot: usize, n: u64, now_ns: u64) -> Color;
    }
}

/// A leased colour meter whose slots a [`LocalMeter`] can hold: [`LeasedSrTcm`] and
/// [`LeasedTrTcm`] (sealed).
///
/// ```
/// fn handle<M: leakgate::LeasedMeter>(meter: &M) -> leakgate::LocalMeter<&M> {
///     leakgate::LocalMeter::new(meter)
/// }
/// let meter = leakgate::LeasedSrTcm::new("1 GB/s burst 1 MB".parse()?, 0)?;
/// assert!(handle(&meter).slot().is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait LeasedMeter: sealed::Sealed {}

macro_rules! leased_meter {
    ($meter:ident) => {
        impl<C: Clock> sealed::Sealed for $meter<C> {
            fn leases(&self) -> (usize, u64, u64) {
                (self.leases.slots.len(), self.leases.lease, self.leases.span_ns)
            }
            fn hold(&self, index: usize, now_tick: u64) -> Option<(u64, u64)> {
                self.leases.slots[index].hold(now_tick)
            }
            fn give_back(&self, index: usize, units: u64, tick: u64) {
                self.leases.slots[index].install(units, tick);
            }
            fn now_ns(&self) -> u64 {
                self.exact.clock().now_ns()
            }
            fn green_room_at(&self, n: u64, now_ns: u64) -> bool {
                self.exact.green_room_at(n, now_ns)
            }
            fn take_green_at(&self, n: u64, now_ns: u64) -> bool {
                self.exact.take_green_at(n, now_ns)
            }
            fn exact_at(&self, n: u64, now_ns: u64) -> Color {
                self.exact.color_blind_at(n, now_ns)
            }
            fn at_slot(&self, slot: usize, n: u64, now_ns: u64) -> Color {
                self.color_blind_at_slot(slot, n, now_ns)
            }
        }
        impl<C: Clock> LeasedMeter for $meter<C> {}
    };
}
leased_meter!(LeasedSrTcm);
leased_meter!(LeasedTrTcm);

/// One thread's handle on a leased meter `M::Target` (a [`LeasedSrTcm`] or [`LeasedTrTcm`], held
/// by reference, `Arc` or any pointer): a green packet comes from the handle's own lease with no
/// atomic write, and a new lease is one green take of the shared meter. The meter's bound holds
/// with any number of handles; dropping one gives its units back (module docs of
/// `meter/leased_local.rs`). Colouring takes `&mut self`: one thread at a time.
///
/// ```
/// use leakgate::{Color, LeasedSrTcm, LocalMeter, Quota};
/// let meter = LeasedSrTcm::new("1 GB/s burst 1 MB".parse::<Quota>()?, 0)?;
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             let mut local = LocalMeter::new(&meter);
///             for _ in 0..100 {
///                 assert_eq!(local.color_blind(1500), Color::Green);
///             }
///         });
///     }
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LocalMeter<M: Deref>
where
    M::Target: LeasedMeter,
{
    meter: M,
    /// The slot held, or `None`.
    slot: Option<usize>,
    /// The slot asked for: a handle without one colours with it.
    home: usize,
    /// Green units left in the handle's lease, all charged to the meter; at most one lease.
    units: u64,
    /// The tick at which those units would expire in the slot (given back with them).
    expiry: u64,
}

impl<M: Deref> LocalMeter<M>
where
    M::Target: LeasedMeter,
{
    /// A handle for the calling thread: [`with_slot`](LocalMeter::with_slot) the thread's slot.
    ///
    /// ```
    /// use leakgate::{Color, LeasedTrTcm, LocalMeter, Quota};
    /// let q: Quota = "1 GB/s burst 1 MB".parse()?;
    /// let meter = std::sync::Arc::new(LeasedTrTcm::new(q, q)?);
    /// let mut local = LocalMeter::new(meter.clone()); // owns a reference: 'static
    /// assert_eq!(local.color_blind(64), Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(meter: M) -> Self {
        Self::with_slot(meter, crate::sync::thread_index())
    }

    /// A handle holding the first slot from `slot` on (modulo the number of slots, wrapping)
    /// that no other handle holds and none is refilling, with any unexpired units it held; one
    /// that holds none when there is none (it then colours with slot `slot`).
    ///
    /// ```
    /// use leakgate::{LeasedSrTcm, Leases, LocalMeter, ManualClock, Quota};
    /// let q: Quota = "1 GB/s burst 1 MB".parse()?;
    /// let meter = LeasedSrTcm::with_leases(q, 0, ManualClock::new(), Leases::new().slots(2))?;
    /// let (a, b) = (LocalMeter::with_slot(&meter, 1), LocalMeter::with_slot(&meter, 1));
    /// assert_eq!((a.slot(), b.slot()), (Some(1), Some(0)));
    /// assert_eq!(LocalMeter::with_slot(&meter, 0).slot(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_slot(meter: M, slot: usize) -> Self {
        let (slots, _, _) = meter.leases();
        let now_tick = meter.now_ns() >> TICK_SHIFT;
        let mut held = None;
        for i in 0..slots {
            let index = slot.wrapping_add(i) & (slots - 1);
            if let Some((units, expiry)) = meter.hold(index, now_tick) {
                held = Some((index, units, expiry));
                break;
            }
        }
        let (slot_held, units, expiry) = match held {
            Some((index, units, expiry)) => (Some(index), units, expiry),
            None => (None, 0, 0),
        };
        LocalMeter { meter, slot: slot_held, home: slot, units, expiry }
    }

    /// The colour of a packet of `bytes` now (the meter's clock), colour-blind:
    /// [`color_blind_at`](LocalMeter::color_blind_at).
    ///
    /// ```
    /// # use leakgate::{Color, LeasedSrTcm, LocalMeter, Quota};
    /// let meter = LeasedSrTcm::new(Quota::bytes_per_second(1000)?, 0)?; // leases off
    /// let mut local = LocalMeter::new(&meter);
    /// assert_eq!(local.color_blind(1000), Color::Green);
    /// assert_eq!(local.color_blind(1), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind(&mut self, bytes: u64) -> Color {
        let now_ns = self.meter.now_ns();
        self.color_blind_at(bytes, now_ns)
    }

    /// The colour of a packet of `bytes` at the clock reading `now_ns`, colour-blind: green from
    /// the handle's lease when it holds `bytes` (no atomic write), else as a slot does: green
    /// from a new lease when the meter has room for one (the units left in the old one, fewer
    /// than `bytes`, are dropped), or the shared meter's colour.
    ///
    /// ```
    /// # use leakgate::{Color, LeasedSrTcm, Leases, LocalMeter, ManualClock, Quota};
    /// let cir: Quota = "1 MB/s burst 8000 B".parse()?;
    /// let meter = LeasedSrTcm::with_leases(cir, 0, ManualClock::new(), Leases::new().slots(4))?;
    /// let mut local = LocalMeter::with_slot(&meter, 0);
    /// assert_eq!(local.color_blind_at(100, 0), Color::Green); // a lease of 250 taken
    /// assert_eq!(meter.tokens_at(0), (7750, 0));
    /// assert_eq!(local.color_blind_at(150, 0), Color::Green); // from the lease
    /// assert_eq!(local.units(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at(&mut self, bytes: u64, now_ns: u64) -> Color {
        // `bytes - 1 < units` is `1 <= bytes <= units` (0 wraps and goes the slow way).
        if bytes.wrapping_sub(1) < self.units {
            self.units -= bytes;
            return Color::Green;
        }
        self.refill(bytes, now_ns)
    }

    /// A packet the handle's lease cannot serve.
    #[inline(never)]
    fn refill(&mut self, n: u64, now_ns: u64) -> Color {
        let meter = &*self.meter;
        if self.slot.is_none() {
            return meter.at_slot(self.home, n, now_ns);
        }
        let (_, lease, span_ns) = meter.leases();
        let expiry = now_ns.saturating_add(span_ns) >> TICK_SHIFT;
        if n == 0
            || n >= lease
            || expiry > MAX_TICK
            || !meter.green_room_at(lease, now_ns)
            || !meter.take_green_at(lease, now_ns)
        {
            return meter.exact_at(n, now_ns);
        }
        // The units left (fewer than `n`) are dropped: one lease at a time.
        self.units = lease - n;
        self.expiry = expiry;
        Color::Green
    }

    /// The slot this handle holds, or `None`.
    ///
    /// ```
    /// # use leakgate::{LeasedSrTcm, LocalMeter, Quota};
    /// let meter = LeasedSrTcm::new("1 GB/s burst 1 MB".parse::<Quota>()?, 0)?;
    /// assert!(LocalMeter::new(&meter).slot().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slot(&self) -> Option<usize> {
        self.slot
    }

    /// Green units left in the handle's lease.
    ///
    /// ```
    /// # use leakgate::{LeasedSrTcm, LocalMeter, Quota};
    /// let meter = LeasedSrTcm::new("1 GB/s burst 1 MB".parse::<Quota>()?, 0)?;
    /// assert_eq!(LocalMeter::new(&meter).units(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn units(&self) -> u64 {
        self.units
    }
}

impl<M: Deref> Drop for LocalMeter<M>
where
    M::Target: LeasedMeter,
{
    /// Gives the slot back, with the units left as its lease (expiring when they would have).
    fn drop(&mut self) {
        if let Some(index) = self.slot {
            let units = if self.expiry <= MAX_TICK { self.units.min(MAX_UNITS) } else { 0 };
            self.meter.give_back(index, units, self.expiry);
        }
    }
}

impl<M: Deref> fmt::Debug for LocalMeter<M>
where
    M::Target: LeasedMeter,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalMeter")
            .field("slot", &self.slot)
            .field("units", &self.units)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{Color, LeasedSrTcm, LeasedTrTcm, Leases, LocalMeter, ManualClock, Quota};

    #[test]
    fn a_dropped_handle_gives_its_green_units_to_its_slot() {
        let cir: Quota = "1 MB/s burst 8000 B".parse().unwrap();
        let meter =
            LeasedSrTcm::with_leases(cir, 0, ManualClock::new(), Leases::new().slots(2)).unwrap();
        let mut local = LocalMeter::with_slot(&meter, 0);
        assert_eq!(local.color_blind_at(100, 0), Color::Green); // a lease of 500
        assert_eq!(meter.color_blind_at_slot(0, 100, 0), Color::Green, "held: the meter");
        assert_eq!(meter.tokens_at(0), (7400, 0));
        drop(local);
        assert_eq!(meter.color_blind_at_slot(0, 400, 0), Color::Green, "the handle's lease");
        assert_eq!(meter.tokens_at(0), (7400, 0));
        assert_eq!(meter.color_blind_at_slot(0, 1, 0), Color::Green);
        assert_eq!(meter.tokens_at(0), (6900, 0), "a new lease of 500");
    }

    #[test]
    fn greens_at_one_instant_make_the_committed_burst() {
        let q: Quota = "1 MB/s burst 8000 B".parse().unwrap();
        let meter =
            LeasedTrTcm::with_leases(q, q, ManualClock::new(), Leases::new().slots(2)).unwrap();
        let mut a = LocalMeter::with_slot(&meter, 0);
        let mut green = 0;
        for i in 0..200 {
            let c = if i % 2 == 0 {
                a.color_blind_at(100, 0)
            } else {
                meter.color_blind_at_slot(1, 100, 0)
            };
            green += u64::from(c == Color::Green) * 100;
        }
        drop(a);
        // Every green unit charged is spent at one instant: none lost, none twice.
        while meter.color_blind_at_slot(0, 100, 0) == Color::Green
            || meter.color_blind_at_slot(1, 100, 0) == Color::Green
        {
            green += 100;
        }
        assert_eq!(green, 8000);
    }
}
