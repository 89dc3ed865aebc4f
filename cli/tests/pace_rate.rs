//! The rate `leakgate pace` achieves, measured from timestamps this test takes as lines arrive.
//!
//! A reader can only be late, never early: line `i` is seen at `t_i = s_0 + i*T + lateness_i`
//! with `lateness_i >= 0`. The smallest `t_i - i*T` over a window of lines is the schedule's
//! offset there, give or take the reader's best promptness in the window; comparing it at the
//! start and at the end gives the drift of the schedule, that is the achieved long-run rate,
//! without trusting any single timestamp on a loaded machine.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

/// Offsets `t_i - i*T` in seconds, for `lines` lines paced at `rate` per second.
fn offsets(rate: u32, lines: u32) -> Vec<f64> {
    let mut child = common::spawn_pace(&[&format!("{rate}/s")]);
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let input: String = (0..lines).map(|i| format!("{i}\n")).collect();
        stdin.write_all(input.as_bytes()).unwrap();
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let start = Instant::now();
    let interval = 1.0 / f64::from(rate);
    let mut offsets = Vec::with_capacity(lines as usize);
    let mut line = String::new();
    for i in 0..lines {
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, format!("{i}\n"));
        offsets.push(start.elapsed().as_secs_f64() - f64::from(i) * interval);
    }
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
    offsets
}

fn lowest(offsets: &[f64]) -> f64 {
    offsets.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Paces `lines` lines at `rate` and returns the achieved rate and the schedule's drift (s),
/// comparing the lowest offsets of `window` lines at each end.
fn achieved(rate: u32, lines: u32, window: usize) -> (f64, f64) {
    let offsets = offsets(rate, lines);
    let drift = lowest(&offsets[offsets.len() - window..]) - lowest(&offsets[..window]);
    let span = f64::from(lines - 1) / f64::from(rate);
    let achieved = f64::from(lines - 1) / (span + drift);
    eprintln!(
        "{rate}/s: achieved {achieved:.3} lines/s (drift {:+.3} ms over {span} s)",
        drift * 1e3
    );
    (achieved, drift)
}

#[test]
fn ten_thousand_per_second_holds_within_half_a_percent_over_two_seconds() {
    // Windows of 2,000 lines (200 ms) at each end.
    let (rate, drift) = achieved(10_000, 20_001, 2_000);
    // 0.5 % of 2 s is 10 ms: behind (too slow) or ahead (faster than the quota) alike.
    assert!(drift.abs() <= 0.005 * 2.0, "achieved {rate:.1}/s, drift {drift:.4} s");
}

/// The other rates of the issue: 1/s (burst 1: a late write is never made up, so any lateness
/// stays), 1,000/s and 100,000/s, each within 0.5 %. At 1/s the ends are windows of two lines,
/// so one line woken late by a loaded machine is not taken for drift.
#[test]
#[ignore]
fn one_thousand_and_a_hundred_thousand_per_second_hold_within_half_a_percent() {
    for (rate, lines, window, span) in
        [(1, 7, 2, 6.0), (1_000, 2_001, 200, 2.0), (100_000, 200_001, 20_000, 2.0)]
    {
        let (achieved, drift) = achieved(rate, lines, window);
        assert!(drift.abs() <= 0.005 * span, "{rate}/s: achieved {achieved:.3}/s");
    }
}

#[test]
fn lines_never_come_faster_than_the_rate_allows_from_a_standing_start() {
    // 200/s: 41 lines span 200 ms; with the library's rule the burst is 200, yet pace spaces a
    // backlog evenly, so the 41st line cannot come before 200 ms.
    let offsets = offsets(200, 41);
    let last = offsets[40] + 40.0 / 200.0;
    assert!(last >= 0.2 - 0.001, "line 41 after {last:.4} s");
    assert!(Duration::from_secs_f64(last) < Duration::from_secs(20));
}
