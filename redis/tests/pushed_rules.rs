//! Rules pushed through Redis (feature `rules-file`): stored with a version, read back whole,
//! and put in force on a following rules limiter; a version that does not parse is refused and
//! the rules in force stay.
#![cfg(feature = "rules-file")]

mod support;

use leakgate::Rules;
use leakgate_redis::{fetch_rules, push_rules, FollowEvent, RedisRuleLimiter, RulesFollower};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::RedisServer;

fn rules(text: &str) -> Rules {
    Rules::from_toml(text).unwrap()
}

#[test]
fn a_push_is_versioned_and_reads_back_whole() {
    let server = RedisServer::start();
    assert_eq!(fetch_rules(&server.url(), "leakgate:").unwrap(), None);
    let first = rules("api = [\"10/s\", \"1000/h\"]\n\"api/beta\" = { quota = \"5/s\", shadow = true, capacity = 10, overflow = \"shared 50/s\" }\n");
    assert_eq!(push_rules(&server.url(), "leakgate:", &first).unwrap(), 1);
    let second = rules("\"\" = \"1/s\"\n");
    assert_eq!(push_rules(&server.url(), "leakgate:", &second).unwrap(), 2);
    let fetched = fetch_rules(&server.url(), "leakgate:").unwrap().unwrap();
    assert_eq!((fetched.version, fetched.rules), (2, second));
    // Another prefix is another store.
    assert_eq!(fetch_rules(&server.url(), "other:").unwrap(), None);
}

#[test]
fn a_following_limiter_puts_each_version_in_force() {
    let server = RedisServer::start();
    let lim = RedisRuleLimiter::builder(&server.url())
        .deadline(Duration::from_secs(5))
        .connect_rules(rules("api = \"10/s\"\n"))
        .unwrap();
    let (events, heard) = mpsc::channel();
    let limiter = lim.as_async().clone();
    let _follower =
        RulesFollower::start(&server.url(), "leakgate:", Duration::from_millis(20), move |event| {
            let result = match &event {
                FollowEvent::Pushed(pushed) => {
                    limiter.reload(pushed.rules.clone()).map_err(|e| e.to_string())
                }
                _ => Ok(()),
            };
            let _ = events.send(event);
            result
        })
        .unwrap();
    let pushed_at = Instant::now();
    push_rules(&server.url(), "leakgate:", &rules("api = \"1/s\"\n")).unwrap();
    match heard.recv_timeout(Duration::from_secs(10)).unwrap() {
        FollowEvent::Pushed(pushed) => assert_eq!(pushed.version, 1),
        other => panic!("{other:?}"),
    }
    assert!(pushed_at.elapsed() < Duration::from_secs(5));
    assert!(lim.check("api/x").is_ok());
    assert!(lim.check("api/x").is_err(), "1/s is in force");
    // A version that does not parse: refused, the rules in force stay.
    let mut con = server.connection();
    let _: () = redis::cmd("HSET")
        .arg("leakgate:rules")
        .arg("toml")
        .arg("api = \"1/fortnight\"")
        .query(&mut con)
        .unwrap();
    let _: () =
        redis::cmd("HINCRBY").arg("leakgate:rules").arg("version").arg(1).query(&mut con).unwrap();
    match heard.recv_timeout(Duration::from_secs(10)).unwrap() {
        FollowEvent::Refused { version, reason } => {
            assert_eq!(version, 2);
            assert!(reason.contains("fortnight"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(lim.rules(), rules("api = \"1/s\"\n"));
}
