//! Cases for priorities, cancel, pause and resume, and lane weights, on the caller's clock
//! (except the worker stopping a cancelled run, which only bounds).

use crate::db::{Case, Db, clock};
use leakgate_jobs::{Error, Jobs, LaneRules, MAX_PRIORITY, NewJob, Outcome};
use std::time::Duration;

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: higher_priority_first_fifo_among_equals, priorities_keep_the_pace_exact,
    a_bad_priority_is_refused_and_nothing_is_added, a_cancelled_waiting_job_never_runs,
    a_cancelled_running_job_is_not_retried, a_worker_stops_a_cancelled_run,
    a_paused_lane_is_not_taken_until_resumed, weights_share_the_claims,
    retries_keep_their_priority, a_job_asks_to_be_retried_after_a_delay);

const MS: Duration = Duration::from_millis(1);

async fn rules(jobs: &Jobs, text: &str) {
    jobs.set_rules(&LaneRules::from_toml(text).unwrap()).await.unwrap();
}

async fn add(jobs: &Jobs, lane: &str, payload: &str, priority: u32) -> i64 {
    jobs.add_job(NewJob::new(lane, payload).priority(priority)).await.unwrap().id
}

async fn payloads(jobs: &Jobs, max: usize) -> Vec<String> {
    let taken = jobs.take(max).await.unwrap();
    for job in &taken {
        jobs.done(job).await.unwrap();
    }
    taken.iter().map(|j| String::from_utf8(j.payload().to_vec()).unwrap()).collect()
}

async fn higher_priority_first_fifo_among_equals(db: Db) {
    let jobs = db.real().await;
    for (p, prio) in [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", MAX_PRIORITY), ("f", 1)] {
        add(&jobs, "mail", p, prio).await;
    }
    assert_eq!(payloads(&jobs, 2).await, ["e", "b"]);
    add(&jobs, "mail", "g", 5).await;
    assert_eq!(payloads(&jobs, 1).await, ["d"]);
    assert_eq!(payloads(&jobs, 10).await, ["g", "f", "a", "c"]);
}

async fn priorities_keep_the_pace_exact(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "p = \"2/s burst 1\"").await;
    add(&jobs, "p/x", "low", 0).await;
    assert_eq!(payloads(&jobs, 10).await, ["low"], "burst 1");
    add(&jobs, "p/x", "low2", 0).await;
    add(&jobs, "p/x", "high", 9).await;
    clock.advance(499 * MS);
    assert!(payloads(&jobs, 10).await.is_empty(), "a priority does not jump the pace");
    clock.advance(MS);
    assert_eq!(payloads(&jobs, 10).await, ["high"]);
    clock.advance(500 * MS);
    assert_eq!(payloads(&jobs, 10).await, ["low2"]);
    let runs = jobs.runs("p/x").await.unwrap();
    let starts: Vec<i64> = runs.iter().map(|r| r.started_ns - runs[0].started_ns).collect();
    assert_eq!(starts, [0, 500_000_000, 1_000_000_000]);
    assert!(runs.iter().all(|r| r.lateness() == Duration::ZERO));
}

async fn a_bad_priority_is_refused_and_nothing_is_added(db: Db) {
    let jobs = db.real().await;
    let batch =
        vec![NewJob::new("mail", "ok"), NewJob::new("mail", "bad").priority(MAX_PRIORITY + 1)];
    let e = jobs.add_all(batch).await.unwrap_err();
    assert!(matches!(e, Error::BadPriority(p) if p == u64::from(MAX_PRIORITY) + 1), "{e}");
    assert!(e.to_string().contains("2147483647"), "{e}");
    assert!(jobs.status().await.unwrap().is_empty(), "nothing was added");
    assert!(jobs.take(10).await.unwrap().is_empty());
}

