//! Permits per second per connection for `AsyncRedisConcurrency`, against a local redis-server
//! started for the run (`scripts/ensure-redis.sh` installs one).
//!
//! `cargo run --release -p leakgate-redis --example permits_numbers [seconds per measurement]`
//!
//! One permit is an acquire and a release: two round trips. Measured over one connection with
//! 1 task (one permit at a time: latency-bound) and with 64 tasks (the connection multiplexed),
//! each on one hot key (max 32, so that many tasks contend) and on distinct keys, interleaved,
//! 3 rounds each; the medians are printed.

#[path = "../tests/support/mod.rs"]
mod support;

use leakgate_redis::{AsyncRedisConcurrency, Builder};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::numbers::{median, runtime, seconds_arg};
use support::RedisServer;

/// Permits acquired and released per second by `tasks` tasks, and the share refused.
async fn run(
    p: &Arc<AsyncRedisConcurrency>,
    tasks: usize,
    hot: bool,
    run_for: Duration,
) -> (f64, f64) {
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let p = Arc::clone(p);
            tokio::spawn(async move {
                let key = if hot { "hot".to_owned() } else { format!("key/{i}") };
                let (mut got, mut busy) = (0u64, 0u64);
                while started.elapsed() < run_for {
                    match p.try_acquire(key.as_bytes(), 32, Duration::from_secs(10)).await {
                        Ok(Ok(permit)) => {
                            permit.release().await.expect("release");
                            got += 1;
                        }
                        Ok(Err(_)) => busy += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
                (got, busy)
            })
        })
        .collect();
    let (mut got, mut busy) = (0, 0);
    for h in handles {
        let (g, b) = h.await.unwrap();
        got += g;
        busy += b;
    }
    let secs = started.elapsed().as_secs_f64();
    (got as f64 / secs, busy as f64 / (got + busy).max(1) as f64)
}

fn main() {
    let secs = seconds_arg(1.0);
    let run_for = Duration::from_secs_f64(secs);
    let server = RedisServer::start();
    let rt = runtime();
    rt.block_on(async {
        let p = Builder::new(server.url())
            .deadline(Duration::from_secs(5))
            .max_in_flight(1024)
            .connect_concurrency_async()
            .await
            .unwrap();
        let p = Arc::new(p);
        let cases = [(1, true), (1, false), (64, true), (64, false)];
        let mut rates = vec![Vec::new(); cases.len()];
        let mut refused = vec![Vec::new(); cases.len()];
        for _round in 0..3 {
            for (i, &(tasks, hot)) in cases.iter().enumerate() {
                let (r, b) = run(&p, tasks, hot, run_for).await;
                rates[i].push(r);
                refused[i].push(b);
            }
        }
        println!("redis-server at {}; {secs} s per measurement, median of 3", server.url());
        for (i, &(tasks, hot)) in cases.iter().enumerate() {
            let key = if hot { "one hot key (max 32)" } else { "a key per task" };
            println!(
                "{tasks:>2} task(s), {key:<20}: {:>8.0} permits/s (acquire + release), {:.0}% refused",
                median(&mut rates[i].clone()),
                100.0 * median(&mut refused[i].clone())
            );
        }
        println!("round trips: {}", p.stats().round_trips);
    });
}
