//! Loom models of `KeyedLimiter`'s races on one- and two-group tables: a check racing with the
//! reclamation of its key's slot for another key, a check racing with another key's insert into
//! its group, two inserts into one slot, one key inserted twice at once; a key placed past its
//! window (its home shard full) racing for a slot with a key of that slot's shard, and checked
//! while its slot is reclaimed; a checker holding a value from before a lowering and a reclaim;
//! a key forgotten while its checker was preempted; a lookup reading its page's spare block of
//! keys while another group of the page rewrites it. One key's admission must never be charged to,
//! or granted from, another key's bucket, and a forgotten key never comes back emptier than the
//! table last judged a bucket.
#![cfg(loom)]

use leakgate::{Clock, KeyedLimiter, ManualClock, Quota};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

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

/// The keys kept inline, in two blocks (`keyed/key_blocks.rs`): a lookup of an idle key racing
/// two changes of its group's keys (a new key in the last unused slot, then the lookup's own slot
/// given to another key; or the lookup's key back in the unused slot) reads whole keys, and never
/// finds its key in a slot that holds another.
#[test]
fn a_lookup_racing_two_changes_of_its_groups_keys_never_lands_in_another_slot() {
    model(|| {
        let clock = ManualClock::new();
        let lim = Arc::new(one_group(1, clock.clone()));
        lim.check(&1).unwrap(); // slot 0, busy until 1 s
        clock.set(Duration::from_secs(2)); // key 1 idle since 1 s
        for key in [10, 11] {
            lim.check(&key).unwrap(); // slots 1 and 2, busy until 3 s; slot 3 never used
        }
        let writer = {
            let lim = lim.clone();
            thread::spawn(move || {
                let three = lim.check(&3).is_ok();
                (lim.check(&2).is_ok(), three)
            })
        };
        let one = spawn_check(&lim, 1);
        let (two, three) = writer.join().unwrap();
        let one = one.join().unwrap();
        // Two of the three keys end up with a slot, whatever the order; each admitted key's
        // bucket holds exactly its admission.
        let admitted: Vec<u64> = [(1, one), (2, two), (3, three)]
            .into_iter()
            .filter_map(|(key, admitted)| admitted.then_some(key))
            .collect();
        assert_eq!(admitted.len(), 2, "{one} {two} {three}");
        let mut snap: Vec<_> = lim.snapshot().into_iter().filter(|s| s.key < 10).collect();
        snap.sort_by_key(|bucket| bucket.key);
        assert_eq!(snap.iter().map(|bucket| bucket.key).collect::<Vec<_>>(), admitted);
        for bucket in &snap {
            assert_eq!(bucket.remaining, 0, "key {} holds exactly its admission", bucket.key);
            assert!(
                lim.check(&bucket.key).is_err(),
                "key {}'s admission landed elsewhere",
                bucket.key
            );
        }
    });
}

/// Two groups of four slots in one shard (so in one page, whose spare block of keys they
/// share), and keys `0..` sorted by the group their window starts at.
fn one_page_two_groups(burst: u64) -> (KeyedLimiter<u64, ManualClock>, [Vec<u64>; 2]) {
    let q = Quota::per_second(1).unwrap().with_burst(burst).unwrap();
    let lim = KeyedLimiter::with_layout(q, 1, 8, ManualClock::new());
    let mut starts = [Vec::new(), Vec::new()];
    for key in 0..64 {
        starts[lim.model_start_group(&key)].push(key);
    }
    (lim, starts)
}

