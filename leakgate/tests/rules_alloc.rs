//! A check of a tracked key allocates nothing: counted by a global allocator, on this thread.

use leakgate::{ManualClock, RuleLimiter, Rules};

#[path = "support/alloc_count.rs"]
mod alloc_count;

use alloc_count::allocations;

#[test]
fn checks_of_tracked_keys_allocate_nothing() {
    let mut rules = Rules::new();
    rules.insert("user", ["1000/s".parse().unwrap()]);
    rules.insert("tenant", ["1000/s".parse().unwrap(), "100000/h".parse().unwrap()]);
    rules.insert("rate_limit/192.168.11.3", ["1000/s".parse().unwrap()]);
    let lim = RuleLimiter::with_clock(rules, ManualClock::new());
    let users: Vec<String> = (0..100).map(|i| format!("user/{i}")).collect();
    // First checks insert the keys (their keys are stored) and fill this thread's cache.
    for user in &users {
        lim.check_all_n(&["tenant/acme", user], 1).unwrap();
    }
    lim.check("rate_limit/192.168.11.3").unwrap();
    let before = allocations();
    for round in 0..5 {
        for user in &users {
            let _ = lim.check(user);
            let _ = lim.check_n("tenant/acme", round);
            let _ = lim.check_all_n(&["tenant/acme", user, "nobody/x"], 1);
            let _ = lim.check("rate_limit/192.168.11.3");
            let _ = lim.check("web/untracked");
        }
    }
    assert_eq!(allocations() - before, 0, "checks allocated");
}
