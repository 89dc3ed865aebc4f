//! Loom models of `KeyedLimiter`'s races on a tiny table: a check racing with the reclamation of
//! its key's slot for another key, two inserts into one slot, and one key inserted twice at once.
//! One key's admission must never be charged to, or granted from, another key's bucket.
#![cfg(loom)]

use leakgate::{KeyedLimiter, ManualClock, Quota};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// One slot in all: every key competes for it.
fn one_slot(burst: u64, clock: ManualClock) -> KeyedLimiter<u64, ManualClock> {
    let q = Quota::per_second(1).unwrap().with_burst(burst).unwrap();
    KeyedLimiter::with_layout(q, 1, 1, clock)
}

#[test]
fn check_racing_with_reclamation_for_another_key() {
    model(|| {
        let clock = ManualClock::new();
        let lim = Arc::new(one_slot(1, clock.clone()));
        lim.check(&1).unwrap(); // key 1 busy until 1 s
        clock.set(Duration::from_secs(1)); // now idle: its slot may be reclaimed
        let a = {
            let lim = lim.clone();
            thread::spawn(move || lim.check(&1).is_ok())
        };
        let b = {
            let lim = lim.clone();
            thread::spawn(move || lim.check(&2).is_ok())
        };
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        // Exactly one gets the slot; the other is turned away, never charged to the winner.
        assert!(a ^ b, "key 1 admitted: {a}, key 2 admitted: {b}");
        assert_eq!(lim.overflow_denials(), 1);
        let snap = lim.snapshot();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[0].key, if a { 1 } else { 2 });
        assert_eq!(snap[0].remaining, 0, "the winner's bucket holds exactly its one admission");
        assert_eq!(snap[0].reset_after, Duration::from_secs(1));
    });
}

#[test]
fn two_new_keys_racing_for_one_slot() {
    model(|| {
        let lim = Arc::new(one_slot(1, ManualClock::new()));
        let handles: Vec<_> = [7u64, 8]
            .into_iter()
            .map(|key| {
                let lim = lim.clone();
                thread::spawn(move || lim.check(&key).is_ok())
            })
            .collect();
        let admitted: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(admitted.iter().filter(|&&a| a).count(), 1, "{admitted:?}");
        assert_eq!(lim.overflow_denials(), 1);
    });
}

#[test]
fn one_new_key_inserted_by_two_threads_gets_one_bucket() {
    model(|| {
        let q = Quota::per_second(1).unwrap().with_burst(2).unwrap();
        let lim = Arc::new(KeyedLimiter::<u64, _>::with_layout(q, 1, 2, ManualClock::new()));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let lim = lim.clone();
                thread::spawn(move || lim.check(&5).is_ok())
            })
            .collect();
        assert!(handles.into_iter().all(|h| h.join().unwrap()));
        let snap = lim.snapshot();
        assert_eq!(snap.len(), 1, "the key was inserted twice");
        assert_eq!(snap[0].remaining, 0);
        assert!(lim.check(&5).is_err(), "both admissions were charged to the one bucket");
    });
}
