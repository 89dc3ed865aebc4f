//! Cases on the caller's clock: order, pace, fairness, retries, slow-down, keys, delays,
//! capacity, leases, reloads, bad input.

use crate::db::{Case, Db, clock};
use leakgate_jobs::{Error, Jobs, LaneRules, NewJob, Requeue};
use std::time::Duration;

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: fifo_within_a_lane, pace_is_charged_when_a_job_is_taken, several_quotas_all_or_nothing,
    ready_lanes_take_turns, a_waiting_lane_never_holds_back_another, retries_back_off_then_die,
    slow_down_pushes_the_pace_back, idempotency_keys, after_delays_a_job, lane_capacity,
    max_in_flight, an_expired_lease_runs_the_job_again, a_reload_keeps_each_lanes_level,
    status_dead_requeue_purge, bad_jobs_are_refused_and_nothing_is_lost);
cases!(SQLITE_ONLY: a_file_that_is_not_a_database);
cases!(POSTGRES_ONLY: a_wrong_password_or_no_server);

const MS: Duration = Duration::from_millis(1);

async fn rules(jobs: &Jobs, text: &str) {
    jobs.set_rules(&LaneRules::from_toml(text).unwrap()).await.unwrap();
}

async fn ids(jobs: &Jobs, max: usize) -> Vec<i64> {
    jobs.take(max).await.unwrap().iter().map(|j| j.id()).collect()
}

async fn fifo_within_a_lane(db: Db) {
    let jobs = db.real().await;
    let mut added = Vec::new();
    for i in 0..10 {
        added.push(jobs.add("mail", format!("m{i}")).await.unwrap());
    }
    let mut taken = Vec::new();
    for job in jobs.take(4).await.unwrap().into_iter().chain(jobs.take(100).await.unwrap()) {
        assert_eq!(job.payload(), format!("m{}", taken.len()).as_bytes());
        assert_eq!(job.attempt(), 1);
        taken.push(job.id());
        jobs.done(&job).await.unwrap();
    }
    assert_eq!(taken, added);
    assert!(jobs.take(10).await.unwrap().is_empty());
}

async fn pace_is_charged_when_a_job_is_taken(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "p = \"2/s burst 1\"").await;
    for i in 0..4 {
        jobs.add("p/x", format!("{i}")).await.unwrap();
    }
    assert_eq!(jobs.take(10).await.unwrap().len(), 1, "burst 1: one now");
    clock.advance(499 * MS);
    assert!(jobs.take(10).await.unwrap().is_empty());
    clock.advance(MS);
    let second = jobs.take(10).await.unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].lateness(), Duration::ZERO, "taken exactly at its slot");
    // A second handle (another worker) shares the bucket: no fresh burst.
    let other = db.at(&clock).await;
    assert!(other.take(10).await.unwrap().is_empty());
    clock.advance(500 * MS);
    assert_eq!(other.take(10).await.unwrap().len(), 1);
    let runs = jobs.runs("p/x").await.unwrap();
    let starts: Vec<i64> = runs.iter().map(|r| r.started_ns - runs[0].started_ns).collect();
    assert_eq!(starts, [0, 500_000_000, 1_000_000_000]);
}

async fn several_quotas_all_or_nothing(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "api = [\"10/s burst 10\", \"2/s burst 2\"]").await;
    for i in 0..10 {
        jobs.add("api/a", format!("{i}")).await.unwrap();
    }
    assert_eq!(jobs.take(10).await.unwrap().len(), 2);
    clock.advance(400 * MS);
    assert!(jobs.take(10).await.unwrap().is_empty(), "the 2/s bucket holds the 10/s one back");
    clock.advance(100 * MS);
    assert_eq!(jobs.take(10).await.unwrap().len(), 1);
    // Unmatched lanes are not paced.
    for i in 0..5 {
        jobs.add("free", format!("{i}")).await.unwrap();
    }
    assert_eq!(jobs.take(10).await.unwrap().len(), 5);
}

async fn ready_lanes_take_turns(db: Db) {
    let jobs = db.real().await;
    for lane in ["a", "b", "c"] {
        for i in 0..3 {
            jobs.add(lane, format!("{lane}{i}")).await.unwrap();
        }
    }
    let taken = jobs.take(9).await.unwrap();
    let order: Vec<String> =
        taken.iter().map(|j| String::from_utf8_lossy(j.payload()).into()).collect();
    assert_eq!(order, ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]);
}

