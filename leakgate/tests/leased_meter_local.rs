//! `LocalMeter` (a thread's own handle on a `LeasedSrTcm` or `LeasedTrTcm`) against the meters'
//! stated bounds: two handles made and dropped at random beside packets on the slots, random
//! sizes and clock steps on a manual clock; in every window `[t1, t2]` the greens are at most
//! `CBS + CIR ticks + E` (and greens and yellows `CBS + EBS + CIR ticks + E` for the srTCM).
//! With leases off a handle colours as the RFC 2697 model.

mod support;

use leakgate::{
    Clock, Color, LeasedMeter, LeasedSrTcm, LeasedTrTcm, Leases, LocalMeter, ManualClock, Quota,
};
use proptest::prelude::*;
use std::time::Duration;
use support::rfc::{RefSrTcm, RefTrTcm};
use support::{bytes, rate};

#[path = "support/window.rs"]
mod window;

use window::assert_bound;

/// The steps of a run: who colours (0, 1: a handle; 2, 3: a slot; 4, 5: drop a handle), the
/// packet's size and the clock step.
fn steps() -> impl Strategy<Value = Vec<(u8, u64, u64)>> {
    prop::collection::vec((0u8..6, 1u64..1_600, prop_oneof![0u64..3_000, 0u64..300_000]), 1..250)
}

