//! A keyed limiter answers for every key exactly as that key's own `Limiter` while time moves
//! forward, on a table large enough that no bucket is forgotten: same decisions and reports, costs
//! of 0 and above the burst included. Once the clock has gone back it may refuse more (a key with
//! no bucket yet starts at the latest time the table has seen), never admit more: every key's
//! admissions, each taken at the latest time its own limiter has seen, conform to its quota.

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::time::Duration;

fn quotas() -> impl Strategy<Value = Quota> {
    (1u64..20, prop_oneof![Just(1_000u64), Just(1_000_000_000), 1u64..10_000_000], 1u64..6)
        .prop_filter_map("valid", |(c, p, b)| Quota::new(c, Duration::from_nanos(p), b).ok())
}

/// Steps: (key, clock move in ns: negative moves back, cost pick).
fn steps() -> impl Strategy<Value = Vec<(u8, i64, u8)>> {
    prop::collection::vec((0u8..4, -400_000_000i64..400_000_000, any::<u8>()), 1..150)
}

fn cost(burst: u64, pick: u8) -> u64 {
    match pick % 8 {
        0 => 0,
        1 => burst + 1,
        2 => burst,
        _ => 1 + u64::from(pick) % burst,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn every_key_answers_as_its_own_limiter(q in quotas(), steps in steps()) {
        let clock = ManualClock::new();
        let keyed = KeyedLimiter::<u8, _>::with_clock(q, clock.clone());
        let per_key: Vec<_> = (0..4).map(|_| Limiter::with_clock(q, clock.clone())).collect();
        let mut now = 1_000_000_000_000u64;
        // The latest time each key's own limiter has seen, and whether the clock went back.
        let mut latest = [0u64; 4];
        let mut seen = 0u64;
        let mut went_back = false;
        let mut admitted: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 4];
        for (key, moved, pick) in steps {
            // Scale moves to the quota's interval so both idle and busy buckets are visited.
            let scaled = (i128::from(moved) * q.period().as_nanos() as i128
                / i128::from(q.count()) / 100_000_000) as i64;
            now = now.saturating_add_signed(scaled);
            went_back |= now < seen;
            seen = seen.max(now);
            let latest = &mut latest[usize::from(key)];
            *latest = (*latest).max(now);
            clock.set(Duration::from_nanos(now));
            let n = cost(q.burst(), pick);
            let want = per_key[usize::from(key)].check_n(n);
            let got = keyed.check_n(&key, n);
            let report = |r: &Result<leakgate::Admitted, leakgate::Denied>| match r {
                Ok(a) => (true, a.remaining(), a.reset_after(), None),
                Err(d) => (false, d.remaining(), d.reset_after(), d.retry_after()),
            };
            if !went_back {
                prop_assert_eq!(report(&got), report(&want), "key {} n {} at {} ns, {}", key, n, now, q);
            }
            if got.is_ok() && n > 0 {
                admitted[usize::from(key)].push((*latest, n));
            }
        }
        for events in admitted {
            prop_assert!(conforms(q, &events), "{}: {:?}", q, events);
        }
    }
}

/// Whether admissions `(time_ns, cost)`, in order, conform to the exact GCRA of `q`, give or take
/// one unit for a fractional `T`.
fn conforms(q: Quota, events: &[(u64, u64)]) -> bool {
    let count = u128::from(q.count());
    let t = q.period().as_nanos();
    let tau = (u128::from(q.burst()) + 1) * t;
    let mut tat = 0u128;
    events.iter().all(|&(at, n)| {
        let at = u128::from(at) * count;
        tat = tat.max(at) + u128::from(n) * t;
        tat - at <= tau
    })
}
