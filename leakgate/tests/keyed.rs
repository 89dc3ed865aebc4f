//! `KeyedLimiter`: per-key buckets with the contract's meaning, bounded, reclaiming idle keys.

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::collections::HashMap;
use std::time::Duration;

fn keyed<K: std::hash::Hash + Eq + Clone + Send + Sync>(
    q: Quota,
) -> (KeyedLimiter<K, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (KeyedLimiter::with_clock(q, clock.clone()), clock)
}

#[test]
fn each_key_has_its_own_bucket() {
    let (lim, clock) = keyed::<u64>(Quota::per_second(2).unwrap());
    for key in 0..100 {
        assert_eq!(lim.check(&key).unwrap().remaining(), 1);
        assert_eq!(lim.check(&key).unwrap().remaining(), 0);
        assert!(lim.check(&key).is_err());
    }
    clock.advance(Duration::from_millis(500));
    for key in 0..100 {
        assert!(lim.check(&key).is_ok());
        assert!(lim.check(&key).is_err());
    }
}

#[test]
fn answers_match_a_single_limiter() {
    let q = Quota::new(7, Duration::from_secs(1), 3).unwrap();
    let (lim, clock) = keyed::<&str>(q);
    let single = Limiter::with_clock(q, clock.clone());
    for (step, n) in [(0, 1), (10, 2), (90, 1), (200, 3), (1, 0), (400, 4), (0, 1)] {
        clock.advance(Duration::from_millis(step));
        let (a, b) = (lim.check_n(&"k", n), single.check_n(n));
        assert_eq!(a.is_ok(), b.is_ok());
        match (a, b) {
            (Ok(a), Ok(b)) => {
                assert_eq!((a.remaining(), a.reset_after()), (b.remaining(), b.reset_after()))
            }
            (Err(a), Err(b)) => assert_eq!(
                (a.remaining(), a.reset_after(), a.retry_after()),
                (b.remaining(), b.reset_after(), b.retry_after())
            ),
            _ => unreachable!(),
        }
    }
}

#[test]
fn string_keys_are_looked_up_by_str() {
    let (lim, _) = keyed::<String>(Quota::per_second(1).unwrap());
    assert!(lim.check("api-key-1").is_ok());
    assert!(lim.check(&"api-key-1".to_string()).is_err());
    assert!(lim.check("api-key-2").is_ok());
}

#[test]
fn ip_addresses_and_tuples_are_keys() {
    let (lim, _) = keyed::<(std::net::IpAddr, u16)>(Quota::per_second(1).unwrap());
    let a = ("10.0.0.1".parse().unwrap(), 443);
    let b = ("::1".parse().unwrap(), 443);
    assert!(lim.check(&a).is_ok() && lim.check(&b).is_ok());
    assert!(lim.check(&a).is_err());
}

#[test]
fn peeks_and_oversized_requests_do_not_insert() {
    let (lim, _) = keyed::<u64>(Quota::per_second(5).unwrap());
    assert_eq!(lim.check_n(&1, 0).unwrap().remaining(), 5);
    assert_eq!(lim.check_n(&1, 6).unwrap_err().retry_after(), None);
    assert!(lim.snapshot().is_empty());
}

#[test]
fn a_full_table_denies_new_keys_and_keeps_active_ones() {
    // 64 slots (the smallest table: 50 keys and a quarter more, rounded up), every bucket kept
    // active by a slow quota.
    let (lim, clock) = keyed::<u64>(Quota::per_hour(1).unwrap());
    let lim = KeyedLimiter::with_capacity_and_clock(lim.quota(), 50, clock.clone());
    assert_eq!(lim.capacity(), 64);
    let admitted: Vec<u64> = (0..1000).filter(|k| lim.check(k).is_ok()).collect();
    // Every key may use every slot of the table: all 64 fill, whatever the keys' hashes.
    assert_eq!(admitted.len(), 64);
    assert_eq!(lim.overflow_denials(), 1000 - admitted.len() as u64);
    let denied = lim.check(&5000).unwrap_err();
    assert_eq!(denied.remaining(), 0);
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(3600)));
    for key in &admitted {
        assert!(lim.check(key).is_err(), "active key {key} was forgotten");
    }
    // Just past an hour later every bucket is empty (its TAT is in the past): new keys take the
    // slots over. (At exactly one hour the buckets are empty too, but a slot changes key only
    // once its TAT is strictly past; see `Group`.)
    clock.advance(Duration::from_secs(3600) + Duration::from_nanos(1));
    assert!((5000..5032).all(|k| lim.check(&k).is_ok()));
}

#[test]
fn snapshot_reports_levels_without_blocking() {
    let (lim, clock) = keyed::<u32>(Quota::per_second(4).unwrap());
    lim.check_n(&1, 4).unwrap();
    lim.check_n(&2, 1).unwrap();
    clock.advance(Duration::from_millis(250));
    let mut snap = lim.snapshot();
    snap.sort_by_key(|s| s.key);
    assert_eq!(snap.len(), 2);
    assert_eq!((snap[0].key, snap[0].remaining, snap[0].fill), (1, 1, 0.75));
    assert_eq!(snap[0].reset_after, Duration::from_millis(750));
    assert_eq!(snap[0].since_last_use, Duration::from_millis(250));
    assert_eq!((snap[1].remaining, snap[1].fill), (4, 0.0));
}

#[test]
fn keyed_limiter_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<KeyedLimiter<String>>();
    assert_send_sync::<KeyedLimiter<u64, ManualClock>>();
}

