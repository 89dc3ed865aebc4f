//! Loom models of `KeyedLimiter`'s races on a one-group table (four slots): a check racing with
//! the reclamation of its key's slot for another key, a check racing with another key's insert
//! into its group, two inserts into one slot, and one key inserted twice at once. One key's
//! admission must never be charged to, or granted from, another key's bucket.
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

/// One group of four slots in all: every key competes for them.
fn one_group(burst: u64, clock: ManualClock) -> KeyedLimiter<u64, ManualClock> {
    let q = Quota::per_second(1).unwrap().with_burst(burst).unwrap();
    KeyedLimiter::with_layout(q, 1, 4, clock)
}

fn spawn_check(lim: &Arc<KeyedLimiter<u64, ManualClock>>, key: u64) -> thread::JoinHandle<bool> {
    let lim = lim.clone();
    thread::spawn(move || lim.check(&key).is_ok())
}

/// Key 1 idle in slot 0, keys 10, 11 and 12 busy in the other three: a new key can only take
/// key 1's slot.
fn only_key_1_idle() -> (Arc<KeyedLimiter<u64, ManualClock>>, ManualClock) {
    let clock = ManualClock::new();
    let lim = Arc::new(one_group(1, clock.clone()));
    lim.check(&1).unwrap(); // busy until 1 s
    clock.set(Duration::from_secs(2)); // key 1 idle since 1 s
    for key in [10, 11, 12] {
        lim.check(&key).unwrap(); // busy until 3 s
    }
    (lim, clock)
}

#[test]
fn check_racing_with_reclamation_for_another_key() {
    model(|| {
        let (lim, _clock) = only_key_1_idle();
        let (a, b) = (spawn_check(&lim, 1), spawn_check(&lim, 2));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        // Exactly one gets the slot; the other is turned away, never charged to the winner.
        assert!(a ^ b, "key 1 admitted: {a}, key 2 admitted: {b}");
        assert_eq!(lim.overflow_denials(), 1);
        let snap: Vec<_> = lim.snapshot().into_iter().filter(|s| s.key < 10).collect();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[0].key, if a { 1 } else { 2 });
        assert_eq!(snap[0].remaining, 0, "the winner's bucket holds exactly its one admission");
        assert_eq!(snap[0].reset_after, Duration::from_secs(1));
    });
}

#[test]
fn check_racing_with_another_keys_reclamation_in_its_group() {
    model(|| {
        // Burst 2: key 10 has one unit left; key 2 takes key 1's slot meanwhile.
        let clock = ManualClock::new();
        let lim = Arc::new(one_group(2, clock.clone()));
        lim.check_n(&1, 2).unwrap(); // busy until 2 s
        clock.set(Duration::from_secs(3));
        for key in [10, 11, 12] {
            lim.check(&key).unwrap();
        }
        let (a, b) = (spawn_check(&lim, 10), spawn_check(&lim, 2));
        assert!(a.join().unwrap(), "key 10 had a unit left");
        assert!(b.join().unwrap(), "key 2 takes the idle slot");
        assert!(lim.check(&10).is_err(), "key 10's second admission landed elsewhere");
        assert!(lim.check(&2).is_ok(), "key 2 was charged for key 10");
        assert!(lim.check(&2).is_err());
        assert_eq!(lim.overflow_denials(), 0);
    });
}

#[test]
fn check_racing_with_an_insert_into_its_group() {
    model(|| {
        let lim = Arc::new(one_group(2, ManualClock::new()));
        lim.check(&1).unwrap();
        let (a, b) = (spawn_check(&lim, 1), spawn_check(&lim, 2));
        assert!(a.join().unwrap() && b.join().unwrap());
        assert!(lim.check(&1).is_err(), "key 1's second admission landed elsewhere");
        assert!(lim.check(&2).is_ok(), "key 2 was charged for key 1");
        assert!(lim.check(&2).is_err());
    });
}

#[test]
fn two_new_keys_racing_for_one_slot() {
    model(|| {
        let lim = Arc::new(one_group(1, ManualClock::new()));
        for key in [10, 11, 12] {
            lim.check(&key).unwrap(); // three of the four slots busy
        }
        let (a, b) = (spawn_check(&lim, 7), spawn_check(&lim, 8));
        let admitted = [a.join().unwrap(), b.join().unwrap()];
        assert_eq!(admitted.iter().filter(|&&a| a).count(), 1, "{admitted:?}");
        assert_eq!(lim.overflow_denials(), 1);
    });
}

#[test]
fn one_new_key_inserted_by_two_threads_gets_one_bucket() {
    model(|| {
        let lim = Arc::new(one_group(2, ManualClock::new()));
        let (a, b) = (spawn_check(&lim, 5), spawn_check(&lim, 5));
        assert!(a.join().unwrap() && b.join().unwrap());
        let snap = lim.snapshot();
        assert_eq!(snap.len(), 1, "the key was inserted twice");
        assert_eq!(snap[0].remaining, 0);
        assert!(lim.check(&5).is_err(), "both admissions were charged to the one bucket");
    });
}
