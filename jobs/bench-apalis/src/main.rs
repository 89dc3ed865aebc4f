//! apalis 1.0 with its SQLite backend, measured as leakgate-jobs's bench measures itself:
//!
//! * unpaced throughput: N jobs in a SQLite file, one worker (jobs/s until all are done);
//! * a fleet of 3 workers on one queue, each with apalis's `rate_limit(20, 1 s)` layer (tower's
//!   `RateLimitLayer`): the rate the fleet really starts jobs at, against the 20/s configured.
//!
//! Run with `bash jobs/bench-apalis/run.sh`, which runs leakgate-jobs's own numbers for the same
//! questions first, on the same machine in the same run. This crate is not a workspace member:
//! apalis and sqlx stay out of CI's build (and sqlx's SQLite cannot link beside rusqlite's).

use apalis::layers::WorkerBuilderExt;
use apalis::prelude::*;
use apalis_sqlite::{SqlitePool, SqliteStorage};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What the handlers share: how many ran, when each started, and a signal when all did.
#[derive(Clone)]
struct Seen {
    count: Arc<AtomicUsize>,
    starts: Arc<Mutex<Vec<Instant>>>,
    want: usize,
    all: Arc<Notify>,
}

async fn job(_n: u64, seen: Data<Seen>) -> Result<(), BoxDynError> {
    seen.starts.lock().unwrap().push(Instant::now());
    if seen.count.fetch_add(1, Ordering::SeqCst) + 1 == seen.want {
        seen.all.notify_waiters();
    }
    Ok(())
}

async fn queue(path: &str, n: u64) -> SqlitePool {
    let pool = SqlitePool::connect(&format!("sqlite://{path}?mode=rwc")).await.unwrap();
    SqliteStorage::setup(&pool).await.unwrap();
    let mut storage = SqliteStorage::new(&pool);
    for i in 0..n {
        storage.push(i).await.unwrap();
    }
    pool
}

fn seen(want: usize) -> Seen {
    Seen { count: Arc::default(), starts: Arc::default(), want, all: Arc::new(Notify::new()) }
}

/// Runs `workers` workers (each with `limit` per second, if given) until `n` jobs ran.
async fn run(pool: &SqlitePool, workers: usize, limit: Option<u64>, n: usize) -> (Duration, Vec<Instant>) {
    let seen = seen(n);
    let all = seen.all.clone();
    let done = all.notified();
    tokio::pin!(done);
    done.as_mut().enable();
    let t = Instant::now();
    let mut handles = Vec::new();
    for w in 0..workers {
        let storage = SqliteStorage::new(pool);
        let builder = WorkerBuilder::new(format!("worker-{w}")).backend(storage).data(seen.clone());
        let stop = seen.all.clone();
        match limit {
            Some(per_second) => {
                let worker = builder.rate_limit(per_second, Duration::from_secs(1)).build(job);
                handles.push(tokio::spawn(async move { worker.run_until(async move { stop.notified().await; Ok::<(), std::io::Error>(()) }).await }));
            }
            None => {
                let worker = builder.concurrency(32).build(job);
                handles.push(tokio::spawn(async move { worker.run_until(async move { stop.notified().await; Ok::<(), std::io::Error>(()) }).await }));
            }
        }
    }
    done.await;
    let elapsed = t.elapsed();
    for h in handles {
        h.abort();
    }
    let starts = seen.starts.lock().unwrap().clone();
    (elapsed, starts)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: usize = if quick { 2_000 } else { 10_000 };
    let dir = tempfile::tempdir().unwrap();
    println!("apalis 1.0 + apalis-sqlite 1.0 (sqlx SQLite), same machine");

    let path = dir.path().join("throughput.db");
    let pool = queue(path.to_str().unwrap(), n as u64).await;
    let (elapsed, _) = run(&pool, 1, None, n).await;
    println!("  unpaced, 1 worker, concurrency 32: {:.0} jobs/s ({n} jobs)", n as f64 / elapsed.as_secs_f64());

    let fleet_jobs = if quick { 120 } else { 240 };
    let path = dir.path().join("fleet.db");
    let pool = queue(path.to_str().unwrap(), fleet_jobs as u64).await;
    let (_, mut starts) = run(&pool, 3, Some(20), fleet_jobs).await;
    starts.sort();
    let span = (*starts.last().unwrap() - starts[0]).as_secs_f64();
    let rate = (starts.len() - 1) as f64 / span;
    let mut most = 0;
    for (i, a) in starts.iter().enumerate() {
        most = most.max(starts[i..].iter().take_while(|b| **b - *a < Duration::from_secs(1)).count());
    }
    println!(
        "  fleet of 3 workers, rate_limit(20, 1 s) each: {rate:.1} jobs/s over {span:.2} s \
         ({:.1}x the 20/s configured); most starts in any 1 s window: {most}",
        rate / 20.0
    );
}
