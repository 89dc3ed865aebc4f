//! Byte quotas end to end: a packet of `L` bytes is `check_n(L)`, exact in bits and bytes, and a
//! 400 Gbit/s line keeps its exactness for at least 10 years of clock.

use leakgate::{Limiter, ManualClock, Quota, QuotaError};
use std::time::Duration;

/// 365.25 days.
const YEAR_NS: u64 = 31_557_600_000_000_000;

fn limiter(quota: &str) -> (Limiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (Limiter::with_clock(quota.parse::<Quota>().unwrap(), clock.clone()), clock)
}

#[test]
fn a_400_gbit_line_is_exact_after_ten_years_and_saturates_past_its_range() {
    // 5e10 bytes a second: 50 bytes a nanosecond, one unit of clock per byte.
    let (lim, clock) = limiter("400 Gbit/s burst 1 MB");
    for years_tenths in [0, 100, 116] {
        clock.set(Duration::from_nanos(years_tenths * YEAR_NS / 10));
        clock.advance(Duration::from_secs(1)); // the bucket is idle: full again
        assert!(lim.check_n(1_000_000).is_ok(), "{years_tenths}");
        assert!(lim.check_n(1).is_err(), "{years_tenths}");
        clock.advance(Duration::from_nanos(30)); // 1500 bytes drain in 30 ns exactly
        assert_eq!(lim.check_n(1500).map(|ok| ok.remaining()), Ok(0), "{years_tenths}");
        assert!(lim.check_n(1).is_err(), "{years_tenths}");
    }
    // Past 2^64 bytes of clock (11.69 years) the clock saturates: everything is refused, and
    // nothing panics or wraps.
    clock.set(Duration::from_nanos(12 * YEAR_NS));
    assert!(lim.check_n(1500).is_err());
}

#[test]
fn bits_are_exact_bytes() {
    // 1 bit/s is one byte every 8 seconds.
    let (lim, clock) = limiter("1 bit/s");
    assert!(lim.check_n(1).is_ok());
    clock.advance(Duration::from_nanos(8_000_000_000 - 1));
    assert!(lim.check_n(1).is_err());
    clock.advance(Duration::from_nanos(1));
    assert!(lim.check_n(1).is_ok());
    // 1 Gbit/s is 125,000,000 bytes a second: a 1500-byte packet every 12 us.
    let (lim, clock) = limiter("1 Gbit/s burst 1500 B");
    for _ in 0..1000 {
        assert!(lim.check_n(1500).is_ok());
        assert!(lim.check_n(1).is_err());
        clock.advance(Duration::from_micros(12));
    }
}

#[test]
fn the_range_is_stated_and_refused_beyond() {
    assert!(Quota::bits_per_second(400_000_000_000).is_ok());
    assert_eq!(Quota::bits_per_second(400_000_000_008), Err(QuotaError::ByteRateTooHigh));
    assert_eq!(Quota::bits_per_second(u64::MAX), Err(QuotaError::ByteRateTooHigh));
    assert_eq!(Quota::bytes_per_second(u64::MAX), Err(QuotaError::ByteRateTooHigh));
    // The same numbers as a count quota keep the wider range of those (10^11 a second).
    assert!(Quota::per_second(60_000_000_000).is_ok());
    assert!(QuotaError::ByteRateTooHigh.to_string().contains("400 Gbit/s"));
    // A burst that would leave less than 10 years of clock at 400 Gbit/s.
    let q = Quota::bytes_per_second(50_000_000_000).unwrap();
    assert!(q.with_burst(2_000_000_000_000_000_000).is_ok());
    assert_eq!(q.with_burst(3_000_000_000_000_000_000), Err(QuotaError::BurstTooLarge));
}
