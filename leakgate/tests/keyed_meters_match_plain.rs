//! Every keyed meter against its plain meter, per flow: a [`KeyedSrTcm`] or [`KeyedTrTcm`] must
//! colour each flow's packets exactly as a [`SrTcm`] or [`TrTcm`] of that flow alone would,
//! whatever the other flows did, colour-blind and colour-aware. Packets fall on tick boundaries
//! and 1 ns before them (where a rate's own rounding of the clock and the meters' exact ticks
//! could part), at rates whose tick is no whole number of nanoseconds, anywhere along the
//! clock, with sizes above the buckets (which the tables answer without a slot) mixed in.

use leakgate::{Color, KeyedSrTcm, KeyedTrTcm, ManualClock, Quota, SrTcm, TrTcm};
use proptest::prelude::*;
use std::time::Duration;

/// A byte quota of `count` per `period_ns` with a burst of `burst`.
fn bytes((count, period_ns): (u64, u64), burst: u64) -> Quota {
    Quota::bytes(count, Duration::from_nanos(period_ns), burst).unwrap()
}

/// A rate as `(count, period_ns)`: slow and fast, ticks that are whole nanoseconds and ticks
/// that are not (the slow ones are where a 64-bit rounding of the rate moves a tick).
fn rate() -> impl Strategy<Value = (u64, u64)> {
    prop_oneof![
        (1u64..4, 1_000_000_000u64..20_000_000_000),
        (1u64..10, 1u64..3000),
        (1u64..1000, 1_000_000u64..1_000_000_000_000),
    ]
}

/// One packet: how many ticks of the meter's first rate after the last packet's tick it comes,
/// whether 1 ns before that tick's boundary, its size, its colour on arrival, its flow.
#[derive(Clone, Debug)]
struct Packet {
    ticks: u64,
    before: bool,
    size: u64,
    pre: Color,
    flow: u8,
}

fn packets(burst: u64) -> impl Strategy<Value = Vec<Packet>> {
    let packet = (
        prop_oneof![3 => Just(0u64), 3 => 1u64..4, 1 => 0u64..3 * burst],
        any::<bool>(),
        prop_oneof![4 => 1u64..=burst, 1 => 0u64..4 * burst + 2],
        prop_oneof![4 => Just(Color::Green), 1 => Just(Color::Yellow), 1 => Just(Color::Red)],
        0u8..6,
    )
        .prop_map(|(ticks, before, size, pre, flow)| Packet { ticks, before, size, pre, flow });
    proptest::collection::vec(packet, 1..100)
}

/// The packets' times: the boundary of each one's tick `k` (the first ns at or after
/// `k * period / count`), or 1 ns before it, from the tick in force at `start_ns` on; never
/// going back.
fn times((count, period): (u64, u64), start_ns: u64, stream: &[Packet]) -> Vec<u64> {
    let mut k = (u128::from(start_ns) * u128::from(count) / u128::from(period)) as u64;
    let mut last = 0;
    stream
        .iter()
        .map(|p| {
            k += p.ticks;
            let boundary = (u128::from(k) * u128::from(period)).div_ceil(u128::from(count));
            let t = u64::try_from(boundary).unwrap_or(u64::MAX) - u64::from(p.before && k > 0);
            last = t.max(last);
            last
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// srTCM: each flow of a `KeyedSrTcm` is coloured, and holds the tokens, as its own `SrTcm`.
    #[test]
    fn keyed_srtcm_colours_each_flow_as_its_own_srtcm(
        cir in rate(),
        cbs in prop_oneof![1 => Just(0u64), 4 => 0u64..300],
        ebs in prop_oneof![1 => Just(0u64), 4 => 0u64..300],
        start in prop_oneof![Just(0u64), 0u64..1 << 40, 0u64..1 << 62],
        blind in any::<bool>(),
        stream in packets(300),
    ) {
        prop_assume!(cbs + ebs > 0);
        // CBS 0 included (RFC 2697 allows it): CIR's quota carries the rate, the bursts are given.
        let keyed = KeyedSrTcm::<u8, _>::with_bursts(bytes(cir, 1), cbs, ebs, 64, ManualClock::new()).unwrap();
        let plain: Vec<_> = (0..6).map(|_| SrTcm::with_bursts(bytes(cir, 1), cbs, ebs, ManualClock::new()).unwrap()).collect();
        for (p, t) in stream.iter().zip(times(cir, start, &stream)) {
            let own = &plain[usize::from(p.flow)];
            let (got, expected) = if blind {
                (keyed.color_blind_at(&p.flow, p.size, t), own.color_blind_at(p.size, t))
            } else {
                (keyed.color_aware_at(&p.flow, p.size, p.pre, t), own.color_aware_at(p.size, p.pre, t))
            };
            prop_assert_eq!(got, expected, "{:?} at {}", p, t);
            for flow in 0..6u8 {
                prop_assert_eq!(keyed.tokens_at(&flow, t), plain[usize::from(flow)].tokens_at(t), "flow {} at {}", flow, t);
            }
        }
    }

    /// trTCM: each flow of a `KeyedTrTcm` is coloured, and holds the tokens, as its own `TrTcm`.
    #[test]
    fn keyed_trtcm_colours_each_flow_as_its_own_trtcm(
        cir in rate(),
        speedup in 1u64..4,
        pbs in 1u64..300,
        cbs in 1u64..300,
        start in prop_oneof![Just(0u64), 0u64..1 << 40, 0u64..1 << 62],
        on_peak in any::<bool>(),
        blind in any::<bool>(),
        stream in packets(300),
    ) {
        // PIR >= CIR: the same count in a period `speedup` times shorter (rounded up).
        let pir = (cir.0, cir.1.div_ceil(speedup));
        let keyed = KeyedTrTcm::<u8, _>::with_capacity_and_clock(bytes(pir, pbs), bytes(cir, cbs), 64, ManualClock::new()).unwrap();
        let plain: Vec<_> = (0..6)
            .map(|_| TrTcm::with_clock(bytes(pir, pbs), bytes(cir, cbs), ManualClock::new()).unwrap())
            .collect();
        // The times fall on the ticks of one of the two rates, half of them 1 ns early.
        let on = if on_peak { pir } else { cir };
        for (p, t) in stream.iter().zip(times(on, start, &stream)) {
            let own = &plain[usize::from(p.flow)];
            let (got, expected) = if blind {
                (keyed.color_blind_at(&p.flow, p.size, t), own.color_blind_at(p.size, t))
            } else {
                (keyed.color_aware_at(&p.flow, p.size, p.pre, t), own.color_aware_at(p.size, p.pre, t))
            };
            prop_assert_eq!(got, expected, "{:?} at {}", p, t);
            for flow in 0..6u8 {
                prop_assert_eq!(keyed.tokens_at(&flow, t), plain[usize::from(flow)].tokens_at(t), "flow {} at {}", flow, t);
            }
        }
    }
}
