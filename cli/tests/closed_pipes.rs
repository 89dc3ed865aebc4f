//! No command panics when its stdout or stderr is a pipe whose reader has gone (Rust ignores
//! `SIGPIPE`, so every such write fails with `EPIPE`, and `println!`/`eprintln!` would panic with
//! exit status 101). Each command runs as a process with the pipe's read end closed before it
//! starts; the exit status is the one the command documents.

mod common;

use common::{leakgate, text};
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Which of stdout and stderr is a pipe with no reader.
#[derive(Clone, Copy, Debug)]
enum Closed {
    Stdout,
    Stderr,
    Both,
}

/// Runs `leakgate ARGS` on `input` with `closed` pipes whose reader has gone.
fn run(args: &[&str], input: &[u8], closed: Closed) -> Output {
    let gone = || {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        Stdio::from(writer)
    };
    let (stdout, stderr) = match closed {
        Closed::Stdout => (gone(), Stdio::piped()),
        Closed::Stderr => (Stdio::piped(), gone()),
        Closed::Both => (gone(), gone()),
    };
    let mut child =
        leakgate().args(args).stdin(Stdio::piped()).stdout(stdout).stderr(stderr).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Ignored: a command may end before reading its input.
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Writes a rules file `name` in `dir` (a temporary folder, removed with everything in it when
/// the test drops it, so that no test leaves files behind).
fn rules_file(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn rules_check_and_explain_keep_their_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let good = rules_file(&dir, "good.toml", "\"\" = \"10/s\"\napi = \"1/s\"\n");
    let bad = rules_file(&dir, "bad.toml", "api = \"1/fortnight\"\n");
    let good = good.to_str().unwrap();
    let bad = bad.to_str().unwrap();
    for closed in [Closed::Stdout, Closed::Stderr, Closed::Both] {
        for (args, code) in [
            (&["rules", "check", good][..], 0),
            (&["rules", "check", bad], 1),
            (&["rules", "explain", good, "api/x"], 0),
            (&["rules", "explain", bad, "api/x"], 1),
            (&["rules", "check", "/nonexistent/rules.toml"], 1),
        ] {
            let out = run(args, b"", closed);
            assert_eq!(out.status.code(), Some(code), "{args:?} {closed:?}: {}", text(&out.stderr));
        }
    }
}

#[test]
fn pace_delivers_or_says_it_did_not() {
    // stdout gone: nothing delivered, exit 1; stderr gone: delivered, exit 0.
    for (closed, code) in [(Closed::Stdout, 1), (Closed::Stderr, 0), (Closed::Both, 1)] {
        let out = run(&["pace", "1000/s"], b"a\nb\n", closed);
        assert_eq!(out.status.code(), Some(code), "{closed:?}: {}", text(&out.stderr));
    }
    // A usage error's message goes to a stderr nobody reads: still exit 2.
    let out = run(&["pace", "0/s"], b"", Closed::Both);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_and_bench_to_a_closed_stdout() {
    for closed in [Closed::Stdout, Closed::Both] {
        let out = run(&["pace", "--help"], b"", closed);
        assert_ne!(out.status.code(), Some(101), "{closed:?}");
        let out = run(&["bench", "--tail", "--checks=100", "--threads=1", "--json"], b"", closed);
        assert_eq!(out.status.code(), Some(0), "{closed:?}: {}", text(&out.stderr));
    }
}

/// Regression: `leakgate demo 4/s | head -1` ran its full 4.8 s and reported 20 passed. The
/// demo now stops at the first line it cannot deliver, closing pace's output behind it, and
/// exits 1 (lines not delivered) as pace does.
#[test]
fn demo_stops_when_its_reader_leaves() {
    // 2/s burst 1: the 20 lines would take 9.5 s; the second is due after 0.5 s.
    let start = Instant::now();
    let mut child = leakgate()
        .args(["demo", "2/s burst 1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout); // `head -1` has its line and leaves
    let out = child.wait_with_output().unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(6), "ran {took:?} after its reader left");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("leakgate demo: stdout was closed after 1 line; stopped"), "{err}");
    assert!(err.contains("not delivered: stdout was closed"), "pace's own summary: {err}");
    // And with no reader from the start, and no one reading stderr either: no panic.
    let out = run(&["demo", "1000/s"], b"", Closed::Both);
    assert_eq!(out.status.code(), Some(1));
    let out = run(&["demo", "1000/s"], b"", Closed::Stderr);
    assert_eq!(out.status.code(), Some(0));
}
