//! Rules by key path, behaviour by behaviour, on a `ManualClock`.

use leakgate::{KeyedLimiter, ManualClock, OverflowPolicy, Quota, RuleLimiter, Rules};
use std::time::Duration;

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

fn limiter(rules: &[(&str, &[&str])]) -> (RuleLimiter<ManualClock>, ManualClock) {
    let mut set = Rules::new();
    for (path, quotas) in rules {
        set.insert(*path, quotas.iter().map(|s| q(s)));
    }
    let clock = ManualClock::new();
    (RuleLimiter::with_clock(set, clock.clone()), clock)
}

#[test]
fn rule_limiters_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<RuleLimiter>();
    shared::<RuleLimiter<ManualClock>>();
    shared::<Rules>();
}

#[test]
fn longest_prefix_cut_at_a_slash_then_the_default() {
    let (lim, _) = limiter(&[
        ("rate_limit", &["1/s burst 2"]),
        ("rate_limit/192.168.11.3", &["100/s burst 500"]),
        ("", &["1/s burst 3"]),
    ]);
    assert_eq!(lim.check("rate_limit/10.0.0.1").unwrap().remaining(), 1);
    assert_eq!(lim.check("rate_limit/192.168.11.3").unwrap().remaining(), 499);
    assert_eq!(lim.check("rate_limit/192.168.11.3/x").unwrap().remaining(), 499, "own bucket");
    assert_eq!(lim.check("rate_limit/192.168.11.30").unwrap().remaining(), 1, "not cut at a /");
    assert_eq!(lim.check("rate_limitless").unwrap().remaining(), 2, "the default rule");
    // Each full key has its own bucket.
    assert_eq!(lim.check("rate_limit/10.0.0.1").unwrap().remaining(), 0);
    assert!(lim.check("rate_limit/10.0.0.1").is_err());
    assert_eq!(lim.check("rate_limit/10.0.0.2").unwrap().remaining(), 1);
}

#[test]
fn a_key_no_rule_matches_is_admitted_and_not_tracked() {
    let (lim, _) = limiter(&[("api", &["1/s"])]);
    for _ in 0..100 {
        let ok = lim.check_n("web/index", 1_000_000).unwrap();
        assert_eq!((ok.remaining(), ok.reset_after()), (u64::MAX, Duration::ZERO));
    }
    assert!(lim.buckets("", 0.0).is_empty());
    // A rule with no quotas exempts its keys.
    let (lim, _) = limiter(&[("", &["1/s"]), ("admin", &[])]);
    assert!(lim.check("admin/root").is_ok() && lim.check("admin/root").is_ok());
    assert!(lim.check("x").is_ok() && lim.check("x").is_err());
}

#[test]
fn one_quota_answers_like_a_keyed_limiter() {
    let (lim, clock) = limiter(&[("k", &["3/s burst 2"])]);
    let keyed = KeyedLimiter::with_clock(q("3/s burst 2"), clock.clone());
    for step in 0..40u64 {
        let n = step % 3;
        let (a, b) = (lim.check_n("k/a", n), keyed.check_n("k/a", n));
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "step {step}");
        clock.advance(Duration::from_millis(70 * (step % 4)));
    }
}

#[test]
fn several_quotas_conform_together_and_report_the_binding_one() {
    let (lim, clock) = limiter(&[("api", &["10/s", "15/min"])]);
    let ok = lim.check_n("api/alice", 10).unwrap();
    assert_eq!(ok.remaining(), 0, "the smallest remaining over the quotas");
    assert_eq!(ok.reset_after(), Duration::from_secs(40), "the largest reset: 10 x 4 s");
    clock.advance(Duration::from_secs(1)); // 10/s is empty again, 15/min has 5 + 0.25 left
    let ok = lim.check_n("api/alice", 5).unwrap();
    assert_eq!(ok.remaining(), 0);
    // 10/s would take 5 more; 15/min refuses: nothing is taken from either.
    let no = lim.check_n("api/alice", 2).unwrap_err();
    assert_eq!(no.retry_after(), Some(Duration::from_secs(7)), "15/min: 2 units of 4 s, less 1 s");
    assert_eq!(lim.check_n("api/alice", 5).unwrap_err().remaining(), 0);
    let levels = lim.buckets("api/alice", 0.0);
    assert_eq!(levels.len(), 2);
    assert_eq!(levels[0].level, 5.0, "the 10/s bucket kept only the admitted 5");
    // More than a burst never conforms: no retry time.
    assert_eq!(lim.check_n("api/bob", 11).unwrap_err().retry_after(), None);
    assert_eq!(lim.check_n("api/bob", 1).unwrap().remaining(), 9, "bob kept everything");
}

