//! A keyed check: find the key's slot (inserting the key if it is new), then run the GCRA step on
//! the slot's state word; or, for a key with no slot, the overflow policy.

use super::request::{Arrival, Ask, Changed, FirstState};
use super::requota::Conversion;
use super::slot::{Found, Tat};
use super::{millis, KeyedLimiter};
use crate::bucket;
use crate::clock::Clock;
use crate::decision::{Admitted, Denied};
use crate::gcra::{Rate, Scale};
use crate::sync;
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
        let hash = self.touch_key(key);
        self.check_hashed_at(key, hash, n, self.clock.now_ns())
    }

    /// Checks one unit for `key` at a time the caller gives: `check_n_at(key, 1, now_ns)`.
    ///
    /// ```
    /// # use leakgate::{Clock, KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(1)?, ManualClock::new());
    /// let now = keyed.clock().now_ns();
    /// assert!(keyed.check_at(&7u64, now).is_ok());
    /// assert!(keyed.check_at(&7u64, now).is_err());
    /// assert!(keyed.check_at(&8u64, now).is_ok());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    #[inline]
    pub fn check_at<Q>(&self, key: &Q, now_ns: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.check_n_at(key, 1, now_ns)
    }

    /// [`check_n`](KeyedLimiter::check_n) at the time `now_ns` the caller gives instead of
    /// reading the clock: nanoseconds of this limiter's clock, as [`Clock::now_ns`] on
    /// [`clock()`](KeyedLimiter::clock) reads them (see
    /// [`Limiter::check_n_at`](crate::Limiter::check_n_at)). For many keys at one time,
    /// [`check_batch_at`](KeyedLimiter::check_batch_at) also fetches their buckets together.
    ///
    /// ```
    /// # use leakgate::{Clock, KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// let now = keyed.clock().now_ns();
    /// assert_eq!(keyed.check_n_at(&"alice", 4, now).unwrap().remaining(), 6);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn check_n_at<Q>(&self, key: &Q, n: u64, now_ns: u64) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let hash = self.touch_key(key);
        self.check_hashed_at(key, hash, n, now_ns)
    }

    /// A check of `key`, whose hash is `hash`, at `now_ns`.
    #[inline(always)]
    pub(crate) fn check_hashed_at<Q>(
        &self,
        key: &Q,
        hash: u64,
        n: u64,
        now_ns: u64,
    ) -> Result<Admitted, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let taken = |_: &Rate, _: u64, taken: &Taken<'_, K>| {
            Admitted::from_units(taken.state.saturating_sub(taken.now), taken.scale)
        };
        self.take_in_force(key, hash, (now_ns, n, 0), true, taken)
    }

    /// Units that would conform right now for `key`, taking nothing: `check_n(key, 0)`'s
    /// `remaining()` (a peek inserts no key, and records the time it saw).
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// keyed.check_n(&"alice", 4).unwrap();
    /// assert_eq!(keyed.peek(&"alice"), 6);
    /// assert_eq!(keyed.peek(&"bob"), 10);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn peek<Q>(&self, key: &Q) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.check_n(key, 0).map_or_else(|denied| denied.remaining(), |ok| ok.remaining())
    }

    /// Takes the `request` `(now_ns, n, max_wait_ns)`: `n` units of `key`'s bucket (hash `hash`)
    /// at the clock reading `now_ns`, allowing `max_wait_ns` of wait, in the rate in force (again on the new rate if the quota changes
    /// meanwhile): `taken` of the rate decided on, the clock in its units and what was taken,
    /// or the denial.
    #[inline(always)]
    pub(crate) fn take_in_force<Q, R>(
        &self,
        key: &Q,
        hash: u64,
        request: (u64, u64, u64),
        shared_overflow: bool,
        taken: impl FnOnce(&Rate, u64, &Taken<'_, K>) -> R,
    ) -> Result<R, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        if self.rates.epoch_first() == 0 {
            let rate = self.rates.first();
            let ask = Ask::plain(rate, 0, request, shared_overflow);
            match self.take_hashed(key, hash, ask) {
                Ok(took) => return Ok(taken(rate, ask.now, &took)),
                Err(declined) if !declined.changed => return Err(declined.denied()),
                Err(_) => {}
            }
        }
        self.take_changed(key, hash, request, shared_overflow, taken)
    }

    /// [`KeyedLimiter::take_in_force`] once the quota was changed: the rate from the cell, again
    /// for as long as the quota changes under the request.
    #[cold]
    #[inline(never)]
    fn take_changed<Q, R>(
        &self,
        key: &Q,
        hash: u64,
        request: (u64, u64, u64),
        shared_overflow: bool,
        taken: impl FnOnce(&Rate, u64, &Taken<'_, K>) -> R,
    ) -> Result<R, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        loop {
            let epoch = self.rates.epoch_first();
            let Some(rate) = self.rates.rate_at(epoch) else { continue };
            let ask = Ask::plain(&rate, epoch, request, shared_overflow);
            match self.take_hashed(key, hash, ask) {
                Ok(took) => return Ok(taken(&rate, ask.now, &took)),
                Err(declined) if !declined.changed => return Err(declined.denied()),
                Err(_) => sync::spin_loop(),
            }
        }
    }

    /// Takes the request `ask` from `key`'s bucket by the bucket protocol (see [`bucket::take`]),
    /// inserting the key if it needs a slot: the state left and the slot that holds it, or why
    /// not. Always inlined into its callers, so that its result stays in registers.
    #[inline(always)]
    pub(crate) fn take<Q>(&self, key: &Q, ask: Ask<'_>) -> Result<Taken<'_, K>, Declined>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.take_hashed(key, self.table.hash(key), ask)
    }

    /// Hashes `key` and asks for the lines of its group (see `Group::touch`): call it before
    /// reading the clock, so they are fetched meanwhile, then [`KeyedLimiter::take_hashed`].
    #[inline(always)]
    pub(crate) fn touch_key<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        let hash = self.table.hash(key);
        self.table.touch(hash);
        hash
    }

    /// [`KeyedLimiter::take`] of a key whose hash is `hash` (from [`KeyedLimiter::touch_key`]).
    /// A denial with `changed` set means the quota changed since `ask` was made: make it again.
    ///
    /// The common case inline: the key found in its group, in the quota in force, and decided
    /// at the first try. Everything else (an insert, a group to convert, a handle gone stale) is
    /// out of line, so that the handle never goes through memory on the way (a handle copied
    /// through the stack cost a store-forwarding stall: 1k keys, 41 -> 49 ns a check).
    #[inline(always)]
    pub(crate) fn take_hashed<Q>(
        &self,
        key: &Q,
        hash: u64,
        ask: Ask<'_>,
    ) -> Result<Taken<'_, K>, Declined>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let Ask { now, now_ns, n, max_wait, rate, epoch, .. } = ask;
        if let Some(found) = self.table.find(key, hash) {
            if found.epoch() == epoch as u32 {
                match bucket::take(&found, rate, now, n, max_wait) {
                    Ok(Ok(state)) => {
                        if n > 0 {
                            found.mark_used(millis(now_ns));
                        }
                        let scale = rate.scale();
                        return Ok(Taken { state, now, scale, slot: Some(found) });
                    }
                    Ok(Err(refused)) => {
                        return Err(Declined::of(refused, now, rate.scale()));
                    }
                    Err(_) => {}
                }
            }
        }
        self.take_slow(key, hash, ask)
    }

    /// The rest of [`KeyedLimiter::take_hashed`], from the start: a loop over finding the key
    /// (inserting it when it needs a slot), bringing its group into the quota in force, and
    /// deciding.
    #[cold]
    #[inline(never)]
    fn take_slow<Q>(&self, key: &Q, hash: u64, ask: Ask<'_>) -> Result<Taken<'_, K>, Declined>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let Ask { now, now_ns, n, max_wait, rate, epoch, .. } = ask;
        let mut insert = false;
        loop {
            let found = if insert {
                self.find_or_insert(key, hash, (epoch, rate), (now, now_ns), ask.start)?
            } else {
                self.table.find(key, hash)
            };
            match found {
                Some(found) if found.epoch() != epoch as u32 => {
                    // Cold, and given only the slot's place: the handle stays in registers.
                    let at = found.locator().0;
                    self.catch_up(at, (epoch, rate), (now, now_ns))?;
                }
                Some(found) => match bucket::take(&found, rate, now, n, max_wait) {
                    Ok(Ok(state)) => {
                        if n > 0 {
                            found.mark_used(millis(now_ns));
                        }
                        let scale = rate.scale();
                        return Ok(Taken { state, now, scale, slot: Some(found) });
                    }
                    Ok(Err(refused)) => {
                        return Err(Declined::of(refused, now, rate.scale()));
                    }
                    Err(Tat::Sealed) => insert = true,
                    Err(_) => {}
                },
                // Not tracked: a bucket that takes nothing needs no slot.
                None if n == 0 || n > rate.burst() || insert => {
                    return self.untracked(n, insert, (now, now_ns, rate), ask.shared_overflow);
                }
                None => insert = true,
            }
        }
    }

    /// [`Table::find_or_insert`](super::table::Table) for `ask`, in its quota (see
    /// `requota.rs`); `Err` when the quota changed since `ask` was made.
    #[cold]
    #[inline(never)]
    fn find_or_insert<Q>(
        &self,
        key: &Q,
        hash: u64,
        (epoch, rate): (u64, &Rate),
        (now, now_ns): (u64, u64),
        start: &dyn Fn() -> FirstState,
    ) -> Result<Option<Found<'_, K>>, Declined>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let conversion = Conversion::new(&self.rates, epoch, *rate, self.table.changed_at());
        let new = Arrival { key, hash, now_ns, now, rate: Some(rate), start, epoch: &conversion };
        self.table.find_or_insert(&new).map_err(|Changed| Declined::changed(now, rate.scale()))
    }

    /// A key found in a group whose states are not in `ask`'s quota: the group is behind the
    /// quota in force (converted here, under its shard's lock), or the quota changed since `ask`
    /// was made (`Err`).
    #[cold]
    #[inline(never)]
    fn catch_up(
        &self,
        group: usize,
        (epoch, rate): (u64, &Rate),
        (now, _): (u64, u64),
    ) -> Result<(), Declined> {
        if self.rates.epoch_first() != epoch {
            return Err(Declined::changed(now, rate.scale()));
        }
        let _shard = sync::lock(&self.table.shards[self.table.shard_of(group)]);
        let conversion = Conversion::new(&self.rates, epoch, *rate, self.table.changed_at());
        self.table.convert_group(group, &conversion);
        Ok(())
    }

    /// The answer for a key the table does not hold: a peek sees an empty bucket, a cost above
    /// the burst never conforms, and a key with no room (`overflowed`) gets the overflow policy.
    #[cold]
    fn untracked(
        &self,
        n: u64,
        overflowed: bool,
        (now, now_ns, rate): (u64, u64, &Rate),
        shared_overflow: bool,
    ) -> Result<Taken<'_, K>, Declined> {
        let scale = rate.scale();
        if n == 0 || n > rate.burst() {
            // Takes nothing, and needs no slot; but a bucket records the time it saw, and this
            // key's bucket, whenever it gets one, starts no earlier.
            self.table.note_seen(now_ns);
        }
        if n == 0 {
            // A bucket would open no fuller than the changes of quota left an idle one (a peek
            // racing a change may read the bound of the other quota: clamped to a bucket's range,
            // it reports, and takes, nothing wrong but that peek's figures).
            let fresh = self.table.fresh().min(now.saturating_add(scale.tau()));
            Ok(Taken { state: now.max(fresh), now, scale, slot: None })
        } else if n > rate.burst() {
            Err(Declined { tat: now, now, wait: None, scale, changed: false })
        } else {
            debug_assert!(overflowed);
            let decision = self.overflowed(n, (now, now_ns, rate), shared_overflow);
            self.overflow.count(decision.is_ok());
            decision
        }
    }

    /// A request of cost `n` (within the burst) of a key with no room at `now` (units of the
    /// keys' rate): the shared overflow bucket's answer, in its own units, if `shared_overflow`;
    /// a denial as from a full bucket otherwise.
    fn overflowed(
        &self,
        n: u64,
        (now, now_ns, rate): (u64, u64, &Rate),
        shared_overflow: bool,
    ) -> Result<Taken<'_, K>, Declined> {
        let shared = self.overflow.shared.as_ref().filter(|shared| n <= shared.burst);
        if let Some(shared) = shared.filter(|_| shared_overflow) {
            let now = shared.rate.units_at(now_ns);
            let scale = shared.rate.scale();
            // The shared bucket's slot never changes key, so it is never moved or sealed.
            match bucket::take(&shared.slot(), &shared.rate, now, n, 0) {
                Ok(Ok(state)) => return Ok(Taken { state, now, scale, slot: None }),
                Ok(Err(refused)) => return Err(Declined::of(refused, now, scale)),
                Err(_) => {}
            }
        }
        let scale = rate.scale();
        let full = now.saturating_add(scale.tau());
        Err(Declined { tat: full, now, wait: Some(scale.interval()), scale, changed: false })
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

