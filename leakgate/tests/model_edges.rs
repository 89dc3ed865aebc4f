//! The Limiter against an independent exact rational GCRA model (u128, time scaled by `count` so
//! T = period/count becomes the integer `period`), with times aimed at decision boundaries, clocks
//! jumping both ways, and extreme quotas. Regressions from an adversarial review.
//!
//! With a fractional `T` a decision may differ from the model within 1 ns of its boundary, so
//! requests aimed at every boundary may see another sequence than the model's; the promise is the
//! window bound (at most `burst + w/T` units, plus one for rounding, over any window `w`), and
//! these tests check that bound with probes at every boundary.

use leakgate::{Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::time::Duration;

const YEAR: u64 = 365 * 86_400 * 1_000_000_000;

#[derive(Clone, Debug)]
struct Gcra {
    count: u128,
    t: u128,   // period_ns: T scaled by count
    tau: u128, // burst * T, scaled
    burst: u128,
    tat: u128,
}

#[derive(Debug, PartialEq)]
struct Answer {
    ok: bool,
    backlog: u128,       // scaled
    retry: Option<u128>, // scaled
}

impl Gcra {
    fn new(q: &Quota) -> Self {
        let count = u128::from(q.count());
        let t = q.period().as_nanos();
        Gcra { count, t, tau: u128::from(q.burst()) * t, burst: u128::from(q.burst()), tat: 0 }
    }
    fn whole(&self) -> bool {
        self.t.is_multiple_of(self.count)
    }
    fn check(&mut self, now_ns: u64, n: u64) -> Answer {
        let now = u128::from(now_ns) * self.count;
        let n = u128::from(n);
        if n == 0 || n > self.burst {
            // takes nothing; records the time seen (`leakgate::docs`: never more than at the latest time)
            self.tat = self.tat.max(now);
            return Answer { ok: n == 0, backlog: self.tat - now, retry: None };
        }
        let start = self.tat.max(now);
        let end = start + n * self.t;
        if end - now <= self.tau {
            self.tat = end;
            Answer { ok: true, backlog: end - now, retry: None }
        } else {
            Answer {
                ok: false,
                backlog: self.tat.saturating_sub(now),
                retry: Some(end - now - self.tau),
            }
        }
    }
    /// The first scaled time at which a request of cost n conforms.
    fn boundary_ns(&self, n: u64) -> u64 {
        let b = (self.tat + u128::from(n) * self.t).saturating_sub(self.tau);
        (b / self.count) as u64
    }
}

fn quotas() -> impl Strategy<Value = Quota> {
    let whole = (
        1u64..1_000_000,
        1u64..4_000_000_000,
        prop_oneof![Just(1u64), 1u64..100, 1_000_000u64..2_000_000_000],
    )
        .prop_map(|(t, count, burst)| (count, t.saturating_mul(count), burst));
    let any = (
        prop_oneof![1u64..10, 1u64..1_000_000, 1_000_000_000u64..100_000_000_000, Just(3), Just(7)],
        prop_oneof![
            1u64..1000,
            1u64..1_000_000_000,
            Just(1_000_000_000u64),
            Just(YEAR),
            1..(YEAR * 5)
        ],
        prop_oneof![Just(1u64), 1u64..50, Just(1_000_000u64), 1_000_000u64..u64::MAX / 1024],
    );
    prop_oneof![whole, any].prop_filter_map("valid, tau < 10 years", |(c, p, b)| {
        let q = Quota::new(c, Duration::from_nanos(p), b).ok()?;
        // keep the whole run inside the documented clock range (tau bounded, times < 80 years)
        (u128::from(b) * u128::from(p) / u128::from(c) < u128::from(10 * YEAR)).then_some(q)
    })
}

#[derive(Clone, Debug)]
enum Step {
    AtBoundary(i8, u8),
    Forward(u64, u8),
    Back(u64, u8),
    Jump(u64, u8),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            4 => (-2i8..=2, any::<u8>()).prop_map(|(d, c)| Step::AtBoundary(d, c)),
            3 => (0u64..u64::MAX, any::<u8>()).prop_map(|(f, c)| Step::Forward(f, c)),
            1 => (0u64..u64::MAX, any::<u8>()).prop_map(|(f, c)| Step::Back(f, c)),
            1 => (0u64..80 * YEAR, any::<u8>()).prop_map(|(t, c)| Step::Jump(t, c)),
        ],
        1..150,
    )
}