async fn a_waiting_lane_never_holds_back_another(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "slow = \"1/s burst 1\"\nfast = \"100/s burst 1\"").await;
    // The slow lane's jobs are added first.
    for i in 0..50 {
        jobs.add("slow", format!("s{i}")).await.unwrap();
    }
    for i in 0..10 {
        jobs.add("fast", format!("f{i}")).await.unwrap();
        jobs.add("free", format!("u{i}")).await.unwrap();
    }
    let mut by_lane = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..10 {
        for job in jobs.take(100).await.unwrap() {
            *by_lane.entry(job.lane().to_string()).or_default() += 1;
        }
        clock.advance(10 * MS);
    }
    assert_eq!(by_lane.get("free"), Some(&10), "unpaced: all at once");
    assert_eq!(by_lane.get("fast"), Some(&10), "one per 10 ms, whatever the slow lane waits");
    assert_eq!(by_lane.get("slow"), Some(&1));
}

async fn retries_back_off_then_die(db: Db) {
    let clock = clock();
    let jobs = db
        .builder()
        .caller_clock(clock.clone())
        .max_attempts(3)
        .backoff(Duration::from_secs(1))
        .open()
        .await
        .unwrap();
    let id = jobs.add("bank", "refund").await.unwrap();
    for (attempt, backoff) in [(1, 1000), (2, 2000)] {
        let job = jobs.take(1).await.unwrap().remove(0);
        assert_eq!((job.id(), job.attempt()), (id, attempt));
        jobs.fail(&job, "500").await.unwrap();
        clock.advance((backoff - 1) * MS);
        assert!(jobs.take(1).await.unwrap().is_empty(), "not before the backoff");
        // Up to a quarter more, at random.
        clock.advance((backoff / 4 + 1) * MS);
    }
    let job = jobs.take(1).await.unwrap().remove(0);
    assert_eq!(job.attempt(), 3);
    jobs.fail(&job, "still 500").await.unwrap();
    let dead = jobs.dead(Some("bank"), 10).await.unwrap();
    assert_eq!((dead.len(), dead[0].attempts, dead[0].error.as_str()), (1, 3, "still 500"));
    clock.advance(Duration::from_secs(3600));
    assert!(jobs.take(1).await.unwrap().is_empty(), "dead: never run again");
    assert_eq!(jobs.requeue(Requeue::Lane("bank".into())).await.unwrap(), 1);
    let again = jobs.take(1).await.unwrap().remove(0);
    assert_eq!((again.id(), again.attempt()), (id, 4));
    assert!(
        matches!(jobs.fail(&job, "stale").await, Err(Error::LeaseLost(i)) if i == id),
        "an old run's outcome is fenced off"
    );
}

async fn slow_down_pushes_the_pace_back(db: Db) {
    let clock = clock();
    let jobs = db.builder().caller_clock(clock.clone()).max_attempts(1).open().await.unwrap();
    rules(&jobs, "bank = \"10/s burst 5\"").await;
    let first = jobs.add("bank", "1").await.unwrap();
    jobs.add("bank", "2").await.unwrap();
    let job = jobs.take(1).await.unwrap().remove(0);
    jobs.slow_down(&job, Duration::from_secs(3)).await.unwrap();
    clock.advance(2999 * MS);
    assert!(jobs.take(5).await.unwrap().is_empty(), "the lane is paused");
    clock.advance(MS);
    let again = jobs.take(5).await.unwrap();
    assert_eq!(again.len(), 1, "no burst after the pause");
    assert_eq!((again[0].id(), again[0].attempt()), (first, 2), "the same job, first, not failed");
    clock.advance(100 * MS);
    assert_eq!(jobs.take(5).await.unwrap().len(), 1, "then the steady rate");
    assert!(jobs.dead(None, 10).await.unwrap().is_empty(), "a slow-down is not a failure");
}

async fn idempotency_keys(db: Db) {
    let jobs = db.real().await;
    let a = jobs.add_job(NewJob::new("refunds/a", "42").key("refund-42")).await.unwrap();
    let b = jobs.add_job(NewJob::new("refunds/b", "other").key("refund-42")).await.unwrap();
    assert!(a.new && !b.new);
    assert_eq!(a.id, b.id);
    let batch = jobs
        .add_all(vec![
            NewJob::new("x", "1").key("k1"),
            NewJob::new("x", "2").key("k1"),
            NewJob::new("x", "3"),
        ])
        .await
        .unwrap();
    assert_eq!(batch[0].id, batch[1].id);
    assert!(batch[0].new && !batch[1].new && batch[2].new);
    let status = jobs.status().await.unwrap();
    let waiting: u64 = status.iter().map(|l| l.waiting()).sum();
    assert_eq!(waiting, 3);
}

