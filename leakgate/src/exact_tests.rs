//! Tests of [`ExactRate`]: the units, their rounding, and their ranges.

use super::*;
use proptest::prelude::*;

fn rate(count: u64, period_ns: u64, burst: u64) -> ExactRate {
    ExactRate::new(Quota::new(count, Duration::from_nanos(period_ns), burst).unwrap())
}

#[test]
fn three_per_second_counts_in_thirds_of_a_nanosecond() {
    let r = rate(3, 1_000_000_000, 3);
    assert_eq!((r.units_per_ns(), r.interval(), r.tau()), (3, 1_000_000_000, 3_000_000_000));
    assert!(r.is_exact());
    assert_eq!(r.ns_to_units(1_000_000_000), r.cost(3));
    assert_eq!(r.units_to_ns_ceil(r.interval()), 333_333_334);
    assert_eq!(r.split_ns(r.interval() + r.ns_to_units(5)), (333_333_338, 1));
    assert_eq!(r.join_ns(333_333_338, 1), r.interval() + r.ns_to_units(5));
}

#[test]
fn whole_nanosecond_interval_counts_in_nanoseconds() {
    let r = rate(20, 1_000_000_000, 1);
    assert_eq!((r.units_per_ns(), r.interval()), (1, 50_000_000));
    let r = rate(1000, 1_000_000_000, 10);
    assert_eq!(r.remaining(2_500_000), 7);
    assert_eq!(r.remaining(r.tau() + 1), 0, "a backlog past tau leaves nothing");
}

#[test]
fn ten_to_the_eleven_per_second_is_a_hundredth_of_a_nanosecond() {
    let r = rate(100_000_000_000, 1_000_000_000, 1);
    assert_eq!((r.units_per_ns(), r.interval()), (100, 1));
}

#[test]
fn a_huge_coprime_count_is_rounded_to_a_slower_rate() {
    // 2^63 + 1 (odd) per 2^62 ns (about 2 per ns): D would be 2^63 + 1.
    let count = (1u64 << 63) + 1;
    let q = Quota::new(count, Duration::from_nanos(1 << 62), 1).unwrap();
    let r = ExactRate::new(q);
    assert_eq!(u128::from(r.units_per_ns()), 1u128 << 62);
    assert!(!r.is_exact());
    let exact = (1u128 << 62) * (1u128 << 62);
    assert!(r.interval() * u128::from(count) >= exact, "T rounded up");
    assert!((r.interval() - 1) * u128::from(count) < exact, "by less than a unit");
}

#[test]
fn a_smaller_cap_rounds_what_the_default_keeps_exact() {
    // 4294967311 is prime and above 2^32 (Redis's cap): exact only under the default cap.
    let q = Quota::new(4_294_967_311, Duration::from_secs(86_400), 1).unwrap();
    let capped = ExactRate::with_max_units_per_ns(q, 1 << 32);
    assert_eq!((capped.units_per_ns(), capped.is_exact()), (1 << 32, false));
    let exact_t_times_d = 86_400_000_000_000u128 << 32;
    assert!(capped.interval() * 4_294_967_311 >= exact_t_times_d);
    assert!((capped.interval() - 1) * 4_294_967_311 < exact_t_times_d);
    assert!(ExactRate::new(q).is_exact());
    // Caps out of range are taken within it.
    assert_eq!(ExactRate::with_max_units_per_ns(q, 0).units_per_ns(), 1);
    assert_eq!(ExactRate::with_max_units_per_ns(q, u64::MAX), ExactRate::new(q));
}

#[test]
fn stored_pairs_saturate_instead_of_wrapping() {
    let r = rate(3, 1_000_000_000, 3);
    assert_eq!(r.split_ns(u128::MAX), (u128::MAX / 3, 0));
    assert_eq!(r.join_ns(0, 99), 2, "a rest past D is read as D - 1");
    assert_eq!(r.units_to_ns_ceil(u128::MAX), u64::MAX);
    assert_eq!(r.units_to_duration_ceil(u128::MAX), Duration::from_nanos(u64::MAX));
    assert_eq!(r.cost(u64::MAX), u128::from(u64::MAX) * r.interval());
    assert_eq!(r.backlog_in(u128::MAX, &rate(1, 1_000_000_000_000, 1)), u128::MAX);
}

