//! Reloading the rules of a Redis rules limiter: what happens to each key's buckets (the
//! contract's "Rules", reload: a key keeps the units it could admit, capped at the new burst),
//! pinned in numbers and checked against the model of `support::reload_model`. Real
//! redis-server, the caller's `ManualClock`.

mod support;

use leakgate::{Clock, ManualClock, Quota, RuleLimiter, Rules};
use leakgate_redis::{AsyncRedisRuleLimiter, RedisRuleLimiter};
use redis::Commands;
use std::time::Duration;
use support::model::observed;
use support::reload_model::Fleet;
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

/// One server and the model, reloaded together.
struct Pair {
    redis: RedisRuleLimiter,
    model: Fleet,
    clock: ManualClock,
}

impl Pair {
    fn new(server: &RedisServer, first: Rules) -> Pair {
        let clock = epoch();
        let model = Fleet::new(1, &first);
        Pair { redis: manual(server, first, &clock), model, clock }
    }

    fn reload(&mut self, rules: Rules) {
        self.model.reload(0, &rules);
        self.redis.reload(rules).unwrap();
    }

    /// Redis's answer to a check, which must be the model's; `(remaining, reset_after)`.
    fn check(&mut self, key: &str, n: u64) -> (bool, u64, Duration) {
        let now = u128::from(self.clock.now_ns());
        let expected = self.model.check(0, &[key], n, now);
        let got = self.redis.check_n(key, n);
        assert_eq!(observed(got.map(|ok| (ok, 0))), expected, "{key} x {n}");
        match got {
            Ok(ok) => (true, ok.remaining(), ok.reset_after()),
            Err(no) => (false, no.remaining(), no.reset_after()),
        }
    }
}

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

#[test]
fn a_changed_quota_carries_the_units_each_key_could_admit() {
    let server = RedisServer::start();
    let mut p = Pair::new(&server, rules(&[("api", &["10/s"]), ("web", &["5/s"])]));
    p.check("api/alice", 6);
    p.check("api/bob", 10);
    p.check("web/x", 2);
    p.clock.advance(MS(200)); // two units come back to each api bucket
    p.reload(rules(&[("api", &["1/s burst 8"]), ("web", &["5/s"])]));
    // alice could admit 6, bob 2: so they can now, at 1/s (a level carried would leave 4 and 0).
    assert_eq!(p.check("api/alice", 0), (true, 6, S(2)));
    assert_eq!(p.check("api/alice", 6), (true, 0, S(8)));
    assert_eq!(p.check("api/bob", 0), (true, 2, S(6)));
    assert_eq!(p.check("api/bob", 3), (false, 2, S(6)));
    assert_eq!(p.check("web/x", 4), (true, 0, S(1)));
    assert_eq!(p.check("api/carol", 8), (true, 0, S(8)), "a new key starts full");
    p.clock.advance(MS(2500));
    for key in ["api/alice", "api/bob", "web/x", "api/carol"] {
        p.check(key, 2);
    }
}

#[test]
fn a_fraction_of_a_unit_is_kept_when_the_rate_changes() {
    let server = RedisServer::start();
    let mut p = Pair::new(&server, rules(&[("api", &["10/s"])]));
    p.check("api/alice", 3);
    p.clock.advance(MS(50)); // 7.5 units it could admit
    p.reload(rules(&[("api", &["1/s burst 10"])]));
    assert_eq!(p.check("api/alice", 0), (true, 7, MS(2500)));
    p.clock.advance(MS(500));
    assert_eq!(p.check("api/alice", 8), (true, 0, S(10)));
}

#[test]
fn a_burst_change_keeps_the_units_exactly_and_a_grow_adds_none_at_once() {
    let server = RedisServer::start();
    let mut p = Pair::new(&server, rules(&[("api", &["10/s burst 20"])]));
    p.check("api/a", 15);
    p.check("api/b", 3);
    p.clock.advance(MS(55)); // a could admit 5.55 units, b 17.55
    p.reload(rules(&[("api", &["10/s burst 8"])]));
    assert_eq!(p.check("api/a", 0), (true, 5, MS(245)));
    assert_eq!(p.check("api/b", 0), (true, 8, MS(0)), "capped at the new burst");
    assert_eq!(p.check("api/b", 6), (true, 2, MS(600)));
    p.reload(rules(&[("api", &["600/min burst 30"])])); // the same rate, written otherwise
    assert_eq!(p.check("api/a", 0), (true, 5, MS(2445)), "nothing added by the grow");
    assert_eq!(p.check("api/b", 3), (false, 2, MS(2800)));
    p.clock.advance(S(3));
    assert_eq!(p.check("api/a", 30), (true, 0, S(3)), "the new units came at the rate");
}

#[test]
fn quotas_added_start_empty_and_quotas_removed_are_dropped() {
    // Where the old and the new meaning agree (each quota kept or new), as the in-process
    // limiter does.
    let server = RedisServer::start();
    let clock = epoch();
    let two = rules(&[("api", &["10/h", "20/d"])]);
    let redis = manual(&server, two.clone(), &clock);
    let local = RuleLimiter::with_clock(two.clone(), clock.clone());
    let same = |key: &str, n: u64| {
        let (r, l) = (redis.check_n(key, n), local.check_n(key, n));
        assert_eq!(format!("{r:?}"), format!("{l:?}"), "{key} x {n}");
    };
    same("api/a", 6);
    let one = rules(&[("api", &["10/h"])]);
    redis.reload(one.clone()).unwrap();
    local.reload(one);
    same("api/a", 1); // 10/h keeps 6 (+1); 20/d is dropped at this check
    let three = rules(&[("api", &["10/h", "20/d", "5/min"])]);
    redis.reload(three.clone()).unwrap();
    local.reload(three);
    same("api/a", 0);
    same("api/a", 3);
    same("api/a", 1);
}