/// A lookup in one group of a page reads the page's spare block of keys while its group's keys
/// change (a new key in its last unused slot), and a new key in the other group of the page then
/// rewrites that spare block with that group's keys: the lookup never compares its key with the
/// other group's keys as if they were its group's, and every admission lands in its own bucket.
#[test]
fn a_lookup_reading_the_pages_spare_keys_while_another_group_rewrites_them() {
    model(|| {
        let (lim, starts) = one_page_two_groups(2);
        // Group 0: three keys, one unused slot; group 1: one key.
        let (old, new0, new1) = (&starts[0][..3], starts[0][3], starts[1][1]);
        for &key in old.iter().chain(&starts[1][..1]) {
            lim.check(&key).unwrap(); // one unit of two
        }
        let lim = Arc::new(lim);
        let writer = {
            let lim = lim.clone();
            thread::spawn(move || (lim.check(&new0).is_ok(), lim.check(&new1).is_ok()))
        };
        let reader = spawn_check(&lim, old[0]);
        let (a, b) = writer.join().unwrap();
        assert!(a && b, "both new keys had an unused slot");
        assert!(reader.join().unwrap(), "the old key had a unit left");
        assert!(lim.check(&old[0]).is_err(), "the old key's admission landed elsewhere");
        for key in [new0, new1, old[1], old[2], starts[1][0]] {
            assert!(lim.check(&key).is_ok(), "key {key} was charged for another");
            assert!(lim.check(&key).is_err());
        }
        assert_eq!(lim.snapshot().len(), 6);
    });
}

// ---- slots shared across shards: keys past their window ----

/// Two shards of one group: a key's window is its home shard's group, and the other shard's group
/// lies past it. Keys 0.. are sorted by home shard so a model can place them.
fn two_groups(clock: ManualClock) -> (KeyedLimiter<u64, ManualClock>, [Vec<u64>; 2]) {
    let q = Quota::per_second(1).unwrap();
    let lim = KeyedLimiter::with_layout(q, 2, 4, clock);
    let mut homes = [Vec::new(), Vec::new()];
    for key in 0..64 {
        homes[lim.model_home_shard(&key)].push(key);
    }
    (lim, homes)
}

#[test]
fn a_key_past_its_window_and_a_key_of_that_shard_racing_for_one_slot() {
    model(|| {
        let (lim, homes) = two_groups(ManualClock::new());
        // Shard 0 full of busy keys, shard 1 with one unused slot left.
        for &key in homes[0][..4].iter().chain(&homes[1][..3]) {
            lim.check(&key).unwrap();
        }
        let lim = Arc::new(lim);
        let (past, home) = (homes[0][4], homes[1][3]);
        let (a, b) = (spawn_check(&lim, past), spawn_check(&lim, home));
        let admitted = [a.join().unwrap(), b.join().unwrap()];
        assert_eq!(admitted.iter().filter(|&&a| a).count(), 1, "{admitted:?}");
        assert_eq!(lim.overflow_denials(), 1);
        let winner = if admitted[0] { past } else { home };
        assert!(lim.check(&winner).is_err(), "the winner's bucket holds its admission");
        assert_eq!(lim.snapshot().len(), 8);
    });
}

#[test]
fn a_check_of_a_key_past_its_window_racing_with_the_reclamation_of_its_slot() {
    model(|| {
        let clock = ManualClock::new();
        let (lim, homes) = two_groups(clock.clone());
        let busy: Vec<u64> = homes[0][..4].iter().chain(&homes[1][..3]).copied().collect();
        let (past, home) = (homes[0][4], homes[1][3]);
        for &key in &busy[..4] {
            lim.check(&key).unwrap();
        }
        lim.check(&past).unwrap(); // past its window: in shard 1
        for &key in &busy[4..] {
            lim.check(&key).unwrap();
        }
        clock.set(Duration::from_secs(2)); // every key idle; all but `past` busy again
        for &key in &busy {
            lim.check(&key).unwrap();
        }
        let lim = Arc::new(lim);
        let (a, b) = (spawn_check(&lim, past), spawn_check(&lim, home));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        // Exactly one holds the slot; the other is turned away, never charged to the winner.
        assert!(a ^ b, "key past its window admitted: {a}, new key admitted: {b}");
        assert_eq!(lim.overflow_denials(), 1);
        let winner = if a { past } else { home };
        let state = lim.snapshot().into_iter().find(|s| s.key == winner).unwrap();
        assert_eq!(state.remaining, 0, "the winner's bucket holds exactly its one admission");
        assert_eq!(state.reset_after, Duration::from_secs(1));
    });
}

