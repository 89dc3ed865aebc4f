use super::*;
use proptest::prelude::*;
use std::time::Duration;

/// The plain model: one bucket's TAT times `count` (an exact integer: every TAT is a sum of clock
/// readings and intervals `period / count`), straight from the contract's formula.
#[derive(Clone, Debug)]
pub(super) struct Model {
    pub(super) count: u128,
    pub(super) period: u128,
    pub(super) burst: u128,
    pub(super) tat_c: u128,
}

impl Model {
    pub(super) fn new(q: &Quota) -> Model {
        Model {
            count: u128::from(q.count()),
            period: q.period().as_nanos(),
            burst: u128::from(q.burst()),
            tat_c: 0,
        }
    }
    pub(super) fn conforms(&self, t: u128) -> bool {
        self.tat_c.max(t * self.count) + self.period <= self.burst * self.period + t * self.count
    }
    pub(super) fn charge(&mut self, t: u128) {
        self.tat_c = self.tat_c.max(t * self.count) + self.period;
    }
    /// The first whole nanosecond at which one more run conforms.
    fn allowed_at(&self) -> u128 {
        (self.tat_c + self.period).saturating_sub(self.burst * self.period).div_ceil(self.count)
    }
}

fn quota() -> impl Strategy<Value = Quota> {
    let period = prop_oneof![
        Just(1_000_000_000u64),
        Just(60_000_000_000),
        Just(1_000_000),
        Just(333),
        Just(7),
        1u64..5_000_000_000,
    ];
    (1u64..2_000, period, 1u64..6).prop_filter_map("a valid quota", |(count, period, burst)| {
        Quota::new(count, Duration::from_nanos(period), burst).ok()
    })
}

