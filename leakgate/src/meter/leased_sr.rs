//! [`LeasedSrTcm`]: one shared [`SrTcm`] whose green packets are coloured from small per-slot
//! leases of green units instead of writing the meter's words each time.
//!
//! Two threads colouring one [`SrTcm`] move its line between cores on every green packet. A
//! `LeasedSrTcm` keeps the [`SrTcm`] (decided exactly) and a fixed array of cache-padded slots,
//! as [`LeasedLimiter`](crate::LeasedLimiter) does (the slot is the same: `leased/slot.rs`). A
//! slot's lease is a batch of `L` green units taken from the meter with one green-only take
//! (`C` and `A` both charged as for a green packet of `L`, or nothing: a take that loses `C` to
//! another thread gives its charge of `A` back and colours nothing yellow). A packet of `B < L`
//! is green from its slot's lease while it holds `B`, with no write to the meter; otherwise
//! (lease empty, expired, reserved, too small) it takes a new lease when `C` holds `L`, or is
//! coloured by the [`SrTcm`] exactly. So yellow and red are always the shared meter's
//! decisions.
//!
//! # The bound
//!
//! `L = min(CIR * span, CBS / 2) / slots` units (as [`Leases`] sizes a limiter's lease, with
//! CBS for the burst; leases of fewer than 2 units are off, and every packet is then coloured
//! exactly). Every leased unit was charged to `C` (and `A`) when its lease was taken, and is
//! spent no later than `span` after, or never; a slot holds at most one lease. So in any window
//! of the clock `[t1, t2]`:
//!
//! ```text
//! green units in [t1, t2]            <=  CBS + CIR * (t2 - t1) + E
//! green + yellow units in [t1, t2]   <=  CBS + EBS + CIR * (t2 - t1) + E
//! E = slots * L  <=  min(CIR * span, CBS / 2)
//! ```
//!
//! The first terms are the words' exact bounds on what they charged in the window; `E` is
//! what was charged before `t1` and spent in it, at most one lease per slot
//! ([`excess_bound`](LeasedSrTcm::excess_bound)). Yellows are decided only by the shared meter,
//! so their bound is the meter's (its total bucket), with the same `E`. With leases off `E = 0`.
//!
//! **What it may colour lower.** A packet that finds its slot's lease empty and `C` short of it
//! is coloured yellow (or red) by the meter while up to `E - L` green units sit in other slots'
//! leases: they are spent by those slots' threads or dropped at most `span` later, and none
//! are taken while `C` holds less than a whole lease (near the boundary packets go to the exact
//! path).
//!
//! # Costs
//!
//! A green packet from a lease: a clock reading, a thread-local read, one load and one CAS of a
//! line no other core writes. A new lease: those, a load of `C`, a CAS of the slot, and one
//! green take on the meter. Every other packet: the meter's own decision, after one load of the
//! slot.

use super::green_leases::GreenLeases;
use super::{Color, MeterError, SrTcm};
use crate::clock::{Clock, TscClock};
use crate::leased::Leases;
use crate::quota::Quota;
use core::fmt;

/// An [`SrTcm`] shared by threads whose green packets are coloured from per-slot leases of green
/// units (the module docs of `leakgate`'s `meter/leased_sr.rs` state the bound): for one meter
/// coloured by many threads at a high packet rate.
///
/// ```
/// use leakgate::{Color, LeasedSrTcm, Leases, ManualClock, Quota};
/// // CIR 1 GB/s, CBS 1 MB, EBS 1 MB; two slots.
/// let cir: Quota = "1 GB/s burst 1 MB".parse()?;
/// let meter = LeasedSrTcm::with_leases(cir, 1_000_000, ManualClock::new(), Leases::new().slots(2))?;
/// assert_eq!(meter.lease_units(), 65_534); // 1 ms of CIR over 2 slots, at most 65,534
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| for _ in 0..100 { assert_eq!(meter.color_blind(1500), Color::Green) });
///     }
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LeasedSrTcm<C: Clock = TscClock> {
    /// The shared meter: every lease is one green take of it, every other packet its decision.
    pub(super) exact: SrTcm<C>,
    /// The slots and the size and life of their leases.
    pub(super) leases: GreenLeases,
}

