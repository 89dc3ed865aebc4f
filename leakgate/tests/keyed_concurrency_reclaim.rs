//! `KeyedConcurrencyLimiter` in tables smaller than its keys, against a plain model: a
//! `HashMap` of counts and a bound on how many keys may have permits in flight at once. Keys at
//! count 0 are reclaimed for others, a full table refuses new keys, and no acquire, release or
//! reclaim ever lands in another key's count.

use leakgate::{KeyedConcurrencyLimiter, KeyedPermit, OwnedKeyedPermit};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    /// Acquire `n` permits of a key, borrowed (`false`), or one owned (`true`).
    Acquire(u8, u32, bool),
    /// Drop the held permit at this index (modulo how many are held).
    Release(usize),
    SetMax(u32),
}

fn op(keys: u8) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..keys, 0u32..4, any::<bool>()).prop_map(|(k, n, owned)| Op::Acquire(k, n, owned)),
        4 => (0usize..16).prop_map(Op::Release),
        1 => (1u32..5).prop_map(Op::SetMax),
    ]
}

/// A permit of either kind, for the model's list of held ones.
enum Held<'a> {
    Borrowed(KeyedPermit<'a, u8>),
    Owned(OwnedKeyedPermit<u8>),
}

impl Held<'_> {
    fn key_and_count(&self) -> (u8, u32) {
        match self {
            Held::Borrowed(p) => (*p.key(), p.count()),
            Held::Owned(p) => (*p.key(), p.count()),
        }
    }
}

/// Runs `ops` on a table of `slots` slots (one shard: every key may use every slot) and on the
/// model, comparing every answer and every count.
fn run(slots: usize, max: u32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let k = Arc::new(KeyedConcurrencyLimiter::<u8>::with_layout(max, 1, slots).unwrap());
    let mut model_max = max;
    let mut model: HashMap<u8, u32> = HashMap::new();
    let mut held: Vec<Held<'_>> = Vec::new();
    for op in ops {
        match op {
            Op::Acquire(key, n, owned) => {
                // An owned acquire takes one permit.
                let n = if owned { 1 } else { n };
                let now = model.get(&key).copied().unwrap_or(0);
                let room = now > 0 || model.len() < slots;
                let fits = n == 0 || (now + n <= model_max && room);
                let got = if owned {
                    k.try_acquire_owned(&key).map(Held::Owned)
                } else {
                    k.try_acquire_n(&key, n).map(Held::Borrowed)
                };
                prop_assert_eq!(got.is_some(), fits, "key {} n {} now {}", key, n, now);
                if let Some(p) = got {
                    prop_assert_eq!(p.key_and_count(), (key, n));
                    if n > 0 {
                        *model.entry(key).or_insert(0) += n;
                    }
                    held.push(p);
                }
            }
            Op::Release(i) => {
                if !held.is_empty() {
                    let p = held.swap_remove(i % held.len());
                    let (key, count) = p.key_and_count();
                    drop(p);
                    if count > 0 {
                        let c = model.get_mut(&key).unwrap();
                        *c -= count;
                        if *c == 0 {
                            model.remove(&key);
                        }
                    }
                }
            }
            Op::SetMax(m) => {
                k.set_max(m);
                model_max = m;
            }
        }
        for key in 0u8..=u8::MAX {
            prop_assert_eq!(k.in_flight(&key), model.get(&key).copied().unwrap_or(0));
        }
        prop_assert_eq!(k.len(), model.len());
    }
    drop(held);
    prop_assert!(k.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// One group of 4 slots, up to 10 keys: every new key past 4 busy ones is refused, and takes
    /// the slot of a key at 0 when there is one.
    #[test]
    fn one_group_matches_the_model(max in 1u32..5, ops in prop::collection::vec(op(10), 0..96)) {
        run(4, max, ops)?;
    }

    /// Four groups of 4 slots, up to 40 keys.
    #[test]
    fn four_groups_match_the_model(max in 1u32..5, ops in prop::collection::vec(op(40), 0..160)) {
        run(16, max, ops)?;
    }
}

/// A slot reused again and again (one key at a time in a one-group table, thousands of keys in
/// turn): every key starts from 0, never from a count another key left.
#[test]
fn many_keys_through_one_slot_each_start_at_zero() {
    let k = KeyedConcurrencyLimiter::<u64>::with_layout(2, 1, 4).unwrap();
    let blockers: Vec<_> = (0..3).map(|key| k.try_acquire(&key).unwrap()).collect();
    for key in 3..20_000u64 {
        let a = k.try_acquire(&key).unwrap();
        let b = k.try_acquire(&key).unwrap();
        assert!(k.try_acquire(&key).is_none(), "key {key}: a third permit at max 2");
        assert!(k.try_acquire(&(key + 1)).is_none(), "key {}: the table is full", key + 1);
        assert_eq!(k.in_flight(&key), 2);
        drop((a, b));
        assert_eq!(k.in_flight(&key), 0);
    }
    assert_eq!(k.len(), 3);
    drop(blockers);
    assert!(k.is_empty());
}

/// Threads acquiring and releasing 64 keys in a table of 16 slots: a key never has more than
/// `max` in flight, and every count returns to 0.
#[test]
fn threads_churning_a_small_table_never_exceed_max() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let k = KeyedConcurrencyLimiter::<u64>::with_layout(2, 1, 16).unwrap();
    let held: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (k, held) = (&k, &held);
            s.spawn(move || {
                for i in 0..20_000u64 {
                    let key = (i * 7 + t * 13) % 64;
                    if let Some(p) = k.try_acquire(&key) {
                        let now = held[key as usize].fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 2, "key {key}: {now} in flight");
                        std::hint::spin_loop();
                        held[key as usize].fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                }
            });
        }
    });
    assert!(k.is_empty());
    assert!((0..64).all(|key| k.in_flight(&key) == 0));
}
