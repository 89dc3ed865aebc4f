//! The numbers in the README's "Many servers" section, measured against a local redis-server
//! started for the run (it must be installed: `scripts/ensure-redis.sh`).
//!
//! `cargo run --release -p leakgate-redis --example redis_numbers [seconds per measurement]`
//!
//! 1. decisions/s from one process, 64 tasks over one connection: leakgate's script (a plain
//!    limiter, and a rules limiter whose rule has the same one quota) and the floating-seconds
//!    script, interleaved, median of 3 rounds each;
//! 2. a hot key with and without leases, 64 tasks: decisions/s and round trips;
//! 3. latency of one check at a time: p50, p99, p99.9;
//! 4. a fleet of 1, 4 and 16 processes on one hot key with leases: round trips saved and the
//!    admission shortfall against `burst + rate * window`.

#[path = "../tests/support/mod.rs"]
mod support;

use leakgate::{Quota, Rules};
use leakgate_redis::{AsyncRedisLimiter, AsyncRedisRuleLimiter, LeaseConfig, RedisLimiter};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::float::FloatGcra;
use support::numbers::{drive, median, rounded, runtime, seconds_arg};
use support::RedisServer;

const TASKS: usize = 64;
const FLEET_QUOTA: &str = "10000/s burst 100";

fn main() {
    if let Ok(url) = std::env::var("LEAKGATE_NUMBERS_CHILD") {
        return fleet_child(&url);
    }
    let secs = seconds_arg(1.0);
    let run_for = Duration::from_secs_f64(secs);
    let server = RedisServer::start();
    let rt = runtime();
    println!("redis-server at {}; {secs} s per measurement", server.url());

    // 1. Throughput, both scripts, interleaved.
    let (mut ours, mut rules, mut float) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ours_us, mut rules_us, mut float_us) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..3 {
        ours.push(rt.block_on(leakgate_throughput(&server, run_for, round)));
        ours_us.push(server_usec_per_call(&server));
        rules.push(rt.block_on(rules_throughput(&server, run_for, round)));
        rules_us.push(server_usec_per_call(&server));
        float.push(rt.block_on(float_throughput(&server, run_for, round)));
        float_us.push(server_usec_per_call(&server));
    }
    println!("\n64 tasks, one connection, distinct keys (decisions/s, median of 3):");
    println!("  leakgate script      {:>10.0}   (rounds {:?})", median(&mut ours), rounded(&ours));
    println!(
        "  same, rules limiter  {:>10.0}   (rounds {:?})",
        median(&mut rules),
        rounded(&rules)
    );
    println!(
        "  float-seconds script {:>10.0}   (rounds {:?})",
        median(&mut float),
        rounded(&float)
    );
    println!(
        "  redis-server time per EVALSHA (median, us): leakgate {:.2}, rules {:.2}, float {:.2}",
        median(&mut ours_us),
        median(&mut rules_us),
        median(&mut float_us)
    );
    if std::env::var("LEAKGATE_NUMBERS_ONLY_THROUGHPUT").is_ok() {
        return;
    }
    if std::env::var("LEAKGATE_NUMBERS_ONLY_FLEET").is_ok() {
        return fleet(&server, 1, run_for.max(Duration::from_secs(2)));
    }

    // 2. A hot key, 64 tasks, with and without leases.
    println!("\n64 tasks on one hot key, quota 10000/s burst 100:");
    for lease in [0, 256] {
        let (rate, s) = rt.block_on(hot_key(&server, run_for, lease));
        println!(
            "  leases {:>3}: {:>10.0} decisions/s, {:>8} round trips for {:>9} decisions ({:.1} per trip)",
            lease,
            rate,
            s.round_trips,
            s.decisions(),
            s.decisions() as f64 / s.round_trips.max(1) as f64
        );
    }

    // 3. Latency, one check at a time.
    let lim = RedisLimiter::builder(&server.url())
        .quota("1000000000/s".parse().unwrap())
        .deadline(Duration::from_millis(100))
        .connect()
        .unwrap();
    let mut lat: Vec<u64> = Vec::new();
    let start = Instant::now();
    while start.elapsed() < run_for {
        let t = Instant::now();
        let _ = lim.check("latency");
        lat.push(t.elapsed().as_nanos() as u64);
    }
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)] as f64 / 1000.0;
    println!(
        "\nlatency of a blocking check, {} samples: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us",
        lat.len(),
        pct(0.5),
        pct(0.99),
        pct(0.999)
    );
    println!("  {:?}", lim.stats());
    drop(lim);

    // 4. A fleet on one hot key, with leases.
    println!("\nfleet on one hot key, {FLEET_QUOTA}, 2 threads per process, leases of up to 32:");
    for processes in [1, 4, 16] {
        fleet(&server, processes, run_for.max(Duration::from_secs(2)));
    }
}

/// Redis's own time per `EVALSHA` since the last call (its `commandstats`), then reset.
fn server_usec_per_call(server: &RedisServer) -> f64 {
    let mut con = server.connection();
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut con).unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut con).unwrap();
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha"))
        .and_then(|l| l.split("usec_per_call=").nth(1))
        .and_then(|v| v.split(',').next())
        .map_or(0.0, |v| v.parse().unwrap())
}

/// Runs `TASKS` tasks, task `t` calling `check(t)`, until `run_for` has passed; returns
/// decisions/s.
async fn rate<F, Fut>(run_for: Duration, check: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let (total, secs) = drive(TASKS, run_for, move |i| check(i % TASKS)).await;
    total as f64 / secs
}

