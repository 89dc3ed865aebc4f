//! Running the `leakgate` binary as a process, for the end-to-end tests.

#![allow(dead_code)] // each test file uses its own part

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

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
    finish(spawn_pace(args), input)
}

/// Runs `leakgate ARGS` on `input` to the end, stdout and stderr piped.
pub fn run(args: &[&str], input: &[u8]) -> Output {
    let child = leakgate()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the leakgate binary runs");
    finish(child, input)
}

/// Writes `input` to `child`'s piped stdin and closes it, then waits for its output. A thread
/// writes, so a large input cannot dead-lock against a full stdout pipe.
fn finish(mut child: Child, input: &[u8]) -> Output {
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
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

/// A worker process: `leakgate jobs work --db DB EXTRA... -- sh -c SCRIPT`, stderr piped.
pub fn worker(db: &str, extra: &[&str], script: &str) -> Child {
    leakgate()
        .args(["jobs", "work", "--db", db])
        .args(extra)
        .args(["--", "sh", "-c", script])
        // Its folder of replies beside the database, so that a killed worker leaves none behind.
        .env("TMPDIR", tmpdir_for(db))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("a worker runs")
}

/// The temporary folder for a worker on `db`: the database file's folder; for PostgreSQL,
/// cargo's folder for integration tests, under target/, not /tmp.
pub fn tmpdir_for(db: &str) -> PathBuf {
    match Path::new(db).parent() {
        Some(dir) if !db.starts_with("postgres") => dir.to_path_buf(),
        _ => PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
    }
}

/// Waits for `child` to exit and returns its output; kills it and fails the test when it is
/// still running after `bound`.
pub fn wait_bounded(child: Child, bound: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(bound) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            panic!("the worker did not exit within {bound:?}");
        }
    }
}

/// Whether `pid` is a live process (a zombie waiting to be reaped by someone else is not).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}
