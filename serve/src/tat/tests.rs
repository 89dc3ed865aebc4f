//! The table against its promises: one bucket per key whatever the quota, the byte budget,
//! all or nothing, the sweep and the clock, and pages that cover every key once.

use super::budget::{Budget, ENTRY_OVERHEAD, HEAP_OVERHEAD};
use super::page::{page, Query};
use super::table::{Charge, Table};
use super::Params;
use leakgate::{Admitted, Denied, ManualClock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn params(count: u64, period_s: u64, burst: u64) -> Params {
    Params { count, period_ns: period_s * 1_000_000_000, burst }
}

fn table(budget: usize) -> (Table<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    clock.set(Duration::from_secs(1000));
    (Table::new(clock.clone(), Arc::new(Budget::new(budget))), clock)
}

fn untracked() -> Result<Admitted, Denied> {
    Ok(Admitted::new(u64::MAX, Duration::ZERO))
}

#[test]
fn an_entry_is_what_the_budget_counts() {
    assert_eq!(std::mem::size_of::<super::table::Entry>(), 80);
}

#[test]
fn one_bucket_per_key_whatever_the_quota() {
    let (t, _) = table(1 << 20);
    let admitted = (0..8).filter(|_| t.check(b"k", params(1, 60, 5), 1).is_ok()).count()
        + (0..8).filter(|_| t.check(b"k", params(1, 60, 6), 1).is_ok()).count();
    assert_eq!(admitted, 6);
    assert!(t.check(b"other", params(1, 60, 6), 1).is_ok());
    assert_eq!(t.len(), 2);
}

#[test]
fn new_keys_past_the_budget_are_refused_and_old_ones_served() {
    let key_bytes = 100;
    let (t, clock) = table(10 * (key_bytes + ENTRY_OVERHEAD + HEAP_OVERHEAD));
    let p = params(1, 1, 2);
    let key = |i: u32| format!("{i:0100}").into_bytes();
    for i in 0..10 {
        assert!(t.check(&key(i), p, 1).is_ok(), "key {i}");
    }
    let no = t.check(&key(10), p, 1).unwrap_err();
    // As from a full bucket: nothing left, ask again after an interval.
    assert_eq!((no.remaining(), no.retry_after()), (0, Some(Duration::from_secs(1))));
    assert_eq!(t.len(), 10);
    // A key held is served; a peek of a new key takes no room and sees it empty.
    assert!(t.check(&key(3), p, 1).is_ok());
    assert_eq!(t.check(&key(11), p, 0).unwrap().remaining(), 2);
    // Once their buckets are empty, swept keys give their room back.
    clock.advance(Duration::from_secs(1));
    t.sweep();
    assert_eq!(t.len(), 1, "key 3 still holds a unit");
    assert!(t.check(&key(10), p, 1).is_ok());
    clock.advance(Duration::from_secs(2));
    t.sweep();
    assert_eq!(t.len(), 0);
    assert!(t.check(&key(12), p, 1).is_ok());
}

#[test]
fn a_refusal_anywhere_charges_nothing() {
    let (t, _) = table(1 << 20);
    let p = params(1, 60, 1);
    let charges = [Charge { key: b"a", params: p }, Charge { key: b"b", params: p }];
    let refuse = || Err(Denied::new(0, Duration::ZERO, None));
    let out = t.check_all(&charges, 1, refuse);
    assert!(out.decision.is_err());
    assert_eq!(out.conformed, [true, true]);
    assert_eq!(t.len(), 0);
    assert!(t.check(b"a", p, 1).is_ok());
    // "a" is spent now: the other side is not asked, and "b" is not charged.
    let asked = AtomicU64::new(0);
    let out = t.check_all(&charges, 1, || {
        asked.fetch_add(1, Ordering::Relaxed);
        untracked()
    });
    assert_eq!(out.conformed, [false, true]);
    assert_eq!(asked.load(Ordering::Relaxed), 0);
    assert!(t.check(b"b", p, 1).is_ok());
    // A key named twice is charged twice.
    let twice = [Charge { key: b"c", params: params(1, 60, 2) }; 2];
    assert!(t.check_all(&twice, 1, untracked).decision.is_ok());
    assert!(t.check(b"c", params(1, 60, 2), 1).is_err());
}

#[test]
fn a_clock_that_goes_back_admits_no_more_than_the_latest_reading() {
    let (t, clock) = table(1 << 20);
    let p = params(1, 10, 1);
    assert!(t.check(b"k", p, 1).is_ok()); // TAT = 1010 s
    clock.set(Duration::from_secs(1010));
    t.sweep(); // empty at 1010 s: forgotten
    assert_eq!(t.len(), 0);
    clock.set(Duration::from_secs(1005));
    // Read at 1010 s, the latest reading: one unit, as the bucket had then.
    assert!(t.check(b"k", p, 1).is_ok());
    assert!(t.check(b"k", p, 1).is_err());
}

#[test]
fn threads_together_never_pass_a_burst() {
    let (t, _) = table(1 << 20);
    let p = params(1, 3600, 50);
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for i in 0..400u32 {
                    let key = [b'k', (i % 4) as u8];
                    if t.check(&key, p, 1).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(admitted.load(Ordering::Relaxed), 4 * 50);
}

#[test]
fn pages_after_a_cursor_cover_every_key_once_in_order() {
    let (t, clock) = table(1 << 20);
    let mut want: Vec<String> = Vec::new();
    for i in 0..500u32 {
        let key = format!("u/{:x}", i.wrapping_mul(2_654_435_761));
        let n = u64::from(i % 4);
        t.check(key.as_bytes(), params(1, 60, 4), n).unwrap();
        if n >= 2 {
            want.push(format!("cl.throttle/{key}"));
        }
    }
    t.check(b"other/x", params(1, 60, 4), 3).unwrap();
    t.check(b"u/\xff", params(1, 60, 4), 4).unwrap();
    want.push("cl.throttle/u/\\xff".into());
    want.sort();
    clock.advance(Duration::from_millis(1));
    let mut got = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let q =
            Query { prefix: "cl.throttle/u/", min_fill: 0.4, after: after.as_deref(), limit: 37 };
        let (listed, matched) = page(&t, "cl.throttle/", &q);
        assert_eq!(matched, want.len());
        assert!(listed.len() <= 37);
        let Some(last) = listed.last() else { break };
        after = Some(last.key.clone());
        got.extend(listed.into_iter().map(|l| l.key));
    }
    assert_eq!(got, want);
    // A prefix the head decides alone.
    for (prefix, all) in [("cl", true), ("", true), ("d", false), ("cl.throttle/u/\\", false)] {
        let q = Query { prefix, min_fill: 0.0, after: None, limit: 10 };
        let (_, matched) = page(&t, "cl.throttle/", &q);
        assert_eq!(matched == 377, all, "{prefix:?}: {matched}");
    }
}

/// The exact model at nanosecond precision: one TAT per key, a rational number of ns
/// (`num / den`, times counted from the test's start so that they stay small), each call's
/// quota applied to it.
mod model {
    use leakgate::{Admitted, Denied};
    use std::cmp::Ordering;
    use std::time::Duration;

    #[derive(Clone, Copy, Debug)]
    pub(super) struct Ns(pub(super) u128, pub(super) u128);

    fn gcd(mut a: u128, mut b: u128) -> u128 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a.max(1)
    }

    impl Ns {
        pub(super) fn new(num: u128, den: u128) -> Ns {
            let g = gcd(num, den);
            Ns(num / g, den / g)
        }
        fn common(self, o: Ns) -> (u128, u128, u128) {
            let l = self.1 / gcd(self.1, o.1) * o.1;
            (self.0 * (l / self.1), o.0 * (l / o.1), l)
        }
        fn add(self, o: Ns) -> Ns {
            let (a, b, l) = self.common(o);
            Ns::new(a + b, l)
        }
        fn sub(self, o: Ns) -> Ns {
            let (a, b, l) = self.common(o);
            Ns::new(a.saturating_sub(b), l)
        }
        pub(super) fn cmp(self, o: Ns) -> Ordering {
            let (a, b, _) = self.common(o);
            a.cmp(&b)
        }
        fn ceil(self) -> Duration {
            Duration::from_nanos(self.0.div_ceil(self.1) as u64)
        }
    }

    /// `(decision, slack)`: the slack of a conforming call is how far it fit within tau.
    pub(super) fn call(
        tat: &mut Ns,
        (count, period_ns, burst): (u64, u64, u64),
        now: u64,
        n: u64,
    ) -> (Result<Admitted, Denied>, Option<Ns>) {
        let t = Ns::new(u128::from(period_ns), u128::from(count));
        let tau = Ns::new(t.0 * u128::from(burst), t.1);
        let now = Ns::new(u128::from(now), 1);
        let start = if tat.cmp(now) == Ordering::Greater { *tat } else { now };
        let after = start.add(Ns::new(t.0 * u128::from(n), t.1));
        let remaining = |x: Ns| {
            let backlog = x.sub(now);
            let backlog = if backlog.cmp(tau) == Ordering::Greater { tau } else { backlog };
            let left = tau.sub(backlog);
            ((left.0 * t.1) / (left.1 * t.0)) as u64
        };
        if after.sub(now).cmp(tau) != Ordering::Greater && n <= burst {
            if n > 0 {
                *tat = after;
            }
            let ok = Admitted::new(remaining(after), after.sub(now).ceil());
            return (Ok(ok), Some(tau.sub(after.sub(now))));
        }
        let retry = (n <= burst).then(|| after.sub(tau).sub(now).ceil());
        (Err(Denied::new(remaining(start), start.sub(now).ceil(), retry)), None)
    }
}