/// A request a bucket refused, nothing taken: the state it was judged on and the time, in the
/// units of the bucket that refused (the key's, or the shared overflow bucket's), the wait after
/// which it would conform (`None`: never), and that bucket's scale. A key with no room under
/// [`OverflowPolicy::Deny`](super::OverflowPolicy::Deny) is refused as by a full bucket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Declined {
    pub(crate) tat: u64,
    pub(crate) now: u64,
    pub(crate) wait: Option<u64>,
    pub(crate) scale: Scale,
    /// Not refused: the quota changed since the request was asked (see `requota.rs`), and it
    /// must be asked again on the new rate.
    pub(crate) changed: bool,
}

impl Declined {
    /// A refusal of the bucket protocol at `now`, in the units of a bucket of scale `scale`.
    #[inline]
    fn of(refused: bucket::Refused, now: u64, scale: Scale) -> Self {
        Declined { tat: refused.tat, now, wait: refused.why.wait(), scale, changed: false }
    }

    /// The quota changed under the request (see the field).
    #[cold]
    fn changed(now: u64, scale: Scale) -> Self {
        Declined { tat: now, now, wait: None, scale, changed: true }
    }

    /// The decision a caller sees.
    #[inline]
    pub(crate) fn denied(&self) -> Denied {
        Denied::from_units(self.tat.saturating_sub(self.now), self.wait, self.scale)
    }
}
