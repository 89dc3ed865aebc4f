//! The limiter against a plain, obviously-correct model of `leakgate::docs`: exact rational GCRA in
//! `u128`, with time scaled by `count` so that `T = period / count` becomes the integer `period`.

use leakgate::{Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::time::Duration;

/// GCRA exactly as the contract states it. Times are in "scaled nanoseconds": ns * count.
#[derive(Clone, Copy)]
struct Model {
    count: u128,
    /// `T`, scaled.
    t: u128,
    /// `tau = burst * T`, scaled.
    tau: u128,
    burst: u128,
    tat: u128,
}

#[derive(Debug)]
struct Expected {
    conforms: bool,
    /// `max(TAT' - t, 0)`, scaled.
    backlog: u128,
    /// The retry wait, scaled; `None` when the cost is above the burst.
    retry: Option<u128>,
    /// The time the decision flips at, scaled: a request at exactly this time conforms.
    boundary: u128,
}

impl Model {
    fn new(q: &Quota) -> Model {
        let count = u128::from(q.count());
        let t = q.period().as_nanos();
        Model { count, t, tau: u128::from(q.burst()) * t, burst: u128::from(q.burst()), tat: 0 }
    }

    fn check(&mut self, now_ns: u64, n: u64) -> Expected {
        let now = u128::from(now_ns) * self.count;
        let n = u128::from(n);
        let backlog = self.tat.saturating_sub(now);
        if n == 0 || n > self.burst {
            // Takes nothing. An idle bucket (TAT < t) is empty whether TAT is t or earlier, so
            // recording the time seen changes no answer now or later; it only holds a clock that
            // jumps back later to what it would get at this time.
            self.tat = self.tat.max(now);
        }
        if n == 0 {
            return Expected { conforms: true, backlog, retry: None, boundary: 0 };
        }
        if n > self.burst {
            return Expected { conforms: false, backlog, retry: None, boundary: u128::MAX };
        }
        let start = self.tat.max(now);
        let boundary = (self.tat + n * self.t).saturating_sub(self.tau);
        if start + n * self.t - now <= self.tau {
            self.tat = start + n * self.t;
            Expected { conforms: true, backlog: self.tat - now, retry: None, boundary }
        } else {
            let retry = Some(start + n * self.t - self.tau - now);
            Expected { conforms: false, backlog, retry, boundary }
        }
    }

    /// `floor((tau - backlog) / T)`.
    fn remaining(&self, backlog: u128) -> u128 {
        self.tau.saturating_sub(backlog) / self.t
    }

    /// Is `T` a whole number of nanoseconds (so every answer must be exact)?
    fn exact(&self) -> bool {
        self.t.is_multiple_of(self.count)
    }
}

/// A quota from one of several regimes: slow, everyday, fractional, and above 10^9 per second.
fn quotas() -> impl Strategy<Value = Quota> {
    let count = prop_oneof![1u64..10, 1u64..1_000_000, 1_000_000_000u64..20_000_000_000];
    let period = prop_oneof![1u64..1_000, 1u64..1_000_000_000, Just(1_000_000_000u64)];
    let burst = prop_oneof![Just(1u64), 1u64..20, Just(1_000_000u64)];
    (count, period, burst)
        .prop_filter_map("valid quota", |(c, p, b)| Quota::new(c, Duration::from_nanos(p), b).ok())
}

/// A step: how the clock moves (forwards by a fraction of a few intervals, or sometimes back), and
/// the cost of the request made then (often 1, sometimes 0 or above the burst).
fn steps() -> impl Strategy<Value = Vec<(i8, u16, u8)>> {
    prop::collection::vec((any::<i8>(), any::<u16>(), any::<u8>()), 1..120)
}

fn cost(burst: u64, pick: u8) -> u64 {
    match pick % 16 {
        0 => 0,
        1 => burst + 1 + u64::from(pick),
        2 => burst,
        3..=5 => 1 + u64::from(pick) % burst,
        _ => 1,
    }
}

fn run(q: Quota, steps: &[(i8, u16, u8)]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    let mut model = Model::new(&q);
    let interval_ns = (q.period().as_nanos() / u128::from(q.count())).max(1) as u64;
    let mut now: u64 = 0;
    for &(dir, frac, pick) in steps {
        // Move by up to ~2 bursts' worth of intervals, at any sub-interval offset.
        let span = interval_ns.saturating_mul(2 * q.burst().min(8));
        let delta = (u128::from(span) * u128::from(frac) / 65_536) as u64 + u64::from(frac % 3);
        now = if dir < -100 { now.saturating_sub(delta) } else { now.saturating_add(delta) };
        clock.set(Duration::from_nanos(now));
        let n = cost(q.burst(), pick);
        let got = lim.check_n(n);
        let want = model.check(now, n);
        let scaled_now = u128::from(now) * model.count;
        if got.is_ok() != want.conforms {
            // Only allowed for a fractional T, within 1 ns of the boundary. The two states now
            // differ by one request, so stop comparing.
            prop_assert!(!model.exact(), "exact T must match exactly: {want:?} vs {got:?}");
            prop_assert!(
                want.boundary.abs_diff(scaled_now) <= model.count,
                "decision differs {} scaled ns from the boundary",
                want.boundary.abs_diff(scaled_now)
            );
            return Ok(());
        }
        let (remaining, reset, retry) = match &got {
            Ok(a) => (a.remaining(), a.reset_after(), None),
            Err(d) => (d.remaining(), d.reset_after(), d.retry_after()),
        };
        let tol = if model.exact() { 0 } else { model.count };
        let reset_scaled = reset.as_nanos() * model.count;
        prop_assert!(
            reset_scaled.abs_diff(want.backlog) <= tol,
            "reset_after {reset:?} vs exact {}/{}",
            want.backlog,
            model.count
        );
        // remaining is a floor: near a multiple of T it may round either way by the 1 ns tolerance.
        let lo = model.remaining(want.backlog + tol);
        let hi = model.remaining(want.backlog.saturating_sub(tol));
        prop_assert!(
            (lo..=hi).contains(&u128::from(remaining)),
            "remaining {remaining} vs {lo}..={hi}"
        );
        match (retry, want.retry) {
            (None, None) => {}
            (Some(r), Some(w)) => {
                prop_assert!((r.as_nanos() * model.count).abs_diff(w) <= tol, "retry {r:?} vs {w}")
            }
            (r, w) => prop_assert!(false, "retry_after {r:?} vs model {w:?}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn limiter_matches_the_rational_model(q in quotas(), steps in steps()) {
        run(q, &steps)?;
    }

    /// A clock that jumps backwards never lets more through than the latest time seen would: at
    /// every step, an admission at the earlier time is also an admission at the latest time and
    /// leaves the same state; and over the whole run the limiter admits at most
    /// `burst + latest / T` units.
    #[test]
    fn backwards_clock_never_admits_more(q in quotas(), steps in steps()) {
        let clock = ManualClock::new();
        let lim = Limiter::with_clock(q, clock.clone());
        let mut model = Model::new(&q);
        let interval_ns = (q.period().as_nanos() / u128::from(q.count())).max(1) as u64;
        let (mut now, mut latest) = (0u64, 0u64);
        let mut admitted = 0u128;
        for &(dir, frac, pick) in &steps {
            let delta = interval_ns.saturating_mul(u64::from(frac) % 64);
            now = if dir < 0 { now.saturating_sub(delta) } else { now.saturating_add(delta) };
            latest = latest.max(now);
            clock.set(Duration::from_nanos(now));
            let n = cost(q.burst(), pick);
            let mut at_latest = Model { tat: model.tat, ..model };
            let want_latest = at_latest.check(latest, n);
            let want = model.check(now, n);
            if want.conforms && n > 0 {
                prop_assert!(want_latest.conforms, "admitted at {now} but not at {latest}");
                prop_assert_eq!(model.tat, at_latest.tat, "state differs from the latest time's");
            }
            let got = lim.check_n(n).is_ok();
            if model.exact() {
                prop_assert_eq!(got, want.conforms);
            }
            admitted += u128::from(got) * u128::from(n);
            let bound = u128::from(latest) * model.count / model.t + model.burst;
            prop_assert!(admitted <= bound, "{admitted} units admitted, bound {bound}");
        }
    }
}

#[test]
fn model_sanity() {
    let q = Quota::per_second(2).unwrap();
    let mut m = Model::new(&q);
    assert!(m.check(0, 2).conforms);
    let d = m.check(0, 1);
    assert!(!d.conforms);
    assert_eq!(d.retry, Some(500_000_000 * 2));
}