async fn leakgate_throughput(server: &RedisServer, run_for: Duration, round: usize) -> f64 {
    let lim = AsyncRedisLimiter::builder(&server.url())
        .quota("1000000000/s".parse().unwrap())
        .prefix(format!("tp{round}:"))
        .deadline(Duration::from_millis(100))
        .connect_async()
        .await
        .unwrap();
    let keys: Arc<Vec<String>> = Arc::new((0..TASKS).map(|i| format!("k{i}")).collect());
    rate(run_for, move |i| {
        let (lim, keys) = (lim.clone(), keys.clone());
        async move {
            let _ = lim.check(&keys[i]).await;
        }
    })
    .await
}

async fn rules_throughput(server: &RedisServer, run_for: Duration, round: usize) -> f64 {
    let mut one_rule = Rules::new();
    one_rule.insert("k", ["1000000000/s".parse::<Quota>().unwrap()]);
    let lim = AsyncRedisRuleLimiter::builder(&server.url())
        .prefix(format!("rules{round}:"))
        .deadline(Duration::from_millis(100))
        .connect_rules_async(one_rule)
        .await
        .unwrap();
    let keys: Arc<Vec<String>> = Arc::new((0..TASKS).map(|i| format!("k/{i}")).collect());
    rate(run_for, move |i| {
        let (lim, keys) = (lim.clone(), keys.clone());
        async move {
            let _ = lim.check(&keys[i]).await;
        }
    })
    .await
}

async fn float_throughput(server: &RedisServer, run_for: Duration, round: usize) -> f64 {
    let client = redis::Client::open(server.url()).unwrap();
    let con = client.get_multiplexed_async_connection().await.unwrap();
    let float = Arc::new(FloatGcra::new(1_000_000_000, Duration::from_secs(1), 1_000_000_000));
    let keys: Arc<Vec<String>> =
        Arc::new((0..TASKS).map(|i| format!("float{round}:k{i}")).collect());
    rate(run_for, move |i| {
        let (mut con, float, keys) = (con.clone(), float.clone(), keys.clone());
        async move {
            let _ = float.check_async(&mut con, &keys[i]).await;
        }
    })
    .await
}

async fn hot_key(
    server: &RedisServer,
    run_for: Duration,
    lease: u64,
) -> (f64, leakgate_redis::Stats) {
    let mut b = AsyncRedisLimiter::builder(&server.url())
        .quota("10000/s burst 100".parse::<Quota>().unwrap())
        .prefix(format!("hot{lease}:"))
        .deadline(Duration::from_millis(100));
    if lease > 0 {
        b = b.leases(LeaseConfig::new(lease));
    }
    let lim = b.connect_async().await.unwrap();
    let probe = lim.clone();
    let rate = rate(run_for, move |_| {
        let lim = lim.clone();
        async move {
            let _ = lim.check("hot").await;
        }
    })
    .await;
    (rate, probe.stats())
}

/// One fleet process: 2 threads hammer the hot key for the given ms; prints its counts.
fn fleet_child(url: &str) {
    let ms: u64 = std::env::var("LEAKGATE_NUMBERS_MS").unwrap().parse().unwrap();
    let lim = RedisLimiter::builder(url)
        .quota(FLEET_QUOTA.parse().unwrap())
        .prefix("fleet:")
        .deadline(Duration::from_millis(100))
        .leases(LeaseConfig::new(32))
        .connect()
        .unwrap();
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let start = support::redis_time_us(&mut con);
    let admitted: u64 = std::thread::scope(|s| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let t = Instant::now();
                    let mut ok = 0u64;
                    while t.elapsed() < Duration::from_millis(ms) {
                        ok += u64::from(lim.check("hot").is_ok());
                    }
                    ok
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let end = support::redis_time_us(&mut con);
    let s = lim.stats();
    println!("CHILD {admitted} {start} {end} {} {}", s.decisions(), s.round_trips);
    if std::env::var("LEAKGATE_NUMBERS_VERBOSE").is_ok() {
        eprintln!("  child: {s:?}");
    }
}

fn fleet(server: &RedisServer, processes: usize, run_for: Duration) {
    let _: () = redis::cmd("FLUSHALL").query(&mut server.connection()).unwrap();
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .env("LEAKGATE_NUMBERS_CHILD", server.url())
                .env("LEAKGATE_NUMBERS_MS", run_for.as_millis().to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let rows: Vec<Vec<u64>> = children
        .into_iter()
        .map(|c| {
            let out = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap();
            let line = out.lines().find(|l| l.starts_with("CHILD ")).expect("a child's report");
            line[6..].split(' ').map(|x| x.parse().unwrap()).collect()
        })
        .collect();
    let sum = |i: usize| rows.iter().map(|r| r[i]).sum::<u64>();
    let (admitted, decisions, trips) = (sum(0), sum(3), sum(4));
    // Every admission lies between the first start and the last end, on Redis's clock.
    let window =
        rows.iter().map(|r| r[2]).max().unwrap() - rows.iter().map(|r| r[1]).min().unwrap();
    // Demand was continuous only while every process ran.
    let all_ran =
        rows.iter().map(|r| r[2]).min().unwrap() - rows.iter().map(|r| r[1]).max().unwrap();
    let bound = 100.0 + 10_000.0 * window as f64 / 1e6;
    let floor = 10_000.0 * all_ran as f64 / 1e6;
    println!(
        "  {processes:>2} processes: {decisions:>9} decisions, {trips:>7} round trips ({:.1}% saved), \
         admitted {admitted} of bound {bound:.0} (shortfall {:.2}% of the bound, {:.2}% of rate x common window)",
        100.0 * (1.0 - trips as f64 / decisions as f64),
        100.0 * (1.0 - admitted as f64 / bound),
        100.0 * (1.0 - admitted as f64 / floor).max(0.0),
    );
    assert!(admitted as f64 <= bound + 1.0, "the fleet exceeded the bound");
}
