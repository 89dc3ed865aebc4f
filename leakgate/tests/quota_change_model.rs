//! Changes of quota against an exact model: random histories of checks, changes of quota (burst
//! and rate, up and down) and clock steps (forwards, and backwards), on `Limiter`,
//! `KeyedLimiter` and `RuleLimiter` at once.
//!
//! The model is GCRA in exact rationals, a change keeping the units available (capped at the new
//! burst; a backlog beyond the burst kept as one), as the contract says. Checked at every step:
//! - what a limiter admits, the model admits (fed the limiter's own decisions, at the latest
//!   time seen): never more than the quota allows;
//! - what the model admits with a unit to spare, `Limiter` and `KeyedLimiter` admit (at the
//!   latest time): the rounding against the caller costs less than a unit;
//! - over every window of the history, the admissions stay within the largest burst in force
//!   plus what the rates in force refilled.
//!
//! (A change made while the clock reads behind the latest time seen is left out: the change
//! then measures the bucket from the earlier time, and a faster new rate may refill the gap
//! between the two; see the crate's notes on clocks that go back.)

use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota, RuleLimiter, Rules};
use proptest::prelude::*;
use std::time::Duration;

/// A non-negative rational `n / d`, kept reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Q {
    n: u128,
    d: u128,
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Q {
    fn new(n: u128, d: u128) -> Q {
        let g = gcd(n, d).max(1);
        Q { n: n / g, d: d / g }
    }
    fn int(n: u128) -> Q {
        Q::new(n, 1)
    }
    fn add(self, o: Q) -> Q {
        Q::new(self.n * o.d + o.n * self.d, self.d * o.d)
    }
    /// `self - o`, 0 if negative.
    fn sub(self, o: Q) -> Q {
        let (a, b) = (self.n * o.d, o.n * self.d);
        Q::new(a.saturating_sub(b), self.d * o.d)
    }
    fn mul(self, o: Q) -> Q {
        Q::new(self.n * o.n, self.d * o.d)
    }
    fn div(self, o: Q) -> Q {
        Q::new(self.n * o.d, self.d * o.n)
    }
    fn le(self, o: Q) -> bool {
        self.n * o.d <= o.n * self.d
    }
    fn max(self, o: Q) -> Q {
        if self.le(o) {
            o
        } else {
            self
        }
    }
    fn min(self, o: Q) -> Q {
        if self.le(o) {
            self
        } else {
            o
        }
    }
}

/// An exact GCRA bucket whose quota may change.
#[derive(Clone, Copy, Debug)]
struct Model {
    t: Q,
    burst: u64,
    /// Theoretical arrival time, in ns.
    tat: Q,
}

impl Model {
    fn tau(&self) -> Q {
        self.t.mul(Q::int(u128::from(self.burst)))
    }
    fn of(q: Quota) -> (Q, u64) {
        (Q::new(q.period().as_nanos(), u128::from(q.count())), q.burst())
    }
    /// Whether `n` units conform at `now`, and the state if they are taken.
    fn step(&self, now: Q, n: u64) -> Option<Q> {
        if n > self.burst {
            return None;
        }
        let new = self.tat.max(now).add(self.t.mul(Q::int(u128::from(n))));
        new.sub(now).le(self.tau()).then_some(new)
    }
    /// The contract's change: the units available stay available, at most the new burst.
    fn change(&mut self, q: Quota, now: Q) {
        let (t, burst) = Model::of(q);
        let backlog = self.tat.sub(now);
        let tau = self.tau();
        let next = Model { t, burst, tat: now };
        self.tat = if backlog.le(tau) {
            let available = tau.sub(backlog).div(self.t).min(Q::int(u128::from(burst)));
            now.add(next.tau().sub(available.mul(t)))
        } else {
            now.add(next.tau()).add(backlog.sub(tau).div(self.t).mul(t))
        };
        self.t = t;
        self.burst = burst;
    }
}

fn quota() -> impl Strategy<Value = Quota> {
    // Whole-nanosecond intervals (the model's times are exact either way).
    let counts = prop::sample::select(vec![1u64, 2, 4, 5, 8, 10, 3]);
    (counts, 1u64..=12)
        .prop_map(|(count, burst)| Quota::new(count, Duration::from_secs(1), burst).unwrap())
}

#[derive(Clone, Debug)]
enum Step {
    Check(u64),
    Forward(u64),
    Back(u64),
    Change(Quota),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..4).prop_map(Step::Check),
        2 => (0u64..700).prop_map(Step::Forward),
        1 => (0u64..700).prop_map(Step::Back),
        2 => quota().prop_map(Step::Change),
    ]
}

