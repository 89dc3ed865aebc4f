//! Extreme inputs never panic and give the exact model's answer: saturated clocks, century-long
//! buckets, unbounded queues, every constructor extreme, odd quota strings. Regressions from an
//! adversarial review; they run in the debug profile, where overflow checks are on.

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use std::time::Duration;

const YEAR_NS: u64 = 365 * 86_400 * 1_000_000_000;

/// A clock that once read Duration::MAX (saturated), then set back: the next check overflows
/// `start - now + cost` in `Rate::admit`.
#[test]
fn saturated_clock_then_back_never_panics() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(Quota::per_second(1).unwrap(), clock.clone());
    clock.set(Duration::MAX);
    assert!(lim.check().is_err());
    clock.set(Duration::ZERO);
    let d = lim.check(); // debug: 'attempt to add with overflow' in gcra.rs
    assert!(d.is_err(), "never more than at the latest (saturated) time");
}

/// Two per century, burst 2 (tau = 100 years, a valid Quota): the third check at t = 0 overflows.
#[test]
fn century_quota_third_check_never_panics() {
    let q = Quota::new(2, Duration::from_nanos(100 * YEAR_NS), 2).unwrap();
    let lim = Limiter::with_clock(q, ManualClock::new());
    lim.check_n(2).unwrap();
    let d = lim.check().unwrap_err(); // debug: overflow
                                      // Exact model: max(TAT,t) + T - tau - t = 100y + 50y - 100y = 50 years.
    assert_eq!(d.retry_after(), Some(Duration::from_nanos(50 * YEAR_NS)));
}

/// A queue with an unbounded wait: the second reservation on a 1-per-century quota overflows.
#[test]
fn unbounded_reservations_never_panic() {
    let q = Quota::new(1, Duration::from_nanos(100 * YEAR_NS), 1).unwrap();
    let lim = Limiter::with_clock(q, ManualClock::new());
    let _a = lim.reserve(Duration::MAX).unwrap();
    let _b = lim.reserve(Duration::MAX); // debug: overflow
}

/// Same arithmetic in the keyed limiter: a key admitted near the end of the clock range, then
/// the clock goes back.
#[test]
fn keyed_clock_near_range_end_then_back_never_panics() {
    let clock = ManualClock::new();
    let keyed = KeyedLimiter::<u64, _>::with_clock(Quota::per_second(1).unwrap(), clock.clone());
    clock.set(Duration::from_nanos(u64::MAX / 4 - 1_500_000_000));
    assert!(keyed.check(&1).is_ok());
    clock.set(Duration::ZERO);
    let _ = keyed.check(&1); // debug: overflow
}

/// Constructors and methods with every extreme we could think of: none may panic.
#[test]
fn extreme_constructor_inputs_are_errors_not_panics() {
    let periods = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_nanos(u64::MAX / 4),
        Duration::from_nanos(u64::MAX / 4 + 1),
        Duration::from_nanos(u64::MAX),
        Duration::from_nanos(u64::MAX) + Duration::from_nanos(1),
        Duration::MAX,
        Duration::from_secs(3600 * 24 * 365 * 200),
    ];
    let counts =
        [0, 1, 2, 3, 7, 1_000_000_000, 100_000_000_000, 100_000_000_001, u64::MAX / 4, u64::MAX];
    let bursts = [0, 1, 2, 1_000_000, u64::MAX / 8, u64::MAX / 4, u64::MAX];
    for &p in &periods {
        for &c in &counts {
            for &b in &bursts {
                if let Ok(q) = Quota::new(c, p, b) {
                    // Round trip through Display.
                    let s = q.to_string();
                    assert_eq!(s.parse::<Quota>(), Ok(q), "{s}");
                    let _ = q.with_burst(u64::MAX);
                    let _ = q.with_burst(0);
                    let _ = q.emission_interval();
                    let clock = ManualClock::new();
                    let lim = Limiter::with_clock(q, clock.clone());
                    for t in [0, 1, u64::MAX / 8, u64::MAX / 4, u64::MAX / 2, u64::MAX, 0, 3] {
                        clock.set(Duration::from_nanos(t));
                        for n in [0, 1, b, b.saturating_add(1), u64::MAX] {
                            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                let _ = lim.check_n(n).map(|a| (a.remaining(), a.reset_after()));
                                let _ = lim.check_n(n).map_err(|d| d.retry_after());
                            }));
                            assert!(r.is_ok(), "panic: quota {q} at t={t} n={n}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn odd_quota_strings_never_panic() {
    for s in [
        "",
        "/",
        "//",
        "1/",
        "/s",
        "1/s burst",
        "1/s burst 1 burst 2",
        "1/µs",
        "1/Μs",
        "1/µ",
        "1/ s",
        "1 / 1 s",
        "1/1_s",
        "1/_s",
        "_/s",
        "1__0/s",
        "18446744073709551615/s",
        "18446744073709551616/s",
        "1/18446744073709551615ns",
        "1/18446744073709551615d",
        "1/s burst 18446744073709551615",
        "1/s\tburst\t2",
        "1/s burst\u{a0}2",
        "٣/s",
        "1/s\u{0}",
        "1/\u{200b}s",
        "1/sec",
        "1/SEC",
        "1/MIN",
        "1/m",
        "1/hr",
        "1/HR",
        "1/Hr",
        "1/D",
        "1/1e3ms",
        "1/s burst -1",
        "1/s burst +1",
        "+1/s",
        "-1/s",
        "1/0ns",
        "0/0s",
        "1/213503d",
        "1/213504d",
        "1/ms burst 0",
    ] {
        let r = std::panic::catch_unwind(|| s.parse::<Quota>());
        assert!(r.is_ok(), "parse panicked on {s:?}");
        if let Ok(Ok(q)) = r {
            assert_eq!(q.to_string().parse::<Quota>(), Ok(q), "{s:?}");
        }
    }
}

mod props {
    use leakgate::Quota;
    use proptest::prelude::*;
    use std::time::Duration;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]
        #[test]
        fn display_round_trips(c in any::<u64>(), p in any::<u64>(), b in any::<u64>(), shift in 0u32..64) {
            let (c, b) = (c >> shift, b >> (63 - shift));
            if let Ok(q) = Quota::new(c, Duration::from_nanos(p >> (shift / 2)), b) {
                prop_assert_eq!(q.to_string().parse::<Quota>(), Ok(q));
            }
        }
        #[test]
        fn parse_never_panics(s in "[0-9_ /a-zA-Zµ\\t]{0,24}") {
            let _ = s.parse::<Quota>();
        }
        #[test]
        fn parse_structured_never_panics(c in "[0-9_]{0,22}", a in "[0-9_]{0,22}", u in "(ns|us|µs|ms|s|sec|m|min|h|hr|d|x|)", b in "[0-9_]{0,22}") {
            for s in [format!("{c}/{a}{u}"), format!("{c}/{a}{u} burst {b}"), format!(" {c} / {a}{u}  BURST {b} ")] {
                if let Ok(q) = s.parse::<Quota>() {
                    prop_assert_eq!(q.to_string().parse::<Quota>(), Ok(q));
                }
            }
        }
    }
}
