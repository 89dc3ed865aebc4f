//! `LeasedSrTcm` and `LeasedTrTcm` against their stated bounds and the RFC 2697 and 2698 models
//! (`support/rfc.rs`): in every window of the clock `[t1, t2]` the greens are at most `CBS +
//! CIR ticks + E`, and the greens and yellows at most `CBS + EBS + CIR ticks + E` (srTCM) or
//! `PBS + PIR ticks + E` (trTCM), `E = excess_bound()`, over every pair of packets of random runs
//! on a manual clock; with leases off every colour is the model's; threads at one instant,
//! expiry, a thread that exits holding a lease.

mod support;

use leakgate::{Clock, Color, LeasedSrTcm, LeasedTrTcm, Leases, ManualClock, Quota};
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::rfc::{RefSrTcm, RefTrTcm};
use support::{bytes, rate};

#[path = "support/window.rs"]
mod window;

use window::{assert_bound, ticks};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random packets from 4 slots, random sizes, colours on arrival and clock steps: both
    /// bounds in every window.
    #[test]
    fn every_window_keeps_the_colour_bounds(
        rate in rate(),
        cbs in prop::sample::select(vec![1_600u64, 9_000, 100_000]),
        ebs in prop::sample::select(vec![0u64, 1_500, 50_000]),
        span_us in 17u64..2_000,
        slots in 1usize..=4,
        steps in prop::collection::vec(
            (0usize..4, 1u64..1_600, 0u64..3_000, prop::bool::weighted(0.9)),
            1..250,
        ),
    ) {
        let clock = ManualClock::new();
        let leases = Leases::new().span(Duration::from_micros(span_us)).slots(slots);
        let meter = LeasedSrTcm::with_leases(bytes(rate, cbs), ebs, clock.clone(), leases).unwrap();
        let e = meter.excess_bound();
        prop_assert!(u128::from(e) <= ticks(rate, span_us * 1_000).min(u128::from(cbs / 2)));
        let mut packets = Vec::new();
        for (slot, size, dt, green) in steps {
            clock.advance(Duration::from_nanos(dt));
            let now = clock.now_ns();
            let colour = if green {
                meter.color_blind_at_slot(slot, size, now)
            } else {
                meter.color_aware_at(size, Color::Yellow, now)
            };
            packets.push((now, size, colour));
        }
        assert_bound(rate, cbs, e, &packets, &[Color::Green]);
        assert_bound(rate, cbs + ebs, e, &packets, &[Color::Green, Color::Yellow]);
    }

    /// A rate too slow for leases: every colour and token count is the RFC model's.
    #[test]
    fn leases_off_colour_as_the_rfc(
        per_second in 1u64..8_000,
        cbs in 1u64..3_000,
        ebs in 0u64..3_000,
        steps in prop::collection::vec((0usize..4, 0u64..1_600, 0u64..50_000_000, 0u8..3), 1..150),
    ) {
        let clock = ManualClock::new();
        let cir = Quota::bytes_per_second(per_second).unwrap().with_burst(cbs).unwrap();
        let leases = Leases::new().slots(4);
        let meter = LeasedSrTcm::with_leases(cir, ebs, clock.clone(), leases).unwrap();
        prop_assume!(meter.lease_units() == 0);
        let mut model = RefSrTcm::new((per_second, 1_000_000_000), cbs, ebs);
        for (slot, size, dt, pre) in steps {
            clock.advance(Duration::from_nanos(dt));
            let now = clock.now_ns();
            let pre = [Color::Green, Color::Yellow, Color::Red][usize::from(pre)];
            let colour = if pre == Color::Green {
                meter.color_blind_at_slot(slot, size, now)
            } else {
                meter.color_aware_at(size, pre, now)
            };
            prop_assert_eq!(colour, model.meter(now, size, pre));
            prop_assert_eq!(meter.tokens_at(now), model.tokens());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The trTCM: random packets from 4 slots, PIR 1-3 times CIR; both bounds in every window.
    #[test]
    fn trtcm_windows_keep_the_colour_bounds(
        rate in rate(),
        k in 1u64..4,
        cbs in prop::sample::select(vec![1_600u64, 9_000, 100_000]),
        pbs in prop::sample::select(vec![1_600u64, 9_000, 100_000]),
        span_us in 17u64..2_000,
        slots in 1usize..=4,
        steps in prop::collection::vec(
            (0usize..4, 1u64..1_600, 0u64..3_000, prop::bool::weighted(0.9)),
            1..250,
        ),
    ) {
        let clock = ManualClock::new();
        let peak = (rate.0 * k, rate.1);
        let leases = Leases::new().span(Duration::from_micros(span_us)).slots(slots);
        let meter =
            LeasedTrTcm::with_leases(bytes(peak, pbs), bytes(rate, cbs), clock.clone(), leases)
                .unwrap();
        let e = meter.excess_bound();
        prop_assert!(u128::from(e) <= ticks(rate, span_us * 1_000).min(u128::from(cbs.min(pbs) / 2)));
        let mut packets = Vec::new();
        for (slot, size, dt, green) in steps {
            clock.advance(Duration::from_nanos(dt));
            let now = clock.now_ns();
            let colour = if green {
                meter.color_blind_at_slot(slot, size, now)
            } else {
                meter.color_aware_at(size, Color::Yellow, now)
            };
            packets.push((now, size, colour));
        }
        assert_bound(rate, cbs, e, &packets, &[Color::Green]);
        assert_bound(peak, pbs, e, &packets, &[Color::Green, Color::Yellow]);
    }

    /// The trTCM at rates too slow for leases: every colour and token count is the RFC model's.
    #[test]
    fn trtcm_leases_off_colour_as_the_rfc(
        per_second in 1u64..8_000,
        k in 1u64..4,
        cbs in 1u64..3_000,
        pbs in 1u64..3_000,
        steps in prop::collection::vec((0usize..4, 0u64..1_600, 0u64..50_000_000, 0u8..3), 1..150),
    ) {
        let clock = ManualClock::new();
        let q = |rate: u64, burst: u64| Quota::bytes_per_second(rate).unwrap().with_burst(burst).unwrap();
        let leases = Leases::new().slots(4);
        let meter =
            LeasedTrTcm::with_leases(q(per_second * k, pbs), q(per_second, cbs), clock.clone(), leases)
                .unwrap();
        prop_assume!(meter.lease_units() == 0);
        let second = 1_000_000_000;
        let mut model = RefTrTcm::new((per_second * k, second), pbs, (per_second, second), cbs);
        for (slot, size, dt, pre) in steps {
            clock.advance(Duration::from_nanos(dt));
            let now = clock.now_ns();
            let pre = [Color::Green, Color::Yellow, Color::Red][usize::from(pre)];
            let colour = if pre == Color::Green {
                meter.color_blind_at_slot(slot, size, now)
            } else {
                meter.color_aware_at(size, pre, now)
            };
            prop_assert_eq!(colour, model.meter(now, size, pre));
            prop_assert_eq!(meter.tokens_at(now), model.tokens());
        }
    }
}

#[test]
fn trtcm_at_one_instant_no_more_than_the_buckets() {
    // As for the srTCM: at a clock that stands still, greens at most CBS, greens and yellows at
    // most PBS, and greens short of CBS by at most what sits in leases.
    let (peak, cir): (Quota, Quota) =
        ("2 GB/s burst 300 kB".parse().unwrap(), "1 GB/s burst 200 kB".parse().unwrap());
    let meter =
        LeasedTrTcm::with_leases(peak, cir, ManualClock::new(), Leases::new().slots(4)).unwrap();
    assert_eq!(meter.lease_units(), 25_000);
    let (green, yellow) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    match meter.color_blind(1_000) {
                        Color::Green => green.fetch_add(1_000, Ordering::Relaxed),
                        Color::Yellow => yellow.fetch_add(1_000, Ordering::Relaxed),
                        Color::Red => 0,
                    };
                }
            });
        }
    });
    let (green, yellow) = (green.into_inner(), yellow.into_inner());
    assert!(green <= 200_000, "{green}");
    assert!(green + yellow <= 300_000, "{green} + {yellow}");
    assert!(green >= 200_000 - meter.excess_bound(), "{green}");
    // P is used up but for units left in leases (charged to P and C, never spent).
    assert!(green + yellow >= 300_000 - meter.excess_bound(), "{green} + {yellow}");
}

