//! `LeasedLimiter` against its stated bound: in every window of the clock `[t1, t2]` it admits at
//! most `burst + rate * (t2 - t1) + E` (`E = excess_bound()`), checked over every pair of
//! admissions of random runs on a manual clock; with leases off it decides exactly as a plain
//! GCRA model; threads that exit holding a lease, leases that expire, and what it refuses.

use leakgate::{Clock, LeasedLimiter, Leases, Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[path = "support/gcra.rs"]
mod gcra;

use gcra::Model;

/// The most units the bound allows in `[t1, t2]` (ns).
fn allowed(q: &Quota, e: u64, t1: u64, t2: u64) -> u128 {
    let rate_part = u128::from(t2 - t1) * u128::from(q.count()) / q.period().as_nanos();
    u128::from(q.burst()) + rate_part + u128::from(e)
}

/// Checks the bound over every window that starts and ends at an admission.
fn assert_bound(q: &Quota, e: u64, admitted: &[(u64, u64)]) {
    for i in 0..admitted.len() {
        let mut sum = 0u128;
        for &(t, n) in &admitted[i..] {
            sum += u128::from(n);
            let limit = allowed(q, e, admitted[i].0, t);
            assert!(sum <= limit, "{sum} units in [{}, {t}] ns, bound {limit}", admitted[i].0);
        }
    }
}

fn quota(per_second: u64, burst: u64) -> Quota {
    Quota::new(per_second, Duration::from_secs(1), burst).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Random checks from 4 slots at random costs and clock steps: the bound in every window.
    #[test]
    fn every_window_keeps_the_bound(
        per_second in prop::sample::select(vec![100_000u64, 1_000_000, 10_000_000]),
        burst in prop::sample::select(vec![8u64, 100, 5_000]),
        span_us in 17u64..3_000,
        slots in 1usize..=4,
        steps in prop::collection::vec((0usize..4, 1u64..4, 0u64..3_000), 1..300),
    ) {
        let q = quota(per_second, burst);
        let leases = Leases::new().span(Duration::from_micros(span_us)).slots(slots);
        let lim = LeasedLimiter::with_leases(q, ManualClock::new(), leases);
        let e = lim.excess_bound();
        prop_assert!(e <= (per_second * span_us / 1_000_000).min(burst / 2));
        let mut now = 0u64;
        let mut admitted = Vec::new();
        for (slot, n, dt) in steps {
            now += dt;
            if lim.check_n_at_slot(slot, n, now).is_ok() {
                admitted.push((now, n));
            }
        }
        assert_bound(&q, e, &admitted);
    }

    /// A rate too slow for leases: every decision is the plain model's.
    #[test]
    fn leases_off_decide_exactly(
        per_second in 1u64..1_000,
        burst in 1u64..20,
        steps in prop::collection::vec((0usize..4, 0u64..4, 0u64..5_000_000), 1..200),
    ) {
        let q = quota(per_second, burst);
        let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(4));
        prop_assert_eq!(lim.lease_units(), 0);
        let mut model = Model::new(&q);
        let mut now = 0u64;
        for (slot, n, dt) in steps {
            now += dt;
            prop_assert_eq!(lim.check_n_at_slot(slot, n, now).is_ok(), model.check(now, n));
        }
    }
}

#[test]
fn at_one_instant_no_more_than_the_burst() {
    // Every leased unit was charged to the shared bucket, so at a clock that stands still the
    // threads together get exactly the burst, however the leases fall.
    let q = quota(10_000_000, 5_000);
    let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(4));
    assert!(lim.lease_units() >= 2);
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10_000 {
                    if lim.check().is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let admitted = admitted.into_inner();
    assert!(admitted <= 5_000, "{admitted}");
    // Units may sit in leases whose threads left: at most E short of the burst.
    assert!(admitted >= 5_000 - lim.excess_bound(), "{admitted}");
}

#[test]
fn a_lease_of_a_thread_that_exited_is_spent_by_its_slot_or_expires() {
    let q = quota(1_000_000, 1_000); // T = 1 µs; 1 ms leases of min(1000, 500) / 2 = 250
    let clock = ManualClock::new();
    let lim = LeasedLimiter::with_leases(q, clock.clone(), Leases::new().slots(2));
    assert_eq!(lim.lease_units(), 250);
    std::thread::scope(|s| {
        s.spawn(|| assert!(lim.check_n_at_slot(1, 1, 0).is_ok()));
    });
    // 249 units stay in slot 1; the shared bucket has 750 left.
    assert_eq!(lim.check_n_at_slot(1, 1, 0).unwrap().remaining(), 248);
    let exact_then: u64 =
        (0..2_000).filter(|_| lim.check_n_at_slot(0, 1, 0).is_ok()).count() as u64;
    assert_eq!(exact_then, 750, "slot 0 gets the shared bucket's units, not slot 1's");
    // Past the span, slot 1's lease is dropped: nothing of it is spent late.
    let later = 1_100_000; // 1.1 ms: 1,100 units came back
    assert!(lim.check_n_at_slot(1, 249, later).is_ok());
    let spent: u64 = (0..3_000).filter(|_| lim.check_n_at_slot(1, 1, later).is_ok()).count() as u64;
    assert_eq!(249 + spent, 1_000, "the burst refilled (1,100 units back, capped at 1,000)");
}

#[test]
fn refusals_while_units_sit_in_other_leases_stay_under_one_percent() {
    // Two slots alternating, asking ten times the rate for 100 ms: the leased limiter admits
    // within E of the exact limiter's count, above it never by more than E.
    let q = quota(1_000_000, 1_000);
    let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    let exact = Limiter::with_clock(q, ManualClock::new());
    let (mut leased, mut plain) = (0u64, 0u64);
    for i in 0..1_000_000u64 {
        let now = i * 100;
        leased += u64::from(lim.check_n_at_slot((i & 1) as usize, 1, now).is_ok());
        plain += u64::from(exact.check_n_at(1, now).is_ok());
    }
    let e = lim.excess_bound();
    assert!(leased <= plain + e, "{leased} vs {plain}");
    assert!(leased * 100 >= plain * 99, "shortfall over 1%: {leased} vs {plain}");
}

#[test]
fn a_clock_that_goes_back_admits_no_more() {
    let q = quota(1_000_000, 1_000);
    let clock = ManualClock::new();
    clock.set(Duration::from_millis(10));
    let lim = LeasedLimiter::with_leases(q, clock.clone(), Leases::new().slots(2));
    let first =
        (0..5_000).filter(|i| lim.check_n_at_slot(i & 1, 1, clock.now_ns()).is_ok()).count();
    assert_eq!(first, 1_000);
    clock.set(Duration::from_millis(5));
    let back = (0..5_000).filter(|i| lim.check_n_at_slot(i & 1, 1, clock.now_ns()).is_ok()).count();
    assert_eq!(back, 0, "nothing more at an earlier time");
}

#[test]
fn the_end_of_the_clock_decides_exactly() {
    let q = quota(1_000_000, 1_000);
    let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    let late = u64::MAX - 10;
    // Past the slots' range no lease is taken; the shared bucket decides (and at the end of its
    // own range refuses).
    let exact = Limiter::with_clock(q, ManualClock::new());
    for slot in 0..2_000 {
        assert_eq!(lim.check_n_at_slot(slot, 1, late).is_ok(), exact.check_n_at(1, late).is_ok());
    }
    assert!(lim.check_n_at_slot(0, 2_000, 0).is_err(), "a cost above the burst");
    assert!(lim.check_n_at_slot(0, 0, 0).is_ok(), "cost 0");
}
