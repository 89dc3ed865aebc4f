//! The exclusive owner's path (`color_*_mut`, through `&mut self`: plain reads and writes of the
//! words) against the shared path (`color_*`, atomic) and the RFCs' token buckets
//! (`support/rfc.rs`): random packets (sizes from 0 to past both buckets, colours on arrival,
//! times forwards, standing still and backwards) must get the same colour from each, and leave
//! the same token counts. One thread.
//!
//! Four meters see every packet: one on the shared path and three on the owner's (caller time,
//! the meter's own clock, and one that takes each packet by either path at random, to show
//! that the two can be mixed on one meter). The RFCs' models know a monotone clock only, so they
//! are compared until the first packet whose time goes back; the paths are compared to the end.

mod support;

use leakgate::{Color, ManualClock, SrTcm, TrTcm};
use proptest::prelude::*;
use std::time::Duration;
use support::rfc::{RefSrTcm, RefTrTcm};
use support::{bytes, rate};

/// One packet: how the time moves before it, its size, its colour on arrival, and which path
/// the mixed meter takes for it.
#[derive(Clone, Debug)]
struct Packet {
    step: Step,
    size: u64,
    pre: Color,
    owner: bool,
}

/// How the time moves before a packet (ns).
#[derive(Clone, Copy, Debug)]
enum Step {
    Forward(u64),
    Back(u64),
}

impl Step {
    fn apply(self, t: u64) -> u64 {
        match self {
            Step::Forward(ns) => t.saturating_add(ns),
            Step::Back(ns) => t.saturating_sub(ns),
        }
    }
}

/// Packets with waits of up to `max_wait_ns` (and now and then 40 times that), and, if
/// `backwards`, times that go back by up to twice as much.
fn packets(max_wait_ns: u64, backwards: bool) -> impl Strategy<Value = Vec<Packet>> {
    let back = if backwards { 1 } else { 0 };
    let step = prop_oneof![
        3 => Just(Step::Forward(0)),
        4 => (0..max_wait_ns).prop_map(Step::Forward),
        1 => (0..max_wait_ns * 40).prop_map(Step::Forward),
        back => (1..max_wait_ns * 2).prop_map(Step::Back),
    ];
    let size = prop_oneof![4 => 1u64..1600, 1 => 0u64..9000, 1 => Just(u64::MAX)];
    let pre = prop_oneof![4 => Just(Color::Green), 1 => Just(Color::Yellow), 1 => Just(Color::Red)];
    let packet = (step, size, pre, any::<bool>()).prop_map(|(step, size, pre, owner)| Packet {
        step,
        size,
        pre,
        owner,
    });
    proptest::collection::vec(packet, 1..150)
}

/// Where the clock starts: its origin, or far along it.
fn start() -> impl Strategy<Value = u64> {
    prop_oneof![3 => Just(0u64), 1 => 0u64..(1 << 50)]
}

/// What the comparison asks of a meter, the same for an srTCM and a trTCM: a packet's colour by
/// each path (colour-blind when `pre` is `None`), and the tokens left.
trait Meter {
    fn shared(&self, size: u64, pre: Option<Color>, t: u64) -> Color;
    fn owned(&mut self, size: u64, pre: Option<Color>, t: u64) -> Color;
    fn owned_by_clock(&mut self, size: u64, pre: Option<Color>) -> Color;
    fn tokens(&self, t: u64) -> (u64, u64);
}

macro_rules! meter {
    ($meter:ty) => {
        impl Meter for $meter {
            fn shared(&self, size: u64, pre: Option<Color>, t: u64) -> Color {
                match pre {
                    None => self.color_blind_at(size, t),
                    Some(pre) => self.color_aware_at(size, pre, t),
                }
            }
            fn owned(&mut self, size: u64, pre: Option<Color>, t: u64) -> Color {
                match pre {
                    None => self.color_blind_at_mut(size, t),
                    Some(pre) => self.color_aware_at_mut(size, pre, t),
                }
            }
            fn owned_by_clock(&mut self, size: u64, pre: Option<Color>) -> Color {
                match pre {
                    None => self.color_blind_mut(size),
                    Some(pre) => self.color_aware_mut(size, pre),
                }
            }
            fn tokens(&self, t: u64) -> (u64, u64) {
                self.tokens_at(t)
            }
        }
    };
}
meter!(SrTcm<ManualClock>);
meter!(TrTcm<ManualClock>);

/// An RFC's token buckets (`support/rfc.rs`), for either meter.
trait Model {
    fn colour(&mut self, t: u64, size: u64, pre: Color) -> Color;
    fn tokens(&self) -> (u64, u64);
}