fn cost(burst: u64, pick: u8) -> u64 {
    match pick % 10 {
        0 => 0,
        1 => burst.saturating_add(1 + u64::from(pick)),
        2 => burst,
        3 => 1 + u64::from(pick) % burst,
        4 => u64::MAX,
        _ => 1,
    }
}

fn run(q: Quota, steps: &[Step]) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    let mut m = Gcra::new(&q);
    let t_ns = (m.t / m.count).max(1) as u64;
    let mut now = 0u64;
    // The documented range: 2^64 units of T/S, S = max(1, ceil(4T)); keep now + tau inside it.
    let s_units = (4 * m.t).div_ceil(m.count).max(1);
    let range_ns = ((1u128 << 64) * m.t / (m.count * s_units)) as u64;
    let tau_ns = (m.tau / m.count) as u64;
    let max_now = (range_ns / 10 * 9).saturating_sub(tau_ns).min(80 * YEAR);
    for s in steps {
        let pick = match *s {
            Step::AtBoundary(d, c) => {
                let n = cost(q.burst(), c).clamp(1, q.burst());
                let b = m.boundary_ns(n);
                now = b.saturating_add_signed(i64::from(d)).min(max_now);
                c
            }
            Step::Forward(f, c) => {
                let span = (u128::from(t_ns) * u128::from(q.burst().min(4)) * 2) as u64;
                now = (now + (f % span.max(1))).min(max_now);
                c
            }
            Step::Back(f, c) => {
                now -= f % (now + 1);
                c
            }
            Step::Jump(t, c) => {
                now = t % (max_now + 1);
                c
            }
        };
        clock.set(Duration::from_nanos(now));
        let n = cost(q.burst(), pick);
        let before = m.clone();
        let want = m.check(now, n);
        let got = lim.check_n(n);
        let (ok, rem, reset, retry) = match &got {
            Ok(a) => (true, a.remaining(), a.reset_after(), None),
            Err(d) => (false, d.remaining(), d.reset_after(), d.retry_after()),
        };
        if m.whole() {
            prop_assert_eq!(ok, want.ok, "decision: q={} t={} n={} model={:?}", q, now, n, before);
            prop_assert_eq!(
                u128::from(rem),
                m.tau.saturating_sub(want.backlog) / m.t,
                "remaining q={} t={} n={}",
                q,
                now,
                n
            );
            prop_assert_eq!(
                reset.as_nanos() * m.count,
                want.backlog,
                "reset_after q={} t={} n={}",
                q,
                now,
                n
            );
            prop_assert_eq!(
                retry.map(|r| r.as_nanos() * m.count),
                want.retry,
                "retry q={} t={} n={}",
                q,
                now,
                n
            );
        } else {
            let scaled_now = u128::from(now) * m.count;
            if ok != want.ok {
                let b = (before.tat + u128::from(n) * m.t).saturating_sub(m.tau);
                prop_assert!(
                    b.abs_diff(scaled_now) <= m.count,
                    "fractional decision off the boundary by {} scaled (count {}) q={} t={} n={}",
                    b.abs_diff(scaled_now),
                    m.count,
                    q,
                    now,
                    n
                );
                return Ok(());
            }
            // reported times within 1 ns of the rational value (`leakgate::docs::meaning`); here 2 ns, so that the
            // proptest keeps hunting past the 1.04 ns case pinned in `reported_time_off_by_more_than_1ns`
            let tol = 2 * m.count;
            prop_assert!(
                (reset.as_nanos() * m.count).abs_diff(want.backlog) <= tol,
                "reset {:?} vs {} q={} t={}",
                reset,
                want.backlog,
                q,
                now
            );
            match (retry, want.retry) {
                (None, None) => {}
                (Some(r), Some(w)) => prop_assert!(
                    (r.as_nanos() * m.count).abs_diff(w) <= tol,
                    "retry {:?} vs {} q={}",
                    r,
                    w,
                    q
                ),
                (r, w) => prop_assert!(false, "retry {:?} vs {:?} q={} t={} n={}", r, w, q, now, n),
            }
            let lo = m.tau.saturating_sub(want.backlog + tol) / m.t;
            let hi = m.tau.saturating_sub(want.backlog.saturating_sub(tol)) / m.t;
            prop_assert!(
                (lo..=hi).contains(&u128::from(rem)),
                "remaining {} vs {}..={} q={}",
                rem,
                lo,
                hi,
                q
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]
    #[test]
    fn limiter_matches_exact_model_at_boundaries(q in quotas(), s in steps()) {
        run(q, &s)?;
    }
}

/// A rate of 1e9/s (T = 1 ns) for a century of clock: the boundary stays exact.
#[test]
fn century_at_one_per_ns_boundaries() {
    for burst in [1u64, 3, 1_000_000_000] {
        let q = Quota::new(1_000_000_000, Duration::from_secs(1), burst).unwrap();
        let clock = ManualClock::new();
        let lim = Limiter::with_clock(q, clock.clone());
        let mut m = Gcra::new(&q);
        for k in 0..2000u64 {
            let t = 100 * YEAR - 3_000 + k;
            clock.set(Duration::from_nanos(t));
            let n = 1 + k % burst.min(5);
            assert_eq!(lim.check_n(n).is_ok(), m.check(t, n).ok, "t={t}");
        }
    }
}

/// `leakgate::docs`: correct for at least 100 years of clock at any rate up to 1e9/s. A slow quota whose
/// bucket is long (tau = 50 years, a valid Quota) at clock = 100 years: the model admits.
#[test]
fn long_bucket_at_a_century_of_clock() {
    let q = Quota::new(1, Duration::from_nanos(50 * YEAR), 1).unwrap();
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    clock.set(Duration::from_nanos(100 * YEAR));
    let got = lim.check();
    assert!(got.is_ok(), "model admits (empty bucket); got {got:?}");
}

/// `leakgate::docs`: "reported times within 1 ns". 2.3e10/s (T = 0.043 ns, range ~25 years), a check at
/// 19.4 years, then a peek with the clock back at 0: reset_after was 1.04 ns short of exact.
#[test]
fn reported_times_stay_within_1ns_19_years_into_a_fast_clock() {
    let q = Quota::new(2_988_575_458, Duration::from_nanos(127_781_132), 1).unwrap();
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    let t = 610_931_235_664_900_864u64;
    clock.set(Duration::from_nanos(t));
    lim.check().unwrap();
    clock.set(Duration::ZERO);
    let reset = lim.check_n(0).unwrap().reset_after().as_nanos();
    // exact: t + T = 610931235664900864 + 0.0428 ns
    let exact_times_count = u128::from(t) * 2_988_575_458 + 127_781_132;
    let err = (reset * 2_988_575_458).abs_diff(exact_times_count);
    assert!(
        err <= 2_988_575_458,
        "reset_after {reset} ns is {} ns from exact",
        err as f64 / 2_988_575_458.0
    );
}

/// Replays admitted `(time_ns, cost)` events in time order through an exact GCRA with one unit of
/// slack (`tau + T`): passes iff no window of length `w` holds more than `burst + w/T + 1` units.
fn within_window_bound(q: Quota, mut events: Vec<(u64, u64)>) -> Result<(), String> {
    events.sort();
    let count = u128::from(q.count());
    let t = q.period().as_nanos();
    let tau = (u128::from(q.burst()) + 1) * t;
    let mut tat = 0u128;
    for &(at, n) in &events {
        let at_scaled = u128::from(at) * count;
        tat = tat.max(at_scaled) + u128::from(n) * t;
        if tat - at_scaled > tau {
            return Err(format!("{q}: {n} at {at} ns breaks the window bound"));
        }
    }
    Ok(())
}

/// A stream of requests with gaps uniform in `0..=max_gap` ns and costs `1..=burst`, on the
/// limiter and on the exact model: the limiter's admitted events, and both totals.
fn stream(q: Quota, seed: u64, steps: usize, max_gap: u64) -> (Vec<(u64, u64)>, u64, u64) {
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    let mut m = Gcra::new(&q);
    let mut x = seed | 1;
    let (mut now, mut events, mut want) = (0u64, Vec::new(), 0u64);
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        now += x % (max_gap + 1);
        clock.set(Duration::from_nanos(now));
        let n = 1 + (x >> 40) % q.burst();
        if lim.check_n(n).is_ok() {
            events.push((now, n));
        }
        want += n * u64::from(m.check(now, n).ok);
    }
    let got = events.iter().map(|&(_, n)| n).sum();
    (events, got, want)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    /// No drift: a random stream never breaks the window bound, at any rate; and under
    /// continuous demand (gaps of at most `T / 2`, so the buckets stay busy) it never gets
    /// materially less than the exact model: at most one burst less over the whole stream.
    ///
    /// The lower bound is the contract's, for continuous demand. A sparse stream of mixed costs
    /// may lose more: each request the limiter refuses within a unit of a boundary the model
    /// admits at (the limiter reads the clock rounded down) puts it behind by its cost, and an
    /// idle spell before it catches up loses that for good (found by this test on a stream
    /// with gaps up to `2T + 1`: 9 per 502 ns, burst 4, 7 units less over 20,000 requests).
    #[test]
    fn long_random_streams_keep_the_window_bound(
        count in prop_oneof![1u64..20, 1_000u64..1_000_000, 1_000_000_000u64..100_000_000_000],
        period in prop_oneof![1u64..5_000, 999_999_999u64..1_000_000_001, 1u64..10_000_000_000],
        burst in 1u64..5,
        seed in any::<u64>(),
    ) {
        let Ok(q) = Quota::new(count, Duration::from_nanos(period), burst) else { return Ok(()) };
        let t_ns = (period / count).max(1);
        let (events, _, _) = stream(q, seed, 20_000, 2 * t_ns + 1);
        prop_assert!(within_window_bound(q, events).is_ok(), "{q}");
        let (events, got, want) = stream(q, seed, 20_000, (t_ns / 2).max(1));
        prop_assert!(within_window_bound(q, events).is_ok(), "{q}");
        prop_assert!(got + burst >= want, "{q}: limiter {got}, model {want}");
    }
}

