//! `leakgate pace` around closed pipes and signals: prompt, truthful exits with a summary.
//! Times here are upper bounds on how long pace may take to notice, never exact timings.

mod common;

use common::{lines, spawn_pace, summary, text};
use rustix::process::{kill_process, Pid, Signal};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// Feeds `input` (leaving stdin open) and waits until the first line came out.
fn started(args: &[&str], input: &str) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = spawn_pace(args);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    // Keep stdin open: pace must stop for the pipe or the signal, not for the end of input.
    std::mem::forget(stdin);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first, "refund 1\n");
    (child, out)
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_stdout_ends_a_long_wait_within_100ms() {
    // seq 1 5 | leakgate pace 1/min | head -1: the next line's place is a minute away.
    let (child, out) = started(&["1/min"], &lines(1..=5));
    let closed = Instant::now();
    drop(out);
    let output = finish(child);
    let took = closed.elapsed();
    assert!(took < Duration::from_millis(100), "exited {took:?} after stdout closed");
    assert_eq!(output.status.code(), Some(1), "lines were not delivered");
    let summary = summary(&output);
    assert!(summary.contains("passed 1, dropped 0"), "{summary}");
    assert!(summary.ends_with("4 lines read but not delivered: stdout was closed\n"), "{summary}");
}

#[test]
fn head_in_a_shell_pipeline_does_not_hang() {
    let start = Instant::now();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"printf 'a\nb\nc\n' | "$0" pace 1/h | head -1"#)
        .arg(env!("CARGO_BIN_EXE_leakgate"))
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(20), "{:?}", start.elapsed());
    assert_eq!(text(&out.stdout), "a\n");
    assert!(
        text(&out.stderr).contains("not delivered: stdout was closed"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_stdout_closed_from_the_start_is_reported_not_swallowed() {
    // `leakgate pace 1/h >&-`: fd 1 closed at exec. Rust would give it /dev/null, and the lines
    // would look delivered.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"printf 'a\nb\n' | "$0" pace 1/h >&-"#)
        .arg(env!("CARGO_BIN_EXE_leakgate"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("passed 0") && err.contains("stdout is closed"), "{err}");
}

#[test]
fn sigint_prints_the_summary_and_exits_130() {
    let (child, out) = started(&["1/h"], &lines(1..=3));
    kill_process(Pid::from_child(&child), Signal::INT).unwrap();
    let output = finish(child);
    drop(out);
    assert_eq!(output.status.code(), Some(130));
    let summary = summary(&output);
    assert!(summary.contains("passed 1, dropped 0"), "{summary}");
    assert!(summary.ends_with("2 lines read but not delivered: stopped by SIGINT\n"), "{summary}");
}

#[test]
fn sigterm_prints_the_summary_and_exits_143() {
    let (child, out) = started(&["1/h"], &lines(1..=2));
    kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
    let output = finish(child);
    drop(out);
    assert_eq!(output.status.code(), Some(143));
    assert!(summary(&output).ends_with("1 line read but not delivered: stopped by SIGTERM\n"));
}

#[test]
fn each_line_is_written_as_it_goes() {
    let mut child = spawn_pace(&["1000/s"]);
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        tx.send(line).unwrap();
        out // kept open until pace has ended: a closed stdout would be an error
    });
    // stdin stays open: the line must come out before the input ends.
    stdin.write_all(b"first\n").unwrap();
    stdin.flush().unwrap();
    let line = rx.recv_timeout(Duration::from_secs(10)).expect("the line was written");
    assert_eq!(line, "first\n");
    drop(stdin);
    let out = reader.join().unwrap();
    assert!(child.wait().unwrap().success());
    drop(out);
}
