//! `ConcurrencyLimiter` and `KeyedConcurrencyLimiter` against plain models: a counter and a
//! limit (no queue waiting), a map of counters. Any sequence of acquires, releases and limit changes gives the same answers as the model.

use leakgate::ConcurrencyLimiter;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Acquire(u32),
    Release(usize),
    SetMax(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..6).prop_map(Op::Acquire),
        3 => (0usize..8).prop_map(Op::Release),
        1 => (0u32..8).prop_map(Op::SetMax),
    ]
}

proptest! {
    #[test]
    fn matches_a_counter(max in 1u32..8, ops in prop::collection::vec(op(), 0..64)) {
        let c = ConcurrencyLimiter::new(max).unwrap();
        let (mut model_max, mut model_in) = (max, 0u32);
        let mut held = Vec::new();
        for op in ops {
            match op {
                Op::Acquire(n) => {
                    let fits = n == 0 || model_in + n <= model_max;
                    let got = c.try_acquire_n(n);
                    prop_assert_eq!(got.is_some(), fits);
                    if let Some(p) = got {
                        model_in += n;
                        held.push(p);
                    }
                }
                Op::Release(i) => {
                    if !held.is_empty() {
                        let p = held.swap_remove(i % held.len());
                        model_in -= p.count();
                    }
                }
                Op::SetMax(m) => {
                    c.set_max(m);
                    model_max = m;
                }
            }
            prop_assert_eq!(c.in_flight(), model_in);
            prop_assert_eq!(c.max(), model_max);
        }
        drop(held);
        prop_assert_eq!(c.in_flight(), 0);
    }
}

#[derive(Clone, Debug)]
enum KeyOp {
    Acquire(u8, u32),
    Release(usize),
    SetMax(u32),
}

fn key_op() -> impl Strategy<Value = KeyOp> {
    prop_oneof![
        4 => (0u8..4, 0u32..4).prop_map(|(k, n)| KeyOp::Acquire(k, n)),
        3 => (0usize..8).prop_map(KeyOp::Release),
        1 => (0u32..5).prop_map(KeyOp::SetMax),
    ]
}

proptest! {
    /// Per key, a `HashMap` of counts; keys with nothing in flight are not kept.
    #[test]
    fn keyed_matches_a_map_of_counters(max in 1u32..5, ops in prop::collection::vec(key_op(), 0..64)) {
        use std::collections::HashMap;
        let k = leakgate::KeyedConcurrencyLimiter::<u8>::new(max).unwrap();
        let mut model_max = max;
        let mut model: HashMap<u8, u32> = HashMap::new();
        let mut held = Vec::new();
        for op in ops {
            match op {
                KeyOp::Acquire(key, n) => {
                    let now = model.get(&key).copied().unwrap_or(0);
                    let got = k.try_acquire_n(&key, n);
                    prop_assert_eq!(got.is_some(), n == 0 || now + n <= model_max);
                    if let Some(p) = got {
                        if n > 0 {
                            *model.entry(key).or_insert(0) += n;
                        }
                        held.push(p);
                    }
                }
                KeyOp::Release(i) => {
                    if !held.is_empty() {
                        let p = held.swap_remove(i % held.len());
                        let c = model.get_mut(p.key()).map(|c| { *c -= p.count(); *c });
                        if c == Some(0) {
                            model.remove(p.key());
                        }
                    }
                }
                KeyOp::SetMax(m) => {
                    k.set_max(m);
                    model_max = m;
                }
            }
            for key in 0u8..4 {
                prop_assert_eq!(k.in_flight(&key), model.get(&key).copied().unwrap_or(0));
            }
            prop_assert_eq!(k.len(), model.len());
        }
    }
}