macro_rules! model {
    ($model:ty) => {
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
model!(RefSrTcm);
model!(RefTrTcm);

/// Meters `stream` from `t0` on four meters made by `new` (shared path; owner's path with
/// caller time; owner's path on the meter's clock; either path at random) and checks that every
/// packet gets one colour from all four, the RFC's (`rfc`, until the time first goes back), and
/// that all four leave the same tokens.
fn paths_agree<M: Meter>(
    new: impl Fn(ManualClock) -> M,
    rfc: impl Model,
    blind: bool,
    t0: u64,
    stream: Vec<Packet>,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let shared = new(ManualClock::new());
    let (mut at, mut by_clock, mut mixed) =
        (new(ManualClock::new()), new(clock.clone()), new(ManualClock::new()));
    let mut rfc = Some(rfc);
    let (mut t, mut latest) = (t0, t0);
    for p in stream {
        t = p.step.apply(t);
        clock.set(Duration::from_nanos(t));
        let pre = if blind { None } else { Some(p.pre) };
        let colours = [
            shared.shared(p.size, pre, t),
            at.owned(p.size, pre, t),
            by_clock.owned_by_clock(p.size, pre),
            if p.owner { mixed.owned(p.size, pre, t) } else { mixed.shared(p.size, pre, t) },
        ];
        prop_assert_eq!(colours, [colours[0]; 4], "{:?} at {} (shared, at, by clock, mixed)", p, t);
        if t < latest {
            rfc = None; // the models know a monotone clock only
        }
        latest = latest.max(t);
        if let Some(model) = rfc.as_mut() {
            let expected = model.colour(t, p.size, pre.unwrap_or(Color::Green));
            prop_assert_eq!(colours[0], expected, "the RFC: {:?} at {}", p, t);
            prop_assert_eq!(shared.tokens(t), model.tokens());
        }
        for when in [t, latest, latest.saturating_add(p.size)] {
            let tokens = shared.tokens(when);
            let others = [at.tokens(when), by_clock.tokens(when), mixed.tokens(when)];
            prop_assert_eq!(others, [tokens; 3], "at {}", when);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn srtcm_the_owners_path_is_the_shared_path_and_the_rfcs(
        cir in rate(),
        cbs in prop_oneof![1 => Just(0u64), 4 => 1u64..4000],
        ebs in prop_oneof![Just(0u64), 0u64..4000],
        blind in any::<bool>(),
        t0 in start(),
        stream in any::<bool>().prop_flat_map(|backwards| packets(3000, backwards)),
    ) {
        prop_assume!(cbs + ebs > 0, "RFC 2697: CBS or EBS above 0");
        let new = |clock: ManualClock| SrTcm::with_bursts(bytes(cir, 1), cbs, ebs, clock).unwrap();
        paths_agree(new, RefSrTcm::new(cir, cbs, ebs), blind, t0, stream)?;
    }

    #[test]
    fn trtcm_the_owners_path_is_the_shared_path_and_the_rfcs(
        cir in rate(),
        speedup in 1u64..4,
        pbs in 1u64..4000,
        cbs in 1u64..4000,
        blind in any::<bool>(),
        t0 in start(),
        stream in any::<bool>().prop_flat_map(|backwards| packets(3000, backwards)),
    ) {
        // PIR >= CIR: the same count in a period `speedup` times shorter (rounded up).
        let pir = (cir.0, cir.1.div_ceil(speedup));
        let new = |clock: ManualClock| TrTcm::with_clock(bytes(pir, pbs), bytes(cir, cbs), clock).unwrap();
        paths_agree(new, RefTrTcm::new(pir, pbs, cir, cbs), blind, t0, stream)?;
    }
}

#[test]
fn a_meter_handed_to_an_owner_thread_keeps_its_tokens() {
    // Shared first (two threads take 1000 bytes each, green), then moved to one owner thread
    // that meters on with plain writes, then shared again: each sees what the others took.
    let clock = ManualClock::new();
    let meter = SrTcm::with_clock(bytes((1, 1000), 3000), 1000, clock).unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| assert_eq!(meter.color_blind_at(1000, 0), Color::Green));
        }
    });
    let mut meter = std::thread::spawn(move || {
        let mut meter = meter;
        assert_eq!(meter.color_blind_at_mut(1000, 0), Color::Green);
        assert_eq!(meter.color_blind_at_mut(600, 0), Color::Yellow);
        meter
    })
    .join()
    .unwrap();
    assert_eq!(meter.tokens_at(0), (0, 400));
    assert_eq!(meter.color_blind_at(600, 0), Color::Red);
    assert_eq!(meter.color_aware_at_mut(400, Color::Yellow, 0), Color::Yellow);
    assert_eq!(meter.tokens_at(0), (0, 0));
}