async fn after_delays_a_job(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    let late =
        jobs.add_job(NewJob::new("mail", "later").after(Duration::from_secs(5))).await.unwrap();
    let now = jobs.add("mail", "now").await.unwrap();
    assert_eq!(ids(&jobs, 10).await, [now]);
    assert_eq!(jobs.status().await.unwrap()[0].scheduled, 1);
    clock.advance(4999 * MS);
    assert!(ids(&jobs, 10).await.is_empty());
    clock.advance(MS);
    assert_eq!(ids(&jobs, 10).await, [late.id]);
}

async fn lane_capacity(db: Db) {
    let jobs = db.real().await;
    rules(&jobs, "full = { max_waiting = 3 }").await;
    for i in 0..2 {
        jobs.add("full/a", format!("{i}")).await.unwrap();
    }
    let batch =
        vec![NewJob::new("other", "x"), NewJob::new("full/a", "2"), NewJob::new("full/a", "3")];
    match jobs.add_all(batch).await {
        Err(Error::LaneFull { lane, max_waiting: 3, waiting: 2, adding: 2 }) => {
            assert_eq!(lane, "full/a")
        }
        other => panic!("expected a full lane, got {other:?}"),
    }
    let status = jobs.status().await.unwrap();
    assert_eq!(status.iter().map(|l| l.waiting()).sum::<u64>(), 2, "nothing half-added");
    jobs.add("full/a", "2").await.unwrap();
    let e = jobs.add("full/a", "3").await.unwrap_err();
    assert!(e.to_string().contains("full/a") && e.to_string().contains("max_waiting of 3"), "{e}");
    // Running jobs do not count: the capacity is of waiting ones.
    let job = jobs.take(1).await.unwrap().remove(0);
    jobs.add("full/a", "3").await.unwrap();
    jobs.done(&job).await.unwrap();
}

async fn max_in_flight(db: Db) {
    let jobs = db.real().await;
    rules(&jobs, "bank = { max_in_flight = 1 }").await;
    for i in 0..3 {
        jobs.add("bank/a", format!("{i}")).await.unwrap();
        jobs.add("bank/b", format!("{i}")).await.unwrap();
    }
    let taken = jobs.take(10).await.unwrap();
    assert_eq!(taken.len(), 2, "one per lane at a time");
    assert!(jobs.take(10).await.unwrap().is_empty());
    jobs.done(&taken[0]).await.unwrap();
    let next = jobs.take(10).await.unwrap();
    assert_eq!((next.len(), next[0].lane()), (1, taken[0].lane()));
}

async fn an_expired_lease_runs_the_job_again(db: Db) {
    let clock = clock();
    let first = db
        .builder()
        .caller_clock(clock.clone())
        .lease(Duration::from_secs(10))
        .open()
        .await
        .unwrap();
    let second = db
        .builder()
        .caller_clock(clock.clone())
        .lease(Duration::from_secs(10))
        .open()
        .await
        .unwrap();
    let id = first.add("mail", "x").await.unwrap();
    let job = first.take(1).await.unwrap().remove(0);
    clock.advance(9 * Duration::from_secs(1));
    first.renew(&[&job]).await.unwrap();
    clock.advance(9 * Duration::from_secs(1));
    assert!(second.take(1).await.unwrap().is_empty(), "renewed: still held");
    clock.advance(Duration::from_secs(1));
    let again = second.take(1).await.unwrap().remove(0);
    assert_eq!((again.id(), again.attempt()), (id, 2));
    assert!(matches!(first.done(&job).await, Err(Error::LeaseLost(i)) if i == id));
    assert!(matches!(first.renew(&[&job]).await, Err(Error::LeaseLost(_))));
    second.done(&again).await.unwrap();
    assert_eq!(first.runs("mail").await.unwrap().len(), 2);
}

async fn a_reload_keeps_each_lanes_level(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "bank = \"1/s burst 5\"").await;
    for i in 0..20 {
        jobs.add("bank", format!("{i}")).await.unwrap();
    }
    assert_eq!(jobs.take(20).await.unwrap().len(), 5);
    // Full at 5 units; under 10/s burst 2 the level is capped at 2: full, one per 100 ms.
    let worker = db.at(&clock).await; // another handle notices the new rules at its next take
    rules(&jobs, "bank = \"10/s burst 2\"").await;
    assert!(worker.take(20).await.unwrap().is_empty());
    clock.advance(100 * MS);
    assert_eq!(worker.take(20).await.unwrap().len(), 1);
}

