//! The colour meters against plain models of RFC 2697 and RFC 2698, written from the RFCs'
//! text: buckets that start full and gain one token at each tick of their rate (at `k * T`,
//! `T = 1 / rate`, counted from the clock's origin), in the RFCs' update order, and the RFCs'
//! colour rules (`support/rfc.rs`). One thread, a monotone clock; the meters are driven by a
//! `ManualClock` and by caller time, and every colour and every token count must be the model's
//! exactly.

mod support;

use leakgate::{Color, KeyedSrTcm, KeyedTrTcm, ManualClock, SrTcm, TrTcm};
use proptest::prelude::*;
use std::time::Duration;
use support::rfc::{RefSrTcm, RefTrTcm};
use support::{bytes, rate};

/// One packet: the time since the last one (ns), its size, its colour on arrival, its flow.
#[derive(Clone, Debug)]
struct Packet {
    wait_ns: u64,
    size: u64,
    pre: Color,
    flow: u8,
}

fn packets(max_wait_ns: u64) -> impl Strategy<Value = Vec<Packet>> {
    let packet = (
        prop_oneof![3 => Just(0u64), 4 => 0..max_wait_ns, 1 => 0..max_wait_ns * 40],
        prop_oneof![4 => 1u64..1600, 1 => 0u64..5000],
        prop_oneof![4 => Just(Color::Green), 1 => Just(Color::Yellow), 1 => Just(Color::Red)],
        0u8..3,
    )
        .prop_map(|(wait_ns, size, pre, flow)| Packet { wait_ns, size, pre, flow });
    proptest::collection::vec(packet, 1..120)
}

/// What the comparison asks of a meter, the same for an srTCM and a trTCM: a packet's colour
/// on the meter's clock and at a caller's time (colour-blind when `pre` is `None`), its tokens.
trait Meter {
    fn colour(&self, size: u64, pre: Option<Color>) -> Color;
    fn colour_at(&self, size: u64, pre: Option<Color>, t: u64) -> Color;
    fn tokens(&self, t: u64) -> (u64, u64);
}

/// The same of a keyed meter, for one flow.
trait Keyed {
    fn colour_at(&self, flow: u8, size: u64, pre: Color, t: u64) -> Color;
    fn tokens(&self, flow: u8, t: u64) -> (u64, u64);
}

/// An RFC's token buckets (`support/rfc.rs`), for either meter.
trait Model: Clone {
    fn colour(&mut self, t: u64, size: u64, pre: Color) -> Color;
    fn tokens(&self) -> (u64, u64);
}

macro_rules! meter {
    ($meter:ty, $keyed:ty, $model:ty) => {
        impl Meter for $meter {
            fn colour(&self, size: u64, pre: Option<Color>) -> Color {
                pre.map_or_else(|| self.color_blind(size), |pre| self.color_aware(size, pre))
            }
            fn colour_at(&self, size: u64, pre: Option<Color>, t: u64) -> Color {
                match pre {
                    None => self.color_blind_at(size, t),
                    Some(pre) => self.color_aware_at(size, pre, t),
                }
            }
            fn tokens(&self, t: u64) -> (u64, u64) {
                self.tokens_at(t)
            }
        }
        impl Keyed for $keyed {
            fn colour_at(&self, flow: u8, size: u64, pre: Color, t: u64) -> Color {
                self.color_aware_at(&flow, size, pre, t)
            }
            fn tokens(&self, flow: u8, t: u64) -> (u64, u64) {
                self.tokens_at(&flow, t)
            }
        }
        impl Model for $model {
            fn colour(&mut self, t: u64, size: u64, pre: Color) -> Color {
                self.meter(t, size, pre)
            }
            fn tokens(&self) -> (u64, u64) {
                <$model>::tokens(self)
            }
        }
    };
}
meter!(SrTcm<ManualClock>, KeyedSrTcm<u8, ManualClock>, RefSrTcm);
meter!(TrTcm<ManualClock>, KeyedTrTcm<u8, ManualClock>, RefTrTcm);

