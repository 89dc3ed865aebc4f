//! `KeyedLimiter` capacity: a table made for `n` keys holds `n` busy keys at once whatever their
//! hashes (degenerate ones included), refuses absurd capacities with an error from the fallible
//! constructors, and never panics or aborts for them from the others.

use leakgate::{CapacityError, KeyedLimiter, ManualClock, Quota, MAX_CAPACITY};
use proptest::prelude::*;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Duration;

/// A key whose `Hash` writes nothing: every key has the same hash, whatever the table's seed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SameHash(u32);

impl Hash for SameHash {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

/// Each key stays busy for an hour after one request.
fn hourly() -> Quota {
    Quota::per_hour(1).unwrap()
}

/// Offers `keys` to `lim` at a stopped clock; returns how many were admitted.
fn admitted<K: Hash + Eq + Clone + Send + Sync>(
    lim: &KeyedLimiter<K, ManualClock>,
    keys: impl Iterator<Item = K>,
) -> usize {
    keys.filter(|k| lim.check(k).is_ok()).count()
}

#[test]
fn with_capacity_holds_that_many_busy_keys_with_spread_hashes() {
    for capacity in [64usize, 1000, 4096] {
        let lim =
            KeyedLimiter::<u64, _>::with_capacity_and_clock(hourly(), capacity, ManualClock::new());
        let slots = lim.capacity() as u64;
        assert!(slots >= capacity as u64);
        assert_eq!(admitted(&lim, 0..slots), slots as usize, "capacity {capacity}");
        assert_eq!(lim.overflow_denials(), 0);
        // Full now: the next new key is refused, and every key kept its bucket.
        assert!(lim.check(&u64::MAX).is_err());
        assert_eq!(lim.overflow_denials(), 1);
        assert!((0..slots).all(|k| lim.check(&k).is_err()), "a busy key lost its bucket");
        assert_eq!(lim.snapshot().len() as u64, slots);
    }
}

#[test]
fn small_capacities_get_a_quarter_more_slots_and_large_ones_do_not() {
    // (capacity asked, slots): up to 65,536 keys the capacity and a quarter more rounded up to
    // a power of two; above it the capacity rounded up; at least 64 either way.
    let expected = [
        (0usize, 64usize),
        (51, 64),
        (52, 128),
        (800, 1024),
        (819, 1024),
        (820, 2048),
        (1000, 2048),
        (1024, 2048),
        (52_428, 65_536),
        (52_430, 131_072),
        (65_536, 131_072),
        (65_537, 131_072),
        (100_000, 131_072),
        (131_072, 131_072),
        (1_000_000, 1 << 20),
        (1 << 20, 1 << 20),
        (MAX_CAPACITY, MAX_CAPACITY),
    ];
    for (capacity, slots) in expected {
        let lim = KeyedLimiter::<u64>::try_with_capacity(hourly(), capacity).unwrap();
        assert_eq!(lim.capacity(), slots, "capacity {capacity}");
    }
    // Never fewer slots for a larger capacity.
    let mut last = 0;
    for capacity in (0..200_000).step_by(97) {
        let clock = ManualClock::new();
        let slots =
            KeyedLimiter::<u64, _>::with_capacity_and_clock(hourly(), capacity, clock).capacity();
        assert!(slots >= last.max(capacity), "capacity {capacity}: {slots} slots");
        last = slots;
    }
}

#[test]
fn with_capacity_holds_that_many_busy_keys_that_all_hash_alike() {
    let clock = ManualClock::new();
    // 800 keys and a quarter more: 1,024 slots.
    let lim = KeyedLimiter::<SameHash, _>::with_capacity_and_clock(hourly(), 800, clock.clone());
    assert_eq!(lim.capacity(), 1024);
    assert_eq!(admitted(&lim, (0..1024).map(SameHash)), 1024);
    assert!(lim.check(&SameHash(5000)).is_err(), "a full table refuses a new key");
    assert_eq!(lim.overflow_denials(), 1);
    for k in 0..1024 {
        let denied = lim.check(&SameHash(k)).unwrap_err();
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(3600)), "key {k}");
    }
    // An hour later every bucket is empty: new keys take the slots over, and the old ones are
    // forgotten.
    clock.advance(Duration::from_secs(3600) + Duration::from_nanos(1));
    assert_eq!(admitted(&lim, (5000..6024).map(SameHash)), 1024);
    assert!(lim.snapshot().iter().all(|s| s.key.0 >= 5000));
}

