//! Reloading the rules of a Redis rules limiter: what happens to each key's level, compared with
//! the in-process `RuleLimiter` where the two agree and pinned where they differ by design.
//! Real redis-server, the caller's `ManualClock`.

mod support;

use leakgate::{ManualClock, Quota, RuleLimiter, Rules};
use leakgate_redis::{AsyncRedisRuleLimiter, RedisRuleLimiter};
use std::time::Duration;
use support::{epoch, manual_rules as manual, RedisServer};

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

fn rules(entries: &[(&str, &[&str])]) -> Rules {
    let mut rules = Rules::new();
    for (path, quotas) in entries {
        rules.insert(*path, quotas.iter().map(|s| q(s)));
    }
    rules
}

/// Both limiters' answers to the same request, which must be equal.
fn same(redis: &RedisRuleLimiter, local: &RuleLimiter<ManualClock>, key: &str, n: u64) {
    let (r, l) = (redis.check_n(key, n), local.check_n(key, n));
    assert_eq!(format!("{r:?}"), format!("{l:?}"), "{key} x {n}");
}

#[test]
fn a_changed_quota_carries_whole_levels_as_the_rule_limiter_does() {
    let server = RedisServer::start();
    let clock = epoch();
    let first = rules(&[("api", &["10/s"]), ("web", &["5/s"])]);
    let redis = manual(&server, first.clone(), &clock);
    let local = RuleLimiter::with_clock(first, clock.clone());
    same(&redis, &local, "api/alice", 6);
    same(&redis, &local, "api/bob", 10);
    same(&redis, &local, "web/x", 2);
    clock.advance(Duration::from_millis(200)); // two units drain from each api bucket
    let stricter = rules(&[("api", &["1/s burst 8"]), ("web", &["5/s"])]);
    redis.reload(stricter.clone()).unwrap();
    local.reload(stricter);
    // alice keeps 4 units (now of 1 s each), bob 8 (capped at the new burst), web/x its own.
    same(&redis, &local, "api/alice", 0);
    same(&redis, &local, "api/alice", 4);
    same(&redis, &local, "api/bob", 1);
    same(&redis, &local, "web/x", 4);
    same(&redis, &local, "api/carol", 8);
    clock.advance(Duration::from_millis(2500));
    for key in ["api/alice", "api/bob", "web/x", "api/carol"] {
        same(&redis, &local, key, 2);
    }
    assert_eq!(redis.rule_stats(), local.stats(), "counts kept by path across the reload");
}

#[test]
fn a_fraction_of_a_unit_is_carried_as_a_whole_unit() {
    let server = RedisServer::start();
    let clock = epoch();
    let lim = manual(&server, rules(&[("api", &["10/s"])]), &clock);
    lim.check_n("api/alice", 3).unwrap();
    clock.advance(Duration::from_millis(50)); // 2.5 units left
    lim.reload(rules(&[("api", &["1/s burst 5"])])).unwrap();
    // Rounded up, against the caller: 3 units of 1 s (the in-process limiter keeps 2.5).
    let peek = lim.peek("api/alice").unwrap();
    assert_eq!((peek.remaining(), peek.reset_after()), (2, Duration::from_secs(3)));
}

#[test]
fn a_burst_change_keeps_the_level_and_caps_it() {
    let server = RedisServer::start();
    let clock = epoch();
    let first = rules(&[("api", &["10/s burst 20"])]);
    let redis = manual(&server, first.clone(), &clock);
    let local = RuleLimiter::with_clock(first, clock.clone());
    same(&redis, &local, "api/a", 15);
    same(&redis, &local, "api/b", 3);
    clock.advance(Duration::from_millis(55)); // half a unit: kept exactly, the rate is the same
    let lower = rules(&[("api", &["10/s burst 8"])]);
    redis.reload(lower.clone()).unwrap();
    local.reload(lower);
    same(&redis, &local, "api/a", 0);
    same(&redis, &local, "api/b", 6);
    same(&redis, &local, "api/b", 0);
    let higher = rules(&[("api", &["600/min burst 30"])]); // the same rate, written otherwise
    redis.reload(higher.clone()).unwrap();
    local.reload(higher);
    same(&redis, &local, "api/a", 22);
    same(&redis, &local, "api/a", 1);
    same(&redis, &local, "api/b", 0);
}

