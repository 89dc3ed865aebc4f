//! Rules in Redis, as a user sees them: overrides, keys no rule matches, shadow rules, several
//! keys of several rules in one round trip, the failure policy, bad input, key names, and one
//! rules file driving both the in-process `RuleLimiter` and the Redis one. Real redis-server.

mod support;

use leakgate::{Quota, RuleLimiter, RuleStats, Rules};
use leakgate_redis::{AsyncRedisRuleLimiter, Error, FailurePolicy, RedisRuleLimiter};
use redis::Commands;
use std::time::Duration;
use support::{epoch, manual_rules as manual, RedisServer};

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

/// The contract's example rules.
fn example() -> Rules {
    let mut rules = Rules::new();
    rules.insert("rate_limit", [q("1/s burst 10")]);
    rules.insert("rate_limit/192.168.11.3", [q("100/s burst 500")]);
    rules.insert("api", [q("10/s"), q("1000/h")]);
    rules
}

#[test]
fn overrides_take_the_longest_prefix_and_unmatched_keys_are_not_tracked() {
    let server = RedisServer::start();
    let lim = manual(&server, example(), &epoch());
    assert_eq!(lim.check("rate_limit/10.0.0.1").unwrap().remaining(), 9);
    assert_eq!(lim.check("rate_limit/192.168.11.3").unwrap().remaining(), 499);
    assert_eq!(lim.check("rate_limit/192.168.11.3/x").unwrap().remaining(), 499);
    assert_eq!(lim.check_n("api/alice", 10).unwrap().remaining(), 0, "10/s binds");
    assert!(lim.check("api/alice").is_err());
    assert_eq!(lim.stats().round_trips, 5);
    // No rule: admitted, untracked, without a round trip and without a Redis key.
    for key in ["web/index", "rate_limitX", "", "apiary"] {
        let ok = lim.check_n(key, 1_000_000).unwrap();
        assert_eq!((ok.remaining(), ok.reset_after()), (u64::MAX, Duration::ZERO), "{key}");
        assert_eq!(lim.redis_key(key), None);
    }
    let s = lim.stats();
    assert_eq!((s.round_trips, s.untracked, s.redis_admitted, s.redis_denied), (5, 4, 4, 1));
    let mut con = server.connection();
    let keys: Vec<Vec<u8>> = con.keys("*").unwrap();
    assert_eq!(keys.len(), 4, "one Redis key per tracked key");
}

#[test]
fn several_keys_of_several_rules_are_one_round_trip_all_or_nothing() {
    let server = RedisServer::start();
    let clock = epoch();
    let mut rules = Rules::new();
    rules.insert("tenant", [q("3/h")]);
    rules.insert("user", [q("2/h"), q("5/d")]);
    let lim = manual(&server, rules, &clock);
    let ok = lim.check_all_n(&["tenant/{acme}", "user/{acme}/1", "web/x"], 2).unwrap();
    assert_eq!(ok.remaining(), 0, "user/1 has 0 left under 2/h");
    // user/2 has room, the tenant has 1 left: refused, and user/2 keeps both units.
    let no = lim.check_all_n(&["tenant/{acme}", "user/{acme}/2"], 2).unwrap_err();
    assert_eq!((no.remaining(), no.retry_after()), (1, Some(Duration::from_secs(1200))));
    assert_eq!(lim.check_n("user/{acme}/2", 2).unwrap().remaining(), 0);
    // A key named twice is charged twice.
    assert_eq!(lim.check_all_n(&["tenant/{acme}", "tenant/{acme}"], 1).unwrap_err().remaining(), 1);
    lim.check_all_n(&["tenant/{b}", "tenant/{b}"], 1).unwrap();
    assert_eq!(lim.peek("tenant/{b}").unwrap().remaining(), 1);
    // More than a burst, counting the namings: never.
    assert_eq!(lim.check_all_n(&["tenant/{c}", "tenant/{c}"], 2).unwrap_err().retry_after(), None);
    assert_eq!(lim.stats().round_trips, 7);
    let counts: Vec<(String, u64, u64)> =
        lim.rule_stats().into_iter().map(|r| (r.rule, r.admitted, r.denied)).collect();
    // Peeks count as admitted, as in-process.
    assert_eq!(counts, [("tenant".into(), 3, 3), ("user".into(), 2, 0)]);
}

