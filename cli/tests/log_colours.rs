//! Log lines are plain text when stderr is not a terminal: `leakgate serve 2> serve.log` must
//! not fill the file with ANSI colour codes (it did: the log set-up coloured whatever stderr
//! was). A terminal still gets colours; that needs a pseudo-terminal, which this test does not
//! make.

mod common;

use common::leakgate;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
fn serve_logs_to_a_file_without_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "\"\" = \"10/s\"\n").unwrap();
    let log = dir.path().join("serve.log");
    let mut child = leakgate()
        .args(["serve", "--rules", rules.to_str().unwrap(), "--resp", "127.0.0.1:0"])
        .env("LEAKGATE_LOG", "info")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("the leakgate binary runs");
    // The listener is announced on stdout once the service runs, after its "serving" log line.
    let mut announced = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut announced).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(announced.starts_with("resp "), "announced {announced:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("serving"), "the info line is in the log: {text:?}");
    assert!(!text.contains('\u{1b}'), "no escape codes in a log file: {text:?}");
}
