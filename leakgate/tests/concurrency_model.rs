//! `ConcurrencyLimiter` against a plain model: a counter and a limit, with no queue waiting.
//! Any sequence of acquires, releases and limit changes gives the same answers as the model.

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
                    let fits = model_in + n <= model_max;
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
