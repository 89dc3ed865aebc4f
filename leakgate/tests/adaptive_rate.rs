//! `AdaptiveRate` on a manual clock: a Retry-After is honoured to the nanosecond, backoff halves
//! once per period, recovery climbs back to the ceiling and no further, the bucket's level is
//! kept across every change, and a simulated partner whose capacity changes is followed.

use leakgate::{AdaptiveRate, ManualClock, Quota};
use std::time::Duration;

fn rate(s: &str) -> (AdaptiveRate<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (AdaptiveRate::with_clock(s.parse::<Quota>().unwrap(), clock.clone()).unwrap(), clock)
}

#[test]
fn a_retry_after_is_honoured_exactly() {
    let (r, clock) = rate("1000/s");
    r.overloaded(Some(Duration::from_millis(1500)));
    clock.advance(Duration::from_nanos(1_499_999_999));
    let denied = r.check().unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_nanos(1)));
    clock.advance(Duration::from_nanos(1));
    assert!(r.check().is_ok());
    // A shorter one while held does not cut the hold short; a longer one extends it.
    r.overloaded(Some(Duration::from_secs(10)));
    r.overloaded(Some(Duration::from_secs(1)));
    assert_eq!(r.check().unwrap_err().retry_after(), Some(Duration::from_secs(10)));
}

#[test]
fn a_huge_retry_after_saturates_instead_of_wrapping() {
    let (r, clock) = rate("10/s");
    clock.advance(Duration::from_secs(5));
    r.overloaded(Some(Duration::MAX));
    assert!(r.check().is_err());
    clock.advance(Duration::from_secs(1 << 30));
    assert!(r.check().is_err());
}

#[test]
fn backs_off_to_one_and_recovers_to_the_ceiling_and_no_further() {
    let (r, clock) = rate("100/s burst 20");
    for _ in 0..20 {
        r.overloaded(None);
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(r.quota().count(), 1, "never below one a period");
    assert_eq!(r.quota().burst(), 1);
    for _ in 0..19 {
        r.success();
    }
    assert_eq!(r.quota().count(), 96);
    r.success();
    r.success();
    assert_eq!(r.quota(), "100/s burst 20".parse().unwrap());
}

#[test]
fn a_change_keeps_the_bucket_level() {
    let (r, _clock) = rate("10/s");
    for _ in 0..10 {
        assert!(r.check().is_ok());
    }
    // Empty bucket: halving the quota must not mint new room.
    r.overloaded(None);
    assert!(r.check().is_err());
    r.success();
    assert!(r.check().is_err());
}

#[test]
fn follows_a_partner_whose_capacity_changes() {
    // The partner takes `cap` calls a second and answers 429 to the rest. The client calls as
    // fast as its rate allows, one second at a time.
    let (r, clock) = rate("200/s burst 20");
    let mut seconds = Vec::new();
    for second in 0..120 {
        let cap: u64 = match second {
            0..40 => 120,
            40..80 => 60,
            _ => 200,
        };
        let (mut served, mut refused) = (0u64, 0u64);
        for _ in 0..1000 {
            clock.advance(Duration::from_millis(1));
            if r.check().is_ok() {
                if served < cap {
                    served += 1;
                    r.success();
                } else {
                    refused += 1;
                    r.overloaded(None);
                }
            }
        }
        seconds.push((second, cap, served, refused));
    }
    for &(second, cap, served, _) in &seconds {
        // Settled: within 20% of what the partner takes (5 s after each change).
        if (5..40).contains(&second) || (45..80).contains(&second) || (85..120).contains(&second) {
            assert!(served * 5 >= cap * 4, "second {second}: served {served} of {cap}");
        }
    }
    let refused_settled: u64 = seconds.iter().filter(|s| s.0 >= 5).map(|s| s.3).sum();
    println!("429s once settled: {refused_settled} in 115 s");
}