/// Clock readings from a realistic epoch: mostly forward in small steps, sometimes backwards.
fn times() -> impl Strategy<Value = Vec<i64>> {
    proptest::collection::vec((0i64..3, 0i64..2_000_000_000), 1..120).prop_map(|steps| {
        let mut t = 1_700_000_000_000_000_000i64;
        steps
            .into_iter()
            .map(|(kind, step)| {
                match kind {
                    0 => t -= step / 4,
                    1 => t += step / 1000,
                    _ => t += step,
                }
                t
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every decision and every reported slot is the exact model's, for one to three quotas
    /// charged all or nothing, stored and reloaded between steps as a claim does.
    #[test]
    fn admit_matches_the_exact_model(quotas in proptest::collection::vec(quota(), 1..4),
                                     times in times()) {
        let mut models: Vec<Model> = quotas.iter().map(Model::new).collect();
        let mut rows: Vec<StoredBucket> = Vec::new();
        for t in times {
            let mut pace = LanePace::load(&quotas, None, &rows, t);
            let want = models.iter().map(|m| m.allowed_at()).max().unwrap();
            prop_assert_eq!(pace.allowed_at() as u128, want);
            let tu = t as u128;
            let ok = models.iter().all(|m| m.conforms(tu));
            prop_assert_eq!(pace.admit(t).is_ok(), ok, "at {}", t);
            if ok {
                models.iter_mut().for_each(|m| m.charge(tu));
            }
            rows = pace.stored();
        }
    }
}

fn q(text: &str) -> Quota {
    text.parse().unwrap()
}

const EPOCH: i64 = 1_700_000_000_000_000_000;
const SEC: i64 = 1_000_000_000;

#[test]
fn a_new_lane_has_its_whole_burst_then_its_rate() {
    let mut pace = LanePace::load(&[q("20/s burst 3")], None, &[], EPOCH);
    for _ in 0..3 {
        pace.admit(EPOCH).unwrap();
    }
    assert_eq!(pace.admit(EPOCH), Err(EPOCH + SEC / 20));
    assert_eq!(pace.allowed_at(), EPOCH + SEC / 20);
    pace.admit(EPOCH + SEC / 20).unwrap();
}

#[test]
fn several_quotas_are_charged_all_or_nothing() {
    let quotas = [q("10/s burst 10"), q("2/s burst 2")];
    let mut pace = LanePace::load(&quotas, None, &[], EPOCH);
    pace.admit(EPOCH).unwrap();
    pace.admit(EPOCH).unwrap();
    let before = pace.stored();
    assert_eq!(pace.admit(EPOCH), Err(EPOCH + SEC / 2));
    assert_eq!(pace.stored(), before, "a refusal charges no bucket");
}

#[test]
fn a_reload_keeps_the_units_available_capped_at_the_new_burst() {
    // Full at 1/s burst 5 (none available): under 10/s burst 2, none available.
    let mut pace = LanePace::load(&[q("1/s burst 5")], None, &[], EPOCH);
    (0..5).for_each(|_| pace.admit(EPOCH).unwrap());
    let rows = pace.stored();
    let reloaded = LanePace::load(&[q("10/s burst 2")], None, &rows, EPOCH);
    assert_eq!(reloaded.allowed_at(), EPOCH + SEC / 10, "full: the next slot is one T away");
    // Half full (2.5 of 5 available) under 1/s burst 5 -> 2.5 available of 10/s burst 10: 2
    // runs go now (a larger burst adds nothing at once).
    let rows = LanePace::load(&[q("1/s burst 5")], None, &rows, EPOCH + 2 * SEC + SEC / 2).stored();
    let mut reloaded =
        LanePace::load(&[q("10/s burst 10")], None, &rows, EPOCH + 2 * SEC + SEC / 2);
    let now = EPOCH + 2 * SEC + SEC / 2;
    let admitted = (0..10).take_while(|_| reloaded.admit(now).is_ok()).count();
    assert_eq!(admitted, 2);
    // The same rate with a smaller burst: none available stays none, and the debt is kept.
    let mut same = LanePace::load(&[q("1/s burst 5")], None, &[], EPOCH);
    (0..5).for_each(|_| same.admit(EPOCH).unwrap());
    let capped = LanePace::load(&[q("1/s burst 1")], None, &same.stored(), EPOCH);
    assert_eq!(capped.allowed_at(), EPOCH + SEC);
    // A smaller burst and a larger one back hand out nothing: still none available.
    let back = LanePace::load(&[q("1/s burst 5")], None, &capped.stored(), EPOCH);
    assert_eq!(back.allowed_at(), EPOCH + SEC, "the shrink and the grow back minted units");
    // A quota with no row starts empty; rows beyond the rule are dropped.
    let two = LanePace::load(&[q("1/s burst 5"), q("1/h burst 1")], None, &same.stored(), EPOCH);
    assert_eq!(two.stored().len(), 2);
    assert_eq!(LanePace::load(&[], None, &two.stored(), EPOCH).stored().len(), 0);
}

#[test]
fn a_clock_gone_backwards_hands_out_no_fresh_burst() {
    let mut pace = LanePace::load(&[q("1/s burst 2")], None, &[], EPOCH);
    pace.admit(EPOCH).unwrap();
    pace.admit(EPOCH).unwrap();
    let rows = pace.stored();
    let mut earlier = LanePace::load(&[q("1/s burst 2")], None, &rows, EPOCH - 10 * SEC);
    assert_eq!(earlier.admit(EPOCH - 10 * SEC), Err(EPOCH + SEC));
}

#[test]
fn slow_down_pauses_then_resumes_without_a_burst() {
    let mut pace = LanePace::load(&[q("10/s burst 5")], None, &[], EPOCH);
    pace.admit(EPOCH).unwrap();
    pace.push_back(EPOCH + 3 * SEC);
    assert_eq!(pace.allowed_at(), EPOCH + 3 * SEC);
    pace.admit(EPOCH + 3 * SEC).unwrap();
    assert_eq!(pace.admit(EPOCH + 3 * SEC), Err(EPOCH + 3 * SEC + SEC / 10));
    // An unpaced lane has no bucket to push: the store pauses the lane itself.
    let mut none = LanePace::load(&[], None, &[], EPOCH);
    none.push_back(EPOCH + SEC);
    assert!(!none.is_paced());
    assert_eq!(none.allowed_at(), 0);
}