#[test]
fn quotas_added_start_empty_and_quotas_removed_are_dropped() {
    let server = RedisServer::start();
    let clock = epoch();
    let two = rules(&[("api", &["10/h", "20/d"])]);
    let redis = manual(&server, two.clone(), &clock);
    let local = RuleLimiter::with_clock(two.clone(), clock.clone());
    same(&redis, &local, "api/a", 6);
    let one = rules(&[("api", &["10/h"])]);
    redis.reload(one.clone()).unwrap();
    local.reload(one);
    same(&redis, &local, "api/a", 1); // 10/h keeps 6 (+1); 20/d is dropped at this check
    let three = rules(&[("api", &["10/h", "20/d", "5/min"])]);
    redis.reload(three.clone()).unwrap();
    local.reload(three);
    same(&redis, &local, "api/a", 0);
    same(&redis, &local, "api/a", 3);
    same(&redis, &local, "api/a", 1);
}

#[test]
fn a_key_under_another_rule_starts_a_fresh_bucket_and_no_rule_means_untracked() {
    let server = RedisServer::start();
    let clock = epoch();
    let lim = manual(&server, rules(&[("ip", &["1/h burst 10"])]), &clock);
    lim.check_n("ip/10.0.0.1", 10).unwrap();
    let before = lim.redis_key("ip/10.0.0.1").unwrap();
    // An override for one address: its buckets live under the new rule's path, from empty
    // (the in-process limiter would carry its 10 units over).
    lim.reload(rules(&[("ip", &["1/h burst 10"]), ("ip/10.0.0.1", &["1/h burst 3"])])).unwrap();
    assert_ne!(lim.redis_key("ip/10.0.0.1").unwrap(), before);
    assert_eq!(lim.check("ip/10.0.0.1").unwrap().remaining(), 2);
    // Back under "ip": its old bucket is still there, full.
    lim.reload(rules(&[("ip", &["1/h burst 10"])])).unwrap();
    assert!(lim.check("ip/10.0.0.1").is_err());
    // No rule: untracked, and the counts of the rules gone are no longer listed.
    lim.reload(Rules::new()).unwrap();
    assert_eq!(lim.check("ip/10.0.0.1").unwrap().remaining(), u64::MAX);
    assert!(lim.rule_stats().is_empty());
    assert_eq!(lim.redis_key("ip/10.0.0.1"), None);
}

#[test]
fn servers_on_old_and_new_rules_share_each_key_meanwhile() {
    let server = RedisServer::start();
    let clock = epoch();
    let old = rules(&[("api", &["10/s burst 10"])]);
    let (a, b) = (manual(&server, old.clone(), &clock), manual(&server, old, &clock));
    a.check_n("api/k", 4).unwrap();
    b.reload(rules(&[("api", &["1/s burst 5"])])).unwrap();
    // Each carries the key to its own quota when it checks it: 4 units stay 4 units.
    assert_eq!(b.check("api/k").unwrap().remaining(), 0);
    assert_eq!(a.check_n("api/k", 5).unwrap().remaining(), 0, "5 units (b's), 5 more");
    assert!(b.check("api/k").is_err());
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.rejected + sb.rejected, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_go_on_while_the_rules_are_reloaded() {
    let server = RedisServer::start();
    let lim = AsyncRedisRuleLimiter::builder(&server.url())
        .deadline(Duration::from_secs(5))
        .connect_rules_async(rules(&[("api", &["40/h"])]))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let lim = lim.clone();
            tokio::spawn(async move {
                let key = format!("api/{}", i % 2);
                lim.check(&key).await.is_ok()
            })
        })
        .collect();
    for burst in [40, 30, 20, 10, 20, 30, 40] {
        lim.reload(rules(&[("api", &[&format!("40/h burst {burst}")])])).unwrap();
        tokio::task::yield_now().await;
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    // Each key has at least the smallest burst, and every check was decided by Redis. (Not at
    // most the largest: a level capped by a lower burst stays capped when the burst goes up.)
    assert!(admitted >= 20, "admitted {admitted}");
    let s = lim.stats();
    assert_eq!((s.redis_admitted + s.redis_denied, s.rejected), (64, 0));
}
