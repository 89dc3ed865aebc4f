//! A keyed check: find the key's slot (inserting the key if it is new), then run the GCRA step on
//! the slot's state word; or, for a key with no slot, the overflow policy.

use super::slot::{Found, Tat};
use super::{millis, KeyedLimiter};
use crate::bucket;
use crate::clock::Clock;
use crate::decision::{Admitted, Denied};
use crate::gcra::{Rate, Scale};
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
        let taken = self.take(key, now, now_ns, n, 0, true)?;
        Ok(Admitted::from_units(taken.state.saturating_sub(taken.now), taken.scale))
    }

    /// Takes a request of cost `n` at `now` (units; `now_ns` its reading) from `key`'s bucket,
    /// allowed to wait `max_wait` units (see [`bucket::take`]), inserting the key if it needs a
    /// slot: the state left and the slot that holds it (`None` for an untracked key's peek, and
    /// for a key served by the shared overflow bucket). A key with no room is served by that
    /// bucket only if `shared_overflow` (meters: the shared bucket keeps no places).
    pub(crate) fn take<Q>(
        &self,
        key: &Q,
        now: u64,
        now_ns: u64,
        n: u64,
        max_wait: u64,
        shared_overflow: bool,
    ) -> Result<Taken<'_, K>, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let hash = self.table.hash(key);
        let mut insert = false;
        loop {
            let found = if insert {
                self.table.find_or_insert(key, hash, now, millis(now_ns))
            } else {
                self.table.find(key, hash)
            };
            match found {
                Some(found) => match take_from_slot(&self.rate, &found, now, now_ns, n, max_wait) {
                    Ok(Ok(state)) => {
                        let scale = self.rate.scale();
                        return Ok(Taken { state, now, scale, slot: Some(found) });
                    }
                    Ok(Err(denied)) => return Err(denied),
                    Err(Tat::Sealed) => insert = true,
                    Err(_) => {}
                },
                // Not tracked: a bucket that takes nothing needs no slot.
                None if n == 0 || n > self.quota.burst() || insert => {
                    return self.untracked(n, insert, now, now_ns, shared_overflow);
                }
                None => insert = true,
            }
        }
    }

    /// The answer for a key the table does not hold: a peek sees an empty bucket, a cost above
    /// the burst never conforms, and a key with no room (`overflowed`) gets the overflow policy.
    #[cold]
    fn untracked(
        &self,
        n: u64,
        overflowed: bool,
        now: u64,
        now_ns: u64,
        shared_overflow: bool,
    ) -> Result<Taken<'_, K>, Denied> {
        let scale = self.rate.scale();
        if n == 0 || n > self.quota.burst() {
            // Takes nothing, and needs no slot; but a bucket records the time it saw, and this
            // key's bucket, whenever it gets one, starts no earlier.
            self.table.note_seen(now);
        }
        if n == 0 {
            Ok(Taken { state: now, now, scale, slot: None })
        } else if n > self.quota.burst() {
            Err(Denied::from_units(0, None, scale))
        } else {
            debug_assert!(overflowed);
            let decision = self.overflowed(n, now_ns, shared_overflow);
            self.overflow.count(decision.is_ok());
            decision
        }
    }

    /// A request of cost `n` (within the burst) of a key with no room: the shared overflow
    /// bucket's answer, in its own figures, if `shared_overflow`; a denial otherwise.
    fn overflowed(
        &self,
        n: u64,
        now_ns: u64,
        shared_overflow: bool,
    ) -> Result<Taken<'_, K>, Denied> {
        let shared = self.overflow.shared.as_ref().filter(|shared| n <= shared.burst);
        if let Some(shared) = shared.filter(|_| shared_overflow) {
            let now = shared.rate.units_at(now_ns);
            let scale = shared.rate.scale();
            // The shared bucket's slot never changes key, so it is never moved or sealed.
            if let Ok(decision) = take_from_slot(&shared.rate, &shared.slot(), now, now_ns, n, 0) {
                return decision.map(|state| Taken { state, now, scale, slot: None });
            }
        }
        let scale = self.rate.scale();
        Err(Denied::from_units(scale.tau(), Some(scale.interval()), scale))
    }
}

/// A request taken from a key's bucket: the state it left and the time it was taken at, in the
/// units of the bucket that served it (the key's, or the shared overflow bucket's), that bucket's
/// scale, and the slot holding the key's bucket (`None` when the key is not tracked and the
/// request took nothing, or when the shared overflow bucket served it).
pub(crate) struct Taken<'a, K> {
    pub(crate) state: u64,
    pub(crate) now: u64,
    pub(crate) scale: Scale,
    pub(crate) slot: Option<Found<'a, K>>,
}

/// [`KeyedLimiter::take`] on a found slot, with `now` in `rate`'s units, by the bucket protocol;
/// why not, if the slot may no longer hold the key.
#[inline]
fn take_from_slot<K>(
    rate: &Rate,
    found: &Found<'_, K>,
    now: u64,
    now_ns: u64,
    n: u64,
    max_wait: u64,
) -> Result<Result<u64, Denied>, Tat> {
    match bucket::take(found, rate, now, n, max_wait)? {
        Ok(state) => {
            if n > 0 {
                found.mark_used(millis(now_ns));
            }
            Ok(Ok(state))
        }
        Err(refused) => {
            let backlog = refused.tat.saturating_sub(now);
            Ok(Err(Denied::from_units(backlog, refused.why.wait(), rate.scale())))
        }
    }
}