fn figures(d: &Result<Admitted, Denied>) -> (bool, u64, Duration, Option<Duration>) {
    match d {
        Ok(ok) => (true, ok.remaining(), ok.reset_after(), None),
        Err(no) => (false, no.remaining(), no.reset_after(), no.retry_after()),
    }
}

proptest::proptest! {
    /// The table against the model at nanosecond precision, a quota per call (any count up to
    /// 1,000 over any period up to 10 s): equal while a key's TAT stays in the units it was
    /// written in; after a call in other units (which rounds it up, under 1 ns each time),
    /// never admitting what the model refuses, and departing only that close to a boundary.
    #[test]
    fn the_table_decides_as_the_exact_model(
        quotas in proptest::collection::vec((1u64..=1000, 1u64..=10_000_000_000, 1u64..=12), 1..=3),
        calls in proptest::collection::vec((0usize..3, 0usize..2, 0u64..=5, 0u64..2_000_000_000), 1..60),
    ) {
        let (t, clock) = table(1 << 20);
        let base = leakgate::Clock::now_ns(&clock);
        let mut tats = [model::Ns(0, 1); 2];
        let mut ahead = [0u64; 2];
        let mut units: [Option<u128>; 2] = [None; 2];
        for (step, &(qi, key, n, advance)) in calls.iter().enumerate() {
            clock.advance(Duration::from_nanos(advance));
            let q = quotas[qi % quotas.len()];
            // The quota's units: count / gcd(count, period), the numerator of count / period.
            let d = model::Ns::new(u128::from(q.0), u128::from(q.1)).0;
            if units[key].is_some_and(|u| u != d) {
                ahead[key] += 1;
            }
            let now = leakgate::Clock::now_ns(&clock);
            let p = Params { count: q.0, period_ns: q.1, burst: q.2 };
            let got = figures(&t.check(&[b'k', key as u8], p, n));
            let (want, slack) = model::call(&mut tats[key], q, now - base, n);
            let want = figures(&want);
            if ahead[key] == 0 {
                proptest::prop_assert_eq!(got, want, "step {}", step);
            } else if got != want {
                proptest::prop_assert!(!got.0 || want.0, "step {}: admitted what the model refuses", step);
                if got.0 != want.0 {
                    let fit = slack.expect("the model admitted");
                    let within = fit.cmp(model::Ns(u128::from(ahead[key]), 1)).is_lt();
                    proptest::prop_assert!(within, "step {}", step);
                    break;
                }
                proptest::prop_assert!(want.1 >= got.1 && want.1 - got.1 <= 1, "step {}", step);
                let late = got.2.checked_sub(want.2).expect("no earlier");
                proptest::prop_assert!(late <= Duration::from_nanos(ahead[key]), "step {}", step);
            }
            if got.0 && n > 0 {
                units[key] = Some(d);
            }
        }
    }
}
