//! Rules in Redis against the references, on the caller's clock: a one-rule setup answers
//! exactly as the plain single-quota `RedisLimiter`; random rules (several quotas, overrides,
//! shadow rules, keys no rule matches, several keys at once) answer exactly as the in-process
//! `RuleLimiter` on the same `ManualClock` (decisions, reports and per-rule counts); a reload
//! that changes a rule's quota carries the units each key could admit exactly (capped at the new
//! burst); random reloads on two servers (quotas and rule paths changing, each server on its own
//! rules) answer exactly as the model of `support::reload_model`, and no key is ever admitted more
//! than the largest burst plus what the largest rate refills, over any window.

mod support;

use leakgate::{Clock, ManualClock, Quota, RuleLimiter, Rules};
use leakgate_redis::{RedisLimiter, RedisRuleLimiter};
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::model::{observed, Decision};
use support::reload_model::Fleet;
use support::RedisServer;

/// Each test starts one server for all its cases (stopped when the test ends); each case writes
/// under its own prefix.
fn next_prefix() -> String {
    static CASE: AtomicU64 = AtomicU64::new(0);
    format!("rules{}:", CASE.fetch_add(1, Ordering::Relaxed))
}

/// Runs `test` on 32 cases of `cases`; panics with the smallest failing case.
fn check<S: Strategy>(cases: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    if let Err(e) = support::proptest_runner(file!(), 32).run(&cases, test) {
        panic!("{e}");
    }
}

fn view(decision: Result<leakgate::Admitted, leakgate::Denied>) -> Decision {
    observed(decision.map(|ok| (ok, 0)))
}

/// A clock at a realistic epoch (the ms field near 1.7 * 10^12, as with Redis TIME).
fn clock(start: u64) -> ManualClock {
    let clock = ManualClock::new();
    clock.set(Duration::from_nanos(1_700_000_000_000_000_000 + start));
    clock
}

fn redis_rules(server: &RedisServer, rules: Rules, clock: &ManualClock) -> RedisRuleLimiter {
    RedisRuleLimiter::builder(&server.url())
        .prefix(next_prefix())
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600))
        .connect_rules(rules)
        .unwrap()
}

/// Quotas with awkward intervals: any count up to 10^6 over any period up to 10 s in ns.
fn any_quota() -> impl Strategy<Value = Quota> {
    (1u64..=1_000_000, 1u64..=10_000_000_000, 1u64..=12)
        .prop_filter_map("valid", |(c, p, b)| Quota::new(c, Duration::from_nanos(p), b).ok())
}

/// Quotas whose emission interval is a whole number of nanoseconds, where the in-process
/// limiter reports exact times too.
fn whole_ns_quota() -> impl Strategy<Value = Quota> {
    let counts = prop::sample::select(vec![1u64, 2, 4, 5, 8, 10, 20, 25, 50, 100]);
    let periods = prop::sample::select(vec![1u64, 10, 60]);
    (counts, periods, 1u64..=12)
        .prop_map(|(c, p, b)| Quota::new(c, Duration::from_secs(p), b).unwrap())
}

const PATHS: [&str; 5] = ["", "api", "api/beta", "tenant", "user"];
const KEYS: [&str; 8] = [
    "api/alice",
    "api/beta",
    "api/beta/x",
    "tenant/{acme}",
    "user/{acme}/42",
    "web/x",
    "apiary",
    "user",
];

/// Rules over `PATHS`: each path absent, or with 0 to 3 quotas, maybe in shadow mode.
fn rules() -> impl Strategy<Value = Rules> {
    let rule = prop::option::weighted(
        0.7,
        (prop::collection::vec(whole_ns_quota(), 0..=3), prop::bool::weighted(0.25)),
    );
    prop::collection::vec(rule, PATHS.len()).prop_map(|rules| {
        let mut out = Rules::new();
        for (path, rule) in PATHS.iter().zip(rules) {
            if let Some((quotas, shadow)) = rule {
                out.insert(*path, quotas).shadow(shadow);
            }
        }
        out
    })
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Check(usize, u64),
    /// Distinct keys (a key named twice is charged twice by both, but the in-process limiter
    /// reports a refusal from its second naming's state: see the crate docs).
    CheckAll(Vec<usize>, u64),
}

fn op() -> impl Strategy<Value = Op> {
    let step = prop_oneof![Just(0u64), 0u64..1_000_000, 0u64..3_000_000_000];
    let keys = prop::sample::subsequence((0..KEYS.len()).collect::<Vec<_>>(), 1..=4);
    prop_oneof![
        3 => step.prop_map(Op::Advance),
        6 => (0..KEYS.len(), 0u64..=14).prop_map(|(k, n)| Op::Check(k, n)),
        3 => (keys, 0u64..=6).prop_map(|(k, n)| Op::CheckAll(k, n)),
    ]
}

