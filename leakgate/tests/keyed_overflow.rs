//! `KeyedLimiter` overflow policies: a key that finds the table full of busy buckets is denied
//! (the default) or checked against one shared bucket with its own quota; both are counted.

use leakgate::{KeyedLimiter, ManualClock, OverflowPolicy, Quota};
use proptest::prelude::*;
use std::collections::HashMap;
use std::time::Duration;

/// A full 64-slot table (50 keys and a quarter more, rounded up; keys 0..64 each busy for an
/// hour) with `policy`.
fn full_table(policy: OverflowPolicy) -> (KeyedLimiter<u64, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let q = Quota::per_hour(1).unwrap();
    let lim = KeyedLimiter::with_capacity_and_clock(q, 50, clock.clone()).with_overflow(policy);
    assert!((0..64).all(|k| lim.check(&k).is_ok()));
    (lim, clock)
}

#[test]
fn deny_is_the_default_and_counts_every_refused_request() {
    let (lim, _) = full_table(OverflowPolicy::default());
    assert_eq!(lim.overflow_policy(), OverflowPolicy::Deny);
    for k in 100..110 {
        let denied = lim.check(&k).unwrap_err();
        assert_eq!(denied.remaining(), 0);
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(3600)));
    }
    assert_eq!((lim.overflow_denials(), lim.overflow_admissions()), (10, 0));
}

#[test]
fn the_shared_bucket_serves_keys_with_no_room_within_its_own_quota() {
    let shared = Quota::per_second(10).unwrap(); // T = 100 ms, burst 10
    let (lim, clock) = full_table(OverflowPolicy::SharedBucket(shared));
    // A sweep of new keys: the shared bucket's burst, then denials with its figures.
    let admitted: Vec<u64> = (100..200).filter(|k| lim.check(k).is_ok()).collect();
    assert_eq!(admitted.len(), 10);
    let denied = lim.check(&500).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(denied.reset_after(), Duration::from_secs(1));
    assert_eq!((lim.overflow_admissions(), lim.overflow_denials()), (10, 91));
    // The sweep got no slots: the tracked keys are still the first 64, busy.
    assert!((0..64).all(|k| lim.check(&k).is_err()));
    assert_eq!(lim.snapshot().len(), 64);
    // 100 ms later one more unit, for any key with no room.
    clock.advance(Duration::from_millis(100));
    let ok = lim.check(&7000).unwrap();
    assert_eq!((ok.remaining(), ok.reset_after()), (0, Duration::from_secs(1)));
    assert!(lim.check(&7001).is_err());
    assert_eq!((lim.overflow_admissions(), lim.overflow_denials()), (11, 92));
}

#[test]
fn costs_above_the_shared_burst_are_denied_as_without_it() {
    let q = Quota::per_hour(5).unwrap();
    let clock = ManualClock::new();
    let lim = KeyedLimiter::<u64, _>::with_capacity_and_clock(q, 50, clock)
        .with_overflow(OverflowPolicy::SharedBucket(Quota::per_second(2).unwrap()));
    assert!((0..64).all(|k| lim.check_n(&k, 5).is_ok()));
    let denied = lim.check_n(&100, 3).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(720)), "T of the keys' quota");
    assert!(lim.check_n(&100, 2).is_ok(), "within the shared burst");
    assert_eq!((lim.overflow_admissions(), lim.overflow_denials()), (1, 1));
}

#[test]
fn keys_get_their_own_bucket_again_once_a_slot_empties() {
    let (lim, clock) = full_table(OverflowPolicy::SharedBucket(Quota::per_second(1).unwrap()));
    assert!(lim.check(&100).is_ok(), "served by the shared bucket");
    assert!(lim.check(&100).is_err());
    clock.advance(Duration::from_secs(3600) + Duration::from_nanos(1));
    assert!(lim.check(&100).is_ok(), "a slot of its own now");
    assert!(lim.check(&101).is_ok(), "and the next key too: not the shared bucket");
    assert_eq!(lim.overflow_admissions(), 1);
}

#[test]
fn threads_sweeping_new_keys_never_get_more_than_the_shared_bucket_allows() {
    let (lim, _) = full_table(OverflowPolicy::SharedBucket(Quota::per_second(50).unwrap()));
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let lim = &lim;
            s.spawn(move || {
                for k in 0..500 {
                    let _ = lim.check(&(1_000 + t * 1_000 + k));
                }
            });
        }
    });
    // The clock is stopped: exactly the shared burst.
    assert_eq!(lim.overflow_admissions(), 50);
    assert_eq!(lim.overflow_denials(), 2_000 - 50);
}

// ---- against a plain model: four buckets, and one shared by keys with no room ----

const T: u64 = 1_000_000;

/// One GCRA bucket (`T` = 1 ms per unit of its own count).
#[derive(Clone, Copy, Default)]
struct Bucket {
    tat: u64,
}

impl Bucket {
    fn check(&mut self, now: u64, n: u64, t: u64, burst: u64) -> Option<u64> {
        let start = self.tat.max(now);
        (n <= burst && start + n * t - now <= burst * t).then(|| {
            self.tat = start + n * t;
            (burst * t - (self.tat - now)) / t
        })
    }
}

/// Four per-key buckets (a new key takes a free one or an idle one, as in `tests/keyed.rs`), and
/// a shared bucket of `shared_burst` at one per 2 ms for keys that find none.
struct Model {
    burst: u64,
    shared_burst: u64,
    keys: HashMap<u8, Bucket>,
    shared: Bucket,
    admitted: u64,
    denied: u64,
}

impl Model {
    fn check(&mut self, key: u8, now: u64, n: u64) -> Option<u64> {
        if !self.keys.contains_key(&key) && self.keys.len() == 4 {
            match self.keys.iter().find(|(_, b)| b.tat < now).map(|(&k, _)| k) {
                Some(idle) => drop(self.keys.remove(&idle)),
                None => {
                    let got = self.shared.check(now, n, 2 * T, self.shared_burst);
                    *if got.is_some() { &mut self.admitted } else { &mut self.denied } += 1;
                    return got;
                }
            }
        }
        self.keys.entry(key).or_default().check(now, n, T, self.burst)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// A one-group table with a shared overflow bucket answers as the model: keys with a slot as
    /// their own bucket, keys without one as the shared bucket, counted.
    #[test]
    fn a_four_slot_table_with_a_shared_bucket_matches_the_model(
        burst in 1u64..4, shared_burst in 1u64..4,
        steps in prop::collection::vec((0u8..10, 1u64..4, 0u64..1500), 1..300),
    ) {
        let q = Quota::new(burst, Duration::from_nanos(T * burst), burst).unwrap();
        let shared = Quota::new(1, Duration::from_nanos(2 * T), shared_burst).unwrap();
        let clock = ManualClock::new();
        let table = KeyedLimiter::<u8, _>::with_layout(q, 1, 4, clock.clone())
            .with_overflow(OverflowPolicy::SharedBucket(shared));
        let mut model = Model {
            burst, shared_burst, keys: HashMap::new(), shared: Bucket::default(), admitted: 0, denied: 0,
        };
        let mut now = 0u64;
        for (key, n, dt_us) in steps {
            let n = n.min(burst);
            now += dt_us * 1_000;
            clock.set(Duration::from_nanos(now));
            let want = model.check(key, now, n);
            let got = table.check_n(&key, n).ok().map(|a| a.remaining());
            prop_assert_eq!(got, want, "key {} n {} at {}", key, n, now);
            prop_assert_eq!(
                (table.overflow_admissions(), table.overflow_denials()),
                (model.admitted, model.denied)
            );
        }
    }
}
