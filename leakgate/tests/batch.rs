//! Batch keyed checks and caller time (issue 20): `check_batch_at` answers exactly as the same
//! checks made one by one at that time, in order; `check_n_at` and `reserve_n_at` answer as the
//! clock-reading calls do at that reading.

use leakgate::{Clock, KeyedLimiter, Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::time::Duration;

fn quota() -> Quota {
    Quota::per_second(1000).unwrap().with_burst(5).unwrap()
}

proptest! {
    /// Batches of random keys (repeats included) and costs at random times against the same
    /// requests made one by one on a second table (large enough for every key: two tables place
    /// keys by their own random seeds, so only tables with room answer alike key for key).
    #[test]
    fn a_batch_answers_as_the_checks_one_by_one(
        batches in proptest::collection::vec(
            (0u64..3_000_000, proptest::collection::vec((0u64..40, 0u64..7), 0..70)),
            1..25,
        ),
    ) {
        let clock = ManualClock::new();
        let make = || KeyedLimiter::<u64, _>::with_capacity_and_clock(quota(), 1024, clock.clone());
        let (batched, single) = (make(), make());
        for (advance, requests) in batches {
            clock.advance(Duration::from_nanos(advance));
            let now = clock.now_ns();
            let keys: Vec<&u64> = requests.iter().map(|(key, _)| key).collect();
            let costs: Vec<u64> = requests.iter().map(|&(_, cost)| cost).collect();
            let mut admitted = vec![false; requests.len()];
            let count = batched.check_batch_at(&keys, &costs, now, &mut admitted);
            let one_by_one: Vec<bool> =
                requests.iter().map(|(key, cost)| single.check_n_at(key, *cost, now).is_ok()).collect();
            prop_assert_eq!(&admitted, &one_by_one);
            prop_assert_eq!(count, one_by_one.iter().filter(|&&ok| ok).count());
        }
    }
}

#[test]
fn a_batch_decides_only_as_many_requests_as_every_slice_holds() {
    let keyed = KeyedLimiter::<u64>::new(quota());
    let mut admitted = [false; 2];
    assert_eq!(keyed.check_batch_at(&[&1, &2, &3], &[1, 1, 1], 0, &mut admitted), 2);
    assert_eq!(keyed.check_batch_at(&[&1, &2], &[1], 0, &mut admitted), 1);
    assert_eq!(keyed.check_batch_at::<u64>(&[], &[], 0, &mut admitted), 0);
}

#[test]
fn caller_time_answers_as_the_clock_would() {
    let clock = ManualClock::new();
    let (by_clock, by_caller) =
        (Limiter::with_clock(quota(), clock.clone()), Limiter::with_clock(quota(), clock.clone()));
    let keyed = KeyedLimiter::with_clock(quota(), clock.clone());
    for step in 0..200u64 {
        clock.advance(Duration::from_micros(step % 7 * 300));
        let now = clock.now_ns();
        let n = step % 3;
        let a = by_clock.check_n(n).map(|ok| ok.remaining()).map_err(|no| no.retry_after());
        let b =
            by_caller.check_n_at(n, now).map(|ok| ok.remaining()).map_err(|no| no.retry_after());
        assert_eq!(a, b, "step {step}");
        let c =
            keyed.check_n_at(&7u64, n, now).map(|ok| ok.remaining()).map_err(|no| no.retry_after());
        assert_eq!(a, c, "step {step}: a key's bucket answers as a limiter");
    }
    // A caller time earlier than one the limiter saw is a clock that went back: no more admitted.
    let lim = Limiter::with_clock(quota(), ManualClock::new());
    lim.check_n_at(5, 10_000_000).unwrap();
    assert!(lim.check_at(1_000).is_err(), "at the earlier time the bucket is still full");
    let r = lim.reserve_n_at(1, Duration::from_secs(1), 10_000_000).unwrap();
    assert_eq!(r.ready_at(), Duration::from_millis(11));
}
