//! `AsyncRedisCell`, redis-cell's bucket in Redis, against an exact rational model with one TAT
//! per key and each call's own quota: equal while every call is in the units the TAT was written
//! in; once a call in other units has rounded the TAT up (under 1 ns each time), it never admits
//! what the model refuses, and departs from the model only within those nanoseconds of a
//! boundary. Two clients share each key; the stored value names its quota.

mod support;

use leakgate::{Admitted, Denied, ManualClock, Quota};
use leakgate_redis::AsyncRedisCell;
use leakgate_test_support::exact::{gcd, Ns};
use proptest::prelude::*;
use std::collections::HashMap;
use std::time::Duration;
use support::{epoch, RedisServer};

/// One TAT per key; each call's quota applied to it. Times count from `base` (ns), so that
/// the rationals stay small.
struct Model {
    base: u64,
    tat: HashMap<Vec<u8>, Ns>,
}

/// What the model decided, and by how much a conforming call fit.
struct Modelled {
    decision: Result<Admitted, Denied>,
    slack: Option<Ns>,
}

impl Model {
    fn call(&mut self, key: &[u8], q: Quota, now_ns: u64, n: u64) -> Modelled {
        let t = Ns::new(q.period().as_nanos(), u128::from(q.count()));
        let tau = t.times(q.burst());
        let now = Ns::new(u128::from(now_ns - self.base), 1);
        let tat = self.tat.get(key).copied().unwrap_or(Ns::whole(0));
        let start = tat.max(now);
        let after = start.add(t.times(n));
        let remaining = |x: Ns| {
            let backlog = x.sub(now);
            let backlog = backlog.min(tau);
            let left = tau.sub(backlog);
            left.div_floor(t) as u64
        };
        let fits = after.sub(now) <= tau;
        if fits && n <= q.burst() {
            if n > 0 {
                self.tat.insert(key.to_vec(), after);
            }
            let ok = Admitted::new(remaining(after), after.sub(now).ceil_ns());
            return Modelled { decision: Ok(ok), slack: Some(tau.sub(after.sub(now))) };
        }
        let retry = (n <= q.burst()).then(|| after.sub(tau).sub(now).ceil_ns());
        let no = Denied::new(remaining(start), start.sub(now).ceil_ns(), retry);
        Modelled { decision: Err(no), slack: None }
    }
}