#[test]
fn one_rule_answers_like_the_single_quota_limiter() {
    let server = RedisServer::start();
    let cases = (
        any_quota(),
        prop::sample::select(vec!["", "api"]),
        0u64..1_000_000_000_000,
        prop::collection::vec((0u64..2_000_000_000, 0u64..=14), 1..30),
    );
    check(cases, |(quota, path, start, ops)| {
        let clock = clock(start);
        let mut rules = Rules::new();
        rules.insert(path, [quota]);
        let by_rule = redis_rules(&server, rules, &clock);
        let plain = RedisLimiter::builder(&server.url())
            .quota(quota)
            .prefix(next_prefix())
            .caller_clock(clock.clone())
            .deadline(Duration::from_secs(5))
            .expiry_slack(Duration::from_secs(3600))
            .connect()
            .unwrap();
        for (step, n) in ops {
            clock.advance(Duration::from_nanos(step));
            let expected = view(plain.check_n("api/alice", n));
            prop_assert_eq!(view(by_rule.check_n("api/alice", n)), expected, "n = {}", n);
        }
        prop_assert_eq!(by_rule.stats().round_trips, plain.stats().round_trips);
        Ok(())
    });
}

#[test]
fn rules_answer_like_the_rule_limiter() {
    let server = RedisServer::start();
    let cases = (rules(), 0u64..1_000_000_000_000, prop::collection::vec(op(), 1..30));
    check(cases, |(rules, start, ops)| {
        let clock = clock(start);
        let local = RuleLimiter::with_clock(rules.clone(), clock.clone());
        let redis = redis_rules(&server, rules, &clock);
        for op in ops {
            match op {
                Op::Advance(ns) => clock.advance(Duration::from_nanos(ns)),
                Op::Check(k, n) => {
                    let expected = view(local.check_n(KEYS[k], n));
                    prop_assert_eq!(view(redis.check_n(KEYS[k], n)), expected, "{} {}", KEYS[k], n);
                }
                Op::CheckAll(ks, n) => {
                    let keys: Vec<&str> = ks.iter().map(|&k| KEYS[k]).collect();
                    let expected = view(local.check_all_n(&keys, n));
                    prop_assert_eq!(
                        view(redis.check_all_n(&keys, n)),
                        expected,
                        "{:?} {}",
                        keys,
                        n
                    );
                }
            }
        }
        prop_assert_eq!(redis.rule_stats(), local.stats());
        let s = redis.stats();
        prop_assert_eq!(s.timeouts + s.unavailable + s.rejected, 0);
        Ok(())
    });
}

