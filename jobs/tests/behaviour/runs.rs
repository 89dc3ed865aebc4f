//! A run's life through the worker loop, on the database's own clock: a job its own worker takes
//! back, a lane another session holds, runs past their timeout. Bounds only, never timings.

use crate::db::{Case, Db};
use leakgate::ManualClock;
use leakgate_jobs::{Jobs, LaneStatus, Outcome};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: a_job_its_own_worker_takes_back_runs_twice_and_ends_done, recent_runs_are_the_latest_of_a_lane,
    a_run_past_its_timeout_is_stopped_and_fails, a_stopping_worker_waits_for_a_hung_run_only_until_its_timeout);
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

/// `recent_runs(lane, n)` is the last `n` of `runs(lane)`, in the same order, and only that
/// lane's (what the dashboard charts without reading a lane's whole history).
async fn recent_runs_are_the_latest_of_a_lane(db: Db) {
    let jobs = db.builder().open().await.unwrap();
    for i in 0..5 {
        jobs.add("mail", format!("m{i}")).await.unwrap();
        jobs.add("sms", format!("s{i}")).await.unwrap();
    }
    for job in jobs.take(3).await.unwrap() {
        jobs.fail(&job, "again").await.unwrap();
    }
    let _ = jobs.take(10).await.unwrap();
    let all = jobs.runs("mail").await.unwrap();
    assert!(all.len() >= 5, "{all:?}");
    for n in [0, 1, 3, all.len(), all.len() + 10] {
        let recent = jobs.recent_runs("mail", n).await.unwrap();
        assert_eq!(recent, all[all.len().saturating_sub(n)..], "the last {n}");
    }
    assert!(jobs.recent_runs("no-such-lane", 10).await.unwrap().is_empty());
    assert_eq!(jobs.recent_runs("mail", usize::MAX).await.unwrap(), all);
}

/// Counts drops: a handler future that holds one was stopped (or ended).
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// `timeout`: a hung handler is dropped after the grace, a handler that winds down by its
/// job's deadline has its outcome overruled; both are failed attempts "timed out after ...",
/// and dead after `max_attempts`. A quick run is untouched.
async fn a_run_past_its_timeout_is_stopped_and_fails(db: Db) {
    let jobs =
        db.builder().max_attempts(2).backoff(Duration::from_millis(10)).open().await.unwrap();
    for payload in ["hung", "winds-down", "quick"] {
        jobs.add("work", payload).await.unwrap();
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let timeout = Duration::from_millis(300);
    let worker = jobs
        .worker()
        .concurrency(3)
        .until_empty(true)
        .timeout(Some(timeout))
        .stop_grace(Duration::from_millis(200));
    let summary = worker
        .run({
            let dropped = dropped.clone();
            move |job| {
                let guard = Dropped(dropped.clone());
                async move {
                    let deadline = job.deadline().expect("a worker with a timeout sets it");
                    match job.payload() {
                        b"hung" => std::future::pending::<()>().await,
                        // Told by the deadline, it ends within the grace: too late all the same.
                        b"winds-down" => {
                            let late = deadline + Duration::from_millis(50);
                            tokio::time::sleep_until(late.into()).await
                        }
                        _ => {}
                    }
                    drop(guard);
                    Outcome::Done
                }
            }
        })
        .await
        .unwrap();
    assert_eq!((summary.done, summary.failed, summary.dead), (1, 4, 2), "{summary:?}");
    assert_eq!(dropped.load(Ordering::SeqCst), 1 + 2 + 2, "every handler future dropped");
    let dead = jobs.dead(None, 10).await.unwrap();
    assert_eq!(dead.len(), 2);
    for job in dead {
        assert_eq!(job.error, "timed out after 300ms", "{:?}", job.payload);
        assert_eq!(job.attempts, 2);
    }
}

/// A stop while a run hangs: the worker takes nothing new and returns once the run's timeout
/// (and grace) stopped it; the job is kept for a retry.
async fn a_stopping_worker_waits_for_a_hung_run_only_until_its_timeout(db: Db) {
    let jobs = db.builder().backoff(Duration::from_secs(60)).open().await.unwrap();
    jobs.add("work", "hung").await.unwrap();
    jobs.add("work", "next").await.unwrap();
    let started = Arc::new(Notify::new());
    let worker = jobs
        .worker()
        .timeout(Some(Duration::from_millis(200)))
        .stop_grace(Duration::from_millis(100));
    let stop = worker.stopper();
    let run = tokio::spawn({
        let started = started.clone();
        worker.run(move |_| {
            let started = started.clone();
            async move {
                started.notify_one();
                std::future::pending::<Outcome>().await
            }
        })
    });
    started.notified().await;
    stop.stop();
    let summary = run.await.unwrap().unwrap();
    assert_eq!((summary.started, summary.failed), (1, 1), "{summary:?}");
    let status = lane(&jobs, "work").await;
    assert_eq!((status.ready, status.scheduled, status.running), (1, 1, 0));
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