#[test]
fn at_one_instant_no_more_than_the_buckets() {
    // Every leased unit was charged to `C` and `A`, so at a clock that stands still the threads
    // together get at most CBS of green and CBS + EBS of green and yellow, however the leases
    // fall; and no green is lost for good: greens and units left in leases make CBS.
    let cir: Quota = "1 GB/s burst 200 kB".parse().unwrap();
    let meter =
        LeasedSrTcm::with_leases(cir, 50_000, ManualClock::new(), Leases::new().slots(4)).unwrap();
    assert_eq!(meter.lease_units(), 25_000);
    let (green, yellow) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    match meter.color_blind(1_000) {
                        Color::Green => green.fetch_add(1_000, Ordering::Relaxed),
                        Color::Yellow => yellow.fetch_add(1_000, Ordering::Relaxed),
                        Color::Red => 0,
                    };
                }
            });
        }
    });
    let (green, yellow) = (green.into_inner(), yellow.into_inner());
    assert!(green <= 200_000, "{green}");
    assert!(green + yellow <= 250_000, "{green} + {yellow}");
    // 800 packets of 1,000 ask for 800 kB: C and E are used up but for what sits in leases.
    assert!(green >= 200_000 - meter.excess_bound(), "{green}");
    assert_eq!(yellow, 50_000);
}

