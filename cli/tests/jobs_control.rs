//! `leakgate jobs add --priority`, `cancel`, `pause` and `resume` as a user runs them, on a real
//! SQLite file: refusals say why, exit non-zero and write nothing; a cancelled running command is
//! stopped with its whole process group and not retried. Bounds only, never timings.

mod common;

use common::{alive, run, text, wait_bounded, worker};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

fn ok(args: &[&str], stdin: &str) -> String {
    let out = run(args, stdin.as_bytes());
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// A refusal: non-zero, with `why` on stderr.
fn refused(args: &[&str], why: &str) {
    let out = run(args, b"x");
    assert!(!out.status.success(), "{args:?} was accepted");
    assert!(text(&out.stderr).contains(why), "{args:?}: {}", text(&out.stderr));
}

fn status(db: &str) -> Value {
    serde_json::from_str(&ok(&["jobs", "status", "--db", db, "--json"], "")).unwrap()
}

fn db_in(dir: &Path) -> String {
    dir.join("jobs.db").to_str().unwrap().to_string()
}

#[test]
fn priorities_run_higher_first_and_bad_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    for bad in ["2147483648", "-1", "high", "1.5"] {
        refused(&["jobs", "add", "--db", &db, "mail", "--priority", bad], "priority");
    }
    assert!(!Path::new(&db).exists(), "a refused add wrote nothing");
    ok(&["jobs", "add", "--db", &db, "mail"], "low");
    ok(&["jobs", "add", "--db", &db, "mail", "--priority", "2147483647"], "top");
    ok(&["jobs", "add", "--db", &db, "mail", "--priority", "3", "--lines"], "mid1\nmid2\n");
    let log = dir.path().join("log");
    let script = format!("cat >> '{}'; echo >> '{}'", log.display(), log.display());
    let out = wait_bounded(worker(&db, &["--until-empty"], &script), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "top\nmid1\nmid2\nlow\n");
}

#[test]
fn cancel_waiting_and_running_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    let waiting = ok(&["jobs", "add", "--db", &db, "later", "--after", "1h"], "w");
    let long = ok(&["jobs", "add", "--db", &db, "long"], "l");
    refused(&["jobs", "cancel", "--db", &db, &waiting, "999"], "no job 999");
    assert_eq!(status(&db)["totals"]["cancelled"], 0, "a refused cancel wrote nothing");
    assert_eq!(ok(&["jobs", "cancel", "--db", &db, &waiting], ""), "1");
    // A running command and its child: stopped with their group when the job is cancelled.
    let script = format!(
        "cat >/dev/null; sleep 300 & echo $! > '{d}/child'; echo $$ > '{d}/command'; wait",
        d = dir.path().display()
    );
    let w = worker(&db, &["--lease", "900ms", "--until-empty", "--max-attempts", "5"], &script);
    let deadline = Instant::now() + Duration::from_secs(30);
    let read = |name: &str| {
        std::fs::read_to_string(dir.path().join(name)).ok()?.trim().parse::<i32>().ok()
    };
    let pids = loop {
        if let (Some(a), Some(b)) = (read("command"), read("child")) {
            break [a, b];
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(ok(&["jobs", "cancel", "--db", &db, &long], ""), "1");
    let out = wait_bounded(w, Duration::from_secs(60));
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        let _ = std::process::Command::new("kill").args(["-KILL", &p.to_string()]).status();
    }
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(left.is_empty(), "the cancelled command's group outlived it: {left:?}");
    assert!(text(&out.stderr).contains(&format!("job {long}: cancelled")), "{}", text(&out.stderr));
    let s = status(&db);
    assert_eq!(s["lanes"]["long"]["cancelled"], 1);
    assert_eq!(s["lanes"]["later"]["cancelled"], 1);
    assert_eq!((s["totals"]["waiting"].as_u64(), s["totals"]["dead"].as_u64()), (Some(0), Some(0)));
    assert_eq!(s["totals"]["cancelled"], 2);
    let runs = std::fs::read_to_string(dir.path().join("command")).unwrap();
    assert_eq!(runs.lines().count(), 1, "ran once, not retried");
}

#[test]
fn pause_and_resume_a_lane() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    ok(&["jobs", "add", "--db", &db, "mail"], "m");
    refused(&["jobs", "pause", "--db", &db, "mial"], "no job was ever added to lane \"mial\"");
    refused(&["jobs", "resume", "--db", &db, "mial"], "typo");
    ok(&["jobs", "pause", "--db", &db, "mail"], "");
    assert_eq!(status(&db)["lanes"]["mail"]["paused"], true);
    let table = ok(&["jobs", "status", "--db", &db], "");
    assert!(table.lines().any(|l| l.starts_with("mail") && l.contains("paused")), "{table}");
    let log = dir.path().join("log");
    let script = format!("cat >> '{}'", log.display());
    // A paused lane's job is not taken: the worker finds nothing to take, yet the queue is not
    // empty; it is stopped with SIGTERM after a while.
    let w = worker(&db, &[], &script);
    std::thread::sleep(Duration::from_millis(300));
    std::process::Command::new("kill").args(["-TERM", &w.id().to_string()]).status().unwrap();
    let out = wait_bounded(w, Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!log.exists(), "a paused lane's job ran");
    ok(&["jobs", "resume", "--db", &db, "mail"], "");
    assert_eq!(status(&db)["lanes"]["mail"]["paused"], false);
    let out = wait_bounded(worker(&db, &["--until-empty"], &script), Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "m");
}

