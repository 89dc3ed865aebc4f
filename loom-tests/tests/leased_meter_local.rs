//! Loom models of `LocalMeter` (a thread's own handle on a leased colour meter): a handle takes
//! a slot, spends green units from its own counter and gives them back when its thread exits,
//! racing the slot's other thread on every interleaving. At one clock reading the greens are at
//! most CBS, every green unit is coloured once, and none is lost.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release --test leased_meter_local`.
#![cfg(loom)]

use leakgate::{Color, LeasedSrTcm, Leases, LocalMeter, ManualClock, Quota};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// CIR 1 byte a µs, CBS 8, EBS 0, one slot: with a span of 17 µs, leases of 4 green units.
fn meter() -> Arc<LeasedSrTcm<ManualClock>> {
    let cir = Quota::bytes(1_000_000, Duration::from_secs(1), 8).expect("a valid quota");
    let leases = Leases::new().span(Duration::from_micros(17)).slots(1);
    Arc::new(LeasedSrTcm::with_leases(cir, 0, ManualClock::new(), leases).expect("a valid meter"))
}

/// `k` packets of one byte on slot 0 at 0 ns: the green units.
fn slot_greens(m: &LeasedSrTcm<ManualClock>, k: u64) -> u64 {
    (0..k).map(|_| u64::from(m.color_blind_at_slot(0, 1, 0) == Color::Green)).sum()
}

#[test]
fn a_handle_and_its_slots_thread_colour_each_green_unit_once() {
    // The handle takes the slot (with a lease, or none if the other thread is refilling it),
    // colours 3 packets and exits with units left, giving them back; the other thread colours 3
    // on the slot. At most CBS in all, and afterwards the slot's packets take the rest: 8 in
    // all, nothing lost (no time passes, so nothing expires).
    model(|| {
        let m = meter();
        assert_eq!(m.lease_units(), 4);
        let holder = {
            let m = m.clone();
            thread::spawn(move || {
                let mut local = LocalMeter::with_slot(&*m, 0);
                (0..3).map(|_| u64::from(local.color_blind_at(1, 0) == Color::Green)).sum::<u64>()
            })
        };
        let mine = slot_greens(&m, 3);
        let total = mine + holder.join().unwrap();
        assert!(total <= 6, "{total}");
        let rest = slot_greens(&m, 8);
        assert!(total + rest <= 8, "{total} + {rest}");
        assert!(total + rest >= 8 - m.excess_bound(), "{total} + {rest}");
    });
}
