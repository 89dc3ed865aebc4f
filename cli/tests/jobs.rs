//! `leakgate jobs` as a user runs it: worker processes on a real SQLite file and a real
//! PostgreSQL server, killed with SIGKILL, stopped with SIGTERM; the contract's names, exit codes
//! and JSON; bad input. Pace bounds are measured from the jobs' own recorded start times (the
//! database's clock), never from how long a test took.

mod common;

use common::{leakgate, run, worker};
use leakgate_jobs::{Jobs, Run};
use leakgate_test_support::postgres;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(args: &[&str], stdin: &[u8]) -> String {
    let out = run(args, stdin);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn runs(db: &str, lane: &str) -> Vec<Run> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async { Jobs::open(db).await.unwrap().runs(lane).await.unwrap() })
}

/// Every window between two starts holds at most `burst + w / T` starts.
fn within_pace(starts: &[i64], burst: i64, t_ns: i64) {
    let mut s = starts.to_vec();
    s.sort();
    for i in 0..s.len() {
        for j in i..s.len() {
            let allowed = burst + (s[j] - s[i]) / t_ns;
            assert!(
                (j - i + 1) as i64 <= allowed,
                "{} starts within {} ns",
                j - i + 1,
                s[j] - s[i]
            );
        }
    }
}

/// The tests that measure a pace run one at a time: three of them at once would put nine
/// worker processes on a two-core machine, and the schedule, not the pacer, would decide the span.
static PACED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn paced_alone() -> std::sync::MutexGuard<'static, ()> {
    PACED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sqlite_db(dir: &Path) -> String {
    dir.join("jobs.db").to_str().unwrap().to_string()
}

/// Three worker processes pace one lane at 20/s burst 1: 60 jobs, each once, in order, within
/// the pace in every window, the span never shorter than the ideal.
fn three_processes_pace_one_lane(db: &str) {
    let _alone = paced_alone();
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "refunds = \"20/s burst 1\"\n").unwrap();
    let lines: String = (1..=60).map(|i| format!("refund {i}\n")).collect();
    assert_eq!(
        ok(&["jobs", "add", "--db", db, "refunds/bank-a", "--lines"], lines.as_bytes()).trim(),
        "60"
    );
    let rules = rules.to_str().unwrap();
    // Each command notes its job and its real start (this machine's real-time clock, which both
    // databases' clocks are here): claimed up to --claim-ahead (default 40 ms) before its slot,
    // it must not start before its recorded start.
    let real = dir.path().join("real-starts");
    let script =
        format!("cat >/dev/null; echo \"$LEAKGATE_JOB_ID $(date +%s%N)\" >> '{}'", real.display());
    let workers: Vec<Child> = (0..3)
        .map(|_| worker(db, &["--rules", rules, "--concurrency", "2", "--until-empty"], &script))
        .collect();
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let runs = runs(db, "refunds/bank-a");
    assert_eq!(runs.len(), 60, "every job ran once");
    assert!(runs.windows(2).all(|w| w[0].job < w[1].job), "in the order added");
    let starts: Vec<i64> = runs.iter().map(|r| r.started_ns).collect();
    within_pace(&starts, 1, 50_000_000);
    let real = std::fs::read_to_string(&real).unwrap();
    assert_eq!(real.lines().count(), 60, "{real}");
    for line in real.lines() {
        let (id, at) = line.split_once(' ').unwrap();
        let (id, at): (i64, i64) = (id.parse().unwrap(), at.parse().unwrap());
        let recorded = runs.iter().find(|r| r.job == id).unwrap().started_ns;
        assert!(at >= recorded, "job {id} started {} ns before its slot", recorded - at);
    }
    let (span, ideal) = (starts[59] - starts[0], 59 * 50_000_000);
    eprintln!(
        "span {:.3} s, ideal {:.3} s (+{:.1}%)",
        span as f64 / 1e9,
        ideal as f64 / 1e9,
        (span - ideal) as f64 / ideal as f64 * 100.0
    );
    assert!(span >= ideal);
    // With burst 1 a start that is late moves every later slot: the span is the ideal plus the
    // sum of the lateness, a few percent on a quiet machine. That is a timing, not a behaviour,
    // so it is printed above and measured by `cargo bench -p leakgate-jobs --bench global_limit`,
    // not asserted: on a loaded 2-core machine it passed 30% (a flake in the suite, stop 31).
}

#[test]
fn three_worker_processes_pace_one_lane_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    three_processes_pace_one_lane(&sqlite_db(dir.path()));
}

#[test]
fn three_worker_processes_pace_one_lane_on_postgres() {
    let pg = postgres::Postgres::start();
    three_processes_pace_one_lane(&pg.database());
    // A wrong password is said as such.
    let url = format!("postgres://postgres:wrong@127.0.0.1:{}/postgres", pg.port());
    let out = run(&["jobs", "status", "--db", &url], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("password authentication failed"), "{}", text(&out.stderr));
}

