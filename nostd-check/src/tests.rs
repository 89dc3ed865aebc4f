//! Host tests of leakgate built without `std` (when run alone: `cargo test -p
//! leakgate-nostd-check`; in a workspace build leakgate may have `std`, and these hold too).

use super::*;
use core::fmt::Write;
use core::time::Duration;
use std::string::String;
use std::vec::Vec;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

/// 10 requests a second; srTCM at 1000 B/s, CBS 1000, EBS 500; trTCM peak 2000 B/s burst 1500.
fn gate(clock: &BurstClock) -> Gate<'_> {
    Gate::new(clock, "10/s", "1000 B/s", 500, "2000 B/s burst 1500 B").unwrap()
}

#[test]
fn requests_on_caller_time() {
    let clock = BurstClock::new();
    let gate = gate(&clock);
    for left in (0..10).rev() {
        assert_eq!(gate.admit(1).unwrap().remaining(), left);
    }
    let denied = gate.admit(1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(gate.admit(11).unwrap_err().retry_after(), None);
    clock.set(100 * MS);
    assert_eq!(gate.room(), 1);
    assert!(gate.admit(1).is_ok());
    assert!(gate.admit(1).is_err());
    // Backwards: never more than at the latest time seen.
    clock.set(0);
    assert!(gate.admit(1).is_err());
    // Caller time, without touching the clock: the same answers at the time given.
    assert_eq!(gate.admit_at(1, 350 * MS).unwrap().remaining(), 1);
    assert_eq!(
        gate.admit_at(2, 350 * MS).unwrap_err().retry_after(),
        Some(Duration::from_millis(50))
    );
    assert!(gate.admit_at(1, 200 * MS).is_err());
}

#[test]
fn colours_follow_the_rfcs_at_the_callers_time() {
    let clock = BurstClock::new();
    let gate = gate(&clock);
    // srTCM: C holds 1000, E 500. trTCM: P holds 1500, C 1000.
    let first = gate.meter(0, &[1000, 500, 1], None);
    assert_eq!(first.single_rate, [1, 1, 1]);
    assert_eq!(first.two_rate, [1, 1, 1]);
    assert_eq!(gate.tokens(0), [(0, 0), (0, 0)]);
    // Half a second: C gains 500 (srTCM: all to C); trTCM: P gains 1000, C 500.
    assert_eq!(gate.tokens(SECOND / 2), [(500, 0), (1000, 500)]);
    let later = gate.meter(SECOND / 2, &[400, 400, 400], None);
    assert_eq!(later.single_rate, [1, 0, 2]);
    assert_eq!(later.two_rate, [1, 1, 1]);
    // Colour-aware: a packet pre-coloured yellow is never green.
    let aware = gate.meter(10 * SECOND, &[1], Some(Color::Yellow));
    assert_eq!(aware.single_rate, [0, 1, 0]);
    assert_eq!(aware.two_rate, [0, 1, 0]);
}

#[test]
fn an_owned_gate_colours_as_a_shared_one() {
    // The same bursts through the shared path and the owner's: the same colours and tokens.
    let (shared_clock, owned_clock) = (BurstClock::new(), BurstClock::new());
    let (shared, mut owned) = (gate(&shared_clock), gate(&owned_clock));
    let bursts: [(u64, &[u64], Option<Color>); 5] = [
        (0, &[1000, 500, 1], None),
        (SECOND / 2, &[400, 400, 400], None),
        (SECOND / 4, &[1, 0, 2000], None), // the clock went back
        (2 * SECOND, &[300, 900, 300], Some(Color::Yellow)),
        (3 * SECOND, &[600, 600, 600, 600], Some(Color::Green)),
    ];
    for (now, packets, pre) in bursts {
        assert_eq!(owned.meter_owned(now, packets, pre), shared.meter(now, packets, pre), "{now}");
        assert_eq!(owned.tokens(now), shared.tokens(now), "{now}");
    }
    // The last burst: srTCM green then red (C 400 left, E 500 too few); trTCM green, yellow, red.
    assert_eq!(owned.tokens(3 * SECOND), [(400, 500), (300, 400)]);
}

#[test]
fn quotas_print_and_read_back_without_an_allocator() {
    let clock = BurstClock::new();
    let gate =
        Gate::new(&clock, "100/s burst 20", "10 MB/s burst 64 KiB", 1500, "1 Gbit/s").unwrap();
    let mut text = Fixed::default();
    gate.describe(&mut text).unwrap();
    assert_eq!(
        text.as_str(),
        "requests 100/s burst 20; srTCM 10 MB/s burst 64 KiB ebs 1500; trTCM peak 125 MB/s \
         committed 10 MB/s burst 64 KiB"
    );
    for quota in quotas_at_the_limits().unwrap() {
        let mut text = Fixed::default();
        write!(text, "{quota}").unwrap();
        assert_eq!(text.as_str().parse::<Quota>(), Ok(quota));
    }
}

#[test]
fn bad_input_is_an_error_with_a_message() {
    let clock = BurstClock::new();
    let err = |r: Result<Gate<'_>, GateError>| r.err().unwrap();
    assert!(matches!(
        err(Gate::new(&clock, "0/s", "1 kB/s", 0, "2 kB/s")),
        GateError::Quota(QuotaError::ZeroCount)
    ));
    let peak_low = err(Gate::new(&clock, "1/s", "2 kB/s", 0, "1 kB/s"));
    assert!(matches!(peak_low, GateError::Meter(MeterError::PeakBelowCommitted)));
    let mut text = Fixed::default();
    write!(text, "{peak_low}").unwrap();
    assert!(text.as_str().contains("PIR"), "{}", text.as_str());
    assert_eq!(
        parse_error("10/s burst").unwrap().as_str(),
        "missing the number after \"burst\" in \"10/s burst\""
    );
    assert!(parse_error("10/s").is_none());
}

#[test]
fn a_long_parse_error_is_whole_or_cut_at_a_character_with_an_ellipsis() {
    let full = "expected a unit (ns, us (µs), ms, s, min (m), h, d, or a name such as second or \
                hours) after \"/\" but found \"fortnight\" in \"10/fortnight\"";
    let why = parse_error("10/fortnight").unwrap();
    // Without `alloc` (leakgate built for this crate alone) the message lives in the error
    // itself, more than a boxed `str`; with it, whole.
    if core::mem::size_of::<ParseMessage>() > 2 * core::mem::size_of::<usize>() {
        let kept = why.strip_suffix('…').expect("a cut message ends in an ellipsis");
        assert!(full.starts_with(kept), "{why}");
        assert!((90..=92).contains(&kept.len()), "{}", kept.len());
        assert_eq!(why.len(), kept.len() + '…'.len_utf8());
    } else {
        assert_eq!(why.as_str(), full);
    }
    // A quote of multi-byte characters is cut between two of them, never inside one.
    let typed: String = core::iter::repeat_n('µ', 200).collect();
    let why = parse_error(&typed).unwrap();
    assert!(why.starts_with("missing \"/\" in \"µµ"));
}

#[test]
fn quota_changes_and_checks_race_without_std_locks() {
    // Frozen clock, one quota set again and again while others check: each change keeps the
    // level, so no more than one burst is ever admitted, and no check waits forever on a change.
    let clock = BurstClock::new();
    let gate = gate(&clock);
    let quota: Quota = "10/s".parse().unwrap();
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..2000 {
                    gate.set_requests(quota);
                }
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..2000 {
                    if gate.admit(1).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(gate.requests(), quota);
    let admitted = admitted.into_inner();
    assert!((1..=10).contains(&admitted), "{admitted}");
    assert_eq!(gate.room(), 10 - admitted);
}

#[cfg(feature = "alloc")]
#[test]
fn a_manual_clock_through_an_arc() {
    let (clock, lim) = manual_limiter(Quota::per_second(2).unwrap());
    assert!(lim.check_n(2).is_ok());
    assert!(lim.check().is_err());
    clock.advance(Duration::from_millis(500));
    assert!(lim.check().is_ok());
}

/// A fixed buffer for text, as a program without an allocator would write into.
#[test]
fn exact_units_for_stored_state() {
    // 3 a second: thirds of a nanosecond. Two units at 1 s leave the TAT 2/3 s on.
    let q: Quota = "3/s".parse().unwrap();
    assert_eq!(stored_after(q, SECOND, 2), ((SECOND as u128 + 666_666_666, 2), 1));
    assert_eq!(stored_after(q, 0, 3), ((SECOND as u128, 0), 0));
}

#[derive(Default)]
struct Fixed {
    bytes: Vec<u8>,
}

impl Fixed {
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes).unwrap()
    }
}

impl Write for Fixed {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.bytes.len() + s.len() > 256 {
            return Err(fmt::Error);
        }
        self.bytes.extend_from_slice(s.as_bytes());
        Ok(())
    }
}