/// Runs `steps` on `meter`: two handles (slots 0 and 1) made and dropped, and packets coloured on
/// slots 2 and 3 by `at_slot`; the packets as `(time, size, colour)`.
fn run<M: LeasedMeter>(
    meter: &M,
    clock: &ManualClock,
    steps: Vec<(u8, u64, u64)>,
    at_slot: impl Fn(usize, u64, u64) -> Color,
) -> Vec<(u64, u64, Color)> {
    let mut handles: [Option<LocalMeter<&M>>; 2] = [None, None];
    let mut packets = Vec::new();
    for (who, size, dt) in steps {
        clock.advance(Duration::from_nanos(dt));
        let now = clock.now_ns();
        let colour = match who {
            0 | 1 => handles[usize::from(who)]
                .get_or_insert_with(|| LocalMeter::with_slot(meter, usize::from(who)))
                .color_blind_at(size, now),
            2 | 3 => at_slot(usize::from(who), size, now),
            _ => {
                handles[usize::from(who) - 4] = None;
                continue;
            }
        };
        packets.push((now, size, colour));
    }
    packets
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn srtcm_handles_keep_the_colour_bounds(
        rate in rate(),
        cbs in prop::sample::select(vec![1_600u64, 9_000, 100_000]),
        ebs in prop::sample::select(vec![0u64, 1_500, 50_000]),
        span_us in 17u64..2_000,
        slots in 1usize..=4,
        steps in steps(),
    ) {
        let clock = ManualClock::new();
        let leases = Leases::new().span(Duration::from_micros(span_us)).slots(slots);
        let meter = LeasedSrTcm::with_leases(bytes(rate, cbs), ebs, clock.clone(), leases).unwrap();
        let e = meter.excess_bound();
        let packets = run(&meter, &clock, steps, |slot, n, now| meter.color_blind_at_slot(slot, n, now));
        assert_bound(rate, cbs, e, &packets, &[Color::Green]);
        assert_bound(rate, cbs + ebs, e, &packets, &[Color::Green, Color::Yellow]);
    }

    #[test]
    fn trtcm_handles_keep_the_green_bound(
        rate in rate(),
        cbs in prop::sample::select(vec![1_600u64, 9_000, 100_000]),
        span_us in 17u64..2_000,
        slots in 1usize..=4,
        steps in steps(),
    ) {
        let clock = ManualClock::new();
        let leases = Leases::new().span(Duration::from_micros(span_us)).slots(slots);
        let (peak, committed) = (bytes((rate.0 * 2, rate.1), cbs), bytes(rate, cbs));
        let meter = LeasedTrTcm::with_leases(peak, committed, clock.clone(), leases).unwrap();
        let e = meter.excess_bound();
        let packets = run(&meter, &clock, steps, |slot, n, now| meter.color_blind_at_slot(slot, n, now));
        assert_bound(rate, cbs, e, &packets, &[Color::Green]);
    }

    /// A rate too slow for leases: a handle's every colour is the RFC model's.
    #[test]
    fn a_handle_with_leases_off_colours_as_the_rfc(
        per_second in 1u64..8_000,
        cbs in 1u64..3_000,
        ebs in 0u64..3_000,
        steps in prop::collection::vec((0u64..1_600, 0u64..50_000_000), 1..150),
    ) {
        let clock = ManualClock::new();
        let cir = Quota::bytes_per_second(per_second).unwrap().with_burst(cbs).unwrap();
        let meter = LeasedSrTcm::with_leases(cir, ebs, clock.clone(), Leases::new().slots(4)).unwrap();
        prop_assume!(meter.lease_units() == 0);
        let mut model = RefSrTcm::new((per_second, 1_000_000_000), cbs, ebs);
        let mut local = LocalMeter::new(&meter);
        for (size, dt) in steps {
            clock.advance(Duration::from_nanos(dt));
            let now = clock.now_ns();
            prop_assert_eq!(local.color_blind_at(size, now), model.meter(now, size, Color::Green));
            prop_assert_eq!(meter.tokens_at(now), model.tokens());
        }
    }

    /// The same for a trTCM of PIR twice CIR.
    #[test]
    fn a_trtcm_handle_with_leases_off_colours_as_the_rfc(
        per_second in 1u64..4_000,
        cbs in 1u64..3_000,
        pbs in 1u64..3_000,
        steps in prop::collection::vec((0u64..1_600, 0u64..50_000_000), 1..150),
    ) {
        let clock = ManualClock::new();
        let cir = Quota::bytes_per_second(per_second).unwrap().with_burst(cbs).unwrap();
        let pir = Quota::bytes_per_second(2 * per_second).unwrap().with_burst(pbs).unwrap();
        let leases = Leases::new().slots(4);
        let meter = LeasedTrTcm::with_leases(pir, cir, clock.clone(), leases).unwrap();
        prop_assume!(meter.lease_units() == 0);
        let second = 1_000_000_000;
        let mut model = RefTrTcm::new((2 * per_second, second), pbs, (per_second, second), cbs);
        let mut local = LocalMeter::new(&meter);
        for (size, dt) in steps {
            clock.advance(Duration::from_nanos(dt));
            let now = clock.now_ns();
            prop_assert_eq!(local.color_blind_at(size, now), model.meter(now, size, Color::Green));
            prop_assert_eq!(meter.tokens_at(now), model.tokens());
        }
    }
}

#[test]
fn a_handle_takes_its_slots_place_in_the_bound() {
    // One slot: its lease and a handle's would be two leases charged before an instant and
    // spent after it; the handle takes the slot's lease instead.
    let cir: Quota = "1 MB/s burst 2000 B".parse().unwrap(); // leases of min(1000, 1000) = 1000
    let clock = ManualClock::new();
    let meter = LeasedSrTcm::with_leases(cir, 0, clock.clone(), Leases::new().slots(1)).unwrap();
    assert_eq!(meter.excess_bound(), 1000);
    assert_eq!(meter.color_blind_at_slot(0, 1, 0), Color::Green); // 999 left in the slot
    let mut local = LocalMeter::with_slot(&meter, 0);
    assert_eq!(local.units(), 999, "the handle holds the slot's lease");
    clock.set(Duration::from_millis(2)); // the committed bucket is full again
    let now = clock.now_ns();
    let mut green = 0;
    while local.color_blind_at(1, now) == Color::Green
        || meter.color_blind_at_slot(0, 1, now) == Color::Green
    {
        green += 1;
    }
    assert_eq!(green, 999 + 2000, "the lease, then CBS");
    assert!(green <= 2000 + meter.excess_bound());
}
