//! [`LocalLease`]: one thread's handle on a [`LeasedLimiter`], holding one slot's lease in a plain
//! counter, so a unit from it costs no clock reading and no atomic write.
//!
//! # Implementation details
//!
//! [`LeasedLimiter::local`] takes a slot for the handle (its word becomes `HELD`, `slot.rs`), with
//! any unexpired lease it held. The handle then is the slot's only lease: it takes leases of the
//! size in force with one check of the shared bucket, as a slot does, and spends them by
//! decrementing its own counter. Its other threads decide on the exact path meanwhile.
//!
//! **The bound needs no clock reading on a spend.** A unit admitted in a window `[t1, t2]` was
//! charged to the shared bucket in the window (at most `burst + rate * (t2 - t1)`, exactly) or
//! before it, and then it sat at `t1` in the lease of one slot, a handle's or not: at most one
//! lease per slot, `E` in all. When it is spent does not matter, so a handle's units do not
//! expire while it holds them: a thread that checks rarely spends a lease taken long ago.
//!
//! **What a handle holds.** At most one lease (its units are dropped, not added to, when it takes
//! the next). A thread that stalls holding a handle, or a handle kept unused, keeps those units
//! from every other thread until it is used or dropped (a shortfall of at most one lease, never
//! an excess). Dropped, it gives its units back to its slot as a lease with the expiry they were
//! charged with: the slot's threads spend them until then. A handle that finds every slot held
//! or being refilled holds none, and decides as [`LeasedLimiter::check_n`] does.
//!
//! **A change of quota** moves the limiter's epoch: a handle that sees it drops its units and
//! takes its next lease at the new size. Its hot path reads the epoch with one load of a word
//! only changes of quota write (it stays in the core's cache).

use super::slot::{MAX_TICK, MAX_UNITS, TICK_SHIFT};
use super::LeasedLimiter;
use crate::clock::{Clock, TscClock};
use crate::decision::{Admitted, Denied};
use crate::sync::Ordering;
use core::fmt;
use core::time::Duration;

/// One thread's handle on a [`LeasedLimiter`] (from [`LeasedLimiter::local`]): a check spends
/// from the handle's own lease with no clock reading and no shared write, and takes a new lease
/// from the shared bucket when it is used up. The limiter's bound holds with any number of
/// handles (module docs of `leased/local.rs`); dropping the handle gives its units back.
///
/// Checks take `&mut self`: a handle serves one thread at a time (it may be sent to another).
///
/// ```
/// use leakgate::{LeasedLimiter, Quota};
/// let lim = LeasedLimiter::new("10000000/s burst 1000000".parse::<Quota>()?);
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             let mut local = lim.local();
///             for _ in 0..1000 {
///                 assert!(local.check().is_ok());
///             }
///         });
///     }
/// });
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub struct LocalLease<'a, C: Clock = TscClock> {
    lim: &'a LeasedLimiter<C>,
    /// The slot this handle holds, or `None`: every check goes to [`LeasedLimiter::check_n`].
    slot: Option<usize>,
    /// Units left in the handle's lease, all charged to the shared bucket; at most one lease.
    units: u64,
    /// The tick at which the lease's units would have expired in the slot (given back with them).
    expiry: u64,
    /// The limiter's epoch when the units were taken.
    epoch: u64,
}

impl<C: Clock> LeasedLimiter<C> {
    /// A handle for the calling thread: [`local_at`](LeasedLimiter::local_at) the thread's slot.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Quota};
    /// let lim = LeasedLimiter::new("1000000/s".parse::<Quota>()?);
    /// let mut local = lim.local();
    /// assert!(local.check().is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn local(&self) -> LocalLease<'_, C> {
        self.local_at(crate::sync::thread_index())
    }

    /// A handle holding the first slot from `slot` on (modulo the number of slots, wrapping)
    /// that no other handle holds and none is refilling, with any unexpired units it held; one
    /// that holds no slot when there is none.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
    /// let q: Quota = "1000/ms burst 1000".parse()?;
    /// let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    /// let (a, b, c) = (lim.local_at(1), lim.local_at(1), lim.local_at(1));
    /// assert_eq!((a.slot(), b.slot(), c.slot()), (Some(1), Some(0), None));
    /// drop(a);
    /// assert_eq!(lim.local_at(0).slot(), Some(1));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn local_at(&self, slot: usize) -> LocalLease<'_, C> {
        // Acquire: pairs with a change of quota's Release (`requota.rs`), as in a refill.
        let epoch = self.epoch.load(Ordering::Acquire);
        let now_tick = self.exact.clock().now_ns() >> TICK_SHIFT;
        let mut local = LocalLease { lim: self, slot: None, units: 0, expiry: 0, epoch };
        for i in 0..self.slots.len() {
            let index = slot.wrapping_add(i) & self.mask;
            if let Some((units, expiry)) = self.slots[index].hold(now_tick) {
                local.slot = Some(index);
                local.units = units;
                local.expiry = expiry;
                break;
            }
        }
        local
    }
}

