//! Loom models of the colour meters (`src/meter/`): packets metered at once on a clock that
//! stands still, so that every bucket must end holding exactly its size less what the packets of
//! its colours took. A packet never leaves part of a charge behind, a yellow packet is never
//! paid for by an excess bucket that could not pay (the srTCM's `C` is read with `Acquire`
//! after each green's `Release` fence), and no bucket ever admits more than it holds. The keyed
//! meters run the same race on one flow's words in their two keyed tables.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p leakgate-loom-tests --release --test meters`.
#![cfg(loom)]

use leakgate::{Color, KeyedSrTcm, KeyedTrTcm, ManualClock, Quota, SrTcm, TrTcm};
use leakgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;

/// A byte quota of one byte a second with a burst of `burst`.
fn bytes(burst: u64) -> Quota {
    Quota::bytes_per_second(1).and_then(|q| q.with_burst(burst)).expect("a valid quota")
}

/// Meters each of `packets` (size, colour on arrival) on its own thread with `meter`; the
/// colours, in the order of `packets`.
fn race<M: Send + Sync + 'static>(
    meter: &Arc<M>,
    packets: &[(u64, Color)],
    colour: fn(&M, u64, Color) -> Color,
) -> Vec<Color> {
    let threads: Vec<_> = packets
        .iter()
        .map(|&(size, pre)| {
            let meter = meter.clone();
            thread::spawn(move || colour(&meter, size, pre))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// Bytes of `packets` that got each colour.
fn totals(packets: &[(u64, Color)], colours: &[Color]) -> [u64; 3] {
    let mut totals = [0; 3];
    for (&(size, _), &colour) in packets.iter().zip(colours) {
        totals[colour as usize] += size;
    }
    totals
}

/// An srTCM (CBS, EBS) metering `packets` at once: `C` ends at CBS less the greens, `E` at EBS
/// less the yellows, and neither paid for more than it held.
fn srtcm_model(cbs: u64, ebs: u64, packets: &'static [(u64, Color)]) {
    model(move || {
        let meter = Arc::new(SrTcm::with_clock(bytes(cbs), ebs, ManualClock::new()).unwrap());
        let colours = race(&meter, packets, |m, size, pre| m.color_aware(size, pre));
        let [green, yellow, _] = totals(packets, &colours);
        assert!(green <= cbs && yellow <= ebs, "{colours:?}");
        for (&(_, pre), &colour) in packets.iter().zip(&colours) {
            assert!(colour >= pre, "a packet never gets a better colour than it came with");
        }
        assert_eq!(meter.tokens_at(0), (cbs - green, ebs - yellow), "{colours:?}");
    });
}

#[test]
fn srtcm_a_green_that_loses_the_committed_bucket_is_yellow_or_red_and_keeps_nothing_else() {
    // CBS 2, EBS 1: both go for green; C holds only one of them. If the 1 loses, E pays for
    // it (yellow); if the 2 loses, E cannot, and its charge of the total goes back (red).
    srtcm_model(2, 1, &[(2, Color::Green), (1, Color::Green)]);
}

#[test]
fn srtcm_yellows_racing_a_green_in_flight_never_overdraw_the_excess_bucket() {
    // CBS 2, EBS 2: a green of 2 and a yellow of 2 and 1: the excess bucket pays for at most
    // 2 of the yellows' 3, whichever reads the committed bucket while the green is in flight.
    srtcm_model(2, 2, &[(2, Color::Green), (2, Color::Yellow), (1, Color::Yellow)]);
}

#[test]
fn srtcm_three_greens_for_two_buckets() {
    srtcm_model(2, 2, &[(2, Color::Green), (2, Color::Green), (1, Color::Green)]);
}

#[test]
fn srtcm_an_owner_after_the_threads_sees_exactly_what_they_took() {
    // The race above, then the threads are joined and one owner meters on through `&mut`
    // (plain reads and writes of the words: `color_*_mut`). The owner's words hold exactly the
    // threads' charges, and its packets are coloured from them as the RFC says.
    model(|| {
        let packets = [(2, Color::Green), (1, Color::Green)];
        let meter = Arc::new(SrTcm::with_clock(bytes(2), 1, ManualClock::new()).unwrap());
        let colours = race(&meter, &packets, |m, size, pre| m.color_aware(size, pre));
        let mut meter = Arc::try_unwrap(meter).expect("the threads are joined");
        let [green, yellow, _] = totals(&packets, &colours);
        let (mut tc, mut te) = (2 - green, 1 - yellow);
        assert_eq!(meter.tokens_at(0), (tc, te), "{colours:?}");
        // The owner's packets, coloured as RFC 2697 colours them from those tokens (the clock
        // stands still): a green packet of 1, then a yellow one.
        let blind = if tc >= 1 {
            tc -= 1;
            Color::Green
        } else if te >= 1 {
            te -= 1;
            Color::Yellow
        } else {
            Color::Red
        };
        assert_eq!(meter.color_blind_at_mut(1, 0), blind, "{colours:?}");
        let aware = if te >= 1 {
            te -= 1;
            Color::Yellow
        } else {
            Color::Red
        };
        assert_eq!(meter.color_aware_mut(1, Color::Yellow), aware, "{colours:?}");
        assert_eq!(meter.tokens_at(0), (tc, te), "{colours:?}");
    });
}

/// A trTCM (PBS, CBS) metering `packets` at once: `P` ends at PBS less the greens and yellows,
/// `C` at CBS less the greens.
fn trtcm_model(pbs: u64, cbs: u64, packets: &'static [(u64, Color)]) {
    model(move || {
        let meter =
            Arc::new(TrTcm::with_clock(bytes(pbs), bytes(cbs), ManualClock::new()).unwrap());
        let colours = race(&meter, packets, |m, size, pre| m.color_aware(size, pre));
        let [green, yellow, _] = totals(packets, &colours);
        assert!(green <= cbs && green + yellow <= pbs, "{colours:?}");
        assert_eq!(meter.tokens_at(0), (pbs - green - yellow, cbs - green), "{colours:?}");
    });
}

#[test]
fn trtcm_packets_take_exactly_their_colours_buckets() {
    trtcm_model(3, 2, &[(2, Color::Green), (2, Color::Green), (1, Color::Yellow)]);
}

#[test]
fn trtcm_greens_racing_for_the_committed_bucket() {
    trtcm_model(4, 2, &[(2, Color::Green), (1, Color::Green), (1, Color::Green)]);
}

/// The race on one flow of a keyed meter, after a first green of 1: both packets go for green.
const FLOW_RACE: &[(u64, Color)] = &[(2, Color::Green), (1, Color::Green)];

#[test]
fn keyed_srtcm_a_flow_races_as_one_meter_does() {
    // One flow of a keyed srTCM (its words in two keyed tables), after a first green of 1:
    // Tc = 2, Te = 1. The same race as above: both go for green, C holds only one of them.
    model(|| {
        let meter =
            KeyedSrTcm::<u64, _>::with_capacity_and_clock(bytes(3), 1, 64, ManualClock::new());
        let meter = Arc::new(meter.unwrap());
        assert_eq!(meter.color_blind(&1, 1), Color::Green);
        let colours = race(&meter, FLOW_RACE, |m, size, _| m.color_blind(&1, size));
        let [green, yellow, _] = totals(FLOW_RACE, &colours);
        assert!(green <= 2 && yellow <= 1, "{colours:?}");
        assert_eq!(meter.tokens_at(&1, 0), (2 - green, 1 - yellow), "{colours:?}");
    });
}

#[test]
fn keyed_trtcm_a_flow_races_as_one_meter_does() {
    // One flow of a keyed trTCM after a first green of 1: Tp = 3, Tc = 1.
    model(|| {
        let meter = KeyedTrTcm::<u64, _>::with_capacity_and_clock(
            bytes(4),
            bytes(2),
            64,
            ManualClock::new(),
        );
        let meter = Arc::new(meter.unwrap());
        assert_eq!(meter.color_blind(&1, 1), Color::Green);
        let colours = race(&meter, FLOW_RACE, |m, size, _| m.color_blind(&1, size));
        let [green, yellow, _] = totals(FLOW_RACE, &colours);
        assert!(green <= 1 && green + yellow <= 3, "{colours:?}");
        assert_eq!(meter.tokens_at(&1, 0), (3 - green - yellow, 1 - green), "{colours:?}");
    });
}
