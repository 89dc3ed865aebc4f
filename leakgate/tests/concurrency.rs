//! `ConcurrencyLimiter` by behaviour: the bound under threads, first come first served, live
//! `set_max`, timeouts and dropped futures that give everything back.

use leakgate::{ConcurrencyLimiter, MAX_PERMITS};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn threads_never_hold_more_than_max() {
    let c = ConcurrencyLimiter::new(3).unwrap();
    let now = AtomicU32::new(0);
    let peak = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    if let Some(p) = c.try_acquire() {
                        let held = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(held, Ordering::SeqCst);
                        now.fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                    if let Some(p) = c.acquire_timeout(Duration::from_secs(5)) {
                        let held = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(held, Ordering::SeqCst);
                        now.fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                }
            });
        }
    });
    assert!(peak.load(Ordering::SeqCst) <= 3);
    assert_eq!(c.in_flight(), 0);
    assert_eq!(c.waiting(), 0);
}

#[test]
fn waiters_are_served_in_arrival_order() {
    let c = Arc::new(ConcurrencyLimiter::new(1).unwrap());
    let held = c.try_acquire_owned().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for i in 0..4 {
        let (c2, order) = (c.clone(), order.clone());
        threads.push(std::thread::spawn(move || {
            let p = c2.acquire_timeout(Duration::from_secs(30)).expect("served in time");
            order.lock().unwrap().push(i);
            drop(p);
        }));
        // Each is queued before the next starts.
        while c.waiting() < i + 1 {
            std::thread::yield_now();
        }
    }
    assert!(c.try_acquire().is_none(), "a newcomer does not overtake the queue");
    drop(held);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    assert_eq!(c.in_flight(), 0);
}

#[test]
fn a_large_head_is_not_overtaken_by_small_requests_behind_it() {
    let c = Arc::new(ConcurrencyLimiter::new(3).unwrap());
    let held = c.try_acquire_n(2).unwrap();
    std::thread::scope(|s| {
        let big = s.spawn(|| c.acquire_n_timeout(3, Duration::from_secs(30)).map(|p| p.count()));
        while c.waiting() < 1 {
            std::thread::yield_now();
        }
        // One permit is free, but the head needs three: the newcomer waits behind it.
        assert!(c.try_acquire().is_none());
        drop(held);
        assert_eq!(big.join().unwrap(), Some(3));
    });
    assert_eq!(c.in_flight(), 0);
}

#[test]
fn a_timed_out_waiter_leaves_nothing_behind() {
    let c = ConcurrencyLimiter::new(1).unwrap();
    let held = c.try_acquire().unwrap();
    assert!(c.acquire_timeout(Duration::from_millis(5)).is_none());
    assert_eq!(c.waiting(), 0);
    assert_eq!(c.in_flight(), 1);
    drop(held);
    assert!(c.try_acquire().is_some(), "the queue flag went down with the last waiter");
}

#[test]
fn raising_max_serves_waiters_and_lowering_revokes_nothing() {
    let c = ConcurrencyLimiter::new(1).unwrap();
    let held = c.try_acquire().unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| c.acquire_timeout(Duration::from_secs(30)).is_some());
        while c.waiting() < 1 {
            std::thread::yield_now();
        }
        c.set_max(2);
        assert!(waiter.join().unwrap());
    });
    c.set_max(0);
    assert_eq!(c.in_flight(), 1);
    assert!(c.try_acquire().is_none());
    drop(held);
    assert!(c.try_acquire().is_none(), "max 0 admits nothing");
    c.set_max(u32::MAX);
    assert_eq!(c.max(), MAX_PERMITS);
}

#[test]
fn requests_beyond_any_limit_are_refused_at_once() {
    let c = ConcurrencyLimiter::new(MAX_PERMITS).unwrap();
    assert!(c.try_acquire_n(u32::MAX).is_none());
    assert!(c.acquire_n_timeout(u32::MAX, Duration::from_secs(3600)).is_none());
    let all = c.try_acquire_n(MAX_PERMITS).unwrap();
    assert!(c.try_acquire().is_none());
    drop(all);
    assert_eq!(c.try_acquire_n(0).unwrap().count(), 0);
    assert!(c.acquire_timeout(Duration::MAX).is_some(), "a huge timeout does not overflow");
}

#[tokio::test]
async fn a_dropped_future_gives_back_its_place_and_its_permits() {
    let c = ConcurrencyLimiter::new(1).unwrap();
    let held = c.try_acquire().unwrap();
    // Waiting, then dropped: it leaves the queue.
    let timed_out = tokio::time::timeout(Duration::from_millis(5), c.acquire()).await;
    assert!(timed_out.is_err());
    assert_eq!(c.waiting(), 0);
    // Granted but never polled again, then dropped: the permit comes back.
    {
        let fut = std::pin::pin!(c.acquire());
        let mut fut = fut;
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        drop(held);
        assert_eq!(c.in_flight(), 1, "granted to the queued future");
    }
    assert_eq!(c.in_flight(), 0, "given back by its drop");
    assert_eq!(c.waiting(), 0);
    let p = c.acquire().await;
    assert_eq!(p.count(), 1);
}

use std::future::Future;

/// Regression: a refused `try_acquire_n` built a `Permit` anyway (`bool::then_some`), whose drop
/// gave back permits it never took.
#[test]
fn a_refusal_gives_back_nothing() {
    let c = ConcurrencyLimiter::new(2).unwrap();
    let held = c.try_acquire_n(2).unwrap();
    for _ in 0..3 {
        assert!(c.try_acquire().is_none());
        assert!(c.acquire_timeout(Duration::from_millis(1)).is_none());
    }
    assert_eq!(c.in_flight(), 2);
    drop(held);
    assert_eq!(c.in_flight(), 0);
}
