//! Every clause of `leakgate::docs` for a single `Limiter`, on a manual clock.

use leakgate::{Limiter, ManualClock, Quota, QuotaError};
use std::time::Duration;

fn limiter(q: Quota) -> (Limiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (Limiter::with_clock(q, clock.clone()), clock)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_new_bucket_is_empty_so_a_full_burst_conforms_at_once() {
    let (lim, _) = limiter(Quota::per_second(5).unwrap());
    for left in (0..5).rev() {
        assert_eq!(lim.check().unwrap().remaining(), left);
    }
    assert!(lim.check().is_err());
}

#[test]
fn admissions_refill_at_the_emission_interval() {
    let (lim, clock) = limiter(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    assert!(lim.check().is_ok());
    clock.advance(Duration::from_nanos(99_999_999));
    assert!(lim.check().is_err(), "one nanosecond before T");
    clock.advance(Duration::from_nanos(1));
    assert!(lim.check().is_ok(), "exactly at T: boundary conforms");
}

#[test]
fn denial_changes_nothing() {
    let (lim, clock) = limiter(Quota::per_second(2).unwrap());
    lim.check_n(2).unwrap();
    for _ in 0..100 {
        assert!(lim.check().is_err());
    }
    clock.advance(ms(500));
    assert!(lim.check().is_ok(), "denials did not push the bucket further ahead");
}

#[test]
fn cost_zero_is_a_peek() {
    let (lim, _) = limiter(Quota::per_second(4).unwrap());
    assert_eq!(lim.check_n(0).unwrap().remaining(), 4);
    lim.check_n(4).unwrap();
    let peek = lim.check_n(0).unwrap();
    assert_eq!(peek.remaining(), 0);
    assert_eq!(peek.reset_after(), Duration::from_secs(1));
}

#[test]
fn cost_above_burst_is_denied_without_retry_time() {
    let (lim, _) = limiter(Quota::per_second(4).unwrap());
    let d = lim.check_n(5).unwrap_err();
    assert_eq!(d.retry_after(), None);
    assert_eq!(d.remaining(), 4);
    assert_eq!(lim.check_n(4).unwrap().remaining(), 0, "state untouched");
}

#[test]
fn reports_follow_the_formulas() {
    // T = 250 ms, tau = 1 s.
    let (lim, clock) = limiter(Quota::per_second(4).unwrap());
    let ok = lim.check_n(3).unwrap();
    assert_eq!(ok.remaining(), 1);
    assert_eq!(ok.reset_after(), ms(750));
    clock.advance(ms(100)); // TAT' - t = 650 ms
    let no = lim.check_n(3).unwrap_err();
    assert_eq!(no.remaining(), 1); // floor((1000 - 650) / 250)
    assert_eq!(no.reset_after(), ms(650));
    assert_eq!(no.retry_after(), Some(ms(400))); // 650 + 750 - 1000
    clock.advance(ms(400));
    assert_eq!(lim.check_n(3).unwrap().reset_after(), ms(1000));
}

#[test]
fn retry_after_is_enough_and_not_more_than_needed() {
    let (lim, clock) = limiter(Quota::new(7, ms(1000), 3).unwrap());
    lim.check_n(3).unwrap();
    let wait = lim.check_n(2).unwrap_err().retry_after().unwrap();
    clock.advance(wait - Duration::from_nanos(1));
    assert!(lim.check_n(2).is_err());
    clock.advance(Duration::from_nanos(1));
    assert!(lim.check_n(2).is_ok());
}

/// Polls at irregular times, taking everything that conforms each time. With a burst of at least
/// 2 and polls at most `T` apart the bucket never runs empty, so after a poll at time `t` exactly
/// `floor(t / T) + burst` units have been admitted: no more, no less, however long it runs.
fn drain_exactly(count: u64, period_ns: u64, burst: u64, step_ns: u64, steps: u64) {
    let q = Quota::new(count, Duration::from_nanos(period_ns), burst).unwrap();
    let (lim, clock) = limiter(q);
    let mut admitted: u128 = 0;
    let mut now: u128 = 0;
    for i in 0..=steps {
        while lim.check().is_ok() {
            admitted += 1;
        }
        let expected = now * u128::from(count) / u128::from(period_ns) + u128::from(burst);
        assert_eq!(admitted, expected, "at t = {now} ns (poll {i})");
        now += u128::from(step_ns);
        clock.advance(Duration::from_nanos(step_ns));
    }
}

#[test]
fn fractional_rate_never_drifts() {
    // T = 1/3 s is not a whole number of nanoseconds; ~28 hours of polls 99.99 ms apart.
    drain_exactly(3, 1_000_000_000, 2, 99_999_937, 1_000_000);
}

#[test]
fn odd_rates_never_drift() {
    drain_exactly(7, 1_000_000, 5, 142_857, 200_000); // T = 142857.14 ns
    drain_exactly(1_000_003, 1_000_000_000, 3, 997, 200_000); // T = 999.997 ns
}

#[test]
fn very_high_rates_never_drift() {
    // 10^10 per second: T = 0.1 ns, ten units a nanosecond.
    drain_exactly(10_000_000_000, 1_000_000_000, 100, 3, 100_000);
}

#[test]
fn clock_moving_backwards_never_admits_more() {
    let (lim, clock) = limiter(Quota::per_second(2).unwrap());
    clock.set(Duration::from_secs(10));
    lim.check_n(2).unwrap();
    clock.set(Duration::from_secs(3));
    assert!(lim.check().is_err());
    clock.set(Duration::ZERO);
    assert!(lim.check().is_err());
    clock.set(Duration::from_secs(10));
    assert!(lim.check().is_err());
    clock.advance(ms(500));
    assert!(lim.check().is_ok());
    assert!(lim.check().is_err());
}

#[test]
fn clock_moving_backwards_mid_burst_leaves_the_state_of_the_latest_time() {
    let (lim, clock) = limiter(Quota::per_second(4).unwrap());
    clock.set(Duration::from_secs(5));
    lim.check().unwrap();
    clock.set(Duration::from_secs(4)); // TAT - t = 1.25 s > tau: denied
    assert!(lim.check().is_err());
    clock.set(ms(4_900)); // TAT - t = 350 ms: 2 more conform, as they would at 5 s...
    lim.check_n(2).unwrap();
    clock.set(Duration::from_secs(5)); // ...and at 5 s exactly one remains.
    assert_eq!(lim.check().unwrap().remaining(), 0);
    assert!(lim.check().is_err());
}

#[test]
fn end_of_clock_range_saturates_and_denies() {
    let (lim, clock) = limiter(Quota::per_second(1000).unwrap());
    clock.set(Duration::MAX);
    let d = lim.check().unwrap_err();
    assert_eq!(d.retry_after(), None);
    clock.set(Duration::from_nanos(u64::MAX));
    assert!(lim.check().is_err());
}

#[test]
fn a_century_of_clock_at_a_billion_per_second() {
    let (lim, clock) = limiter(Quota::per_second(1_000_000_000).unwrap().with_burst(2).unwrap());
    clock.set(Duration::from_secs(100 * 365 * 24 * 3600));
    lim.check_n(2).unwrap();
    assert!(lim.check().is_err());
    clock.advance(Duration::from_nanos(1));
    assert!(lim.check().is_ok());
}

#[test]
fn bad_quotas_are_errors() {
    assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroCount));
    assert_eq!(Quota::new(1, Duration::ZERO, 1), Err(QuotaError::ZeroPeriod));
    assert_eq!(Quota::new(1, ms(1), 0), Err(QuotaError::ZeroBurst));
    assert_eq!(Quota::per_second(5).unwrap().with_burst(0), Err(QuotaError::ZeroBurst));
    assert_eq!(Quota::new(1, Duration::MAX, 1), Err(QuotaError::PeriodTooLong));
    assert_eq!(Quota::per_second(u64::MAX), Err(QuotaError::RateTooHigh));
    assert_eq!(Quota::new(1, Duration::from_secs(3600), u64::MAX), Err(QuotaError::BurstTooLarge));
    for e in [QuotaError::ZeroCount, QuotaError::RateTooHigh, QuotaError::BurstTooLarge] {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn limiter_is_send_and_sync_and_shared_by_reference() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Limiter>();
    assert_send_sync::<Limiter<ManualClock>>();
    let (lim, _) = limiter(Quota::per_second(1000).unwrap());
    let admitted = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..1000 {
                    if lim.check().is_ok() {
                        admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(admitted.into_inner(), 1000, "exactly the burst, clock stopped");
}
