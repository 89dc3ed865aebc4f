//! Loom models of `KeyedConcurrencyLimiter`'s races in a one-group table (four slots, every key
//! competing for them): an acquire racing with the reclaim of its key's slot for another key; a
//! release racing with a new key that needs its slot; an acquirer preempted while its key's slot
//! is given to other keys and back (a stale CAS must fail); two threads inserting one key. A
//! permit's count must only ever be its own key's: a release never lands on a reused slot, and a
//! key with a permit held is never reclaimed.
#![cfg(loom)]

use leakgate::{KeyedConcurrencyLimiter, OwnedKeyedPermit};
use leakgate_loom_tests::model;
use loom::thread;
// `try_acquire_owned` takes the table behind a std `Arc`: its atomics are loom's all the same.
use std::sync::Arc;

type Table = KeyedConcurrencyLimiter<u64>;
type Held = Option<OwnedKeyedPermit<u64>>;

/// One group of four slots, keys 10, 11 and 12 each holding one permit (kept by the caller to
/// the end): one slot left.
fn three_held(max: u32) -> (Arc<Table>, Vec<OwnedKeyedPermit<u64>>) {
    let k = Arc::new(KeyedConcurrencyLimiter::with_layout(max, 1, 4).unwrap());
    let held = [10, 11, 12].map(|key| k.try_acquire_owned(&key).unwrap()).into();
    (k, held)
}

/// Acquires one permit of `key` on a new thread: the permit, if any, held by the caller.
fn spawn_acquire(k: &Arc<Table>, key: u64) -> thread::JoinHandle<Held> {
    let k = k.clone();
    thread::spawn(move || k.try_acquire_owned(&key))
}

#[test]
fn acquire_racing_with_the_reclaim_of_its_keys_slot() {
    model(|| {
        let (k, _held) = three_held(1);
        drop(k.try_acquire(&1).unwrap()); // key 1 at 0 in the last slot: reclaimable
        let (a, b) = (spawn_acquire(&k, 1), spawn_acquire(&k, 2));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        // One slot: exactly one of the two keys holds it, with exactly its own permit.
        assert!(a.is_some() ^ b.is_some(), "key 1: {}, key 2: {}", a.is_some(), b.is_some());
        assert_eq!(k.in_flight(&1), u32::from(a.is_some()));
        assert_eq!(k.in_flight(&2), u32::from(b.is_some()));
        assert_eq!(k.len(), 4);
        drop((a, b));
        assert_eq!(k.len(), 3);
        assert_eq!((k.in_flight(&1), k.in_flight(&2)), (0, 0));
    });
}

#[test]
fn release_racing_with_a_new_key_that_needs_its_slot() {
    model(|| {
        let (k, _held) = three_held(1);
        let held = k.try_acquire_owned(&1).unwrap();
        let release = thread::spawn(move || drop(held));
        let b = spawn_acquire(&k, 2);
        release.join().unwrap();
        let b = b.join().unwrap();
        // Key 2 gets the slot only after key 1's release, and starts at 0: its one permit.
        assert_eq!(k.in_flight(&1), 0);
        assert_eq!(k.in_flight(&2), u32::from(b.is_some()));
        let c = k.try_acquire(&2);
        assert_eq!(c.is_some(), b.is_none(), "max 1: a second permit of key 2");
        drop((b, c));
        assert_eq!(k.len(), 3);
    });
}

#[test]
fn acquirer_preempted_while_its_slot_changes_key_and_back() {
    model(|| {
        let (k, _held) = three_held(2);
        drop(k.try_acquire(&1).unwrap()); // key 1 at 0: reclaimable
        let a = spawn_acquire(&k, 1);
        let k2 = k.clone();
        // Key 2 takes the slot and gives it back; key 1 then comes back through this thread.
        let b = thread::spawn(move || {
            let two = k2.try_acquire(&2).map(|p| p.count());
            let one = k2.try_acquire_owned(&1);
            (two, one)
        });
        let a = a.join().unwrap();
        let (two, one) = b.join().unwrap();
        // Key 1 holds exactly the permits handed out for it (max 2: both fit when both got the
        // slot), and nothing of key 2's remains anywhere.
        let ones = u32::from(a.is_some()) + u32::from(one.is_some());
        assert_eq!(k.in_flight(&1), ones, "key 2 got {two:?}");
        assert_eq!(k.in_flight(&2), 0);
        drop((a, one));
        assert_eq!((k.in_flight(&1), k.len()), (0, 3));
    });
}

#[test]
fn one_new_key_inserted_by_two_threads_counts_both() {
    model(|| {
        let k = Arc::new(KeyedConcurrencyLimiter::<u64>::with_layout(1, 1, 4).unwrap());
        let (a, b) = (spawn_acquire(&k, 5), spawn_acquire(&k, 5));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert!(a.is_some() ^ b.is_some(), "max 1: the key was inserted twice");
        assert_eq!((k.in_flight(&5), k.len()), (1, 1));
        drop((a, b));
        assert!(k.is_empty());
    });
}
