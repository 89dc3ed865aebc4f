//! Many threads on one limiter with the real clock: never more than the quota, and demand above
//! the rate is served at the rate, not starved. Bounds only; no timing is asserted.

use leakgate::{Clock, Limiter, Quota, TscClock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Hammers one limiter from `threads` threads for about `run`, returning per-thread admissions and
/// the elapsed clock time (read from the limiter's own clock, so the bound is exact).
fn hammer(quota: Quota, threads: usize, run: Duration) -> (Vec<u64>, Duration) {
    let clock = TscClock::new();
    let lim = Limiter::with_clock(quota, clock.clone());
    let start = clock.now_ns();
    let stop_at = start + run.as_nanos() as u64;
    let end = AtomicU64::new(0);
    let per_thread = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut admitted = 0u64;
                    while clock.now_ns() < stop_at {
                        for _ in 0..64 {
                            admitted += lim.check().is_ok() as u64;
                        }
                    }
                    end.fetch_max(clock.now_ns(), Ordering::Relaxed);
                    admitted
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    (per_thread, Duration::from_nanos(end.into_inner() - start))
}

fn assert_within_quota(quota: Quota, threads: usize, run: Duration, served: bool) {
    let (per_thread, elapsed) = hammer(quota, threads, run);
    let admitted: u64 = per_thread.iter().sum();
    let rate = quota.count() as f64 / quota.period().as_secs_f64();
    let allowed = quota.burst() as f64 + rate * elapsed.as_secs_f64();
    assert!(
        admitted as f64 <= allowed.floor() + 1.0,
        "{admitted} admitted, quota allows {allowed}"
    );
    // Demand is far above the rate, so the rate is served: at least half of it, even on a loaded
    // 2-core machine where threads are descheduled (a loose bound, not a timing). Only with a
    // burst that spans scheduling gaps: with burst 1, time in which every thread is descheduled is
    // lost by design (GCRA re-anchors an idle bucket), so only the upper bound holds there.
    if served {
        assert!(admitted as f64 >= allowed / 2.0, "starved: {admitted} of {allowed}");
    }
    assert!(per_thread.iter().all(|&n| n > 0), "a thread got nothing: {per_thread:?}");
}

#[test]
fn four_threads_never_exceed_the_quota() {
    assert_within_quota(Quota::per_second(10_000).unwrap(), 4, Duration::from_millis(300), true);
}

#[test]
fn small_burst_under_contention() {
    let q = Quota::new(5_000, Duration::from_secs(1), 1).unwrap();
    assert_within_quota(q, 3, Duration::from_millis(300), false);
}

#[test]
#[ignore = "long stress run: cargo test --release --test stress -- --ignored"]
fn sixteen_threads_for_five_seconds() {
    assert_within_quota(Quota::per_second(1_000_000).unwrap(), 16, Duration::from_secs(5), true);
    let odd = Quota::new(7, Duration::from_millis(3), 11).unwrap();
    assert_within_quota(odd, 16, Duration::from_secs(5), false);
}
