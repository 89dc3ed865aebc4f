//! Calls whose keys live in different slots of a real six-node Redis Cluster are decided all or
//! nothing (holds: reserve on every slot, then commit or release; see `connection/cross_slot.rs`):
//! a refused call charges nothing anywhere, and under contention from several clients, on a
//! frozen manual clock, no key admits more than its burst and every key's state is exactly the
//! units admitted on it (no charge left behind a refusal, no hold left). The same for a rules
//! limiter (rule buckets, a shadow rule, a reload that carries buckets over).

mod support;

use leakgate::{ManualClock, Rules};
use leakgate_redis::{Builder, RedisLimiter, RedisRuleLimiter};
use leakgate_test_support::Cluster;
use std::time::Duration;

/// A plain limiter on the cluster, on the caller's `clock`.
fn limiter(cluster: &Cluster, quota: &str, clock: &ManualClock) -> RedisLimiter {
    Builder::cluster(cluster.seeds())
        .quota(quota.parse().unwrap())
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600))
        .connect()
        .expect("a limiter")
}

/// A rules limiter on the cluster, on the caller's `clock`.
fn rules_limiter(cluster: &Cluster, rules: Rules, clock: &ManualClock) -> RedisRuleLimiter {
    Builder::cluster(cluster.seeds())
        .caller_clock(clock.clone())
        .deadline(Duration::from_secs(5))
        .expiry_slack(Duration::from_secs(3600))
        .connect_rules(rules)
        .expect("a rules limiter")
}

/// Rules for the tests: `api` at `api_burst`, a shadow rule under it, and `tenant`.
fn rules(api_burst: u64) -> Rules {
    let mut rules = Rules::new();
    rules.insert("api", [format!("1/h burst {api_burst}").parse().unwrap()]);
    rules.insert("api/beta", ["1/h burst 1".parse().unwrap()]).shadow(true);
    rules.insert("tenant", ["1/h burst 3".parse().unwrap(), "1/s burst 5".parse().unwrap()]);
    rules
}

/// No key of the cluster holds a hold.
fn no_hold_left(cluster: &Cluster) {
    for key in cluster.keys("*") {
        let value = get(cluster, &key);
        assert!(!value.contains(';'), "a hold was left: {value}");
    }
}

/// A limiter the contention tests drive: an all-or-nothing call of `n` units on `keys`, and
/// what a key has left.
trait Contended: Send {
    fn admits(&self, keys: &[&str], n: u64) -> bool;
    fn remaining(&self, key: &str) -> u64;
}

impl Contended for RedisLimiter {
    fn admits(&self, keys: &[&str], n: u64) -> bool {
        self.check_all_n(keys, n).is_ok()
    }

    fn remaining(&self, key: &str) -> u64 {
        self.peek(key).unwrap().remaining()
    }
}

impl Contended for RedisRuleLimiter {
    fn admits(&self, keys: &[&str], n: u64) -> bool {
        self.check_all_n(keys, n).is_ok()
    }

    fn remaining(&self, key: &str) -> u64 {
        self.peek(key).unwrap().remaining()
    }
}

