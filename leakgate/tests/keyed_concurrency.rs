//! `KeyedConcurrencyLimiter` by behaviour: the bound per key under threads, keys reclaimed at
//! zero, and a full table that refuses new keys instead of growing.

use leakgate::KeyedConcurrencyLimiter;
use std::sync::atomic::{AtomicU32, Ordering};

#[test]
fn threads_never_hold_more_than_max_of_one_key() {
    let k = KeyedConcurrencyLimiter::<u64>::new(2).unwrap();
    let held: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (k, held) = (&k, &held);
            s.spawn(move || {
                for i in 0..5_000u64 {
                    let key = (i + t) % 4;
                    if let Some(p) = k.try_acquire(&key) {
                        let now = held[key as usize].fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 2, "key {key}: {now} in flight");
                        held[key as usize].fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                }
            });
        }
    });
    assert!(k.is_empty(), "every key went back to zero and was removed");
}

#[test]
fn a_full_table_refuses_new_keys_until_one_frees() {
    // 64 slots (50 keys and a quarter more, rounded up): 64 keys with permits held fill it.
    let k = KeyedConcurrencyLimiter::<u64>::with_capacity(1, 50).unwrap();
    assert_eq!(k.capacity(), 64);
    let mut held = Vec::new();
    let mut refused = None;
    for key in 0..10_000u64 {
        match k.try_acquire(&key) {
            Some(p) => held.push(p),
            None => {
                refused = Some(key);
                break;
            }
        }
    }
    let refused = refused.expect("a bounded table refuses past its capacity");
    // The table holds its capacity whatever the hashes: exactly 64 keys, then no more.
    assert_eq!(held.len(), 64);
    assert_eq!(k.len(), held.len());
    held.clear();
    assert!(k.is_empty());
    assert!(k.try_acquire(&refused).is_some(), "room again once keys are reclaimed");
}

#[test]
fn bad_limits_are_errors() {
    assert!(KeyedConcurrencyLimiter::<u64>::new(0).is_err());
    assert!(KeyedConcurrencyLimiter::<u64>::new(u32::MAX).is_err());
    let k = KeyedConcurrencyLimiter::<u64>::new(3).unwrap();
    assert!(k.try_acquire_n(&1, u32::MAX).is_none());
    assert_eq!(k.in_flight(&1), 0);
}