/// Meters `stream` on `own` (on `clock`), `caller` (at caller time) and one flow of `keyed` per
/// packet's flow, and checks each colour and each token count against `rfc`'s (one model for
/// the plain meters, one per flow for the keyed meter).
fn colours_are_the_rfcs<M: Meter>(
    clock: &ManualClock,
    (own, caller, keyed): (M, M, impl Keyed),
    rfc: impl Model,
    blind: bool,
    stream: Vec<Packet>,
) -> Result<(), TestCaseError> {
    let mut one = rfc.clone();
    let mut flows = vec![rfc; 3];
    let mut t = 0;
    for p in stream {
        t += p.wait_ns;
        clock.set(Duration::from_nanos(t));
        let pre = if blind { Color::Green } else { p.pre };
        let expected = one.colour(t, p.size, pre);
        let given = (!blind).then_some(pre);
        let (by_clock, at) = (own.colour(p.size, given), caller.colour_at(p.size, given, t));
        prop_assert_eq!(by_clock, expected, "{:?} at {}", p, t);
        prop_assert_eq!(at, expected, "caller time: {:?} at {}", p, t);
        prop_assert_eq!(own.tokens(t), one.tokens());
        let flow = usize::from(p.flow);
        let expected = flows[flow].colour(t, p.size, pre);
        prop_assert_eq!(keyed.colour_at(p.flow, p.size, pre, t), expected, "flow {:?}", p);
        prop_assert_eq!(keyed.tokens(p.flow, t), flows[flow].tokens());
    }
    Ok(())
}

proptest! {
    /// srTCM: every colour and every `(Tc, Te)` as RFC 2697 gives them, colour-blind and
    /// colour-aware, on the meter's clock and with caller time, for one meter and per flow.
    #[test]
    fn srtcm_colours_are_the_rfcs(
        cir in rate(),
        cbs in prop_oneof![1 => Just(0u64), 4 => 1u64..4000],
        ebs in prop_oneof![Just(0u64), 0u64..4000],
        blind in any::<bool>(),
        stream in packets(3000),
    ) {
        prop_assume!(cbs + ebs > 0, "RFC 2697: CBS or EBS above 0");
        let clock = ManualClock::new();
        let own = SrTcm::with_bursts(bytes(cir, 1), cbs, ebs, clock.clone()).unwrap();
        let caller = SrTcm::with_bursts(bytes(cir, 1), cbs, ebs, ManualClock::new()).unwrap();
        let keyed = KeyedSrTcm::<u8, _>::with_bursts(bytes(cir, 1), cbs, ebs, 64, ManualClock::new()).unwrap();
        colours_are_the_rfcs(&clock, (own, caller, keyed), RefSrTcm::new(cir, cbs, ebs), blind, stream)?;
    }

    /// trTCM: every colour and every `(Tp, Tc)` as RFC 2698 gives them.
    #[test]
    fn trtcm_colours_are_the_rfcs(
        cir in rate(),
        speedup in 1u64..4,
        pbs in 1u64..4000,
        cbs in 1u64..4000,
        blind in any::<bool>(),
        stream in packets(3000),
    ) {
        // PIR >= CIR: the same count in a period `speedup` times shorter (rounded up, so the
        // peak period is never zero).
        let pir = (cir.0, cir.1.div_ceil(speedup));
        let clock = ManualClock::new();
        let own = TrTcm::with_clock(bytes(pir, pbs), bytes(cir, cbs), clock.clone()).unwrap();
        let caller = TrTcm::with_clock(bytes(pir, pbs), bytes(cir, cbs), ManualClock::new()).unwrap();
        let keyed = KeyedTrTcm::<u8, _>::with_capacity_and_clock(bytes(pir, pbs), bytes(cir, cbs), 64, ManualClock::new()).unwrap();
        colours_are_the_rfcs(&clock, (own, caller, keyed), RefTrTcm::new(pir, pbs, cir, cbs), blind, stream)?;
    }
}

