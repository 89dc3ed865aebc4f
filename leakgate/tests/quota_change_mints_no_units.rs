//! A change of quota must never make more units available than were available before it.
//! Found by review: the level carried over (units used, `(TAT - now) / T`) was capped at the new
//! burst, so shrinking the burst forgave debt and growing it back handed the forgiven units out
//! again: toggling "100/s burst 10" and "100/s burst 5" at one instant admitted 15 (then 20, 25,
//! ... with more toggles), and a set_quota every 0.7 ms for 1 s admitted 3,576 where the quota
//! allows 110. The same in `Limiter::set_quota`, `KeyedLimiter::set_quota` and
//! `RuleLimiter::reload` (and in leakgate-redis's reload mapping, "capped at the new burst").
use leakgate::{KeyedLimiter, Limiter, ManualClock, Quota, RuleLimiter, Rules};
use std::time::Duration;

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}
fn drain(mut check: impl FnMut() -> bool) -> u64 {
    let mut n = 0;
    while check() {
        n += 1;
        assert!(n < 10_000, "a bucket of burst 10 admitted 10,000 at one instant");
    }
    n
}
fn burst(round: usize) -> Quota {
    q(if round.is_multiple_of(2) { "100/s burst 5" } else { "100/s burst 10" })
}

#[test]
fn limiter_set_quota_at_one_instant_admits_no_more_than_the_largest_burst() {
    let lim = Limiter::with_clock(q("100/s burst 10"), ManualClock::new());
    let mut total = drain(|| lim.check().is_ok());
    for round in 0..6 {
        lim.set_quota(burst(round));
        total += drain(|| lim.check().is_ok());
    }
    assert!(total <= 10, "admitted {total} at one instant; no quota in force allowed more than 10");
}

#[test]
fn keyed_set_quota_at_one_instant_admits_no_more_than_the_largest_burst() {
    let lim = KeyedLimiter::with_clock(q("100/s burst 10"), ManualClock::new());
    let mut total = drain(|| lim.check(&7u64).is_ok());
    for round in 0..6 {
        lim.set_quota(burst(round));
        total += drain(|| lim.check(&7u64).is_ok());
    }
    assert!(total <= 10, "admitted {total} at one instant; no quota in force allowed more than 10");
}

#[test]
fn rules_reload_at_one_instant_admits_no_more_than_the_largest_burst() {
    let rules = |quota: Quota| {
        let mut r = Rules::new();
        r.insert("api", [quota]);
        r
    };
    let lim = RuleLimiter::with_clock(rules(q("100/s burst 10")), ManualClock::new());
    let mut total = drain(|| lim.check("api/k").is_ok());
    for round in 0..6 {
        lim.reload(rules(burst(round)));
        total += drain(|| lim.check("api/k").is_ok());
    }
    assert!(total <= 10, "admitted {total} at one instant; no quota in force allowed more than 10");
}

#[test]
fn frequent_quota_changes_stay_within_burst_plus_rate_times_window() {
    let lim = Limiter::with_clock(q("100/s burst 10"), ManualClock::new());
    let mut admitted = 0u64;
    for i in 0..10_000u64 {
        if i % 7 == 0 {
            lim.set_quota(burst(i as usize / 7));
        }
        if lim.check().is_ok() {
            admitted += 1;
        }
        lim.clock().advance(Duration::from_micros(100));
    }
    // One second at 100/s, no burst above 10 ever in force.
    assert!(admitted <= 110, "admitted {admitted} in 1 s where at most 10 + 100 may go");
}

/// A key the table forgot, or never saw, opens no fuller than one it kept: a smaller burst leaves
/// a drained key idle (all of the new burst available), the table forgets it for a newcomer, and a
/// larger burst back must not hand it the larger burst.
#[test]
fn keyed_a_forgotten_key_gets_no_units_from_a_shrink_and_a_grow() {
    let clock = ManualClock::new();
    // One group of four slots: a fifth key takes the slot of an idle one.
    let lim = KeyedLimiter::<u64, _>::with_layout(q("100/s burst 100"), 1, 4, clock.clone());
    let mut total = drain(|| lim.check(&7).is_ok());
    lim.check_n(&7, 0).unwrap();
    lim.set_quota(q("100/s burst 5"));
    total += drain(|| lim.check(&7).is_ok());
    assert_eq!(total, 100, "the shrink kept 0 units available");
    clock.advance(Duration::from_millis(1100)); // idle under burst 5, and reclaimable
    for newcomer in 100..104 {
        assert!(lim.check(&newcomer).is_ok(), "newcomer {newcomer}"); // one takes key 7's slot
    }
    assert_eq!(lim.peek(&7), 5, "key 7 is forgotten: a peek sees a new bucket");
    clock.advance(Duration::from_millis(20)); // the newcomers idle: room for key 7 again
    lim.set_quota(q("100/s burst 100"));
    // (The newcomers, idle, keep their 5 under the larger burst too: the table is full of them
    // for a while, so key 7 may find no room at all; it must never find 100.)
    let again = drain(|| lim.check(&7).is_ok());
    assert!(again <= 5, "key 7 had 5 available, and got {again}");
    // In a table with room, a key never seen opens as a key kept idle through the changes.
    let roomy = KeyedLimiter::<u64, _>::with_clock(q("100/s burst 100"), clock.clone());
    assert_eq!(drain(|| roomy.check(&7).is_ok()), 100);
    roomy.set_quota(q("100/s burst 5"));
    clock.advance(Duration::from_millis(50));
    roomy.set_quota(q("100/s burst 100"));
    assert_eq!(drain(|| roomy.check(&7).is_ok()), 5, "a kept key");
    assert_eq!(drain(|| roomy.check(&8).is_ok()), 5, "a key never seen");
    clock.advance(Duration::from_millis(950));
    assert_eq!(drain(|| roomy.check(&9).is_ok()), 100, "the larger burst, once refilled");
}

#[test]
fn rules_a_key_untracked_by_the_new_rules_gets_no_units_from_a_shrink_and_a_grow() {
    let rules = |path: &str, quota: &str| {
        let mut r = Rules::new();
        r.insert(path, [q(quota)]);
        r
    };
    let lim = RuleLimiter::with_clock(rules("api", "100/s burst 100"), ManualClock::new());
    assert_eq!(drain(|| lim.check("api/k").is_ok()), 100);
    lim.reload(rules("api", "100/s burst 5"));
    lim.clock().advance(Duration::from_millis(50)); // idle under burst 5
    lim.reload(rules("api", "100/s burst 100"));
    assert_eq!(drain(|| lim.check("api/k").is_ok()), 5, "a kept key");
    assert_eq!(drain(|| lim.check("api/new").is_ok()), 5, "a key never seen");
    // A rule under a new, longer path: its keys were under "api" before.
    lim.reload(rules("api/v2", "100/s burst 100"));
    assert_eq!(drain(|| lim.check("api/v2/x").is_ok()), 5);
    // A path with no counterpart at all starts full.
    lim.reload(rules("web", "100/s burst 100"));
    assert_eq!(drain(|| lim.check("web/x").is_ok()), 100);
}
