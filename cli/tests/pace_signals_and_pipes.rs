//! `leakgate pace` around closed pipes and signals: prompt, truthful exits with a summary.
//! Times here are upper bounds on how long pace may take to notice, never exact timings.

mod common;

use common::{lines, spawn_pace, summary, text};
use rustix::process::{kill_process, Pid, Signal};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Output, Stdio};
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

/// Regression (reproducer `cli_pace_stdout_devnull_rdwr.sh`): pace refused to run, "stdout is
/// closed", when stdout was /dev/null opened read-write, as Python's `subprocess.DEVNULL`,
/// systemd's `StandardOutput=null` and many supervisors open it. It now learns of a gone reader
/// from writing only, and /dev/null takes every line, at the pace asked for.
#[test]
fn stdout_on_dev_null_opened_read_write_is_paced_and_delivered() {
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").unwrap();
    let start = Instant::now();
    let mut child = common::leakgate()
        .args(["pace", "100/s burst 5"])
        .stdin(Stdio::piped())
        .stdout(null)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(lines(1..=21).as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(summary(&out).contains("passed 21, dropped 0"), "{}", summary(&out));
    // Paced, not refused at once: 21 lines evenly spaced take 20 intervals of 10 ms.
    assert!(start.elapsed() >= Duration::from_millis(200), "{:?}", start.elapsed());
    // A stdout closed before pace started (`>&-`) is given /dev/null, read-write, by the Rust
    // runtime: the same case, the same answer.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"printf 'a\nb\n' | "$0" pace 1000/s >&-"#)
        .arg(env!("CARGO_BIN_EXE_leakgate"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("passed 2, dropped 0"), "{}", text(&out.stderr));
}

/// Regression (reproducer `cli_pace_stderr_closed_pipe.sh`): the summary was written with
/// `eprintln!`, which panics (exit 101) when stderr is a pipe whose reader has gone. Every line
/// was delivered, so the exit status is 0.
#[test]
fn a_stderr_whose_reader_left_does_not_panic_pace() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = common::leakgate()
        .args(["pace", "1000/s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(writer)
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"a\nb\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"a\nb\n");
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
