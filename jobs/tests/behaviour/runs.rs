//! A run's life through the worker loop, on the database's own clock: a job its own worker takes
//! back, a lane another session holds. Bounds only, never timings.

use crate::db::{Case, Db};
use leakgate::ManualClock;
use leakgate_jobs::{Jobs, LaneStatus, Outcome};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: a_job_its_own_worker_takes_back_runs_twice_and_ends_done);
cases!(POSTGRES_ONLY: a_lane_held_by_a_stalled_session_holds_up_no_other_lane);

/// A handle whose clock is an hour ahead: its claims take back every lease, as another worker's
/// do once a stopped worker's leases have run out.
async fn an_hour_later(db: &Db) -> Jobs {
    let clock = ManualClock::new();
    clock.set(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap());
    clock.advance(Duration::from_secs(3600));
    db.builder().caller_clock(clock).open().await.unwrap()
}

async fn lane(jobs: &Jobs, name: &str) -> LaneStatus {
    jobs.status().await.unwrap().into_iter().find(|l| l.lane == name).unwrap()
}

/// The reproducer `jobs_rerun_by_same_worker_cascades_to_dead.sh` as a library case: a worker's
/// first run of a job loses its lease (taken back by another handle), the same worker takes the
/// job again, and the first run then ends. The second run must stay renewed: the job runs twice
/// and ends done. (Runs were tracked by job id alone: the first run's end dropped the second
/// run's renewal, its lease ran out, and the job ran again and again until dead.)
async fn a_job_its_own_worker_takes_back_runs_twice_and_ends_done(db: Db) {
    let lease = Duration::from_secs(1);
    let jobs = db.builder().lease(lease).open().await.unwrap();
    let id = jobs.add("refunds", "refund-42").await.unwrap();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let worker = jobs.worker().concurrency(2).until_empty(true);
    let run = tokio::spawn({
        let (attempts, started, release) = (attempts.clone(), started.clone(), release.clone());
        worker.run(move |job| {
            let (attempts, started, release) = (attempts.clone(), started.clone(), release.clone());
            async move {
                attempts.lock().unwrap().push(job.attempt());
                started.notify_one();
                match job.attempt() {
                    1 => release.notified().await,
                    // Three leases long: it lives on renewals alone.
                    2 => tokio::time::sleep(lease * 3).await,
                    _ => {}
                }
                Outcome::Done
            }
        })
    });
    started.notified().await;
    assert_eq!(an_hour_later(&db).await.take(0).await.unwrap().len(), 0);
    started.notified().await; // the worker took the job again
    assert_eq!(*attempts.lock().unwrap(), [1, 2]);
    release.notify_one(); // the first run ends now, while the second goes on
    let summary = run.await.unwrap().unwrap();
    assert_eq!(*attempts.lock().unwrap(), [1, 2], "the job ran again after its second run");
    assert_eq!((summary.done, summary.lost, summary.dead), (1, 1, 0), "{summary:?}");
    let status = lane(&jobs, "refunds").await;
    assert_eq!((status.done, status.dead), (1, 0));
    let runs: Vec<(i64, u32)> =
        jobs.runs("refunds").await.unwrap().iter().map(|r| (r.job, r.attempt)).collect();
    assert_eq!(runs, [(id, 1), (id, 2)]);
}

/// The reproducer `pg_stalled_worker_freezes_fleet.sh` as a library case: a session that
/// holds a lane's row and stalls (a stopped worker's claim) must hold up nothing else. Lane b's
/// jobs all run while lane a is held; lane a's finished run waits to be recorded with its
/// lease kept renewed (no second run); once the session lets go, it is recorded.
/// (A claim used to wait for the lane's row: the whole worker stopped.)
async fn a_lane_held_by_a_stalled_session_holds_up_no_other_lane(db: Db) {
    let lease = Duration::from_secs(1);
    let jobs = db.builder().lease(lease).open().await.unwrap();
    jobs.add("a", "first").await.unwrap();
    for i in 0..20 {
        jobs.add("b", format!("{i}")).await.unwrap();
    }
    let (started_a, release_a) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let worker = jobs.worker().concurrency(2).until_empty(true);
    let progress = worker.progress();
    let run = tokio::spawn({
        let (started_a, release_a) = (started_a.clone(), release_a.clone());
        worker.run(move |job| {
            let (started_a, release_a) = (started_a.clone(), release_a.clone());
            async move {
                if job.lane() == "a" {
                    started_a.notify_one();
                    release_a.notified().await;
                }
                Outcome::Done
            }
        })
    });
    started_a.notified().await;
    let (mut stalled, connection) =
        tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(connection);
    let tx = stalled.transaction().await.unwrap();
    tx.execute("SELECT lane FROM lanes WHERE lane = 'a' FOR UPDATE", &[]).await.unwrap();
    release_a.notify_one(); // lane a's run ends while its lane is held
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while lane(&jobs, "b").await.done < 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "lane b stopped while lane a was held: {:?}",
            progress.snapshot()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Three leases more, lane a still held: its outcome waits, its lease renewed.
    tokio::time::sleep(lease * 3).await;
    let a = lane(&jobs, "a").await;
    assert_eq!((a.running, a.done), (1, 0), "recorded while its lane was held?");
    tx.rollback().await.unwrap();
    let summary = run.await.unwrap().unwrap();
    assert_eq!((summary.done, summary.started, summary.lost), (21, 21, 0), "{summary:?}");
    assert_eq!(jobs.runs("a").await.unwrap().len(), 1, "lane a's job ran once");
    drop(stalled);
    let _ = driver.await;
}