proptest! {
    /// Slow rates whose interval is no whole number of nanoseconds, far along the clock: the
    /// ticks still fall exactly where the RFCs' do (no rounding of the rate moves them).
    #[test]
    fn colours_are_the_rfcs_far_along_the_clock(
        count in 1u64..10,
        period in 1_000_000_000u64..4_000_000_000_000,
        start in (1u64 << 60)..(1u64 << 62),
        cbs in 1u64..20,
        ebs in 0u64..20,
        steps in proptest::collection::vec((0u64..3, 0u64..1000, 0u64..25), 1..60),
    ) {
        let cir = (count, period);
        let sr = SrTcm::with_clock(bytes(cir, cbs), ebs, ManualClock::new()).unwrap();
        let pir = (2 * count, period);
        let tr = TrTcm::with_clock(bytes(pir, cbs + ebs), bytes(cir, cbs), ManualClock::new()).unwrap();
        let (mut sr_ref, mut tr_ref) = (RefSrTcm::new(cir, cbs, ebs), RefTrTcm::new(pir, cbs + ebs, cir, cbs));
        let mut t = start;
        for (periods, thousandths, size) in steps {
            // Whole periods and a fraction of one, so that readings fall near ticks too.
            t += periods * period + period / 1000 * thousandths;
            prop_assert_eq!(sr.color_blind_at(size, t), sr_ref.meter(t, size, Color::Green), "srTCM at {}", t);
            prop_assert_eq!(sr.tokens_at(t), sr_ref.tokens());
            prop_assert_eq!(tr.color_blind_at(size, t), tr_ref.meter(t, size, Color::Green), "trTCM at {}", t);
            prop_assert_eq!(tr.tokens_at(t), tr_ref.tokens());
        }
    }
}

#[test]
fn the_excess_bucket_fills_only_with_what_overflows_the_committed_one() {
    // CIR 1 byte per microsecond, CBS 1000, EBS 500. Empty both, then watch the refill.
    let clock = ManualClock::new();
    let meter = SrTcm::with_clock(bytes((1, 1000), 1000), 500, clock.clone()).unwrap();
    assert_eq!(meter.color_blind(1000), Color::Green);
    assert_eq!(meter.color_blind(500), Color::Yellow);
    assert_eq!(meter.tokens_at(0), (0, 0));
    // 999 ticks: all to C, none to E.
    assert_eq!(meter.tokens_at(999_999), (999, 0));
    // The 1000th fills C; from then on E gains one a tick.
    assert_eq!(meter.tokens_at(1_000_000), (1000, 0));
    assert_eq!(meter.tokens_at(1_000_001), (1000, 0));
    assert_eq!(meter.tokens_at(1_001_000), (1000, 1));
    assert_eq!(meter.tokens_at(1_500_000), (1000, 500));
    // A green packet mid-way stops E's refill until C is full again.
    clock.set(Duration::from_micros(1_200));
    assert_eq!(meter.tokens_at(1_200_000), (1000, 200));
    assert_eq!(meter.color_blind(100), Color::Green);
    assert_eq!(meter.tokens_at(1_299_999), (999, 200));
    assert_eq!(meter.tokens_at(1_300_000), (1000, 200));
    assert_eq!(meter.tokens_at(1_301_000), (1000, 201));
}

#[test]
fn a_packet_larger_than_each_bucket_but_not_their_sum_is_red_and_takes_nothing() {
    let meter = SrTcm::with_clock(bytes((1, 1000), 1000), 1000, ManualClock::new()).unwrap();
    assert_eq!(meter.color_blind_at(600, 0), Color::Green);
    assert_eq!(meter.color_blind_at(600, 0), Color::Yellow);
    assert_eq!(meter.tokens_at(0), (400, 400));
    assert_eq!(meter.color_blind_at(600, 0), Color::Red);
    assert_eq!(meter.tokens_at(0), (400, 400));
    assert_eq!(meter.color_blind_at(u64::MAX, 0), Color::Red);
    assert_eq!(meter.tokens_at(0), (400, 400));
}