/// Fractional `T`s where the model's boundaries fall between the limiter's units, probed densely:
/// every nanosecond, and streams aimed just around every boundary. The window bound holds.
#[test]
fn fractional_t_boundary_probes_keep_the_window_bound() {
    for (c, p, b) in [
        (10_000_000u64, 10_000_001u64, 1u64), // T = 1.0000001 ns
        (1_000_000_000, 1_000_000_001, 2),
        (7, 1_000, 2), // 7 per microsecond
        (13, 4, 4),    // T = 0.31 ns
        (3, 1_000_000_000, 1),
    ] {
        let q = Quota::new(c, Duration::from_nanos(p), b).unwrap();
        let t_ns = (p / c).max(1);
        for gap in [1, 2, 3, t_ns, 2 * t_ns + 1] {
            let (events, _, _) = stream(q, 0x9e37_79b9_7f4a_7c15, 100_000, gap);
            within_window_bound(q, events).unwrap();
        }
        // A request at every boundary of the limiter's own state, and one nanosecond either side.
        let clock = ManualClock::new();
        let lim = Limiter::with_clock(q, clock.clone());
        let mut events = Vec::new();
        let mut now = 0u64;
        for k in 0..20_000u64 {
            let probe = match k % 3 {
                0 => now,
                1 => now + 1,
                _ => now.saturating_sub(1),
            };
            clock.set(Duration::from_nanos(probe));
            match lim.check() {
                Ok(_) => events.push((probe, 1)),
                Err(d) => now = probe + d.retry_after().unwrap().as_nanos() as u64,
            }
        }
        within_window_bound(q, events).unwrap();
    }
}

/// The exact model's own example, T = 1.0000001 ns and a check every nanosecond: the model admits
/// at 0, 2, 4, 6, 8; the limiter, whose units cannot tell 1 ns from 1.0000001 ns, admits more
/// often, each extra admission within 1 ns of its boundary, and stays within the window bound.
#[test]
fn fractional_t_every_nanosecond_differs_from_the_model_only_within_the_bound() {
    let q = Quota::new(10_000_000, Duration::from_nanos(10_000_001), 1).unwrap();
    let clock = ManualClock::new();
    let lim = Limiter::with_clock(q, clock.clone());
    let mut m = Gcra::new(&q);
    let mut events = Vec::new();
    for t in 0..1_000u64 {
        clock.set(Duration::from_nanos(t));
        let before = m.clone();
        let want = m.check(t, 1).ok;
        if lim.check().is_ok() {
            events.push((t, 1));
            if !want {
                // The model's boundary for this request lies within 1 ns of t.
                let b = before.tat + before.t - before.tau;
                assert!(b.abs_diff(u128::from(t) * before.count) <= before.count, "t = {t}");
                m.tat = m.tat.max(u128::from(t) * m.count) + m.t; // follow the limiter
            }
        }
    }
    within_window_bound(q, events).unwrap();
}
