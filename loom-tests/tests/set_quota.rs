//! Loom models of a change of quota racing checks (issue 17): `Limiter::set_quota` and
//! `KeyedLimiter::set_quota` convert a bucket's state in place while checks go on, on a frozen
//! clock. No admission is lost or counted twice across the change: every admitted request is in
//! the level the new quota starts from, and the checks still running after the change decide on
//! the new quota. And a smaller burst and a larger one back, racing checks, never make more
//! units available than there were before them.
#![cfg(loom)]

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use leakgate_loom_tests::{model, per_second};
use loom::sync::Arc;
use loom::thread;

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

/// As `model`, with room for the few rounds a check spins while the change converts the word.
fn model_with_spins(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.max_branches = 20_000;
    builder.check(f);
}

#[test]
fn a_change_racing_two_checks_keeps_both_admissions() {
    model_with_spins(|| {
        // Two checks race each other (the add path under loom) and the change.
        let lim = Arc::new(Limiter::with_clock(per_second(3), ManualClock::new()));
        let checks: Vec<_> = (0..2)
            .map(|_| {
                let lim = lim.clone();
                thread::spawn(move || lim.check().is_ok())
            })
            .collect();
        let change = {
            let lim = lim.clone();
            thread::spawn(move || lim.set_quota(q("2/s burst 3")))
        };
        for check in checks {
            assert!(check.join().unwrap(), "the bucket had room for both");
        }
        change.join().unwrap();
        assert_eq!(lim.quota(), q("2/s burst 3"));
        assert_eq!(lim.peek(), 1, "both admissions counted once, whichever side of the change");
    });
}

#[test]
fn a_change_racing_a_keyed_check_keeps_its_admission() {
    model(|| {
        let clock = ManualClock::new();
        let keyed = Arc::new(KeyedLimiter::with_layout(per_second(3), 1, 4, clock));
        keyed.check(&1u64).unwrap();
        let check = {
            let keyed = keyed.clone();
            thread::spawn(move || keyed.check(&1u64).is_ok())
        };
        let change = {
            let keyed = keyed.clone();
            thread::spawn(move || keyed.set_quota(q("2/s burst 3")))
        };
        assert!(check.join().unwrap(), "key 1 had room");
        change.join().unwrap();
        assert_eq!(keyed.peek(&1u64), 1, "both admissions in the level carried over");
        assert_eq!(keyed.peek(&2u64), 3, "a new key starts empty under the new quota");
    });
}

#[test]
fn a_shrink_and_a_grow_back_racing_checks_hand_out_no_units() {
    model_with_spins(|| {
        // 2 of 3 units available; the changes may only keep or lose them.
        let lim = Arc::new(Limiter::with_clock(per_second(3), ManualClock::new()));
        lim.check().unwrap();
        let check = {
            let lim = lim.clone();
            thread::spawn(move || u64::from(lim.check().is_ok()) + u64::from(lim.check().is_ok()))
        };
        let changes = {
            let lim = lim.clone();
            thread::spawn(move || {
                lim.set_quota(q("3/s burst 1"));
                lim.set_quota(q("3/s burst 3"));
            })
        };
        let admitted = check.join().unwrap();
        changes.join().unwrap();
        assert!(admitted + lim.peek() <= 2, "{admitted} admitted, {} free: of 2", lim.peek());
    });
}

#[test]
fn a_keyed_shrink_and_grow_back_racing_a_check_hand_out_no_units() {
    model(|| {
        let keyed = Arc::new(KeyedLimiter::with_layout(per_second(3), 1, 4, ManualClock::new()));
        keyed.check(&1u64).unwrap();
        let check = {
            let keyed = keyed.clone();
            thread::spawn(move || u64::from(keyed.check(&1u64).is_ok()))
        };
        let changes = {
            let keyed = keyed.clone();
            thread::spawn(move || {
                keyed.set_quota(q("3/s burst 1"));
                keyed.set_quota(q("3/s burst 3"));
            })
        };
        let admitted = check.join().unwrap();
        changes.join().unwrap();
        let free = keyed.peek(&1u64);
        assert!(admitted + free <= 2, "{admitted} admitted, {free} free: of 2");
        assert!(keyed.peek(&2u64) <= 1, "a new key opens no fuller than an idle one: 1 of 3");
    });
}