#[test]
fn check_all_n_charges_every_key_or_none() {
    let (lim, _) = limiter(&[("tenant", &["3/s"]), ("user", &["2/s"]), ("global", &["100/s"])]);
    let tiers = |user| ["tenant/acme", user, "global"];
    let ok = lim.check_all_n(&tiers("user/1"), 2).unwrap();
    assert_eq!(ok.remaining(), 0, "user/1 is the binding bucket");
    let no = lim.check_all_n(&tiers("user/2"), 2).unwrap_err();
    assert_eq!(no.remaining(), 1, "the tenant's one left is the smallest");
    assert_eq!(no.retry_after(), Some(Duration::from_nanos(333_333_333)), "the tenant's wait");
    // Nothing was kept anywhere.
    assert_eq!(lim.check_n("user/2", 2).unwrap().remaining(), 0);
    assert_eq!(lim.check_n("global", 98).unwrap().remaining(), 0);
    assert_eq!(lim.check_n("tenant/acme", 1).unwrap().remaining(), 0);
}

#[test]
fn check_all_n_reports_the_largest_wait_over_every_refusing_bucket() {
    let (lim, _) = limiter(&[("a", &["10/s"]), ("b", &["1/s burst 2"])]);
    lim.check_n("a/x", 10).unwrap();
    lim.check_n("b/x", 2).unwrap();
    let no = lim.check_all_n(&["a/x", "b/x"], 1).unwrap_err();
    assert_eq!(no.retry_after(), Some(Duration::from_secs(1)), "b's wait, though a refused first");
    // A cost above some burst: never.
    assert_eq!(lim.check_all_n(&["a/y", "b/y"], 3).unwrap_err().retry_after(), None);
    assert_eq!(lim.check_n("a/y", 10).unwrap().remaining(), 0, "a/y kept nothing");
}

#[test]
fn a_key_named_twice_is_charged_twice_and_keys_with_no_rule_are_neutral() {
    let (lim, _) = limiter(&[("u", &["4/s"])]);
    let ok = lim.check_all_n(&["u/1", "nobody", "u/1"], 2).unwrap();
    assert_eq!(ok.remaining(), 0);
    assert!(lim.check_all_n(&["u/2", "u/2", "u/2"], 2).is_err(), "6 > 4: none taken");
    assert_eq!(lim.check_n("u/2", 4).unwrap().remaining(), 0);
    let ok = lim.check_all_n(&["x", "y"], 5).unwrap();
    assert_eq!((ok.remaining(), ok.reset_after()), (u64::MAX, Duration::ZERO));
}

#[test]
fn shadow_mode_decides_and_counts_but_always_admits() {
    let mut rules = Rules::new();
    rules.insert("beta", [q("2/s")]).shadow(true);
    rules.insert("live", [q("1/s")]);
    let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    for _ in 0..5 {
        assert!(lim.check("beta/x").is_ok());
    }
    // A shadow refusal takes nothing: a live rule beside it still decides alone.
    assert!(lim.check_all_n(&["beta/x", "live/x"], 1).is_ok());
    assert!(lim.check_all_n(&["beta/x", "live/x"], 1).is_err());
    let stats = lim.stats();
    let beta = stats.iter().find(|s| s.rule == "beta").unwrap();
    assert_eq!((beta.admitted, beta.denied, beta.denied_in_shadow), (2, 0, 5));
    let live = stats.iter().find(|s| s.rule == "live").unwrap();
    assert_eq!((live.admitted, live.denied, live.denied_in_shadow), (1, 1, 0));
    assert_eq!(lim.buckets("beta/x", 0.0)[0].level, 2.0, "only what it admitted");
}

