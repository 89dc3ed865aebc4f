//! The tokio `until_ready_n` future dropped at random points (timeouts, aborts),
//! on tokio's paused virtual clock, which the limiter also reads. The waits that completed must
//! conform to the exact GCRA; refunds must leave no lost units.
#![cfg(feature = "tokio")]

use leakgate::{Clock, Limiter, Quota};
use leakgate_test_support::Rng;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone)]
struct TokioClock(Instant);
impl Clock for TokioClock {
    fn now_ns(&self) -> u64 {
        Instant::now().duration_since(self.0).as_nanos() as u64
    }
}

fn replay(q: Quota, mut events: Vec<(u64, u64)>) -> Result<(), String> {
    events.sort();
    let count = u128::from(q.count());
    let t = q.period().as_nanos();
    let tau = u128::from(q.burst()) * t;
    let mut tat = 0u128;
    for &(at, n) in &events {
        let at_s = u128::from(at) * count;
        tat = tat.max(at_s) + u128::from(n) * t;
        if tat - at_s > tau + count {
            return Err(format!("{n} at {at} ns exceeds the quota {q}"));
        }
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn dropped_waits_never_let_more_through() {
    for seed in 1..40u64 {
        let q = match seed % 3 {
            0 => Quota::per_second(10).unwrap().with_burst(3).unwrap(),
            1 => Quota::new(4, Duration::from_secs(1), 1).unwrap(), // whole-ms T: tokio's timer wakes on ms ticks
            _ => Quota::new(5, Duration::from_millis(700), 4).unwrap(),
        };
        let clock = TokioClock(Instant::now());
        let lim = Arc::new(Limiter::with_clock(q, clock.clone()));
        let kept = Arc::new(Mutex::new(Vec::new()));
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut handles = Vec::new();
        for _ in 0..60 {
            let (lim, kept, clock) = (lim.clone(), kept.clone(), clock.clone());
            let start = Duration::from_millis(rng.next() % 5_000);
            let limit = Duration::from_millis(rng.next() % 3_000);
            let n = 1 + rng.next() % q.burst();
            let abort_at =
                rng.next().is_multiple_of(4).then(|| Duration::from_millis(rng.next() % 8_000));
            let h = tokio::spawn(async move {
                tokio::time::sleep(start).await;
                if let Ok(Ok(())) = tokio::time::timeout(limit, lim.until_ready_n(n)).await {
                    kept.lock().unwrap().push((clock.now_ns(), n));
                }
            });
            if let Some(at) = abort_at {
                let ah = h.abort_handle();
                tokio::spawn(async move {
                    tokio::time::sleep(at).await;
                    ah.abort();
                });
            }
            handles.push(h);
        }
        for h in handles {
            let _ = h.await;
        }
        let events = kept.lock().unwrap().clone();
        replay(q, events).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// A lone waiter dropped before its time gives everything back.
#[tokio::test(start_paused = true)]
async fn a_dropped_last_waiter_loses_nothing() {
    let q = Quota::per_second(1).unwrap();
    let clock = TokioClock(Instant::now());
    let lim = Limiter::with_clock(q, clock.clone());
    lim.until_ready_n(1).await.unwrap(); // t = 0
    let r = tokio::time::timeout(Duration::from_millis(500), lim.until_ready_n(1)).await;
    assert!(r.is_err());
    // Refunded: the next wait is due at 1 s, not 2 s.
    lim.until_ready_n(1).await.unwrap();
    assert_eq!(clock.now_ns(), 1_000_000_000);
}

/// Many waiters dropped from the back, one by one: the queue empties fully.
#[tokio::test(start_paused = true)]
async fn waiters_dropped_back_to_front_restore_the_bucket() {
    let q = Quota::per_second(2).unwrap().with_burst(1).unwrap();
    let clock = TokioClock(Instant::now());
    let lim = Arc::new(Limiter::with_clock(q, clock.clone()));
    lim.until_ready_n(1).await.unwrap();
    let mut hs = Vec::new();
    for i in 0..5u64 {
        let lim = lim.clone();
        hs.push(tokio::spawn(async move { lim.until_ready_n(1).await }));
        tokio::task::yield_now().await; // each is polled, in order: places 0.5, 1.0, ... s
        let _ = i;
    }
    for h in hs.iter().rev() {
        h.abort();
        tokio::task::yield_now().await;
    }
    for h in hs {
        let _ = h.await;
    }
    assert!(lim.check().is_err(), "the first place (0.5 s) is still one interval away");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(lim.check().is_ok(), "everything queued was given back");
}

/// Regression: the place used to be taken at the first poll, so two futures created in order and
/// polled in reverse got reversed places. It is taken at the call.
#[tokio::test(start_paused = true)]
async fn places_follow_call_order_not_first_poll() {
    let q = Quota::per_second(1).unwrap().with_burst(1).unwrap();
    let clock = TokioClock(Instant::now());
    let lim = Limiter::with_clock(q, clock.clone());
    let first = lim.until_ready_n(1); // called first
    let second = lim.until_ready_n(1); // called second
    let done = std::sync::Mutex::new(Vec::new());
    let (a, b) = (
        async {
            first.await.unwrap();
            done.lock().unwrap().push(("first", clock.now_ns()));
        },
        async {
            second.await.unwrap();
            done.lock().unwrap().push(("second", clock.now_ns()));
        },
    );
    tokio::join!(b, a); // join polls `b` (the second call) first
    let done = done.into_inner().unwrap();
    assert_eq!(done[0].0, "first", "served in order of the calls: {done:?}");
}