#[test]
fn threads_on_shared_and_distinct_keys_never_exceed_quotas() {
    let (lim, _) = keyed::<u64>(Quota::per_second(100).unwrap());
    let admitted: Vec<std::sync::atomic::AtomicU64> = (0..8).map(|_| Default::default()).collect();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (lim, admitted) = (&lim, &admitted);
            s.spawn(move || {
                for i in 0..2_000u64 {
                    let key = (i + t) % 8;
                    if lim.check(&key).is_ok() {
                        admitted[key as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    for a in admitted {
        assert_eq!(a.into_inner(), 100, "exactly each key's burst: the clock is stopped");
    }
}

// ---- properties against a plain model: one exact rational GCRA per key ----

/// Per-key GCRA with `T` a whole number of nanoseconds (so answers must match exactly).
struct Model {
    t: u64,
    tau: u64,
    burst: u64,
    tat: HashMap<u8, u64>,
}

impl Model {
    fn check(&mut self, key: u8, now: u64, n: u64) -> Option<u64> {
        if n == 0 || n > self.burst {
            // Takes nothing, but a tracked key's bucket records the time (as a `Limiter` does).
            if let Some(tat) = self.tat.get_mut(&key) {
                *tat = (*tat).max(now);
            }
            return (n == 0).then(|| (self.tau - self.backlog(key, now)) / self.t);
        }
        let tat = self.tat.entry(key).or_insert(0);
        let start = (*tat).max(now);
        (start + n * self.t - now <= self.tau).then(|| {
            *tat = start + n * self.t;
            (self.tau - (*tat - now)) / self.t
        })
    }

    fn backlog(&self, key: u8, now: u64) -> u64 {
        self.tat.get(&key).map_or(0, |&tat| tat.saturating_sub(now))
    }
}

/// A quota of one unit per millisecond (`count` per `count` ms) with `burst`, and an empty exact
/// model of it.
fn one_per_ms(count: u64, burst: u64) -> (Quota, Model) {
    let q = Quota::new(count, Duration::from_nanos(1_000_000 * count), burst).unwrap();
    (q, Model { t: 1_000_000, tau: 1_000_000 * burst, burst, tat: HashMap::new() })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Every key answers as its own exact model, and a table of 64 slots answers exactly as one
    /// with room for 4096: where idle buckets are reclaimed, that changes nothing. (The overflow
    /// counter shows no key was ever turned away.)
    #[test]
    fn keys_match_the_model_and_small_tables_match_large_ones(
        count in 1u64..50, burst in 1u64..4,
        steps in prop::collection::vec((0u8..20, 0u64..3, 0u64..400), 1..300),
    ) {
        let (q, mut model) = one_per_ms(count, burst);
        let clock = ManualClock::new();
        let small = KeyedLimiter::<u8, _>::with_capacity_and_clock(q, 64, clock.clone());
        let large = KeyedLimiter::<u8, _>::with_capacity_and_clock(q, 4096, clock.clone());
        let mut now = 0u64;
        for (key, n, dt_us) in steps {
            now += dt_us * 1_000;
            clock.set(Duration::from_nanos(now));
            let want = model.check(key, now, n);
            let got_large = large.check_n(&key, n);
            prop_assert_eq!(got_large.as_ref().ok().map(|a| a.remaining()), want);
            let got_small = small.check_n(&key, n);
            prop_assert_eq!(small.overflow_denials(), 0);
            prop_assert_eq!(got_small.as_ref().ok().map(|a| a.remaining()), want);
        }
    }
}

/// The same model with room for only `slots` keys at once, laid out as a one-group table lays
/// them out: a new key takes the first slot never used, or else the first slot (in slot order)
/// whose bucket is empty (its `TAT` strictly past), or else it is denied as overflow. The order
/// matters since a tracked key's peek records the time and an untracked key's cannot.
struct Bounded {
    model: Model,
    slots: Vec<Option<u8>>,
    overflow: u64,
}

impl Bounded {
    fn new(model: Model, slots: usize) -> Self {
        Bounded { model, slots: vec![None; slots], overflow: 0 }
    }

    fn check(&mut self, key: u8, now: u64, n: u64) -> Option<u64> {
        let new = n >= 1 && n <= self.model.burst && !self.model.tat.contains_key(&key);
        if new {
            let unused = self.slots.iter().position(Option::is_none);
            let idle = || {
                self.slots.iter().position(|held| {
                    held.is_some_and(|k| self.model.tat.get(&k).is_some_and(|&tat| tat < now))
                })
            };
            match unused.or_else(idle) {
                Some(slot) => {
                    if let Some(old) = self.slots[slot].replace(key) {
                        self.model.tat.remove(&old);
                    }
                }
                None => {
                    self.overflow += 1;
                    return None;
                }
            }
        }
        self.model.check(key, now, n)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// A table of one group (four slots) serving up to eight keys reclaims slots all the time:
    /// it answers exactly as a model that keeps four buckets and frees only empty ones, and it
    /// turns away exactly the new keys that model has no room for.
    #[test]
    fn a_four_slot_table_matches_a_four_bucket_model(
        count in 1u64..50, burst in 1u64..4,
        steps in prop::collection::vec((0u8..8, 0u64..3, 0u64..1500), 1..300),
    ) {
        let (q, model) = one_per_ms(count, burst);
        let clock = ManualClock::new();
        let table = KeyedLimiter::<u8, _>::with_layout(q, 1, 4, clock.clone());
        let mut bounded = Bounded::new(model, 4);
        let mut now = 0u64;
        for (key, n, dt_us) in steps {
            now += dt_us * 1_000;
            clock.set(Duration::from_nanos(now));
            let want = bounded.check(key, now, n);
            let got = table.check_n(&key, n);
            prop_assert_eq!(got.as_ref().ok().map(|a| a.remaining()), want, "key {} n {} at {}", key, n, now);
            prop_assert_eq!(table.overflow_denials(), bounded.overflow);
        }
    }
}
