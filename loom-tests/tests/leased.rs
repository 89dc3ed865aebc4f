//! Loom models of `LeasedLimiter`: leases taken, spent, dropped when the shared bucket refuses
//! them, expired, and held by a thread that exits, on every interleaving of 2-3 threads. In each
//! the threads together never get more than the shared bucket charged (at one clock reading, the
//! burst), and a lease's units are spent once or never.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release --test leased`.
#![cfg(loom)]

use leakgate::{LeasedLimiter, Leases, ManualClock, Quota};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// 1,000,000 a second (`T` = 1 µs) with a burst of 8: with a span of 17 µs and `slots` slots,
/// leases of `min(17, 4) / slots` units.
fn limiter(slots: usize) -> LeasedLimiter<ManualClock> {
    let q = Quota::new(1_000_000, Duration::from_secs(1), 8).expect("a valid quota");
    let leases = Leases::new().span(Duration::from_micros(17)).slots(slots);
    LeasedLimiter::with_leases(q, ManualClock::new(), leases)
}

/// `n` checks of one unit from `slot` at `now_ns`; how many were admitted.
fn checks(lim: &LeasedLimiter<ManualClock>, slot: usize, n: u64, now_ns: u64) -> u64 {
    (0..n).map(|_| u64::from(lim.check_n_at_slot(slot, 1, now_ns).is_ok())).sum()
}

#[test]
fn two_threads_on_one_slot_spend_each_unit_once() {
    // One slot, leases of 4: one thread's refill races the other's spends and its exact checks
    // while the slot is reserved. Demand (6) is below the burst: none admitted twice, and at most
    // one refused: the other thread's last check can find the slot reserved for a second lease
    // whose charge has just taken the bucket's last 4 units, and is refused while 3 of them sit
    // in the lease being installed (the shortfall `leased/mod.rs` states). A sequential run admits
    // all 6.
    model(|| {
        let lim = Arc::new(limiter(1));
        assert_eq!(lim.lease_units(), 4);
        let other = {
            let lim = lim.clone();
            thread::spawn(move || checks(&lim, 0, 3, 0))
        };
        let mine = checks(&lim, 0, 3, 0);
        let total = mine + other.join().unwrap();
        assert!((5..=6).contains(&total), "{total}");
        // Everything charged so far, leases included, is within the burst: what is left is exact.
        let rest = checks(&lim, 0, 8, 0);
        assert!(total + rest <= 8, "{total} + {rest}");
    });
}

#[test]
fn a_refused_lease_gives_its_slot_back() {
    // Two slots, leases of 2, and a cost of 5 on the exact path racing two refills: whichever
    // order, at most the burst, and a slot whose lease the bucket refused is empty again (its
    // thread then decides exactly, so a later lease can be taken).
    model(|| {
        let lim = Arc::new(limiter(2));
        assert_eq!(lim.lease_units(), 2);
        let big = {
            let lim = lim.clone();
            thread::spawn(move || if lim.check_n_at_slot(0, 5, 0).is_ok() { 5 } else { 0 })
        };
        let small = {
            let lim = lim.clone();
            thread::spawn(move || checks(&lim, 1, 2, 0))
        };
        let mine = checks(&lim, 0, 2, 0);
        let total = mine + big.join().unwrap() + small.join().unwrap();
        assert!(total <= 8, "{total}");
        let rest = checks(&lim, 0, 8, 0) + checks(&lim, 1, 8, 0);
        assert!(total + rest <= 8, "{total} + {rest}");
        assert!(total + rest >= 8 - lim.excess_bound(), "{total} + {rest}");
    });
}

#[test]
fn a_lease_held_by_a_thread_that_exited_expires() {
    // A thread takes a lease of 4 at 0 ns (one unit spent, 3 left) and exits. At 20 µs the lease
    // (17 µs) has expired and the bucket has refilled: two threads on that slot get at most the
    // burst again, none of the expired lease's units.
    model(|| {
        let lim = Arc::new(limiter(1));
        let holder = {
            let lim = lim.clone();
            thread::spawn(move || checks(&lim, 0, 1, 0))
        };
        assert_eq!(holder.join().unwrap(), 1);
        let now = 20_000;
        let other = {
            let lim = lim.clone();
            thread::spawn(move || checks(&lim, 0, 5, now))
        };
        let mine = checks(&lim, 0, 5, now);
        let total = mine + other.join().unwrap();
        assert!(total <= 8, "{total}");
        assert!(total >= 8 - lim.excess_bound(), "{total}");
    });
}