#[test]
fn keys_of_a_crowded_window_that_went_further_are_found_again_after_their_window_empties() {
    // 16 shards of 16 slots: a window is a whole shard, so alike keys overflow into the others.
    let clock = ManualClock::new();
    let q = Quota::per_second(1).unwrap();
    let lim = KeyedLimiter::<SameHash, _>::with_layout(q, 16, 16, clock.clone());
    assert_eq!(admitted(&lim, (0..100).map(SameHash)), 100);
    // Keys 0..16 (in the window) go idle and the others are kept busy.
    clock.advance(Duration::from_millis(1500));
    for k in 16..100 {
        assert!(lim.check(&SameHash(k)).is_ok());
    }
    // Every key past the window still finds its own bucket, busy.
    for k in 16..100 {
        assert!(lim.check(&SameHash(k)).is_err(), "key {k} lost its bucket");
    }
    // New keys take the idle window slots first.
    assert_eq!(admitted(&lim, (1000..1016).map(SameHash)), 16);
    assert_eq!(lim.snapshot().len(), 100);
}

/// Regression (issue 24): in a table filled close to its capacity, a lookup walked a few groups
/// on average, and some keys went past their window: at 1,000 keys in 1,024 slots (64 shards of
/// one window of 4 groups) 11-14% of the keys. Each key now has two windows, takes the one with
/// room nearer its start, and shards hold at least 4,096 slots: a few keys in a thousand go past
/// both (0.1-0.5% measured; the hash seed is random, so the bound leaves room).
#[test]
fn nearly_full_tables_keep_their_keys_in_their_windows() {
    for (capacity, keys) in [(1_000usize, 1_000u64), (100_000, 124_000)] {
        let lim =
            KeyedLimiter::<u64, _>::with_capacity_and_clock(hourly(), capacity, ManualClock::new());
        assert_eq!(admitted(&lim, 0..keys), keys as usize);
        let past = lim.model_keys_past_windows();
        println!("{keys} keys in {} slots: {past} past their windows", lim.capacity());
        assert!(past as u64 <= keys * 3 / 100, "{past} of {keys} keys past their windows");
    }
}

