//! Loom models of `RuleLimiter`'s races on a frozen clock: two all-or-nothing requests over
//! overlapping buckets never leave a refused request's charge behind, and a reload racing a check
//! neither loses an admission nor lets a key past its burst.
#![cfg(loom)]

use leakgate::{ManualClock, OverflowPolicy, Quota, RuleLimiter, Rules};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

fn rules(pairs: &[(&str, &str)]) -> Rules {
    let mut rules = Rules::new();
    for (path, quota) in pairs {
        rules.insert(*path, [q(quota)]);
    }
    rules
}

/// A limiter of `rules` on a frozen clock, to share among the model's threads.
fn limiter(rules: Rules) -> Arc<RuleLimiter<ManualClock>> {
    Arc::new(RuleLimiter::with_clock(rules, ManualClock::new()))
}

/// Two threads each check their keys all or nothing, at cost 1; whether each was admitted.
fn race(
    lim: &Arc<RuleLimiter<ManualClock>>,
    a: [&'static str; 2],
    b: [&'static str; 2],
) -> [bool; 2] {
    let spawn = |keys: [&'static str; 2]| {
        let lim = lim.clone();
        thread::spawn(move || lim.check_all_n(&keys, 1).is_ok())
    };
    let (a, b) = (spawn(a), spawn(b));
    [a.join().unwrap(), b.join().unwrap()]
}

/// The units left in `key`'s bucket (a peek).
fn left(lim: &RuleLimiter<ManualClock>, key: &str) -> u64 {
    lim.check_n(key, 0).unwrap().remaining()
}

#[test]
fn all_or_nothing_over_overlapping_keys_keeps_no_refused_charge() {
    model(|| {
        // The tenant has room for one request; each user for one. Whoever is refused must
        // leave its user's bucket and the tenant's untouched.
        let lim = limiter(rules(&[("a_tenant", "1/h burst 1"), ("user", "1/h burst 1")]));
        let [a, b] = race(&lim, ["a_tenant/t", "user/1"], ["a_tenant/t", "user/2"]);
        assert!(a ^ b, "exactly one fits the tenant: {a} {b}");
        assert_eq!(left(&lim, "a_tenant/t"), 0);
        assert_eq!(left(&lim, "user/1"), u64::from(!a), "user/1 kept a charge only if admitted");
        assert_eq!(left(&lim, "user/2"), u64::from(!b));
    });
}

#[test]
fn refused_charges_on_a_shared_bucket_are_all_given_back() {
    model(|| {
        // Both charge the shared bucket first, then their own, which is already full: both are
        // refused, and the shared bucket must end as it began, whatever order the refunds run in.
        let lim = limiter(rules(&[("a_shared", "1/h burst 3"), ("user", "1/h burst 1")]));
        lim.check("user/1").unwrap();
        lim.check("user/2").unwrap();
        let [a, b] = race(&lim, ["a_shared/s", "user/1"], ["a_shared/s", "user/2"]);
        assert!(!a && !b);
        assert_eq!(left(&lim, "a_shared/s"), 3, "no refused request kept its charge");
    });
}

#[test]
fn reload_racing_a_check_neither_loses_nor_adds_an_admission() {
    model(|| {
        let lim = limiter(rules(&[("k", "1/h burst 2")]));
        lim.check("k/a").unwrap(); // one left
        let checker = {
            let lim = lim.clone();
            thread::spawn(move || lim.check("k/a").is_ok())
        };
        let reloader = {
            let lim = lim.clone();
            // The same quota under another path: the key must keep its level.
            thread::spawn(move || lim.reload(rules(&[("", "1/h burst 2")])))
        };
        let admitted = checker.join().unwrap();
        reloader.join().unwrap();
        assert!(admitted, "one unit was left: a check during a reload never fails");
        assert_eq!(left(&lim, "k/a"), 0, "the admission during the reload was carried over");
        assert!(lim.check("k/a").is_err());
    });
}

#[test]
fn reload_racing_the_first_check_of_a_key_keeps_its_admission() {
    model(|| {
        // The key is new: its check may insert it into the old tables while they are closed
        // and handed over, or into the new ones; either way its one unit stays spent.
        let lim = limiter(rules(&[("k", "1/h burst 1")]));
        let checker = {
            let lim = lim.clone();
            thread::spawn(move || lim.check("k/new").is_ok())
        };
        let reloader = {
            let lim = lim.clone();
            thread::spawn(move || lim.reload(rules(&[("k", "1/h burst 1")])))
        };
        assert!(checker.join().unwrap());
        reloader.join().unwrap();
        assert!(lim.check("k/new").is_err(), "the admission during the reload was lost");
    });
}

#[test]
fn refused_charges_on_a_shared_overflow_bucket_are_given_back() {
    model(|| {
        // "a"'s table (four slots under loom) is full of busy keys, so new keys of "a" are served
        // by its shared overflow bucket (burst 2). Both requests charge it, then one is refused by
        // "b/full": the shared bucket must keep exactly the admitted request's unit.
        let mut rules = rules(&[("a", "1/h burst 1"), ("b", "1/h burst 1")]);
        rules
            .insert("a", [q("1/h burst 1")])
            .overflow(OverflowPolicy::SharedBucket(q("1/h burst 2")));
        let lim = limiter(rules);
        for key in ["a/1", "a/2", "a/3", "a/4", "b/full"] {
            lim.check(key).unwrap();
        }
        let [a, b] = race(&lim, ["a/5", "b/free"], ["a/6", "b/full"]);
        assert!(a && !b);
        assert!(lim.check("a/7").is_ok(), "the refused request kept its shared charge");
        assert!(lim.check("a/8").is_err(), "the admitted request's shared charge was lost");
    });
}

#[test]
fn reload_racing_a_check_on_the_shared_overflow_bucket_keeps_its_admission() {
    model(|| {
        // The table is full, so "a/5" is served by the shared bucket (burst 1), on the old rules
        // or on the new ones; or it finds room in the new table before the reload has moved the
        // old keys there, and gets a bucket of its own. Either way the shared bucket admits one
        // request in all, across the reload.
        let shared = || {
            let mut rules = rules(&[]);
            let policy = OverflowPolicy::SharedBucket(q("1/h burst 1"));
            rules.insert("a", [q("1/h burst 1")]).overflow(policy);
            rules
        };
        let lim = limiter(shared());
        for key in ["a/1", "a/2", "a/3", "a/4"] {
            lim.check(key).unwrap();
        }
        let checker = {
            let lim = lim.clone();
            thread::spawn(move || lim.check("a/5").is_ok())
        };
        let reloader = {
            let lim = lim.clone();
            thread::spawn(move || lim.reload(shared()))
        };
        assert!(checker.join().unwrap(), "the shared bucket had its unit");
        reloader.join().unwrap();
        let own_bucket = !lim.buckets("a/5", 0.0).is_empty();
        let shared_after = ["a/6", "a/7"].iter().filter(|key| lim.check(key).is_ok()).count();
        assert_eq!(shared_after, usize::from(own_bucket), "the shared unit was given twice");
    });
}

/// Regression (issue 17): a request charged to `a`, refused by `b`, while a reload hands `a`'s
/// level over. The reload may seal `a` with the charge in it; the charge is then given back in
/// the new rules, never by lowering the seal. Afterwards `a` holds nothing (the clock is frozen,
/// and the new burst holds the old bucket), and a check of `a` (on whichever rules it meets) is
/// admitted, not refused by a lowered seal.
#[test]
fn a_refused_charge_racing_a_reload_is_given_back_where_its_level_went() {
    model(|| {
        let pairs = [("a", "1/h burst 2"), ("b", "1/h burst 1")];
        let lim = limiter(rules(&pairs));
        lim.check("b/0").unwrap(); // b/0 full: every request over it is refused
        lim.check("a/0").unwrap(); // a/0 tracked, one unit of two
        let refused = {
            let lim = lim.clone();
            thread::spawn(move || lim.check_all_n(&["a/0", "b/0"], 1).is_err())
        };
        let reload = {
            let lim = lim.clone();
            thread::spawn(move || lim.reload(rules(&pairs)))
        };
        assert!(refused.join().unwrap(), "b/0 is full");
        reload.join().unwrap();
        assert_eq!(left(&lim, "a/0"), 1, "a/0 keeps exactly its one admission");
        assert!(lim.check("a/0").is_ok(), "a/0 has a unit left");
        assert!(lim.check("a/0").is_err());
    });
}