impl<C: Clock> LocalLease<'_, C> {
    /// Checks one unit: `check_n(1)`.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, ManualClock, Quota};
    /// let lim = LeasedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// let mut local = lim.local();
    /// assert!(local.check().is_ok());
    /// assert!(local.check().is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check(&mut self) -> Result<Admitted, Denied> {
        self.check_n(1)
    }

    /// Checks a request of cost `n`: from the handle's lease when it holds `n` units (no clock
    /// reading, no shared write), else as a slot does: a new lease when the shared bucket has
    /// room for one (the units left in the old one, fewer than `n`, are dropped), or the exact
    /// path. A unit from the lease reports `remaining()` as the units left in it and
    /// `reset_after()` as zero; every other decision reports the shared bucket. `n = 0`
    /// conforms. Never blocks, allocates or panics.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
    /// let q: Quota = "1000/ms burst 1000".parse()?;
    /// let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    /// let mut local = lim.local_at(0);
    /// assert_eq!(local.check_n(10).unwrap().remaining(), 750); // a lease of 250 taken
    /// assert_eq!(local.check_n(10).unwrap().remaining(), 230); // from the lease
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check_n(&mut self, n: u64) -> Result<Admitted, Denied> {
        // `n - 1 < units` is `1 <= n <= units` (n = 0 wraps to the top and goes the slow way).
        // Relaxed epoch: only whether it moved matters here (module docs); the refill reads it
        // with Acquire before it takes a lease of the new size.
        if n.wrapping_sub(1) < self.units && self.lim.epoch.load(Ordering::Relaxed) == self.epoch {
            self.units -= n;
            return Ok(Admitted::new(self.units, Duration::ZERO));
        }
        self.refill(n)
    }

    /// A check the handle's lease cannot serve.
    #[inline(never)]
    fn refill(&mut self, n: u64) -> Result<Admitted, Denied> {
        let lim = self.lim;
        let now_ns = lim.exact.clock().now_ns();
        if self.slot.is_none() {
            return lim.check_n_at(n, now_ns);
        }
        // Acquire: pairs with a change of quota's Release, so the size read next is the new one.
        let epoch = lim.epoch.load(Ordering::Acquire);
        if epoch != self.epoch {
            self.units = 0;
            self.epoch = epoch;
        }
        // Relaxed: as in `LeasedLimiter::check_n_at_slot`.
        let lease = lim.lease.load(Ordering::Relaxed);
        let expiry = lim.expiry_tick(now_ns);
        if n == 0 || n <= self.units {
            // A peek, or units left by a change that was not one (the epoch wrapped): the lease
            // serves it on the next call; this one is exact.
            return lim.exact.check_n_at(n, now_ns);
        }
        if n >= lease || expiry > MAX_TICK || !lim.exact.would_admit(lease, now_ns) {
            return lim.exact.check_n_at(n, now_ns);
        }
        match lim.exact.check_n_at(lease, now_ns) {
            Ok(charged) => {
                // The units left (fewer than `n`) are dropped: one lease at a time.
                self.units = lease - n;
                self.expiry = expiry;
                Ok(charged)
            }
            Err(_) => lim.exact.check_n_at(n, now_ns),
        }
    }

    /// The slot this handle holds, or `None` when it found none free.
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Quota};
    /// let lim = LeasedLimiter::new("1000000/s".parse::<Quota>()?);
    /// assert!(lim.local().slot().is_some());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn slot(&self) -> Option<usize> {
        self.slot
    }

    /// Units left in the handle's lease (spent by this handle only, or given back on drop).
    ///
    /// ```
    /// # use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
    /// let q: Quota = "1000/ms burst 1000".parse()?;
    /// let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    /// let mut local = lim.local();
    /// local.check()?;
    /// assert_eq!(local.units(), 249);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn units(&self) -> u64 {
        self.units
    }
}

impl<C: Clock> Drop for LocalLease<'_, C> {
    /// Gives the slot back, with the units left as its lease (expiring when they would have in
    /// the slot), unless a change of quota came since they were taken.
    fn drop(&mut self) {
        if let Some(index) = self.slot {
            // Relaxed: only whether the epoch moved matters (module docs).
            let same = self.lim.epoch.load(Ordering::Relaxed) == self.epoch;
            let units = if same && self.expiry <= MAX_TICK { self.units.min(MAX_UNITS) } else { 0 };
            self.lim.slots[index].install(units, self.expiry);
        }
    }
}

impl<C: Clock> fmt::Debug for LocalLease<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalLease")
            .field("slot", &self.slot)
            .field("units", &self.units)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{LeasedLimiter, Leases, ManualClock, Quota};

    fn limiter() -> LeasedLimiter<ManualClock> {
        let q: Quota = "1000/ms burst 1000".parse().unwrap();
        LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2))
    }

    #[test]
    fn a_dropped_handle_gives_its_units_to_its_slot() {
        let lim = limiter();
        let mut local = lim.local_at(0);
        assert!(local.check().is_ok());
        assert_eq!(local.units(), 249);
        assert!(lim.check_n_at_slot(0, 1, 0).is_ok(), "held slot: exact path");
        drop(local);
        assert_eq!(lim.check_n_at_slot(0, 1, 0).unwrap().remaining(), 248, "the handle's lease");
        // Every unit is admitted once: 1,000 in all at one instant.
        let mut local = lim.local_at(0);
        let mut admitted = 3;
        while local.check().is_ok() || lim.check_n_at_slot(1, 1, 0).is_ok() {
            admitted += 1;
        }
        assert!(admitted <= 1000 && admitted >= 1000 - lim.excess_bound(), "{admitted}");
    }

    #[test]
    fn a_handle_without_a_slot_decides_as_the_limiter() {
        let lim = limiter();
        let (_a, _b) = (lim.local_at(0), lim.local_at(0));
        let mut c = lim.local_at(0);
        assert_eq!(c.slot(), None);
        let admitted = (0..2000).filter(|_| c.check().is_ok()).count();
        assert_eq!(admitted, 1000);
    }
}
