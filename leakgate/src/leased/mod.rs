//! [`LeasedLimiter`]: one shared bucket whose hot checks spend units from small local leases
//! instead of writing the shared word each time.
//!
//! A [`Limiter`] shared by threads moves its one cache line between cores on every admission.
//! A `LeasedLimiter` keeps a [`Limiter`] (the shared bucket, decided exactly) and a fixed array of
//! cache-padded slots; each thread is mapped to a slot (by the order threads first check, so
//! threads started together land on different slots). A check spends from its slot's lease,
//! with one CAS on that slot's own line and no write to the shared word; when the lease is used
//! up or expired it takes a new one: one check of the lease's whole size on the shared bucket.
//!
//! # The bound
//!
//! A lease is `L = min(rate * span, burst / 2) / slots` units (see [`Leases`]; leases of fewer
//! than 2 units are off, and every check is then exactly [`Limiter::check_n`]). Every leased unit
//! was charged to the shared bucket, which admits exactly, when its lease was taken, and is
//! spent no later than `span` after that, or never. A slot holds at most one lease at a time,
//! reserved or installed (`leased/slot.rs`). So in any window of the clock `[t1, t2]`:
//!
//! ```text
//! admitted in [t1, t2]  <=  burst + rate * (t2 - t1) + E,    E = slots * L  <=  min(rate * span, burst / 2)
//! ```
//!
//! The first two terms are the shared bucket's exact bound on what it charged in the window;
//! `E` is what was charged before `t1` and spent in the window: at most the units left in the
//! leases outstanding at `t1`, one per slot. (As for [`Limiter`], a check decided at a clock
//! reading earlier than one the limiter has seen counts at the latest reading.) With leases off
//! `E = 0` and the bound is the limiter's.
//!
//! **What it may refuse.** A check that finds its own lease empty and the shared bucket without
//! room for its cost is refused, while up to `E - L` units sit in other slots' leases; they are
//! spent by those slots' threads, or dropped when they expire, at most `span` later. A lease is
//! only taken while the shared bucket has room for the whole lease (near the boundary checks go
//! to the exact path), so the units refused that way are at most `E` per `span`, and none while
//! every slot's thread keeps spending its lease. Unspent units are not given back to the shared
//! word: their charge leaves the bucket's level as it drains, within `L / rate <= span / slots`
//! of the lease, so they cost the other threads only while the bucket is at its boundary.
//!
//! # Costs
//!
//! A unit from a lease: a clock reading, a thread-local read, one load and one CAS of a line no
//! other core writes. A new lease: the above, one load and one CAS on the slot, and one check of
//! the shared word. A refusal: two loads of the shared word and no write. A unit from a
//! [`LocalLease`]: a compare and a decrement of the handle's own counter and one load of the
//! epoch (a word only a change of quota writes); no clock reading.
//!
//! # A thread's own handle
//!
//! [`LeasedLimiter::local`] gives a thread a [`LocalLease`]: it holds one slot's lease in a plain
//! counter, so a unit from it is a decrement and one read of a word only a change of quota writes:
//! no clock reading, no atomic write. The bound needs no clock reading on a spend: what is spent
//! in a window was charged in it or sat in a lease at its start. See `leased/local.rs`.
//!
//! # A change of quota
//!
//! [`LeasedLimiter::set_quota`] changes the shared bucket's quota with its levels kept
//! ([`Limiter::set_quota`]), sizes later leases for the new quota, drops the leases the slots
//! hold, and makes every [`LocalLease`] drop its units at its next check. Units charged before
//! the change and spent after it are at most one lease (of the size before) per slot: a lease
//! being installed at the change, or one a handle spends before it sees the change. After that
//! the bound is the new quota's, with its `E`.

mod config;
mod local;
mod requota;
pub(crate) mod slot;

pub use config::Leases;
pub use local::LocalLease;

use crate::clock::{Clock, TscClock};
use crate::decision::{Admitted, Denied};
use crate::limiter::Limiter;
use crate::quota::Quota;
use crate::sync::{AtomicU64, Mutex, Ordering};
use core::fmt;
use core::time::Duration;
use crossbeam_utils::CachePadded;
use slot::{Slot, Spend, MAX_TICK, TICK_SHIFT};

