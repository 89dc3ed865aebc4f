//! `leakgate jobs work` and the commands it runs, as a user sees them: a killed worker's
//! commands die with it, a run past `--timeout` is stopped with its whole process group and
//! fails, a line per finished run, what `status` and `rules check` say about a jobs set-up.
//! Bounds only: how long a process takes to go is bounded generously, never measured.

mod common;

use common::{alive, leakgate, text, wait_bounded, worker};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn ok(args: &[&str]) -> String {
    let out = leakgate().args(args).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout).to_string()
}

fn add(db: &str, lane: &str, payload: &str) {
    let mut child = leakgate()
        .args(["jobs", "add", "--db", db, lane])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(payload.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
}

/// A command that writes its own pid and its child's (which ignore SIGTERM when `stubborn`),
/// then waits for ever.
fn long_command(dir: &Path, stubborn: bool) -> String {
    let trap = if stubborn { "trap '' TERM; " } else { "" };
    format!(
        "{trap}cat >/dev/null; sleep 300 & echo $! > '{dir}/child'; echo $$ > '{dir}/command'; wait",
        dir = dir.display()
    )
}

/// The pids `long_command` wrote, once it has written them.
fn pids(dir: &Path) -> [i32; 2] {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok()?.trim().parse().ok();
        if let (Some(command), Some(child)) = (read("command"), read("child")) {
            return [command, child];
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `bound` for every one of `pids` to be gone.
fn all_gone_within(pids: &[i32], bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while pids.iter().any(|&p| alive(p)) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Kills `pids` that are left (a failed test must not leave processes behind).
fn clean_up(pids: &[i32]) {
    use rustix::process::{kill_process, Pid, Signal};
    for pid in pids.iter().filter_map(|&p| Pid::from_raw(p)) {
        let _ = kill_process(pid, Signal::KILL);
    }
}

/// `kill -9` of a worker: its command and the command's children die with it (they ran on,
/// in their own process group, and a job longer than its lease then ran twice at once).
#[test]
fn a_killed_workers_command_and_its_children_die_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db").to_str().unwrap().to_string();
    add(&db, "long", "x");
    let mut w = worker(&db, &["--lease", "30s"], &long_command(dir.path(), true));
    let pids = pids(dir.path());
    w.kill().unwrap(); // SIGKILL
    w.wait().unwrap();
    // Well within the lease: the default --kill-after is 5 s (half the lease is longer).
    let gone = all_gone_within(&pids, Duration::from_secs(20));
    clean_up(&pids);
    assert!(gone, "the command or its child outlived the worker");
}

/// `--timeout`: a run past it is stopped with its whole process group (here one that ignores
/// SIGTERM, so SIGKILL after --kill-after), fails as "timed out after 1s", and is dead after
/// --max-attempts; the worker says so on a line of its own. SIGTERM to the worker meanwhile
/// does not wait past the timeout.
#[test]
fn a_run_past_its_timeout_is_stopped_with_its_group_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db").to_str().unwrap().to_string();
    add(&db, "hung", "x");
    let args = ["--timeout", "1s", "--kill-after", "500ms", "--max-attempts", "1"];
    let w = worker(&db, &args, &long_command(dir.path(), true));
    let pids = pids(dir.path());
    // Stopping the worker: it takes nothing new and waits for the run, until its timeout.
    std::process::Command::new("kill").args(["-TERM", &w.id().to_string()]).status().unwrap();
    let out = wait_bounded(w, Duration::from_secs(60));
    let gone = all_gone_within(&pids, Duration::from_secs(10));
    clean_up(&pids);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(gone, "the command's group outlived its timeout");
    let err = text(&out.stderr);
    assert!(err.contains("job 1 (hung, attempt 1) failed in "), "{err}");
    assert!(err.contains(": timed out after 1s"), "{err}");
    let dead = ok(&["jobs", "dead", "--db", &db]);
    assert!(dead.contains("timed out after 1s"), "{dead}");
}

/// A line per finished run (id, lane, attempt, outcome, time) on stderr, none with --quiet;
/// `status` explains its columns.
#[test]
fn a_line_per_finished_run_and_status_explains_its_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db").to_str().unwrap().to_string();
    add(&db, "mail", "ok");
    add(&db, "mail", "bad");
    let script = "[ \"$(cat)\" = ok ]";
    let args = ["--until-empty", "--max-attempts", "1"];
    let out = wait_bounded(worker(&db, &args, script), Duration::from_secs(60));
    let err = text(&out.stderr);
    assert!(err.contains("leakgate jobs work: job 1 (mail, attempt 1) done in "), "{err}");
    assert!(err.contains("job 2 (mail, attempt 1) failed in "), "{err}");
    assert!(err.contains(": exit status 1"), "{err}");
    add(&db, "mail", "ok");
    let quiet = ["--until-empty", "--quiet"];
    let out = wait_bounded(worker(&db, &quiet, script), Duration::from_secs(60));
    let err = text(&out.stderr);
    assert!(!err.contains("job 3"), "--quiet: {err}");
    assert!(err.contains("1 started, 1 done"), "the summary still: {err}");
    let status = ok(&["jobs", "status", "--db", &db]);
    assert!(status.contains("RUNS/MIN: runs started in the last\nminute / the most"), "{status}");
}

/// The README's jobs rules file passes `leakgate rules check` (it was refused: unknown option
/// "max_in_flight"); a bad jobs option is named as such.
#[test]
fn rules_check_knows_the_jobs_options() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "\"refunds\" = \"1/s\"\n\"refunds/bank-a\" = { quotas = [\"2/s\", \"3000/h\"], max_in_flight = 1, max_waiting = 100000 }\nmail = { max_in_flight = 4 }\n",
    )
    .unwrap();
    let out = ok(&["rules", "check", rules.to_str().unwrap()]);
    assert!(out.contains("2/s, 3000/h, max_in_flight 1, max_waiting 100000"), "{out}");
    assert!(out.contains("\"mail\"") && out.contains("not paced, max_in_flight 4"), "{out}");
    assert!(out.contains("options of leakgate jobs"), "{out}");
    std::fs::write(&rules, "a = { quota = \"1/s\", max_in_flight = 0 }\n").unwrap();
    let out = leakgate().args(["rules", "check", rules.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("max_in_flight must be a whole number"), "{:?}", out);
    std::fs::write(&rules, "a = { quota = \"1/s\", max_inflight = 2 }\n").unwrap();
    let out = leakgate().args(["rules", "check", rules.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("may also set max_in_flight and max_waiting"), "{:?}", out);
}