/// One worker of three is killed with SIGKILL four times mid-job and started again: no job is
/// lost, only jobs in flight at a kill run twice, and the pace holds across kills and restarts.
#[test]
fn kill_9_repeatedly() {
    let _alone = paced_alone();
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "bank = \"20/s burst 2\"\n").unwrap();
    let rules = rules.to_str().unwrap();
    let lines: String = (1..=40).map(|i| format!("{i}\n")).collect();
    ok(&["jobs", "add", "--db", &db, "bank", "--lines"], lines.as_bytes());
    let args = ["--rules", rules, "--lease", "700ms", "--until-empty", "--max-attempts", "100"];
    let script = "cat >/dev/null; sleep 0.15";
    let mut others: Vec<Child> = (0..2).map(|_| worker(&db, &args, script)).collect();
    let mut victim = worker(&db, &args, script);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(400));
        victim.kill().unwrap(); // SIGKILL, mid-job: it takes a job every 50 ms and holds it 150 ms
        victim.wait().unwrap();
        victim = worker(&db, &args, script);
    }
    for w in others.drain(..).chain([victim]) {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let status = ok(&["jobs", "status", "--db", &db, "--json"], b"");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let lane = &status["lanes"]["bank"];
    assert_eq!(
        (lane["done"].as_u64(), lane["dead"].as_u64(), lane["waiting"].as_u64()),
        (Some(40), Some(0), Some(0))
    );
    let runs = runs(&db, "bank");
    let repeated = runs.iter().filter(|r| r.attempt > 1).count();
    assert!(
        repeated <= 4,
        "{repeated} runs repeated: at most one job was in flight in the victim at each kill"
    );
    let starts: Vec<i64> = runs.iter().map(|r| r.started_ns).collect();
    within_pace(&starts, 2, 50_000_000);
}

/// SIGTERM: the worker takes no new job, lets the running one finish, and exits 0.
#[test]
fn sigterm_lets_the_running_job_finish() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    ok(&["jobs", "add", "--db", &db, "slow", "--lines"], b"1\n2\n3\n");
    let marker = dir.path().join("finished");
    let script = format!(
        "touch '{}.started'; sleep 0.6; echo $LEAKGATE_JOB_ID >> '{}'",
        marker.display(),
        marker.display()
    );
    let w = worker(&db, &[], &script);
    let started = dir.path().join("finished.started");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the first job never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    Command::new("kill").args(["-TERM", &w.id().to_string()]).status().unwrap();
    let out = w.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), "1", "the running job finished");
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["jobs", "status", "--db", &db, "--json"], b"")).unwrap();
    assert_eq!(
        (status["lanes"]["slow"]["done"].as_u64(), status["lanes"]["slow"]["waiting"].as_u64()),
        (Some(1), Some(2))
    );
}

/// The contract's names: add prints ids and counts, keys, --after, status --json, the command's
/// environment and stdin, failures and dead jobs, requeue, purge, slow-down exit codes.
#[test]
fn add_work_status_dead_requeue_purge() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    let a: i64 = ok(&["jobs", "add", "--db", &db, "mail/x", "--key", "k1"], b"payload one")
        .trim()
        .parse()
        .unwrap();
    let b: i64 = ok(&["jobs", "add", "--db", &db, "mail/y", "--key", "k1"], b"other")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(a, b, "the same key: nothing added, the stored id printed");
    assert_eq!(ok(&["jobs", "add", "--db", &db, "bad", "--lines"], b"x\r\ny\n\nz").trim(), "4");
    let log = dir.path().join("log");
    let script = format!(
        "printf '%s|%s|%s|%s\\n' \"$LEAKGATE_JOB_ID\" \"$LEAKGATE_JOB_LANE\" \"$LEAKGATE_JOB_ATTEMPT\" \"$(cat)\" >> '{}'; \
         [ \"$LEAKGATE_JOB_LANE\" != bad ]",
        log.display()
    );
    let out = worker(&db, &["--max-attempts", "2", "--backoff", "10ms", "--until-empty"], &script)
        .wait_with_output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    ok(&["jobs", "add", "--db", &db, "mail/x", "--after", "1h"], b"later");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains(&format!("{a}|mail/x|1|payload one")), "{logged}");
    assert!(logged.contains("|bad|2|x"), "retried with attempt 2: {logged}");
    assert!(
        logged.contains("|bad|1|\n") || logged.contains("|bad|2|\n"),
        "an empty line is an empty payload: {logged}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["jobs", "status", "--db", &db, "--json"], b"")).unwrap();
    assert_eq!(status["lanes"]["bad"]["dead"].as_u64(), Some(4));
    assert_eq!(status["lanes"]["mail/x"]["waiting"].as_u64(), Some(1), "--after: still waiting");
    assert_eq!(status["lanes"]["mail/x"]["running"].as_u64(), Some(0));
    let dead = ok(&["jobs", "dead", "--db", &db, "bad"], b"");
    assert_eq!(dead.lines().count(), 4, "{dead}");
    assert!(dead.contains("exit status 1"), "{dead}");
    assert_eq!(ok(&["jobs", "requeue", "--db", &db, "--all"], b"").trim(), "4");
    assert_eq!(ok(&["jobs", "purge", "--db", &db, "--older-than", "1h"], b"").trim(), "0");
    assert!(ok(&["jobs", "status", "--db", &db], b"").contains("mail/x"));
}

