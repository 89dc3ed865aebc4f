//! Rules against plain models: one rule answers like a `KeyedLimiter`; several quotas answer like
//! the conjunction of independent exact GCRA models; a reload keeps the units available, rounding
//! against the caller.

use leakgate::{KeyedLimiter, ManualClock, Quota, RuleLimiter, Rules};
use proptest::prelude::*;
use std::time::Duration;

/// An exact GCRA bucket in whole nanoseconds (every quota here has a whole-nanosecond `T`).
#[derive(Clone, Copy, Debug)]
struct Model {
    t: u128,
    tau: u128,
    burst: u64,
    tat: u128,
}

impl Model {
    fn new(q: Quota) -> Self {
        let t = q.period().as_nanos() / u128::from(q.count());
        Model { t, tau: t * u128::from(q.burst()), burst: q.burst(), tat: 0 }
    }
    /// `Ok(new tat)` if `n` conforms at `now`, else `Err(wait)` (`None`: never).
    fn step(&self, now: u128, n: u64) -> Result<u128, Option<u128>> {
        if n > self.burst {
            return Err(None);
        }
        let new = self.tat.max(now) + u128::from(n) * self.t;
        if new - now <= self.tau {
            Ok(new)
        } else {
            Err(Some(new - now - self.tau))
        }
    }
    fn remaining(&self, tat: u128, now: u128) -> u64 {
        ((self.tau - tat.saturating_sub(now).min(self.tau)) / self.t) as u64
    }
}

fn quota() -> impl Strategy<Value = Quota> {
    // Counts that divide a second in nanoseconds: `T` is whole, so the model is exact.
    let counts = prop::sample::select(vec![1u64, 2, 4, 5, 8, 10]);
    (counts, prop::sample::select(vec![1u64, 2, 5, 60]), 1u64..=12).prop_map(
        |(count, secs, burst)| Quota::new(count, Duration::from_secs(secs), burst).unwrap(),
    )
}

/// Any small quota, `T` fractional too (3/s).
fn any_quota() -> impl Strategy<Value = Quota> {
    (1u64..=10, prop::sample::select(vec![1u64, 2, 5, 60]), 1u64..=12).prop_map(
        |(count, secs, burst)| Quota::new(count, Duration::from_secs(secs), burst).unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn one_rule_answers_exactly_like_a_keyed_limiter(
        q in quota(),
        ops in prop::collection::vec((0usize..3, 0u64..5, 0u64..900), 1..60),
    ) {
        let clock = ManualClock::new();
        let mut rules = Rules::new();
        rules.insert("k", [q]);
        let lim = RuleLimiter::with_clock(rules, clock.clone());
        let keyed = KeyedLimiter::with_clock(q, clock.clone());
        for (key, n, advance_ms) in ops {
            let key = format!("k/{key}");
            let (a, b) = (lim.check_n(&key, n), keyed.check_n(key.as_str(), n));
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
            clock.advance(Duration::from_millis(advance_ms));
        }
    }

    #[test]
    fn several_quotas_answer_like_the_conjunction_of_exact_models(
        quotas in prop::collection::vec(quota(), 1..4),
        ops in prop::collection::vec((0u64..6, 0u64..1500), 1..60),
    ) {
        let clock = ManualClock::new();
        let mut rules = Rules::new();
        rules.insert("api", quotas.clone());
        let lim = RuleLimiter::with_clock(rules, clock.clone());
        let mut models: Vec<Model> = quotas.iter().map(|&q| Model::new(q)).collect();
        for (n, advance_ms) in ops {
            let now = clock.now().as_nanos();
            let steps: Vec<_> = models.iter().map(|m| m.step(now, n)).collect();
            let decision = lim.check_n("api/alice", n);
            let conforms = steps.iter().all(Result::is_ok);
            prop_assert_eq!(decision.is_ok(), conforms, "{:?} {:?}", decision, steps);
            if conforms {
                for (m, step) in models.iter_mut().zip(&steps) {
                    m.tat = *step.as_ref().unwrap();
                }
            }
            let remaining = models.iter().map(|m| m.remaining(m.tat, now)).min().unwrap();
            let reset = models.iter().map(|m| m.tat.saturating_sub(now)).max().unwrap();
            let (got_remaining, got_reset) = match &decision {
                Ok(ok) => (ok.remaining(), ok.reset_after()),
                Err(no) => (no.remaining(), no.reset_after()),
            };
            prop_assert_eq!(got_remaining, remaining);
            prop_assert_eq!(got_reset.as_nanos(), reset);
            if let Err(no) = decision {
                let waits: Vec<_> = steps.iter().filter_map(|s| s.err()).collect();
                let never = waits.contains(&None);
                let retry = if never { None } else { waits.into_iter().flatten().max() };
                prop_assert_eq!(no.retry_after().map(|d| d.as_nanos()), retry);
            }
            clock.advance(Duration::from_millis(advance_ms));
        }
    }

    #[test]
    fn reload_keeps_the_units_available_rounding_against_the_caller(
        from in any_quota(),
        to in any_quota(),
        n in 1u64..12,
        passed_ms in 0u64..5000,
    ) {
        let clock = ManualClock::new();
        let mut rules = Rules::new();
        rules.insert("k", [from]);
        let lim = RuleLimiter::with_clock(rules, clock.clone());
        let n = n.min(from.burst());
        lim.check_n("k/a", n).unwrap();
        clock.advance(Duration::from_millis(passed_ms));
        let mut rules = Rules::new();
        rules.insert("k", [to]);
        lim.reload(rules);
        // Level in `from` units, as the exact fraction backlog / T.
        // Exact rationals: n units of T = period / count, less the time passed, in units.
        let (period, count) = (from.period().as_nanos(), u128::from(from.count()));
        let passed = u128::from(passed_ms) * 1_000_000;
        let backlog_x_count = (u128::from(n) * period).saturating_sub(passed * count);
        // Whole units in the bucket, rounded up: the whole units available before the reload
        // stay available, at most the new burst (a larger burst adds nothing at once).
        let level_ceil = backlog_x_count.div_ceil(period) as u64;
        let expected = to.burst().min(from.burst() - level_ceil);
        prop_assert_eq!(lim.check_n("k/a", 0).unwrap().remaining(), expected);
    }
}
