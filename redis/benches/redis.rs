//! Decisions per second against a local redis-server started for the run: leakgate's script and
//! a floating-seconds GCRA script in the same groups, 64 tasks over one connection; a hot key with
//! and without leases; one check at a time. `redis-server` must be installed
//! (`scripts/ensure-redis.sh`). Each benchmark iteration is one decision.

#[path = "../tests/support/mod.rs"]
mod support;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use leakgate::Quota;
use leakgate_redis::{AsyncRedisLimiter, LeaseConfig, RedisLimiter};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::float::FloatGcra;
use support::RedisServer;

const TASKS: u64 = 64;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Runs `iters` calls of `check(task)` spread over `TASKS` tasks; returns the elapsed time.
fn spread<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, check: F) -> Duration
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let check = Arc::new(check);
    rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let check = check.clone();
                let n = iters / TASKS + u64::from(t < iters % TASKS);
                tokio::spawn(async move {
                    for _ in 0..n {
                        check(t).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        start.elapsed()
    })
}

fn many_tasks(c: &mut Criterion) {
    let server = RedisServer::start();
    let rt = runtime();
    let mut group = c.benchmark_group("redis_64_tasks_one_connection");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    let lim = rt
        .block_on(
            AsyncRedisLimiter::builder(&server.url())
                .quota("1000000000/s".parse::<Quota>().unwrap())
                .deadline(Duration::from_millis(200))
                .connect_async(),
        )
        .unwrap();
    let keys: Arc<Vec<String>> = Arc::new((0..TASKS).map(|i| format!("k{i}")).collect());
    let con = rt
        .block_on(redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection())
        .unwrap();
    let float = Arc::new(FloatGcra::new(1_000_000_000, Duration::from_secs(1), 1_000_000_000));
    group.bench_function(BenchmarkId::new("leakgate_script", "distinct_keys"), |b| {
        b.iter_custom(|iters| {
            let (lim, keys) = (lim.clone(), keys.clone());
            spread(&rt, iters, move |t| {
                let (lim, keys) = (lim.clone(), keys.clone());
                async move {
                    let _ = lim.check(&keys[t as usize]).await;
                }
            })
        })
    });
    group.bench_function(BenchmarkId::new("float_seconds_script", "distinct_keys"), |b| {
        b.iter_custom(|iters| {
            let (con, float, keys) = (con.clone(), float.clone(), keys.clone());
            spread(&rt, iters, move |t| {
                let (mut con, float, keys) = (con.clone(), float.clone(), keys.clone());
                async move {
                    let _ = float.check_async(&mut con, &keys[t as usize]).await;
                }
            })
        })
    });
    for lease in [0, 256] {
        let mut builder = AsyncRedisLimiter::builder(&server.url())
            .quota("10000/s burst 100".parse::<Quota>().unwrap())
            .prefix(format!("hot{lease}:"))
            .deadline(Duration::from_millis(200));
        if lease > 0 {
            builder = builder.leases(LeaseConfig::new(lease));
        }
        let hot = rt.block_on(builder.connect_async()).unwrap();
        group.bench_function(BenchmarkId::new("hot_key_leases", lease), |b| {
            b.iter_custom(|iters| {
                let hot = hot.clone();
                spread(&rt, iters, move |_| {
                    let hot = hot.clone();
                    async move {
                        let _ = hot.check("hot").await;
                    }
                })
            })
        });
        let s = hot.stats();
        println!(
            "hot key, leases {lease}: {} decisions in {} round trips",
            s.decisions(),
            s.round_trips
        );
    }
    group.finish();
}

fn one_at_a_time(c: &mut Criterion) {
    let server = RedisServer::start();
    let lim = RedisLimiter::builder(&server.url())
        .quota("1000000000/s".parse::<Quota>().unwrap())
        .deadline(Duration::from_millis(200))
        .connect()
        .unwrap();
    let mut group = c.benchmark_group("redis_one_check_at_a_time");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    group.bench_function("blocking_check", |b| b.iter(|| lim.check("latency").is_ok()));
    group.finish();
}

criterion_group!(benches, many_tasks, one_at_a_time);
criterion_main!(benches);