// ---- clocks per thread: stale readings ----

loom::thread_local! {
    static NOW_NS: std::cell::Cell<u64> = std::cell::Cell::new(0);
}

/// A clock each model thread sets for itself: a thread that read the clock long ago.
struct ThreadClock;

impl Clock for ThreadClock {
    fn now_ns(&self) -> u64 {
        NOW_NS.with(|now| now.get())
    }
}

fn at_ns(ns: u64) {
    NOW_NS.with(|now| now.set(ns));
}

#[test]
fn a_stale_cas_never_lands_in_a_new_keys_bucket_after_a_lowering() {
    model(|| {
        // T = 100 ns = 400 units, burst 4 (tau = 1600 units).
        let q = Quota::new(1, Duration::from_nanos(100), 4).unwrap();
        let lim = Arc::new(KeyedLimiter::<u64, _>::with_layout(q, 1, 4, ThreadClock));
        at_ns(0);
        lim.check_n(&1, 2).unwrap(); // key 1: TAT 0 -> 800
        for key in [10, 11, 12] {
            lim.check_n(&key, 4).unwrap(); // busy until 1600 units (400 ns)
        }
        // A checker of key 1 that read TAT 800 at time 0.
        let checker = {
            let lim = lim.clone();
            thread::spawn(move || {
                at_ns(0);
                lim.check(&1).is_ok()
            })
        };
        // The exact undo of key 1's charge: 800 back to 0 (the hook, then the CAS).
        let undo = {
            let lim = lim.clone();
            thread::spawn(move || {
                at_ns(0);
                lim.model_lower(&1, 800, 0)
            })
        };
        // A new key at 100 ns (400 units): key 1's bucket is empty by its TAT then, but its slot
        // held 800, which a stale CAS could still hold.
        let newcomer = {
            let lim = lim.clone();
            thread::spawn(move || {
                at_ns(100);
                lim.check(&2).is_ok()
            })
        };
        let (_, _, admitted) =
            (checker.join().unwrap(), undo.join().unwrap(), newcomer.join().unwrap());
        if admitted {
            // Its bucket opened at 400 at the earliest: exactly its own unit, at most 800.
            let tat = lim.model_tat(&2).expect("the new key holds a slot");
            assert!(tat <= 800, "a stale CAS landed in the new key's bucket: TAT {tat}");
        }
    });
}

#[test]
fn a_key_forgotten_while_its_checker_was_preempted_comes_back_no_emptier() {
    model(|| {
        // T = 100 ms, burst 10 (tau = 1 s); one group of four slots.
        let q = Quota::per_second(10).unwrap();
        let lim = Arc::new(KeyedLimiter::<u64, _>::with_layout(q, 1, 4, ThreadClock));
        const MS: u64 = 1_000_000;
        at_ns(0);
        lim.check_n(&1, 10).unwrap(); // key 1 ("A") busy until 1.0 s
        lim.check_n(&2, 1).unwrap(); // busy until 0.1 s
        at_ns(500 * MS);
        lim.check_n(&3, 10).unwrap(); // busy until 1.5 s
        lim.check_n(&4, 10).unwrap();
        // A's checker read the clock at 0.6 s; another key arrives at 1.2 s, when A is idle.
        let stale = {
            let lim = lim.clone();
            thread::spawn(move || {
                at_ns(600 * MS);
                lim.check_n(&1, 10).is_ok()
            })
        };
        let newcomer = {
            let lim = lim.clone();
            thread::spawn(move || {
                at_ns(1_200 * MS);
                lim.check(&5).is_ok()
            })
        };
        let stale = stale.join().unwrap();
        assert!(newcomer.join().unwrap(), "an idle slot was free for the new key");
        at_ns(1_600 * MS);
        let late = lim.check_n(&1, 10).is_ok();
        // A per-key Limiter admits 10 at 0 s and 10 at 1.6 s, never at 0.6 s.
        assert!(!stale, "A was admitted at 0.6 s with its bucket full until 1.0 s");
        assert!(late);
    });
}
