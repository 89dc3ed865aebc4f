//! Running the `leakgate` binary as a process, for the end-to-end tests.

#![allow(dead_code)] // each test file uses its own part

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};

/// The built `leakgate`, with its temporary files (a worker's folder of job replies, which one
/// killed with SIGKILL cannot remove) in cargo's folder for test files under target/, not /tmp.
pub fn leakgate() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_leakgate"));
    command.env("TMPDIR", env!("CARGO_TARGET_TMPDIR"));
    command
}

/// `leakgate pace ARGS` with stdin, stdout and stderr piped.
pub fn spawn_pace(args: &[&str]) -> Child {
    leakgate()
        .arg("pace")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the leakgate binary runs")
}

/// Runs `leakgate pace ARGS` on `input` to the end.
pub fn pace(args: &[&str], input: &[u8]) -> Output {
    let mut child = spawn_pace(args);
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // A thread writes, so a large input cannot dead-lock against a full stdout pipe.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

pub fn lines(range: std::ops::RangeInclusive<u32>) -> String {
    range.map(|i| format!("refund {i}\n")).collect()
}

pub fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

/// The one summary line pace prints on stderr (no live line: stderr is not a terminal).
pub fn summary(out: &Output) -> &str {
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one summary line, nothing else: {err:?}");
    assert!(err.starts_with("leakgate pace ("), "{err}");
    err
}
