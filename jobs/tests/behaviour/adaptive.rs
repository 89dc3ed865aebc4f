//! Adaptive lanes on the caller's clock: a "slow down" backs the lane's rate off (its
//! Retry-After honoured exactly), done jobs bring it back to the quota in a stated number of
//! jobs, and every handle on the database (every worker) runs the lane at the same rate.

use crate::db::{Case, Db, clock};
use leakgate_jobs::{Jobs, LaneRules};
use std::time::Duration;

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: a_slow_down_backs_off_then_done_jobs_recover, a_slow_down_without_a_pause_backs_off,
    a_lane_that_does_not_adapt_only_pauses);

const MS: Duration = Duration::from_millis(1);

async fn rules(jobs: &Jobs, text: &str) {
    jobs.set_rules(&LaneRules::from_toml(text).unwrap()).await.unwrap();
}

/// The lane's rate in force, a second.
async fn per_second(jobs: &Jobs, lane: &str) -> f64 {
    let status = jobs.status().await.unwrap();
    let lane = status.iter().find(|l| l.lane == lane).unwrap();
    lane.pace_per_minute.unwrap() / 60.0
}

async fn a_slow_down_backs_off_then_done_jobs_recover(db: Db) {
    let clock = clock();
    let a = db.at(&clock).await;
    let b = db.at(&clock).await; // a second worker on the same database
    rules(&a, "bank = { quota = \"100/s burst 1\", adaptive = true }").await;
    for i in 0..40 {
        a.add("bank", format!("{i}")).await.unwrap();
    }
    let first = a.take(1).await.unwrap().remove(0);
    assert_eq!(per_second(&a, "bank").await, 100.0);
    a.slow_down(&first, Duration::from_secs(2)).await.unwrap(); // "429, Retry-After: 2"
    assert_eq!(per_second(&b, "bank").await, 50.0, "halved, for every worker");
    clock.advance(1999 * MS);
    assert!(b.take(5).await.unwrap().is_empty(), "nothing before the Retry-After ends");
    clock.advance(MS);
    let again = b.take(5).await.unwrap();
    assert_eq!(again.len(), 1, "then one, no burst");
    assert_eq!(again[0].id(), first.id(), "the same job, first");
    // At 50/s: one every 20 ms exactly, whichever worker asks.
    clock.advance(19 * MS);
    assert!(a.take(5).await.unwrap().is_empty(), "not at 19 ms: the pace is the adapted one");
    clock.advance(MS);
    let next = a.take(5).await.unwrap();
    assert_eq!(next.len(), 1);
    // Another slow-down, a period after the first: a new overload, halved again.
    a.slow_down(&next[0], Duration::ZERO).await.unwrap();
    assert_eq!(per_second(&a, "bank").await, 25.0);
    // Each done job wins back 5/s (a twentieth of 100): 15 done jobs from 25/s to the quota.
    let mut done = 0;
    let mut running = again;
    while done < 15 {
        clock.advance(40 * MS);
        running.extend(b.take(1).await.unwrap());
        if let Some(job) = running.pop() {
            b.done(&job).await.unwrap();
            done += 1;
            let want = (25 + 5 * done).min(100) as f64;
            assert_eq!(per_second(&a, "bank").await, want, "after {done} done");
        }
    }
    // Back at 100/s: one every 10 ms.
    clock.advance(Duration::from_secs(1));
    assert_eq!(a.take(5).await.unwrap().len(), 1, "burst 1");
    clock.advance(9 * MS);
    assert!(b.take(5).await.unwrap().is_empty());
    clock.advance(MS);
    assert_eq!(b.take(5).await.unwrap().len(), 1, "10 ms at the quota");
}

async fn a_slow_down_without_a_pause_backs_off(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "bank = { quota = \"8/s burst 1\", adaptive = true, adaptive_floor = 2 }").await;
    for i in 0..10 {
        jobs.add("bank", format!("{i}")).await.unwrap();
    }
    let job = jobs.take(1).await.unwrap().remove(0);
    jobs.slow_down(&job, Duration::ZERO).await.unwrap();
    assert_eq!(per_second(&jobs, "bank").await, 4.0);
    // Within the period (1 s) of the first: the same overload, not halved again.
    clock.advance(250 * MS);
    let job = jobs.take(1).await.unwrap().remove(0);
    jobs.slow_down(&job, Duration::ZERO).await.unwrap();
    assert_eq!(per_second(&jobs, "bank").await, 4.0, "once a period");
    for i in 0..2 {
        clock.advance(Duration::from_secs(1)); // a new period: a new overload
        let job = jobs.take(1).await.unwrap().remove(0);
        jobs.slow_down(&job, Duration::ZERO).await.unwrap();
        assert_eq!(per_second(&jobs, "bank").await, 2.0, "slow-down {i}: never below the floor");
    }
    // At 2/s, no burst after the slow-down: the next run 500 ms on, not before.
    clock.advance(499 * MS);
    assert!(jobs.take(5).await.unwrap().is_empty());
    clock.advance(MS);
    assert_eq!(jobs.take(5).await.unwrap().len(), 1);
    // The rules change the quota: it applies (the adapted 2 is under it and kept).
    rules(&jobs, "bank = { quota = \"1/s burst 1\", adaptive = true }").await;
    assert_eq!(per_second(&jobs, "bank").await, 1.0, "never above the quota in the rules");
}

async fn a_lane_that_does_not_adapt_only_pauses(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "bank = \"10/s burst 1\"").await;
    jobs.add("bank", "1").await.unwrap();
    let job = jobs.take(1).await.unwrap().remove(0);
    jobs.slow_down(&job, Duration::from_secs(1)).await.unwrap();
    assert_eq!(per_second(&jobs, "bank").await, 10.0);
}
