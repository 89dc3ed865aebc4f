//! Adaptive lanes: the steps, the floor, the rate charged exactly, and a property test against a
//! plain model of the count (`AdaptiveRate`'s rules written out) with the ceiling's bound.

use super::*;
use proptest::prelude::*;

const EPOCH: i64 = 1_700_000_000_000_000_000;
const SEC: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;

fn q(text: &str) -> Quota {
    text.parse().unwrap()
}

/// Stores and reloads, as every claim does.
fn reload(pace: &LanePace, quotas: &[Quota], floor: Option<u64>, now: i64) -> LanePace {
    LanePace::load(quotas, floor, &pace.stored(), now)
}

#[test]
fn a_slow_down_halves_once_a_period_and_done_jobs_bring_it_back() {
    let quotas = [q("100/s burst 1")];
    let mut pace = LanePace::load(&quotas, Some(1), &[], EPOCH);
    pace.back_off(EPOCH);
    pace.back_off(EPOCH + 999 * MS); // the same overload
    assert_eq!(pace.first_quota(), Some(q("50/s burst 1")));
    assert_eq!(pace.stored()[0].adapted, 50);
    let mut pace = reload(&pace, &quotas, Some(1), EPOCH + SEC);
    pace.back_off(EPOCH + SEC);
    assert_eq!(pace.first_quota(), Some(q("25/s burst 1")));
    // Each done job: +5 (a twentieth of 100); 25 -> 100 in 15 jobs.
    for done in 1..=15 {
        assert!(pace.recover(1, EPOCH + SEC));
        let want = if done < 15 { 25 + 5 * done } else { 100 };
        assert_eq!(pace.first_quota().unwrap().count(), want);
    }
    assert_eq!(pace.stored()[0].adapted, 0, "back at the quota: no adaptation stored");
    assert!(!pace.recover(1, EPOCH + SEC), "nothing to recover");
}

#[test]
fn never_below_the_floor_and_a_lane_that_does_not_adapt_does_not() {
    let quotas = [q("10/s"), q("1000/h")];
    let mut pace = LanePace::load(&quotas, Some(3), &[], EPOCH);
    for i in 0..10 {
        pace.back_off(EPOCH + i * 3600 * SEC);
    }
    let rows = pace.stored();
    assert_eq!((rows[0].adapted, rows[1].adapted), (3, 3));
    let mut plain = LanePace::load(&quotas, None, &rows, EPOCH);
    plain.back_off(EPOCH);
    assert_eq!(plain.first_quota(), Some(q("10/s")), "adaptive = false: the rule's quota");
    assert!(!plain.recover(5, EPOCH));
    // A floor above the quota is the quota.
    let mut high = LanePace::load(&[q("2/s")], Some(50), &[], EPOCH);
    high.back_off(EPOCH);
    assert_eq!(high.first_quota(), Some(q("2/s")));
}

#[test]
fn the_adapted_rate_is_charged_exactly_and_a_rule_change_applies() {
    let quotas = [q("100/s burst 1")];
    let mut pace = LanePace::load(&quotas, Some(1), &[], EPOCH);
    pace.admit(EPOCH).unwrap();
    pace.back_off(EPOCH);
    pace.push_back(EPOCH + 2 * SEC); // "Retry-After: 2"
    assert_eq!(pace.allowed_at(), EPOCH + 2 * SEC);
    let mut t = EPOCH + 2 * SEC;
    for _ in 0..5 {
        let mut pace2 = reload(&pace, &quotas, Some(1), t);
        assert_eq!(pace2.admit(t - 1), Err(t), "one every 20 ms at 50/s, exactly");
        pace2.admit(t).unwrap();
        pace = pace2;
        t += 20 * MS;
    }
    // The rules now say 10/s: the adapted 50 is clamped to it, the lane runs at 10/s.
    let lower = [q("10/s burst 1")];
    let pace = reload(&pace, &lower, Some(1), t);
    assert_eq!(pace.first_quota(), Some(q("10/s burst 1")));
    assert_eq!(pace.stored()[0].adapted, 0);
    // A new period drops the adaptation: the rule changed under it.
    let other = [q("6000/min burst 1")];
    let mut backed = LanePace::load(&quotas, Some(1), &[], EPOCH);
    backed.back_off(EPOCH);
    assert_eq!(reload(&backed, &other, Some(1), EPOCH).first_quota(), Some(other[0]));
}

/// The plain model of one bucket's count: `AdaptiveRate`'s steps written out.
#[derive(Debug)]
struct CountModel {
    count: u64,
    ceiling: u64,
    period: i64,
    floor: u64,
    last: Option<i64>,
}

impl CountModel {
    fn slow(&mut self, t: i64) {
        if self.last.is_some_and(|l| t >= l && t - l < self.period) {
            return;
        }
        self.last = Some(t);
        self.count = (self.count / 2).max(self.floor.min(self.ceiling)).max(1);
    }
    fn done(&mut self) {
        if self.count < self.ceiling {
            self.count = (self.count + (self.ceiling / 20).max(1)).min(self.ceiling);
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Take,
    Slow(i64),
    Done(u64),
}

fn ops() -> impl Strategy<Value = Vec<(i64, Op)>> {
    let op = prop_oneof![
        6 => Just(Op::Take),
        1 => (0i64..3 * SEC).prop_map(Op::Slow),
        2 => (1u64..4).prop_map(Op::Done),
    ];
    proptest::collection::vec((0i64..200 * MS, op), 1..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The stored count is the model's after every step; a Retry-After admits nothing before
    /// it ends; and the runs never exceed the ceiling's bound `burst + w / T` in any window.
    #[test]
    fn adaptive_pace_matches_the_model_and_stays_under_the_quota(
        count in 1u64..400, burst in 1u64..5, floor in 1u64..10, ops in ops()
    ) {
        let quota = Quota::new(count, std::time::Duration::from_secs(1), burst).unwrap();
        let quotas = [quota];
        let mut model = CountModel { count, ceiling: count, period: SEC, floor, last: None };
        let (mut t, mut rows, mut hold, mut runs) = (EPOCH, Vec::new(), 0i64, Vec::new());
        for (step, op) in ops {
            t += step;
            let mut pace = LanePace::load(&quotas, Some(floor), &rows, t);
            match op {
                Op::Take => {
                    if pace.admit(t).is_ok() {
                        prop_assert!(t >= hold, "a run at {} inside a hold until {}", t, hold);
                        runs.push(t);
                    }
                }
                Op::Slow(d) => {
                    pace.back_off(t);
                    pace.push_back(t + d);
                    hold = hold.max(t + d);
                    model.slow(t);
                }
                Op::Done(n) => {
                    pace.recover(n, t);
                    (0..n).for_each(|_| model.done());
                }
            }
            rows = pace.stored();
            prop_assert_eq!(pace.first_quota().unwrap().count(), model.count);
        }
        for (i, a) in runs.iter().enumerate() {
            for (j, b) in runs.iter().enumerate().skip(i) {
                let n = (j - i + 1) as u128;
                let allowed = u128::from(burst) * SEC as u128 + (b - a) as u128 * u128::from(count);
                prop_assert!(n * SEC as u128 <= allowed, "{} runs in {} ns", n, b - a);
            }
        }
    }
}