impl LeasedSrTcm<TscClock> {
    /// A leased srTCM of CIR and CBS `committed` and EBS `ebs` (as [`SrTcm::new`]) on the default
    /// clock, with the default [`Leases`].
    ///
    /// ```
    /// let meter = leakgate::LeasedSrTcm::new("10 MB/s burst 64 KiB".parse()?, 64 * 1024)?;
    /// assert_eq!(meter.color_blind(1500), leakgate::Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(committed: Quota, ebs: u64) -> Result<Self, MeterError> {
        Self::with_leases(committed, ebs, TscClock::new(), Leases::new())
    }
}

impl<C: Clock> LeasedSrTcm<C> {
    /// A leased srTCM as [`SrTcm::with_clock`], leasing as `leases` says.
    ///
    /// ```
    /// use leakgate::{LeasedSrTcm, Leases, ManualClock, Quota};
    /// let cir: Quota = "1 MB/s burst 8000 B".parse()?;
    /// let meter = LeasedSrTcm::with_leases(cir, 0, ManualClock::new(), Leases::new().slots(4))?;
    /// assert_eq!(meter.lease_units(), 250); // 1 ms of 1 MB/s over 4 slots
    /// assert_eq!(meter.excess_bound(), 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_leases(
        committed: Quota,
        ebs: u64,
        clock: C,
        leases: Leases,
    ) -> Result<Self, MeterError> {
        Ok(Self::from_meter(SrTcm::with_clock(committed, ebs, clock)?, leases))
    }

    /// Leases green units of `meter` (any [`SrTcm`], of CBS 0 too: then leases are off).
    ///
    /// ```
    /// use leakgate::{LeasedSrTcm, Leases, ManualClock, Quota, SrTcm};
    /// let cir = Quota::bytes_per_second(1_000_000_000)?;
    /// let meter = SrTcm::with_bursts(cir, 0, 9000, ManualClock::new())?;
    /// assert_eq!(LeasedSrTcm::from_meter(meter, Leases::new()).lease_units(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_meter(meter: SrTcm<C>, leases: Leases) -> Self {
        let cbs = meter.committed_burst();
        let lease = if cbs == 0 { 0 } else { leases.lease_units(&meter.committed()) };
        LeasedSrTcm { exact: meter, leases: GreenLeases::new(lease, &leases) }
    }

    /// The colour of a packet of `bytes` metered now, colour-blind (as
    /// [`SrTcm::color_blind`], from the calling thread's lease when it is green and the lease
    /// holds it).
    ///
    /// ```
    /// # use leakgate::{Color, LeasedSrTcm, Leases, ManualClock, Quota};
    /// let meter = LeasedSrTcm::with_leases(Quota::bytes_per_second(1000)?, 1000, ManualClock::new(), Leases::new())?;
    /// assert_eq!(meter.color_blind(600), Color::Green);
    /// assert_eq!(meter.color_blind(600), Color::Yellow);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind(&self, bytes: u64) -> Color {
        self.color_blind_at(bytes, self.exact.clock().now_ns())
    }

    /// [`color_blind`](LeasedSrTcm::color_blind) at `now_ns`, a reading of this meter's clock
    /// made by the caller.
    ///
    /// ```
    /// # use leakgate::{Clock, Color, LeasedSrTcm, Quota};
    /// let meter = LeasedSrTcm::new(Quota::bytes_per_second(1000)?, 0)?;
    /// let now = meter.clock().now_ns();
    /// assert_eq!(meter.color_blind_at(1000, now), Color::Green);
    /// assert_eq!(meter.color_blind_at(1, now), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at(&self, bytes: u64, now_ns: u64) -> Color {
        self.color_blind_at_slot(crate::sync::thread_index(), bytes, now_ns)
    }

    /// [`color_blind_at`](LeasedSrTcm::color_blind_at) with the lease of slot `slot` (modulo the
    /// number of slots) instead of the calling thread's: for a packet loop pinned to a core
    /// (pass the core's or the queue's number). The bound holds whatever slots callers name.
    ///
    /// ```
    /// # use leakgate::{Color, LeasedSrTcm, Leases, ManualClock, Quota};
    /// let cir: Quota = "1 MB/s burst 8000 B".parse()?;
    /// let meter = LeasedSrTcm::with_leases(cir, 0, ManualClock::new(), Leases::new().slots(4))?;
    /// assert_eq!(meter.color_blind_at_slot(3, 100, 0), Color::Green); // a lease of 250 for slot 3
    /// assert_eq!(meter.tokens_at(0), (7750, 0)); // the whole lease is charged
    /// assert_eq!(meter.color_blind_at_slot(3, 150, 0), Color::Green); // from the lease
    /// assert_eq!(meter.tokens_at(0), (7750, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at_slot(&self, slot: usize, bytes: u64, now_ns: u64) -> Color {
        self.leases.color_blind_at_slot(&self.exact, slot, bytes, now_ns)
    }

    /// The colour of a packet of `bytes` coloured `pre` on arrival, colour-aware (RFC 2697): a
    /// green one as [`color_blind`](LeasedSrTcm::color_blind), a yellow or red one as
    /// [`SrTcm::color_aware`] on the shared meter.
    ///
    /// ```
    /// # use leakgate::{Color, LeasedSrTcm, Quota};
    /// let meter = LeasedSrTcm::new(Quota::bytes_per_second(1000)?, 1000)?;
    /// assert_eq!(meter.color_aware(600, Color::Yellow), Color::Yellow);
    /// assert_eq!(meter.color_aware(600, Color::Green), Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware(&self, bytes: u64, pre: Color) -> Color {
        self.color_aware_at(bytes, pre, self.exact.clock().now_ns())
    }

    /// [`color_aware`](LeasedSrTcm::color_aware) at `now_ns`, a reading of this meter's clock.
    ///
    /// ```
    /// # use leakgate::{Color, LeasedSrTcm, Quota};
    /// let meter = LeasedSrTcm::new(Quota::bytes_per_second(1000)?, 0)?;
    /// assert_eq!(meter.color_aware_at(1, Color::Red, 0), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware_at(&self, bytes: u64, pre: Color, now_ns: u64) -> Color {
        match pre {
            Color::Green => self.color_blind_at(bytes, now_ns),
            _ => self.exact.color_aware_at(bytes, pre, now_ns),
        }
    }

    /// The shared meter's token counts `(Tc, Te)` at `now_ns` (units sitting in leases are
    /// counted as taken).
    ///
    /// ```
    /// # use leakgate::{LeasedSrTcm, Quota};
    /// let meter = LeasedSrTcm::new(Quota::bytes_per_second(1000)?, 500)?;
    /// assert_eq!(meter.tokens_at(0), (1000, 500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens_at(&self, now_ns: u64) -> (u64, u64) {
        self.exact.tokens_at(now_ns)
    }

    /// Green units one lease takes from the meter; 0 when leases are off (every packet is then
    /// coloured exactly).
    ///
    /// ```
    /// # use leakgate::{LeasedSrTcm, Quota};
    /// let slow = LeasedSrTcm::new(Quota::bytes_per_second(1000)?, 0)?;
    /// assert_eq!(slow.lease_units(), 0); // 1 ms of 1000 B/s is one byte
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lease_units(&self) -> u64 {
        self.leases.lease_units()
    }

    /// `E` of the bound (module docs): the most green units in a window beyond the exact
    /// meter's `CBS + CIR * window`, `slots * lease_units()`.
    ///
    /// ```
    /// # use leakgate::{LeasedSrTcm, Leases, ManualClock, Quota};
    /// let cir: Quota = "10 MB/s burst 1 MB".parse()?;
    /// let meter = LeasedSrTcm::with_leases(cir, 0, ManualClock::new(), Leases::new().slots(8))?;
    /// assert_eq!(meter.excess_bound(), 10_000); // 1 ms of CIR
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn excess_bound(&self) -> u64 {
        self.leases.excess_bound()
    }

    /// The shared meter.
    ///
    /// ```
    /// # use leakgate::{LeasedSrTcm, Quota};
    /// let meter = LeasedSrTcm::new(Quota::bytes_per_second(1000)?, 750)?;
    /// assert_eq!(meter.meter().excess_burst(), 750);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn meter(&self) -> &SrTcm<C> {
        &self.exact
    }

    /// The clock this meter reads (and that caller times must come from).
    ///
    /// ```
    /// # use leakgate::{LeasedSrTcm, ManualClock, Quota, Leases};
    /// let meter = LeasedSrTcm::with_leases(Quota::bytes_per_second(1000)?, 0, ManualClock::new(), Leases::new())?;
    /// meter.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.exact.clock()
    }
}

impl<C: Clock> fmt::Debug for LeasedSrTcm<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedSrTcm")
            .field("meter", &self.exact)
            .field("slots", &self.leases.slot_count())
            .field("lease_units", &self.leases.lease_units())
            .finish_non_exhaustive()
    }
}