/// An exit code that means "slow down": the job runs again, not as a failure, after the pause.
#[test]
fn slow_down_exit_code_pauses_the_lane() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    ok(&["jobs", "add", "--db", &db, "bank"], b"refund");
    let args = [
        "--slow-down-exit",
        "75",
        "--slow-down-pause",
        "300ms",
        "--max-attempts",
        "1",
        "--until-empty",
    ];
    let out = worker(&db, &args, "[ \"$LEAKGATE_JOB_ATTEMPT\" -ge 2 ] || exit 75")
        .wait_with_output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let runs = runs(&db, "bank");
    assert_eq!(runs.len(), 2);
    assert!(runs[1].started_ns - runs[0].started_ns >= 300_000_000, "{runs:?}");
    assert!(
        text(&out.stderr).contains("1 done, 0 failed, 0 dead, 1 slowed down"),
        "{}",
        text(&out.stderr)
    );
}

/// Bad input: a clear message and a non-zero exit, never a panic or a hang; nothing stored lost.
#[test]
fn bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    ok(&["jobs", "add", "--db", &db, "kept"], b"precious");
    let check = |args: &[&str], stdin: &[u8], code: i32, says: &str| {
        let out = run(args, stdin);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    };
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a database\n".repeat(200)).unwrap();
    let notes = notes.to_str().unwrap();
    check(&["jobs", "add", "--db", notes, "x"], b"y", 1, "not a leakgate jobs database");
    check(&["jobs", "status", "--db", notes], b"", 1, "not a leakgate jobs database");
    assert_eq!(std::fs::read_to_string(notes).unwrap(), "not a database\n".repeat(200));
    check(&["jobs", "add", "--db", &db, "x", "--after", "soon"], b"", 2, "not a duration");
    check(&["jobs", "add", "--db", &db, ""], b"x", 1, "bad lane");
    check(
        &["jobs", "add", "--db", &db, "x", "--lines", "--key", "k"],
        b"",
        2,
        "cannot be used with",
    );
    check(
        &["jobs", "add", "--db", "/nonexistent/dir/jobs.db", "x"],
        b"y",
        1,
        "/nonexistent/dir/jobs.db",
    );
    let huge = vec![b'x'; leakgate_jobs::MAX_PAYLOAD + 1];
    check(&["jobs", "add", "--db", &db, "x"], &huge, 1, "larger than the limit");
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "bank = \"3/fortnight\"\n").unwrap();
    check(
        &["jobs", "work", "--db", &db, "--rules", rules.to_str().unwrap(), "--", "true"],
        b"",
        1,
        "fortnight",
    );
    check(&["jobs", "work", "--db", &db, "--", "/no/such/program"], b"", 1, "no such executable");
    check(
        &["jobs", "work", "--db", &db, "--lease", "1.2.3s", "--", "true"],
        b"",
        2,
        "not a duration",
    );
    check(&["jobs", "work", "--db", &db], b"", 2, "COMMAND");
    check(
        &["jobs", "work", "--db", &db, "--lease", "1s", "--claim-ahead", "1s", "--", "true"],
        b"",
        1,
        "--claim-ahead must be less than --lease",
    );
    check(
        &["jobs", "work", "--db", &db, "--claim-ahead", "5 bananas", "--", "true"],
        b"",
        2,
        "not a duration",
    );
    let port = leakgate_test_support::free_port();
    let unreachable = format!("postgres://u:p@127.0.0.1:{port}/db");
    check(&["jobs", "status", "--db", &unreachable], b"", 1, "cannot connect to PostgreSQL");
    check(&["jobs", "status", "--db", "postgres://u:secret@[nope/db"], b"", 1, "cannot connect");
    {
        use std::os::unix::ffi::OsStrExt;
        let lane = std::ffi::OsStr::from_bytes(b"bad\xfflane");
        let out = leakgate()
            .args(["jobs", "add", "--db", &db])
            .arg(lane)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("not UTF-8"), "{}", text(&out.stderr));
    }
    // Payloads are bytes: non-UTF-8 is fine.
    ok(&["jobs", "add", "--db", &db, "bytes"], b"\xff\xfe\x00binary");
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["jobs", "status", "--db", &db, "--json"], b"")).unwrap();
    assert_eq!(status["lanes"]["kept"]["waiting"].as_u64(), Some(1), "nothing stored was lost");
    assert_eq!(status["lanes"]["bytes"]["waiting"].as_u64(), Some(1));
}

/// `leakgate jobs demo` (the README's first command) leaves nothing in the temporary folder:
/// its database and rules go with its folder, and so does the folder of job replies of the
/// worker it kills with SIGKILL (which cannot remove its own; it stayed in /tmp before).
#[test]
fn the_demo_leaves_nothing_in_the_temporary_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let out = leakgate().args(["jobs", "demo"]).env("TMPDIR", tmp.path()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("nothing lost"), "{}", text(&out.stdout));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
