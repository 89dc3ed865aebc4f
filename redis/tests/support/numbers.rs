//! What the `*_numbers` examples share to take and print their measurements: the seconds per
//! measurement and the runtime, tasks that call in a loop until the time is up, a limiter that
//! admits everything, driven and measured (decisions, seconds, the Redis CPU time the nodes
//! used), and medians of rounds.

use leakgate_redis::{AsyncRedisLimiter, Builder, Stats};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The seconds per measurement: the example's first argument, `default` without one.
pub fn seconds_arg(default: f64) -> f64 {
    std::env::args().nth(1).map_or(default, |s| s.parse().expect("seconds"))
}

/// The runtime every example measures on: tokio with 2 worker threads.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Runs `tasks` tasks until `run_for` has passed, task `t` awaiting `step(i)` for `i = t`,
/// `t + tasks`, `t + 2 * tasks`, ... (so `i % tasks` is the task and `i % n` walks `n` keys):
/// (steps, seconds).
pub async fn drive<F, Fut>(tasks: usize, run_for: Duration, step: F) -> (u64, f64)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let step = Arc::new(step);
    let start = Instant::now();
    let spawned: Vec<_> = (0..tasks)
        .map(|t| {
            let step = step.clone();
            tokio::spawn(async move {
                let (mut n, mut i) = (0u64, t);
                while start.elapsed() < run_for {
                    step(i).await;
                    n += 1;
                    i += tasks;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in spawned {
        total += t.await.unwrap();
    }
    (total, start.elapsed().as_secs_f64())
}

/// A limiter from `builder` that admits every call (10^9 a second) under `prefix`, with a
/// deadline of 200 ms, driven by `drive` on `rt` (which returns its decisions and the seconds
/// they took): those two, the Redis CPU µs per decision summed over the nodes on `ports`, and
/// the limiter's stats. Every decision is Redis's (none by the failure policy).
pub fn measure<F: Future<Output = (u64, f64)>>(
    rt: &tokio::runtime::Runtime,
    builder: Builder,
    prefix: String,
    ports: &[u16],
    drive: impl FnOnce(AsyncRedisLimiter) -> F,
) -> (u64, f64, f64, Stats) {
    let lim = rt.block_on(
        builder
            .quota("1000000000/s".parse().unwrap())
            .prefix(prefix)
            .deadline(Duration::from_millis(200))
            .connect_async(),
    );
    let lim = lim.unwrap();
    let cpu_before = cpu_secs(ports);
    let (count, secs) = rt.block_on(drive(lim.clone()));
    let cpu = cpu_secs(ports) - cpu_before;
    let stats = lim.stats();
    assert_eq!(
        stats.policy_admitted + stats.policy_denied,
        0,
        "every decision by Redis: {stats:?}"
    );
    (count, secs, cpu * 1e6 / count.max(1) as f64, stats)
}

/// The CPU time the nodes on `ports` have used so far, summed (`INFO cpu`: user + system, main
/// thread and children), in seconds.
pub fn cpu_secs(ports: &[u16]) -> f64 {
    ports.iter().map(|&port| node_cpu_secs(port)).sum()
}

fn node_cpu_secs(port: u16) -> f64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("cpu").query(&mut con).unwrap();
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

/// The median of `v` (the upper middle one for an even count); sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The rounds' values as whole numbers, for printing.
pub fn rounded(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| *x as u64).collect()
}
