//! [`LeasedLimiter::set_quota`]: a change of quota on a leased limiter, levels kept, leases
//! taken before it dropped (module docs of `leased/mod.rs` state the bound across a change).

use super::LeasedLimiter;
use crate::clock::Clock;
use crate::quota::Quota;
use crate::sync::{self, Ordering};

impl<C: Clock> LeasedLimiter<C> {
    /// Changes the quota, as [`Limiter::set_quota`](crate::Limiter::set_quota) does for the
    /// shared bucket (what it could admit now is kept, capped at the new burst), and sizes later
    /// leases for the new quota. The slots' leases are dropped and every
    /// [`LocalLease`](crate::LocalLease) drops its units at its next check: units charged under
    /// the quota before are never spent after the change beyond one lease of the size before
    /// per slot (one being installed as the change runs, or one a handle spends before it sees
    /// the change). Dropped units were charged: they are lost, never handed out twice. Changes
    /// run one at a time; checks never wait for one.
    ///
    /// ```
    /// use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
    /// let q: Quota = "1000/ms burst 1000".parse()?;
    /// let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    /// let mut local = lim.local_at(0);
    /// assert!(local.check().is_ok()); // takes a lease of 250 units
    /// lim.set_quota("10/s burst 10".parse()?);
    /// assert_eq!(lim.lease_units(), 0); // 1 ms of 10/s: leases off
    /// // The 249 units left in the handle's lease are dropped; the bucket had 750 available,
    /// // capped at the new burst: 10.
    /// assert_eq!((0..20).filter(|_| local.check().is_ok()).count(), 10);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn set_quota(&self, quota: Quota) {
        let _one_at_a_time = sync::lock(&self.changing);
        self.exact.set_quota(quota);
        // Relaxed: checks read the size as a hint for their next lease; one that reads the size
        // before takes one lease of it, which the bound counts.
        self.lease.store(self.leases.lease_units(&quota), Ordering::Relaxed);
        // Release: a handle that sees the new epoch (its refill's Acquire load) also sees the
        // size stored above. Handles on their hot path read it Relaxed: they only need to see
        // it move eventually, and spend at most their lease before they do.
        self.epoch.fetch_add(1, Ordering::Release);
        for slot in self.slots.iter() {
            slot.clear();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{LeasedLimiter, Leases, ManualClock, Quota};

    #[test]
    fn a_change_drops_the_slots_leases_and_keeps_the_level() {
        let q: Quota = "1000/ms burst 1000".parse().unwrap();
        let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
        // Slot 0 takes a lease of 250: the bucket has 750 left.
        assert_eq!(lim.check_n_at_slot(0, 1, 0).unwrap().remaining(), 750);
        lim.set_quota("1000/ms burst 2000".parse().unwrap());
        assert_eq!(lim.lease_units(), 500);
        // The lease's 249 units are gone; the bucket's 750 available stay 750.
        let admitted: u64 =
            (0..2000).map(|_| u64::from(lim.check_n_at_slot(0, 1, 0).is_ok())).sum();
        assert_eq!(admitted, 750);
    }
}
