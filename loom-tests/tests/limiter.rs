//! Loom models of `Limiter::check_n`: every interleaving of 2-3 threads admits exactly what some
//! sequential order of the same requests would admit, and leaves the state that order leaves.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release`.
#![cfg(loom)]

use leakgate::{Limiter, ManualClock};
use leakgate_loom_tests::{model, per_second};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

#[test]
fn racing_checks_admit_exactly_the_burst() {
    model(|| {
        let lim = Arc::new(Limiter::with_clock(per_second(2), ManualClock::new()));
        let admitted = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (lim, admitted) = (lim.clone(), admitted.clone());
                thread::spawn(move || {
                    if lim.check().is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(admitted.load(Ordering::Relaxed), 2);
        // The state is what two sequential admissions leave: full, reset after two intervals.
        let peek = lim.check_n(0).unwrap();
        assert_eq!(peek.remaining(), 0);
        assert_eq!(peek.reset_after(), Duration::from_secs(2));
    });
}

#[test]
fn racing_costs_are_linearizable() {
    // Burst 3: costs 2 and 2 cannot both conform; whichever wins, exactly one does, and the loser's
    // remaining() is 1. A cost of 1 conforms in every order.
    model(|| {
        let lim = Arc::new(Limiter::with_clock(per_second(3), ManualClock::new()));
        let handles: Vec<_> = [2u64, 2, 1]
            .into_iter()
            .map(|n| {
                let lim = lim.clone();
                thread::spawn(move || lim.check_n(n).map(|_| n).unwrap_or(0))
            })
            .collect();
        let admitted: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let total: u64 = admitted.iter().sum();
        assert_eq!(admitted[2], 1, "a cost of 1 fits after any single cost of 2");
        assert_eq!(total, 3, "{admitted:?}");
        assert_eq!(lim.check_n(0).unwrap().reset_after(), Duration::from_secs(3));
    });
}

#[test]
fn check_racing_with_the_clock_never_exceeds_the_quota() {
    // The bucket starts full (TAT = 2 s at t = 0). One thread moves the clock to 1 s while two
    // threads each ask for one unit: exactly one interval has leaked, so at most one conforms,
    // and the final state is what the admitted requests leave.
    model(|| {
        let clock = ManualClock::new();
        let lim = Arc::new(Limiter::with_clock(per_second(2), clock.clone()));
        lim.check_n(2).unwrap();
        let mover = thread::spawn(move || clock.set(Duration::from_secs(1)));
        let checkers: Vec<_> = (0..2)
            .map(|_| {
                let lim = lim.clone();
                thread::spawn(move || lim.check().is_ok() as u64)
            })
            .collect();
        mover.join().unwrap();
        let admitted: u64 = checkers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(admitted <= 1);
        let reset = lim.check_n(0).unwrap().reset_after();
        assert_eq!(reset, Duration::from_secs(1 + admitted));
    });
}

#[test]
fn peek_recording_time_races_safely_with_admission() {
    // An idle bucket with burst 2: one thread moves the clock to 5 s and peeks there (raising TAT
    // to 5 s), another asks for one unit at whatever time it reads. A checker that read t = 0
    // before the peek may then be denied: the limiter has seen 5 s, so its stale reading is a
    // clock gone backwards, and denial is the conservative answer. Whatever the interleaving, the
    // clock moving back to 0 and forward to 5 s again never gets more than the burst through.
    model(|| {
        let clock = ManualClock::new();
        let lim = Arc::new(Limiter::with_clock(per_second(2), clock.clone()));
        let peeker = {
            let (lim, clock) = (lim.clone(), clock.clone());
            thread::spawn(move || {
                clock.set(Duration::from_secs(5));
                lim.check_n(0).unwrap();
            })
        };
        let checker = {
            let lim = lim.clone();
            thread::spawn(move || lim.check().is_ok() as u64)
        };
        peeker.join().unwrap();
        let mut admitted = checker.join().unwrap();
        for t in [0, 5] {
            clock.set(Duration::from_secs(t));
            while lim.check().is_ok() {
                admitted += 1;
            }
        }
        // 3 when the checker's unit went in at t = 0 before the limiter saw 5 s (it has leaked
        // by 5 s, so a full burst follows); 2 when it went in at 5 s, or was denied for reading a
        // time behind one the limiter had seen. Never more: at 5 s the bucket holds only the burst.
        assert!((2..=3).contains(&admitted), "{admitted} admitted");
        assert_eq!(lim.check_n(0).unwrap().reset_after(), Duration::from_secs(2));
    });
}