/// Quotas with awkward intervals (any count up to 1,000 over any period up to 10 s in ns: the
/// model's rationals then stay within `u128`).
fn quota() -> impl Strategy<Value = Quota> {
    (1u64..=1_000, 1u64..=10_000_000_000, 1u64..=12)
        .prop_filter_map("valid", |(c, p, b)| Quota::new(c, Duration::from_nanos(p), b).ok())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn cell(
    rt: &tokio::runtime::Runtime,
    server: &RedisServer,
    clock: &ManualClock,
    prefix: &str,
) -> AsyncRedisCell {
    rt.block_on(
        leakgate_redis::Builder::new(server.url())
            .prefix(prefix)
            .caller_clock(clock.clone())
            .deadline(Duration::from_secs(5))
            .expiry_slack(Duration::from_secs(3600))
            .connect_cell_async(),
    )
    .expect("a local redis-server")
}

fn figures(d: &Result<Admitted, Denied>) -> (bool, u64, Duration, Option<Duration>) {
    match d {
        Ok(ok) => (true, ok.remaining(), ok.reset_after(), None),
        Err(no) => (false, no.remaining(), no.reset_after(), no.retry_after()),
    }
}

#[test]
fn each_call_applies_its_quota_to_the_keys_one_tat() {
    let server = RedisServer::start();
    let rt = runtime();
    let clock = epoch();
    let a = cell(&rt, &server, &clock, "c1:");
    let b = cell(&rt, &server, &clock, "c1:");
    let q = |burst: u64| Quota::new(1, Duration::from_secs(60), burst).unwrap();
    // The reproducer's calls, through two clients: 5 at burst 5, then one more at burst 6.
    let mut admitted = 0;
    for (lim, burst) in [(&a, 5); 8].into_iter().chain([(&b, 6); 8]) {
        admitted += usize::from(rt.block_on(lim.try_check_n(b"k", q(burst), 1)).unwrap().is_ok());
    }
    assert_eq!(admitted, 6);
    // A smaller burst now: past its tau, refused, even a peek, until the bucket drains to it.
    let peek = rt.block_on(a.try_check_n(b"k", q(1), 0)).unwrap().unwrap_err();
    assert_eq!(peek.retry_after(), Some(Duration::from_secs(300)));
    // The value names the quota of the last charge.
    let mut con = server.connection();
    let value: Vec<u8> = redis::cmd("GET").arg(a.redis_key(b"k")).query(&mut con).unwrap();
    assert_eq!(AsyncRedisCell::stored_quota(&value), Some(q(6)));
    assert!(rt
        .block_on(a.try_check_n(b"k", q(1), 2))
        .unwrap()
        .unwrap_err()
        .retry_after()
        .is_none());
}

/// One server for every case; each case under its own prefix.
#[test]
fn decisions_follow_the_exact_model_with_a_quota_per_call() {
    let server = RedisServer::start();
    let rt = runtime();
    let case = std::cell::Cell::new(0u64);
    let cases = (
        prop::collection::vec(quota(), 1..=3),
        prop::collection::vec(
            (0usize..3, 0usize..2, 0u64..=5, prop_oneof![0u64..1_000, 0u64..2_000_000_000]),
            1..40,
        ),
    );
    let mut runner = support::proptest_runner(file!(), 64);
    let outcome = runner.run(&cases, |(quotas, calls)| {
        case.set(case.get() + 1);
        let clock = epoch();
        let lim = cell(&rt, &server, &clock, &format!("p{}:", case.get()));
        let mut model = Model { base: leakgate::Clock::now_ns(&clock), tat: HashMap::new() };
        // Nanoseconds the TAT of each key may be ahead of the model's (one per rounding).
        let mut ahead: HashMap<usize, u64> = HashMap::new();
        let mut units: HashMap<usize, u128> = HashMap::new();
        for (step, &(qi, key, n, advance)) in calls.iter().enumerate() {
            clock.advance(Duration::from_nanos(advance));
            let q = quotas[qi % quotas.len()];
            let d = u128::from(q.count()) / gcd(u128::from(q.count()), q.period().as_nanos());
            let name = [b'k', key as u8];
            let now = leakgate::Clock::now_ns(&clock);
            // A call in other units than the TAT's rounds it up by under 1 ns.
            if units.get(&key).is_some_and(|&u| u != d) {
                *ahead.entry(key).or_default() += 1;
            }
            let got = rt.block_on(lim.try_check_n(&name, q, n)).expect("Redis decides");
            let want = model.call(&name, q, now, n);
            let slack = ahead.get(&key).copied().unwrap_or(0);
            let (g, w) = (figures(&got), figures(&want.decision));
            if slack == 0 {
                prop_assert_eq!(g, w, "step {}: exact", step);
            } else if g != w {
                // Ahead of the model: never admits what it refuses; refuses only within the
                // nanoseconds it is ahead; reports within them.
                prop_assert!(!g.0 || w.0, "step {}: admitted what the model refuses", step);
                if g.0 != w.0 {
                    let fit = want.slack.expect("the model admitted");
                    prop_assert!(fit < Ns::whole(slack));
                    break;
                }
                prop_assert!(w.1 >= g.1 && w.1 - g.1 <= 1, "step {}: {:?} {:?}", step, g, w);
                prop_assert!(g.2 >= w.2 && g.2 - w.2 <= Duration::from_nanos(slack));
            }
            if g.0 && n > 0 {
                units.insert(key, d);
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
