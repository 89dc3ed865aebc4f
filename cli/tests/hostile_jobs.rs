//! The shell reproducers of issue 24 on leakgate-jobs (`tests/hostile/*.sh`, each exits 0 once
//! its defect is fixed, 1 while it exists, 2 when its set-up failed), run against the built
//! `leakgate`, on SQLite and on a PostgreSQL server this test starts (and stops).
//!
//! The PostgreSQL runs take half a minute each and a server: they are `#[ignore]`d here and run
//! in CI's release stress step (`cargo test -- --ignored`). The library cases in
//! `jobs/tests/behaviour/runs.rs` pin the same defects in the default suite.

use leakgate_test_support::postgres;
use std::process::Command;

/// Runs `tests/hostile/SCRIPT` with `env`, and says what it printed when it did not exit 0.
fn reproducer(script: &str, env: &[(&str, &str)]) {
    let path = format!("{}/tests/hostile/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(&path)
        .arg(env!("CARGO_BIN_EXE_leakgate"))
        // Temporary files (the script's own, the workers' folders of job replies, which a worker
        // killed with SIGKILL cannot remove) under target/, not /tmp.
        .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    let said = format!(
        "{script}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(2), "the set-up failed: {said}");
    assert!(out.status.success(), "the defect is back: {said}");
}

/// A job its own worker takes back while its first run goes on runs twice and ends done (it
/// ran 5 times, every run exiting 0, and ended dead).
#[test]
fn jobs_rerun_by_same_worker_ends_done_on_sqlite() {
    reproducer("jobs_rerun_by_same_worker_cascades_to_dead.sh", &[]);
}

#[test]
#[ignore = "half a minute and a PostgreSQL server: CI's stress step"]
fn jobs_rerun_by_same_worker_ends_done_on_postgres() {
    let pg = postgres::Postgres::start();
    reproducer("jobs_rerun_by_same_worker_cascades_to_dead.sh", &[("DBURL", &pg.database())]);
}

/// One worker stopped inside a claim holds up no other worker (0 jobs of another lane in 20 s).
#[test]
#[ignore = "half a minute and a PostgreSQL server: CI's stress step"]
fn pg_stalled_worker_does_not_freeze_the_fleet() {
    let pg = postgres::Postgres::start();
    reproducer(
        "pg_stalled_worker_freezes_fleet.sh",
        &[("PGURL", &pg.database()), ("PGPASSWORD", postgres::PASSWORD)],
    );
}
