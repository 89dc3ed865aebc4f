//! Loom models of `LocalLease` (a thread's own handle on a `LeasedLimiter`) and of
//! `LeasedLimiter::set_quota`: a handle races the threads of the slot it takes, gives its units
//! back when it is dropped (also by a thread that exits), and a change of quota races a handle's
//! spends. In each, no unit is admitted twice and the threads together get no more than the
//! shared bucket charged (at one clock reading, the largest burst in force).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release --test leased_local`.
#![cfg(loom)]

use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// 1,000,000 a second (`T` = 1 µs) with a burst of 8, a span of 17 µs and one slot: leases of 4.
fn limiter() -> LeasedLimiter<ManualClock> {
    let q = Quota::new(1_000_000, Duration::from_secs(1), 8).expect("a valid quota");
    let leases = Leases::new().span(Duration::from_micros(17)).slots(1);
    LeasedLimiter::with_leases(q, ManualClock::new(), leases)
}

/// `n` checks of one unit on slot 0 at 0 ns; how many were admitted.
fn slot_checks(lim: &LeasedLimiter<ManualClock>, n: u64) -> u64 {
    (0..n).map(|_| u64::from(lim.check_n_at_slot(0, 1, 0).is_ok())).sum()
}

/// A handle on slot 0 (or none, if the slot is being refilled), `n` checks, then dropped.
fn handle_checks(lim: &LeasedLimiter<ManualClock>, n: u64) -> u64 {
    let mut local = lim.local_at(0);
    (0..n).map(|_| u64::from(local.check().is_ok())).sum()
}

#[test]
fn a_handle_and_its_slots_thread_spend_each_unit_once() {
    // The handle takes the slot (with a lease, or none) while the other thread refills it or
    // spends from it; the handle exits with units left and gives them back. Demand (6) is below
    // the burst; what is left afterwards, spent on the slot, makes at most the burst in all, and
    // no unit is lost (nothing expires at one clock reading).
    model(|| {
        let lim = Arc::new(limiter());
        assert_eq!(lim.lease_units(), 4);
        let holder = {
            let lim = lim.clone();
            thread::spawn(move || handle_checks(&lim, 3))
        };
        let mine = slot_checks(&lim, 3);
        let total = mine + holder.join().unwrap();
        assert!(total <= 6, "{total}");
        let rest = slot_checks(&lim, 8);
        assert!(total + rest <= 8, "{total} + {rest}");
        assert!(total + rest >= 8 - lim.excess_bound(), "{total} + {rest}");
    });
}

#[test]
fn a_change_of_quota_races_a_handle() {
    // A handle takes a lease of 4 and spends from it while the quota changes to a burst of 2
    // (leases off). Whatever the order: at most the old burst in all, and after both are done
    // at most the new burst's 2 units plus one lease of the size before (a handle that gave its
    // units back before it saw the change, as `set_quota` states).
    model(|| {
        let lim = Arc::new(limiter());
        let holder = {
            let lim = lim.clone();
            thread::spawn(move || handle_checks(&lim, 2))
        };
        lim.set_quota(Quota::new(1_000_000, Duration::from_secs(1), 2).expect("a valid quota"));
        let first = holder.join().unwrap();
        assert_eq!(lim.lease_units(), 0);
        let rest = slot_checks(&lim, 8) + handle_checks(&lim, 8);
        assert!(first + rest <= 8, "{first} + {rest}");
        assert!(rest <= 2 + 4, "{rest}");
    });
}
