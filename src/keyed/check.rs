//! A keyed check: find the key's slot (inserting the key if it is new), then run the GCRA step on
//! the slot's state word; or, for a key with no slot, the overflow policy.

use super::group::SEALED;
use super::slot::{Found, Tat};
use super::{millis, KeyedLimiter};
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::decision::{Admitted, Denied};
use crate::gcra::Rate;
use std::borrow::Borrow;
use std::hash::Hash;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Checks one unit for `key`: `check_n(key, 1)`.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// assert!(keyed.check(&"10.0.0.1".parse::<std::net::IpAddr>().unwrap()).is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check<Q>(&self, key: &Q) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.check_n(key, 1)
    }

    /// Checks a request of cost `n` for `key`, with exactly the meaning of
    /// [`Limiter::check_n`](crate::Limiter::check_n). A peek (`n = 0`) and a cost above the burst
    /// never insert a key.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// assert_eq!(keyed.check_n(&7u64, 4).unwrap().remaining(), 6);
    /// assert_eq!(keyed.check_n(&8u64, 0).unwrap().remaining(), 10);
    /// assert_eq!(keyed.check_n(&7u64, 11).unwrap_err().retry_after(), None);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check_n<Q>(&self, key: &Q, n: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let now_ns = self.clock.now_ns();
        let now = self.rate.units_at(now_ns);
        let hash = self.table.hash(key);
        let mut insert = false;
        loop {
            let found = if insert {
                self.table.find_or_insert(key, hash, now, millis(now_ns))
            } else {
                self.table.find(key, hash)
            };
            match found {
                Some(found) => match self.check_slot(&self.rate, &found, now, now_ns, n) {
                    Ok(decision) => return decision,
                    Err(Tat::Sealed) => insert = true,
                    Err(_) => {}
                },
                // Not tracked: a bucket that takes nothing needs no slot.
                None if n == 0 || n > self.quota.burst() || insert => {
                    return self.untracked(n, insert, now_ns);
                }
                None => insert = true,
            }
        }
    }

    /// `check_n` against a found slot, with `now` in `rate`'s units; why not, if the slot may no
    /// longer hold the key.
    #[inline]
    fn check_slot(
        &self,
        rate: &Rate,
        found: &Found<'_, K>,
        now: u64,
        now_ns: u64,
        n: u64,
    ) -> Result<Result<Admitted, Denied>, Tat> {
        let scale = rate.scale();
        let backoff = Backoff::new();
        let mut seen = None;
        loop {
            let tat = match found.tat(seen) {
                Tat::Current(tat) => tat,
                moved => return Err(moved),
            };
            let decision = match rate.admit(tat, now, n, 0) {
                Ok(new_tat) if new_tat == tat => {
                    Ok(Admitted::from_units(tat.saturating_sub(now), scale))
                }
                Ok(new_tat) if new_tat != SEALED => match found.cas_tat(tat, new_tat) {
                    Ok(()) => {
                        found.mark_used(millis(now_ns));
                        Ok(Admitted::from_units(new_tat - now, scale))
                    }
                    Err(actual) => {
                        seen = Some(actual);
                        backoff.spin();
                        continue;
                    }
                },
                Ok(_) => Err(Denied::from_units(tat.saturating_sub(now), None, scale)),
                Err(refusal) => {
                    Err(Denied::from_units(tat.saturating_sub(now), refusal.wait(), scale))
                }
            };
            return Ok(decision);
        }
    }

    /// The answer for a key the table does not hold: a peek sees an empty bucket, a cost above
    /// the burst never conforms, and a key with no room (`overflowed`) gets the overflow policy.
    #[cold]
    fn untracked(&self, n: u64, overflowed: bool, now_ns: u64) -> Result<Admitted, Denied> {
        let scale = self.rate.scale();
        if n == 0 {
            Ok(Admitted::from_units(0, scale))
        } else if n > self.quota.burst() {
            Err(Denied::from_units(0, None, scale))
        } else {
            debug_assert!(overflowed);
            let decision = self.overflowed(n, now_ns);
            self.overflow.count(decision.is_ok());
            decision
        }
    }

    /// A request of cost `n` (within the burst) of a key with no room.
    fn overflowed(&self, n: u64, now_ns: u64) -> Result<Admitted, Denied> {
        if let Some(shared) = self.overflow.shared.as_ref().filter(|shared| n <= shared.burst) {
            let now = shared.rate.units_at(now_ns);
            // The shared bucket's slot never changes key, so it is never moved or sealed.
            if let Ok(decision) = self.check_slot(&shared.rate, &shared.slot(), now, now_ns, n) {
                return decision;
            }
        }
        let scale = self.rate.scale();
        Err(Denied::from_units(scale.tau(), Some(scale.interval()), scale))
    }
}
