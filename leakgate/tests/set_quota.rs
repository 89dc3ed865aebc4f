//! `Limiter::set_quota` and `KeyedLimiter::set_quota`: a running limiter's quota changes at once,
//! each bucket keeping the units it could admit now, capped at the new burst (rounded down to
//! the new units), as a rules reload keeps them, and `peek()`.

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::time::Duration;

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

#[test]
fn the_units_available_are_kept_and_the_new_rate_refills_them() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q("10/s"), clock.clone());
    lim.check_n(6).unwrap();
    lim.set_quota(q("1/s burst 8"));
    assert_eq!(lim.quota(), q("1/s burst 8"));
    assert_eq!(lim.peek(), 4, "4 units were available, 4 are");
    clock.advance(Duration::from_millis(999));
    assert_eq!(lim.peek(), 4, "a unit of the new quota takes a second");
    clock.advance(Duration::from_millis(1));
    assert_eq!(lim.peek(), 5);
    assert_eq!(lim.check_n(5).unwrap().reset_after(), Duration::from_secs(8));
}

#[test]
fn units_available_above_the_new_burst_are_capped_and_debt_is_kept() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q("100/s burst 100"), clock.clone());
    lim.check_n(90).unwrap();
    lim.set_quota(q("2/s burst 5"));
    assert_eq!(lim.peek(), 5, "10 available, 5 at most");
    lim.set_quota(q("100/s burst 100"));
    lim.check_n(5).unwrap();
    lim.set_quota(q("2/s burst 5"));
    let denied = lim.check().unwrap_err();
    assert_eq!(denied.remaining(), 0);
    assert_eq!(denied.reset_after(), Duration::from_millis(2500), "5 units of 500 ms");
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
}

#[test]
fn an_empty_bucket_stays_empty_and_a_peek_takes_nothing() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q("1/s burst 3"), clock.clone());
    clock.advance(Duration::from_secs(3600));
    lim.set_quota(q("5/s"));
    assert_eq!(lim.peek(), 3, "3 were available: the 2 more come at the new rate");
    assert_eq!(lim.peek(), 3);
    clock.advance(Duration::from_millis(400));
    assert_eq!(lim.check_n(5).unwrap().remaining(), 0);
    assert!(lim.check().is_err());
}

#[test]
fn a_larger_burst_adds_nothing_at_once_to_a_bucket_in_use() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q("1/s burst 3"), clock.clone());
    let keyed = KeyedLimiter::with_clock(q("1/s burst 3"), clock.clone());
    lim.check().unwrap();
    keyed.check(&1u64).unwrap();
    lim.set_quota(q("5/s"));
    keyed.set_quota(q("5/s"));
    assert_eq!((lim.peek(), keyed.peek(&1)), (2, 2), "2 were available: the rest at 5/s");
    clock.advance(Duration::from_millis(600));
    assert_eq!((lim.peek(), keyed.peek(&1)), (5, 5));
}

#[test]
fn many_changes_back_and_forth_keep_the_level_exactly() {
    // Whole-nanosecond intervals: levels carry exactly, however often the quota changes.
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q("4/s burst 8"), clock.clone());
    lim.check_n(5).unwrap();
    for i in 0..1000 {
        lim.set_quota(if i % 2 == 0 { q("8/s burst 16") } else { q("4/s burst 8") });
    }
    assert_eq!(lim.quota(), q("4/s burst 8"));
    assert_eq!(lim.peek(), 3);
    clock.advance(Duration::from_millis(250));
    assert_eq!(lim.peek(), 4);
}

#[test]
fn a_reservation_keeps_its_time_and_is_not_given_back_across_a_change() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q("1/s burst 1"), clock.clone());
    lim.check().unwrap();
    let r = lim.reserve(Duration::from_secs(10)).unwrap();
    assert_eq!(r.ready_at(), Duration::from_secs(1));
    lim.set_quota(q("1/s burst 2"));
    assert_eq!(r.ready_at(), Duration::from_secs(1), "granted under the old quota");
    assert!(!r.cancel(), "the state moved: nothing can be given back exactly");
    assert_eq!(lim.peek(), 0, "both units stay counted");
}

