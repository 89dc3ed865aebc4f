//! Who is close to their limit: a snapshot of the tracked keys, taken without blocking anyone.

use super::KeyedLimiter;
use crate::clock::Clock;
use std::collections::hash_map::{Entry, HashMap};
use std::hash::Hash;
use std::time::Duration;

/// One tracked key's bucket, as seen by [`KeyedLimiter::snapshot`].
///
/// ```
/// use leakgate::{KeyedLimiter, ManualClock, Quota};
/// let keyed = KeyedLimiter::with_clock(Quota::per_second(4)?, ManualClock::new());
/// keyed.check_n(&"alice", 3).unwrap();
/// let alice = keyed.snapshot().into_iter().find(|s| s.key == "alice").unwrap();
/// assert_eq!(alice.remaining, 1);
/// assert_eq!(alice.fill, 0.75);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct KeyState<K> {
    /// The key.
    pub key: K,
    /// Units that would conform right now.
    pub remaining: u64,
    /// How full the bucket is: 0.0 empty, 1.0 full (a full burst is in use).
    pub fill: f64,
    /// Time until the bucket is empty again.
    pub reset_after: Duration,
    /// Time since the key's last admitted request, in whole milliseconds of the clock (idle
    /// times wrap after about 49.7 days; a bucket idle that long is usually reclaimed first).
    pub since_last_use: Duration,
}

impl<K: Hash + Eq + Clone + Send + Sync, C: Clock> KeyedLimiter<K, C> {
    /// The keys tracked now, with their levels, each key once. Takes no lock: checks and inserts
    /// go on while it runs, so it is a consistent view of each bucket, not of the whole table at
    /// one instant. Allocates (it is not for the hot path).
    ///
    /// ```
    /// use leakgate::{KeyedLimiter, ManualClock, Quota};
    /// let keyed = KeyedLimiter::with_clock(Quota::per_second(10)?, ManualClock::new());
    /// for ip in [1u32, 2, 2, 3] {
    ///     keyed.check(&ip).unwrap();
    /// }
    /// let mut busiest = keyed.snapshot();
    /// busiest.sort_by(|a, b| b.fill.total_cmp(&a.fill));
    /// assert_eq!(busiest[0].key, 2);
    /// # Ok::<(), leakgate::QuotaError>(())
    /// ```
    pub fn snapshot(&self) -> Vec<KeyState<K>> {
        loop {
            let (epoch, states) = self.read_states();
            // A change of quota during the walk may have rewritten the rate read for groups
            // behind: read again (changes are rare; each walk is short).
            if self.rates.epoch() == epoch {
                return one_reading_per_key(states);
            }
        }
    }

    /// One walk of the table: every slot's reading, and the epoch the rates were read at.
    fn read_states(&self) -> (u64, Vec<KeyState<K>>) {
        let now_ns = self.clock.now_ns();
        let now_ms = super::millis(now_ns);
        let (epoch, rate) = self.rates.read();
        // A group not yet converted to the quota in force is in the one before (`requota.rs`).
        let before = self.rates.previous(epoch).unwrap_or(rate);
        let mut states = Vec::new();
        self.table.for_each(|key, tat, used_ms, group_epoch| {
            // A sealed slot's key is idle and being replaced by another key.
            if tat == super::group::SEALED {
                return;
            }
            let rate = if group_epoch == epoch as u32 { &rate } else { &before };
            let (now, scale) = (rate.units_at(now_ns), rate.scale());
            let backlog = tat.saturating_sub(now);
            states.push(KeyState {
                key,
                remaining: scale.remaining(backlog),
                fill: (backlog as f64 / scale.tau() as f64).min(1.0),
                reset_after: Duration::from_nanos(scale.units_to_ns(backlog)),
                since_last_use: Duration::from_millis(u64::from(now_ms.wrapping_sub(used_ms))),
            });
        });
        (epoch, states)
    }
}

/// Keeps one reading of each key. A key given a new slot while the walk runs (its old bucket
/// idle and reclaimed, its new one in a slot read later, or the other way round) is read in both;
/// the fuller reading is kept, the other being the idle bucket it left.
fn one_reading_per_key<K: Hash + Eq + Clone>(states: Vec<KeyState<K>>) -> Vec<KeyState<K>> {
    let mut index: HashMap<K, usize> = HashMap::with_capacity(states.len());
    let mut unique: Vec<KeyState<K>> = Vec::with_capacity(states.len());
    for state in states {
        match index.entry(state.key.clone()) {
            Entry::Occupied(seen) => {
                let kept = &mut unique[*seen.get()];
                if state.reset_after > kept.reset_after {
                    *kept = state;
                }
            }
            Entry::Vacant(new) => {
                new.insert(unique.len());
                unique.push(state);
            }
        }
    }
    unique
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(key: u32, reset_ms: u64) -> KeyState<u32> {
        KeyState {
            key,
            remaining: 0,
            fill: 0.0,
            reset_after: Duration::from_millis(reset_ms),
            since_last_use: Duration::ZERO,
        }
    }

    #[test]
    fn a_key_read_twice_keeps_its_fuller_reading_in_its_first_place() {
        let states =
            vec![reading(1, 0), reading(2, 5), reading(1, 7), reading(3, 1), reading(2, 3)];
        let kept = one_reading_per_key(states);
        assert_eq!(kept, vec![reading(1, 7), reading(2, 5), reading(3, 1)]);
    }
}