/// Six clients from `limiter` (each its own connection), one thread each, make `calls` calls
/// of 1 to 3 units on one or two of `keys` (drawn by an xorshift from `seed`), on one frozen
/// clock: every unit a key admits stays charged, so each key admits at most `burst` and its
/// state (read on a seventh client) is exactly what it admitted; some key is run down, and no
/// hold is left.
fn contend<L: Contended>(
    cluster: &Cluster,
    limiter: impl Fn() -> L,
    keys: [&str; 6],
    burst: u64,
    (seed, calls): (u64, usize),
) {
    let per_client: Vec<[u64; 6]> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6u64)
            .map(|c| {
                let lim = limiter();
                s.spawn(move || {
                    let mut units = [0u64; 6];
                    let mut x = seed ^ c;
                    for _ in 0..calls {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let (i, j, n) =
                            ((x % 6) as usize, ((x >> 8) % 6) as usize, 1 + (x >> 16) % 3);
                        let call: Vec<&str> = if x.is_multiple_of(4) {
                            vec![keys[i]]
                        } else {
                            vec![keys[i], keys[j]]
                        };
                        if lim.admits(&call, n) {
                            for k in &call {
                                units[keys.iter().position(|x| x == k).unwrap()] += n;
                            }
                        }
                    }
                    units
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let lim = limiter();
    let mut refused_somewhere = false;
    for (k, key) in keys.iter().enumerate() {
        let units: u64 = per_client.iter().map(|u| u[k]).sum();
        assert!(units <= burst, "{key} admitted {units} > {burst}");
        let left = lim.remaining(key);
        assert_eq!(left, burst - units, "{key}: the state is what was admitted");
        refused_somewhere |= left < 3;
    }
    assert!(refused_somewhere, "the keys were never contended");
    no_hold_left(cluster);
}

/// The value of `key` on the master that holds it.
fn get(cluster: &Cluster, key: &[u8]) -> String {
    let mut con = cluster.nodes()[cluster.master_of(key)].connection();
    redis::cmd("GET").arg(key).query(&mut con).unwrap()
}

#[test]
fn a_call_over_several_slots_is_all_or_nothing() {
    let cluster = Cluster::start();
    let clock = support::epoch();
    let lim = limiter(&cluster, "10/s burst 3", &clock);
    // "a" and "b" hash to different slots (15495 and 3300), on different masters.
    assert_ne!(cluster.master_of(b"leakgate:a"), cluster.master_of(b"leakgate:b"));
    let before = lim.stats().round_trips;
    let admitted = lim.check_all_n(&["a", "b"], 1).unwrap();
    assert_eq!(admitted.remaining(), 2);
    assert_eq!(lim.stats().round_trips - before, 4, "reserve and commit on each slot");
    lim.check_n("b", 2).unwrap();
    // "b" is full: the call is refused whole, and "a" keeps its two units.
    let refused = lim.check_all_n(&["a", "b"], 1).unwrap_err();
    assert_eq!(refused.remaining(), 0);
    assert!(refused.retry_after().is_some());
    assert_eq!(lim.peek("a").unwrap().remaining(), 2, "nothing charged on a");
    lim.check_n("a", 2).unwrap();
    assert!(lim.check("a").is_err());
    // A cost above the burst is refused without a charge; a key named twice is charged twice.
    assert!(lim.check_all_n(&["c", "d"], 4).unwrap_err().retry_after().is_none());
    lim.check_all_n(&["c", "d", "c"], 1).unwrap();
    assert_eq!((lim.peek("c").unwrap().remaining(), lim.peek("d").unwrap().remaining()), (1, 2));
    // No hold is left on any key.
    for key in cluster.keys("leakgate:*") {
        let value = get(&cluster, &key);
        assert!(!value.contains(';'), "{value}");
    }
}

#[test]
fn contending_cross_slot_calls_never_admit_past_the_burst_nor_leave_a_charge() {
    const KEYS: [&str; 6] = ["k0", "k1", "k2", "k3", "k4", "k5"];
    const BURST: u64 = 40;
    let cluster = Cluster::start();
    let clock = support::epoch();
    let quota = format!("1/h burst {BURST}");
    let make = || limiter(&cluster, &quota, &clock);
    contend(&cluster, make, KEYS, BURST, (0x9e37_79b9_7f4a_7c15, 80));
}

#[test]
fn a_frozen_master_fails_the_whole_call_by_its_deadline_and_leaves_no_charge() {
    const DEADLINE: Duration = Duration::from_millis(200);
    let cluster = Cluster::start();
    let clock = support::epoch();
    let lim = Builder::cluster(cluster.seeds())
        .quota("1/h burst 3".parse().unwrap())
        .caller_clock(clock.clone())
        .deadline(DEADLINE)
        .expiry_slack(Duration::from_secs(3600))
        .connect()
        .expect("a limiter");
    let frozen = cluster.master_of(&lim.redis_key("b"));
    assert_ne!(cluster.master_of(&lim.redis_key("a")), frozen);
    // Below the cluster's node timeout: a freeze, not a failover.
    cluster.nodes()[frozen].pause();
    let started = std::time::Instant::now();
    let answer = lim.check_all_n(&["a", "b"], 1);
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    cluster.nodes()[frozen].resume();
    // The failure policy (deny) answered for the whole call, within the deadline (and what a
    // busy machine's scheduling adds).
    assert!(answer.is_err(), "{answer:?}");
    assert_eq!(lim.stats().policy_denied, 1, "{:?}", lim.stats());
    assert!(took <= DEADLINE + Duration::from_secs(1), "took {took:?}");
    // "a" reserved, and was released; "b"'s reserve ran after the call's deadline and decided
    // nothing: both keep their whole burst, and no hold is left.
    let mut peeks = None;
    for _ in 0..50 {
        if let (Ok(a), Ok(b)) = (lim.peek("a"), lim.peek("b")) {
            peeks = Some((a.remaining(), b.remaining()));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(peeks, Some((3, 3)));
    for key in cluster.keys("leakgate:*") {
        assert!(!get(&cluster, &key).contains(';'), "a hold was left");
    }
    lim.check_all_n(&["a", "b"], 3).expect("both full again");
}

#[test]
fn rule_keys_in_different_slots_are_all_or_nothing() {
    let cluster = Cluster::start();
    let clock = support::epoch();
    let lim = rules_limiter(&cluster, rules(3), &clock);
    let (a, t) = (lim.redis_key("api/a").unwrap(), lim.redis_key("tenant/d").unwrap());
    assert_ne!(cluster.master_of(&a), cluster.master_of(&t));
    let before = lim.stats().round_trips;
    assert_eq!(lim.check_all_n(&["api/a", "tenant/d"], 1).unwrap().remaining(), 2);
    assert_eq!(lim.stats().round_trips - before, 4, "reserve and commit on each slot");
    lim.check_n("tenant/d", 2).unwrap();
    // "tenant/d" is full: refused whole, "api/a" keeps its two units.
    let refused = lim.check_all_n(&["api/a", "tenant/d"], 1).unwrap_err();
    assert_eq!(refused.remaining(), 0);
    assert_eq!(lim.peek("api/a").unwrap().remaining(), 2, "nothing charged on api/a");
    // A shadow rule's key in another slot is charged beside the others and refuses nothing.
    lim.check_all_n(&["api/beta/x", "tenant/c"], 1).unwrap();
    lim.check_all_n(&["api/beta/x", "tenant/c"], 1).expect("the shadow rule refuses nothing");
    // A reload that changes the quotas: the keys are carried over as they are read, holds and
    // all (api's burst 3 to 5: a grow mints nothing at once, api/a keeps its two units).
    lim.reload(rules(5)).unwrap();
    lim.check_all_n(&["api/a", "tenant/e"], 1).unwrap();
    assert_eq!(lim.peek("api/a").unwrap().remaining(), 1);
    assert!(lim.check_all_n(&["api/a", "tenant/h"], 2).is_err());
    assert_eq!(lim.peek("tenant/h").unwrap().remaining(), 3, "nothing charged on tenant/h");
    no_hold_left(&cluster);
}

#[test]
fn contending_cross_slot_rule_calls_never_admit_past_the_burst_nor_leave_a_charge() {
    const KEYS: [&str; 6] = ["api/k0", "api/k1", "api/k2", "tenant/k3", "tenant/k4", "api/k5"];
    const BURST: u64 = 30;
    let cluster = Cluster::start();
    let clock = support::epoch();
    let mut r = Rules::new();
    r.insert("api", [format!("1/h burst {BURST}").parse().unwrap()]);
    r.insert(
        "tenant",
        [format!("1/h burst {BURST}").parse().unwrap(), "1/s burst 100".parse().unwrap()],
    );
    let make = || rules_limiter(&cluster, r.clone(), &clock);
    contend(&cluster, make, KEYS, BURST, (0x2545_f491_4f6c_dd1d, 60));
}