#[test]
fn a_changed_quota_carries_the_units_available_exactly() {
    let server = RedisServer::start();
    let cases = (
        any_quota(),
        any_quota(),
        0u64..1_000_000_000_000,
        1u64..=12,
        prop_oneof![Just(0u64), 0u64..1_000_000, 0u64..20_000_000_000],
    );
    check(cases, |(before, after, start, used, idle)| {
        let used = used.min(before.burst());
        let clock = clock(start);
        let mut rules = Rules::new();
        rules.insert("r", [before]);
        let lim = redis_rules(&server, rules.clone(), &clock);
        lim.check_n("r/k", used).unwrap();
        clock.advance(Duration::from_nanos(idle));
        rules.insert("r", [after]);
        lim.reload(rules).unwrap();
        // The units it could admit now, (b1 - used) + min(idle / T1, used), as intervals of the
        // new quota in its units of 1/D2 ns (every quota here has an exact D), rounded down and
        // capped at the new burst; the backlog is the new tau less that.
        let (c1, p1, b1) = (u128::from(before.count()), before.period().as_nanos(), before.burst());
        let (c2, p2, b2) = (u128::from(after.count()), after.period().as_nanos(), after.burst());
        let d2 = c2 / gcd(c2, p2);
        let (t2, tau2) = (p2 * d2 / c2, u128::from(b2) * p2 * d2 / c2);
        let free = u128::from(b1 - used) * p1 + (u128::from(idle) * c1).min(u128::from(used) * p1);
        let available = (free * p2 * d2 / (p1 * c2)).min(tau2);
        let backlog = tau2 - available;
        let peek = lim.peek("r/k").unwrap();
        prop_assert_eq!(peek.remaining(), u64::try_from(available / t2).unwrap());
        let reset_ns = u64::try_from(backlog.div_ceil(d2)).unwrap();
        prop_assert_eq!(peek.reset_after(), Duration::from_nanos(reset_ns));
        // The first check writes the carried buckets; nothing is lost or added by it.
        let check = view(lim.check_n("r/k", 0));
        prop_assert_eq!(check, view(Ok(peek)));
        let _ = lim.check_n("r/k", after.burst() + 1);
        let again = lim.peek("r/k").unwrap();
        prop_assert_eq!(
            (again.remaining(), again.reset_after()),
            (peek.remaining(), peek.reset_after())
        );
        Ok(())
    });
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Rules over `PATHS` that limit every key they match (1 or 2 quotas, none shadow): the first
/// quota of each key's rule is then a chain across reloads, bounded by the largest burst and
/// rate among them.
fn limiting_rules() -> impl Strategy<Value = Rules> {
    let rule = prop::option::weighted(0.6, prop::collection::vec(whole_ns_quota(), 1..=2));
    prop::collection::vec(rule, PATHS.len()).prop_map(|rules| {
        let mut out = Rules::new();
        for (path, quotas) in PATHS.iter().zip(rules) {
            if let Some(quotas) = quotas {
                out.insert(*path, quotas);
            }
        }
        out
    })
}

#[derive(Clone, Debug)]
enum Step {
    Advance(u64),
    /// Client, key, cost.
    Check(usize, usize, u64),
    /// Client, distinct keys, cost.
    CheckAll(usize, Vec<usize>, u64),
    /// The client moves to the next rules of the pool (unless it is a version ahead already: a
    /// rollout, where every server runs the rules before or after one change).
    Reload(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let advance = prop_oneof![Just(0u64), 0u64..1_000_000, 0u64..3_000_000_000];
    let keys = prop::sample::subsequence((0..KEYS.len()).collect::<Vec<_>>(), 1..=3);
    prop_oneof![
        2 => advance.prop_map(Step::Advance),
        6 => (0..2usize, 0..KEYS.len(), 0u64..=14).prop_map(|(c, k, n)| Step::Check(c, k, n)),
        2 => (0..2usize, keys, 0u64..=6).prop_map(|(c, k, n)| Step::CheckAll(c, k, n)),
        3 => (0..2usize).prop_map(Step::Reload),
    ]
}

/// Two servers roll the pool's rules out one change after another (each reload puts the next in
/// force on one server; the other follows before the next change), checking keys in between.
#[test]
fn rollouts_on_two_servers_answer_like_the_model_and_mint_no_units() {
    let server = RedisServer::start();
    let cases = (
        prop::collection::vec(limiting_rules(), 4),
        0u64..1_000_000_000_000,
        prop::collection::vec(step(), 1..60),
    );
    check(cases, |(pool, start, steps)| {
        let clock = clock(start);
        let prefix = next_prefix();
        let client = || {
            RedisRuleLimiter::builder(&server.url())
                .prefix(prefix.clone())
                .caller_clock(clock.clone())
                .deadline(Duration::from_secs(5))
                .expiry_slack(Duration::from_secs(3600))
                .connect_rules(pool[0].clone())
                .unwrap()
        };
        let clients = [client(), client()];
        let mut model = Fleet::new(2, &pool[0]);
        let mut version = [0usize; 2];
        let now = || u128::from(clock.now_ns());
        // Each key's admissions (time, units), for the bound.
        let mut admitted: Vec<Vec<(u128, u64)>> = vec![Vec::new(); KEYS.len()];
        for step in steps {
            let (c, keys, n) = match step {
                Step::Advance(ns) => {
                    clock.advance(Duration::from_nanos(ns));
                    continue;
                }
                Step::Reload(c) => {
                    if version[c] > version[1 - c] {
                        continue;
                    }
                    version[c] += 1;
                    let rules = &pool[version[c] % pool.len()];
                    clients[c].reload(rules.clone()).unwrap();
                    model.reload(c, rules);
                    continue;
                }
                Step::Check(c, k, n) => (c, vec![k], n),
                Step::CheckAll(c, ks, n) => (c, ks, n),
            };
            let names: Vec<&str> = keys.iter().map(|&k| KEYS[k]).collect();
            let expected = model.check(c, &names, n, now());
            let got = view(clients[c].check_all_n(&names, n));
            prop_assert_eq!(&got, &expected, "client {} {:?} x {}", c, names, n);
            if n > 0 && matches!(got, Decision::Admitted { .. }) {
                for &k in &keys {
                    admitted[k].push((now(), n));
                }
            }
        }
        // Over every window of every key: at most the largest burst plus what the largest rate
        // refills, among the first quotas of the key's rules in the pool.
        for (k, times) in admitted.iter().enumerate() {
            let firsts: Vec<Quota> = pool
                .iter()
                .filter_map(|r| r.rule_for(KEYS[k]).map(|(_, rule)| rule.quotas()[0]))
                .collect();
            if firsts.len() < pool.len() {
                continue; // untracked under some rules: nothing bounds it then
            }
            for (i, &(from, _)) in times.iter().enumerate() {
                for j in i..times.len() {
                    let w = times[j].0 - from;
                    let units: u64 = times[i..=j].iter().map(|&(_, n)| n).sum();
                    let bound = firsts
                        .iter()
                        .map(|q| {
                            q.burst() as u128 + w * u128::from(q.count()) / q.period().as_nanos()
                        })
                        .max()
                        .unwrap();
                    prop_assert!(
                        u128::from(units) <= bound,
                        "{}: {} units in {} ns, bound {}",
                        KEYS[k],
                        units,
                        w,
                        bound
                    );
                }
            }
        }
        for lim in &clients {
            let s = lim.stats();
            prop_assert_eq!(s.timeouts + s.unavailable + s.rejected, 0);
        }
        Ok(())
    });
}