#[test]
fn a_clock_that_goes_back_after_a_change_admits_no_more() {
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(100));
    let lim = Limiter::with_clock(q("1/s burst 2"), clock.clone());
    lim.check_n(2).unwrap();
    lim.set_quota(q("1/s burst 4"));
    clock.set(Duration::from_secs(50));
    assert_eq!(lim.peek(), 0, "never more than at the latest time seen: none available");
    assert!(lim.check().is_err());
    clock.set(Duration::from_secs(100));
    assert!(lim.check().is_err(), "none was available at the change, and none is");
    clock.set(Duration::from_secs(102));
    assert_eq!(lim.check_n(2).unwrap().remaining(), 0);
    assert!(lim.check().is_err());
}

#[test]
fn keyed_set_quota_keeps_each_keys_level() {
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::with_clock(q("10/s"), clock.clone());
    keyed.check_n(&1u64, 6).unwrap();
    keyed.check_n(&2u64, 10).unwrap();
    keyed.set_quota(q("1/s burst 8"));
    assert_eq!(keyed.quota(), q("1/s burst 8"));
    assert_eq!(keyed.peek(&1), 4, "4 available stay available");
    assert_eq!(keyed.peek(&2), 0, "none available stays none");
    assert_eq!(keyed.peek(&3), 8, "a new key starts empty under the new quota");
    clock.advance(Duration::from_secs(1));
    assert_eq!(keyed.peek(&1), 5);
    assert_eq!(keyed.peek(&2), 1);
    assert!(keyed.check_n(&3, 8).is_ok());
    assert!(keyed.check(&3).is_err());
}

/// One step of a history.
#[derive(Clone, Debug)]
enum Step {
    Wait(u64),
    Check(u64),
    /// Change to the quota of this index of `QUOTAS` (twice: the change and back).
    Change,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u64..3_000_000).prop_map(Step::Wait),
        (0u64..5).prop_map(Step::Check),
        Just(Step::Change),
    ]
}

proptest! {
    /// A change to the same quota is invisible: a limiter whose quota is set again and again
    /// answers every check exactly as one whose quota never changes (whole-nanosecond
    /// intervals, meters only, so the level carried is exact).
    #[test]
    fn setting_the_same_quota_changes_no_decision(steps in proptest::collection::vec(step(), 1..80)) {
        let quota = q("1000/s burst 4");
        let clock = ManualClock::new();
        let fixed = Limiter::with_clock(quota, clock.clone());
        let changed = Limiter::with_clock(quota, clock.clone());
        let keyed_fixed = KeyedLimiter::with_clock(quota, clock.clone());
        let keyed_changed = KeyedLimiter::with_clock(quota, clock.clone());
        for step in steps {
            match step {
                Step::Wait(ns) => clock.advance(Duration::from_nanos(ns)),
                Step::Check(n) => {
                    let a = fixed.check_n(n).map(|ok| ok.remaining()).map_err(|no| no.retry_after());
                    let b = changed.check_n(n).map(|ok| ok.remaining()).map_err(|no| no.retry_after());
                    prop_assert_eq!(a, b);
                    let a = keyed_fixed.check_n(&7u64, n).map(|ok| ok.remaining());
                    let b = keyed_changed.check_n(&7u64, n).map(|ok| ok.remaining());
                    prop_assert_eq!(a.is_ok(), b.is_ok());
                    prop_assert_eq!(a.ok(), b.ok());
                }
                Step::Change => {
                    changed.set_quota(quota);
                    keyed_changed.set_quota(quota);
                }
            }
        }
    }
}

