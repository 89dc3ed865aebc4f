//! How many keys a [`KeyedLimiter`](crate::KeyedLimiter) holds, how its table is laid out for
//! that, and the error for a capacity it cannot have.

use std::fmt;

/// The fewest slots a shard has, when the table has that many: enough that the keys a shard gets
/// by chance rarely outnumber its slots (at 4,096 slots and 95% full, by 3.3 standard deviations).
const SHARD_SLOTS: usize = 4096;

/// The default number of keys a [`KeyedLimiter`](crate::KeyedLimiter) holds at once: 2^18 =
/// 262,144.
pub const DEFAULT_CAPACITY: usize = 1 << 18;

/// The largest capacity a [`KeyedLimiter`](crate::KeyedLimiter) can have: 2^30 keys (about a
/// billion; some 40 GB of memory once every slot is in use).
///
/// ```
/// use leakgate::{KeyedLimiter, Quota, MAX_CAPACITY};
/// let q = Quota::per_second(1)?;
/// assert!(KeyedLimiter::<u64>::try_with_capacity(q, MAX_CAPACITY).is_ok());
/// assert!(KeyedLimiter::<u64>::try_with_capacity(q, MAX_CAPACITY + 1).is_err());
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
pub const MAX_CAPACITY: usize = 1 << 30;

/// The capacity asked of [`KeyedLimiter::try_with_capacity`](crate::KeyedLimiter::try_with_capacity)
/// is above [`MAX_CAPACITY`].
///
/// ```
/// use leakgate::{KeyedLimiter, Quota};
/// let err = KeyedLimiter::<u64>::try_with_capacity(Quota::per_second(1)?, usize::MAX).unwrap_err();
/// assert_eq!(err.requested(), usize::MAX);
/// println!("{err}");
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityError {
    requested: usize,
}

impl CapacityError {
    /// The capacity that was asked for.
    ///
    /// ```
    /// # use leakgate::{KeyedLimiter, Quota};
    /// let err = KeyedLimiter::<u64>::try_with_capacity(Quota::per_second(1)?, 1 << 40).unwrap_err();
    /// assert_eq!(err.requested(), 1 << 40);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn requested(&self) -> usize {
        self.requested
    }
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a keyed limiter holds at most {MAX_CAPACITY} keys, but a capacity of {} was asked for",
            self.requested
        )
    }
}

impl std::error::Error for CapacityError {}

/// `capacity`, or an error above [`MAX_CAPACITY`].
pub(crate) fn at_most_max(capacity: usize) -> Result<usize, CapacityError> {
    if capacity > MAX_CAPACITY {
        Err(CapacityError { requested: capacity })
    } else {
        Ok(capacity)
    }
}

/// The largest capacity given headroom (see [`slots`]): 2^16 = 65,536 keys.
pub(crate) const HEADROOM_UP_TO: usize = 1 << 16;

/// The slots of a table for `capacity` keys: up to [`HEADROOM_UP_TO`] keys, the capacity and a
/// quarter more, rounded up to a power of two; above it, the capacity rounded up to a power of
/// two; at least 64 and at most [`MAX_CAPACITY`] either way.
///
/// A small table that its keys fill to 97.7% (1,000 keys in 1,024 slots) sends its lookups on
/// long probes whose length a processor cannot predict: keyed checks of 1,000 keys in random
/// order ran at 1.10-1.22x governor's in 1,024 slots, 0.95-1.03x in 2,048. The headroom costs
/// memory only where a table is small (at most 2^17 slots, 4.3 MB for `u64` keys); a large table
/// keeps its 1 to 2 slots a key, so a million keys still take 34.6 bytes each.
pub(crate) fn slots(capacity: usize) -> usize {
    let wanted = if capacity <= HEADROOM_UP_TO { capacity + capacity / 4 } else { capacity };
    wanted.clamp(64, MAX_CAPACITY).next_power_of_two()
}

/// The table for `capacity` keys: `(shards, slots per shard)`, with `shards * slots per shard`
/// the table's [`slots`].
pub(crate) fn layout(capacity: usize) -> (usize, usize) {
    let slots = slots(capacity);
    // Enough shards that threads inserting different keys rarely meet (up to 64), but each of
    // at least `SHARD_SLOTS`: a key's windows lie in its home shard, which its hash picks with no
    // second choice, so in a small shard of a nearly full table chance alone puts more keys in a
    // shard than it has slots, and those go past their windows (slower lookups, and inserts under
    // the table's spill lock). 1,000 keys in 1,024 slots: 64 shards of 16 slots sent 11-14% of
    // the lookups past their windows; one shard, 0.1-0.5%.
    let shards = (slots / SHARD_SLOTS).clamp(1, 64);
    (shards, slots / shards)
}