/// A shared bucket whose hot checks spend from per-slot leases (module docs of
/// `leakgate::LeasedLimiter`'s file state the bound): for one limiter checked by many threads
/// at a high rate, where [`Limiter`]'s one word is the bottleneck.
///
/// ```
/// use leakgate::{LeasedLimiter, Quota};
/// let lim = LeasedLimiter::new("1000000/s burst 100000".parse::<Quota>()?);
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| for _ in 0..1000 { let _ = lim.check(); });
///     }
/// });
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub struct LeasedLimiter<C: Clock = TscClock> {
    /// The shared bucket: every lease is one exact check of it.
    exact: Limiter<C>,
    /// The slots, a power of two of them, each alone on its cache line.
    slots: Box<[CachePadded<Slot>]>,
    /// `slots.len() - 1`.
    mask: usize,
    /// Units one lease takes under the quota in force (at least 2), or 0: leases off. Written
    /// only by a change of quota.
    lease: AtomicU64,
    /// How leases are sized and how long they live.
    leases: Leases,
    /// Changes of quota so far (wrapping): a [`LocalLease`] drops its units when it sees this move.
    epoch: AtomicU64,
    /// Held by a change of quota: changes run one at a time (checks never take it).
    changing: Mutex<()>,
}

impl LeasedLimiter<TscClock> {
    /// A leased limiter on the default clock with the default [`Leases`].
    ///
    /// ```
    /// let lim = leakgate::LeasedLimiter::new(leakgate::Quota::per_second(5)?);
    /// assert!(lim.check().is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn new(quota: Quota) -> Self {
        Self::with_leases(quota, TscClock::new(), Leases::new())
    }
}

