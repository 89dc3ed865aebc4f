//! The claim-ahead charge rule ([`crate::store::charge_at`] then [`LanePace::admit`]) against a
//! plain model: random claim times (forward, with occasional small jumps back), random `ahead`,
//! one to three random quotas, the pace stored and reloaded between claims as a store does.

use super::tests::Model;
use super::*;
use crate::store::charge_at;
use proptest::prelude::*;
use std::time::Duration;

/// Whether `starts` (sorted) put more than `burst + w/T` of `m`'s quota in any window of
/// length `w`: the first such window's count and length.
fn window_over(m: &Model, starts: &[i64]) -> Option<(usize, i64)> {
    for i in 0..starts.len() {
        for j in i..starts.len() {
            let (k, w) = ((j - i + 1) as u128, (starts[j] - starts[i]) as u128);
            if k * m.period > m.burst * m.period + w * m.count {
                return Some((j - i + 1, starts[j] - starts[i]));
            }
        }
    }
    None
}

fn quota() -> impl Strategy<Value = Quota> {
    let period =
        prop_oneof![Just(1_000_000_000u64), Just(20_000_000), Just(1_000_000), 1u64..2_000_000_000];
    (1u64..200, period, 1u64..6).prop_filter_map("a valid quota", |(count, period, burst)| {
        Quota::new(count, Duration::from_nanos(period), burst).ok()
    })
}

/// Claim times: mostly forward by up to 30 ms, sometimes back by up to 2 ms (`back`: whether
/// jumps back happen at all).
fn times(back: bool) -> impl Strategy<Value = Vec<i64>> {
    proptest::collection::vec((0u8..10, 0i64..30_000_000), 1..150).prop_map(move |steps| {
        let mut t = 1_700_000_000_000_000_000i64;
        steps
            .into_iter()
            .map(|(kind, step)| {
                t += if back && kind == 0 { -(step / 15) } else { step };
                t
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every charge is within `[now, now + ahead]`, conforms to the exact model at its own time,
    /// is refused only when the model has no conforming time by `now + ahead`; charge times never
    /// go back while the clock does not; every window holds at most `burst + w/T` charges.
    #[test]
    fn charges_ahead_conform(quotas in proptest::collection::vec(quota(), 1..4),
                             back in any::<bool>(),
                             times in times(true),
                             ahead in prop_oneof![Just(0i64), 0i64..50_000_000],
                             per_claim in 1usize..4) {
        let times = if back { times } else {
            let mut t = times; t.sort(); t
        };
        let mut models: Vec<Model> = quotas.iter().map(Model::new).collect();
        let (mut rows, mut charges) = (Vec::new(), Vec::<i64>::new());
        for now in times {
            let mut pace = LanePace::load(&quotas, None, &rows, now);
            for _ in 0..per_claim {
                let Some(at) = charge_at(now, pace.allowed_at(), ahead) else {
                    // Refused: no time in [now, now + ahead] conforms.
                    let horizon = (now + ahead) as u128;
                    prop_assert!(!models.iter().all(|m| m.conforms(horizon)), "refused at {}", now);
                    break;
                };
                prop_assert!(at >= now && at <= now + ahead, "charged at {} for {}", at, now);
                prop_assert!(models.iter().all(|m| m.conforms(at as u128)), "{} does not conform", at);
                prop_assert!(pace.admit(at).is_ok());
                models.iter_mut().for_each(|m| m.charge(at as u128));
                if !back {
                    prop_assert!(charges.last().is_none_or(|&last| at >= last), "{} after {:?}", at, charges.last());
                }
                charges.push(at);
            }
            rows = pace.stored();
        }
        charges.sort();
        for m in &models {
            prop_assert_eq!(window_over(m, &charges), None, "{:?}", m);
        }
    }
}

#[test]
fn a_claim_within_ahead_of_the_slot_is_charged_at_the_slot() {
    const EPOCH: i64 = 1_700_000_000_000_000_000;
    const MS: i64 = 1_000_000;
    let quotas = ["10/s burst 1".parse::<Quota>().unwrap()];
    let mut pace = LanePace::load(&quotas, None, &[], EPOCH);
    pace.admit(EPOCH).unwrap();
    let slot = EPOCH + 100 * MS;
    assert_eq!(charge_at(slot - 6 * MS, pace.allowed_at(), 5 * MS), None, "too early");
    assert_eq!(charge_at(slot - 3 * MS, pace.allowed_at(), 5 * MS), Some(slot));
    assert_eq!(charge_at(slot + 7 * MS, pace.allowed_at(), 5 * MS), Some(slot + 7 * MS));
    assert_eq!(charge_at(slot - MS, pace.allowed_at(), 0), None, "ahead 0: today's rule");
    assert_eq!(charge_at(i64::MAX - MS, pace.allowed_at(), 5 * MS), Some(i64::MAX - MS));
}