/// Quota changes racing checks on a frozen clock, the burst the same in both quotas and both
/// intervals whole nanoseconds: levels carry over exactly, so the changes never let more than one
/// burst through, and every unit is either admitted or still free. (With a fractional interval
/// each change rounds the level up, against the caller, by under a unit's worth of time.)
#[test]
fn changes_racing_checks_never_admit_past_the_burst() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1000));
    let (a, b) = (q("10/s burst 300"), q("8/s burst 300"));
    let lim = Limiter::with_clock(a, clock.clone());
    let keyed = KeyedLimiter::with_clock(a, clock.clone());
    let admitted = AtomicU64::new(0);
    let keyed_admitted: [AtomicU64; 4] = std::array::from_fn(|_| AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (lim, keyed, admitted, keyed_admitted, stop) =
                (&lim, &keyed, &admitted, &keyed_admitted, &stop);
            s.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    if lim.check().is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    let key = i % 4;
                    if keyed.check(&key).is_ok() {
                        keyed_admitted[key as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                }
            });
        }
        for i in 0..400 {
            let quota = if i % 2 == 0 { b } else { a };
            lim.set_quota(quota);
            keyed.set_quota(quota);
        }
        stop.store(true, Ordering::Relaxed);
    });
    let admitted = admitted.load(Ordering::Relaxed);
    assert!(admitted <= 300, "{admitted} admitted past a burst of 300");
    assert_eq!(admitted + lim.peek(), 300, "every unit either admitted or still free");
    for (key, count) in keyed_admitted.iter().enumerate() {
        let count = count.load(Ordering::Relaxed);
        assert!(count <= 300, "key {key}: {count} admitted past a burst of 300");
        assert_eq!(count + keyed.peek(&(key as u64)), 300, "key {key}");
    }
}

/// Changes spend at most what they must of the clock's range: a bucket an hour deep, full,
/// through a thousand changes to a shorter interval and back, still refills at its rate
/// afterwards. (A change that shortens the interval of a full bucket moves the new quota's clock
/// up by up to the old burst's duration, so that every new state lies above every old one: here
/// half an hour a change, 500 hours in all, of the 100 years the clock has.)
#[test]
fn many_changes_of_a_deep_full_bucket_keep_the_clock_range() {
    let (a, b) = (q("1/s burst 3600"), q("2/s burst 3600"));
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(a, clock.clone());
    let keyed = KeyedLimiter::with_clock(a, clock.clone());
    lim.check_n(3600).unwrap();
    keyed.check_n(&9u64, 3600).unwrap();
    for i in 0..1000 {
        let quota = if i % 2 == 0 { b } else { a };
        lim.set_quota(quota);
        keyed.set_quota(quota);
        keyed.peek(&9); // converts the key's group to each new quota
    }
    assert_eq!((lim.peek(), keyed.peek(&9)), (0, 0));
    clock.advance(Duration::from_secs(3));
    assert_eq!(lim.peek(), 3, "a unit a second, as before the changes");
    assert_eq!(keyed.peek(&9), 3);
}

#[test]
fn a_byte_quota_set_is_read_back_in_bytes() {
    let lim = Limiter::with_clock(q("1000/s"), ManualClock::new());
    let keyed = KeyedLimiter::<u64, _>::with_clock(q("1000/s"), ManualClock::new());
    let bytes = q("10 MB/s burst 64 KiB");
    lim.set_quota(bytes);
    keyed.set_quota(bytes);
    assert_eq!((lim.quota(), keyed.quota()), (bytes, bytes));
    assert_eq!(lim.quota().to_string(), bytes.to_string());
    // The 1,000 units available stay available (as 1,000 bytes); the rest comes at 10 MB/s.
    assert!(lim.check_n(1500).is_err());
    assert_eq!(lim.check_n(1000).unwrap().remaining(), 0);
    lim.clock().advance(Duration::from_millis(1));
    assert_eq!(lim.peek(), 10_000);
}