async fn status_dead_requeue_purge(db: Db) {
    let clock = clock();
    let jobs = db.builder().caller_clock(clock.clone()).max_attempts(1).open().await.unwrap();
    rules(&jobs, "bank = \"60/minute burst 1\"").await;
    for i in 0..3 {
        jobs.add("bank/a", format!("{i}")).await.unwrap();
    }
    let job = jobs.take(5).await.unwrap().remove(0);
    jobs.fail(&job, "boom").await.unwrap();
    clock.advance(Duration::from_secs(1));
    let job = jobs.take(5).await.unwrap().remove(0);
    jobs.done(&job).await.unwrap();
    clock.advance(Duration::from_millis(300));
    let status = jobs.status().await.unwrap();
    let lane = &status[0];
    assert_eq!(
        (lane.lane.as_str(), lane.ready, lane.running, lane.dead, lane.done),
        ("bank/a", 1, 0, 1, 1)
    );
    assert_eq!(lane.runs_last_minute, 2);
    assert_eq!(lane.next_slot_in, Some(Duration::from_millis(700)));
    assert_eq!(lane.oldest_waiting, Some(Duration::from_millis(1300)));
    assert!(
        lane.rule
            .as_deref()
            .is_some_and(|r| r.starts_with("\"bank\" = 60/") && r.ends_with("burst 1")),
        "{:?}",
        lane.rule
    );
    assert_eq!(lane.rule_per_minute, Some(60.0));
    assert_eq!(
        jobs.requeue(Requeue::Ids(vec![job.id(), 9999])).await.unwrap(),
        0,
        "only dead jobs"
    );
    assert_eq!(jobs.purge(Duration::from_secs(1)).await.unwrap(), 0, "too recent");
    clock.advance(Duration::from_secs(2));
    assert_eq!(jobs.purge(Duration::from_secs(1)).await.unwrap(), 1);
    let lane = &jobs.status().await.unwrap()[0];
    assert_eq!((lane.done, lane.dead), (0, 1), "dead jobs are kept");
    assert_eq!(jobs.requeue(Requeue::All).await.unwrap(), 1);
}

async fn bad_jobs_are_refused_and_nothing_is_lost(db: Db) {
    let jobs = db.real().await;
    let kept = jobs.add("mail", "kept").await.unwrap();
    for bad in [
        NewJob::new("", "x"),
        NewJob::new("a\nb", "x"),
        NewJob::new("x".repeat(513), "x"),
        NewJob::new("mail", vec![7u8; leakgate_jobs::MAX_PAYLOAD + 1]),
        NewJob::new("mail", "x").key(""),
    ] {
        let e =
            jobs.add_all(vec![NewJob::new("mail", "first of the batch"), bad]).await.unwrap_err();
        assert!(!e.to_string().is_empty());
    }
    // Payloads are bytes: any bytes, NUL and invalid UTF-8 included; lanes are any text.
    let bytes = vec![0u8, 0xff, 0xfe, b'\n', 0];
    jobs.add("é/ü/日本", bytes.clone()).await.unwrap();
    let taken = jobs.take(10).await.unwrap();
    assert_eq!(taken.len(), 2);
    assert_eq!(taken[0].id(), kept);
    assert_eq!(taken.iter().find(|j| j.lane() == "é/ü/日本").unwrap().payload(), bytes);
    let e = LaneRules::from_toml("bank = \"1/fortnight\"").unwrap_err();
    assert!(e.to_string().contains("fortnight"));
}

async fn a_file_that_is_not_a_database(db: Db) {
    let path = std::path::Path::new(&db.url);
    std::fs::write(path, b"this is not a database, but somebody's notes\n".repeat(100)).unwrap();
    let before = std::fs::read(path).unwrap();
    let e = Jobs::open(&db.url).await.unwrap_err();
    assert!(matches!(e, Error::NotADatabase(_)), "{e}");
    assert!(e.to_string().contains("not a leakgate jobs database"), "{e}");
    assert_eq!(std::fs::read(path).unwrap(), before, "nothing was written to it");
    let dir = path.parent().unwrap().to_str().unwrap().to_string();
    assert!(Jobs::open(&dir).await.unwrap_err().to_string().contains("directory"));
    assert!(Jobs::open("/nonexistent/dir/jobs.db").await.is_err());
}

async fn a_wrong_password_or_no_server(db: Db) {
    let e = Jobs::open(&db.url).await.unwrap_err();
    assert!(e.to_string().contains("password"), "{e}");
    // A port where nothing listens: refused at once, a clear error.
    let port = leakgate_test_support::free_port();
    let e = Jobs::open(&format!("postgres://postgres:x@127.0.0.1:{port}/jobs")).await.unwrap_err();
    assert!(e.to_string().contains("cannot connect"), "{e}");
    let e = Jobs::open("postgres://[not a url").await.unwrap_err();
    assert!(e.to_string().contains("cannot connect"), "{e}");
}
