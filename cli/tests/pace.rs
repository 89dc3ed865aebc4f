//! `leakgate pace` end to end, as a process: stdin to stdout, counts, exit codes. Real time is
//! only ever bounded, never timed exactly.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn leakgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_leakgate"))
}

fn pace(args: &[&str], input: &str) -> (Output, Duration) {
    let start = Instant::now();
    let mut child = leakgate()
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

fn stdout(out: &Output) -> &str {
    std::str::from_utf8(&out.stdout).unwrap()
}

fn stderr(out: &Output) -> &str {
    std::str::from_utf8(&out.stderr).unwrap()
}

#[test]
fn queue_mode_passes_every_line_in_order_at_the_rate() {
    let (out, elapsed) = pace(&["50/s"], &lines(6));
    assert!(out.status.success());
    assert_eq!(stdout(&out), lines(6));
    // Burst 1: six lines take at least five intervals of 20 ms (a lower bound, not a timing).
    assert!(elapsed >= Duration::from_millis(100), "{elapsed:?}");
    assert!(stderr(&out).contains("passed 6, dropped 0"), "{}", stderr(&out));
}

#[test]
fn without_a_terminal_stderr_gets_only_the_summary() {
    let (out, _) = pace(&["1000/s"], &lines(3));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with("leakgate pace (queue, 1000/s burst 1): passed 3, dropped 0"), "{err}");
    assert!(!err.contains('\r') && !err.contains('\x1b'), "no live line: {err:?}");
}

#[test]
fn each_line_is_flushed_as_it_goes() {
    let mut child = leakgate()
        .args(["pace", "1000/s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        tx.send(line).unwrap();
    });
    // stdin stays open: the line must come out before the input ends.
    stdin.write_all(b"first\n").unwrap();
    stdin.flush().unwrap();
    let line = rx.recv_timeout(Duration::from_secs(10)).expect("the line was flushed");
    assert_eq!(line, "first\n");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}

#[test]
fn meter_mode_drops_what_does_not_conform_without_waiting() {
    let (out, elapsed) = pace(&["2/h", "--burst", "2", "--drop"], &lines(5));
    assert!(out.status.success());
    assert_eq!(stdout(&out), lines(2));
    assert!(stderr(&out).contains("(meter, 2/h): passed 2, dropped 3"), "{}", stderr(&out));
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
}

#[test]
fn max_wait_drops_lines_that_would_wait_too_long() {
    let (out, _) = pace(&["1/h", "--max-wait", "1.5s"], &lines(3));
    assert!(out.status.success());
    assert_eq!(stdout(&out), lines(1));
    assert!(stderr(&out).contains("passed 1, dropped 2"), "{}", stderr(&out));
}

#[test]
fn max_wait_long_enough_drops_nothing() {
    let (out, _) = pace(&["100/s", "--max-wait=50ms"], &lines(4));
    assert_eq!(stdout(&out), lines(4));
    assert!(stderr(&out).contains("passed 4, dropped 0"), "{}", stderr(&out));
}

#[test]
fn a_burst_in_the_rate_string_is_kept() {
    let (out, elapsed) = pace(&["1/h burst 3"], &lines(3));
    assert!(out.status.success());
    assert_eq!(stdout(&out), lines(3));
    assert!(elapsed < Duration::from_secs(60), "three lines within the burst do not wait");
}

#[test]
fn empty_input_is_fine() {
    let (out, _) = pace(&["1/s"], "");
    assert!(out.status.success());
    assert!(stderr(&out).contains("passed 0, dropped 0"), "{}", stderr(&out));
}

#[test]
fn help_goes_to_stdout_and_exits_0() {
    let (out, _) = pace(&["--help"], "");
    assert!(out.status.success());
    assert!(stdout(&out).starts_with("usage: leakgate pace RATE"), "{}", stdout(&out));
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    for (args, says) in [
        (&["abc/s"][..], "bad RATE \"abc/s\""),
        (&["0/s"], "bad RATE \"0/s\""),
        (&["10/0s"], "bad RATE"),
        (&["10/fortnight"], "bad RATE"),
        (&["10/s", "--burst", "0"], "bad --burst 0"),
        (&["10/s", "--burst", "x"], "bad --burst \"x\""),
        (&["10/s", "--max-wait", "soon"], "bad duration \"soon\""),
        (&["10/s", "--max-wait"], "--max-wait needs a value"),
        (&["10/s", "--frobnicate"], "unknown option \"--frobnicate\""),
        (&["10/s", "20/s"], "unexpected argument \"20/s\""),
        (&[], "missing RATE"),
    ] {
        let (out, _) = pace(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = stderr(&out);
        assert!(err.starts_with(&format!("leakgate pace: {says}")), "{args:?}: {err}");
        assert!(err.contains("usage:"), "{args:?}: {err}");
    }
}

#[test]
fn unknown_command_exits_2() {
    let out = leakgate().arg("frob").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
