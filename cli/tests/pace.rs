//! `leakgate pace` end to end, as a process: stdin to stdout, counts, exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn pace(args: &[&str], input: &str) -> (Output, Duration) {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_leakgate"))
        .arg("pace")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the leakgate binary runs");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out, start.elapsed())
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("refund {i}\n")).collect()
}

#[test]
fn queue_mode_passes_every_line_in_order_at_the_rate() {
    let (out, elapsed) = pace(&["50/s"], &lines(6));
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), lines(6));
    // Burst 1: six lines take at least five intervals of 20 ms (a lower bound, not a timing).
    assert!(elapsed >= Duration::from_millis(100), "{elapsed:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("passed 6, dropped 0"), "{stderr}");
}

#[test]
fn meter_mode_drops_what_does_not_conform() {
    let (out, _) = pace(&["2/h", "--burst", "2", "--drop"], &lines(5));
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), lines(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("passed 2, dropped 3"));
}

#[test]
fn max_wait_drops_lines_that_would_wait_too_long() {
    let (out, _) = pace(&["1/h", "--max-wait", "1s"], &lines(3));
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), lines(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("passed 1, dropped 2"));
}

#[test]
fn a_burst_in_the_rate_string_is_kept() {
    let (out, elapsed) = pace(&["1/h burst 3"], &lines(3));
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), lines(3));
    assert!(elapsed < Duration::from_secs(60), "three lines within the burst do not wait");
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    for args in [
        &["abc/s"][..],
        &["0/s"],
        &["10/s", "--burst", "0"],
        &["10/s", "--burst", "x"],
        &["10/s", "--max-wait", "soon"],
        &["10/s", "--frobnicate"],
        &["10/s", "20/s"],
        &[],
    ] {
        let (out, _) = pace(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.starts_with("leakgate pace: "), "{args:?}: {stderr}");
        assert!(stderr.contains("usage:"), "{args:?}: {stderr}");
    }
}

#[test]
fn unknown_command_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_leakgate")).arg("frob").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
