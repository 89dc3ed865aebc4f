//! A new flow of a keyed meter must start with full buckets, whatever other flows did before it
//! (RFC 2697 and 2698: the buckets start full). Found by review: after one flow's packet larger
//! than the committed burst, the next new flow of a `KeyedTrTcm` found Tc one byte short (99 of
//! 100) and coloured a 100-byte packet yellow where a plain `TrTcm` and RFC 2698 colour it
//! green. The cause: the tables recorded the time they saw (for a flow with no slot, and when
//! they forget an idle flow) as a clock reading, and opened new flows' buckets at that reading
//! converted by the rate's 64-bit rounding, which counts a tick early just before a boundary of
//! a slow rate; the meters count ticks exactly. The same shift hit both keyed meters when a new
//! flow took a forgotten flow's slot.
use leakgate::{Color, KeyedSrTcm, KeyedTrTcm, ManualClock, Quota, TrTcm};
use std::time::Duration;

/// One byte every 8 s: a tick of 8e9 ns, where the 64-bit rounding of the rate bites.
fn q(burst: u64) -> Quota {
    Quota::bytes(1, Duration::from_secs(8), burst).unwrap()
}

#[test]
fn a_new_flow_starts_full_after_another_flows_oversize_packet() {
    let t = 7_999_999_999u64;
    let keyed =
        KeyedTrTcm::<u32, _>::with_capacity_and_clock(q(9000), q(100), 1024, ManualClock::new())
            .unwrap();
    let plain = TrTcm::with_clock(q(9000), q(100), ManualClock::new()).unwrap();
    assert_eq!(keyed.color_blind_at(&1, 5000, t), Color::Yellow);
    assert_eq!(
        plain.color_blind_at(100, t),
        Color::Green,
        "RFC 2698: a fresh meter colours 100 B green"
    );
    assert_eq!(keyed.tokens_at(&2, t), (9000, 100), "a new flow's buckets start full");
    assert_eq!(
        keyed.color_blind_at(&2, 100, t),
        Color::Green,
        "flow 2 is new: 100 B is within its CBS"
    );
}

#[test]
fn a_new_flow_in_a_forgotten_flows_slot_starts_full() {
    let sr =
        KeyedSrTcm::<u32, _>::with_capacity_and_clock(q(100), 100, 64, ManualClock::new()).unwrap();
    let tr = KeyedTrTcm::<u32, _>::with_capacity_and_clock(q(100), q(100), 64, ManualClock::new())
        .unwrap();
    let capacity = u32::try_from(sr.capacity()).unwrap();
    assert_eq!(tr.capacity(), sr.capacity());
    // Every slot taken at 0; 1,000 ticks later every one of those flows is idle (full again),
    // and the tables forget them to make room. 1 ns before a tick's boundary.
    for flow in 0..capacity {
        assert_eq!(sr.color_blind_at(&flow, 1, 0), Color::Green);
        assert_eq!(tr.color_blind_at(&flow, 1, 0), Color::Green);
    }
    let t = 8_000_000_000u64 * 1000 - 1;
    for flow in capacity..2 * capacity {
        assert_eq!(sr.color_blind_at(&flow, 100, t), Color::Green, "srTCM flow {flow}");
        assert_eq!(tr.color_blind_at(&flow, 100, t), Color::Green, "trTCM flow {flow}");
        assert_eq!(sr.tokens_at(&flow, t), (0, 100), "srTCM flow {flow}");
        assert_eq!(tr.tokens_at(&flow, t), (0, 0), "trTCM flow {flow}");
    }
}
