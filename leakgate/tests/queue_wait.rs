//! Waiting for a reservation: blocking waits that follow the limiter's clock, and (feature
//! `tokio`) async waits that give their units back when dropped early. Real-time tests are short
//! and assert bounds only, never exact timings.

use leakgate::{Clock, Limiter, ManualClock, Quota, TscClock, WaitPolicy};
use std::time::{Duration, Instant};

fn per_second(count: u64, burst: u64) -> Quota {
    Quota::per_second(count).unwrap().with_burst(burst).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn blocking_wait_follows_a_clock_moved_by_another_thread() {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(Quota::per_hour(1).unwrap(), clock.clone());
    lim.check().unwrap();
    let start = Instant::now();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| lim.wait_n(1));
        // Due in an hour of the manual clock: not before the clock gets there, whatever real
        // time passes, and soon after it does.
        std::thread::sleep(ms(30));
        assert!(!waiter.is_finished());
        clock.advance(Duration::from_secs(3599));
        std::thread::sleep(ms(30));
        assert!(!waiter.is_finished(), "one second of the manual clock is still to go");
        clock.advance(Duration::from_secs(1));
        assert!(waiter.join().unwrap().is_ok());
    });
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
}

#[test]
fn a_wait_that_is_due_returns_at_once() {
    let lim = Limiter::with_clock(per_second(1, 1), ManualClock::new());
    lim.wait_n(1).unwrap();
    assert!(lim.wait_n_timeout(1, ms(999)).is_err(), "would wait 1 s");
    assert!(lim.wait_n(2).unwrap_err().retry_after().is_none(), "above the burst");
    assert_eq!(lim.check_n(0).unwrap().reset_after(), Duration::from_secs(1), "took nothing");
}

#[test]
fn blocking_waits_on_the_real_clock_are_never_early_and_keep_the_rate() {
    let clock = TscClock::new();
    let lim = Limiter::with_clock(per_second(1000, 1), &clock);
    let start = Instant::now();
    for policy in [WaitPolicy::default(), WaitPolicy::new(Duration::ZERO)] {
        for _ in 0..10 {
            let r = lim.reserve(Duration::MAX).unwrap();
            let due = r.ready_at();
            r.wait_with(policy);
            assert!(Duration::from_nanos(clock.now_ns()) >= due, "released before its time");
        }
    }
    let elapsed = start.elapsed();
    assert!(elapsed >= ms(19), "20 releases 1 ms apart: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

#[cfg(feature = "tokio")]
mod async_wait {
    use super::*;
    use std::sync::Arc;

    /// A clock that reads tokio's time, so that a limiter follows tokio's paused test clock.
    struct TokioClock(tokio::time::Instant);

    impl TokioClock {
        fn new() -> Self {
            TokioClock(tokio::time::Instant::now())
        }
    }

    impl Clock for TokioClock {
        fn now_ns(&self) -> u64 {
            self.0.elapsed().as_nanos() as u64
        }
    }

    fn limiter(q: Quota) -> Limiter<TokioClock> {
        Limiter::with_clock(q, TokioClock::new())
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_when_its_time_comes_and_keeps_its_units() {
        let lim = limiter(per_second(1, 1));
        lim.until_ready_n(1).await.unwrap();
        let start = tokio::time::Instant::now();
        lim.until_ready_n(1).await.unwrap();
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(1) && waited <= ms(1001), "{waited:?}");
        assert_eq!(lim.check_n(0).unwrap().reset_after(), Duration::from_secs(1), "kept");
        assert!(lim.until_ready_n(2).await.is_err(), "above the burst");
        assert!(lim.until_ready_n_timeout(1, ms(500)).await.is_err(), "would wait 1 s");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_wait_before_its_time_gives_the_units_back() {
        let lim = limiter(per_second(1, 1));
        lim.check().unwrap();
        let waited = tokio::time::timeout(ms(10), lim.until_ready_n(1)).await;
        assert!(waited.is_err(), "the wait is 1 s; the timeout dropped it after 10 ms");
        assert_eq!(lim.check_n(0).unwrap().reset_after(), ms(990), "refunded");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_loses_a_select_frees_its_place_for_the_next() {
        let lim = limiter(per_second(10, 1));
        lim.check().unwrap();
        tokio::select! {
            _ = lim.until_ready_n(1) => panic!("due in 100 ms"),
            _ = tokio::time::sleep(ms(50)) => {}
        }
        let start = tokio::time::Instant::now();
        lim.until_ready_n(1).await.unwrap();
        assert_eq!(start.elapsed(), ms(50), "the place at 100 ms, not the one after");
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waits_go_in_order_at_the_rate() {
        let lim = Arc::new(limiter(per_second(10, 1)));
        let start = tokio::time::Instant::now();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let lim = lim.clone();
                tokio::spawn(async move {
                    lim.until_ready_n(1).await.unwrap();
                    start.elapsed()
                })
            })
            .collect();
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap());
        }
        assert_eq!(done, [0, 100, 200, 300].map(ms));
    }

    #[tokio::test]
    async fn real_time_waits_keep_the_rate() {
        let lim = Limiter::new(per_second(200, 1));
        let start = Instant::now();
        for _ in 0..5 {
            lim.until_ready_n(1).await.unwrap();
        }
        let elapsed = start.elapsed();
        assert!(elapsed >= ms(20) && elapsed < Duration::from_secs(2), "{elapsed:?}");
    }
}
