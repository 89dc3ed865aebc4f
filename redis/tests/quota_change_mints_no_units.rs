//! A change of quota never makes more units available than were available before it (issue 24,
//! item 0; `shared/reproducers/turn4/adv_quota_change_mints_units.rs` ported to Redis). The
//! reload mapping carried a key's *level* capped at the new burst, so a shrink forgave debt and
//! a grow back handed the forgiven units out again: toggling "100/s burst 10" and "100/s burst 5"
//! at one instant admitted 5 more units per pair of reloads, and a key whose rule path changed
//! started full under the new path. Real redis-server, the caller's `ManualClock`.

mod support;

use leakgate::{ManualClock, Quota, Rules};
use leakgate_redis::RedisRuleLimiter;
use std::time::Duration;
use support::{epoch, manual_rules as manual, RedisServer};

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

fn rules(entries: &[(&str, &str)]) -> Rules {
    let mut rules = Rules::new();
    for (path, quota) in entries {
        rules.insert(*path, [q(quota)]);
    }
    rules
}

/// Checks `key` until it is refused; the units admitted.
fn drain(lim: &RedisRuleLimiter, key: &str) -> u64 {
    let mut n = 0;
    while lim.check(key).is_ok() {
        n += 1;
        assert!(n < 10_000, "a bucket of burst 10 admitted 10,000 at one instant");
    }
    n
}

fn toggled(round: usize) -> &'static str {
    if round.is_multiple_of(2) {
        "100/s burst 5"
    } else {
        "100/s burst 10"
    }
}

#[test]
fn burst_toggles_at_one_instant_admit_no_more_than_the_largest_burst() {
    let server = RedisServer::start();
    let lim = manual(&server, rules(&[("api", "100/s burst 10")]), &epoch());
    let mut total = drain(&lim, "api/k");
    for round in 0..6 {
        lim.reload(rules(&[("api", toggled(round))])).unwrap();
        total += drain(&lim, "api/k");
    }
    assert!(total <= 10, "admitted {total} at one instant; no quota in force allowed more than 10");
}

#[test]
fn rate_and_burst_toggles_at_one_instant_admit_no_more_than_the_largest_burst() {
    let server = RedisServer::start();
    let lim = manual(&server, rules(&[("api", "100/s burst 10")]), &epoch());
    let mut total = drain(&lim, "api/k");
    for quota in ["7/s burst 3", "1000/s burst 10", "3/min burst 1", "100/s burst 10"] {
        lim.reload(rules(&[("api", quota)])).unwrap();
        total += drain(&lim, "api/k");
    }
    assert!(total <= 10, "admitted {total} at one instant; no quota in force allowed more than 10");
}

#[test]
fn frequent_reloads_stay_within_burst_plus_rate_times_window() {
    let server = RedisServer::start();
    let clock = epoch();
    let lim = manual(&server, rules(&[("api", "100/s burst 10")]), &clock);
    let mut admitted = 0u64;
    for i in 0..10_000usize {
        if i % 7 == 0 {
            lim.reload(rules(&[("api", toggled(i / 7))])).unwrap();
        }
        if lim.check("api/k").is_ok() {
            admitted += 1;
        }
        clock.advance(Duration::from_micros(100));
    }
    // One second at 100/s, no burst above 10 ever in force.
    assert!(admitted <= 110, "admitted {admitted} in 1 s where at most 10 + 100 may go");
    // And the reloads took nothing the rate gave: the same rate throughout, so every unit it
    // refilled went (the exact carry of a burst-only change keeps fractions).
    assert!(admitted >= 104, "admitted {admitted} in 1 s at 100/s after a burst of 10");
}

#[test]
fn a_key_moved_to_an_override_and_back_keeps_what_it_used() {
    let server = RedisServer::start();
    let lim = manual(&server, rules(&[("ip", "1/h burst 10")]), &epoch());
    let mut total = drain(&lim, "ip/10.0.0.1");
    let with_override = rules(&[("ip", "1/h burst 10"), ("ip/10.0.0.1", "1/h burst 10")]);
    for round in 0..4u32 {
        let next = if round.is_multiple_of(2) {
            with_override.clone()
        } else {
            rules(&[("ip", "1/h burst 10")])
        };
        lim.reload(next).unwrap();
        total += drain(&lim, "ip/10.0.0.1");
    }
    assert!(total <= 10, "admitted {total} at one instant across rule paths where 10 may go");
}

#[test]
fn servers_on_old_and_new_rule_paths_share_one_budget() {
    let server = RedisServer::start();
    let clock = epoch();
    let old = rules(&[("ip", "1/h burst 10")]);
    let (a, b) = (manual(&server, old.clone(), &clock), manual(&server, old, &clock));
    assert_eq!(a.check_n("ip/10.0.0.1", 4).unwrap().remaining(), 6);
    // b rolls out an override for the address first; a still runs the old rules.
    b.reload(rules(&[("ip", "1/h burst 10"), ("ip/10.0.0.1", "1/h burst 10")])).unwrap();
    assert_ne!(a.redis_key("ip/10.0.0.1"), b.redis_key("ip/10.0.0.1"));
    let mut total = 4;
    for _ in 0..4 {
        total += drain(&b, "ip/10.0.0.1");
        total += drain(&a, "ip/10.0.0.1");
    }
    assert!(total <= 10, "admitted {total} at one instant on two servers where 10 may go");
    clock.advance(Duration::from_secs(3600)); // one unit each side may see, not one each
    let later =
        u64::from(a.check("ip/10.0.0.1").is_ok()) + u64::from(b.check("ip/10.0.0.1").is_ok());
    assert_eq!(later, 1, "one hour of 1/h refills one unit for both servers together");
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.rejected + sb.rejected, 0);
}

#[test]
fn a_burst_grown_refills_at_the_rate() {
    let server = RedisServer::start();
    let clock: ManualClock = epoch();
    let lim = manual(&server, rules(&[("api", "10/s burst 5")]), &clock);
    assert_eq!(drain(&lim, "api/k"), 5);
    lim.reload(rules(&[("api", "10/s burst 10")])).unwrap();
    assert_eq!(drain(&lim, "api/k"), 0, "growing the burst adds no unit at once");
    clock.advance(Duration::from_millis(300));
    assert_eq!(drain(&lim, "api/k"), 3, "they come at the rate");
    clock.advance(Duration::from_secs(5));
    assert_eq!(drain(&lim, "api/k"), 10, "up to the new burst");
}
