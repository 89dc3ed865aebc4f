//! Loom models of reservations: racing reserves get distinct, evenly spaced places, and a cancel
//! racing with reserves never frees a place that another reservation still holds.
#![cfg(loom)]

use leakgate::{Limiter, ManualClock, Quota};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// One per second, burst 1, with the first second's unit already taken.
fn busy_limiter() -> Limiter<ManualClock> {
    let lim = Limiter::with_clock(
        Quota::per_second(1).unwrap().with_burst(1).unwrap(),
        ManualClock::new(),
    );
    lim.check().unwrap();
    lim
}

/// Kept release times (in whole seconds) must be distinct seconds from 1 on: with burst 1 and
/// T = 1 s, two releases closer than 1 s would exceed the quota.
fn assert_spaced(mut secs: Vec<u64>) {
    secs.sort_unstable();
    for pair in secs.windows(2) {
        assert!(pair[1] >= pair[0] + 1, "releases too close: {secs:?}");
    }
    assert!(secs.iter().all(|&s| s >= 1), "a release in the already-used second: {secs:?}");
}

fn secs(d: Duration) -> u64 {
    assert_eq!(d.subsec_nanos(), 0);
    d.as_secs()
}

#[test]
fn racing_reservations_get_distinct_places() {
    model(|| {
        let lim = Arc::new(busy_limiter());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let lim = lim.clone();
                thread::spawn(move || secs(lim.reserve(Duration::MAX).unwrap().ready_at()))
            })
            .collect();
        let mut times: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        times.sort_unstable();
        assert_eq!(times, [1, 2], "FIFO places, one interval apart");
    });
}

#[test]
fn cancel_racing_with_reserve_never_frees_a_held_place() {
    model(|| {
        let lim = Arc::new(busy_limiter());
        let canceller = {
            let lim = lim.clone();
            thread::spawn(move || {
                let r = lim.reserve(Duration::MAX).unwrap();
                let at = secs(r.ready_at());
                (!r.cancel()).then_some(at) // kept if nothing was given back
            })
        };
        let reserver = {
            let lim = lim.clone();
            thread::spawn(move || secs(lim.reserve(Duration::MAX).unwrap().ready_at()))
        };
        let mut kept: Vec<u64> = canceller.join().unwrap().into_iter().collect();
        kept.push(reserver.join().unwrap());
        kept.push(secs(lim.reserve(Duration::MAX).unwrap().ready_at()));
        assert_spaced(kept);
    });
}