impl<C: Clock> LeasedLimiter<C> {
    /// A leased limiter reading time from `clock`, with the default [`Leases`].
    ///
    /// ```
    /// use leakgate::{LeasedLimiter, ManualClock, Quota};
    /// let lim = LeasedLimiter::with_clock(Quota::per_second(5)?, ManualClock::new());
    /// assert_eq!(lim.check_n(5).unwrap().remaining(), 0);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        Self::with_leases(quota, clock, Leases::new())
    }

    /// A leased limiter reading time from `clock`, leasing as `leases` says.
    ///
    /// ```
    /// use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
    /// let q: Quota = "1000000/s burst 100000".parse()?;
    /// let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(4));
    /// assert_eq!(lim.lease_units(), 250); // 1 ms of 1M/s, over 4 slots
    /// assert_eq!(lim.excess_bound(), 1000);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn with_leases(quota: Quota, clock: C, leases: Leases) -> Self {
        let slots: Box<[CachePadded<Slot>]> =
            (0..leases.slots_of()).map(|_| CachePadded::new(Slot::new())).collect();
        LeasedLimiter {
            exact: Limiter::with_clock(quota, clock),
            mask: slots.len() - 1,
            slots,
            lease: AtomicU64::new(leases.lease_units(&quota)),
            leases,
            epoch: AtomicU64::new(0),
            changing: Mutex::new(()),
        }
    }

    /// Checks one unit: `check_n(1)`.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, ManualClock, Quota};
    /// let lim = LeasedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert!(lim.check().is_ok());
    /// assert!(lim.check().is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check(&self) -> Result<Admitted, Denied> {
        self.check_n(1)
    }

    /// Checks a request of cost `n`, from the calling thread's lease when it holds `n` units, else
    /// on the shared bucket (taking a new lease when the bucket has room for one).
    ///
    /// A unit spent from a lease reports `remaining()` as the units left in that lease and
    /// `reset_after()` as zero (the shared bucket was not read); every other decision reports
    /// the shared bucket as [`Limiter::check_n`] does. `n = 0` conforms; `n` above the burst is
    /// denied. Never blocks, allocates or panics.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, ManualClock, Quota};
    /// let lim = LeasedLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// assert!(lim.check_n(7).is_ok());
    /// assert!(lim.check_n(4).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check_n(&self, n: u64) -> Result<Admitted, Denied> {
        self.check_n_at(n, self.exact.clock().now_ns())
    }

    /// [`check_n`](LeasedLimiter::check_n) at the clock reading `now_ns` the caller gives (as
    /// [`Limiter::check_n_at`]).
    ///
    /// ```
    /// # use leakgate::{Clock, LeasedLimiter, ManualClock, Quota};
    /// let lim = LeasedLimiter::with_clock(Quota::per_second(2)?, ManualClock::new());
    /// let now = lim.clock().now_ns();
    /// assert!(lim.check_n_at(2, now).is_ok());
    /// assert!(lim.check_n_at(1, now).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check_n_at(&self, n: u64, now_ns: u64) -> Result<Admitted, Denied> {
        self.check_n_at_slot(crate::sync::thread_index(), n, now_ns)
    }

    /// [`check_n_at`](LeasedLimiter::check_n_at) with the lease of slot `slot` (modulo the
    /// number of slots) instead of the calling thread's: for a caller that knows better which
    /// checks run together (a thread pinned to a core passes the core's number). The bound holds
    /// whatever slots callers name; callers that share a slot share its line.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
    /// let q: Quota = "1000/ms burst 1000".parse()?;
    /// let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    /// assert!(lim.check_n_at_slot(0, 1, 0).is_ok()); // takes a lease of 250 for slot 0
    /// assert_eq!(lim.check_n_at_slot(0, 1, 0).unwrap().remaining(), 248);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check_n_at_slot(&self, slot: usize, n: u64, now_ns: u64) -> Result<Admitted, Denied> {
        // Relaxed: a size to take leases of; a check racing a change of quota may take one of
        // the size before, which the bound counts (module docs).
        let lease = self.lease.load(Ordering::Relaxed);
        if n == 0 || lease == 0 {
            return self.exact.check_n_at(n, now_ns);
        }
        let slot = &self.slots[slot & self.mask];
        match slot.spend(n, now_ns >> TICK_SHIFT) {
            Spend::Spent(left) => Ok(Admitted::new(left, Duration::ZERO)),
            Spend::Refill(seen) => self.refill(slot, seen, lease, n, now_ns),
            Spend::Exact => self.exact.check_n_at(n, now_ns),
        }
    }

    /// A check whose slot has no lease to spend: takes a new lease for the slot, or decides on
    /// the shared bucket.
    #[inline(never)]
    fn refill(
        &self,
        slot: &Slot,
        seen: u64,
        lease: u64,
        n: u64,
        now_ns: u64,
    ) -> Result<Admitted, Denied> {
        let expiry = self.expiry_tick(now_ns);
        // A cost a lease cannot serve, a clock past the slots' range, or a bucket without room
        // for a whole lease (a read, no write): the exact path. Otherwise claim the slot (only
        // one lease per slot at a time: the bound's `E`).
        if n >= lease
            || expiry > MAX_TICK
            || !self.exact.would_admit(lease, now_ns)
            || !slot.reserve(seen)
        {
            return self.exact.check_n_at(n, now_ns);
        }
        match self.exact.check_n_at(lease, now_ns) {
            Ok(charged) => {
                slot.install(lease - n, expiry);
                Ok(charged)
            }
            Err(_) => {
                slot.install(0, 0);
                self.exact.check_n_at(n, now_ns)
            }
        }
    }

    /// The tick at which a lease taken at `now_ns` expires.
    #[inline]
    fn expiry_tick(&self, now_ns: u64) -> u64 {
        now_ns.saturating_add(self.leases.span_ns()) >> TICK_SHIFT
    }

    /// Units one lease takes from the shared bucket; 0 when leases are off for this quota (every
    /// check is then exact).
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, ManualClock, Quota};
    /// let slow = LeasedLimiter::with_clock(Quota::per_second(100)?, ManualClock::new());
    /// assert_eq!(slow.lease_units(), 0); // 1 ms of 100/s is less than a unit
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn lease_units(&self) -> u64 {
        // Relaxed: a reading of the size in force.
        self.lease.load(Ordering::Relaxed)
    }

    /// `E` of the bound (module docs): the most units admitted in a window beyond the exact
    /// limiter's `burst + rate * window`, `slots * lease_units()`.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
    /// let q: Quota = "10000000/s burst 10000000".parse()?;
    /// let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(8));
    /// assert_eq!(lim.excess_bound(), 10_000); // 1 ms of the rate
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn excess_bound(&self) -> u64 {
        self.lease_units().saturating_mul(self.slots.len() as u64)
    }

    /// The quota this limiter enforces.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Quota};
    /// let q = Quota::per_minute(30)?;
    /// assert_eq!(LeasedLimiter::new(q).quota(), q);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.exact.quota()
    }

    /// The clock this limiter reads.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, ManualClock, Quota};
    /// let lim = LeasedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// lim.clock().advance(std::time::Duration::from_secs(1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn clock(&self) -> &C {
        self.exact.clock()
    }
}

impl<C: Clock> fmt::Debug for LeasedLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedLimiter")
            .field("quota", &self.quota())
            .field("slots", &self.slots.len())
            .field("lease_units", &self.lease_units())
            .finish_non_exhaustive()
    }
}
