//! Every decision of the Redis script, with the caller's clock, equals the exact rational model:
//! admitted or not, `remaining()`, and `reset_after()` / `retry_after()` rounded up to the
//! nanosecond. Quotas with fractional emission intervals, several quotas, several keys,
//! reservations, peeks and costs above the burst.

mod support;

use leakgate::{ManualClock, Quota};
use leakgate_redis::RedisLimiter;
use proptest::prelude::*;
use std::time::Duration;
use support::model::{observed, Decision, Model};
use support::RedisServer;

/// Quotas with awkward intervals: any count up to 10^6 over any period up to 10 s in ns.
fn quota() -> impl Strategy<Value = Quota> {
    (1u64..=1_000_000, 1u64..=10_000_000_000, 1u64..=12)
        .prop_filter_map("valid", |(c, p, b)| Quota::new(c, Duration::from_nanos(p), b).ok())
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    /// Advance to just when `key` (index) would next conform to one unit.
    AdvanceToRetry(usize),
    Check(usize, u64),
    CheckAll(Vec<usize>, u64),
    Reserve(usize, u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    let step = prop_oneof![0u64..1_000, 0u64..1_000_000_000, 0u64..20_000_000_000];
    let keys = prop::collection::vec(0usize..3, 1..4);
    prop_oneof![
        3 => step.prop_map(Op::Advance),
        2 => (0usize..3).prop_map(Op::AdvanceToRetry),
        6 => (0usize..3, 0u64..=14).prop_map(|(k, n)| Op::Check(k, n)),
        2 => (keys, 0u64..=6).prop_map(|(k, n)| Op::CheckAll(k, n)),
        2 => (0usize..3, 0u64..=6, 0u64..5_000_000_000).prop_map(|(k, n, w)| Op::Reserve(k, n, w)),
    ]
}

const KEYS: [&[u8]; 3] = [b"alpha", b"{tag}beta", b"\x00\xffgamma"];

/// One server for every case of the test, stopped when it ends; each case writes under its own
/// prefix.
#[test]
fn script_decides_as_the_exact_model() {
    let server = RedisServer::start();
    let case = std::cell::Cell::new(0u64);
    let cases = (
        prop::collection::vec(quota(), 1..=3),
        0u64..1_000_000_000_000,
        prop::collection::vec(op(), 1..40),
    );
    let mut runner = support::proptest_runner(file!(), 48);
    let outcome = runner.run(&cases, |(quotas, start, ops)| {
        case.set(case.get() + 1);
        let clock = ManualClock::new();
        // A realistic epoch: the ms field near 1.7 * 10^12, as with Redis TIME.
        clock.set(Duration::from_nanos(1_700_000_000_000_000_000 + start));
        let mut builder = RedisLimiter::builder(&server.url())
            .prefix(format!("model{}:", case.get()))
            .caller_clock(clock.clone())
            .deadline(Duration::from_secs(5))
            .expiry_slack(Duration::from_secs(3600));
        for q in &quotas {
            builder = builder.quota(*q);
        }
        let lim = builder.connect().unwrap();
        let mut model = Model::new(quotas.clone());
        let now = || u64::try_from(clock.now().as_nanos()).unwrap();
        for op in ops {
            match op {
                Op::Advance(ns) => clock.advance(Duration::from_nanos(ns)),
                Op::AdvanceToRetry(k) => {
                    // To the first nanosecond at which one more unit conforms: a boundary.
                    let would = model.clone().request(&[KEYS[k]], 1, now(), 0);
                    if let Decision::Denied { retry_after_ns: Some(r), .. } = would {
                        clock.advance(Duration::from_nanos(r));
                    }
                }
                Op::Check(k, n) => {
                    let expected = model.request(&[KEYS[k]], n, now(), 0);
                    let got = lim.check_n(KEYS[k], n).map(|ok| (ok, 0));
                    prop_assert_eq!(observed(got), expected, "check_n({}, {})", k, n);
                }
                Op::CheckAll(ks, n) => {
                    let keys: Vec<&[u8]> = ks.iter().map(|&k| KEYS[k]).collect();
                    let expected = model.request(&keys, n, now(), 0);
                    let got = lim.check_all_n(&keys, n).map(|ok| (ok, 0));
                    prop_assert_eq!(observed(got), expected, "check_all_n({:?}, {})", ks, n);
                }
                Op::Reserve(k, n, wait) => {
                    let expected = model.request(&[KEYS[k]], n, now(), wait);
                    match (lim.reserve_n(KEYS[k], n, Duration::from_nanos(wait)), expected) {
                        (Ok(r), Decision::Admitted { delay_ns, .. }) => {
                            prop_assert_eq!(r.delay(), Duration::from_nanos(delay_ns));
                            prop_assert_eq!(r.ready_at(), Duration::from_nanos(now() + delay_ns));
                        }
                        (Err(no), expected @ Decision::Denied { .. }) => {
                            prop_assert_eq!(observed(Err(no)), expected);
                        }
                        (got, expected) => {
                            prop_assert!(false, "reserve: {:?} vs {:?}", got, expected)
                        }
                    }
                }
            }
        }
        let stats = lim.stats();
        prop_assert_eq!(stats.timeouts + stats.unavailable + stats.rejected, 0);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
