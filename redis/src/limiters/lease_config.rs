//! [`LeaseConfig`]: how large the leases of hot keys grow, and for how many keys.

use std::time::Duration;

/// Leases for hot keys: a process takes up to `max_units` units beyond a request in the same
/// round trip, and serves later requests for that key from them without a round trip.
///
/// Leased units are charged in Redis when they are taken, so no unit is ever handed out twice;
/// each leased unit must be used before its place in the bucket's schedule has passed (unit `u`
/// of a lease by `u` emission intervals after the lease's first), or it is dropped, so the fleet
/// keeps exactly the limit's bound `burst + rate x window`. The price is fairness: a process may
/// hold up to `max_units` units that others cannot have, and units it cannot use in time are lost
/// (the *shortfall*). Lease sizes adapt: a key whose lease was used up gets a lease twice as large
/// (up to `max_units`); a key asked for again soon (`hot_within`) gets twice what it used of its
/// last lease, at least 1; other keys get what they used, so cold keys take no leases at all.
///
/// ```
/// use leakgate_redis::LeaseConfig;
/// let leases = LeaseConfig::new(64).max_keys(256);
/// assert_eq!((leases.max_units(), leases.key_capacity()), (64, 256));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    max_units: u64,
    max_keys: usize,
    hot_within: Duration,
}

impl LeaseConfig {
    /// Leases of at most `max_units` units each, for up to 1024 keys at once.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(32).max_units(), 32);
    /// ```
    pub fn new(max_units: u64) -> LeaseConfig {
        LeaseConfig { max_units, max_keys: 1024, hot_within: Duration::from_millis(10) }
    }

    /// A key asked for again within this long of its last round trip is hot, and its leases
    /// grow (default 10 ms). Keys asked for less often take no leases, so they waste no units.
    ///
    /// ```
    /// use std::time::Duration;
    /// let leases = leakgate_redis::LeaseConfig::new(8).hot_within(Duration::from_millis(50));
    /// # let _ = leases;
    /// ```
    pub fn hot_within(self, window: Duration) -> LeaseConfig {
        LeaseConfig { hot_within: window, ..self }
    }

    /// `hot_within` in ns.
    pub(crate) fn hot_ns(&self) -> u64 {
        u64::try_from(self.hot_within.as_nanos()).unwrap_or(u64::MAX)
    }

    /// How many keys may hold a lease at once; other keys go to Redis on every call.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(8).max_keys(10).key_capacity(), 10);
    /// ```
    pub fn max_keys(self, max_keys: usize) -> LeaseConfig {
        LeaseConfig { max_keys, ..self }
    }

    /// The largest lease, in units.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(8).max_units(), 8);
    /// ```
    pub fn max_units(&self) -> u64 {
        self.max_units
    }

    /// How many keys may hold a lease at once.
    ///
    /// ```
    /// assert_eq!(leakgate_redis::LeaseConfig::new(8).key_capacity(), 1024);
    /// ```
    pub fn key_capacity(&self) -> usize {
        self.max_keys
    }
}
