//! An srTCM with CBS = 0, which RFC 2697 allows ("at least one of CBS and EBS must be larger
//! than 0") and DPDK's meter tests configure: it is accepted (`SrTcm::with_bursts`,
//! `KeyedSrTcm::with_bursts`), and colours every packet yellow or red. Both bursts 0 is refused
//! with an error that says why. The cases take the shape of DPDK's own srTCM tests (CIR
//! 46,000,000 bytes a second, CBS 2048, EBS 4096; the configurations refused and accepted,
//! then a packet just under and just over a bucket on a fresh meter).
use leakgate::{Color, KeyedSrTcm, ManualClock, MeterError, Quota, SrTcm};
use std::time::Duration;

const CIR: u64 = 46_000_000;
const CBS: u64 = 2048;
const EBS: u64 = 4096;

fn cir() -> Quota {
    Quota::bytes_per_second(CIR).unwrap()
}

fn plain(cbs: u64, ebs: u64) -> Result<SrTcm<ManualClock>, MeterError> {
    SrTcm::with_bursts(cir(), cbs, ebs, ManualClock::new())
}

fn keyed(cbs: u64, ebs: u64) -> Result<KeyedSrTcm<u64, ManualClock>, MeterError> {
    KeyedSrTcm::with_bursts(cir(), cbs, ebs, 64, ManualClock::new())
}

#[test]
fn cbs_zero_is_accepted_and_both_zero_refused_with_the_reason() {
    for (cbs, ebs) in [(CBS, EBS), (CBS, 0), (0, EBS)] {
        assert!(plain(cbs, ebs).is_ok(), "CBS {cbs}, EBS {ebs}");
        assert!(keyed(cbs, ebs).is_ok(), "keyed: CBS {cbs}, EBS {ebs}");
    }
    assert_eq!(plain(0, 0).unwrap_err(), MeterError::ZeroBursts);
    assert_eq!(keyed(0, 0).unwrap_err(), MeterError::ZeroBursts);
    let message = MeterError::ZeroBursts.to_string();
    assert!(message.contains("CBS or EBS above 0") && message.contains("RFC 2697"), "{message}");
    // The quota's own burst plays no part: CBS is the argument.
    let meter = SrTcm::with_bursts(cir().with_burst(9000).unwrap(), 0, EBS, ManualClock::new());
    assert_eq!(meter.unwrap().tokens_at(0), (0, EBS));
}

#[test]
fn cbs_zero_colours_yellow_within_ebs_and_red_past_it() {
    // A fresh meter for each packet, as DPDK's colour tests make one per case.
    for pre in [None, Some(Color::Green), Some(Color::Yellow)] {
        for (size, colour) in
            [(CBS - 1, Color::Yellow), (EBS - 1, Color::Yellow), (EBS + 1, Color::Red)]
        {
            let (one, many) = (plain(0, EBS).unwrap(), keyed(0, EBS).unwrap());
            let (got, flow) = match pre {
                None => (one.color_blind_at(size, 0), many.color_blind_at(&7, size, 0)),
                Some(pre) => {
                    (one.color_aware_at(size, pre, 0), many.color_aware_at(&7, size, pre, 0))
                }
            };
            assert_eq!((got, flow), (colour, colour), "{size} bytes, arriving {pre:?}");
        }
    }
    // With CBS the usual colours: green just under CBS, yellow just over it.
    let meter = plain(CBS, EBS).unwrap();
    assert_eq!(meter.color_blind_at(CBS - 1, 0), Color::Green);
    assert_eq!(plain(CBS, EBS).unwrap().color_blind_at(CBS + 1, 0), Color::Yellow);
    assert_eq!(plain(CBS, EBS).unwrap().color_blind_at(EBS + 1, 0), Color::Red);
}

#[test]
fn cbs_zero_gives_every_tick_to_the_excess_bucket_and_nothing_is_green() {
    let clock = ManualClock::new();
    let mut owner = SrTcm::with_bursts(cir(), 0, EBS, ManualClock::new()).unwrap();
    let shared = SrTcm::with_bursts(cir(), 0, EBS, clock.clone()).unwrap();
    let flows = keyed(0, EBS).unwrap();
    // Empty E, then let it refill: one byte per tick of 1/46,000,000 s, all of them to E.
    assert_eq!(shared.color_blind(EBS), Color::Yellow);
    assert_eq!(owner.color_blind_at_mut(EBS, 0), Color::Yellow);
    assert_eq!(flows.color_blind_at(&1, EBS, 0), Color::Yellow);
    let ns_per_1500 = 1500 * 1_000_000_000 / CIR + 1; // 1500 ticks fallen
    clock.advance(Duration::from_nanos(ns_per_1500));
    let t = ns_per_1500;
    assert_eq!(shared.tokens_at(t), (0, 1500));
    assert_eq!(flows.tokens_at(&1, t), (0, 1500));
    assert_eq!(shared.color_blind(1501), Color::Red, "E holds 1500");
    assert_eq!(shared.color_blind(1500), Color::Yellow);
    assert_eq!(owner.color_blind_at_mut(1500, t), Color::Yellow);
    assert_eq!(flows.color_blind_at(&1, 1500, t), Color::Yellow);
    // However long it rests, no packet of a byte or more is ever green; 0 bytes always is.
    for t in [10_000_000_000, u64::MAX / 2] {
        clock.set(Duration::from_nanos(t));
        assert_eq!(shared.color_blind(1), Color::Yellow);
        assert_eq!(owner.color_blind_at_mut(1, t), Color::Yellow);
        assert_eq!(flows.color_blind_at(&1, 1, t), Color::Yellow);
        assert_eq!(shared.color_blind(0), Color::Green, "RFC 2697: Tc (0) >= 0 bytes");
        assert_eq!((shared.committed_burst(), shared.tokens_at(t).0), (0, 0));
    }
}
