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

/// Rules pushed through Redis (`leakgate rules push`) reach a following limiter through the same
/// reload, so the same mapping: toggling a burst by pushes at one instant hands out no units the
/// largest burst did not allow (before, each shrink forgave the debt and each grow refilled it).
#[test]
fn pushed_burst_toggles_at_one_instant_admit_no_more_than_the_largest_burst() {
    let server = RedisServer::start();
    let clock = support::epoch();
    let lim = support::manual_rules(&server, rules("api = \"100/s burst 10\"\n"), &clock);
    let _follower = RulesFollower::reloading(
        &server.url(),
        "leakgate:",
        Duration::from_millis(10),
        lim.as_async().clone(),
    )
    .unwrap();
    let drain = || (0..).take_while(|_| lim.check("api/k").is_ok()).take(1000).count();
    let mut total = drain();
    for round in 0..6u32 {
        let burst = if round.is_multiple_of(2) { 5 } else { 10 };
        let pushed = rules(&format!("api = \"100/s burst {burst}\"\n"));
        let version = push_rules(&server.url(), "leakgate:", &pushed).unwrap();
        // Each push differs from the rules in force: wait until the follower has put it in force.
        let deadline = Instant::now() + Duration::from_secs(10);
        while lim.rules() != pushed {
            assert!(Instant::now() < deadline, "version {version} never put in force");
            std::thread::sleep(Duration::from_millis(5));
        }
        total += drain();
    }
    assert!(total <= 10, "admitted {total} at one instant; no pushed quota allowed more than 10");
}