#[test]
fn reload_keeps_levels_under_the_rule_that_now_matches() {
    let (lim, clock) = limiter(&[("api", &["10/s", "100/min"]), ("old", &["5/s"])]);
    lim.check_n("api/alice", 6).unwrap();
    lim.check_n("old/x", 5).unwrap();
    clock.advance(Duration::from_millis(250)); // alice: 6.5 available of 10/s, 94.4 of 100/min
    let mut rules = Rules::new();
    rules.insert("api", [q("1/s burst 8"), q("1/s burst 3"), q("1/s")]);
    lim.reload(rules);
    let levels = lim.buckets("api/alice", 0.0);
    assert_eq!(levels.len(), 2, "the third quota has no counterpart: empty, not listed");
    assert_eq!(levels[0].level, 1.5, "6.5 units available stay available, fractions too");
    assert_eq!(levels[1].level, 0.0, "94.4 available: the new burst's 3, all of it");
    // The smallest over the buckets: 6.5 of 8, 3 of 3 and 1 of the new 1/s burst 1.
    assert_eq!(lim.check_n("api/alice", 0).unwrap().remaining(), 1);
    lim.check_n("api/alice", 1).unwrap();
    assert!(lim.check("api/alice").is_err());
    clock.advance(Duration::from_secs(1));
    assert!(lim.check("api/alice").is_ok());
    assert!(lim.check("old/x").is_ok(), "no rule any more: not tracked");
    assert!(lim.buckets("old", 0.0).is_empty());
}

#[test]
fn reload_with_the_same_rules_changes_no_decision() {
    let (lim, clock) = limiter(&[("k", &["3/s burst 5"])]);
    let keyed = KeyedLimiter::with_clock(q("3/s burst 5"), clock.clone());
    let rules = {
        let mut rules = Rules::new();
        rules.insert("k", [q("3/s burst 5")]);
        rules
    };
    for step in 0..30u64 {
        let (a, b) = (lim.check_n("k/a", step % 3), keyed.check_n("k/a", step % 3));
        assert_eq!(a.is_ok(), b.is_ok(), "step {step}");
        assert!(
            a.map_or_else(|d| d.remaining(), |o| o.remaining())
                <= b.map_or_else(|d| d.remaining(), |o| o.remaining())
        );
        if step % 4 == 0 {
            lim.reload(rules.clone());
        }
        clock.advance(Duration::from_millis(111));
    }
}

#[test]
fn introspection_filters_by_prefix_and_fill_and_counts_per_rule() {
    let (lim, clock) = limiter(&[("message_send", &["4/s"]), ("other", &["4/s"])]);
    lim.check_n("message_send/alice", 3).unwrap();
    lim.check_n("message_send/bob", 1).unwrap();
    lim.check_n("other/carol", 4).unwrap();
    clock.advance(Duration::from_millis(20));
    let busy = lim.buckets("message_send", 0.5);
    assert_eq!(busy.len(), 1);
    let alice = &busy[0];
    assert_eq!((alice.key.as_str(), alice.rule.as_str()), ("message_send/alice", "message_send"));
    assert_eq!(
        (alice.remaining, alice.quota, alice.since_last_use),
        (1, q("4/s"), Duration::from_millis(20))
    );
    assert!((alice.fill - 0.73).abs() < 1e-9);
    assert_eq!(alice.reset_after, Duration::from_millis(730));
    assert_eq!(lim.buckets("", 0.0).len(), 3);
}

#[test]
fn a_full_table_refuses_new_keys_and_keeps_the_active_ones() {
    let mut rules = Rules::new();
    rules.insert("ip", [q("1/h")]).capacity(50);
    let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    let admitted = (0..1000).filter(|i| lim.check(&format!("ip/{i}")).is_ok()).count();
    assert!((64..1000).contains(&admitted), "{admitted}");
    let tracked = lim.buckets("ip/", 0.0);
    assert_eq!(tracked.len(), admitted, "every admitted key kept its bucket");
}