#[test]
fn a_key_moved_to_another_rule_takes_its_buckets_along() {
    let server = RedisServer::start();
    let mut p = Pair::new(&server, rules(&[("ip", &["1/h burst 10"])]));
    assert_eq!(p.check("ip/10.0.0.1", 10), (true, 0, S(36_000)));
    let before = p.redis.redis_key("ip/10.0.0.1").unwrap();
    // An override for one address: its buckets move to the new rule's path, as what they could
    // admit (nothing).
    p.reload(rules(&[("ip", &["1/h burst 10"]), ("ip/10.0.0.1", &["1/h burst 3"])]));
    let after = p.redis.redis_key("ip/10.0.0.1").unwrap();
    assert_ne!(after, before);
    assert_eq!(p.check("ip/10.0.0.1", 1), (false, 0, S(3 * 3600)));
    // The bucket under the old path is now a marked copy, for servers still on the old rules.
    let mut con = server.connection();
    let copy: String = con.get(&before).unwrap();
    assert!(copy.starts_with('~'), "{copy}");
    // Back under "ip", then moved twice before its next check: still nothing to admit.
    p.reload(rules(&[("ip", &["1/h burst 10"])]));
    assert!(!p.check("ip/10.0.0.1", 1).0);
    p.reload(rules(&[("ip", &["1/h burst 10"]), ("ip/10.0.0.1", &["1/h burst 3"])]));
    p.reload(rules(&[("", &["1/h burst 10"])]));
    assert!(!p.check("ip/10.0.0.1", 1).0);
    p.clock.advance(S(3600));
    assert_eq!(p.check("ip/10.0.0.1", 2), (false, 1, S(9 * 3600)));
    // No rule: untracked, and the counts of the rules gone are no longer listed.
    p.reload(Rules::new());
    assert_eq!(p.redis.check("ip/10.0.0.1").unwrap().remaining(), u64::MAX);
    assert!(p.redis.rule_stats().is_empty());
    assert_eq!(p.redis.redis_key("ip/10.0.0.1"), None);
}

#[test]
fn servers_on_old_and_new_rules_share_each_key_meanwhile() {
    let server = RedisServer::start();
    let clock = epoch();
    let old = rules(&[("api", &["10/s burst 10"])]);
    let (a, b) = (manual(&server, old.clone(), &clock), manual(&server, old, &clock));
    a.check_n("api/k", 4).unwrap();
    b.reload(rules(&[("api", &["1/s burst 5"])])).unwrap();
    // Each carries the key to its own quota when it checks it: 6 units left, capped at b's 5.
    assert_eq!(b.check("api/k").unwrap().remaining(), 4);
    assert!(a.check_n("api/k", 5).is_err(), "4 left, whichever server asks");
    assert_eq!(a.check_n("api/k", 4).unwrap().remaining(), 0);
    assert!(b.check("api/k").is_err());
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.rejected + sb.rejected, 0);
}

#[test]
fn a_bucket_of_script_version_2_keeps_its_level_and_its_debt() {
    // Version 2 stored no tau, and carried levels: its buckets are read with that meaning once,
    // then written in version 3's form.
    let server = RedisServer::start();
    let clock = epoch();
    let lim = manual(&server, rules(&[("api", &["10/s burst 5"])]), &clock);
    let key = lim.redis_key("api/k").unwrap();
    let now_ms = clock.now_ns() / 1_000_000;
    let mut con = server.connection();
    // A level of 8 units of 100 ms, written by a version 2 server whose burst was 10.
    let _: () = con.set(&key, format!("{}:0@1:100:0", now_ms + 800)).unwrap();
    let no = lim.check("api/k").unwrap_err();
    assert_eq!((no.remaining(), no.reset_after()), (0, MS(800)), "the debt is not forgiven");
    assert_eq!(no.retry_after(), Some(MS(400)));
    let stored: String = con.get(&key).unwrap();
    assert_eq!(stored, format!("{}:0@1:100:0:500:0", now_ms + 800));
    // The debt (3 units of 100 ms beyond the burst) stays a debt at another rate: 3 units of
    // 50 ms beyond the new burst.
    lim.reload(rules(&[("api", &["20/s burst 10"])])).unwrap();
    let no = lim.check("api/k").unwrap_err();
    assert_eq!((no.remaining(), no.reset_after(), no.retry_after()), (0, MS(650), Some(MS(200))));
    clock.advance(MS(500));
    assert_eq!(lim.check("api/k").unwrap().remaining(), 6);
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
    // Each key has at least the smallest burst, and every check was decided by Redis.
    assert!(admitted >= 20, "admitted {admitted}");
    let s = lim.stats();
    assert_eq!((s.redis_admitted + s.redis_denied, s.rejected), (64, 0));
}