#[test]
fn every_adds_jobs_on_its_ticks_and_is_listed_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    refused(&["jobs", "every", "--db", &db, "n", "--cron", "61 * * * *", "l"], "does not parse");
    refused(
        &["jobs", "every", "--db", &db, "n", "--cron", "* * * * *", "--zone", "Nowhere/Town", "l"],
        "Nowhere/Town",
    );
    refused(&["jobs", "every", "--db", &db, "n", "--interval", "10ms", "l"], "shorter");
    refused(&["jobs", "every", "--db", &db, "n", "l"], "--cron");
    assert!(!Path::new(&db).exists(), "a refused schedule wrote nothing");
    ok(&["jobs", "every", "--db", &db, "beat", "--interval", "1s", "pings"], "ping");
    ok(
        &[
            "jobs",
            "every",
            "--db",
            &db,
            "nightly",
            "--cron",
            "0 3 * * *",
            "--zone",
            "Europe/Paris",
            "reports",
            "--missed",
            "once",
        ],
        "r",
    );
    let listed = ok(&["jobs", "every", "--db", &db, "--list"], "");
    let lines: Vec<Value> = listed.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert_eq!(
        (lines[0]["name"].as_str(), lines[0]["interval_s"].as_f64()),
        (Some("beat"), Some(1.0))
    );
    assert_eq!(lines[1]["zone"], "Europe/Paris");
    assert_eq!(lines[1]["missed"], "once");
    let log = dir.path().join("log");
    let w = worker(&db, &[], &format!("cat >> '{}'; echo >> '{}'", log.display(), log.display()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&log).map_or(0, |t| t.lines().count()) < 2 {
        assert!(Instant::now() < deadline, "no two ticks within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::process::Command::new("kill").args(["-TERM", &w.id().to_string()]).status().unwrap();
    let out = wait_bounded(w, Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&log).unwrap().lines().all(|l| l == "ping"));
    ok(&["jobs", "every", "--db", &db, "--remove", "beat"], "");
    refused(&["jobs", "every", "--db", &db, "--remove", "beat"], "no schedule named \"beat\"");
    let listed = ok(&["jobs", "every", "--db", &db, "--list"], "");
    assert_eq!(listed.lines().count(), 1, "{listed}");
}

#[test]
fn a_command_replies_retry_after_or_slow_down() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    ok(&["jobs", "add", "--db", &db, "bank"], "later");
    ok(&["jobs", "add", "--db", &db, "api"], "slow");
    ok(&["jobs", "add", "--db", &db, "odd"], "garbage");
    // Each job's first run replies and fails; later runs succeed.
    let script = r#"p=$(cat); if [ "$LEAKGATE_JOB_ATTEMPT" = 1 ]; then
        case $p in later) echo 'retry-after 1h' > "$LEAKGATE_JOB_REPLY";;
                   slow) echo 'slow-down 1h' > "$LEAKGATE_JOB_REPLY";;
                   *) echo 'whenever' > "$LEAKGATE_JOB_REPLY";; esac; exit 1; fi"#;
    let args = ["--until-empty", "--backoff", "10ms", "--max-attempts", "2"];
    let w = worker(&db, &args, script);
    // The odd job is retried after the backoff and done; the others wait an hour: stop it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&db)["lanes"]["odd"]["done"] != 1 {
        assert!(Instant::now() < deadline, "the odd job was not retried");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::process::Command::new("kill").args(["-TERM", &w.id().to_string()]).status().unwrap();
    let out = wait_bounded(w, Duration::from_secs(30));
    let err = text(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("asked to be retried after 3600s"), "{err}");
    assert!(err.contains("the lane pauses 3600s"), "{err}");
    assert!(err.contains("exit status 1 (the reply \"whenever\" is neither"), "{err}");
    let s = status(&db);
    assert_eq!(s["lanes"]["bank"]["scheduled"], 1, "waits its hour, in the database");
    assert_eq!(s["lanes"]["api"]["ready"], 1);
    assert!(s["lanes"]["api"]["next_slot_in_s"].as_f64().unwrap() > 3000.0, "the lane pauses");
}

#[test]
fn a_bare_slow_down_reply_backs_an_adaptive_lane_off_and_done_jobs_bring_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "api = { quota = \"100/s burst 1\", adaptive = true }\n").unwrap();
    for payload in ["slow", "a", "b"] {
        ok(&["jobs", "add", "--db", &db, "api"], payload);
    }
    // The first job's first run says "slow down" (no pause) and fails; every other run is done.
    let script = r#"p=$(cat); if [ "$p" = slow ] && [ "$LEAKGATE_JOB_ATTEMPT" = 1 ]; then
        echo 'slow-down' > "$LEAKGATE_JOB_REPLY"; exit 1; fi"#;
    let rules = rules.to_str().unwrap();
    let args = ["--until-empty", "--concurrency", "1", "--rules", rules];
    let out = wait_bounded(worker(&db, &args, script), Duration::from_secs(60));
    let err = text(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("asked to slow down"), "{err}");
    let lane = &status(&db)["lanes"]["api"];
    assert_eq!(lane["done"], 3, "{lane}");
    assert_eq!(lane["rule_per_minute"], 6000.0);
    // 100/s halved to 50/s, then 3 done jobs at +5/s each: 65/s.
    assert_eq!(lane["pace_per_minute"], 3900.0, "{lane}");
}
