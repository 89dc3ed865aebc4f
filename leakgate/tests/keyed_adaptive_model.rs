//! `KeyedAdaptiveConcurrency` against a plain model: a map from key to that key's own
//! `AdaptiveConcurrency` on the same clock (the obviously-correct "one limiter per key"). Any
//! sequence of acquires, reports (success with a latency, dropped, ignore), clock moves and
//! reclaims gives the same admissions and limits as the model; a full table never holds more
//! keys than its bound and refuses a new key only when every key it holds is busy.

use leakgate::{AdaptiveConcurrency, KeyedAdaptiveConcurrency, ManualClock, OwnedAdaptivePermit};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    Acquire(u8),
    /// Ends the i-th held permit: 0 success, 1 dropped, 2 ignore.
    End(usize, u8),
    Advance(u16),
    Reclaim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..4).prop_map(Op::Acquire),
        4 => (0usize..16, 0u8..3).prop_map(|(i, how)| Op::End(i, how)),
        2 => (0u16..500).prop_map(Op::Advance),
        1 => Just(Op::Reclaim),
    ]
}

type Held = (OwnedAdaptivePermit<ManualClock>, OwnedAdaptivePermit<ManualClock>);

fn end(p: OwnedAdaptivePermit<ManualClock>, how: u8) {
    match how {
        0 => p.success(),
        1 => p.dropped(),
        _ => p.ignore(),
    }
}

proptest! {
    #[test]
    fn every_key_answers_as_its_own_limiter(
        gradient in any::<bool>(),
        ops in prop::collection::vec(op(), 0..96),
    ) {
        let clock = ManualClock::new();
        let table = if gradient {
            KeyedAdaptiveConcurrency::<u8, _>::gradient2_with_clock(1, 2, 6, clock.clone())
        } else {
            KeyedAdaptiveConcurrency::<u8, _>::aimd_with_clock(1, 2, 6, clock.clone())
        }
        .unwrap();
        let fresh = || {
            let l = if gradient {
                AdaptiveConcurrency::gradient2_with_clock(1, 2, 6, clock.clone())
            } else {
                AdaptiveConcurrency::aimd_with_clock(1, 2, 6, clock.clone())
            };
            Arc::new(l.unwrap())
        };
        let mut model: HashMap<u8, Arc<AdaptiveConcurrency<ManualClock>>> = HashMap::new();
        let mut held: Vec<Held> = Vec::new();
        for op in ops {
            match op {
                Op::Acquire(key) => {
                    let m = model.entry(key).or_insert_with(fresh);
                    let got = table.try_acquire(&key);
                    let want = m.try_acquire_owned();
                    prop_assert_eq!(got.is_some(), want.is_some(), "key {}", key);
                    if let (Some(g), Some(w)) = (got, want) {
                        held.push((g, w));
                    }
                }
                Op::End(i, how) => {
                    if !held.is_empty() {
                        let (g, w) = held.swap_remove(i % held.len());
                        end(g, how);
                        end(w, how);
                    }
                }
                Op::Advance(ms) => clock.advance(Duration::from_millis(u64::from(ms))),
                Op::Reclaim => {
                    let idle: Vec<u8> =
                        model.iter().filter(|(_, m)| m.in_flight() == 0).map(|(k, _)| *k).collect();
                    for k in &idle {
                        model.remove(k);
                    }
                    prop_assert_eq!(table.reclaim(), idle.len());
                }
            }
            for key in 0..4u8 {
                let (limit, in_flight) = model.get(&key).map_or((2, 0), |m| (m.limit(), m.in_flight()));
                prop_assert_eq!(table.limit(&key), limit, "key {}", key);
                prop_assert_eq!(table.in_flight(&key), in_flight, "key {}", key);
                prop_assert!(in_flight <= 6);
            }
            prop_assert_eq!(table.len(), model.len());
        }
    }

    #[test]
    fn a_full_table_stays_bounded_and_refuses_only_when_all_are_busy(
        keys in prop::collection::vec((0u16..2000, any::<bool>()), 1..400),
    ) {
        let table = KeyedAdaptiveConcurrency::<u16>::aimd(1, 1, 4).unwrap().with_capacity(64);
        let mut held = Vec::new();
        for (key, keep) in keys {
            match table.try_acquire(&key) {
                Some(p) if keep => held.push((key, p)),
                Some(p) => p.success(),
                None => {
                    // Refused: the key is at its limit (1: held), or it is new and its shard (of
                    // one key here) holds a busy key; never while no key is busy.
                    prop_assert!(!held.is_empty(), "refused {} with nothing in flight", key);
                }
            }
            prop_assert!(table.len() <= 64, "{} keys", table.len());
            // Busy keys, not permits: a key's limit grows past 1 with its successes (AIMD).
            let busy: std::collections::BTreeSet<u16> = held.iter().map(|(k, _)| *k).collect();
            prop_assert!(busy.len() <= 64, "{} busy keys", busy.len());
        }
        drop(held);
        table.reclaim();
        prop_assert!(table.is_empty());
    }
}