#[test]
fn an_expired_lease_is_dropped_and_a_new_one_charged() {
    let clock = ManualClock::new();
    let cir: Quota = "1 MB/s burst 8000 B".parse().unwrap();
    let leases = Leases::new().slots(4).span(Duration::from_micros(100));
    let meter = LeasedSrTcm::with_leases(cir, 0, clock.clone(), leases).unwrap();
    assert_eq!(meter.lease_units(), 25); // 100 µs of 1 MB/s over 4 slots
    assert_eq!(meter.color_blind_at_slot(0, 7_000, 0), Color::Green, "exact: above a lease");
    assert_eq!(meter.color_blind_at_slot(0, 10, 0), Color::Green);
    assert_eq!(meter.tokens_at(0), (975, 0));
    assert_eq!(meter.color_blind_at_slot(0, 10, 0), Color::Green);
    assert_eq!(meter.tokens_at(0), (975, 0), "from the lease");
    // Past the span (the slot's ticks are 1,024 ns), the 5 units left are never spent.
    clock.advance(Duration::from_micros(110));
    let now = clock.now_ns();
    assert_eq!(meter.color_blind_at_slot(0, 10, now), Color::Green);
    assert_eq!(meter.tokens_at(now), (975 + 110 - 25, 0), "a new lease");
}

#[test]
fn a_lease_of_a_thread_that_exited_is_spent_by_its_slot_or_expires() {
    let clock = ManualClock::new();
    let cir: Quota = "1 MB/s burst 8000 B".parse().unwrap();
    let meter = LeasedSrTcm::with_leases(cir, 0, clock.clone(), Leases::new().slots(2)).unwrap();
    assert_eq!(meter.lease_units(), 500);
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(meter.color_blind_at_slot(1, 100, 0), Color::Green));
    });
    // The exited thread left 400 units in slot 1: the next thread on that slot spends them.
    assert_eq!(meter.color_blind_at_slot(1, 400, 0), Color::Green);
    assert_eq!(meter.tokens_at(0), (7_500, 0));
    // Slot 1's lease is used up; the rest of C is coloured exactly, and nothing beyond it.
    let mut green = 0;
    while meter.color_blind_at_slot(1, 100, 0) == Color::Green {
        green += 100;
    }
    assert_eq!(green, 7_500);
}

#[test]
fn packets_a_lease_cannot_hold_are_coloured_exactly() {
    let cir: Quota = "1 MB/s burst 8000 B".parse().unwrap();
    let meter =
        LeasedSrTcm::with_leases(cir, 2_000, ManualClock::new(), Leases::new().slots(4)).unwrap();
    assert_eq!(meter.lease_units(), 250);
    assert_eq!(meter.color_blind_at_slot(0, 250, 0), Color::Green);
    assert_eq!(meter.tokens_at(0), (7_750, 2_000), "no lease for a packet of a lease's size");
    assert_eq!(meter.color_blind_at_slot(0, 7_800, 0), Color::Red);
    assert_eq!(meter.color_blind_at_slot(0, 1_500, 0), Color::Green);
    assert_eq!(meter.color_blind_at(0, 0), Color::Green);
}
