//! The pacing decisions on a manual clock: spacing, catch-up within the burst, --max-wait from
//! arrival, meter mode, and the bounded queue.

use super::*;
use leakgate::ManualClock;

const MS: Duration = Duration::from_millis(1);

fn schedule(quota: &str, mode: Mode) -> (Schedule<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (Schedule::new(quota.parse().unwrap(), mode, clock.clone()), clock)
}

fn unbounded() -> Mode {
    Mode::Queue { max_wait: Duration::MAX }
}

/// Pops every due line, returning their bytes as strings.
fn due(s: &mut Schedule<ManualClock>) -> Vec<String> {
    std::iter::from_fn(|| s.pop_due()).map(|l| String::from_utf8(l.bytes).unwrap()).collect()
}

fn arrive(s: &mut Schedule<ManualClock>, lines: std::ops::Range<u32>) -> Vec<Arrival> {
    lines.map(|i| s.arrive(format!("{i}\n").into_bytes())).collect()
}

#[test]
fn a_backlog_leaves_one_interval_apart() {
    let (mut s, clock) = schedule("10/s", unbounded());
    arrive(&mut s, 0..5);
    assert_eq!(due(&mut s), ["0\n"]);
    assert_eq!(s.next_ready(), Some(100_000_000));
    clock.advance(99 * MS);
    assert!(due(&mut s).is_empty(), "not before its place");
    clock.advance(MS);
    assert_eq!(due(&mut s), ["1\n"]);
    clock.advance(100 * MS);
    assert_eq!(due(&mut s), ["2\n"]);
}

#[test]
fn a_late_writer_catches_up_within_the_burst_and_keeps_the_long_run_rate() {
    // 10/s, burst 10 by the quota rule. Nothing is written for 550 ms, then the writer returns.
    let (mut s, clock) = schedule("10/s", unbounded());
    arrive(&mut s, 0..40);
    clock.advance(550 * MS);
    assert_eq!(due(&mut s).len(), 6, "places 0 to 500 ms have come: all go now");
    // From then on, one on each place: at 3.85 s exactly the 39 places up to 3.8 s were served.
    let mut written = 6;
    while clock.now() < Duration::from_millis(3850) {
        clock.advance(MS);
        written += due(&mut s).len();
    }
    assert_eq!(written, 39, "none lost to the late start");
}

#[test]
fn catching_up_never_sends_more_at_once_than_the_burst() {
    let (mut s, clock) = schedule("10/s burst 4", unbounded());
    arrive(&mut s, 0..40);
    clock.advance(Duration::from_secs(2)); // 21 places have come
    assert_eq!(due(&mut s).len(), 4, "the burst");
    assert_eq!(s.next_ready(), Some(2_100_000_000), "then one interval apart");
    clock.advance(100 * MS);
    assert_eq!(due(&mut s).len(), 1);
}

#[test]
fn with_burst_1_no_line_ever_follows_another_by_less_than_the_interval() {
    let (mut s, clock) = schedule("10/s burst 1", unbounded());
    arrive(&mut s, 0..10);
    clock.advance(350 * MS); // late: the quota allows no catch-up
    assert_eq!(due(&mut s).len(), 1);
    let mut last = clock.now();
    let mut gaps = Vec::new();
    for _ in 0..2000 {
        clock.advance(MS);
        for _ in due(&mut s) {
            gaps.push(clock.now() - last);
            last = clock.now();
        }
    }
    assert_eq!(gaps.len(), 9);
    assert!(gaps.iter().all(|&g| g == 100 * MS), "{gaps:?}");
}

#[test]
fn max_wait_counts_from_arrival() {
    // The case: (seq 1 10; sleep 1; seq 11 20) | pace 5/s --max-wait 300ms.
    let (mut s, clock) = schedule("5/s", Mode::Queue { max_wait: 300 * MS });
    let first = arrive(&mut s, 1..11);
    assert_eq!(first.iter().filter(|a| **a == Arrival::Queued).count(), 2, "places 0 and 200 ms");
    assert_eq!(first[2..], [Arrival::Dropped; 8]);
    let mut passed = due(&mut s);
    clock.set(Duration::from_secs(1));
    let second = arrive(&mut s, 11..21);
    assert_eq!(second.iter().filter(|a| **a == Arrival::Queued).count(), 2);
    for _ in 0..2000 {
        clock.advance(MS);
        passed.extend(due(&mut s));
    }
    assert_eq!(passed, ["1\n", "2\n", "11\n", "12\n"]);
}

#[test]
fn meter_mode_passes_what_conforms_on_arrival() {
    let (mut s, clock) = schedule("2/h burst 2", Mode::Meter);
    let got = arrive(&mut s, 0..5);
    assert_eq!(
        got,
        [Arrival::Queued, Arrival::Queued, Arrival::Dropped, Arrival::Dropped, Arrival::Dropped]
    );
    assert_eq!(due(&mut s), ["0\n", "1\n"], "passed lines go at once");
    clock.advance(Duration::from_secs(1800));
    assert_eq!(arrive(&mut s, 5..7), [Arrival::Queued, Arrival::Dropped]);
}

#[test]
fn the_queue_is_bounded() {
    let (mut s, _clock) = schedule("1/h", unbounded());
    assert_eq!(s.max_lines(), MIN_QUEUED_LINES);
    let mut n = 0;
    while s.has_room() {
        s.arrive(b"x\n".to_vec());
        n += 1;
    }
    assert_eq!(n, MIN_QUEUED_LINES);
    let (mut s, _clock) = schedule("1/h", unbounded());
    s.arrive(vec![b'y'; MAX_QUEUED_BYTES]);
    assert!(!s.has_room(), "bounded in bytes too");
    // With --max-wait, room for every line that can be waiting.
    let (s, _clock) = schedule("100000/s", Mode::Queue { max_wait: Duration::from_secs(10) });
    assert_eq!(s.max_lines(), 1_000_002);
}

#[test]
fn bytes_are_kept_exactly() {
    let (mut s, _clock) = schedule("1000/s", unbounded());
    for line in [&b"\xff\xfe\n"[..], b"crlf\r\n", b"no newline"] {
        s.arrive(line.to_vec());
    }
    let first = s.pop_due().unwrap();
    assert_eq!(first.bytes, b"\xff\xfe\n");
}
