//! `leakgate pace` end to end, as a process: what comes out, the summary, exit statuses, bytes.
//! Real time is only ever bounded, never timed exactly (see `pace_timing.rs` for the bounds).

mod common;

use common::{lines, pace, summary, text};
use std::time::{Duration, Instant};

#[test]
fn queue_mode_passes_every_line_in_order_and_prints_the_effective_quota() {
    let start = Instant::now();
    let out = pace(&["50/s"], lines(1..=6).as_bytes());
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), lines(1..=6));
    // Evenly spaced: six lines take at least five intervals of 20 ms, burst or not.
    assert!(start.elapsed() >= Duration::from_millis(100), "{:?}", start.elapsed());
    let summary = summary(&out);
    assert!(summary.starts_with("leakgate pace (queue, one line every 20ms, quota 50/s burst 50)"));
    assert!(summary.contains("passed 6, dropped 0"), "{summary}");
}

#[test]
fn the_burst_follows_the_library_rule_and_can_be_overridden() {
    let out = pace(&["1000/s"], b"x\n");
    assert!(summary(&out).contains("quota 1000/s burst 1000)"), "{}", summary(&out));
    let out = pace(&["1000/s", "--burst=1"], b"x\n");
    assert!(summary(&out).contains("quota 1000/s burst 1)"), "{}", summary(&out));
    let out = pace(&["1000/s burst 3"], b"x\n");
    assert!(summary(&out).contains("burst 3)"), "{}", summary(&out));
}

#[test]
fn every_line_passes_byte_for_byte() {
    // Invalid UTF-8, CRLF, NUL, an empty line and a last line without a newline.
    let input: &[u8] = b"plain\n\xff\xfe\xfd not utf-8\ncrlf\r\n\0nul\0\n\nno newline at the end";
    let out = pace(&["100000/s"], input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, input);
    assert!(summary(&out).contains("passed 6, dropped 0"), "{}", summary(&out));
}

#[test]
fn a_long_line_passes_whole() {
    let mut input = vec![b'x'; 1 << 20];
    input.push(b'\n');
    input.extend_from_slice(b"short\n");
    let out = pace(&["100000/s"], &input);
    assert!(out.status.success());
    assert_eq!(out.stdout, input);
}

#[test]
fn meter_mode_drops_what_does_not_conform_without_waiting() {
    let start = Instant::now();
    let out = pace(&["2/h", "--burst", "2", "--drop"], lines(1..=5).as_bytes());
    assert!(out.status.success(), "dropping on purpose is not a failure");
    assert_eq!(text(&out.stdout), lines(1..=2));
    let summary = summary(&out);
    assert!(summary.contains("(meter, quota 2/h burst 2): passed 2, dropped 3"), "{summary}");
    assert!(start.elapsed() < Duration::from_secs(30));
}

/// The rate in the closing line, if it gives one.
fn rate(summary: &str) -> Option<f64> {
    summary
        .trim_end()
        .split(", ")
        .find_map(|p| p.strip_suffix(" lines/s"))
        .map(|r| r.parse().unwrap())
}

#[test]
fn the_closing_line_gives_no_rate_for_a_handful_of_lines() {
    // The cases: 5/s --drop passing its burst at once read 1519 lines/s; 2 lines at
    // 1000/s read 207.01 lines/s, and 20 at 10/us 13571 lines/s (pace's start-up, not its pace).
    for (args, input) in [
        (&["5/s", "--drop"][..], lines(1..=20)),
        (&["1000/s"], lines(1..=2)),
        (&["10/us"], lines(1..=20)),
    ] {
        let out = pace(args, input.as_bytes());
        assert!(out.status.success());
        assert_eq!(rate(summary(&out)), None, "{args:?}: {}", summary(&out));
    }
}

#[test]
fn intervals_under_a_nanosecond_read_in_picoseconds() {
    // Was "one line every 0ns".
    let out = pace(&["100000000000/s"], lines(1..=3).as_bytes());
    assert!(summary(&out)
        .starts_with("leakgate pace (queue, one line every 10ps, quota 100000000000/s"));
    let out = pace(&["3/10ns"], lines(1..=3).as_bytes());
    assert!(summary(&out).contains("one line every 3.333ns"), "{}", summary(&out));
}

#[test]
fn the_closing_rate_over_a_long_enough_run_never_exceeds_the_limit() {
    // 150 lines at 100/s burst 50, all at once: 1.49 s, 100 lines/s, its burst not above it.
    let out = pace(&["100/s burst 50"], lines(1..=150).as_bytes());
    let summary = summary(&out);
    assert!(summary.contains("passed 150, dropped 0"), "{summary}");
    let rate = rate(summary).expect("150 lines over more than a second give a rate");
    assert!((50.0..=100.0).contains(&rate), "{summary}");
}

#[test]
fn max_wait_drops_lines_whose_place_is_too_far() {
    let out = pace(&["1/h", "--max-wait", "1.5s"], lines(1..=3).as_bytes());
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), lines(1..=1));
    assert!(summary(&out).contains("passed 1, dropped 2"), "{}", summary(&out));
}

#[test]
fn max_wait_counts_from_arrival_not_from_when_pace_gets_to_the_line() {
    // (seq 1 10; sleep 1; seq 11 20) | pace 5/s --max-wait 300ms: places 0 and 200 ms in the
    // first batch, 1.0 s and 1.2 s in the second; every other line would wait 400 ms or more.
    let mut child = common::spawn_pace(&["5/s", "--max-wait", "300ms"]);
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    stdin.write_all(lines(1..=10).as_bytes()).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    stdin.write_all(lines(11..=20).as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), [lines(1..=2), lines(11..=12)].concat());
    assert!(summary(&out).contains("passed 4, dropped 16"), "{}", summary(&out));
}

#[test]
fn max_wait_long_enough_drops_nothing() {
    let out = pace(&["100/s", "--max-wait=50ms"], lines(1..=4).as_bytes());
    assert_eq!(text(&out.stdout), lines(1..=4));
    assert!(summary(&out).contains("passed 4, dropped 0"), "{}", summary(&out));
}

#[test]
fn empty_input_is_fine() {
    let out = pace(&["1/s"], b"");
    assert!(out.status.success());
    assert!(summary(&out).contains("passed 0, dropped 0"), "{}", summary(&out));
}

#[test]
fn output_to_dev_null_is_delivered() {
    let out = common::leakgate()
        .args(["pace", "1000/s"])
        .stdin(std::fs::File::open("/dev/null").unwrap())
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}
