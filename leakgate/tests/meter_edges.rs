//! The colour meters at their edges: a clock that goes backwards, absurd sizes and times, bad
//! parameters, and a keyed meter with no room for a new flow.

use leakgate::{
    Color, KeyedSrTcm, KeyedTrTcm, ManualClock, MeterError, Quota, QuotaError, SrTcm, TrTcm,
};
use proptest::prelude::*;
use std::time::Duration;

/// One byte every microsecond, with a burst of `burst`.
fn per_us(burst: u64) -> Quota {
    Quota::bytes(1, Duration::from_micros(1), burst).unwrap()
}

proptest! {
    /// Caller times in any order (threads with stale readings, a clock that went back): no
    /// bucket ever pays for more than its size plus the ticks up to the latest time seen.
    #[test]
    fn a_clock_going_backwards_never_pays_for_more(
        cbs in 1u64..3000,
        ebs in 0u64..3000,
        packets in proptest::collection::vec((0u64..5_000_000, 1u64..1600, any::<bool>()), 1..150),
    ) {
        let sr = SrTcm::with_clock(per_us(cbs), ebs, ManualClock::new()).unwrap();
        let tr = TrTcm::with_clock(
            Quota::bytes(2, Duration::from_micros(1), cbs + ebs).unwrap(),
            per_us(cbs),
            ManualClock::new(),
        )
        .unwrap();
        let (mut sr_totals, mut tr_totals, mut latest) = ([0u64; 3], [0u64; 3], 0);
        for (t, size, yellow) in packets {
            latest = latest.max(t);
            let pre = if yellow { Color::Yellow } else { Color::Green };
            sr_totals[sr.color_aware_at(size, pre, t) as usize] += size;
            tr_totals[tr.color_aware_at(size, pre, t) as usize] += size;
            let ticks = latest / 1000;
            prop_assert!(sr_totals[0] <= cbs + ticks, "{:?} at {}", sr_totals, latest);
            prop_assert!(sr_totals[0] + sr_totals[1] <= cbs + ebs + ticks, "{:?}", sr_totals);
            prop_assert!(tr_totals[0] + tr_totals[1] <= cbs + ebs + 2 * ticks, "{:?}", tr_totals);
            prop_assert!(tr_totals[0] <= cbs + ticks, "{:?}", tr_totals);
        }
    }
}

#[test]
fn absurd_sizes_and_times_are_red_or_fine_never_a_panic() {
    let sr = SrTcm::with_clock(per_us(1500), 1500, ManualClock::new()).unwrap();
    let tr = TrTcm::with_clock(per_us(1500), per_us(1500), ManualClock::new()).unwrap();
    for now in [0, 1, u64::MAX / 2, u64::MAX] {
        assert_eq!(sr.color_blind_at(u64::MAX, now), Color::Red);
        assert_eq!(tr.color_blind_at(u64::MAX, now), Color::Red);
        assert_eq!(sr.color_aware_at(u64::MAX, Color::Yellow, now), Color::Red);
        assert_eq!(sr.color_blind_at(0, now), Color::Green);
        assert_eq!(tr.color_aware_at(0, Color::Yellow, now), Color::Yellow);
    }
    // After times near the end of the clock's range, earlier times still answer.
    assert_eq!(sr.color_blind_at(1500, 5), Color::Red, "a later time was seen: C is not full at 5");
    // 400 Gbit/s: the clock's range is 2^64 bytes (11.7 years); past it every packet is red.
    let line =
        SrTcm::with_clock("400 Gbit/s burst 1 MB".parse().unwrap(), 0, ManualClock::new()).unwrap();
    let years = |y: u64| y * 31_557_600_000_000_000;
    assert_eq!(line.color_blind_at(1500, years(11)), Color::Green);
    assert_eq!(line.color_blind_at(1500, years(12)), Color::Red);
}

#[test]
fn bad_parameters_are_errors() {
    let q = per_us(1500);
    assert_eq!(SrTcm::new(q, u64::MAX).unwrap_err(), MeterError::Quota(QuotaError::BurstTooLarge));
    let fast = Quota::bytes(2, Duration::from_micros(1), 1500).unwrap();
    assert_eq!(TrTcm::new(q, fast).unwrap_err(), MeterError::PeakBelowCommitted);
    let count = Quota::per_second(1_000_000).unwrap();
    assert_eq!(TrTcm::new(count, q).unwrap_err(), MeterError::UnitsDiffer);
    assert!(TrTcm::new(q, q).is_ok(), "PIR = CIR is allowed");
    // Colour meters work on any quota: a count quota meters units.
    assert!(SrTcm::new(count, 10).is_ok());
    let err = KeyedSrTcm::<u64>::new(q, u64::MAX).unwrap_err();
    assert!(err.to_string().contains("too long"), "{err}");
    assert!(KeyedTrTcm::<u64>::new(q, fast).unwrap_err().to_string().contains("PIR"));
}

#[test]
fn a_new_flow_with_no_room_is_red_and_the_tracked_flows_keep_their_meters() {
    // 64 flows fill a 64-flow table (asked for 50: 50 and a quarter more round up to 64) with
    // busy buckets (each took 1 byte of its 1500-byte CBS, which takes a millisecond to come
    // back); the 65th finds no room in either table.
    let clock = ManualClock::new();
    let sr = KeyedSrTcm::<u64, _>::with_capacity_and_clock(per_us(1500), 1500, 50, clock.clone())
        .unwrap();
    let tr = KeyedTrTcm::<u64, _>::with_capacity_and_clock(
        per_us(1500),
        per_us(1500),
        50,
        clock.clone(),
    )
    .unwrap();
    for flow in 0..64 {
        assert_eq!(sr.color_blind(&flow, 1), Color::Green);
        assert_eq!(tr.color_blind(&flow, 1), Color::Green);
    }
    assert_eq!(sr.color_blind(&64, 1), Color::Red);
    assert_eq!(sr.color_aware(&64, 1, Color::Yellow), Color::Red);
    assert_eq!(tr.color_blind(&64, 1), Color::Red);
    assert_eq!(sr.tokens_at(&3, 0), (1499, 1500));
    assert_eq!(tr.tokens_at(&3, 0), (1499, 1499));
    // Once their buckets have been full again for a tick (idle: the table gives a slot to a new
    // key only strictly after its bucket emptied), their slots go to new flows.
    clock.advance(Duration::from_micros(2));
    assert_eq!(sr.color_blind(&64, 1), Color::Green);
    assert_eq!(tr.color_blind(&64, 1), Color::Green);
}
