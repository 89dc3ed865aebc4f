//! Schedules on the caller's clock: one job per tick however many workers claim at once, missed
//! ticks skipped or caught up once, cron in a time zone, listing, replacing and removing.

use crate::db::{Case, Db, EPOCH, clock};
use leakgate_jobs::{Error, Every, Jobs, LaneStatus, Missed, Schedule};
use std::time::Duration;

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: a_tick_adds_one_job_however_many_workers_claim, missed_ticks_are_skipped_or_caught_up_once,
    a_cron_schedule_ticks_in_its_zone, schedules_are_listed_replaced_and_removed);

const MIN: Duration = Duration::from_secs(60);

fn every_minute(name: &str, lane: &str) -> Schedule {
    Schedule::new(name, Every::Interval(MIN), lane, format!("from {name}"))
}

/// The jobs a lane ever had (waiting, running or done).
async fn total(jobs: &Jobs, lane: &str) -> u64 {
    let status = jobs.status().await.unwrap();
    let s = status.iter().find(|s| s.lane == lane).cloned().unwrap_or(LaneStatus::default());
    s.waiting() + s.running + s.done
}

async fn a_tick_adds_one_job_however_many_workers_claim(db: Db) {
    let clock = clock();
    let workers = [db.at(&clock).await, db.at(&clock).await, db.at(&clock).await];
    workers[0].every(every_minute("tick", "ticks")).await.unwrap();
    for k in 1..=10u64 {
        clock.advance(MIN);
        // All three claim at once, for the same tick.
        let (a, b, c) = tokio::join!(workers[0].take(2), workers[1].take(2), workers[2].take(2));
        let taken: Vec<_> = [a, b, c].into_iter().flat_map(Result::unwrap).collect();
        assert_eq!(taken.len(), 1, "tick {k}: one job");
        assert_eq!(taken[0].payload(), b"from tick");
        workers[1].done(&taken[0]).await.unwrap();
        assert_eq!(total(&workers[2], "ticks").await, k);
    }
    clock.advance(MIN - Duration::from_nanos(1));
    assert!(workers[0].take(5).await.unwrap().is_empty(), "not before its tick");
}

async fn missed_ticks_are_skipped_or_caught_up_once(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    jobs.every(every_minute("skip", "s")).await.unwrap();
    jobs.every(every_minute("once", "o").missed(Missed::Once)).await.unwrap();
    clock.advance(MIN);
    assert_eq!(jobs.take(10).await.unwrap().len(), 2, "one tick each");
    // Every worker down for ten minutes and a bit: ten ticks come and go.
    clock.advance(10 * MIN + Duration::from_secs(5));
    jobs.take(0).await.unwrap();
    assert_eq!(total(&jobs, "s").await, 2, "skip: the latest tick only");
    assert_eq!(total(&jobs, "o").await, 3, "once: the latest tick and one for the missed ones");
    // And on time again after that.
    clock.advance(MIN);
    jobs.take(0).await.unwrap();
    assert_eq!((total(&jobs, "s").await, total(&jobs, "o").await), (3, 4));
}

async fn a_cron_schedule_ticks_in_its_zone(db: Db) {
    let clock = clock(); // 2023-11-14 22:13:20 UTC
    let jobs = db.at(&clock).await;
    let nightly = Every::cron("0 3 * * *", Some("Europe/Paris"));
    jobs.every(Schedule::new("nightly", nightly, "reports", "full")).await.unwrap();
    // 03:00 in Paris is 02:00 UTC in November: 3 h 46 min 40 s away.
    let first = EPOCH + Duration::from_secs(3 * 3600 + 46 * 60 + 40);
    let listed = jobs.schedules().await.unwrap();
    assert_eq!(listed[0].next_tick_ns as u128, first.as_nanos());
    clock.set(first - Duration::from_nanos(1));
    assert!(jobs.take(5).await.unwrap().is_empty());
    clock.set(first);
    let job = jobs.take(5).await.unwrap();
    assert_eq!((job.len(), job[0].payload()), (1, &b"full"[..]));
    let next = jobs.schedules().await.unwrap()[0].next_tick_ns as u128;
    assert_eq!(next - first.as_nanos(), 86_400 * 1_000_000_000, "the next night");
}

async fn schedules_are_listed_replaced_and_removed(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    let bad = Schedule::new("bad", Every::cron("* * *", None), "l", "");
    assert!(matches!(jobs.every(bad).await, Err(Error::BadSchedule(_))));
    let zone = Schedule::new("bad", Every::cron("* * * * *", Some("Nowhere/Town")), "l", "");
    assert!(jobs.every(zone).await.unwrap_err().to_string().contains("Nowhere/Town"));
    assert!(jobs.schedules().await.unwrap().is_empty(), "nothing was written");
    jobs.every(every_minute("m", "first")).await.unwrap();
    jobs.every(every_minute("m", "second")).await.unwrap();
    let listed = jobs.schedules().await.unwrap();
    assert_eq!(listed.len(), 1, "replaced by name");
    assert_eq!(listed[0].schedule, every_minute("m", "second"));
    assert_eq!(listed[0].next_tick_ns as u128, (EPOCH + MIN).as_nanos());
    let e = jobs.remove_schedule("n").await.unwrap_err();
    assert!(matches!(e, Error::UnknownSchedule(ref n) if n == "n"), "{e}");
    jobs.remove_schedule("m").await.unwrap();
    clock.advance(10 * MIN);
    assert!(jobs.take(5).await.unwrap().is_empty(), "a removed schedule adds nothing");
    assert!(jobs.status().await.unwrap().is_empty());
}