async fn a_cancelled_waiting_job_never_runs(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    let a = add(&jobs, "mail", "a", 0).await;
    let b = jobs.add_job(NewJob::new("mail", "b").after(Duration::from_secs(5))).await.unwrap().id;
    let c = add(&jobs, "mail", "c", 0).await;
    // An unknown id refuses the whole call: nothing is cancelled.
    let e = jobs.cancel(&[a, c + 100]).await.unwrap_err();
    assert!(matches!(e, Error::UnknownJob(id) if id == c + 100), "{e}");
    assert_eq!(jobs.status().await.unwrap()[0].cancelled, 0);
    assert_eq!(jobs.cancel(&[a, b]).await.unwrap(), 2);
    assert_eq!(jobs.cancel(&[a]).await.unwrap(), 0, "already cancelled: left as it is");
    let s = &jobs.status().await.unwrap()[0];
    assert_eq!((s.ready, s.scheduled, s.cancelled), (1, 0, 2));
    clock.advance(Duration::from_secs(10));
    assert_eq!(payloads(&jobs, 10).await, ["c"]);
    assert_eq!(jobs.cancel(&[c]).await.unwrap(), 0, "done: left as it is");
    assert!(jobs.take(10).await.unwrap().is_empty());
    assert_eq!(jobs.purge(Duration::from_secs(60)).await.unwrap(), 0);
    clock.advance(Duration::from_secs(120));
    assert_eq!(jobs.purge(Duration::from_secs(60)).await.unwrap(), 3, "done and cancelled");
    let s = &jobs.status().await.unwrap()[0];
    assert_eq!((s.done, s.cancelled), (0, 0));
}

async fn a_cancelled_running_job_is_not_retried(db: Db) {
    let clock = clock();
    let jobs = db
        .builder()
        .caller_clock(clock.clone())
        .lease(Duration::from_secs(10))
        .open()
        .await
        .unwrap();
    add(&jobs, "mail", "a", 0).await;
    let job = jobs.take(1).await.unwrap().remove(0);
    assert_eq!(jobs.cancel(&[job.id()]).await.unwrap(), 1);
    let s = &jobs.status().await.unwrap()[0];
    assert_eq!((s.running, s.cancelled), (0, 1));
    assert!(matches!(jobs.renew(&[&job]).await, Err(Error::LeaseLost(_))), "the lease is gone");
    assert!(matches!(jobs.fail(&job, "x").await, Err(Error::LeaseLost(_))), "not retried");
    clock.advance(Duration::from_secs(60));
    assert!(jobs.take(10).await.unwrap().is_empty(), "its lease running out brings nothing back");
    let s = &jobs.status().await.unwrap()[0];
    assert_eq!((s.ready, s.running, s.dead, s.cancelled), (0, 0, 0, 1));
}

async fn a_worker_stops_a_cancelled_run(db: Db) {
    let jobs = db.builder().lease(Duration::from_millis(600)).open().await.unwrap();
    let id = add(&jobs, "slow", "forever", 0).await;
    add(&jobs, "slow", "quick", 0).await;
    let canceller = db.real().await;
    let worker = jobs.worker().concurrency(2).until_empty(true);
    let run = tokio::spawn(worker.run(|job| async move {
        if job.payload() == b"forever" {
            std::future::pending::<()>().await;
        }
        Outcome::Done
    }));
    // Cancel once it runs (status: running 1, the quick one done).
    loop {
        let s = canceller.status().await.unwrap();
        if s[0].running == 1 && s[0].done == 1 {
            break;
        }
        tokio::time::sleep(10 * MS).await;
    }
    assert_eq!(canceller.cancel(&[id]).await.unwrap(), 1);
    let summary =
        tokio::time::timeout(Duration::from_secs(30), run).await.unwrap().unwrap().unwrap();
    assert_eq!((summary.done, summary.cancelled, summary.failed, summary.lost), (1, 1, 0, 0));
    let s = &canceller.status().await.unwrap()[0];
    assert_eq!((s.running, s.done, s.cancelled), (0, 1, 1));
}

