//! Reservations, checks and cancellations against a plain reference model: reservation times and
//! refunds match the exact rational GCRA, and whatever is cancelled, the releases still kept never
//! exceed the quota.

use leakgate::{Limiter, ManualClock, Quota};
use proptest::prelude::*;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
enum Op {
    Reserve { n: u64, max_wait_ms: u64 },
    Check(u64),
    Cancel(usize),
    Advance(u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (1u64..5, 0u64..3_000).prop_map(|(n, max_wait_ms)| Op::Reserve { n, max_wait_ms }),
        1 => (0u64..3).prop_map(Op::Check),
        3 => (0usize..64).prop_map(Op::Cancel),
        2 => (0u64..700).prop_map(Op::Advance),
    ];
    prop::collection::vec(op, 1..80)
}

/// The GCRA as a queue, in plain integers. Time is scaled by `count` so that the emission interval
/// `T = 10^9 / count` ns becomes the integer `10^9`: every quantity is exact.
struct Model {
    count: u128,
    tau: u128,
    tat: u128,
}

/// A reservation in the model: its cost and the state it left, scaled.
#[derive(Clone, Copy, Debug)]
struct Place {
    cost: u128,
    tat_after: u128,
}

const T: u128 = 1_000_000_000;

impl Model {
    fn scaled(&self, ns: u64) -> u128 {
        u128::from(ns) * self.count
    }

    /// Reserve `n` at `now_ns` if it can go within `max_wait_ns`: its release time (scaled).
    fn reserve(&mut self, now_ns: u64, n: u64, max_wait_ns: u64) -> Option<(u128, Place)> {
        let now = self.scaled(now_ns);
        let cost = u128::from(n) * T;
        if n == 0 {
            return Some((now, Place { cost, tat_after: self.tat }));
        }
        if cost > self.tau {
            return None;
        }
        let tat_after = self.tat.max(now) + cost;
        let ready = tat_after.saturating_sub(self.tau).max(now);
        if ready - now > self.scaled(max_wait_ns) {
            return None;
        }
        self.tat = tat_after;
        Some((ready, Place { cost, tat_after }))
    }

    /// Before its time, the last reservation made is undone exactly; any other gives nothing.
    fn cancel(&mut self, now_ns: u64, ready: u128, place: Place) -> bool {
        if self.scaled(now_ns) >= ready || place.cost == 0 || self.tat != place.tat_after {
            return false;
        }
        self.tat = place.tat_after - place.cost;
        true
    }
}

/// A kept release: its cost and time (scaled).
#[derive(Clone, Copy, Debug)]
struct Release {
    n: u64,
    at: u128,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// When `T` is a whole number of nanoseconds every answer (admit or deny, the release time,
    /// whether a cancel gave anything back) equals the model's. For every rate, replaying the
    /// releases still kept in time order through a fresh GCRA admits each one: the queue never
    /// lets through more than the quota, whatever was cancelled (exactly when `T` is whole, else
    /// within the contract's 1 ns).
    #[test]
    fn reservations_and_cancels_follow_the_model_and_never_exceed_the_quota(
        count in prop_oneof![
            prop::sample::select(vec![1u64, 2, 4, 5, 8, 10, 20]),
            prop::sample::select(vec![3u64, 6, 7, 9]),
        ],
        burst in 1u64..6,
        ops in ops(),
    ) {
        let q = Quota::new(count, Duration::from_secs(1), burst).unwrap();
        let clock = ManualClock::new();
        let lim = Limiter::with_clock(q, clock.clone());
        let exact = 1_000_000_000 % count == 0;
        let mut model = Model { count: u128::from(count), tau: T * u128::from(burst), tat: 0 };
        let mut now: u64 = 0;
        let mut live = Vec::new(); // (reservation, model release and place, index in `kept`)
        let mut kept: Vec<Option<Release>> = Vec::new();
        for op in ops {
            match op {
                Op::Advance(d) => {
                    now += d * 1_000_000;
                    clock.set(Duration::from_nanos(now));
                }
                Op::Check(n) => {
                    let got = lim.check_n(n);
                    let want = model.reserve(now, n, 0);
                    if exact {
                        prop_assert_eq!(got.is_ok(), want.is_some());
                    }
                    if got.is_ok() && n > 0 {
                        kept.push(Some(Release { n, at: model.scaled(now) }));
                    }
                }
                Op::Reserve { n, max_wait_ms } => {
                    let max_wait = max_wait_ms * 1_000_000;
                    let got = lim.reserve_n(n, Duration::from_nanos(max_wait));
                    let want = model.reserve(now, n, max_wait);
                    if exact {
                        prop_assert_eq!(got.is_ok(), want.is_some(), "reserve {} at {}", n, now);
                    }
                    if n > burst {
                        prop_assert_eq!(got.unwrap_err().retry_after(), None);
                        continue;
                    }
                    if let (Ok(r), Some((ready, place))) = (got, want) {
                        let at = model.scaled(r.ready_at().as_nanos() as u64);
                        if exact {
                            prop_assert_eq!(at, ready);
                        }
                        kept.push(Some(Release { n, at }));
                        live.push((r, ready, place, kept.len() - 1));
                    }
                }
                Op::Cancel(i) => {
                    if live.is_empty() {
                        continue;
                    }
                    let (r, ready, place, k) = live.remove(i % live.len());
                    let gave_back = r.cancel();
                    let model_gave_back = model.cancel(now, ready, place);
                    if exact {
                        prop_assert_eq!(gave_back, model_gave_back);
                    }
                    if gave_back {
                        kept[k] = None;
                    }
                    if !exact {
                        // The model follows the limiter's state, to stay within rounding of it.
                        let backlog = lim.check_n(0).unwrap().reset_after().as_nanos() as u64;
                        model.tat = model.scaled(now + backlog);
                    }
                }
            }
            if exact {
                let backlog = lim.check_n(0).unwrap().reset_after().as_nanos() as u64;
                prop_assert_eq!(
                    model.scaled(now + backlog), model.tat.max(model.scaled(now)), "state"
                );
            }
        }
        let mut releases: Vec<Release> = kept.into_iter().flatten().collect();
        releases.sort_by_key(|r| r.at);
        let tolerance = if exact { 0 } else { u128::from(count) }; // 1 ns, scaled
        let mut tat = 0u128;
        for r in releases {
            let start = tat.max(r.at);
            tat = start + u128::from(r.n) * T;
            prop_assert!(tat - r.at <= model.tau + tolerance, "{:?} exceeds the quota", r);
        }
    }
}
