//! Loom models of reservations: racing reserves get distinct, FIFO places; a cancel racing with
//! reserves, checks, other cancels and a moving clock undoes its reservation only while it is the
//! last one granted, and never frees a place that a kept request stands on. Every model ends by
//! replaying what was kept, plus a final full-burst reservation, through the exact GCRA: all of it
//! must conform.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release --test queue`.
#![cfg(loom)]

use leakgate::{Limiter, ManualClock, Quota};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// One per second (`T` = 1 s, so every time below is a whole number of seconds), with the given
/// burst already used up at time 0.
fn full_limiter(burst: u64) -> (Limiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let q = Quota::per_second(1).unwrap().with_burst(burst).unwrap();
    let lim = Limiter::with_clock(q, clock.clone());
    lim.check_n(burst).unwrap();
    (lim, clock)
}

/// A kept release: when (whole seconds) and how many units.
type Release = (u64, u64);

fn secs(d: Duration) -> u64 {
    assert_eq!(d.subsec_nanos(), 0, "T is a whole second");
    d.as_secs()
}

/// Reserves `n` without bound; returns the reservation's release.
fn reserve(lim: &Limiter<ManualClock>, n: u64) -> Release {
    (secs(lim.reserve_n(n, Duration::MAX).unwrap().ready_at()), n)
}

/// Adds a final reservation of a whole burst (so that a state left too low is caught) and replays
/// everything through the GCRA with `T` = 1 s: each release must conform.
fn assert_conforms(lim: &Limiter<ManualClock>, burst: u64, mut kept: Vec<Release>) {
    kept.push((0, burst)); // the burst used up at time 0
    kept.push(reserve(lim, burst));
    kept.sort_unstable();
    let mut tat = 0;
    for &(at, n) in &kept {
        tat = tat.max(at) + n;
        assert!(tat - at <= burst, "{kept:?} exceeds a burst of {burst}");
    }
}

#[test]
fn racing_reservations_get_distinct_fifo_places() {
    model(|| {
        let (lim, _) = full_limiter(1);
        let lim = Arc::new(lim);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let lim = lim.clone();
                thread::spawn(move || [reserve(&lim, 1), reserve(&lim, 1)])
            })
            .collect();
        let mut times = Vec::new();
        for t in threads {
            let [a, b] = t.join().unwrap();
            assert!(a.0 < b.0, "a thread's places are in its own order");
            times.extend([a.0, b.0]);
        }
        times.sort_unstable();
        assert_eq!(times, [1, 2, 3, 4], "one interval apart, none shared, none skipped");
    });
}

#[test]
fn cancel_racing_with_reserve_is_undone_only_while_last() {
    model(|| {
        let (lim, _) = full_limiter(2);
        let lim = Arc::new(lim);
        let canceller = {
            let lim = lim.clone();
            thread::spawn(move || {
                let r = lim.reserve_n(2, Duration::MAX).unwrap();
                let release = (secs(r.ready_at()), 2);
                (release, r.cancel())
            })
        };
        let other = {
            let lim = lim.clone();
            thread::spawn(move || reserve(&lim, 1))
        };
        let (mine, undone) = canceller.join().unwrap();
        let theirs = other.join().unwrap();
        // Undone exactly when no reservation came after it: the other one went first (it is
        // earlier), or came after the cancel (then it took the freed place, at 1 s).
        let other_was_after_and_kept_it = theirs.0 > mine.0;
        assert_eq!(undone, !other_was_after_and_kept_it, "mine {mine:?}, theirs {theirs:?}");
        let mut kept = vec![theirs];
        if !undone {
            kept.push(mine);
        }
        assert_conforms(&lim, 2, kept);
    });
}

#[test]
fn racing_cancels_never_free_a_held_place() {
    model(|| {
        let (lim, _) = full_limiter(2);
        let lim = Arc::new(lim);
        let threads: Vec<_> = [2, 1]
            .into_iter()
            .map(|n| {
                let lim = lim.clone();
                thread::spawn(move || {
                    let r = lim.reserve_n(n, Duration::MAX).unwrap();
                    let release = (secs(r.ready_at()), n);
                    (!r.cancel()).then_some(release)
                })
            })
            .collect();
        let kept: Vec<Release> = threads.into_iter().filter_map(|t| t.join().unwrap()).collect();
        assert_conforms(&lim, 2, kept);
    });
}

#[test]
fn cancel_racing_with_a_check_as_the_clock_moves() {
    model(|| {
        let (lim, clock) = full_limiter(2);
        let lim = Arc::new(lim);
        let canceller = {
            let lim = lim.clone();
            thread::spawn(move || {
                let r = lim.reserve_n(1, Duration::MAX).unwrap();
                let release = (secs(r.ready_at()), 1);
                (!r.cancel()).then_some(release)
            })
        };
        let checker = {
            let lim = lim.clone();
            thread::spawn(move || {
                clock.advance(Duration::from_secs(1));
                lim.check().is_ok().then_some((1, 1)) // the only thread moving the clock
            })
        };
        let mut kept: Vec<Release> = canceller.join().unwrap().into_iter().collect();
        kept.extend(checker.join().unwrap());
        assert_conforms(&lim, 2, kept);
    });
}