#[test]
fn threads_inserting_alike_keys_fill_every_slot_exactly_once() {
    // 64 slots in four shards: alike keys share one window and spill through the other shards
    // under the spill lock, while each thread also offers keys of its own.
    let lim = KeyedLimiter::<SameHash, _>::with_layout(hourly(), 4, 16, ManualClock::new());
    let admitted: Vec<Vec<u32>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4u32)
            .map(|t| {
                let lim = &lim;
                s.spawn(move || {
                    (0..100)
                        .map(|i| i * 4 + t)
                        .filter(|&k| lim.check(&SameHash(k)).is_ok())
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all: Vec<u32> = admitted.into_iter().flatten().collect();
    assert_eq!(all.len(), 64, "every slot taken once");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 64, "no key admitted twice");
    assert_eq!(lim.overflow_denials(), 400 - 64);
    assert!(all.iter().all(|&k| lim.check(&SameHash(k)).is_err()), "each kept its bucket");
    assert_eq!(lim.snapshot().len(), 64);
}

#[test]
fn try_with_capacity_refuses_capacities_above_the_maximum() {
    let q = Quota::per_second(1).unwrap();
    for capacity in [MAX_CAPACITY + 1, 1 << 40, usize::MAX] {
        let err: CapacityError = KeyedLimiter::<u64>::try_with_capacity(q, capacity).unwrap_err();
        assert_eq!(err.requested(), capacity);
        assert!(err.to_string().contains("at most"), "{err}");
    }
    let lim = KeyedLimiter::<u64>::try_with_capacity(q, 0).unwrap();
    assert_eq!(lim.capacity(), 64);
}

#[test]
fn an_absurd_capacity_is_the_maximum_and_works() {
    let clock = ManualClock::new();
    let lim = KeyedLimiter::<u64, _>::with_capacity_and_clock(hourly(), usize::MAX, clock);
    assert_eq!(lim.capacity(), MAX_CAPACITY);
    assert_eq!(admitted(&lim, 0..16), 16);
    assert!((0..16).all(|k| lim.check(&k).is_err()));
}

/// How full a table of `2^18` slots gets before a new key is refused: entirely.
#[test]
#[ignore = "a quarter million keys: cargo test --release --test keyed_capacity -- --ignored"]
fn with_capacity_200_000_holds_every_slot() {
    let lim =
        KeyedLimiter::<u64, _>::with_capacity_and_clock(hourly(), 200_000, ManualClock::new());
    let slots = lim.capacity() as u64;
    assert_eq!(slots, 1 << 18);
    assert_eq!(admitted(&lim, 0..slots), slots as usize);
    assert_eq!(lim.overflow_denials(), 0);
    assert!(lim.check(&u64::MAX).is_err());
    assert!((0..slots).step_by(97).all(|k| lim.check(&k).is_err()));
}

// ---- against a plain model: `slots` buckets, any of which any key may take ----

/// Per-key GCRA with `T` = 1 ms and burst `burst`, in at most `slots` buckets: a new key takes a
/// free bucket, or else the bucket of any key whose bucket is empty (its `TAT` strictly past;
/// which one cannot change a decision while time moves forward), or else it is refused.
struct Model {
    burst: u64,
    slots: usize,
    tat: HashMap<u32, u64>,
    overflow: u64,
}

const T: u64 = 1_000_000;

impl Model {
    fn check(&mut self, key: u32, now: u64, n: u64) -> Option<u64> {
        if !self.tat.contains_key(&key) && self.tat.len() == self.slots {
            match self.tat.iter().find(|(_, &tat)| tat < now).map(|(&k, _)| k) {
                Some(idle) => drop(self.tat.remove(&idle)),
                None => {
                    self.overflow += 1;
                    return None;
                }
            }
        }
        let tat = self.tat.entry(key).or_insert(0);
        let start = (*tat).max(now);
        (start + n * T - now <= self.burst * T).then(|| {
            *tat = start + n * T;
            (self.burst * T - (*tat - now)) / T
        })
    }
}

fn matches_the_model<K: Hash + Eq + Clone + Send + Sync + std::fmt::Debug>(
    key: impl Fn(u32) -> K,
    burst: u64,
    steps: Vec<(u32, u64, u64)>,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let q = Quota::new(burst, Duration::from_nanos(T * burst), burst).unwrap();
    // Two shards of one group: every key's window is one group, and half the table lies past it.
    let lim = KeyedLimiter::with_layout(q, 2, 4, clock.clone());
    let mut model = Model { burst, slots: 8, tat: HashMap::new(), overflow: 0 };
    let mut now = 0;
    for (k, n, dt_us) in steps {
        now += dt_us * 1_000;
        clock.set(Duration::from_nanos(now));
        let want = model.check(k, now, n);
        let got = lim.check_n(&key(k), n).ok().map(|a| a.remaining());
        prop_assert_eq!(got, want, "key {:?} n {} at {}", key(k), n, now);
        prop_assert_eq!(lim.overflow_denials(), model.overflow);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// An 8-slot table in two shards answers as 8 buckets any key may take: keys whose window is
    /// full go on to the other shard, and only a table full of busy buckets refuses a key.
    #[test]
    fn a_two_shard_table_matches_an_eight_bucket_model(
        burst in 1u64..4,
        steps in prop::collection::vec((0u32..16, 1u64..3, 0u64..1500), 1..300),
    ) {
        let steps = steps.into_iter().map(|(k, n, dt)| (k, n.min(burst), dt)).collect();
        matches_the_model(|k| k, burst, steps)?;
    }

    /// The same with keys that all hash alike: they share one probe sequence through both shards.
    #[test]
    fn a_two_shard_table_of_alike_keys_matches_an_eight_bucket_model(
        burst in 1u64..4,
        steps in prop::collection::vec((0u32..16, 1u64..3, 0u64..1500), 1..300),
    ) {
        let steps = steps.into_iter().map(|(k, n, dt)| (k, n.min(burst), dt)).collect();
        matches_the_model(SameHash, burst, steps)?;
    }
}