/// The three limiters on one clock, each asked the same.
struct Three {
    clock: ManualClock,
    lim: Limiter<ManualClock>,
    keyed: KeyedLimiter<u64, ManualClock>,
    rules: RuleLimiter<ManualClock>,
}

fn rules(q: Quota) -> Rules {
    let mut r = Rules::new();
    r.insert("k", [q]);
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn changes_of_quota_never_hand_out_units(
        first in quota(),
        steps in prop::collection::vec(step(), 1..100),
    ) {
        let clock = ManualClock::new();
        let three = Three {
            clock: clock.clone(),
            lim: Limiter::with_clock(first, clock.clone()),
            keyed: KeyedLimiter::with_clock(first, clock.clone()),
            rules: RuleLimiter::with_clock(rules(first), clock.clone()),
        };
        let (t, burst) = Model::of(first);
        // One model per limiter: each follows its own limiter's decisions.
        let mut models = [Model { t, burst, tat: Q::int(0) }; 3];
        let mut latest_ms = 0u64;
        let mut now_ms = 0u64;
        // (time ms, units) of every admission, and (time ms, quota) of every quota in force.
        let mut admitted: [Vec<(u64, u64)>; 3] = Default::default();
        let mut in_force = vec![(0u64, first)];
        for step in steps {
            match step {
                Step::Forward(ms) => now_ms += ms,
                Step::Back(ms) => now_ms = now_ms.saturating_sub(ms),
                Step::Change(q) => {
                    if now_ms < latest_ms {
                        continue;
                    }
                    latest_ms = now_ms;
                    three.clock.set(Duration::from_millis(now_ms));
                    three.lim.set_quota(q);
                    three.keyed.set_quota(q);
                    three.rules.reload(rules(q));
                    let now = Q::int(u128::from(now_ms) * 1_000_000);
                    for m in &mut models {
                        m.change(q, now);
                    }
                    in_force.push((now_ms, q));
                }
                Step::Check(n) => {
                    // The latest time the limiters have seen.
                    latest_ms = latest_ms.max(now_ms);
                    three.clock.set(Duration::from_millis(now_ms));
                    let got = [
                        three.lim.check_n(n).is_ok(),
                        three.keyed.check_n(&1, n).is_ok(),
                        three.rules.check_n("k/1", n).is_ok(),
                    ];
                    let latest = Q::int(u128::from(latest_ms) * 1_000_000);
                    for (i, (model, ok)) in models.iter_mut().zip(got).enumerate() {
                        let step = model.step(latest, n);
                        if ok {
                            prop_assert!(step.is_some(), "limiter {i} admitted {n} the model refuses");
                            model.tat = step.unwrap();
                            if n > 0 {
                                admitted[i].push((latest_ms, n));
                            }
                        } else if now_ms == latest_ms && n > 0 && i < 2 {
                            // (Not the rules limiter: a level a reload hands over waits for the
                            // key's next check, and counts from the latest time the table saw
                            // then, which may be later than the reload: it may refuse more.)
                            let spare = model.step(latest, n + 1);
                            prop_assert!(spare.is_none(), "limiter {i} refused {n} with a unit to spare");
                        }
                    }
                }
            }
        }
        // Every window between two admissions: within the largest burst in force and the refill.
        for list in &admitted {
            for (a, &(start, _)) in list.iter().enumerate() {
                let mut sum = 0u64;
                for &(end, n) in &list[a..] {
                    sum += n;
                    let (burst, refill) = allowance(&in_force, start, end);
                    prop_assert!(
                        Q::int(u128::from(sum)).le(Q::int(u128::from(burst)).add(refill)),
                        "{sum} admitted in [{start} ms, {end} ms]: more than {burst} + {refill:?}"
                    );
                }
            }
        }
    }
}

/// The largest burst in force during `[start, end]` (ms) and the units the rates in force refilled
/// over it.
fn allowance(in_force: &[(u64, Quota)], start: u64, end: u64) -> (u64, Q) {
    let mut burst = 0;
    let mut refill = Q::int(0);
    for (i, &(from, q)) in in_force.iter().enumerate() {
        let until = in_force.get(i + 1).map_or(u64::MAX, |&(next, _)| next);
        let (lo, hi) = (from.max(start), until.min(end));
        if until < start || from > end {
            continue;
        }
        burst = burst.max(q.burst());
        if hi > lo {
            let (t, _) = Model::of(q);
            refill = refill.add(Q::int(u128::from(hi - lo) * 1_000_000).div(t));
        }
    }
    (burst, refill)
}
