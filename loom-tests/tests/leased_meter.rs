//! Loom models of `LeasedSrTcm` (and one of `LeasedTrTcm`'s give-back of `P`): leases of green units taken, spent, refused (a green-only take
//! that loses `C` to another packet and gives its charge of `A` back), expired, and held by a
//! thread that exits, on every interleaving of 2-3 threads. In each, at one clock reading the
//! greens are at most CBS and the greens and yellows at most CBS + EBS, a lease's units are spent
//! once or never, and no lease leaves a charge of `A` that is not green.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release --test leased_meter`.
#![cfg(loom)]

use leakgate::{Color, LeasedSrTcm, LeasedTrTcm, Leases, ManualClock, Quota};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// CIR 1 byte a µs, CBS 8, EBS 4: with a span of 17 µs and `slots` slots, leases of
/// `min(17, 4) / slots` green units.
fn meter(slots: usize) -> LeasedSrTcm<ManualClock> {
    let cir = Quota::bytes(1_000_000, Duration::from_secs(1), 8).expect("a valid quota");
    let leases = Leases::new().span(Duration::from_micros(17)).slots(slots);
    LeasedSrTcm::with_leases(cir, 4, ManualClock::new(), leases).expect("a valid meter")
}

/// `k` packets of `size` from `slot` at `now_ns`: the (green, yellow) units.
fn packets(
    m: &LeasedSrTcm<ManualClock>,
    slot: usize,
    k: u64,
    size: u64,
    now_ns: u64,
) -> (u64, u64) {
    let mut units = (0, 0);
    for _ in 0..k {
        match m.color_blind_at_slot(slot, size, now_ns) {
            Color::Green => units.0 += size,
            Color::Yellow => units.1 += size,
            Color::Red => {}
        }
    }
    units
}

fn add(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (a.0 + b.0, a.1 + b.1)
}

#[test]
fn two_threads_on_one_slot_spend_each_green_unit_once() {
    // One slot, leases of 4: one thread's refill races the other's spends and its exact packets
    // while the slot is reserved. Demand (6) is below CBS: every packet green or yellow (a packet
    // finding C's last units in the lease being installed is yellow, paid by E), none green twice.
    model(|| {
        let m = Arc::new(meter(1));
        assert_eq!(m.lease_units(), 4);
        let other = {
            let m = m.clone();
            thread::spawn(move || packets(&m, 0, 3, 1, 0))
        };
        let (green, yellow) = add(packets(&m, 0, 3, 1, 0), other.join().unwrap());
        assert_eq!(green + yellow, 6, "{green} + {yellow}");
        assert!(green >= 5, "{green}");
        // Everything charged, leases included, is within the buckets: the rest is exact.
        let (g, y) = add((green, yellow), packets(&m, 0, 12, 1, 0));
        assert!(g <= 8 && g + y <= 12, "{g} + {y}");
    });
}

#[test]
fn a_green_take_that_loses_c_gives_a_back() {
    // Two slots, leases of 2, and a packet of 7 on the exact path racing a lease take: when the
    // big packet takes C first, C holds 1 and the take (already charged to A) loses C and gives A
    // back on a clock that has not moved, so E is untouched by it: E + yellows is exactly EBS.
    model(|| {
        let m = Arc::new(meter(2));
        assert_eq!(m.lease_units(), 2);
        let big = {
            let m = m.clone();
            thread::spawn(move || packets(&m, 1, 1, 7, 0))
        };
        let mine = packets(&m, 0, 2, 1, 0);
        let (green, yellow) = add(mine, big.join().unwrap());
        assert!(green <= 8 && green + yellow <= 12, "{green} + {yellow}");
        let (tc, te) = m.tokens_at(0);
        assert_eq!(te + yellow, 4, "A holds only greens and yellows: {te} + {yellow}");
        assert!(tc + green <= 8, "{tc} + {green}");
        let (g, y) = add((green, yellow), add(packets(&m, 0, 8, 1, 0), packets(&m, 1, 8, 1, 0)));
        assert!(g <= 8 && g + y <= 12, "{g} + {y}");
        assert!(g >= 8 - m.excess_bound(), "{g}");
    });
}

#[test]
fn a_lease_held_by_a_thread_that_exited_expires() {
    // A thread takes a lease of 4 at 0 ns (one green spent, 3 left) and exits. At 20 µs the lease
    // (17 µs) has expired and C has refilled: two threads on that slot get at most CBS green
    // again, none of the expired lease's units.
    model(|| {
        let m = Arc::new(meter(1));
        let holder = {
            let m = m.clone();
            thread::spawn(move || packets(&m, 0, 1, 1, 0))
        };
        assert_eq!(holder.join().unwrap(), (1, 0));
        m.clock().advance(Duration::from_micros(20));
        let now = 20_000;
        let other = {
            let m = m.clone();
            thread::spawn(move || packets(&m, 0, 2, 1, now))
        };
        let (green, yellow) = add(packets(&m, 0, 2, 1, now), other.join().unwrap());
        // Demand (4) is within C: every packet green, from a new lease or exactly.
        assert_eq!((green, yellow), (4, 0));
        // The expired lease's 3 units are never spent: the rest, from the same slot, is exact.
        let (g, y) = add((green, yellow), packets(&m, 0, 14, 1, now));
        assert!(g <= 8 && g + y <= 12, "{g} + {y}");
        assert!(g >= 8 - m.excess_bound(), "{g}");
    });
}

#[test]
fn a_trtcm_green_take_that_loses_c_gives_p_back() {
    // PIR 2 bytes a µs, PBS 12; CIR 1 byte a µs, CBS 8; two slots, leases of 2. A packet of 7
    // on the exact path races a lease take: when it takes C first, C holds 1 and the take
    // (already charged to P) loses C and gives P back on a clock that has not moved: P then holds
    // exactly PBS less the greens and yellows, and no packet is green beyond C.
    model(|| {
        let peak = Quota::bytes(2_000_000, Duration::from_secs(1), 12).expect("a valid quota");
        let cir = Quota::bytes(1_000_000, Duration::from_secs(1), 8).expect("a valid quota");
        let leases = Leases::new().span(Duration::from_micros(17)).slots(2);
        let m = Arc::new(LeasedTrTcm::with_leases(peak, cir, ManualClock::new(), leases).unwrap());
        assert_eq!(m.lease_units(), 2);
        let colour = |m: &LeasedTrTcm<ManualClock>, slot, k, size| {
            let mut units = (0, 0);
            for _ in 0..k {
                match m.color_blind_at_slot(slot, size, 0) {
                    Color::Green => units.0 += size,
                    Color::Yellow => units.1 += size,
                    Color::Red => {}
                }
            }
            units
        };
        let big = {
            let m = m.clone();
            thread::spawn(move || colour(&m, 1, 1, 7))
        };
        let (green, yellow) = add(colour(&m, 0, 2, 1), big.join().unwrap());
        let (tp, tc) = m.tokens_at(0);
        // Slot 0's lease, if taken, is spent by the second packet, and the big packet never
        // takes one (7 is above a lease): no unit sits in a lease, so P and C show exactly the
        // packets they coloured.
        assert_eq!(green + yellow + tp, 12, "{green} + {yellow} + {tp}");
        assert_eq!(green + tc, 8, "{green} + {tc}");
        let (g, y) = add((green, yellow), add(colour(&m, 0, 12, 1), colour(&m, 1, 12, 1)));
        assert!(g <= 8 && g + y <= 12, "{g} + {y}");
    });
}