#[test]
fn shadow_rules_decide_and_count_but_admit() {
    let server = RedisServer::start();
    let clock = epoch();
    let mut rules = Rules::new();
    rules.insert("api", [q("2/h")]);
    rules.insert("beta", [q("1/h"), q("10/d")]).shadow(true);
    let lim = manual(&server, rules.clone(), &clock);
    let local = RuleLimiter::with_clock(rules, clock.clone());
    for _ in 0..3 {
        let (r, l) = (lim.check("beta/x"), local.check("beta/x"));
        assert!(r.is_ok());
        assert_eq!(format!("{r:?}"), format!("{l:?}"));
    }
    // The refusals took nothing: a peek sees one unit used.
    assert_eq!(lim.peek("beta/x").unwrap().remaining(), 0);
    assert_eq!(lim.check_n("beta/y", 20).unwrap().remaining(), u64::MAX, "reported as untracked");
    assert_eq!(lim.check_n("beta/y", u64::MAX).unwrap().remaining(), u64::MAX);
    // With an enforcing rule: the shadow rule does not refuse, and is not charged on a refusal.
    lim.check_n("api/a", 2).unwrap();
    assert!(lim.check_all_n(&["beta/z", "api/a"], 1).is_err());
    assert_eq!(lim.peek("beta/z").unwrap().remaining(), 1);
    assert!(lim.check_all_n(&["beta/z", "api/b"], 1).is_ok());
    assert_eq!(lim.peek("beta/z").unwrap().remaining(), 0, "charged with the admission");
    let beta = lim.rule_stats().into_iter().find(|r| r.rule == "beta").unwrap();
    let expected = RuleStats { rule: "beta".into(), admitted: 5, denied: 0, denied_in_shadow: 4 };
    assert_eq!(beta, expected);
}

#[test]
fn keys_are_named_by_rule_and_keep_the_keys_own_hash_tag() {
    let server = RedisServer::start();
    let mut rules = Rules::new();
    rules.insert("user", [q("1/s")]);
    rules.insert("user/{vip}", [q("10/s")]);
    let lim = RedisRuleLimiter::builder(&server.url()).prefix("app:").connect_rules(rules).unwrap();
    let tag = |key: &[u8]| {
        let open = key.iter().position(|&b| b == b'{')?;
        let close = key[open..].iter().position(|&b| b == b'}')?;
        Some(key[open + 1..open + close].to_vec())
    };
    let plain = lim.redis_key("user/{acme}/42").unwrap();
    assert_eq!(plain, b"app:gcra1@user:user/{acme}/42");
    let vip = lim.redis_key("user/{vip}/7").unwrap();
    assert_eq!(vip, b"app:gcra1@user/%7Bvip%7D:user/{vip}/7");
    // Redis Cluster hashes the first {tag}: the key's own, never one from a rule path.
    assert_eq!(tag(&plain), Some(b"acme".to_vec()));
    assert_eq!(tag(&vip), Some(b"vip".to_vec()));
    assert!(lim.check("user/{vip}/7").is_ok());
    let ttl: i64 = server.connection().pttl(&vip).unwrap();
    assert!(ttl > 0 && ttl <= 101, "one unit of 10/s: empty again in 100 ms, ttl {ttl}");
}

#[test]
fn the_failure_policy_answers_when_redis_is_gone() {
    let mut server = RedisServer::start();
    let mut rules = Rules::new();
    rules.insert("api", [q("10/h burst 4")]);
    let clock = epoch();
    let mk = |policy| {
        RedisRuleLimiter::builder(&server.url())
            .caller_clock(clock.clone())
            .deadline(Duration::from_millis(200))
            .failure_policy(policy)
            .connect_rules(rules.clone())
            .unwrap()
    };
    let deny = mk(FailurePolicy::Deny);
    let local = mk(FailurePolicy::Local { expected_servers: 2 });
    assert!(deny.check("api/a").is_ok());
    server.kill();
    assert!(deny.check("api/a").is_err());
    assert!(matches!(deny.try_check_n("api/a", 1), Err(e) if e.is_unavailable()));
    // This process's share: burst 4 over 2 servers.
    assert!(local.check_n("api/a", 2).is_ok());
    assert!(local.check("api/a").is_err());
    assert!(local.check("web/a").is_ok(), "no rule, no round trip");
    let s = local.stats();
    assert_eq!((s.fallback_admitted, s.fallback_denied, s.untracked), (1, 1, 1));
    assert_eq!(deny.stats().policy_denied, 1);
    // Reloading while Redis is away reloads the local rules too.
    let mut more = Rules::new();
    more.insert("api", [q("10/h burst 40")]);
    local.reload(more).unwrap();
    // The share is now burst 20: 3 units can wait (under burst 2 they never could). A key never
    // seen opens as a key kept idle would, with the 2 it had: a larger burst adds nothing at once.
    let wait = local.check_n("api/b", 3).unwrap_err();
    assert!(wait.retry_after().is_some(), "{wait:?}");
    assert!(local.check_n("api/b", 2).is_ok());
}

