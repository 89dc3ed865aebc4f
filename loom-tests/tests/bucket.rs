//! Loom models of the bucket protocol's contended paths (`src/bucket.rs`): after a lost CAS a
//! request takes its place with `fetch_add` and takes an overshooting charge back. Under loom the
//! add path needs no spare room, so every lost CAS takes it and every overshoot is explored.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release`.
#![cfg(loom)]

use leakgate::{Limiter, ManualClock};
use leakgate_loom_tests::{model, per_second};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

fn reset_secs(lim: &Limiter<ManualClock>) -> u64 {
    let reset = lim.check_n(0).unwrap().reset_after();
    assert_eq!(reset.subsec_nanos(), 0, "whole intervals only: {reset:?}");
    reset.as_secs()
}

#[test]
fn racing_adds_never_admit_more_than_the_burst() {
    // Burst 3, costs 2, 1 and 1 on a frozen clock: every order the model tries either admits
    // 3 units exactly or, when an overshooting charge is seen by a racer before it is taken back,
    // fewer. The word never shows less than what was admitted, and an overshoot left in place
    // (its undo gave up) is at most its own cost.
    model(|| {
        let lim = Arc::new(Limiter::with_clock(per_second(3), ManualClock::new()));
        let handles: Vec<_> = [2u64, 1, 1]
            .into_iter()
            .map(|n| {
                let lim = lim.clone();
                thread::spawn(move || lim.check_n(n).map(|_| n).unwrap_or(0))
            })
            .collect();
        let admitted: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert!((1..=3).contains(&admitted), "{admitted} admitted");
        let state = reset_secs(&lim);
        assert!(state >= admitted && state <= admitted + 2, "state {state}, admitted {admitted}");
    });
}

#[test]
fn adds_on_an_idle_bucket_start_at_the_time_they_were_asked() {
    // An idle bucket (last admission long ago) with burst 2 at t = 10 s: two racing requests. The
    // loser of the CAS raises the word to 10 s before adding, so however they interleave the
    // state is 10 s + 2 intervals: nothing is charged before the time it was asked at.
    model(|| {
        let clock = ManualClock::new();
        let lim = Arc::new(Limiter::with_clock(per_second(2), clock.clone()));
        lim.check().unwrap();
        clock.set(Duration::from_secs(10));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let lim = lim.clone();
                thread::spawn(move || lim.check().is_ok() as u64)
            })
            .collect();
        let admitted: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(admitted, 2);
        assert_eq!(reset_secs(&lim), 2);
    });
}

#[test]
fn a_reservation_cancelled_while_a_check_adds_never_over_admits() {
    // Full bucket (burst 1, TAT = 1 s at t = 0); a reservation takes the next place (due at
    // 1 s) and is cancelled while a checker and a reserver race for places at t = 0. Whatever
    // happens, at most one unit is due by 1 s, and the word never shows less than that.
    model(|| {
        // A std `Arc`: an owned reservation holds one (loom's cannot coerce to a trait object).
        let lim = std::sync::Arc::new(Limiter::with_clock(per_second(1), ManualClock::new()));
        lim.check().unwrap();
        let r = lim.reserve_n_owned(1, Duration::from_secs(5)).unwrap();
        let canceller = thread::spawn(move || r.cancel() as u64);
        let reserver = {
            let lim = lim.clone();
            thread::spawn(move || lim.reserve(Duration::from_secs(5)).map(|r| r.ready_at()).ok())
        };
        let cancelled = canceller.join().unwrap();
        let place = reserver.join().unwrap().expect("a 5 s queue has room");
        // Kept in the queue: the first check, the reservation unless cancelled, the reserver.
        let kept = 1 + (1 - cancelled) + 1;
        assert!(place >= Duration::from_secs(1), "never before the first interval: {place:?}");
        assert_eq!(reset_secs(&lim), kept);
    });
}