#[test]
fn the_whole_clock_and_the_largest_bucket_fit_at_the_finest_units() {
    // The longest bucket at the finest units: D = 2^62 (a count of 2^62 per 2^63 + 1 ns, so
    // gcd 1), the largest burst a quota allows there.
    let mut burst = 1u64 << 62;
    let q = loop {
        match Quota::new(1 << 62, Duration::from_nanos((1 << 63) + 1), burst) {
            Ok(q) => break q,
            Err(_) => burst /= 2,
        }
    };
    let r = ExactRate::new(q);
    assert_eq!(u128::from(r.units_per_ns()), 1u128 << 62);
    let state = r.ns_to_units(u64::MAX).checked_add(r.tau()).and_then(|s| s.checked_add(r.tau()));
    assert!(state.is_some_and(|s| s < 1 << 127), "clock + 2 tau fits");
}

fn quota() -> impl Strategy<Value = Quota> {
    let period = prop_oneof![
        Just(1_000_000_000u64),
        Just(60_000_000_000),
        Just(1_000_000),
        Just(333),
        Just(7),
        1u64..5_000_000_000_000,
    ];
    // Counts up to the highest rate a quota may have (10^11 a second: 100 a nanosecond).
    let parts = period.prop_flat_map(|period| {
        let most = period.saturating_mul(100);
        (prop_oneof![1u64..=most.min(2_000), 1u64..=most], Just(period), 1u64..1_000)
    });
    parts.prop_filter_map("a valid quota", |(count, period, burst)| {
        Quota::new(count, Duration::from_nanos(period), burst).ok()
    })
}

fn cap() -> impl Strategy<Value = u64> {
    prop_oneof![Just(ExactRate::MAX_UNITS_PER_NS), Just(1 << 32), 1u64..1_000]
}

proptest! {
    /// `T * count = period`, in units: exactly when exact, else rounded up by less than a unit.
    #[test]
    fn the_interval_is_the_quotas_exactly_or_a_little_slower(q in quota(), cap in cap()) {
        let r = ExactRate::with_max_units_per_ns(q, cap);
        let count = u128::from(q.count());
        let period = r.ns_to_units(q.period().as_nanos() as u64);
        prop_assert!(r.units_per_ns() >= 1 && r.units_per_ns() <= cap);
        if r.is_exact() {
            prop_assert_eq!(r.interval() * count, period);
        } else {
            prop_assert!(r.interval() * count >= period);
            prop_assert!((r.interval() - 1) * count < period);
        }
        prop_assert_eq!(r.tau(), u128::from(q.burst()) * r.interval());
    }

    /// Clock readings convert exactly both ways, and stored pairs read back as written.
    #[test]
    fn conversions_round_trip(q in quota(), cap in cap(), ns in 0..u64::MAX, extra in any::<u64>()) {
        let r = ExactRate::with_max_units_per_ns(q, cap);
        let units = r.ns_to_units(ns);
        prop_assert_eq!(r.units_to_ns_ceil(units), ns);
        let tat = units + u128::from(extra) % u128::from(r.units_per_ns());
        let (whole, rest) = r.split_ns(tat);
        prop_assert_eq!(whole, u128::from(ns));
        prop_assert_eq!(r.join_ns(ns, rest), tat);
        prop_assert!(u128::from(r.units_to_ns_ceil(tat)) * u128::from(r.units_per_ns()) >= tat);
    }

    /// `remaining` is `floor((tau - backlog) / T)`, and a carried level is never smaller.
    #[test]
    fn reports_and_carries_round_to_the_safe_side(a in quota(), b in quota(), f in 0u128..2_000) {
        let (a, b) = (ExactRate::new(a), ExactRate::new(b));
        let backlog = a.tau() / 1000 * f;
        let free = a.tau().saturating_sub(backlog) / a.interval();
        prop_assert_eq!(u128::from(a.remaining(backlog)), free);
        let carried = a.backlog_in(backlog, &b);
        match backlog.checked_mul(b.interval()) {
            None => prop_assert_eq!(carried, u128::MAX, "saturated"),
            Some(want) => {
                // carried * T_a >= backlog * T_b, by less than one T_a.
                prop_assert!(carried.checked_mul(a.interval()).is_none_or(|x| x >= want));
                prop_assert!(carried == 0 || (carried - 1) * a.interval() < want);
            }
        }
    }
}
