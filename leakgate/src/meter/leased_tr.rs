//! [`LeasedTrTcm`]: one shared [`TrTcm`] whose green packets are coloured from small per-slot
//! leases of green units instead of writing the meter's words each time (the trTCM twin of
//! `meter/leased_sr.rs`, whose docs give the design).
//!
//! A slot's lease is `L` green units taken from the meter with one green-only take (`P` and
//! `C` both charged as for a green packet of `L`, or nothing: a take that loses `C` gives its
//! charge of `P` back and colours nothing yellow). A packet of `B < L` is green from its slot's
//! lease while it holds `B`; otherwise it takes a new lease when `P` and `C` hold `L`, or is
//! coloured by the [`TrTcm`] exactly. Yellow and red are always the shared meter's decisions.
//!
//! # The bound
//!
//! `L = min(CIR * span, CBS / 2, PBS / 2) / slots` units (leases of fewer than 2 units are off,
//! and every packet is then coloured exactly). Every leased unit was charged to `P` and `C`
//! when its lease was taken and is spent no later than `span` after, or never; a slot holds at
//! most one lease. So in any window of the clock `[t1, t2]`:
//!
//! ```text
//! green units in [t1, t2]            <=  CBS + CIR * (t2 - t1) + E
//! green + yellow units in [t1, t2]   <=  PBS + PIR * (t2 - t1) + E
//! E = slots * L  <=  min(CIR * span, CBS / 2, PBS / 2)
//! ```
//!
//! **What it may colour lower.** A packet that finds its slot's lease empty and `C` short of it
//! is coloured yellow (or red) by the meter while up to `E - L` green units sit in other slots'
//! leases, spent or dropped at most `span` later; and a packet may be red where `P` holds a
//! lease take's charge for the moment before it is given back.
//!
//! # Costs
//!
//! As `LeasedSrTcm`'s: a green packet from a lease is a clock reading, a thread-local read, one
//! load and one CAS of a line no other core writes.

use super::green_leases::GreenLeases;
use super::{Color, MeterError, TrTcm};
use crate::clock::{Clock, TscClock};
use crate::leased::Leases;
use crate::quota::Quota;
use core::fmt;

/// An [`TrTcm`] shared by threads whose green packets are coloured from per-slot leases of green
/// units (the module docs of `leakgate`'s `meter/leased_tr.rs` state the bound): for one meter
/// coloured by many threads at a high packet rate.
///
/// ```
/// use leakgate::{Color, LeasedTrTcm, Leases, ManualClock, Quota};
/// // PIR 2 GB/s, CIR 1 GB/s, PBS and CBS 1 MB; two slots.
/// let (peak, cir): (Quota, Quota) = ("2 GB/s burst 1 MB".parse()?, "1 GB/s burst 1 MB".parse()?);
/// let meter = LeasedTrTcm::with_leases(peak, cir, ManualClock::new(), Leases::new().slots(2))?;
/// assert_eq!(meter.lease_units(), 65_534); // half of CBS over 2 slots, at most 65,534
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| for _ in 0..100 { assert_eq!(meter.color_blind(1500), Color::Green) });
///     }
/// });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LeasedTrTcm<C: Clock = TscClock> {
    /// The shared meter: every lease is one green take of it, every other packet its decision.
    pub(super) exact: TrTcm<C>,
    /// The slots and the size and life of their leases.
    pub(super) leases: GreenLeases,
}

impl LeasedTrTcm<TscClock> {
    /// A leased trTCM of PIR and PBS `peak` and CIR and CBS `committed` (as [`TrTcm::new`]) on
    /// the default clock, with the default [`Leases`].
    ///
    /// ```
    /// let meter = leakgate::LeasedTrTcm::new("20 MB/s burst 64 KiB".parse()?, "10 MB/s burst 64 KiB".parse()?)?;
    /// assert_eq!(meter.color_blind(1500), leakgate::Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(peak: Quota, committed: Quota) -> Result<Self, MeterError> {
        Self::with_leases(peak, committed, TscClock::new(), Leases::new())
    }
}