#[test]
fn a_rules_key_holding_something_else_is_an_error() {
    let server = RedisServer::start();
    let mut rules = Rules::new();
    rules.insert("k", [q("1/s")]);
    let lim = RedisRuleLimiter::builder(&server.url())
        .deadline(Duration::from_secs(5))
        .connect_rules(rules)
        .unwrap();
    let mut con = server.connection();
    let bad = [
        ("k/plain", "12:34"),
        ("k/no-rate", "12:34@"),
        ("k/zero-rate", "12:34@0:1:0"),
        ("k/zero-interval", "12:34@1:0:0"),
        ("k/huge-unit", "12:34@99999999999:1:0"),
        ("k/trailing", "12:34@1:1000:0,junk"),
        ("k/empty", ""),
        ("k/mark-only", "~"),
        ("k/half-a-tau", "12:34@1:1000:0:5"),
        ("k/tau-lo-past-a-ms", "12:34@1:1000:0:5:1000000"),
        ("k/two-marks", "~~12:34@1:1000:0:5:0"),
    ];
    for (key, value) in bad {
        let _: () = con.set(lim.redis_key(key).unwrap(), value).unwrap();
        match lim.try_check_n(key, 1) {
            Err(Error::Rejected(why)) => assert!(why.contains("not a leakgate bucket"), "{why}"),
            other => panic!("{key}: {other:?}"),
        }
        assert!(lim.check(key).is_err(), "the default policy refuses: {key}");
    }
    assert_eq!(lim.check_n("k/huge-cost", u64::MAX).unwrap_err().retry_after(), None);
    let big_key = format!("k/{}", "x".repeat(10_000));
    assert!(lim.check(&big_key).is_ok());
    assert!(lim.check(&big_key).is_err());
    let none: [&str; 0] = [];
    assert_eq!(lim.check_all_n(&none, 1).unwrap_err().retry_after(), None);
}

#[test]
fn bad_settings_are_errors() {
    let server = RedisServer::start();
    let url = server.url();
    let with_quota = RedisRuleLimiter::builder(&url).quota(q("1/s")).connect_rules(example());
    assert!(matches!(with_quota, Err(Error::Config(_))));
    let leases = RedisRuleLimiter::builder(&url)
        .leases(leakgate_redis::LeaseConfig::new(4))
        .connect_rules(example());
    assert!(matches!(leases, Err(Error::Config(_))));
    let brace = RedisRuleLimiter::builder(&url).prefix("{x}").connect_rules(example());
    assert!(matches!(brace, Err(Error::Config(_))));
    // A quota the local policy cannot divide: refused at connect, and at reload (rules kept).
    let mut odd = Rules::new();
    odd.insert("x", [Quota::new(1, Duration::from_nanos(u64::MAX / 2), 1).unwrap()]);
    let local = FailurePolicy::Local { expected_servers: 3 };
    let b = RedisRuleLimiter::builder(&url).failure_policy(local);
    assert!(matches!(b.clone().connect_rules(odd.clone()), Err(Error::Config(_))));
    let lim = b.connect_rules(example()).unwrap();
    assert!(matches!(lim.reload(odd), Err(Error::Config(why)) if why.contains("divide")));
    assert_eq!(lim.rules(), example());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_tasks_never_exceed_a_rule() {
    let server = RedisServer::start();
    let mut rules = Rules::new();
    rules.insert("", [q("50/h"), q("40/d")]);
    let lim = AsyncRedisRuleLimiter::builder(&server.url())
        .deadline(Duration::from_secs(5))
        .connect_rules_async(rules)
        .await
        .unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let lim = lim.clone();
            tokio::spawn(async move { lim.check("shared").await.is_ok() })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    assert_eq!(admitted, 40);
    assert_eq!(lim.rule_stats()[0].denied, 24);
}

#[cfg(feature = "rules-file")]
#[test]
fn one_rules_file_drives_the_rule_limiter_and_redis_alike() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.toml");
    let text = r#"
        "" = "100/s burst 5"
        "rate_limit" = "1/s burst 10"
        "rate_limit/192.168.11.3" = "100/s burst 500"
        api = ["10/s", "1000/h"]
        "api/beta" = { quotas = ["5/s"], shadow = true }
    "#;
    std::fs::write(&path, text).unwrap();
    let clock = epoch();
    let local = RuleLimiter::with_clock(Rules::from_file(&path).unwrap(), clock.clone());
    let redis = manual(&server, Rules::from_file(&path).unwrap(), &clock);
    let keys = ["rate_limit/10.0.0.1", "rate_limit/192.168.11.3", "api/alice", "api/beta/x", "x"];
    for step in 0..200u64 {
        let key = keys[(step % 5) as usize];
        let n = step % 7;
        let (l, r) = (local.check_n(key, n), redis.check_n(key, n));
        assert_eq!(format!("{r:?}"), format!("{l:?}"), "step {step}: {key} x {n}");
        let all = [keys[(step % 3) as usize], keys[3 + (step % 2) as usize]];
        let (l, r) = (local.check_all_n(&all, 1), redis.check_all_n(&all, 1));
        assert_eq!(format!("{r:?}"), format!("{l:?}"), "step {step}: {all:?}");
        clock.advance(Duration::from_millis(37));
    }
    assert_eq!(redis.rule_stats(), local.stats());
    assert!(redis.rule_stats().iter().any(|r| r.denied > 0 && r.admitted > 0));
    assert!(redis.rule_stats().iter().any(|r| r.denied_in_shadow > 0));
}
