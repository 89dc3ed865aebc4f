//! Queue mode per key: a [`KeyedLimiter`]'s reservations and waits, with exactly the meaning of
//! [`Limiter`](crate::Limiter)'s for each key's bucket.

use crate::bucket;
use crate::clock::Clock;
use crate::decision::Denied;
use crate::keyed::KeyedLimiter;
use crate::queue::reservation::{duration_ns, Lane, Place};
use crate::queue::{Reservation, WaitPolicy};
use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> Lane for KeyedLimiter<K, C> {
    fn clock_ns(&self) -> u64 {
        self.clock().now_ns()
    }

    /// Undoes the place in the slot it was granted in. If the slot has since been given to another
    /// key, the undo's CAS cannot succeed: a slot's next key starts above every value the slot held
    /// (see `keyed/group.rs`), and the place is long due anyway (a slot is reused only once idle).
    fn give_back(&self, place: &Place) -> bool {
        let Some((group, slot, version)) = place.slot else { return false };
        let Some(found) = self.table().found_at(group, slot, version) else { return false };
        bucket::undo(&found, place.tat_after, place.cost)
    }
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// Reserves one unit for `key`: `reserve_n(key, 1, max_wait)`.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(2)?.with_burst(1)?, ManualClock::new());
    /// assert!(keyed.reserve("alice", Duration::ZERO).unwrap().is_ready());
    /// assert_eq!(keyed.reserve("alice", Duration::MAX).unwrap().delay(), Duration::from_millis(500));
    /// assert!(keyed.reserve("bob", Duration::ZERO).unwrap().is_ready());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve<Q>(&self, key: &Q, max_wait: Duration) -> Result<Reservation<'_>, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.reserve_n(key, 1, max_wait)
    }

    /// Reserves `n` units of `key`'s bucket, with exactly the meaning of
    /// [`Limiter::reserve_n`](crate::Limiter::reserve_n): FIFO per key, at most `max_wait` ahead,
    /// cancelled as a limiter's reservations are. A key that finds no room in the table is denied
    /// (the shared overflow bucket, if any, serves meters only).
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(1)?.with_burst(1)?, ManualClock::new());
    /// keyed.check(&7u64).unwrap();
    /// let first = keyed.reserve_n(&7u64, 1, Duration::MAX).unwrap(); // due in 1 s
    /// let second = keyed.reserve_n(&7u64, 1, Duration::MAX).unwrap(); // due in 2 s
    /// assert!(!first.cancel(), "the second stands on it");
    /// assert!(second.cancel());
    /// assert!(keyed.reserve_n(&7u64, 1, Duration::from_millis(999)).is_err());
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve_n<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'_>, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let place = self.place(key, n, max_wait)?;
        Ok(Reservation::borrowed(self, place))
    }

    /// [`reserve_n`](KeyedLimiter::reserve_n) at the time `now_ns` the caller gives
    /// (nanoseconds of this limiter's clock, as for
    /// [`check_n_at`](KeyedLimiter::check_n_at)).
    ///
    /// ```
    /// # use leakgate::{Clock, KeyedLimiter, ManualClock, Quota};
    /// use std::time::Duration;
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(4)?.with_burst(1)?, ManualClock::new());
    /// let now = keyed.clock().now_ns();
    /// keyed.check_at("alice", now).unwrap();
    /// let r = keyed.reserve_n_at("alice", 1, Duration::MAX, now).unwrap();
    /// assert_eq!(r.ready_at(), Duration::from_millis(250));
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve_n_at<Q>(
        &self,
        key: &Q,
        n: u64,
        max_wait: Duration,
        now_ns: u64,
    ) -> Result<Reservation<'_>, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let place = self.place_at(key, n, max_wait, now_ns)?;
        Ok(Reservation::borrowed(self, place))
    }

    /// [`reserve_n`](KeyedLimiter::reserve_n) for a keyed limiter in an `Arc`: the reservation
    /// holds a clone of the `Arc`, so it can move to another thread or task.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let keyed = Arc::new(KeyedLimiter::with_clock(Quota::per_second(2)?, ManualClock::new()));
    /// let r = keyed.reserve_n_owned("alice", 1, Duration::ZERO).unwrap();
    /// std::thread::spawn(move || r.wait()).join().unwrap();
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn reserve_n_owned<Q>(
        self: &Arc<Self>,
        key: &Q,
        n: u64,
        max_wait: Duration,
    ) -> Result<Reservation<'static>, Denied>
    where
        K: Borrow<Q> + 'static,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
        C: 'static,
    {
        let place = self.place(key, n, max_wait)?;
        Ok(Reservation::shared(self.clone(), place))
    }

    /// Waits as long as it takes for one unit of `key`: `wait_n(key, 1)`.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// let keyed = KeyedLimiter::new(Quota::per_second(10_000)?.with_burst(1)?);
    /// keyed.wait("alice")?;
    /// keyed.wait("alice")?; // about 100 µs later
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait<Q>(&self, key: &Q) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.wait_n(key, 1)
    }

    /// Waits as long as it takes for `n` units of `key`, then returns having taken them (see
    /// [`Limiter::wait_n`](crate::Limiter::wait_n)). Denied only when `n` is above the burst, or
    /// when the key finds no room in the table.
    ///
    /// This blocks the thread. In async code, `until_ready_n(&key, n).await` waits without
    /// blocking (it needs the crate feature `tokio`).
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// let keyed = KeyedLimiter::new(Quota::per_second(10_000)?.with_burst(1)?);
    /// keyed.wait_n(&1u32, 1)?;
    /// keyed.wait_n(&2u32, 1)?; // another key: at once
    /// assert!(keyed.wait_n(&1u32, 2).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_n<Q>(&self, key: &Q, n: u64) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.wait_n_timeout(key, n, Duration::MAX)
    }

    /// Waits for `n` units of `key` if they can be had within `max_wait`; otherwise returns at
    /// once, denied, having taken nothing.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// use std::time::Duration;
    /// let keyed = KeyedLimiter::new(Quota::per_hour(1)?);
    /// keyed.wait_n_timeout("alice", 1, Duration::ZERO)?;
    /// assert!(keyed.wait_n_timeout("alice", 1, Duration::from_millis(1)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_n_timeout<Q>(&self, key: &Q, n: u64, max_wait: Duration) -> Result<(), Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.reserve_n(key, n, max_wait).map(|r| r.wait_with(WaitPolicy::default()))
    }

    /// Takes `n` units of `key` allowing `max_wait`, and says where they are.
    fn place<Q>(&self, key: &Q, n: u64, max_wait: Duration) -> Result<Place, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        self.place_at(key, n, max_wait, self.clock().now_ns())
    }

    /// Takes `n` units of `key` at `now_ns` allowing `max_wait`, and says where they are.
    fn place_at<Q>(&self, key: &Q, n: u64, max_wait: Duration, now_ns: u64) -> Result<Place, Denied>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
    {
        let hash = self.table().hash(key);
        // The shared overflow bucket keeps no places: a key with no room is denied here.
        self.take_in_force(
            key,
            hash,
            (now_ns, n, duration_ns(max_wait)),
            false,
            |rate, now, taken| {
                let slot = taken.slot.map(|found| found.locator());
                Place::granted_in(rate, now, n, taken.state, slot)
            },
        )
    }
}
