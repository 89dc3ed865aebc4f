//! `leakgate rules check` and `leakgate rules explain` as a process: output and exit codes.

mod common;

use common::{leakgate, text};
use std::path::PathBuf;
use std::process::Output;

fn rules(args: &[&str]) -> Output {
    leakgate().arg("rules").args(args).output().expect("the binary runs")
}

/// A rules file in a fresh temp directory, removed with it.
struct RulesFile(PathBuf);

impl RulesFile {
    fn new(name: &str, text: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("leakgate-cli-rules-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rules.toml"), text).unwrap();
        RulesFile(dir)
    }

    fn arg(&self) -> String {
        self.0.join("rules.toml").to_str().unwrap().to_string()
    }
}

impl Drop for RulesFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const GOOD: &str = r#"
"" = "1000/s"
"rate_limit" = "1/s burst 10"
"rate_limit/192.168.11.3" = "100/s burst 500"
api = ["10/s", "1000/h"]
"api/beta" = { quota = "5/s", shadow = true, capacity = 10000 }
ip = { quota = "1/s", capacity = 100000, overflow = "shared 1000/s burst 50" }
"#;

#[test]
fn check_prints_the_resolved_rules() {
    let file = RulesFile::new("good", GOOD);
    let out = rules(&["check", &file.arg()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("6 rules"), "{stdout}");
    assert!(stdout.contains("\"rate_limit/192.168.11.3\"  100/s burst 500"), "{stdout}");
    assert!(stdout.contains("10/s, 1000/h"), "{stdout}");
    assert!(stdout.contains("5/s (shadow, capacity 10000)"), "{stdout}");
    assert!(stdout.contains("1/s (capacity 100000, overflow shared 1000/s burst 50)"), "{stdout}");
}

#[test]
fn check_warns_of_paths_no_ordinary_key_reaches() {
    // Accepted silently before: "a/" and "/x" match nothing a user expects.
    let file = RulesFile::new(
        "empty-segments",
        "\"a/\" = \"1/s\"\n\"/x\" = \"2/s\"\n\"b//c\" = \"3/s\"\n\"/\" = \"4/s\"\nok = \"5/s\"\n",
    );
    let out = rules(&["check", &file.arg()]);
    assert!(out.status.success(), "a warning, not an error: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("5 rules"), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 4, "one warning per suspicious path: {err}");
    for says in [
        "warning: rule \"a/\" ends with \"/\"",
        "a key such as \"a/1\" tries \"a/1\", \"a\", \"\" and never reaches it (did you mean \"a\"?)",
        "warning: rule \"/x\" starts with \"/\"",
        "did you mean \"x\"?",
        "warning: rule \"b//c\" has an empty segment",
        "did you mean \"b/c\"?",
        "warning: rule \"/\" ends with \"/\"",
        "did you mean the default rule \"\"?",
    ] {
        assert!(err.contains(says), "lacks {says:?}: {err}");
    }
    assert!(!err.contains("\"ok\""), "{err}");
    // A file without such paths warns of nothing.
    let file = RulesFile::new("no-warnings", GOOD);
    assert_eq!(text(&rules(&["check", &file.arg()]).stderr), "");
}

#[test]
fn check_refuses_a_bad_file_naming_the_line_rule_and_part() {
    let file = RulesFile::new("bad", "api = \"10/s\"\n\nweb = [\"5/s\", \"2/fortnight\"]\n");
    let out = rules(&["check", &file.arg()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("line 3: rule \"web\""), "{stderr}");
    assert!(stderr.contains("fortnight"), "{stderr}");
    assert!(text(&out.stdout).is_empty());
    let out = rules(&["check", "/nonexistent/leakgate/rules.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read"));
}

#[test]
fn explain_shows_the_rule_a_key_gets_and_the_paths_tried() {
    let file = RulesFile::new("explain", GOOD);
    let out = rules(&["explain", &file.arg(), "rate_limit/10.0.0.1"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("\"rate_limit/10.0.0.1\" -> rule \"rate_limit\": 1/s burst 10"),
        "{stdout}"
    );
    assert!(stdout.contains("tried \"rate_limit/10.0.0.1\": -"), "{stdout}");
    let out = rules(&["explain", &file.arg(), "web/index"]);
    assert!(text(&out.stdout).contains("-> rule \"\": 1000/s"));
    let file = RulesFile::new("nodefault", "api = \"1/s\"\n");
    let out = rules(&["explain", &file.arg(), "web/index"]);
    assert!(text(&out.stdout).contains("no rule: admitted and not tracked"));
}

#[test]
fn wrong_arguments_are_usage_errors_with_code_2_and_help_explains_the_format() {
    for (args, says) in [
        (&["explain", "only-a-file"][..], "<KEY>"),
        (&["check"], "<FILE>"),
        (&["lint", "x"], "unrecognized subcommand 'lint'"),
        (&[], "Usage: leakgate rules <COMMAND>"),
    ] {
        let out = rules(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains(says), "{args:?}: {}", text(&out.stderr));
    }
    let out = rules(&["--help"]);
    assert!(out.status.success());
    for says in ["check", "explain", "longest configured prefix", "shared 50/s", "Exit status"] {
        assert!(text(&out.stdout).contains(says), "rules --help lacks {says:?}");
    }
}
