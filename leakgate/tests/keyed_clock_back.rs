//! Regressions: a keyed bucket's peek and oversized requests record the time they saw, as a
//! `Limiter`'s do, so a clock that then goes back gets no more for the key than its own `Limiter`
//! would. (The keyed copy of the CAS loop had lost that step; every bucket now shares one
//! protocol, `bucket.rs`.)

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `leakgate::docs`: keyed.check/check_n give "same results as Limiter", and with a clock moving
/// backwards the limiter "never admits more than it would have at the latest time it has seen".
/// A peek (n = 0) at a late time, then the clock goes back: Limiter holds, KeyedLimiter does not.
#[test]
fn keyed_peek_records_the_time_so_a_clock_going_back_gets_no_more_than_a_limiter() {
    let q = Quota::per_second(1).unwrap();
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    let keyed = KeyedLimiter::<u64, _>::with_clock(q, clock.clone());
    let mut got = (0, 0);
    let mut step = |t: u64, n: u64| {
        clock.set(ms(t));
        got.0 += u64::from(lim.check_n(n).is_ok() && n > 0);
        got.1 += u64::from(keyed.check_n(&7, n).is_ok() && n > 0);
    };
    step(0, 1); // both admit: TAT = 1 s
    step(100_000, 0); // peek at 100 s
    step(50_000, 1); // clock back to 50 s
    step(100_000, 1); // back at the latest time
    assert_eq!(got.0, 2, "Limiter: 1 at 0 s, then 1 at the latest time 100 s");
    assert_eq!(got.1, got.0, "KeyedLimiter admitted more than Limiter");
}

/// Same with a cost above the burst (also takes nothing, also records the time in Limiter).
#[test]
fn keyed_oversized_request_records_the_time_so_a_clock_going_back_gets_no_more_than_a_limiter() {
    let q = Quota::per_second(1).unwrap();
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    let keyed = KeyedLimiter::<u64, _>::with_clock(q, clock.clone());
    let mut got = (0, 0);
    for (t, n) in [(0, 1), (100_000, 5), (50_000, 1), (100_000, 1)] {
        clock.set(ms(t));
        got.0 += u64::from(lim.check_n(n).is_ok());
        got.1 += u64::from(keyed.check_n(&7, n).is_ok());
    }
    assert_eq!(got.1, got.0, "KeyedLimiter admitted more than Limiter");
}