async fn a_paused_lane_is_not_taken_until_resumed(db: Db) {
    let jobs = db.real().await;
    let e = jobs.pause("mail").await.unwrap_err();
    assert!(matches!(e, Error::UnknownLane(ref l) if l == "mail"), "{e}");
    add(&jobs, "mail", "m1", 0).await;
    add(&jobs, "mail", "m2", 0).await;
    add(&jobs, "sms", "s1", 0).await;
    jobs.pause("mail").await.unwrap();
    assert!(jobs.resume("mial").await.is_err(), "a typo");
    let status = jobs.status().await.unwrap();
    assert_eq!(status.iter().map(|s| s.paused).collect::<Vec<_>>(), [true, false]);
    assert_eq!(payloads(&jobs, 10).await, ["s1"], "the paused lane holds back no other");
    assert!(jobs.take(10).await.unwrap().is_empty());
    jobs.resume("mail").await.unwrap();
    assert!(!jobs.status().await.unwrap()[0].paused);
    assert_eq!(payloads(&jobs, 10).await, ["m1", "m2"]);
}

async fn weights_share_the_claims(db: Db) {
    let jobs = db.real().await;
    rules(&jobs, "a = { weight = 3 }\nc = { weight = 2 }").await;
    for i in 0..40 {
        add(&jobs, "a", &format!("a{i}"), 0).await;
        add(&jobs, "b", &format!("b{i}"), 0).await;
    }
    // One job a claim: a's turn is 3 claims, b's 1.
    let mut lanes = String::new();
    for _ in 0..20 {
        let job = jobs.take(1).await.unwrap().remove(0);
        lanes.push_str(&job.lane()[..1]);
        jobs.done(&job).await.unwrap();
    }
    assert_eq!(lanes, "aaabaaabaaabaaabaaab");
    // Many a claim: the same shares.
    let taken = jobs.take(16).await.unwrap();
    let lanes: String = taken.iter().map(|j| &j.lane()[..1]).collect();
    assert_eq!(lanes, "aaabaaabaaabaaab");
    // A third lane of weight 2 joins: 3:1:2 of each round.
    for i in 0..20 {
        add(&jobs, "c", &format!("c{i}"), 0).await;
    }
    let mut count = [0; 3];
    for _ in 0..4 {
        for job in jobs.take(6).await.unwrap() {
            count[(job.lane().as_bytes()[0] - b'a') as usize] += 1;
        }
    }
    assert_eq!(count, [12, 4, 8]);
}

async fn retries_keep_their_priority(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    add(&jobs, "mail", "low", 0).await;
    add(&jobs, "mail", "high", 7).await;
    let job = jobs.take(1).await.unwrap().remove(0);
    assert_eq!(job.payload(), b"high");
    jobs.fail(&job, "try again").await.unwrap();
    clock.advance(Duration::from_secs(3600));
    assert_eq!(payloads(&jobs, 1).await, ["high"], "the retry keeps its priority");
    assert_eq!(payloads(&jobs, 1).await, ["low"]);
}

async fn a_job_asks_to_be_retried_after_a_delay(db: Db) {
    let clock = clock();
    let open = || db.builder().caller_clock(clock.clone()).max_attempts(2).open();
    let (jobs, other) = (open().await.unwrap(), open().await.unwrap());
    add(&jobs, "bank", "refund", 0).await;
    let job = jobs.take(1).await.unwrap().remove(0);
    jobs.retry_after(&job, Duration::from_secs(90)).await.unwrap();
    clock.advance(Duration::from_secs(90) - MS);
    assert!(other.take(1).await.unwrap().is_empty(), "another worker obeys it too");
    clock.advance(MS);
    let again = other.take(1).await.unwrap().remove(0);
    assert_eq!(again.attempt(), 2);
    other.retry_after(&again, Duration::from_secs(1)).await.unwrap();
    let dead = jobs.dead(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1, "a failed attempt: dead after max_attempts");
    assert_eq!(dead[0].error, "asked to be retried after 1s");
}
