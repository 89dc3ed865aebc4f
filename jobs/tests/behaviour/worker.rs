//! Cases through the worker loop, on the database's own clock: bounds only, never timings.

use crate::db::{Case, Db};
use leakgate_jobs::{Jobs, LaneRules, Outcome, Run};
use std::collections::BTreeSet;
use std::time::Duration;

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: three_workers_pace_one_lane, outcomes_through_the_worker, a_rules_file_change_is_picked_up);

/// Whether every window between two starts holds at most `burst + w / T` starts (T in ns).
pub fn within_pace(starts: &[i64], burst: u64, t_ns: i64) -> Result<(), String> {
    let mut s = starts.to_vec();
    s.sort();
    for i in 0..s.len() {
        for j in i..s.len() {
            let w = s[j] - s[i];
            let allowed = burst as i64 + w / t_ns;
            let count = (j - i + 1) as i64;
            if count > allowed {
                return Err(format!("{count} starts within {w} ns: more than {allowed}"));
            }
        }
    }
    Ok(())
}

async fn three_workers_pace_one_lane(db: Db) {
    let setup = db.real().await;
    setup.set_rules(&LaneRules::from_toml("refunds = \"50/s burst 1\"").unwrap()).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..30 {
        ids.push(setup.add("refunds/bank-a", format!("refund {i}")).await.unwrap());
    }
    let mut workers = Vec::new();
    for _ in 0..3 {
        let jobs = db.real().await;
        workers.push(tokio::spawn(async move {
            jobs.worker()
                .concurrency(2)
                .until_empty(true)
                .run(|_| async { Outcome::Done })
                .await
                .unwrap()
        }));
    }
    let mut done = 0;
    for w in workers {
        done += w.await.unwrap().done;
    }
    assert_eq!(done, 30);
    let runs: Vec<Run> = setup.runs("refunds/bank-a").await.unwrap();
    assert_eq!(runs.len(), 30, "every job ran once");
    let order: Vec<i64> = runs.iter().map(|r| r.job).collect();
    assert_eq!(order, ids, "in the order added");
    let starts: Vec<i64> = runs.iter().map(|r| r.started_ns).collect();
    within_pace(&starts, 1, 20_000_000).unwrap();
    let span = starts[29] - starts[0];
    assert!(span >= 29 * 20_000_000, "span {span}");
    assert!(span < 29 * 20_000_000 * 3, "span {span} ns: the workers slept far past their slots");
}

/// What the handler below panics with, on purpose.
const DELIBERATE: &str = "the handler panicked on purpose";

/// Keeps the handler's deliberate panics (two attempts on each database) off stderr: this
/// harness does not capture output, and under `RUST_BACKTRACE=1` each printed some 90 lines of
/// backtrace. Every other panic still goes to the hook that was there before.
fn quiet_deliberate_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&DELIBERATE) {
                before(info);
            }
        }));
    });
}

async fn outcomes_through_the_worker(db: Db) {
    quiet_deliberate_panics();
    let jobs = Jobs::builder(&db.url)
        .backoff(Duration::from_millis(20))
        .max_attempts(2)
        .open()
        .await
        .unwrap();
    for payload in ["ok", "flaky", "bad", "busy", "panic"] {
        jobs.add("mixed", payload).await.unwrap();
    }
    let summary = jobs
        .worker()
        .concurrency(3)
        .until_empty(true)
        .run(|job| async move {
            match (job.payload(), job.attempt()) {
                (b"ok", _) | (b"flaky", 2) | (b"busy", 2) => Outcome::Done,
                (b"busy", 1) => Outcome::SlowDown(Duration::from_millis(30)),
                (b"panic", _) => std::panic::panic_any(DELIBERATE),
                _ => Outcome::Failed(format!("attempt {} failed", job.attempt())),
            }
        })
        .await
        .unwrap();
    assert_eq!((summary.done, summary.slowed, summary.dead), (3, 1, 2), "{summary:?}");
    let dead: BTreeSet<Vec<u8>> =
        jobs.dead(None, 10).await.unwrap().into_iter().map(|d| d.payload).collect();
    assert_eq!(dead, BTreeSet::from([b"bad".to_vec(), b"panic".to_vec()]));
    let panicked =
        jobs.dead(None, 10).await.unwrap().into_iter().find(|d| d.payload == b"panic").unwrap();
    assert!(panicked.error.contains("panicked"), "{}", panicked.error);
}

async fn a_rules_file_change_is_picked_up(db: Db) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, "bank = \"4/s burst 1\"\n").unwrap();
    let jobs = db.real().await;
    for i in 0..20 {
        jobs.add("bank", format!("{i}")).await.unwrap();
    }
    let worker = jobs.worker().until_empty(true).rules_file(&path, Duration::from_millis(20));
    let progress = worker.progress();
    let run = tokio::spawn(worker.run(|_| async { Outcome::Done }));
    while progress.snapshot().done < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    std::fs::write(&path, "bank = \"not a quota\"\n").unwrap(); // rejected: 4/s stays
    tokio::time::sleep(Duration::from_millis(100)).await;
    std::fs::write(&path, "bank = \"100/s burst 1\"\n").unwrap();
    let summary = run.await.unwrap().unwrap();
    let runs = jobs.runs("bank").await.unwrap();
    // Seen once in a full CI run at load (stop 31): fewer than two runs listed after the worker
    // ended; the cause is not found yet, so the failure says what there was.
    assert!(runs.len() >= 2, "runs {runs:?} after {summary:?}, {:?}", progress.snapshot());
    let gaps: Vec<i64> = runs.windows(2).map(|w| w[1].started_ns - w[0].started_ns).collect();
    assert!(gaps[0] >= 250_000_000, "4/s at first: {gaps:?}");
    let fast = gaps.iter().filter(|&&g| g < 100_000_000).count();
    assert!(fast >= 10, "100/s after the change: {gaps:?}");
    assert_eq!(jobs.rules().await.unwrap().pace("bank").1[0].to_string(), "100/s burst 1");
}
