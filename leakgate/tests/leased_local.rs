//! `LocalLease` (a thread's own handle on a `LeasedLimiter`) and `LeasedLimiter::set_quota`
//! against the stated bound: handles made and dropped at random, beside checks on the slots, and
//! changes of quota between two quotas, on a manual clock; in every window `[t1, t2]` at most
//! `burst + rate * (t2 - t1) + E` with the larger burst, rate and `E` of the two quotas, and from
//! the last change on with the new quota's alone. With leases off a handle decides exactly as a
//! plain GCRA model.

use leakgate::{Clock, LeasedLimiter, Leases, LocalLease, ManualClock, Quota};
use proptest::prelude::*;
use std::time::Duration;

#[path = "support/gcra.rs"]
mod gcra;

use gcra::Model;

fn quota(per_second: u64, burst: u64) -> Quota {
    Quota::new(per_second, Duration::from_secs(1), burst).unwrap()
}

/// Checks `burst + per_second * window + e` over every window that starts and ends at an
/// admission (`(ns, units)`, in clock order).
fn assert_bound(burst: u64, per_second: u64, e: u64, admitted: &[(u64, u64)]) {
    for i in 0..admitted.len() {
        let mut sum = 0u128;
        for &(t, n) in &admitted[i..] {
            sum += u128::from(n);
            let rate_part = u128::from(t - admitted[i].0) * u128::from(per_second) / 1_000_000_000;
            let limit = u128::from(burst) + rate_part + u128::from(e);
            assert!(sum <= limit, "{sum} units in [{}, {t}] ns, bound {limit}", admitted[i].0);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Two handles (made on first use, dropped at random) and two slot checkers at random costs
    /// and clock steps, and changes between two quotas: the bound in every window.
    #[test]
    fn handles_and_changes_keep_the_bound(
        rates in prop::collection::vec(prop::sample::select(vec![100_000u64, 1_000_000, 10_000_000]), 2),
        bursts in prop::collection::vec(prop::sample::select(vec![8u64, 100, 5_000]), 2),
        span_us in 17u64..3_000,
        slots in 1usize..=4,
        steps in prop::collection::vec(
            (0u8..8, 1u64..4, prop_oneof![0u64..3_000, 0u64..3_000_000]),
            1..300,
        ),
    ) {
        let quotas = [quota(rates[0], bursts[0]), quota(rates[1], bursts[1])];
        let leases = Leases::new().span(Duration::from_micros(span_us)).slots(slots);
        let clock = ManualClock::new();
        let lim = LeasedLimiter::with_leases(quotas[0], clock.clone(), leases);
        let e = quotas
            .iter()
            .map(|q| LeasedLimiter::with_leases(*q, ManualClock::new(), leases).excess_bound())
            .max()
            .unwrap();
        let mut handles: [Option<LocalLease<'_, ManualClock>>; 2] = [None, None];
        let mut in_force = 0;
        let mut now = 0u64;
        let mut admitted = Vec::new();
        // Admissions from the last change of quota on: under the new quota alone (one thread:
        // every lease taken before the change is dropped by it or at the handle's next check).
        let mut since_change = 0;
        for (op, n, dt) in steps {
            now += dt;
            clock.set(Duration::from_nanos(now));
            let ok = match op {
                0 | 1 => {
                    let h = handles[op as usize].get_or_insert_with(|| lim.local_at(op as usize));
                    h.check_n(n).is_ok()
                }
                2 | 3 => lim.check_n_at_slot(op as usize, n, now).is_ok(),
                4 | 5 => {
                    handles[op as usize - 4] = None;
                    false
                }
                6 => {
                    in_force = 1 - in_force;
                    lim.set_quota(quotas[in_force]);
                    since_change = admitted.len();
                    false
                }
                _ => lim.check_n_at(n, now).is_ok(),
            };
            if ok {
                admitted.push((now, n));
            }
        }
        let burst = bursts[0].max(bursts[1]);
        assert_bound(burst, rates[0].max(rates[1]), e, &admitted);
        let now_e = lim.excess_bound();
        assert_bound(bursts[in_force], rates[in_force], now_e, &admitted[since_change..]);
    }

    /// A rate too slow for leases: a handle's every decision is the plain model's.
    #[test]
    fn a_handle_with_leases_off_decides_exactly(
        per_second in 1u64..1_000,
        burst in 1u64..20,
        steps in prop::collection::vec((0u64..4, 0u64..5_000_000), 1..200),
    ) {
        let q = quota(per_second, burst);
        let clock = ManualClock::new();
        let lim = LeasedLimiter::with_leases(q, clock.clone(), Leases::new().slots(4));
        prop_assert_eq!(lim.lease_units(), 0);
        let mut local = lim.local();
        let mut model = Model::new(&q);
        let mut now = 0u64;
        for (n, dt) in steps {
            now += dt;
            clock.set(Duration::from_nanos(now));
            prop_assert_eq!(local.check_n(n).is_ok(), model.check(now, n));
        }
    }
}

#[test]
fn handles_on_threads_get_no_more_than_the_burst_at_one_instant() {
    // Four threads with handles (more than the two slots: some hold none) and a clock that
    // stands still: every unit was charged to the shared bucket, so exactly the burst in all,
    // less what is still in the handles (given back to the slots when the threads end).
    let q = quota(10_000_000, 5_000);
    let lim = LeasedLimiter::with_leases(q, ManualClock::new(), Leases::new().slots(2));
    let admitted: u64 = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut local = lim.local();
                    (0..10_000).filter(|_| local.check().is_ok()).count() as u64
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert!(admitted <= 5_000, "{admitted}");
    assert!(admitted >= 5_000 - lim.excess_bound(), "{admitted}");
    let rest = (0..10_000).filter(|i| lim.check_n_at_slot(*i, 1, 0).is_ok()).count() as u64;
    assert_eq!(admitted + rest, 5_000, "units given back are spent, none twice, none lost");
}

#[test]
fn an_idle_handle_spends_its_lease_late_within_the_bound() {
    // A handle's units do not expire while it holds them: a spend needs no clock reading, and
    // what it spends late sat in its lease (E) at the window's start.
    let q = quota(1_000_000, 1_000); // 1 ms leases of min(1000, 500) / 2 = 250
    let clock = ManualClock::new();
    let lim = LeasedLimiter::with_leases(q, clock.clone(), Leases::new().slots(2));
    let mut local = lim.local_at(0);
    assert!(local.check().is_ok());
    assert_eq!(local.units(), 249);
    clock.set(Duration::from_secs(10));
    let late = (0..2_000).filter(|_| local.check().is_ok()).count() as u64;
    // The 249 of the old lease, then the full burst of 1,000 after ten idle seconds.
    assert_eq!(late, 249 + 1_000);
    assert!(late <= 1_000 + lim.excess_bound());
}

#[test]
fn a_shrink_and_a_grow_back_hand_out_nothing() {
    // The contract's rule for every change of quota: a shrink and a grow back at one instant
    // make no unit available that was not before, leases and handles included.
    let big: Quota = "1000/ms burst 1000".parse().unwrap();
    let small: Quota = "1000/ms burst 10".parse().unwrap();
    let lim = LeasedLimiter::with_leases(big, ManualClock::new(), Leases::new().slots(2));
    let mut local = lim.local_at(0);
    let mut admitted = (0..600).filter(|_| local.check().is_ok()).count() as u64;
    admitted += (0..100).filter(|_| lim.check_n_at_slot(1, 1, 0).is_ok()).count() as u64;
    lim.set_quota(small);
    lim.set_quota(big);
    admitted += (0..2_000).filter(|_| local.check().is_ok()).count() as u64;
    admitted += (0..2_000).filter(|_| lim.check_n_at_slot(1, 1, 0).is_ok()).count() as u64;
    assert!(admitted <= 1_000, "{admitted}");
}

#[test]
fn a_handle_takes_its_slots_place_in_the_bound() {
    // One slot: its lease and a handle's would be two leases charged before an instant and
    // spent after it. The handle takes the slot's lease instead, so at an instant after the
    // bucket has drained, at most the burst plus one lease (E).
    let q = quota(1_000_000, 1_000); // 1 ms leases of min(1000, 500) / 1 = 500
    let clock = ManualClock::new();
    let lim = LeasedLimiter::with_leases(q, clock.clone(), Leases::new().slots(1));
    assert_eq!(lim.excess_bound(), 500);
    assert!(lim.check_n_at_slot(0, 1, 0).is_ok()); // a lease of 500: 499 left in the slot
    let mut local = lim.local_at(0);
    assert_eq!(local.units(), 499, "the handle holds the slot's lease");
    assert!(local.check().is_ok());
    clock.set(Duration::from_millis(1)); // the bucket has drained
    let now = clock.now_ns();
    let mut at_t1 = (0..5_000).filter(|_| local.check().is_ok()).count() as u64;
    at_t1 += (0..5_000).filter(|_| lim.check_n_at_slot(0, 1, now).is_ok()).count() as u64;
    assert!(at_t1 <= 1_000 + lim.excess_bound(), "{at_t1}");
}

#[test]
fn after_a_change_old_leases_are_not_spent() {
    // A quota's leases of 250 (a handle's and a slot's) then a change to a burst of 20 (leases
    // of 5) at the same instant: from then on the new quota alone, 20 units (its burst, less
    // than the 500 the bucket had), none of the 498 units left in the two old leases.
    let fast: Quota = "1000/ms burst 1000".parse().unwrap();
    let lim = LeasedLimiter::with_leases(fast, ManualClock::new(), Leases::new().slots(2));
    let mut local = lim.local_at(0);
    assert!(local.check().is_ok());
    assert!(lim.check_n_at_slot(1, 1, 0).is_ok());
    lim.set_quota("1000/ms burst 20".parse().unwrap());
    assert_eq!(lim.lease_units(), 5);
    let after = (0..1_000).filter(|_| local.check().is_ok()).count()
        + (0..1_000).filter(|_| lim.check_n_at_slot(1, 1, 0).is_ok()).count();
    assert_eq!(after, 20);
    drop(local);
    assert!(lim.check_n_at_slot(0, 1, 0).is_err(), "a dropped handle gives back no old units");
}
