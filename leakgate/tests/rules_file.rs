//! Rules files: the parser never panics and points at a line of the text; a reload from a file
//! keeps the rules in force when the file is bad; the watcher reloads on change.
#![cfg(feature = "rules-file")]

use leakgate::{ManualClock, RuleLimiter, Rules, WatchEvent};
use proptest::prelude::*;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// A file in a fresh temp directory, removed with it.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("leakgate-rules-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = TempFile(dir.join("rules.toml"));
        file.write(text);
        file
    }

    fn write(&self, text: &str) {
        // Write beside and rename over, as editors and config managers do.
        let beside = self.0.with_extension("tmp");
        std::fs::write(&beside, text).unwrap();
        std::fs::rename(&beside, &self.0).unwrap();
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Pieces that make near-valid rules files.
fn piece() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "api",
        "\"rate_limit/1.2.3.4\"",
        "\"\"",
        " = ",
        "\"10/s\"",
        "\"5/min burst 2\"",
        "[",
        "]",
        "{",
        "}",
        ",",
        "quota",
        "quotas",
        "shadow",
        "true",
        "capacity",
        "0",
        "7",
        "overflow",
        "\"deny\"",
        "\"x/s\"",
        "\n",
        "#",
        "=",
        "\"",
        ".",
        "a.b",
        "'",
        "\"1/0s\"",
        "\"0/s\"",
        "3.5",
    ])
    .prop_map(str::to_string)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_parses_or_fails_at_a_line_of_it(text in ".{0,200}") {
        check_error_line(&text)?;
    }

    #[test]
    fn near_valid_files_parse_or_fail_at_a_line_of_them(
        pieces in prop::collection::vec(piece(), 0..40),
    ) {
        check_error_line(&pieces.concat())?;
    }
}

fn check_error_line(text: &str) -> Result<(), TestCaseError> {
    if let Err(e) = Rules::from_toml(text) {
        let lines = text.split('\n').count();
        let line = e.line().expect("an error in the text has a line");
        prop_assert!((1..=lines).contains(&line), "line {line} of {lines}: {e}");
        let prefix = format!("line {line}: ");
        prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
    }
    Ok(())
}

#[test]
fn a_bad_file_is_refused_and_the_rules_in_force_stay() {
    let file = TempFile::new("reload", "api = \"2/s\"\n");
    let lim = RuleLimiter::with_clock(Rules::from_file(&file.0).unwrap(), ManualClock::new());
    lim.check("api/a").unwrap();
    file.write("api = \"2/s\"\nweb = [\"1/s\", 5]\n");
    let e = lim.reload_file(&file.0).unwrap_err();
    assert_eq!((e.line(), e.rule()), (Some(2), Some("web")));
    assert_eq!(lim.check("api/a").unwrap().remaining(), 0, "the old rule and its level stay");
    assert!(lim.check("web/x").unwrap().remaining() == u64::MAX, "web never got a rule");
    file.write("api = \"4/s\"\n");
    assert_eq!(lim.reload_file(&file.0).unwrap(), 1);
    let denied = lim.check("api/a").unwrap_err();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(250)), "none was available");
}

#[test]
fn the_watcher_reloads_on_change_and_reports_a_bad_file() {
    let file = TempFile::new("watch", "api = \"1/s\"\n");
    let lim =
        Arc::new(RuleLimiter::with_clock(Rules::from_file(&file.0).unwrap(), ManualClock::new()));
    let (events, heard) = mpsc::channel();
    let watcher = lim.watch_file(&file.0, Duration::from_millis(5), move |event| {
        let _ = events.send(event);
    });
    let next = || heard.recv_timeout(Duration::from_secs(60)).expect("the watcher reports");
    file.write("api = \"1/s\"\nweb = \"5/s\"\n");
    assert_eq!(next(), WatchEvent::Reloaded(2));
    assert_eq!(lim.check("web/x").unwrap().remaining(), 4);
    file.write("api = \"1/s\"\nweb = \"5/s\"\nbad = \"5 per s\"\n");
    match next() {
        WatchEvent::Rejected(e) => assert_eq!((e.line(), e.rule()), (Some(3), Some("bad"))),
        other => panic!("{other:?}"),
    }
    assert_eq!(lim.check("web/x").unwrap().remaining(), 3, "the rules in force stay");
    drop(watcher);
    file.write("other = \"1/s\"\n");
    assert!(heard.recv_timeout(Duration::from_millis(50)).is_err(), "a dropped watcher is stopped");
}
