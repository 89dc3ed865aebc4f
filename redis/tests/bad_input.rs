//! Bad input gets a clear answer, never a panic, a hang or a wrong decision.

mod support;

use leakgate::Quota;
use leakgate_redis::{Error, FailurePolicy, RedisLimiter};
use redis::Commands;
use std::time::Duration;
use support::RedisServer;

fn limiter(server: &RedisServer, policy: FailurePolicy) -> RedisLimiter {
    RedisLimiter::builder(&server.url())
        .quota("3/h".parse::<Quota>().unwrap())
        .deadline(Duration::from_secs(5))
        .failure_policy(policy)
        .connect()
        .unwrap()
}

#[test]
fn keys_with_arbitrary_bytes_are_distinct_buckets() {
    let server = RedisServer::start();
    let lim = limiter(&server, FailurePolicy::Deny);
    let keys: [&[u8]; 8] =
        [b"", b"\x00", b"\x00\x00", b"\xff\xfe", b"{", b"}{", b"a b\r\n*3\r\n", "ünï".as_bytes()];
    for key in keys {
        assert_eq!(lim.check_n(key, 3).unwrap().remaining(), 0, "{key:?}");
    }
    for key in keys {
        assert!(lim.check(key).is_err(), "{key:?}");
    }
    assert_eq!(lim.stats().rejected, 0);
}

#[test]
fn a_ten_kilobyte_key_works() {
    let server = RedisServer::start();
    let lim = limiter(&server, FailurePolicy::Deny);
    let big: Vec<u8> = (0..10 * 1024).map(|i| (i % 251) as u8).collect();
    let mut other = big.clone();
    *other.last_mut().unwrap() ^= 1;
    assert_eq!(lim.check_n(&big, 2).unwrap().remaining(), 1);
    assert_eq!(lim.check(&other).unwrap().remaining(), 2);
    assert_eq!(lim.check(&big).unwrap().remaining(), 0);
}

#[test]
fn cost_zero_and_above_the_burst_change_nothing() {
    let server = RedisServer::start();
    let lim = limiter(&server, FailurePolicy::Allow);
    assert_eq!(lim.check_n("k", 0).unwrap().remaining(), 3);
    let never = lim.check_n("k", 4).unwrap_err();
    assert_eq!(never.retry_after(), None);
    assert_eq!(lim.check_n("k", u64::MAX).unwrap_err().retry_after(), None);
    assert_eq!(lim.check_n("k", 3).unwrap().remaining(), 0);
    // Waits beyond the script's range are cut, not refused or wrapped.
    assert!(lim.reserve_n("k", 1, Duration::MAX).unwrap().delay() > Duration::from_secs(1000));
    assert_eq!(lim.reserve_n("k", 4, Duration::MAX).unwrap_err().retry_after(), None);
    // No key at all: refused whatever the policy (here: Allow).
    let none: [&str; 0] = [];
    assert_eq!(lim.check_all_n(&none, 1).unwrap_err().retry_after(), None);
}

#[test]
fn a_key_holding_something_else_is_an_error_answered_by_the_policy() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let deny = limiter(&server, FailurePolicy::Deny);
    let allow = limiter(&server, FailurePolicy::Allow);
    let list = deny.redis_key("list");
    let _: () = con.rpush(&list, "x").unwrap();
    let garbage = deny.redis_key("garbage");
    let _: () = con.set(&garbage, "12:34,not a bucket").unwrap();
    let huge = deny.redis_key("huge");
    let _: () = con.set(&huge, "99999999999999999999:1").unwrap();
    let out_of_unit = deny.redis_key("lo");
    let _: () = con.set(&out_of_unit, "1:999999999999").unwrap();
    for key in ["list", "garbage", "huge", "lo"] {
        assert!(deny.check(key).is_err(), "{key}");
        assert!(allow.check(key).is_ok(), "{key}");
        match deny.try_check_n(key, 1) {
            Err(Error::Rejected(why)) => assert!(!why.is_empty()),
            other => panic!("{key}: {other:?}"),
        }
    }
    let s = deny.stats();
    assert_eq!((s.rejected, s.policy_denied, s.breaker_opened), (8, 4, 0));
    assert_eq!(allow.stats().policy_admitted, 4);
    // Nothing was overwritten, and other keys are unaffected.
    assert_eq!(con.lrange::<_, Vec<String>>(&list, 0, -1).unwrap(), ["x"]);
    assert!(deny.check("fine").is_ok());
}

#[test]
fn bad_settings_are_errors() {
    let server = RedisServer::start();
    let q: Quota = "1/s".parse().unwrap();
    let prefix = RedisLimiter::builder(&server.url()).quota(q).prefix("a{b}:").connect();
    assert!(matches!(prefix, Err(Error::Config(_))));
    let no_quota = RedisLimiter::builder(&server.url()).connect();
    assert!(matches!(no_quota, Err(Error::Config(_))));
    assert!(matches!(RedisLimiter::connect("not a url", q), Err(Error::Config(_))));
    assert!(matches!(RedisLimiter::connect("redis://127.0.0.1:99999/", q), Err(Error::Config(_))));
    // An unreachable server is not a bad setting: the limiter connects in the background
    // (tests/boot.rs).
    let down = RedisLimiter::builder("redis://127.0.0.1:1/")
        .quota(q)
        .connect_timeout(Duration::from_millis(100))
        .connect();
    assert!(down.is_ok());
    let odd_fleet = RedisLimiter::builder(&server.url())
        .quota(Quota::new(1, Duration::from_nanos(u64::MAX / 2), 1).unwrap())
        .failure_policy(FailurePolicy::Local { expected_servers: 3 })
        .connect();
    assert!(matches!(odd_fleet, Err(Error::Config(_))));
}