impl<C: Clock> LeasedTrTcm<C> {
    /// A leased trTCM as [`TrTcm::with_clock`], leasing as `leases` says.
    ///
    /// ```
    /// use leakgate::{LeasedTrTcm, Leases, ManualClock, Quota};
    /// let (peak, cir): (Quota, Quota) = ("2 MB/s burst 8000 B".parse()?, "1 MB/s burst 8000 B".parse()?);
    /// let meter = LeasedTrTcm::with_leases(peak, cir, ManualClock::new(), Leases::new().slots(4))?;
    /// assert_eq!(meter.lease_units(), 250); // 1 ms of CIR over 4 slots
    /// assert_eq!(meter.excess_bound(), 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_leases(
        peak: Quota,
        committed: Quota,
        clock: C,
        leases: Leases,
    ) -> Result<Self, MeterError> {
        Ok(Self::from_meter(TrTcm::with_clock(peak, committed, clock)?, leases))
    }

    /// Leases green units of `meter`.
    ///
    /// ```
    /// use leakgate::{LeasedTrTcm, Leases, ManualClock, Quota, TrTcm};
    /// let (peak, cir): (Quota, Quota) = ("2 MB/s burst 8000 B".parse()?, "1 MB/s burst 8000 B".parse()?);
    /// let meter = TrTcm::with_clock(peak, cir, ManualClock::new())?;
    /// assert_eq!(LeasedTrTcm::from_meter(meter, Leases::new().slots(2)).lease_units(), 500);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_meter(meter: TrTcm<C>, leases: Leases) -> Self {
        // A lease takes its units from `P` too: the smaller of the two quotas' leases (`P`'s
        // rate is at least CIR, so its term is PBS / 2).
        let lease = leases.lease_units(&meter.committed()).min(leases.lease_units(&meter.peak()));
        LeasedTrTcm { exact: meter, leases: GreenLeases::new(lease, &leases) }
    }

    /// The colour of a packet of `bytes` metered now, colour-blind (as
    /// [`TrTcm::color_blind`], from the calling thread's lease when it is green and the lease
    /// holds it).
    ///
    /// ```
    /// # use leakgate::{Color, LeasedTrTcm, Leases, ManualClock, Quota};
    /// let (peak, cir) = (Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?);
    /// let meter = LeasedTrTcm::with_leases(peak, cir, ManualClock::new(), Leases::new())?;
    /// assert_eq!(meter.color_blind(600), Color::Green);
    /// assert_eq!(meter.color_blind(600), Color::Yellow);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind(&self, bytes: u64) -> Color {
        self.color_blind_at(bytes, self.exact.clock().now_ns())
    }

    /// [`color_blind`](LeasedTrTcm::color_blind) at `now_ns`, a reading of this meter's clock
    /// made by the caller.
    ///
    /// ```
    /// # use leakgate::{Clock, Color, LeasedTrTcm, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = LeasedTrTcm::new(q, q)?;
    /// let now = meter.clock().now_ns();
    /// assert_eq!(meter.color_blind_at(1000, now), Color::Green);
    /// assert_eq!(meter.color_blind_at(1, now), Color::Red);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at(&self, bytes: u64, now_ns: u64) -> Color {
        self.color_blind_at_slot(crate::sync::thread_index(), bytes, now_ns)
    }

    /// [`color_blind_at`](LeasedTrTcm::color_blind_at) with the lease of slot `slot` (modulo the
    /// number of slots) instead of the calling thread's: for a packet loop pinned to a core
    /// (pass the core's or the queue's number). The bound holds whatever slots callers name.
    ///
    /// ```
    /// # use leakgate::{Color, LeasedTrTcm, Leases, ManualClock, Quota};
    /// let (peak, cir): (Quota, Quota) = ("2 MB/s burst 8000 B".parse()?, "1 MB/s burst 8000 B".parse()?);
    /// let meter = LeasedTrTcm::with_leases(peak, cir, ManualClock::new(), Leases::new().slots(4))?;
    /// assert_eq!(meter.color_blind_at_slot(3, 100, 0), Color::Green); // a lease of 250 for slot 3
    /// assert_eq!(meter.tokens_at(0), (7750, 7750)); // the whole lease is charged
    /// assert_eq!(meter.color_blind_at_slot(3, 150, 0), Color::Green); // from the lease
    /// assert_eq!(meter.tokens_at(0), (7750, 7750));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_blind_at_slot(&self, slot: usize, bytes: u64, now_ns: u64) -> Color {
        self.leases.color_blind_at_slot(&self.exact, slot, bytes, now_ns)
    }

    /// The colour of a packet of `bytes` coloured `pre` on arrival, colour-aware (RFC 2698): a
    /// green one as [`color_blind`](LeasedTrTcm::color_blind), a yellow or red one as
    /// [`TrTcm::color_aware`] on the shared meter.
    ///
    /// ```
    /// # use leakgate::{Color, LeasedTrTcm, Quota};
    /// let meter = LeasedTrTcm::new(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?)?;
    /// assert_eq!(meter.color_aware(600, Color::Yellow), Color::Yellow); // P only
    /// assert_eq!(meter.color_aware(600, Color::Green), Color::Green);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn color_aware(&self, bytes: u64, pre: Color) -> Color {
        self.color_aware_at(bytes, pre, self.exact.clock().now_ns())
    }

    /// [`color_aware`](LeasedTrTcm::color_aware) at `now_ns`, a reading of this meter's clock.
    ///
    /// ```
    /// # use leakgate::{Color, LeasedTrTcm, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = LeasedTrTcm::new(q, q)?;
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

    /// The shared meter's token counts `(Tp, Tc)` at `now_ns` (units sitting in leases are
    /// counted as taken).
    ///
    /// ```
    /// # use leakgate::{LeasedTrTcm, Quota};
    /// let meter = LeasedTrTcm::new(Quota::bytes_per_second(2000)?, Quota::bytes_per_second(1000)?)?;
    /// assert_eq!(meter.tokens_at(0), (2000, 1000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokens_at(&self, now_ns: u64) -> (u64, u64) {
        self.exact.tokens_at(now_ns)
    }

    /// Green units one lease takes from the meter; 0 when leases are off (every packet is then
    /// coloured exactly).
    ///
    /// ```
    /// # use leakgate::{LeasedTrTcm, Quota};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let slow = LeasedTrTcm::new(q, q)?;
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
    /// # use leakgate::{LeasedTrTcm, Leases, ManualClock, Quota};
    /// let (peak, cir): (Quota, Quota) = ("20 MB/s burst 1 MB".parse()?, "10 MB/s burst 1 MB".parse()?);
    /// let meter = LeasedTrTcm::with_leases(peak, cir, ManualClock::new(), Leases::new().slots(8))?;
    /// assert_eq!(meter.excess_bound(), 10_000); // 1 ms of CIR
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn excess_bound(&self) -> u64 {
        self.leases.excess_bound()
    }

    /// The shared meter.
    ///
    /// ```
    /// # use leakgate::{LeasedTrTcm, Quota};
    /// let peak = Quota::bytes_per_second(2000)?;
    /// let meter = LeasedTrTcm::new(peak, Quota::bytes_per_second(1000)?)?;
    /// assert_eq!(meter.meter().peak(), peak);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn meter(&self) -> &TrTcm<C> {
        &self.exact
    }

    /// The clock this meter reads (and that caller times must come from).
    ///
    /// ```
    /// # use leakgate::{LeasedTrTcm, ManualClock, Quota, Leases};
    /// let q = Quota::bytes_per_second(1000)?;
    /// let meter = LeasedTrTcm::with_leases(q, q, ManualClock::new(), Leases::new())?;
    /// meter.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.exact.clock()
    }
}

impl<C: Clock> fmt::Debug for LeasedTrTcm<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedTrTcm")
            .field("meter", &self.exact)
            .field("slots", &self.leases.slot_count())
            .field("lease_units", &self.leases.lease_units())
            .finish_non_exhaustive()
    }
}
