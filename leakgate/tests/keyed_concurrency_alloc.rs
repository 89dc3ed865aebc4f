//! `KeyedConcurrencyLimiter`'s hot path allocates nothing once its keys have slots: acquires and
//! releases of keys the table holds (at count 0 or above), counted by a global allocator, on this
//! thread. (A key at 0 whose slot another key took is given a slot again: an insert, which
//! allocates the group's new array of keys, as the rate table's inserts do.)

use leakgate::KeyedConcurrencyLimiter;

#[path = "support/alloc_count.rs"]
mod alloc_count;

use alloc_count::allocations;

#[test]
fn acquires_and_releases_of_known_keys_allocate_nothing() {
    let k = KeyedConcurrencyLimiter::<u64>::with_capacity(3, 1000).unwrap();
    // Warm-up: every key gets a slot (and its page), held all at once so that no key takes the
    // slot of another at 0 (which it may: a key with nothing in flight keeps no slot), then back
    // to 0.
    let held: Vec<_> = (0..1000u64).map(|key| k.try_acquire(&key).unwrap()).collect();
    drop(held);
    let before = allocations();
    let mut admitted = 0u64;
    for i in 0..100_000u64 {
        let key = i.wrapping_mul(0x9E37_79B9) % 1000;
        let a = k.try_acquire_n(&key, 2);
        let b = k.try_acquire_n(&key, 2); // refused: 4 > 3
        admitted += u64::from(a.is_some()) + u64::from(b.is_some());
        assert_eq!(k.in_flight(&key), 2);
    }
    assert_eq!(admitted, 100_000, "every first acquire fits, every second is refused");
    assert_eq!(allocations() - before, 0, "the hot path allocated");
    assert!(k.is_empty());
}