#[test]
fn keys_with_no_room_share_the_overflow_bucket_and_a_refusal_gives_its_charge_back() {
    let mut rules = Rules::new();
    let shared = OverflowPolicy::SharedBucket(q("1/s burst 10"));
    rules.insert("ip", [q("1/h")]).capacity(50).overflow(shared);
    rules.insert("z_gate", [q("1/h burst 5")]);
    let clock = ManualClock::new();
    let lim = RuleLimiter::with_clock(rules, clock.clone());
    let admitted = (0..1000).filter(|i| lim.check(&format!("ip/{i}")).is_ok()).count();
    assert_eq!(admitted, 64 + 10, "a bucket per slot, then the shared bucket's burst");
    // The shared bucket is empty again; a key with no room answers with its figures.
    clock.advance(Duration::from_secs(10));
    assert_eq!(lim.check("ip/new-1").unwrap().remaining(), 9);
    // Charged to the shared bucket, then refused by the gate (rules are charged in path order):
    // the shared charge goes back.
    lim.check_n("z_gate/g", 5).unwrap();
    let no = lim.check_all_n(&["z_gate/g", "ip/new-2"], 1).unwrap_err();
    assert_eq!(no.retry_after(), Some(Duration::from_secs(3600)), "the gate's wait");
    assert!(lim.check_all_n(&["ip/new-3", "z_gate/g"], 1).is_err());
    let left = (0..20).filter(|i| lim.check(&format!("ip/late-{i}")).is_ok()).count();
    assert_eq!(left, 9, "the refused requests kept nothing in the shared bucket");
}

#[test]
fn a_reload_into_a_smaller_table_keeps_the_levels_of_keys_with_no_room() {
    let rules = |capacity| {
        let mut rules = Rules::new();
        rules.insert("ip", [q("1/h")]).capacity(capacity);
        rules
    };
    let lim = RuleLimiter::with_clock(rules(1024), ManualClock::new());
    for i in 0..200 {
        lim.check(&format!("ip/{i}")).unwrap();
    }
    lim.reload(rules(50)); // 64 slots: at most 64 of the 200 fit
    assert!(lim.buckets("ip/", 0.0).len() <= 64);
    lim.reload(rules(1024)); // room again: every level comes back
    assert_eq!(lim.buckets("ip/", 1.0).len(), 200, "every key's full bucket was kept");
    let admitted = (0..200).filter(|i| lim.check(&format!("ip/{i}")).is_ok()).count();
    assert_eq!(admitted, 0, "a key whose level waited for room was admitted again");
}

#[test]
fn a_reload_hands_the_shared_overflow_buckets_level_over() {
    let rules = |shared: &str| {
        let mut rules = Rules::new();
        let policy = OverflowPolicy::SharedBucket(q(shared));
        rules.insert("ip", [q("1/h")]).capacity(50).overflow(policy);
        rules
    };
    let lim = RuleLimiter::with_clock(rules("1/s burst 10"), ManualClock::new());
    let admitted = (0..100).filter(|i| lim.check(&format!("ip/{i}")).is_ok()).count();
    assert_eq!(admitted, 64 + 10, "the table, then the shared bucket, are full");
    lim.reload(rules("1/s burst 12"));
    // The 64 keys keep their full buckets; the shared bucket keeps its 10 under the new burst,
    // none available: a larger burst adds nothing at once (its 2 units come at the rate).
    let late = (100..200).filter(|i| lim.check(&format!("ip/{i}")).is_ok()).count();
    assert_eq!(late, 0, "a reload made units available");
    lim.clock().advance(Duration::from_secs(1));
    let later = (200..300).filter(|i| lim.check(&format!("ip/{i}")).is_ok()).count();
    assert_eq!(later, 1, "one a second, as before");
}

/// Regression: a key named twice asks twice the cost of its buckets, and a refusal's
/// `retry_after` is the wait after which that same request conforms (it was judged one naming at
/// a time: `Some(1s)` where the request can never conform, or needs 2 s).
#[test]
fn a_key_named_twice_is_refused_for_its_whole_cost() {
    let (lim, clock) = limiter(&[("a", &["1/s burst 3"])]);
    // An empty bucket, 2 + 2 asked of a burst of 3: never.
    let never = lim.check_all_n(&["a/k", "a/k"], 2).unwrap_err();
    assert_eq!(never.retry_after(), None);
    assert_eq!(never.remaining(), 3, "nothing was kept");
    // Three units used: 1 + 1 more needs two intervals.
    lim.check_n("a/i", 3).unwrap();
    let wait = lim.check_all_n(&["a/i", "a/i"], 1).unwrap_err();
    assert_eq!(wait.retry_after(), Some(Duration::from_secs(2)));
    clock.advance(Duration::from_secs(2));
    assert!(lim.check_all_n(&["a/i", "a/i"], 1).is_ok());
}
